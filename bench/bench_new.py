#!/usr/bin/env python3
"""bench_new: what pullprof's own operator new and delete add to a C++
program's new+delete pair, beside the allocators it sits in front of.

pullprof defines C++'s operator new and delete (src/shim/malloc.c):
behind libstdc++ or an allocator that defines its own (jemalloc,
tcmalloc) they take the memory from malloc (this library's wrapper) and
give it back with free, so that C++'s allocations are sampled at all. The load is bench/mallocwork's "new" mode:
one thread, 4096 slots, PAIRS operator delete + operator new pairs of
16..511 bytes (the operators found with dlsym: the first definitions in the
process), under
  - glibc (libstdc++'s operators, nothing preloaded),
  - pullprof preloaded, PULLPROF_HEAP_RATE=0 and 524288,
  - jemalloc preloaded alone (its own operators),
  - pullprof then jemalloc preloaded, RATE=0 and 524288,
  - tcmalloc preloaded alone, and pullprof then tcmalloc, RATE=524288,
each RUNS times, interleaved round-robin. The table gives the median of the
runs' thread CPU ns per pair (the wall time counts waits for a core on a
shared machine), the range, and the overhead against the configuration's
own baseline (glibc for pullprof; the allocator alone for pullprof in
front of it). Then instructions per pair under callgrind (the timed loop
only), which no other load on the machine moves.

Usage: bench/bench_new.py [--runs N] [--pairs N] [--callgrind-pairs N]
(--runs 0: the instruction counts only; --callgrind-pairs 0: the times
only)
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
WORK = os.path.join(TOP, "bench", "mallocwork")
LIB = os.path.join(TOP, ".libs", "libpullprof.so")
JE = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
TC = "/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4"


def configs():
    out = [("glibc (libstdc++'s new)", {}, None)]
    pp = {"LD_PRELOAD": LIB, "PULLPROF_LISTEN": "127.0.0.1:0"}
    for rate in ("0", "524288"):
        out.append((f"pullprof rate {rate}",
                    dict(pp, PULLPROF_HEAP_RATE=rate), "glibc (libstdc++'s new)"))
    for name, lib in (("jemalloc", JE), ("tcmalloc", TC)):
        if not os.path.exists(lib):
            continue
        out.append((f"{name} alone", {"LD_PRELOAD": lib}, None))
        for rate in ("0", "524288"):
            out.append((f"pullprof + {name}, rate {rate}",
                        dict(pp, LD_PRELOAD=f"{LIB} {lib}",
                             PULLPROF_HEAP_RATE=rate), f"{name} alone"))
    return out


def run(env, pairs, prefix=()):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith("PULLPROF_") and k != "LD_PRELOAD"}
    e.update(env)
    p = subprocess.run([*prefix, WORK, "1", str(pairs), "0", "new"], env=e,
                       capture_output=True, text=True, timeout=600)
    m = re.search(r"cpu_ns_per_pair ([\d.]+)", p.stdout)
    if not m:
        sys.exit(f"mallocwork failed: {p.stdout} {p.stderr[-500:]}")
    return float(m.group(1)), p


def callgrind(env, pairs):
    out = "/tmp/bench_new.callgrind"
    pre = ["valgrind", "--tool=callgrind", "--toggle-collect=run_new",
           f"--callgrind-out-file={out}"]
    # valgrind's own preload must come first: pass ours through it.
    _, p = run(env, pairs, pre)
    m = re.search(r"Collected : (\d+)", p.stderr)
    try:
        os.unlink(out)
    except OSError:
        pass
    return int(m.group(1)) / pairs if m else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--pairs", type=int, default=4_000_000)
    ap.add_argument("--callgrind-pairs", type=int, default=200_000)
    a = ap.parse_args()
    if not os.path.exists(WORK):
        subprocess.run(["make", "-C", TOP, "bench/mallocwork"], check=True)
    cs = configs()
    if a.runs:
        timed(cs, a)
    if a.callgrind_pairs:
        counted(cs, a)


def timed(cs, a):
    got = {name: [] for name, _, _ in cs}
    for r in range(a.runs):
        rot = cs[r % len(cs):] + cs[:r % len(cs)]
        for name, env, _ in rot:
            got[name].append(run(env, a.pairs)[0])
    med = {k: statistics.median(v) for k, v in got.items()}
    print(f"operator delete + new pairs of 16..511 bytes, 1 thread, "
          f"{a.pairs} pairs, median of {a.runs} runs (thread CPU ns/pair)")
    print(f"| {'configuration':34} | {'ns/pair':>8} | {'range':>13} | "
          f"{'overhead':>9} |")
    print(f"|{'-' * 36}|{'-' * 9}:|{'-' * 14}:|{'-' * 10}:|")
    for name, _, base in cs:
        v = got[name]
        over = f"{med[name] - med[base]:+.2f}" if base else ""
        print(f"| {name:34} | {med[name]:8.2f} | "
              f"{min(v):6.2f}-{max(v):6.2f} | {over:>9} |")


def counted(cs, a):
    print(f"\ninstructions per pair (callgrind, {a.callgrind_pairs} "
          "pairs, the timed loop only)")
    print(f"| {'configuration':34} | {'Ir/pair':>8} | {'over':>7} |")
    print(f"|{'-' * 36}|{'-' * 9}:|{'-' * 8}:|")
    ir = {}
    for name, env, base in cs:
        ir[name] = callgrind(env, a.callgrind_pairs)
        over = f"{ir[name] - ir[base]:+.1f}" if base in ir else ""
        print(f"| {name:34} | {ir[name]:8.1f} | {over:>7} |")

if __name__ == "__main__":
    main()

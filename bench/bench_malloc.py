#!/usr/bin/env python3
"""bench_malloc: what heap profiling adds to malloc+free, pullprof against
jemalloc's and tcmalloc's samplers and heaptrack, in one run.

The same load (bench/mallocwork: per thread, 4096 slots and PAIRS
malloc+free pairs of 16..511 bytes) runs, for 1 and 2 threads, under
  - glibc alone (nothing preloaded),
  - pullprof preloaded (agent started with PULLPROF_LISTEN=127.0.0.1:0)
    with PULLPROF_HEAP_RATE=0 (sampling off), 524288 and 65536,
  - jemalloc preloaded, MALLOC_CONF=prof:false and
    prof:true,lg_prof_sample:19 (a sample every 512 KiB on average),
  - gperftools' tcmalloc preloaded, TCMALLOC_SAMPLE_PARAMETER=0 and 524288,
  - heaptrack (records every allocation: fewer pairs, HT_PAIRS),
and the pool API (pullprof_heap_alloc/free/release, for a host's own
allocators) on the same draws, mallocwork's pool and release modes: the
pair is a pullprof_heap_free (or a pullprof_heap_release of the slot's 512
bytes) and a pullprof_heap_alloc at the slot's place in an arena, under
  - no pullprof (functions that do nothing, called the same way: the
    baseline; what the pool itself does is left out),
  - pullprof preloaded, RATE=0, 524288 and 65536 (release: 0 and 524288),
each RUNS times, the configurations interleaved round-robin (the order
rotated every round) so drift in the machine hits all alike. A run's
figures are mallocwork's ns per pair: each thread's wall time for its pairs
over the pairs, averaged over the threads, and the same of each thread's CPU
time (on a machine shared with other work a thread waits for a core, which
its wall time counts and its CPU time does not). The tables give the median
and the range (min-max) of the runs, and the median's overhead against the
configuration's own baseline: glibc for pullprof and heaptrack (glibc at
heaptrack's pair count for heaptrack), prof:false for jemalloc, sample
parameter 0 for tcmalloc.

--against LIB adds the pullprof rows again with another build's
libpullprof.so (its agent object beside it), interleaved with the others:
a change measured beside the figures it changes, in the same session.
--no-peers leaves out jemalloc, tcmalloc and heaptrack; --no-pool leaves
out the pool API's rows; --threads 1 runs
one thread only; --any-load keeps every run whatever other processes do
(no wait for a quiet machine, no run done again: for a machine that is
never quiet, where the CPU-time figures are the ones to read).

Checks that the samplers really ran:
  - pullprof: every run holds the process after the work and reads
    heap.sampled from /status; the medians are printed with the number
    expected (allocated bytes / rate);
  - jemalloc: no run may print "Invalid conf pair", and one extra run with
    stats_print:true must show config.prof, opt.prof true and
    opt.lg_prof_sample 19;
  - heaptrack: its own count of allocations must cover the pairs.

Then, unless --callgrind-pairs 0, instructions per pair under callgrind
(only the timed loop counted: --toggle-collect=run_pairs), single thread:
glibc against pullprof at rate 0, 524288 and 65536, with the first-level
data cache read misses of callgrind's cache simulation: what the free
filter's lookups cost the host's own data in its cache.

Usage: bench/bench_malloc.py [--runs N] [--pairs N] [--heaptrack-pairs N]
                             [--callgrind-pairs N] [--against LIB]
                             [--no-peers] [--threads 1,2] [--any-load]
"""
import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
WORK = os.path.join(HERE, "mallocwork")
LIBDIR = "/usr/lib/x86_64-linux-gnu"
PULLPROF = os.path.join(TOP, ".libs", "libpullprof.so")
JEMALLOC = os.path.join(LIBDIR, "libjemalloc.so.2")
TCMALLOC = os.path.join(LIBDIR, "libtcmalloc.so.4")
HEAPTRACK = shutil.which("heaptrack")
JE_PROF = "prof:true,lg_prof_sample:19"
MEAN_SIZE = (16 + 511) / 2  # mallocwork's sizes: uniform over 16..511
SLOTS = 4096


class Config:
    def __init__(self, name, base=None, env=None, kind="plain", pairs=None,
                 lib=PULLPROF, mode="malloc"):
        self.name, self.base, self.kind = name, base, kind
        self.mode = mode    # mallocwork's: malloc, pool or release
        self.env = env or {}
        self.pairs = pairs  # None: the common PAIRS
        self.lib = lib      # pullprof: the libpullprof.so preloaded
        self.runs = {}      # threads -> [ns per pair]
        self.cpu = {}       # threads -> [CPU ns per pair]
        self.sampled = {}   # threads -> [pullprof heap.sampled]
        self.unwind_ns = {}  # threads -> [pullprof heap.unwind.mean_ns]
        self.false_hits = {}  # threads -> [heap.filter_false_hits]


def parse(out):
    """(wall ns per pair, CPU ns per pair) from mallocwork's line."""
    for line in out.splitlines():
        w = line.split()
        if w and w[0] == "ns_per_pair":
            return float(w[1]), float(w[w.index("cpu_ns_per_pair") + 1])
    raise RuntimeError(f"no result in mallocwork's output:\n{out}")


def run_plain(c, threads, pairs, cwd):
    e = dict(os.environ, **c.env)
    mode = [] if c.mode == "malloc" else ["0", c.mode]
    p = subprocess.run([WORK, str(threads), str(pairs)] + mode, env=e,
                       cwd=cwd,
                       capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    if p.returncode:
        raise RuntimeError(f"{c.name}: exit {p.returncode}: {p.stderr}")
    if "Invalid conf" in p.stderr:
        raise RuntimeError(f"{c.name}: jemalloc refused its options: "
                           f"{p.stderr.strip()}")
    return parse(p.stdout)


def run_pullprof(c, threads, pairs, cwd):
    """The work, then (process held) heap.sampled from the agent."""
    e = dict(os.environ, PULLPROF_LISTEN="127.0.0.1:0", LD_PRELOAD=c.lib,
             **c.env)
    e.pop("PULLPROF_QUIET", None)
    mode = [] if c.mode == "malloc" else [c.mode]
    p = subprocess.Popen([WORK, str(threads), str(pairs), "1"] + mode, env=e,
                         cwd=cwd, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        # The agent's constructor logs before main runs:
        # "pullprof[PID]: serving http://127.0.0.1:PORT/debug/pprof/"
        err = p.stderr.readline()
        m = re.search(r"serving (http://\S+/)", err)
        if not m:
            raise RuntimeError(f"{c.name}: pullprof did not start: {err}")
        ns = parse(p.stdout.readline())
        with urllib.request.urlopen(m.group(1) + "status", timeout=30) as r:
            heap = json.load(r)["heap"]
    finally:
        p.stdin.close()
        rest = p.stderr.read()
        p.wait()
    if p.returncode:
        raise RuntimeError(f"{c.name}: exit {p.returncode}: {rest}")
    c.sampled.setdefault(threads, []).append(heap["sampled"])
    c.unwind_ns.setdefault(threads, []).append(heap["unwind"]["mean_ns"])
    c.false_hits.setdefault(threads, []).append(
        heap.get("filter_false_hits", 0))
    return ns


def run_heaptrack(c, threads, pairs, cwd):
    out = os.path.join(cwd, "heaptrack.out")
    p = subprocess.run([HEAPTRACK, "-o", out, WORK, str(threads), str(pairs)],
                       cwd=cwd, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    m = re.search(r"allocations:\s*(\d+)", p.stdout + p.stderr)
    if p.returncode or not m:
        raise RuntimeError(f"heaptrack failed: {p.stdout}{p.stderr}")
    if int(m.group(1)) < threads * pairs:
        raise RuntimeError(f"heaptrack saw {m.group(1)} allocations, "
                           f"fewer than the {threads * pairs} made")
    for f in os.listdir(cwd):
        if f.startswith("heaptrack.out"):
            os.unlink(os.path.join(cwd, f))
    return parse(p.stdout)


RUNNERS = {"plain": run_plain, "pullprof": run_pullprof,
           "heaptrack": run_heaptrack}

# Other processes on the machine (a build, a test) would skew a run: the
# CPU time the whole machine spent (/proc/stat) less our own and our
# children's tells how much they took. A run during which they took more
# than FOREIGN_MAX CPU seconds is run again (up to RETRIES times).
FOREIGN_MAX = 0.05
RETRIES = 5
TICK = os.sysconf("SC_CLK_TCK")


def busy_cpu():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal ...
    return (v[0] + v[1] + v[2] + v[5] + v[6]) / TICK


def own_cpu():
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def foreign(fn):
    """fn()'s result and the CPU seconds others used meanwhile."""
    b, o = busy_cpu(), own_cpu()
    r = fn()
    return r, (busy_cpu() - b) - (own_cpu() - o)


def wait_quiet(limit=600):
    """Wait (up to limit s) for a second in which others use < 5% CPU.
    The seconds waited, or None when it never came."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if foreign(lambda: time.sleep(1))[1] < FOREIGN_MAX:
            return time.monotonic() - t0
    return None


class Disturbance:
    retried = 0  # runs done again because others took the CPU
    kept = 0     # runs kept though disturbed (retries ran out)
    waited = 0.0


def measured(c, t, pairs, cwd, any_load=False):
    if any_load:
        return RUNNERS[c.kind](c, t, pairs, cwd)
    for i in range(RETRIES + 1):
        ns, other = foreign(lambda: RUNNERS[c.kind](c, t, pairs, cwd))
        if other < FOREIGN_MAX:
            return ns
        if i < RETRIES:
            Disturbance.retried += 1
            Disturbance.waited += wait_quiet(60) or 60
    Disturbance.kept += 1
    return ns


def check_jemalloc(cwd):
    """jemalloc accepts the profiling options and was built with them."""
    e = dict(os.environ, LD_PRELOAD=JEMALLOC,
             MALLOC_CONF=JE_PROF + ",stats_print:true")
    p = subprocess.run([WORK, "1", "1000"], env=e, cwd=cwd,
                       capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    text = p.stdout + p.stderr
    want = ["config.prof: true", "opt.prof: true", "opt.lg_prof_sample: 19"]
    missing = [w for w in want if w not in text]
    if "Invalid conf" in text or missing:
        return f"jemalloc profiling NOT active (missing: {missing})"
    dumps = [f for f in os.listdir(cwd) if f.startswith("jeprof")]
    return ("jemalloc: " + ", ".join(want) +
            f" in its stats; {len(dumps)} profile files written")


def fmt_ns(xs):
    return (f"{statistics.median(xs):.2f} "
            f"({min(xs):.2f}–{max(xs):.2f})")


def fmt_over(xs, base):
    if base is None:
        return "baseline"
    m, b = statistics.median(xs), statistics.median(base)
    return f"{m - b:+.2f} ns ({(m / b - 1) * 100:+.1f}%)"


def against_name(lib):
    """A short name for another build's library: its build directory's
    (.../DIR/.libs/libpullprof.so -> "(DIR)")."""
    d = os.path.dirname(os.path.abspath(lib))
    if os.path.basename(d) == ".libs":
        d = os.path.dirname(d)
    return f"({os.path.basename(d)})"


def callgrind(pairs, cwd, against=None, pool=True):
    """Ir per pair of the timed loop, glibc and pullprof, single thread."""
    rows = []
    cfgs = [("glibc alone", None, None, "malloc")]
    for label, lib in [("pullprof", PULLPROF)] + (
            [(f"pullprof {against_name(against)}", against)]
            if against else []):
        cfgs += [(f"{label}, sampling off", "0", lib, "malloc"),
                 (f"{label}, 512 KiB", "524288", lib, "malloc"),
                 (f"{label}, 64 KiB", "65536", lib, "malloc")]
    if pool:
        cfgs += [("pool API, no pullprof", None, None, "pool"),
                 ("pool API, pullprof sampling off", "0", PULLPROF, "pool"),
                 ("pool API, pullprof 512 KiB", "524288", PULLPROF, "pool"),
                 ("pool release, no pullprof", None, None, "release"),
                 ("pool release, pullprof sampling off", "0", PULLPROF,
                  "release")]
    base = None
    for name, rate, lib, mode in cfgs:
        if rate is None:
            base = None  # a baseline row: the rows below are against it
        e = dict(os.environ)
        if rate is not None:
            e.update(PULLPROF_LISTEN="127.0.0.1:0", PULLPROF_HEAP_RATE=rate,
                     PULLPROF_QUIET="1", LD_PRELOAD=lib)
        out = os.path.join(cwd, "callgrind.out")
        subprocess.run(["valgrind", "-q", "--tool=callgrind",
                        "--cache-sim=yes", "--toggle-collect=run_pairs",
                        f"--callgrind-out-file={out}",
                        WORK, "1", str(pairs)] +
                       ([] if mode == "malloc" else ["0", mode]),
                       env=e, cwd=cwd, check=True,
                       capture_output=True, stdin=subprocess.DEVNULL)
        total = d1mr = None
        with open(out) as f:
            for line in f:
                if line.startswith("events:"):
                    events = line.split()[1:]
                if line.startswith("totals:"):
                    tot = dict(zip(events, map(int, line.split()[1:])))
                    total, d1mr = tot["Ir"], tot["D1mr"]
        ann = subprocess.run(["callgrind_annotate", "--inclusive=yes", out],
                             capture_output=True, text=True).stdout
        slow = 0
        for line in ann.splitlines():
            if re.search(r":pp_heap_(pool_)?sampled\b", line):
                slow = int(line.split()[0].replace(",", ""))
                break
        os.unlink(out)
        ir, miss = total / pairs, d1mr / pairs
        if base is None:
            base, base_miss = ir, miss
        rows.append(f"| {name} | {ir:.1f} | {ir - base:+.1f} | "
                    f"{slow / pairs:.1f} | {miss:.2f} | "
                    f"{miss - base_miss:+.2f} |")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--pairs", type=int, default=20_000_000)
    ap.add_argument("--heaptrack-pairs", type=int, default=2_000_000)
    ap.add_argument("--callgrind-pairs", type=int, default=2_000_000)
    ap.add_argument("--against", metavar="LIB",
                    help="another build's libpullprof.so, measured beside")
    ap.add_argument("--no-peers", action="store_true",
                    help="no jemalloc, tcmalloc or heaptrack")
    ap.add_argument("--no-pool", action="store_true",
                    help="no rows of the pool API")
    ap.add_argument("--threads", default="1,2",
                    help="thread counts, comma-separated (1,2)")
    ap.add_argument("--any-load", action="store_true",
                    help="keep every run whatever the machine's load")
    a = ap.parse_args()
    if not os.access(WORK, os.X_OK) or not os.path.exists(PULLPROF):
        sys.exit("bench_malloc: build first (sh scripts/build.sh; "
                 "make bench/mallocwork)")

    glibc = Config("glibc alone")
    configs = [glibc,
               Config("pullprof, sampling off (RATE=0)", glibc,
                      {"PULLPROF_HEAP_RATE": "0"}, "pullprof"),
               Config("pullprof, 512 KiB (RATE=524288)", glibc,
                      {"PULLPROF_HEAP_RATE": "524288"}, "pullprof"),
               Config("pullprof, 64 KiB (RATE=65536)", glibc,
                      {"PULLPROF_HEAP_RATE": "65536"}, "pullprof")]
    if a.against:
        if not os.path.exists(a.against):
            sys.exit(f"bench_malloc: no {a.against}")
        for rate, what in (("0", "sampling off"), ("524288", "512 KiB"),
                           ("65536", "64 KiB")):
            configs.append(Config(f"pullprof {against_name(a.against)}, "
                                  f"{what} (RATE={rate})", glibc,
                                  {"PULLPROF_HEAP_RATE": rate}, "pullprof",
                                  lib=a.against))
    if not a.no_pool:
        nop = Config("pool API, no pullprof (reports do nothing)",
                     mode="pool")
        configs += [nop] + [
            Config(f"pool API, pullprof, {what} (RATE={rate})", nop,
                   {"PULLPROF_HEAP_RATE": rate}, "pullprof", mode="pool")
            for rate, what in (("0", "sampling off"), ("524288", "512 KiB"),
                               ("65536", "64 KiB"))]
        nor = Config("pool release, no pullprof (reports do nothing)",
                     mode="release")
        configs += [nor] + [
            Config(f"pool release, pullprof, {what} (RATE={rate})", nor,
                   {"PULLPROF_HEAP_RATE": rate}, "pullprof", mode="release")
            for rate, what in (("0", "sampling off"), ("524288", "512 KiB"))]
    notes = []
    if a.no_peers:
        pass
    elif os.path.exists(JEMALLOC):
        je = Config("jemalloc, prof:false", None,
                    {"LD_PRELOAD": JEMALLOC, "MALLOC_CONF": "prof:false"})
        configs += [je, Config(f"jemalloc, {JE_PROF}", je,
                               {"LD_PRELOAD": JEMALLOC,
                                "MALLOC_CONF": JE_PROF})]
    else:
        notes.append("jemalloc not installed (apt-get install libjemalloc2)")
    if a.no_peers:
        pass
    elif os.path.exists(TCMALLOC):
        tc = Config("tcmalloc, TCMALLOC_SAMPLE_PARAMETER=0", None,
                    {"LD_PRELOAD": TCMALLOC,
                     "TCMALLOC_SAMPLE_PARAMETER": "0"})
        configs += [tc, Config("tcmalloc, TCMALLOC_SAMPLE_PARAMETER=524288",
                               tc, {"LD_PRELOAD": TCMALLOC,
                                    "TCMALLOC_SAMPLE_PARAMETER": "524288"})]
    else:
        notes.append("tcmalloc not installed "
                     "(apt-get install libgoogle-perftools4)")
    if HEAPTRACK and not a.no_peers:
        hg = Config(f"glibc alone, {a.heaptrack_pairs} pairs", None,
                    pairs=a.heaptrack_pairs)
        configs += [hg, Config(f"heaptrack, {a.heaptrack_pairs} pairs", hg,
                               kind="heaptrack", pairs=a.heaptrack_pairs)]
    elif not a.no_peers:
        notes.append("heaptrack not installed (apt-get install heaptrack)")

    threads = tuple(int(t) for t in a.threads.split(","))
    load0 = os.getloadavg()[0]
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    quiet = None if a.any_load else wait_quiet()
    busy0, own0, t0 = busy_cpu(), own_cpu(), time.monotonic()
    with tempfile.TemporaryDirectory() as cwd:
        for r in range(a.runs):
            k = r % len(configs)
            for t in threads:
                for c in configs[k:] + configs[:k]:
                    ns, cpu = measured(c, t, c.pairs or a.pairs, cwd,
                                       a.any_load)
                    c.runs.setdefault(t, []).append(ns)
                    c.cpu.setdefault(t, []).append(cpu)
        others = ((busy_cpu() - busy0) - (own_cpu() - own0)) / (
            time.monotonic() - t0)
        je_check = (check_jemalloc(cwd)
                    if os.path.exists(JEMALLOC) and not a.no_peers else None)
        cg = (callgrind(a.callgrind_pairs, cwd, a.against, not a.no_pool)
              if a.callgrind_pairs and shutil.which("valgrind") else None)
    if a.callgrind_pairs and not cg:
        notes.append("valgrind not installed: no instruction counts")

    print(f"malloc+free pairs of 16..511 bytes over {SLOTS} slots per "
          f"thread, {a.pairs} pairs per thread"
          + ("" if a.no_peers else
             f" (heaptrack: {a.heaptrack_pairs})") +
          f"; {a.runs} runs each, interleaved; "
          f"{os.cpu_count()} cores; started {started}. ns per pair: median "
          f"(min–max) of the runs; overhead: medians against the baseline "
          f"named. Load average (1 min) {load0:.2f} before the runs, "
          f"{os.getloadavg()[0]:.2f} after (theirs included); other "
          f"processes used {others:.2f} cores on average during the runs")
    print()
    if a.any_load:
        print("Every run kept whatever the machine's load (--any-load)")
    else:
        print(("Quiet machine found before the runs" if quiet is not None
               else "NO quiet second found in 600 s before the runs") +
              f"; {Disturbance.retried} runs done again because other "
              f"processes used more than {FOREIGN_MAX} CPU s during them "
              f"({Disturbance.waited:.0f} s waited), {Disturbance.kept} "
              f"disturbed runs kept after {RETRIES} retries")
    print()
    for title, get in (("wall time", lambda c: c.runs),
                       ("the thread's CPU time", lambda c: c.cpu)):
        print(f"ns per pair, {title}:")
        print()
        print("| configuration | baseline | " + " | ".join(
            f"ns/pair, {t} thread{'s' if t > 1 else ''} | overhead"
            for t in threads) + " |")
        print("|---|---|" + "---:|---:|" * len(threads))
        for c in configs:
            cells = [c.name, c.base.name if c.base else "—"]
            for t in threads:
                cells += [fmt_ns(get(c)[t]),
                          fmt_over(get(c)[t],
                                   get(c.base)[t] if c.base else None)]
            print("| " + " | ".join(cells) + " |")
        print()
    print("Sampling checks:")
    print()
    for c in configs:
        if c.kind != "pullprof":
            continue
        rate = int(c.env["PULLPROF_HEAP_RATE"])
        for t in threads:
            got = statistics.median(c.sampled[t])
            want = (t * (a.pairs + SLOTS) * MEAN_SIZE / rate) if rate else 0
            ok = (got == 0) if not rate else (0.9 * want < got < 1.1 * want)
            print(f"* {c.name}, {t} thread(s): heap.sampled median "
                  f"{got:.0f} per run (min {min(c.sampled[t])}, expected "
                  f"~{want:.0f}), unwind mean "
                  f"{statistics.median(c.unwind_ns[t]):.0f} ns, frees "
                  f"sent to the table by the filter that were not "
                  f"sampled {statistics.median(c.false_hits[t]):.0f}"
                  f"{'' if ok else '  <-- UNEXPECTED'}")
    if je_check:
        print(f"* {je_check}")
    if HEAPTRACK and not a.no_peers:
        print("* heaptrack: every run's own count of allocations covered "
              "the pairs")
    for n in notes:
        print(f"* {n}")
    if cg:
        print()
        print(f"Instructions per pair under callgrind (valgrind "
              f"--tool=callgrind --toggle-collect=run_pairs, "
              f"{a.callgrind_pairs} pairs, 1 thread; deterministic apart "
              f"from the sample draws), and first-level data cache read "
              f"misses per pair in callgrind's simulation of this "
              f"machine's caches (--cache-sim=yes):")
        print()
        print("| configuration | Ir/pair | vs glibc (pool rows: vs no "
              "pullprof) | of which in pp_heap_sampled (incl.) | D1 read "
              "misses/pair | vs the same |")
        print("|---|---:|---:|---:|---:|---:|")
        print("\n".join(cg))


if __name__ == "__main__":
    main()

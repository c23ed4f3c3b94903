#!/usr/bin/env python3
"""bench_fork_anatomy: where the CPU a fork costs a host with an idle agent
goes, taken apart in one run.

A fork copies the parent's mappings and the page tables of their private
pages; the child's exit tears them down again. An agent adds mappings (its
two objects, the ~20 libraries behind libmicrohttpd, libdw and libunwind,
its threads' stacks) and private memory (frame tables, buffers). Each
variant below is bench/bench_fork (a host with HEAP_MB MiB of heap written
once) forking CHILDREN children per batch that leave at once with _exit():

  - no agent;
  - no agent, plus VMAS more private mappings of one written page each
    (what a mapping costs, whatever is in it);
  - no agent, plus one private mapping of ANON_KIB KiB, every page written
    (what private memory costs per MiB);
  - the light object preloaded without PULLPROF_LISTEN (its wrappers, no
    agent);
  - the agent's libraries preloaded, nothing of pullprof (libmicrohttpd
    with gnutls and p11-kit, libdw, libunwind, json-c);
  - the agent idle (PULLPROF_FORK=adopt, the default);
  - the agent idle with PULLPROF_FORK=off;
  - with --old-lib, the agent idle from another build (main before a
    change, say).

Columns, medians over every batch of every round: CPU per fork (the
forking thread's fork and waitpid plus the children's CPU, over CHILDREN:
bench_fork's cpu_us), the difference from no agent, the host's mappings
(/proc/PID/maps lines) and its Anonymous KiB (smaps_rollup) while forking.
Rounds run the variants in an order rotated every round.

Usage: bench/bench_fork_anatomy.py [--rounds N] [--batches N]
                                   [--children N] [--heap-mb N]
                                   [--vmas N] [--anon-kib N] [--lib PATH]
                                   [--old-lib PATH]
Prints a Markdown table.
"""
import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_fork import (LIB, ForkHost, OtherLoad, ensure_work,  # noqa: E402
                        rotated)

AGENT_LIBS = ":".join(
    "/usr/lib/x86_64-linux-gnu/" + so for so in (
        "libmicrohttpd.so.12", "libdw.so.1", "libunwind.so.8",
        "libjson-c.so.5"))


def footprint(pid):
    with open(f"/proc/{pid}/maps") as f:
        maps = sum(1 for _ in f)
    anon = 0
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Anonymous:"):
                anon = int(line.split()[1])
    return maps, anon


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--children", type=int, default=50)
    ap.add_argument("--heap-mb", type=int, default=4)
    ap.add_argument("--vmas", type=int, default=100)
    ap.add_argument("--anon-kib", type=int, default=4096)
    ap.add_argument("--lib", default=LIB)
    ap.add_argument("--old-lib")
    a = ap.parse_args()
    ensure_work()
    page_kib = os.sysconf("SC_PAGESIZE") // 1024
    variants = [
        ("no agent", dict(lib=None)),
        (f"no agent, {a.vmas} more mappings of one page",
         dict(lib=None, vmas=(a.vmas, 1))),
        (f"no agent, one more mapping of {a.anon_kib} KiB",
         dict(lib=None, vmas=(1, a.anon_kib // page_kib))),
        ("light object, no agent", dict(lib=a.lib, listen=False)),
        ("the agent's libraries alone",
         dict(lib=None, extra_env={"LD_PRELOAD": AGENT_LIBS})),
        ("agent idle (adopt)", dict(lib=a.lib)),
        ("agent idle, PULLPROF_FORK=off",
         dict(lib=a.lib, extra_env={"PULLPROF_FORK": "off"})),
    ]
    if a.old_lib:
        variants.append(("agent idle, old build", dict(lib=a.old_lib)))
    cpu, foot = {}, {}
    load = OtherLoad()
    for rnd in range(a.rounds):
        for name, v in rotated(variants, rnd):
            h = ForkHost(v["lib"], heap_mb=a.heap_mb,
                         extra_env=v.get("extra_env"),
                         listen=v.get("listen", True))
            try:
                if "vmas" in v:
                    h.cmd("vmas %d %d" % v["vmas"])
                foot[name] = footprint(h.p.pid)
                h.cmd(f"batch {a.children} _exit 0")  # warm-up
                for _ in range(a.batches):
                    b = h.cmd(f"batch {a.children} _exit 0")
                    cpu.setdefault(name, []).append(b["cpu_us"] / 1000)
            finally:
                h.quit()
    others = load.line()

    print(f"bench_fork with {a.heap_mb} MiB of heap, {a.children} children "
          f"per batch leaving with _exit(); {a.rounds} rounds x "
          f"{a.batches} batches; {os.cpu_count()} cores")
    print()
    print(others)
    print()
    print("| host | CPU ms/fork | against no agent | mappings "
          "| Anonymous KiB |")
    print("|---|---:|---:|---:|---:|")
    base = statistics.median(cpu["no agent"])
    for name, _ in variants:
        m = statistics.median(cpu[name])
        maps, anon = foot[name]
        print(f"| {name} | {m:.3f} | {m - base:+.3f} | {maps} | {anon} |")


if __name__ == "__main__":
    main()

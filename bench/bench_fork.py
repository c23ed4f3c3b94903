#!/usr/bin/env python3
"""bench_fork: what a fork costs a host that has pullprof preloaded,
before and after the agent served it profiles.

The host is bench/bench_fork (64 MiB of heap written once, driven over
stdin). It forks CHILDREN children at once per batch; each child writes
TOUCH KiB of the parent's heap (pages copied on write, as any child's
first work copies some) and leaves with _exit() or with exit() (which runs
atexit handlers and destructors, pullprof's included). Every library is
measured in one process per round, in three states in turn:

  - idle: preloaded, PULLPROF_LISTEN set, no request served yet;
  - after CPU: a 1 s CPU profile at 100 Hz fetched first
    (/debug/pprof/profile?seconds=1&hz=100: the sample ring now exists,
    its pages written);
  - after CPU+heap: a heap profile fetched too (/debug/pprof/heap).

The same process without the agent goes through the same phases (no
requests) as the reference. With --old-lib, a second build of pullprof
(main before the change, say) is measured side by side in the same
rounds.

Columns, per fork, medians over every batch of every round:
  - CPU ms: the forking thread's CPU (getrusage RUSAGE_THREAD: fork()
    with the atfork prepare/parent handlers, and waitpid) plus the
    children's (RUSAGE_CHILDREN: the child's handlers, its work, its exit
    and the freeing of its memory), over CHILDREN;
  - wall ms: the batch's wall time over CHILDREN (2 cores: parent and
    children overlap, so CPU can exceed wall);
  - faults: the children's minor faults (RUSAGE_CHILDREN ru_minflt), over
    CHILDREN: every page a child copies or allocates is one;
  - dirty KiB: Private_Dirty of /proc/PID/smaps_rollup of a probe child
    that does the same work and stops itself (SIGSTOP) before leaving: the
    memory the child has made its own since fork (median of the probes);
  - probe faults: that child's minor faults when stopped (/proc/PID/stat).

Rounds run the hosts one after the other in an order rotated every round,
so that a change in the machine's other load falls on all alike; the load
average before and after is printed, and the CPU the rest of the machine
used meanwhile.

Usage: bench/bench_fork.py [--rounds N] [--batches N] [--children N]
                           [--probes N] [--touch KIB] [--lib PATH]
                           [--old-lib PATH]
Prints Markdown tables.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.path.join(HERE, "..", ".libs", "libpullprof.so")
WORK = os.path.join(HERE, "bench_fork")
TICK = os.sysconf("SC_CLK_TCK")
PHASES = ["idle", "after CPU", "after CPU+heap"]
EXITS = ["_exit", "exit"]


def get(url, timeout=30):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def busy_cpu():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (v[0] + v[1] + v[2] + v[5] + v[6]) / TICK


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


class OtherLoad:
    """What the rest of the machine did while a benchmark ran: the load
    average before and after, and the CPU others used (all busy CPU less
    this process's and its children's)."""

    def __init__(self):
        self.load0, self.busy0, self.t0 = loadavg(), busy_cpu(), time.time()
        self.own0 = os.times()

    def line(self):
        wall = time.time() - self.t0
        mine = sum(os.times()[:4]) - sum(self.own0[:4])
        others = busy_cpu() - self.busy0 - mine
        return (f"Load average before {self.load0}, after {loadavg()}; the "
                f"rest of the machine used {others:.0f} CPU s in the "
                f"{wall:.0f} s ({others / wall:.2f} cores on average)")


def rotated(seq, rnd):
    """seq in the order of round rnd: rotated by one every round, so that a
    drift in the machine's load, or what one run leaves to the next, falls
    on every variant alike."""
    k = rnd % len(seq)
    return seq[k:] + seq[:k]


def ensure_work():
    """Build the bench_fork host if it is not there."""
    if not os.path.exists(WORK):
        subprocess.run(["make", "-s", "-C", os.path.join(HERE, ".."),
                        "bench/bench_fork"], check=True)


class ForkHost:
    """bench_fork with lib preloaded (none: no preload) and, when listen,
    its agent started; extra_env goes on top."""

    def __init__(self, lib, heap_mb=64, extra_env=None, listen=True):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("PULLPROF_") and k != "LD_PRELOAD"}
        listen = bool(lib and listen)
        if lib:
            env["LD_PRELOAD"] = os.path.abspath(lib)
        if listen:
            env["PULLPROF_LISTEN"] = "127.0.0.1:0"
        env.update(extra_env or {})
        self.p = subprocess.Popen([WORK, str(heap_mb)], env=env, text=True,
                                  stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        try:
            self.agent = None
            if listen:
                line = self.p.stderr.readline()
                m = re.search(r"serving http://127\.0\.0\.1:(\d+)/", line)
                if not m:
                    raise RuntimeError(f"the agent did not start: {line!r}")
                self.agent = int(m.group(1))
            if self.p.stdout.readline().strip() != "ready":
                raise RuntimeError("bench_fork did not start")
        except BaseException:
            self.p.kill()
            self.p.wait()
            raise

    def cmd(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        out = self.p.stdout.readline().strip()
        if not out or out.startswith("err"):
            raise RuntimeError(f"bench_fork {line!r}: {out!r}")
        return {k: float(v) for k, v in re.findall(r"(\w+)=([-\d.]+)", out)}

    def phase(self, name):
        if not self.agent:
            return
        base = f"http://127.0.0.1:{self.agent}/debug/pprof"
        if name == "after CPU":
            get(f"{base}/profile?seconds=1&hz=100")
        elif name == "after CPU+heap":
            get(f"{base}/heap")

    def quit(self):
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.flush()
            self.p.wait(30)
        except (BrokenPipeError, subprocess.TimeoutExpired):
            self.p.kill()
            self.p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--children", type=int, default=50)
    ap.add_argument("--probes", type=int, default=3)
    ap.add_argument("--touch", type=int, default=16)
    ap.add_argument("--lib", default=LIB)
    ap.add_argument("--old-lib")
    a = ap.parse_args()
    ensure_work()
    libs = [("no agent", None)]
    if a.old_lib:
        libs.append(("old", a.old_lib))
    libs.append(("new" if a.old_lib else "pullprof", a.lib))

    res = {}  # (label, phase, exit) -> {column: [values]}
    load = OtherLoad()
    for rnd in range(a.rounds):
        for label, lib in rotated(libs, rnd):
            h = ForkHost(lib)
            try:
                for ph in PHASES:
                    h.phase(ph)
                    for ex in EXITS:
                        cell = res.setdefault((label, ph, ex), {})
                        for _ in range(a.batches):
                            b = h.cmd(f"batch {a.children} {ex} {a.touch}")
                            for c in ("cpu_us", "wall_us", "minflt"):
                                cell.setdefault(c, []).append(b[c])
                        for _ in range(a.probes):
                            p = h.cmd(f"probe {ex} {a.touch}")
                            cell.setdefault("dirty", []).append(
                                p["dirty_kib"])
                            cell.setdefault("pflt", []).append(p["minflt"])
            finally:
                h.quit()
    others = load.line()

    print(f"{a.children} children per batch, each writing {a.touch} KiB of "
          f"the parent's 64 MiB heap; {a.rounds} rounds x {a.batches} "
          f"batches, {a.probes} probe children per cell; {os.cpu_count()} "
          f"cores")
    print()
    print(others)
    for ex in EXITS:
        print()
        print(f"### Children leaving with {ex}()")
        print()
        print("| library | state | CPU ms/fork | wall ms/fork | faults/child "
              "| dirty KiB/child | probe faults |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for label, lib in libs:
            for ph in PHASES if lib else ["-"]:
                if lib:
                    cell = res[(label, ph, ex)]
                else:  # the reference: every phase together
                    cell = {}
                    for p2 in PHASES:
                        for c, v in res[(label, p2, ex)].items():
                            cell.setdefault(c, []).extend(v)
                m = {c: statistics.median(v) for c, v in cell.items()}
                print(f"| {label} | {ph} | {m['cpu_us'] / 1000:.2f} | "
                      f"{m['wall_us'] / 1000:.2f} | {m['minflt']:.0f} | "
                      f"{m['dirty']:.0f} | {m['pflt']:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

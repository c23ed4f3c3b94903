#!/usr/bin/env python3
"""bench_walk: one stack capture by depth, pullprof's walker beside libunwind.

bench/walkwork captures its own stack at depths 10, 30, 60 and 120 (frames
without frame pointers, a third of them with a variable-length array) with
pullprof's compact frame tables (the CPU handler's and the heap sampler's
walk, PULLPROF_UNWIND=dwarf), pullprof's libunwind mode, and libunwind
itself: unw_backtrace (its cached trace) and a plain unw_step loop. No
signal: the context comes from getcontext, whose own cost is a row too.

Two tables, printed in Markdown:
  * ns per capture, median (min-max) of --runs runs of --loops captures,
    the modes interleaved run by run;
  * instructions per capture under callgrind (deterministic), and per frame
    between the shallowest and the deepest depth.

--against DIR adds the rows of another build's bench/walkwork (a worktree
of an earlier commit with the file added), interleaved with this one.

Usage: bench/bench_walk.py [--runs N] [--loops N] [--against DIR]
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
DEPTHS = (10, 30, 60, 120)
MODES = ("getcontext", "dwarf", "libunwind", "unw_backtrace", "unw_step")
# The step-by-step libunwind modes take ~100x longer a capture: fewer loops
# keep a run near a second.
SLOW = {"libunwind": 50, "unw_step": 50}


def run(work, mode, depth, loops, valgrind=None):
    cmd = [work, mode, str(depth), str(loops)]
    if valgrind:
        cmd = ["valgrind", "-q", "--tool=callgrind",
               "--toggle-collect=measured",
               "--callgrind-out-file=" + valgrind] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True, check=True,
                         stdin=subprocess.DEVNULL).stdout
    m = re.search(r"frames (\d+) ns_per_capture (\d+)", out)
    if not m:
        sys.exit("walkwork printed: %r" % out)
    return int(m.group(1)), int(m.group(2))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--loops", type=int, default=100000)
    ap.add_argument("--callgrind-loops", type=int, default=1000)
    ap.add_argument("--against", metavar="DIR")
    a = ap.parse_args()
    builds = [("this build", os.path.join(TOP, "bench", "walkwork"))]
    if a.against:
        builds.append((os.path.basename(a.against.rstrip("/")),
                       os.path.join(a.against, "bench", "walkwork")))
    for _, w in builds:
        if not os.access(w, os.X_OK):
            sys.exit("%s is not built (make bench/walkwork)" % w)
    cfgs = [(b, w, m) for b, w in builds for m in MODES
            if m == "dwarf" or b == builds[0][0]]
    ns, frames = {}, {}
    for _ in range(a.runs):
        for d in DEPTHS:
            for b, w, m in cfgs:
                f, t = run(w, m, d, max(1, a.loops // SLOW.get(m, 1)))
                ns.setdefault((b, m, d), []).append(t)
                frames[(b, m, d)] = f
    print("### One capture by depth (bench/walkwork), %d runs of %d "
          "captures (%s: %d), %d cores\n" % (
              a.runs, a.loops, " and ".join(SLOW), a.loops // 50,
              os.cpu_count()))
    print("ns per capture, median (min-max); frames captured in brackets\n")
    print("| build | mode | " + " | ".join("depth %d" % d for d in DEPTHS)
          + " |")
    print("|---|---|" + "---:|" * len(DEPTHS))
    for b, _, m in cfgs:
        cells = []
        for d in DEPTHS:
            v = ns[(b, m, d)]
            cells.append("%d (%d-%d) [%d]" % (statistics.median(v), min(v),
                                              max(v), frames[(b, m, d)]))
        print("| %s | %s | %s |" % (b, m, " | ".join(cells)))
    if not shutil.which("valgrind"):
        return
    print("\nInstructions per capture (callgrind, --toggle-collect=measured,"
          " %d captures); per frame: the slope from depth %d to %d\n" %
          (a.callgrind_loops, DEPTHS[0], DEPTHS[-1]))
    print("| build | mode | " + " | ".join("depth %d" % d for d in DEPTHS)
          + " | per frame |")
    print("|---|---|" + "---:|" * (len(DEPTHS) + 1))
    with tempfile.TemporaryDirectory() as tmp:
        for b, w, m in cfgs:
            irs, fr = [], []
            for d in DEPTHS:
                out = os.path.join(tmp, "cg.out")
                f, _ = run(w, m, d, a.callgrind_loops, valgrind=out)
                with open(out) as fh:
                    tot = next(int(line.split()[1]) for line in fh
                               if line.startswith("totals:"))
                os.unlink(out)
                irs.append(tot / a.callgrind_loops)
                fr.append(f)
            slope = ((irs[-1] - irs[0]) / (fr[-1] - fr[0])
                     if fr[-1] > fr[0] else 0)
            print("| %s | %s | %s | %.0f |" % (
                b, m, " | ".join("%.0f" % x for x in irs), slope))


if __name__ == "__main__":
    main()

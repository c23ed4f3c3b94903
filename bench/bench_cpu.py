#!/usr/bin/env python3
"""bench_cpu: overhead and accuracy of CPU profiling, pullprof against
gperftools' CPU profiler, in one run.

The same fixed work (bench/cpuwork: 2 threads of xorshift) runs
  - unprofiled (the agent is started but idle),
  - under pullprof at 100 and 1000 Hz (a /profile window covering the work),
  - under gperftools (LD_PRELOAD=libprofiler.so CPUPROFILE=...,
    CPUPROFILE_FREQUENCY=100 or 1000).
For each, the median wall time of the work over RUNS runs gives the
overhead against the unprofiled median; accuracy is the CPU time the
profile accounts for divided by the CPU time the worker threads used
(CLOCK_THREAD_CPUTIME_ID). Prints a Markdown table.

Usage: bench/bench_cpu.py [RUNS] [ITERATIONS]
"""
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
CPUWORK = os.path.join(HERE, "cpuwork")
LIBPROFILER = next((p for p in ("/usr/lib/x86_64-linux-gnu/libprofiler.so.0",
                                "/usr/lib/x86_64-linux-gnu/libprofiler.so")
                    if os.path.exists(p)), None)
sys.path.insert(0, os.path.join(TOP, "tests", "integration"))
from pptest import Profile  # noqa: E402  (protoc-based decoder)

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
ITER = int(sys.argv[2]) if len(sys.argv) > 2 else 150000
THREADS = 2


def run():
    """One unprofiled run: (wall_ms, cpu_ms, None)."""
    e = dict(os.environ, PULLPROF_LISTEN="127.0.0.1:0")
    p = subprocess.run([CPUWORK, str(THREADS), str(ITER), "0"], env=e,
                       capture_output=True, text=True, stdin=subprocess.DEVNULL)
    w = p.stdout.split("\n")[1].split()
    return float(w[1]), float(w[3]), None


def run_pullprof(hz):
    """One run with a pullprof window that starts before the work and ends
    after it; the profile is fetched before the process exits."""
    e = dict(os.environ, PULLPROF_LISTEN="127.0.0.1:0")
    # The window (WINDOW s, from the unprofiled runs) covers the 300 ms
    # delay, the work and a margin; cpuwork keeps the agent up until its
    # stdin closes, after the profile arrived.
    p = subprocess.Popen([CPUWORK, str(THREADS), str(ITER), "300"], env=e,
                         stdout=subprocess.PIPE, stdin=subprocess.PIPE,
                         text=True)
    port = int(p.stdout.readline().split()[1])
    got = {}

    def fetch():
        url = (f"http://127.0.0.1:{port}/debug/pprof/profile"
               f"?seconds={WINDOW}&hz={hz}")
        got["body"] = urllib.request.urlopen(url, timeout=120).read()
    t = threading.Thread(target=fetch)
    t.start()
    line = p.stdout.readline().split()
    t.join()
    p.stdin.close()
    p.wait()
    wall, cpu = float(line[1]), float(line[3])
    prof = Profile(got["body"])
    ns = sum(s["value"][1] for s in prof.samples
             if prof.labels(s).get("thread_name", "").startswith("cpuwork"))
    return wall, cpu, ns / 1e6


def run_gperftools(hz):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cpu.prof")
        e = dict(os.environ, PULLPROF_LISTEN="127.0.0.1:0",
                 LD_PRELOAD=LIBPROFILER, CPUPROFILE=out,
                 CPUPROFILE_FREQUENCY=str(hz))
        p = subprocess.run([CPUWORK, str(THREADS), str(ITER), "0"], env=e,
                           capture_output=True, text=True,
                           stdin=subprocess.DEVNULL)
        lines = p.stdout.split("\n")
        w = lines[1].split()
        wall, cpu = float(w[1]), float(w[3])
        data = open(out, "rb").read()
    # The gperftools CPU profile: 64-bit words; a 5-word header (0, 3, 0,
    # period in microseconds, 0), then records (count, n, pc...), and a
    # (0, 1, 0) trailer.
    words = struct.unpack_from(f"<{len(data) // 8}Q", data)
    period_us = words[3]
    i, total = 5, 0
    while i + 2 < len(words):
        count, n = words[i], words[i + 1]
        if count == 0 and n == 1 and words[i + 2] == 0:
            break
        total += count
        i += 2 + n
    return wall, cpu, total * period_us / 1000


def median_row(name, runs, base):
    walls = [r[0] for r in runs]
    wall = statistics.median(walls)
    acc = [r[2] / r[1] for r in runs if r[2] is not None and r[1] > 0]
    over = f"{(wall / base - 1) * 100:+.2f}%" if base else "—"
    accs = f"{statistics.median(acc) * 100:.1f}%" if acc else "—"
    return f"| {name} | {wall:.0f} | {over} | {accs} |"


if __name__ == "__main__":
    # Calibrate: the unprofiled work's length sets the window length.
    base_runs = []
    for _ in range(RUNS):
        w, c, _ = run()
        base_runs.append((w, c, None))
    base = statistics.median(r[0] for r in base_runs)
    WINDOW = int((base + 300) / 1000) + 2
    rows = [median_row("unprofiled (agent idle)", base_runs, base)]
    results = {}
    # Interleave configurations so drift in the machine hits all alike.
    configs = [("pullprof 100 Hz", lambda: run_pullprof(100)),
               ("pullprof 1000 Hz", lambda: run_pullprof(1000))]
    if LIBPROFILER:
        configs += [("gperftools 100 Hz", lambda: run_gperftools(100)),
                    ("gperftools 1000 Hz", lambda: run_gperftools(1000))]
    for _ in range(RUNS):
        for name, fn in configs:
            results.setdefault(name, []).append(fn())
    for name, _ in configs:
        rows.append(median_row(name, results[name], base))
    print(f"CPU work: {THREADS} threads x {ITER} iterations, {RUNS} runs each "
          f"(median), {os.cpu_count()} cores")
    print()
    print("| configuration | wall ms | overhead | accuracy (profile / real CPU) |")
    print("|---|---:|---:|---:|")
    print("\n".join(rows))
    if not LIBPROFILER:
        print("\n(gperftools not installed: apt-get install google-perftools)")

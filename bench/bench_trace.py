#!/usr/bin/env python3
"""bench_trace: what a Perfetto trace of a CPU window costs against the
pprof of the same window: its size, the time and CPU to build it, and the
memory the agent holds for it.

The host is bench/tracework: THREADS threads burning for the window through
tw_top -> tw_mid (recursing 2..25 deep) -> tw_leaf, so the window has
thousands of distinct stacks; then it is idle while the answers are
rendered. For each target sample count (default 10k and 100k) the script
opens /profile?seconds=S&hz=1000 with S chosen so the burners' CPU time
gives about that many samples, and once the window is served renders the
kept window (?id=N) RUNS times in each form:

  pprof         /profile?id=N (gzipped profile.proto, the peer: the same
                samples summed by stack and labels)
  trace         /profile?id=N&format=perfetto (the raw trace)
  trace, gzip   the same with Accept-Encoding: gzip (compressed while it
                is written)

and reports the answer's size, the request's wall time (median of RUNS, on
loopback), the agent's CPU per render (the process's CPU clock over the
renders: the host is idle then), and the peak memory: VmHWM before the
first render of a form and after its last (the high-water mark moves only
when a render needs more than anything before it), and the timeline the
window holds (32 bytes a sample) as the model's share.

Usage: bench/bench_trace.py [--threads T] [--runs R] [SAMPLES...]
"""
import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.path.join(HERE, "tracework")
TICK = os.sysconf("SC_CLK_TCK")


def get(url, headers=None, timeout=600):
    req = urllib.request.Request(url, headers=headers or {})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=timeout) as r:
        body = r.read()
        hdrs = {k.lower(): v for k, v in r.headers.items()}
    return body, hdrs, time.perf_counter() - t0


def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / TICK


def vm(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def rate_of(p, base, threads):
    """The records of a 2 s window over 1.8 s of burning (subtracted from
    the real run's count later)."""
    import json
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("r", get(
        base + "profile?seconds=2&hz=1000")))
    t.start()
    time.sleep(0.2)
    p.stdin.write(f"burn {threads} 1800\n")
    p.stdin.flush()
    p.stdout.readline()
    t.join()
    n = json.loads(urllib.request.urlopen(base + "status").read())["cpu"][
        "samples"]
    return n


def mib(b):
    return f"{b / 1048576:.1f} MiB"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("samples", nargs="*", type=int, default=[10000, 100000])
    a = ap.parse_args()
    if not os.path.exists(WORK):
        sys.exit(f"{WORK} is missing: make bench/tracework")
    cores = os.cpu_count() or 1
    print(f"tracework, {a.threads} burning threads, {cores} cores, hz=1000, "
          f"{a.runs} renders of each form (median)")
    print()
    print("| samples | form | size | wall time | agent CPU | peak memory "
          "(VmHWM) | timeline held |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for target in a.samples:
        env = dict(os.environ, PULLPROF_LISTEN="127.0.0.1:0")
        p = subprocess.Popen([WORK], env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
        port = int(p.stdout.readline().split()[1])
        base = f"http://127.0.0.1:{port}/debug/pprof/"
        # How many records a second of burning gives here: POSIX CPU
        # timers fire at most once a kernel tick, so 1000 Hz asked may be
        # 250 records a second per busy core (overruns weigh them).
        import json
        calib = rate_of(p, base, a.threads)
        rate = calib // 2
        secs = max(2, -(-target // max(rate, 1)) + 1)
        box = {}
        t = threading.Thread(target=lambda: box.setdefault("r", get(
            base + f"profile?seconds={secs}&hz=1000")))
        t.start()
        time.sleep(0.3)
        p.stdin.write(f"burn {a.threads} {(secs - 1) * 1000}\n")
        p.stdin.flush()
        p.stdout.readline()  # burnt
        t.join()
        body, hdrs, _ = box["r"]
        pid_id = hdrs.get("x-pullprof-profile-id")
        samples = json.loads(urllib.request.urlopen(base + "status").read())[
            "cpu"]["samples"] - calib
        forms = [("pprof", f"profile?id={pid_id}", {}),
                 ("trace", f"profile?id={pid_id}&format=perfetto", {}),
                 ("trace, gzip", f"profile?id={pid_id}&format=perfetto",
                  {"Accept-Encoding": "gzip"})]
        for name, path, h in forms:
            hwm0 = vm(p.pid, "VmHWM")
            c0 = proc_cpu(p.pid)
            times, size = [], 0
            for _ in range(a.runs):
                b, _, dt = get(base + path, h)
                times.append(dt)
                size = len(b)
            cpu = (proc_cpu(p.pid) - c0) / a.runs
            hwm1 = vm(p.pid, "VmHWM")
            held = samples * 32 if name != "pprof" else 0
            print(f"| {samples} | {name} | {size / 1024:.0f} KiB | "
                  f"{statistics.median(times) * 1000:.0f} ms | "
                  f"{cpu * 1000:.0f} ms | {mib(hwm0)} → {mib(hwm1)} | "
                  f"{mib(held) if held else '—'} |")
        p.stdin.close()
        p.wait(timeout=30)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""bench_redis: what pullprof costs a real server no one here wrote,
Debian's redis-server, under its own load generator, redis-benchmark.

redis-server (single-threaded: one event loop serves every client) is
pinned to CPU 0 (sched_setaffinity before the exec, as `taskset -c 0`
does; taskset itself is not used for the server, since the preloaded
library would start an agent in taskset too, before its exec), and so are
the agent's threads, which inherit the affinity: whatever the agent
spends, it spends on the server's CPU. redis-benchmark runs pinned to
CPU 1. On a 2-core machine left to
the scheduler, the two would often share a core and measure the
scheduler. Each run starts a fresh redis-server (--save '' --appendonly
no) in one of these configurations:

  - no agent;
  - pullprof preloaded, agent idle, PULLPROF_HEAP_RATE=0 (the malloc
    wrappers pass every call straight through);
  - pullprof preloaded, agent idle, the defaults (heap sampling on, a
    sample per 512 KiB allocated on average);
  - the same with heap sampling at 64 KiB;
  - the defaults with a 1000 Hz CPU window open for the whole of the
    benchmark (/debug/pprof/profile?seconds=60&hz=1000, opened before the
    benchmark starts, checked still open in /status when it ends, then
    cancelled by hanging up).

and runs redis-benchmark twice against it, the four tests SET, GET, LPUSH
and INCR each time, 20 clients:
  - one request at a time per client (-P 1, -n N1): the usual invocation,
    where the round trip over loopback dominates;
  - 16 requests pipelined per client (-P 16, -n N16): redis's own CPU is
    then the bottleneck, which is where an overhead shows.

Throughput is redis-benchmark's requests per second for each test; a cell
is the median over RUNS runs, and the ratio is against the no-agent
median of the same test. "redis CPU" is redis-server's CPU time (all its
threads, the agent's included) over the benchmark's wall time, and per
request (over the four tests' requests: what the server spent on each,
which the machine's other load hardly changes); "others on
CPU 0" is the time CPU 0 was busy with anything else meanwhile (the
machine is shared: what redis could not have), both medians. The
configurations are interleaved round by round, the order rotated every
round, so that a change in the machine's other load falls on all alike;
the other processes' CPU use over the runs (/proc/stat less redis,
redis-benchmark and this script) is printed.

Usage: bench/bench_redis.py [--runs N] [--n1 N] [--n16 N] [--lib PATH]
Prints Markdown tables.
"""
import argparse
import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.path.join(HERE, "..", ".libs", "libpullprof.so")
TESTS = ["SET", "GET", "LPUSH", "INCR"]
TICK = os.sysconf("SC_CLK_TCK")

# (label, environment or None for no agent, CPU window?)
CONFIGS = [
    ("no agent", None, False),
    ("preloaded, idle, heap off", {"PULLPROF_HEAP_RATE": "0"}, False),
    ("preloaded, idle (defaults: heap 512 KiB)", {}, False),
    ("preloaded, idle, heap 64 KiB", {"PULLPROF_HEAP_RATE": "65536"}, False),
    ("1000 Hz CPU window open (defaults)", {}, True),
]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def busy_cpu():
    """CPU seconds the whole machine has been busy."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (v[0] + v[1] + v[2] + v[5] + v[6]) / TICK


def cpu0_busy():
    """CPU seconds CPU 0 has been busy."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu0 "):
                v = [int(x) for x in line.split()[1:]]
                return (v[0] + v[1] + v[2] + v[5] + v[6]) / TICK
    return 0.0


def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        w = f.read().rsplit(")", 1)[1].split()
    return (int(w[11]) + int(w[12])) / TICK


def own_cpu():
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def status(agent):
    import json
    return json.loads(get(f"http://127.0.0.1:{agent}/debug/pprof/status"))


class Redis:
    def __init__(self, env):
        self.port = free_port()
        e = {k: v for k, v in os.environ.items()
             if not k.startswith("PULLPROF_") and k != "LD_PRELOAD"}
        if env is not None:
            e.update(LD_PRELOAD=os.path.abspath(LIB),
                     PULLPROF_LISTEN="127.0.0.1:0", **env)
        self.p = subprocess.Popen(
            ["redis-server", "--port", str(self.port),
             "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--daemonize", "no", "--loglevel", "warning"],
            env=e, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, preexec_fn=lambda: os.sched_setaffinity(0, {0}))
        try:
            self.wait_ready(env)
        except BaseException:
            self.p.kill()  # not left running when it failed to start
            self.p.wait()
            raise

    def wait_ready(self, env):
        self.agent = None
        if env is not None:
            line = self.p.stderr.readline()
            m = re.search(r"serving http://127\.0\.0\.1:(\d+)/", line)
            if not m:
                raise RuntimeError(f"the agent did not start: {line!r}")
            self.agent = int(m.group(1))
        deadline = time.time() + 30
        while time.time() < deadline:
            r = subprocess.run(["redis-cli", "-p", str(self.port), "ping"],
                               capture_output=True, text=True)
            if r.stdout.strip() == "PONG":
                return
            time.sleep(0.05)
        raise RuntimeError("redis-server does not answer")

    def stop(self):
        subprocess.run(["redis-cli", "-p", str(self.port), "shutdown",
                        "nosave"], capture_output=True)
        try:
            code = self.p.wait(60)
        except subprocess.TimeoutExpired:
            self.p.kill()
            code = self.p.wait()
        rest = self.p.stderr.read().strip()
        if code != 0 or rest:
            raise RuntimeError(f"redis-server exited {code}: {rest!r}")


def benchmark(port, n, pipeline):
    """{test: requests per second}, the wall time and the benchmark's CPU."""
    t = time.monotonic()
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-n",
         str(n), "-c", "20", "-P", str(pipeline), "-t",
         ",".join(t.lower() for t in TESTS), "--csv"],
        capture_output=True, text=True, timeout=3600,
        preexec_fn=lambda: os.sched_setaffinity(0, {1}))
    wall = time.monotonic() - t
    if out.returncode != 0:
        raise RuntimeError(f"redis-benchmark: {out.stderr[-500:]}")
    rps = {}
    for line in out.stdout.splitlines():
        col = [c.strip('"') for c in line.split(",")]
        if col[0] in TESTS:
            rps[col[0]] = float(col[1])
    if sorted(rps) != sorted(TESTS):
        raise RuntimeError(f"redis-benchmark printed {out.stdout[-500:]}")
    return rps, wall


def one_run(cfg, n1, n16):
    """{(pipeline, test): rps}, {pipeline: redis CPU share}."""
    label, env, window = cfg
    r = Redis(env)
    win = None
    try:
        if window:
            win = subprocess.Popen(
                ["curl", "-s", "-o", "/dev/null", "--max-time", "120",
                 f"http://127.0.0.1:{r.agent}/debug/pprof/profile"
                 "?seconds=60&hz=1000"])
            deadline = time.time() + 30
            while status(r.agent)["cpu"]["windows_open"] < 1:
                if time.time() > deadline:
                    raise RuntimeError("the CPU window did not open")
                time.sleep(0.05)
        res, share = {}, {}
        for pipeline, n in ((1, n1), (16, n16)):
            c0, b0 = proc_cpu(r.p.pid), cpu0_busy()
            rps, wall = benchmark(r.port, n, pipeline)
            used = proc_cpu(r.p.pid) - c0
            # What else ran on redis's CPU meanwhile (other processes:
            # the machine is shared), in cores.
            share[pipeline] = (used / wall,
                               max(0.0, cpu0_busy() - b0 - used) / wall,
                               used / (n * len(TESTS)) * 1e6)
            for t, v in rps.items():
                res[(pipeline, t)] = v
        if window:
            st = status(r.agent)["cpu"]
            if st["windows_open"] < 1 or st["hz"] != 1000:
                raise RuntimeError(f"the window closed early: {st}")
    finally:
        if win:
            win.terminate()  # the hang-up cancels the window
            win.wait()
        r.stop()
    return res, share


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--n1", type=int, default=50000,
                    help="requests per test, no pipelining")
    ap.add_argument("--n16", type=int, default=500000,
                    help="requests per test, 16 pipelined")
    ap.add_argument("--lib", default=None,
                    help="the libpullprof.so to preload (default: the build's)")
    a = ap.parse_args()
    if a.lib:
        global LIB
        LIB = a.lib
    for tool in ("redis-server", "redis-benchmark", "redis-cli", "curl"):
        if not shutil.which(tool):
            sys.exit(f"bench_redis: {tool} is not installed "
                     "(redis-server redis-tools curl)")
    if os.cpu_count() < 2:
        sys.exit("bench_redis: needs 2 CPUs (server and load pinned apart)")

    rps = {c[0]: {} for c in CONFIGS}
    cpu = {c[0]: {1: [], 16: []} for c in CONFIGS}
    busy0, own0, t0 = busy_cpu(), own_cpu(), time.monotonic()
    for rnd in range(a.runs):
        k = rnd % len(CONFIGS)
        for cfg in CONFIGS[k:] + CONFIGS[:k]:
            res, share = one_run(cfg, a.n1, a.n16)
            for key, v in res.items():
                rps[cfg[0]].setdefault(key, []).append(v)
            for p, s in share.items():
                cpu[cfg[0]][p].append(s)
        print(f"round {rnd + 1}/{a.runs} done", file=sys.stderr, flush=True)
    wall = time.monotonic() - t0
    # redis-server, redis-benchmark, curl and redis-cli
    # are this script's children, all waited for: own_cpu counts them.
    other = busy_cpu() - busy0 - (own_cpu() - own0)

    ver = subprocess.run(["redis-server", "--version"], capture_output=True,
                         text=True).stdout.strip()
    print(f"{ver.split(' sha=')[0]}; {os.cpu_count()} cores; "
          f"redis-server on CPU 0 (the agent's threads with it), "
          f"redis-benchmark on CPU 1; -c 20; median of {a.runs} runs; "
          f"other processes used {other:.0f} CPU s in {wall:.0f} s "
          f"({other / wall:.2f} cores of {os.cpu_count()} on average)")
    for pipeline, n in ((1, a.n1), (16, a.n16)):
        print()
        print(f"### redis-benchmark -P {pipeline} -n {n}: requests per "
              "second, median (min–max), and against no agent")
        print()
        print("| configuration | " + " | ".join(TESTS) +
              " | redis CPU per request (µs) | redis CPU (cores) "
              "| others on CPU 0 (cores) |")
        print("|---|" + "---:|" * (len(TESTS) + 3))
        base_us = statistics.median(x[2] for x in cpu["no agent"][pipeline])
        base = {t: statistics.median(rps["no agent"][(pipeline, t)])
                for t in TESTS}
        for label, _, _ in CONFIGS:
            cells = []
            for t in TESTS:
                v = rps[label][(pipeline, t)]
                m = statistics.median(v)
                ratio = "" if label == "no agent" else \
                    f"; {m / base[t]:.3f}"
                cells.append(f"{m:,.0f} ({min(v):,.0f}–{max(v):,.0f}){ratio}")
            c = statistics.median(x[0] for x in cpu[label][pipeline])
            o = statistics.median(x[1] for x in cpu[label][pipeline])
            all_us = [x[2] for x in cpu[label][pipeline]]
            us = statistics.median(all_us)
            ratio = "" if label == "no agent" else f"; {us / base_us:.3f}"
            print(f"| {label} | " + " | ".join(cells) +
                  f" | {us:.2f} ({min(all_us):.2f}–{max(all_us):.2f}){ratio}"
                  f" | {c:.2f} | {o:.2f} |")


if __name__ == "__main__":
    main()

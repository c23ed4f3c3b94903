#!/usr/bin/env python3
"""bench_flood: how much of the host's own work an HTTP flood of the
profiling endpoints costs, pullprof against Go's net/http/pprof.

The host's work is one thread of a CPU-bound loop (10,000 xorshift steps
per call) run for SECONDS: bench/floodwork (C, linking pullprof) and
bench/peer_flood.go (Go, importing net/http/pprof) do the same. Its rate
(calls per second, the median of RUNS runs) is measured
  - with no agent traffic,
  - under a wrk flood of a light endpoint: pullprof's /status (JSON of the
    agent's state) and Go's /debug/pprof/ (the index with the profiles'
    counts),
  - under a wrk flood of a heavier one: /debug/pprof/heap?debug=1 on both
    (a heap profile rendered as text).
wrk runs with THREADS threads and CONNS keep-alive connections, from half a
second before the work to after it. The slowdown is the work rate lost
against the same server's quiet rate; "served" is what wrk counted (req/s
over its run; non-2xx answers are reported). Both servers share the
machine with wrk: on a small machine the three compete for cores, which is
the point. "server CPU per request" is the process's CPU time over the
flood, less the work thread's, divided by the requests wrk counted. The
cells are measured in interleaved rounds (every cell once per round), so a
change in the machine's other load falls on all alike. Prints a Markdown
table.

Usage: bench/bench_flood.py [RUNS] [SECONDS]
Environment: FLOOD_THREADS (1), FLOOD_CONNS (8).
"""
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FLOODWORK = os.path.join(HERE, "floodwork")
PEER = os.path.join(HERE, "peer_flood.go")
RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
SECS = float(sys.argv[2]) if len(sys.argv) > 2 else 3
THREADS = int(os.environ.get("FLOOD_THREADS", "1"))
CONNS = int(os.environ.get("FLOOD_CONNS", "8"))

# (label, pullprof path, Go path)
FLOODS = [
    ("none", None, None),
    ("light", "/debug/pprof/status", "/debug/pprof/"),
    ("heavy", "/debug/pprof/heap?debug=1", "/debug/pprof/heap?debug=1"),
]


def go_build(out):
    env = dict(os.environ, GO111MODULE="off", GOPATH="/usr/share/gocode",
               GOFLAGS="", GOCACHE=os.path.join(
                   os.environ.get("TMPDIR", "/tmp"), "pullprof-gocache"))
    subprocess.run(["go", "build", "-o", out, PEER], env=env, check=True,
                   cwd=HERE)


class Server:
    def __init__(self, argv, env=None):
        e = dict(os.environ, **(env or {}))
        self.p = subprocess.Popen(argv, env=e, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        self.port = int(self.p.stdout.readline().split()[1])

    def run(self, secs):
        """(work calls per second, the work thread's CPU seconds)."""
        self.p.stdin.write(f"run {secs}\n")
        self.p.stdin.flush()
        w = self.p.stdout.readline().split()
        return float(w[1]), float(w[3]) / 1e3

    def cpu(self):
        """The process's CPU seconds so far."""
        with open(f"/proc/{self.p.pid}/stat") as f:
            w = f.read().rsplit(")", 1)[1].split()
        return (int(w[11]) + int(w[12])) / os.sysconf("SC_CLK_TCK")

    def close(self):
        self.p.stdin.close()
        self.p.wait(30)


def wrk(port, path, secs):
    return subprocess.Popen(
        ["wrk", f"-t{THREADS}", f"-c{CONNS}", f"-d{secs}s",
         f"http://127.0.0.1:{port}{path}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wrk_result(p):
    """(requests, requests per second, non-2xx, socket errors)."""
    out = p.communicate(timeout=120)[0]
    n = re.search(r"(\d+) requests in", out)
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errs = re.search(r"Socket errors:(.*)", out)
    return (int(n.group(1)) if n else 0, float(m.group(1)) if m else 0.0,
            int(bad.group(1)) if bad else 0,
            errs.group(1).strip() if errs else "")


class Cell:
    """One server under one flood, over the runs."""

    def __init__(self):
        self.rates, self.served, self.us_per_req = [], [], []
        self.bad, self.errs = 0, []

    def measure(self, server, path):
        if path is None:
            self.rates.append(server.run(SECS)[0])
            return
        c0 = server.cpu()
        w = wrk(server.port, path, int(SECS + 2))
        time.sleep(0.5)
        rate, work_cpu = server.run(SECS)
        n, rps, b, e = wrk_result(w)
        # What the serving cost: the process's CPU over the flood, less
        # the work thread's.
        agent = server.cpu() - c0 - work_cpu
        self.rates.append(rate)
        self.served.append(rps)
        if n:
            self.us_per_req.append(agent / n * 1e6)
        self.bad += b
        if e:
            self.errs.append(e)


def main():
    if not shutil.which("wrk"):
        sys.exit("bench_flood: no wrk (apt-get install wrk)")
    with tempfile.TemporaryDirectory() as d:
        peer = os.path.join(d, "peer_flood")
        go_build(peer)
        servers = [
            ("pullprof", Server([FLOODWORK],
                                {"PULLPROF_LISTEN": "127.0.0.1:0"}), 1),
            ("Go net/http/pprof", Server([peer]), 2),
        ]
        cells = {(name, label): Cell() for name, _, _ in servers
                 for label, *_ in FLOODS}
        try:
            # Interleaved: every cell once per round, so the machine's
            # other load falls on all of them alike.
            for _ in range(RUNS):
                for name, s, col in servers:
                    for label, *paths in FLOODS:
                        cells[name, label].measure(s, paths[col - 1])
        finally:
            for _, s, _ in servers:
                s.close()
    rows = []
    for name, _, col in servers:
        base = statistics.median(cells[name, "none"].rates)
        for label, *paths in FLOODS:
            c = cells[name, label]
            rate = statistics.median(c.rates)
            rows.append((name, label, paths[col - 1] or "—",
                         statistics.median(c.served) if c.served else None,
                         statistics.median(c.us_per_req)
                         if c.us_per_req else None,
                         c.bad, c.errs, rate, rate / base - 1))
    print(f"Work: one thread, {SECS:g} s per run, median of {RUNS}; "
          f"wrk -t{THREADS} -c{CONNS}; {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d', time.gmtime())}")
    print()
    print("| server | flood | endpoint | served (req/s) | server CPU per "
          "request (µs) | work (calls/s) | work lost |")
    print("|---|---|---|---:|---:|---:|---:|")
    for name, label, path, rps, us, bad, errs, rate, slow in rows:
        served = "—" if rps is None else f"{rps:,.0f}"
        cost = "—" if us is None else f"{us:.1f}"
        if bad:
            served += f" ({bad} non-2xx)"
        if errs:
            served += f" (socket errors: {'; '.join(errs)})"
        lost = "—" if label == "none" else f"{-slow * 100:.1f}%"
        print(f"| {name} | {label} | `{path}` | {served} | {cost} "
              f"| {rate:,.0f} | {lost} |")


if __name__ == "__main__":
    main()

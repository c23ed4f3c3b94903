#!/usr/bin/env python3
"""bench_pgbench: what pullprof costs Debian's PostgreSQL 15, whose
postmaster forks a backend for every connection, under its own load
generator, pgbench.

The server (tests/integration/servers.py: a fresh data directory per run,
a unix socket only, fsync off, run as the postgres user) has pullprof
preloaded into the postmaster (LD_PRELOAD, PULLPROF_LISTEN=127.0.0.1:0), or
not. Every backend is a fork of the postmaster: with a connection per
transaction (pgbench -C) a fork and an exit per transaction, where the cost
of the agent's fork handlers, of the memory a child copies and of the
libraries' exit handlers shows. The plain select-only run (-S, connections
kept) is the control: one fork per client for the whole run.

Each run starts one server per configuration (no agent; pullprof; with
--old-lib, a second build of pullprof side by side) and measures it in two
states in turn:

  - idle: the agent started, nothing asked of it;
  - after profiles: a 1 s CPU profile at 100 Hz of the postmaster
    (/debug/pprof/profile?seconds=1&hz=100) and a heap profile
    (/debug/pprof/heap) fetched first (the sample ring exists, its pages
    written; the symbolizer has read the libraries).

In each state: pgbench -n -S -C and then pgbench -n -S, CLIENTS clients,
SECONDS each, after `pgbench -i -s 1`. The server and its backends are
pinned to CPU 0, pgbench to CPU 1 (sched_setaffinity before the exec), so
the two do not take turns on one core. The configurations are interleaved
run by run, the order rotated every run. A cell is the median TPS over the
runs (pgbench's own figure: "including reconnection times" for -C), the
ratio is against the no-agent median of the same state and mode. The load
average before and after and the CPU the rest of the machine used are
printed: on a shared machine, read the ratios with that in mind.

Usage: bench/bench_pgbench.py [--runs N] [--seconds S] [--clients N]
                              [--lib PATH] [--old-lib PATH]
Prints Markdown tables.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import servers  # noqa: E402
from bench_fork import OtherLoad, rotated  # noqa: E402

LIB = os.path.join(HERE, "..", ".libs", "libpullprof.so")
PGBENCH = os.path.join(servers.PG_BIN, "pgbench")
STATES = ["idle", "after profiles"]
MODES = [("-C -S", ["-C", "-S"]), ("-S", ["-S"])]


def get(url, timeout=60):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def pgbench(pg, args, timeout=600):
    r = subprocess.run([PGBENCH, *args, *pg.conn_args(), "postgres"],
                       capture_output=True, text=True, timeout=timeout,
                       preexec_fn=lambda: os.sched_setaffinity(0, {1}))
    if r.returncode != 0:
        raise RuntimeError(f"pgbench {' '.join(args)} exited "
                           f"{r.returncode}: {r.stderr[-1000:]}")
    return r.stdout


def tps(out):
    m = re.search(r"^tps = ([\d.]+)", out, re.M)
    if not m:
        raise RuntimeError(f"no tps in pgbench's output: {out[-500:]}")
    return float(m.group(1))


def one_server(lib, a, res, label):
    env = None
    if lib:
        env = {"LD_PRELOAD": os.path.abspath(lib),
               "PULLPROF_LISTEN": "127.0.0.1:0"}
    with servers.postgres(env=env, cpus={0}) as pg:
        pgbench(pg, ["-i", "-s", "1", "-q"])
        for state in STATES:
            if state == "after profiles" and pg.agent_port:
                base = f"http://127.0.0.1:{pg.agent_port}/debug/pprof"
                get(f"{base}/profile?seconds=1&hz=100")
                get(f"{base}/heap")
            for name, args in MODES:
                out = pgbench(pg, ["-n", *args, "-c", str(a.clients),
                                   "-j", "1", "-T", str(a.seconds)])
                res.setdefault((label, state, name), []).append(tps(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--lib", default=LIB)
    ap.add_argument("--old-lib")
    a = ap.parse_args()
    why = servers.pg_missing()
    if why:
        print(f"bench_pgbench: {why}", file=sys.stderr)
        return 1
    if os.cpu_count() < 2:
        print("bench_pgbench: needs 2 CPUs (server and pgbench pinned "
              "apart)", file=sys.stderr)
        return 1
    libs = [("no agent", None)]
    if a.old_lib:
        libs.append(("old", a.old_lib))
    libs.append(("new" if a.old_lib else "pullprof", a.lib))

    res = {}
    load = OtherLoad()
    for run in range(a.runs):
        for label, lib in rotated(libs, run):
            one_server(lib, a, res, label)
    others = load.line()

    print(f"PostgreSQL 15, pgbench -s 1, {a.clients} clients, {a.seconds} s "
          f"per run, median of {a.runs} runs; server on CPU 0, pgbench on "
          f"CPU 1; {os.cpu_count()} cores")
    print()
    print(others)
    for name, _ in MODES:
        print()
        print(f"### pgbench -n {name}: transactions per second, median "
              f"(min-max), and against no agent")
        print()
        print("| library | state | TPS | against no agent |")
        print("|---|---|---:|---:|")
        for label, lib in libs:
            for state in STATES:
                v = res[(label, state, name)]
                ref = statistics.median(res[("no agent", state, name)])
                med = statistics.median(v)
                shown = state if lib else f"{state} (no requests)"
                print(f"| {label} | {shown} | {med:.0f} "
                      f"({min(v):.0f}-{max(v):.0f}) | {med / ref:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

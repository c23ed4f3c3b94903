#!/usr/bin/env python3
"""bench_fork_modes: PostgreSQL's throughput with a connection per
transaction (pgbench -n -C -S: a backend forked and exited for each) under
the agent's fork settings, side by side in the same rounds.

The postmaster runs on CPU 0 (tests/integration/servers.py), pgbench on
CPU 1 (bench_pgbench.pgbench). Each round starts one server per variant:
no agent; the agent by default (PULLPROF_FORK=adopt); without heap
sampling (PULLPROF_HEAP_RATE=0); without the takeover (PULLPROF_FORK=off);
both; and, with --old-lib, another build. Two more take the agent apart:
the light object alone (preloaded without PULLPROF_LISTEN: its wrappers,
no agent), and the libraries the agent brings in (libmicrohttpd with
gnutls, libdw, libunwind, json-c) preloaded with nothing of pullprof, which
is what their mappings and destructors cost every fork and exit. Prints the
TPS of every round per variant and their median. The variants' order is
rotated every round.

    python3 bench/bench_fork_modes.py [--rounds 2] [--seconds 8] [--old-lib PATH]
"""
import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
sys.path.insert(0, HERE)
import servers  # noqa: E402
from bench_fork import rotated  # noqa: E402
from bench_pgbench import LIB, pgbench, tps  # noqa: E402

VARIANTS = [
    ("no agent", None),
    ("agent (adopt)", {}),
    ("PULLPROF_HEAP_RATE=0", {"PULLPROF_HEAP_RATE": "0"}),
    ("PULLPROF_FORK=off", {"PULLPROF_FORK": "off"}),
    ("off, HEAP_RATE=0", {"PULLPROF_FORK": "off", "PULLPROF_HEAP_RATE": "0"}),
    ("light object, no agent", {"listen": None}),
    ("the agent's libraries alone", {"preload": ":".join(
        "/usr/lib/x86_64-linux-gnu/" + so for so in (
            "libmicrohttpd.so.12", "libdw.so.1", "libunwind.so.8",
            "libjson-c.so.5"))}),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--lib", default=LIB)
    ap.add_argument("--old-lib")
    a = ap.parse_args()
    variants = list(VARIANTS)
    if a.old_lib:
        variants.append(("old build", {"lib": a.old_lib}))
    res = {}
    for rnd in range(a.rounds):
        # A server that starts while the previous one's memory is still
        # being torn down falls on every variant alike.
        for name, extra in rotated(variants, rnd):
            env = None
            if extra is not None:
                extra = dict(extra)
                lib = os.path.abspath(extra.pop("lib", a.lib))
                preload = extra.pop("preload", None)
                listen = extra.pop("listen", "127.0.0.1:0")
                env = {"LD_PRELOAD": preload or lib}
                if listen and not preload:
                    env["PULLPROF_LISTEN"] = listen
                env.update(extra)
            with servers.postgres(env=env, cpus={0}) as pg:
                pgbench(pg, ["-i", "-s", "1", "-q"])
                out = pgbench(pg, ["-n", "-C", "-S", "-c", str(a.clients),
                                   "-j", "1", "-T", str(a.seconds)])
                res.setdefault(name, []).append(tps(out))
    base = statistics.median(res["no agent"])
    print(f"pgbench -n -C -S -c {a.clients} -T {a.seconds}, "
          f"{a.rounds} rounds\n")
    print("| postmaster | TPS per round | median | against no agent |")
    print("|---|---|---:|---:|")
    for name, _ in variants:
        v = res[name]
        m = statistics.median(v)
        print(f"| {name} | {', '.join(f'{x:.0f}' for x in v)} | {m:.0f} "
              f"| {m / base:.2f} |")


if __name__ == "__main__":
    main()

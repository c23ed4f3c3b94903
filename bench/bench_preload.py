#!/usr/bin/env python3
"""bench_preload: what LD_PRELOAD=libpullprof.so costs a process in which no
agent starts, against no preload and against the single-object library of
before the split (src/shim/shim.h).

Every program a preloaded host runs inherits LD_PRELOAD and PULLPROF_LISTEN.
Two workloads, each in two environments:

  true     /bin/true, one process
  script   /bin/sh running a loop of COMMANDS /bin/true commands (each a
           fork and an exec of a preloaded program)

  no listen   LD_PRELOAD alone: the price of loading the library
  descendant  what a profiled host's children inherit: LD_PRELOAD,
              PULLPROF_LISTEN=127.0.0.1:0 and PULLPROF_AGENT_PID of another
              process (which the light library reads as "an exec'd
              descendant: start nothing"; the old one ignores it and starts
              an agent in every process, on a port of its own)

and three configurations: no preload, the old library (--old: a
libpullprof.so built from a commit before the split, in a second clone),
the light one (--new, default this tree's .libs/libpullprof.so). The runs
are interleaved (one of each configuration in turn).

Measured per run: CPU time (user + system of the child and every descendant
it waited for, from wait4's rusage), and wall time from spawn to reaping;
median (min-max) of the runs. "libraries" is how many shared objects a
process of that configuration maps, counted in /proc/PID/maps of a `sleep`
started the same way once it sleeps.

Usage: bench/bench_preload.py --old OLD/libpullprof.so [--new NEW]
                              [--runs N] [--script-runs M] [--commands C]
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TRUE = shutil.which("true") or "/bin/true"
SLEEP = shutil.which("sleep") or "/bin/sleep"


def clean_env():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PULLPROF_") and k != "LD_PRELOAD"}
    return env


def env_for(lib, kind):
    env = clean_env()
    if lib:
        env["LD_PRELOAD"] = lib
    if kind == "descendant":
        env["PULLPROF_LISTEN"] = "127.0.0.1:0"
        # A pid that is not the child's: its parent's (this script's).
        env["PULLPROF_AGENT_PID"] = str(os.getpid())
        env["PULLPROF_AGENT_URL"] = "none"
    return env


def run_once(argv, env):
    """(cpu seconds, wall seconds) of argv and what it waited for."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"{argv[0]} exited {p.returncode} with {env.get('LD_PRELOAD')}")
    return ru.ru_utime + ru.ru_stime, wall


def libraries(env):
    """Shared objects a sleep started with env maps once it sleeps."""
    p = subprocess.Popen([SLEEP, "30"], env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 10
        names = set()
        while time.time() < deadline:
            with open(f"/proc/{p.pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            with open(f"/proc/{p.pid}/maps") as f:
                paths = re.findall(r"\s(/\S+)$", f.read(), re.M)
            names = {os.path.basename(x) for x in paths if ".so" in x}
            if state == "S" and any(n.startswith("libc.so") for n in names):
                time.sleep(0.3)  # the agent's threads, if any, settle
                with open(f"/proc/{p.pid}/maps") as f:
                    paths = re.findall(r"\s(/\S+)$", f.read(), re.M)
                return len({os.path.basename(x) for x in paths if ".so" in x})
            time.sleep(0.02)
        return len(names)
    finally:
        p.kill()
        p.wait()


def fmt(values, scale=1000.0):
    v = [x * scale for x in values]
    return f"{statistics.median(v):.2f} ({min(v):.2f}–{max(v):.2f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--old", required=True,
                    help="libpullprof.so of a commit before the split")
    ap.add_argument("--new", default=os.path.join(HERE, "..", ".libs",
                                                  "libpullprof.so"))
    ap.add_argument("--runs", type=int, default=41,
                    help="runs of /bin/true per configuration")
    ap.add_argument("--script-runs", type=int, default=5,
                    help="runs of the script per configuration")
    ap.add_argument("--commands", type=int, default=1000,
                    help="commands the script runs")
    a = ap.parse_args()
    libs = [("no preload", None), ("old: one object", os.path.abspath(a.old)),
            ("new: light object", os.path.abspath(a.new))]
    for name, lib in libs:
        if lib and not os.path.exists(lib):
            sys.exit(f"{name}: {lib} does not exist")
    script = [shutil.which("sh") or "/bin/sh", "-c",
              f'i=0; while [ $i -lt {a.commands} ]; do {TRUE}; '
              f'i=$((i+1)); done']
    work = [(f"{TRUE}", [TRUE], a.runs),
            (f"sh: {a.commands} × {TRUE}", script, a.script_runs)]
    kinds = ["no listen", "descendant"]

    load0 = os.getloadavg()[0]
    print(f"{os.cpu_count()} cores; load average (1 min) {load0:.2f} before")
    rows = []
    for wname, argv, runs in work:
        for kind in kinds:
            cpu = {n: [] for n, _ in libs}
            wall = {n: [] for n, _ in libs}
            for _ in range(runs):
                for n, lib in libs:
                    c, w = run_once(argv, env_for(lib, kind))
                    cpu[n].append(c)
                    wall[n].append(w)
            for n, lib in libs:
                rows.append((wname, kind if lib else "—", n, cpu[n], wall[n],
                             libraries(env_for(lib, kind)), runs))
    load1 = os.getloadavg()[0]
    print(f"load average (1 min) {load1:.2f} after\n")
    print("| workload | environment | library | runs | CPU ms, median (min–max) "
          "| wall ms, median (min–max) | libraries mapped |")
    print("|---|---|---|---:|---:|---:|---:|")
    seen = set()
    for wname, kind, n, cpu, wall, nlibs, runs in rows:
        key = (wname, n) if n == "no preload" else (wname, kind, n)
        if key in seen:
            continue  # no preload: the environment changes nothing
        seen.add(key)
        print(f"| {wname} | {kind} | {n} | {runs} | {fmt(cpu)} | {fmt(wall)} "
              f"| {nlibs} |")


if __name__ == "__main__":
    main()

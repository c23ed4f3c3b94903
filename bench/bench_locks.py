#!/usr/bin/env python3
"""bench_locks: what pullprof's interposed pthread lock calls cost the
host (the mutex and block profiles), against the C library alone and
valgrind's drd, in one run.

The load is bench/lockswork (not linked with pullprof: the same binary
runs alone, preloaded and under valgrind).

1. Uncontended pairs, one thread (lockswork uncontended PAIRS): a
   pthread_mutex_lock+unlock pair, a pthread_rwlock_rdlock+unlock pair
   and a sem_post+sem_wait pair, ns per pair, RUNS runs of PAIRS pairs
   each, the configurations interleaved round-robin (the order rotated
   every round) so drift in the machine hits all alike:
     - glibc alone, the process single-threaded. The C library then
       takes a mutex with an unlocked compare-and-swap
       (__libc_single_threaded): no process with an agent running is in
       that state, so it is the base of the preloaded-without-agent row
       only;
     - glibc alone with one more thread, idle (blocked in pause()): the
       locked instructions every multi-threaded process pays; the base of
       the rows with the agent running;
     - pullprof preloaded without PULLPROF_LISTEN: no agent, the wrappers
       in place with profiling off, the process single-threaded;
     - pullprof preloaded, agent started (PULLPROF_LISTEN=127.0.0.1:0),
       PULLPROF_MUTEX_RATE=0 PULLPROF_BLOCK_RATE=0: the wrappers go
       straight to the C library (the interposition's floor);
     - the same at the default rates (mutex 1 in 10, block 10000 ns).
   Then instructions per pair under callgrind (only the timed loops
   counted: --toggle-collect=run_mutex/run_rwlock/run_sem, inclusive;
   CALLGRIND_PAIRS pairs plus 1% warm-up), the same configurations:
   repeatable whatever the machine's load.

2. Contended (lockswork contended SECS): two threads, pinned to CPUs 0
   and 1 (--no-pin: left to the scheduler, which on a busy 2-core
   machine often runs both on one CPU, and then they hardly contend),
   take one default mutex as often as they can for SECS s, adding to a
   counter and doing ~50 ns of work inside. Pairs per second of both
   threads, the threads' CPU per pair (less sensitive to CPU time others
   take), the share of the pairs the slower thread made (0.50: even),
   the lock calls made while the other thread held the mutex (the
   workload's own count, the same in every configuration), the threads'
   sleeps in the kernel (voluntary context switches: futex waits that
   slept), the CPU the rest of the process (the agent) used meanwhile;
   for glibc alone, pullprof at rates 0, at the defaults and at 1/1
   (every contended unlock and every wait recorded), CONTEND_RUNS runs
   each, interleaved. After each pullprof run the process is held and its
   /debug/pprof/status `locks` section read once the agent's pipeline
   tick has drained the event ring (two reads 300 ms apart agree).

3. The peer: valgrind's drd on the same contended load for SECS s,
   plain and with --exclusive-threshold=10 (report every lock held over
   10 ms): its pairs per second against glibc's median, and the reports
   it printed. mutrace is run too when its command is installed
   (Debian 12 has no mutrace package); otherwise the table says so.

Tables 1 and 2 also say how much CPU other processes on the machine
used meanwhile (/proc/stat less this script and its children): the
machine is shared.

Usage: bench/bench_locks.py [--runs N] [--pairs N] [--callgrind-pairs N]
                            [--contend-runs N] [--secs S] [--no-pin]
                            [--no-drd]
"""
import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
WORK = os.path.join(HERE, "lockswork")
PULLPROF = os.path.join(TOP, ".libs", "libpullprof.so")
OPS = ("mutex", "rwlock", "sem")
OP_NAMES = {"mutex": "mutex lock+unlock",
            "rwlock": "rwlock rdlock+unlock",
            "sem": "sem_post+sem_wait"}
TICK = os.sysconf("SC_CLK_TCK")


def clean_env():
    """The environment less anything that would preload or configure a
    profiler of its own."""
    e = {k: v for k, v in os.environ.items()
         if not k.startswith("PULLPROF_") and k != "LD_PRELOAD"}
    return e


def agent_env(mutex=None, block=None, listen=True):
    e = {"LD_PRELOAD": PULLPROF}
    if listen:
        e["PULLPROF_LISTEN"] = "127.0.0.1:0"
    if mutex is not None:
        e["PULLPROF_MUTEX_RATE"] = str(mutex)
    if block is not None:
        e["PULLPROF_BLOCK_RATE"] = str(block)
    return e


class Config:
    def __init__(self, name, env=None, idle=0, base=None, agent=False):
        self.name, self.env, self.idle = name, env or {}, idle
        self.base, self.agent = base, agent
        self.runs = {op: [] for op in OPS}  # op -> [ns per pair]
        self.ir = {}                         # op -> Ir per pair


GLIBC1 = "glibc alone, 1 thread"
GLIBC2 = "glibc alone, +1 idle thread"
UNCONTENDED = [
    Config(GLIBC1),
    Config(GLIBC2, idle=1),
    Config("pullprof preloaded, no agent (1 thread)",
           agent_env(listen=False), base=GLIBC1),
    Config("pullprof, rates 0 (agent running)", agent_env(0, 0),
           base=GLIBC2, agent=True),
    Config("pullprof, default rates (mutex 10, block 10000 ns)",
           agent_env(), base=GLIBC2, agent=True),
]

# ---- the machine's other load --------------------------------------------


def busy_cpu():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (v[0] + v[1] + v[2] + v[5] + v[6]) / TICK


def own_cpu():
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


class Foreign:
    """CPU seconds other processes used over a span of wall time."""

    def __init__(self):
        self.cpu = self.wall = 0.0

    def measure(self, fn):
        b, o, t = busy_cpu(), own_cpu(), time.monotonic()
        r = fn()
        self.cpu += (busy_cpu() - b) - (own_cpu() - o)
        self.wall += time.monotonic() - t
        return r

    def text(self):
        return (f"other processes used {max(self.cpu, 0):.1f} CPU s in "
                f"{self.wall:.1f} s of these runs "
                f"({max(self.cpu, 0) / max(self.wall, 1e-9):.2f} cores "
                f"of {os.cpu_count()} on average)")


# ---- 1. uncontended pairs --------------------------------------------------


def run_uncontended(c, pairs):
    e = dict(clean_env(), **c.env)
    p = subprocess.run([WORK, "uncontended", str(pairs), ",".join(OPS),
                        str(c.idle)], env=e, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    if p.returncode:
        raise RuntimeError(f"{c.name}: exit {p.returncode}: {p.stderr}")
    serving = "serving http://" in p.stderr
    if serving != c.agent:
        raise RuntimeError(f"{c.name}: agent {'not ' if c.agent else ''}"
                           f"started: {p.stderr.strip()}")
    for line in p.stdout.splitlines():
        k, v = line.split()
        c.runs[k[:-3]].append(float(v))


def fmt_ns(xs):
    return (f"{statistics.median(xs):.2f} "
            f"({min(xs):.2f}–{max(xs):.2f})")


def fmt_over(x, base, unit=" ns", digits=2):
    if base is None:
        return "base"
    return f"{x - base:+.{digits}f}{unit} ({(x / base - 1) * 100:+.0f}%)"


def by_name(configs, name):
    return next((c for c in configs if c.name == name), None)


def callgrind(c, pairs, cwd):
    e = dict(clean_env(), **c.env)
    out = os.path.join(cwd, "callgrind.out")
    cmd = ["valgrind", "-q", "--tool=callgrind",
           f"--callgrind-out-file={out}"]
    cmd += [f"--toggle-collect=run_{op}" for op in OPS]
    cmd += [WORK, "uncontended", str(pairs), ",".join(OPS), str(c.idle)]
    subprocess.run(cmd, env=e, cwd=cwd, check=True, capture_output=True,
                   stdin=subprocess.DEVNULL)
    ann = subprocess.run(["callgrind_annotate", "--inclusive=yes",
                          "--threshold=100", out],
                         capture_output=True, text=True, check=True).stdout
    os.unlink(out)
    calls = pairs + pairs // 100  # the timed loop and its warm-up
    for op in OPS:
        m = re.search(r"^\s*([\d,]+) .*:run_%s \[" % op, ann, re.M)
        if not m:
            raise RuntimeError(f"{c.name}: no run_{op} in callgrind's "
                               "output")
        c.ir[op] = int(m.group(1).replace(",", "")) / calls


# ---- 2. contended ----------------------------------------------------------


class Contended:
    def __init__(self, name, env=None, agent=False):
        self.name, self.env, self.agent = name, env or {}, agent
        self.rows = []    # parsed lockswork lines
        self.status = []  # /status locks sections


CONTENDED = [
    Contended("glibc alone"),
    Contended("pullprof, rates 0", agent_env(0, 0), True),
    Contended("pullprof, default rates", agent_env(), True),
    Contended("pullprof, rates 1/1 (every event)", agent_env(1, 1), True),
]


def parse_contended(line):
    w = line.split()
    if not w or w[0] != "contended":
        raise RuntimeError(f"no result in lockswork's output: {line!r}")
    r = {w[i]: float(w[i + 1]) for i in range(1, len(w) - 1, 2)}
    if r["counter_ok"] != 1:
        raise RuntimeError("the counter does not match the pairs: the "
                           "mutex did not exclude")
    return r


def locks_status(url):
    """The /status `locks` section once the event ring is drained (the
    agent's tick moves events into its tables every 250 ms)."""
    last = None
    for _ in range(20):
        with urllib.request.urlopen(url, timeout=30) as r:
            locks = json.load(r)["locks"]
        if last is not None and locks == last:
            return locks
        last = locks
        time.sleep(0.3)
    return last


def run_contended(c, secs, pin):
    e = dict(clean_env(), **c.env)
    cmd = [WORK, "contended", str(secs), "1" if c.agent else "0",
           "1" if pin else "0"]
    p = subprocess.Popen(cmd, env=e, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        url = None
        if c.agent:
            # The agent's constructor logs before main runs:
            # "pullprof[PID]: serving http://127.0.0.1:PORT/debug/pprof/"
            err = p.stderr.readline()
            m = re.search(r"serving (http://\S+/)", err)
            if not m:
                raise RuntimeError(f"{c.name}: pullprof did not start: "
                                   f"{err}")
            url = m.group(1) + "status"
        r = parse_contended(p.stdout.readline())
        if url:
            c.status.append(locks_status(url))
    finally:
        p.stdin.close()
        rest = p.stderr.read()
        p.wait()
    if p.returncode:
        raise RuntimeError(f"{c.name}: exit {p.returncode}: {rest}")
    c.rows.append(r)


def cpu_per_pair(rows):
    return [r["threads_cpu_s"] * 1e9 / r["pairs"] for r in rows]


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def per_s(c, key):
    return [r[key] / r["secs"] for r in c.rows]


def fmt_rate(xs, digits=0):
    return (f"{med(xs):,.{digits}f} ({min(xs):,.{digits}f}–"
            f"{max(xs):,.{digits}f})")


# ---- 3. peers --------------------------------------------------------------


def run_tool(cmd, secs, pin):
    """A contended run under a tool: its lockswork line and its stderr."""
    p = subprocess.run(cmd + [WORK, "contended", str(secs), "0",
                              "1" if pin else "0"],
                       env=clean_env(), capture_output=True, text=True,
                       stdin=subprocess.DEVNULL)
    line = next((x for x in p.stdout.splitlines()
                 if x.startswith("contended")), "")
    if p.returncode or not line:
        raise RuntimeError(f"{cmd[0]}: exit {p.returncode}: "
                           f"{p.stderr[-2000:]}")
    return parse_contended(line), p.stderr


def mutrace_state():
    pol = subprocess.run(["apt-cache", "policy", "mutrace"],
                         capture_output=True, text=True).stdout.strip()
    m = re.search(r"Candidate:\s*(\S+)", pol)
    cand = m.group(1) if m else None
    return shutil.which("mutrace"), cand


# ---- main ------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=9,
                    help="runs of each uncontended configuration")
    ap.add_argument("--pairs", type=int, default=10_000_000)
    ap.add_argument("--callgrind-pairs", type=int, default=100_000,
                    help="0: no callgrind table")
    ap.add_argument("--contend-runs", type=int, default=5)
    ap.add_argument("--secs", type=float, default=3.0,
                    help="seconds of each contended run")
    ap.add_argument("--no-pin", dest="pin", action="store_false",
                    help="leave the two contending threads unpinned "
                    "(default: pinned to CPUs 0 and 1)")
    ap.add_argument("--no-drd", action="store_true")
    a = ap.parse_args()

    for f in (WORK, PULLPROF):
        if not os.path.exists(f):
            sys.exit(f"{f} missing: build first (sh scripts/build.sh && "
                     "make bench/lockswork)")
    started = time.monotonic()
    with open("/proc/loadavg") as f:
        load0 = " ".join(f.read().split()[:3])

    # 1. uncontended
    fg = Foreign()
    n = len(UNCONTENDED)
    for rnd in range(a.runs):
        for i in range(n):
            c = UNCONTENDED[(i + rnd) % n]
            fg.measure(lambda: run_uncontended(c, a.pairs))
    print(f"### Uncontended pairs, one thread: ns per pair, median "
          f"(min–max) of {a.runs} runs of {a.pairs:,} pairs")
    print()
    print("| configuration | " +
          " | ".join(f"{OP_NAMES[op]} | over base" for op in OPS) + " |")
    print("|---|" + "---:|---|" * len(OPS))
    for c in UNCONTENDED:
        b = by_name(UNCONTENDED, c.base)
        cells = []
        for op in OPS:
            m = med(c.runs[op])
            cells.append(fmt_ns(c.runs[op]))
            cells.append(fmt_over(m, med(b.runs[op]) if b else None))
        print(f"| {c.name} | " + " | ".join(cells) + " |")
    print()
    print(f"Base: the row the overhead is taken against ({GLIBC1} for the "
          f"row without agent, {GLIBC2} for the rows with the agent's "
          f"threads running); {fg.text()}.")
    print()

    if a.callgrind_pairs:
        with tempfile.TemporaryDirectory() as cwd:
            for c in UNCONTENDED:
                callgrind(c, a.callgrind_pairs, cwd)
        print(f"### Instructions per pair (callgrind, {a.callgrind_pairs:,} "
              f"pairs + 1% warm-up, the loop's own ~4 included)")
        print()
        print("| configuration | " +
              " | ".join(f"{OP_NAMES[op]} | over base" for op in OPS) +
              " |")
        print("|---|" + "---:|---|" * len(OPS))
        for c in UNCONTENDED:
            b = by_name(UNCONTENDED, c.base)
            cells = []
            for op in OPS:
                cells.append(f"{c.ir[op]:.1f}")
                cells.append(fmt_over(c.ir[op], b.ir[op] if b else None,
                                      unit="", digits=1))
            print(f"| {c.name} | " + " | ".join(cells) + " |")
        print()

    # 2. contended
    fg2 = Foreign()
    n = len(CONTENDED)
    for rnd in range(a.contend_runs):
        for i in range(n):
            c = CONTENDED[(i + rnd) % n]
            fg2.measure(lambda: run_contended(c, a.secs, a.pin))
    base = med(per_s(CONTENDED[0], "pairs"))
    work_ns = med([r["work_ns"] for c in CONTENDED for r in c.rows])
    print(f"### Contended: 2 threads, one mutex, {a.secs:g} s per run, "
          f"median (min–max) of {a.contend_runs} runs"
          f"{', threads pinned to CPUs 0 and 1' if a.pin else ''}")
    print()
    print("| configuration | pairs/s | against glibc | threads' CPU ns "
          "per pair | slower thread's share | lock calls that found it "
          "held, /s | sleeps (futex waits that slept), /s | agent CPU, ms "
          "per s (% of a core) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for c in CONTENDED:
        pairs = per_s(c, "pairs")
        agent = [r["agent_cpu_ms"] / r["secs"] for r in c.rows]
        print(f"| {c.name} | {fmt_rate(pairs)} | "
              f"{(med(pairs) / base - 1) * 100:+.1f}% | "
              f"{fmt_rate(cpu_per_pair(c.rows), 1)} | "
              f"{fmt_rate([r['slower_share'] for r in c.rows], 2)} | "
              f"{fmt_rate(per_s(c, 'found_held'))} | "
              f"{fmt_rate(per_s(c, 'sleeps'))} | "
              f"{med(agent):.1f} ({med(agent) / 10:.2f}%) |")
    print()
    print(f"Critical section: a counter and {work_ns:.0f} ns of work "
          f"(one work unit alone, median); {fg2.text()}.")
    print()
    print("### Contended: the agent's /debug/pprof/status `locks` "
          "afterwards (per run: median (min–max))")
    print()
    print("| configuration | mutex events | mutex dropped | block events | "
          "block dropped | slot collisions | waiting |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for c in CONTENDED:
        if not c.status:
            continue
        s = c.status

        def col(f):
            return fmt_rate([f(x) for x in s])
        print(f"| {c.name} | {col(lambda x: x['mutex']['events'])} | "
              f"{col(lambda x: x['mutex']['dropped'])} | "
              f"{col(lambda x: x['block']['events'])} | "
              f"{col(lambda x: x['block']['dropped'])} | "
              f"{col(lambda x: x['slot_collisions'])} | "
              f"{col(lambda x: x['waiting'])} |")
    print()

    # 3. peers
    if not a.no_drd:
        rows = []
        for name, cmd in (
                ("drd", ["valgrind", "--tool=drd"]),
                ("drd --exclusive-threshold=10",
                 ["valgrind", "--tool=drd", "--exclusive-threshold=10"])):
            r, err = run_tool(cmd, a.secs, a.pin)
            m = re.search(r"ERROR SUMMARY: (\d+) errors", err)
            rows.append((name, r, f"{int(m.group(1)):,} errors reported"
                         if m else "?"))
        mt, cand = mutrace_state()
        if mt:
            r, err = run_tool([mt], a.secs, a.pin)
            rows.append(("mutrace", r, "its lock table on stderr"))
        print(f"### Peers on the contended load ({a.secs:g} s, one run "
              f"each) against the medians above")
        print()
        print("| tool | pairs/s | slowdown against glibc | threads' CPU "
              "ns per pair | lock calls that found it held, /s | sleeps, "
              "/s | reports |")
        print("|---|---:|---:|---:|---:|---:|---|")
        for c in CONTENDED:
            if c.name == "glibc alone" or "default" in c.name or \
                    "1/1" in c.name:
                p = med(per_s(c, "pairs"))
                print(f"| {c.name} | {p:,.0f} | {base / p:.2f}× | "
                      f"{med(cpu_per_pair(c.rows)):,.1f} | "
                      f"{med(per_s(c, 'found_held')):,.0f} | "
                      f"{med(per_s(c, 'sleeps')):,.0f} | — |")
        for name, r, rep in rows:
            p = r["pairs"] / r["secs"]
            print(f"| {name} | {p:,.0f} | {base / p:.0f}× | "
                  f"{cpu_per_pair([r])[0]:,.1f} | "
                  f"{r['found_held'] / r['secs']:,.0f} | "
                  f"{r['sleeps'] / r['secs']:,.0f} | {rep} |")
        print()
        if not mt:
            print(f"mutrace: no `mutrace` command here; `apt-cache policy "
                  f"mutrace` gives the candidate {cand or '(none)'} (no "
                  f"such package in this distribution), so it was not "
                  f"measured.")
            print()

    with open("/proc/loadavg") as f:
        load1 = " ".join(f.read().split()[:3])
    print(f"Load average {load0} at the start, {load1} at the end; "
          f"{time.monotonic() - started:.0f} s in all.")


if __name__ == "__main__":
    main()

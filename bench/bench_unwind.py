#!/usr/bin/env python3
"""bench_unwind: the CPU profiler at real stack depths and thread lifetimes.

Four tables, each printed in Markdown:

  handler   SIGPROF handler cost per sample (the agent's own
            cpu.handler.mean_ns in /status) for a thread spinning at stack
            depth 3, 30, 60 and 120, for each PULLPROF_UNWIND mode, during a
            1000 Hz window. Code built without frame pointers
            (tests/cpu/deep), so the fp rows show how little fp sees there.
  overhead  work done per CPU second by 2 threads at depth 30, unprofiled,
            under pullprof and under gperftools' profiler, at 100 and
            1000 Hz; runs interleaved, median and spread (min-max).
  short     short-lived threads (2 at a time, each burning T ms and
            exiting) during a 5 s 100 Hz window: the CPU the profile
            accounts for in short_work() against the CPU those threads used.
  spawn     what starting a thread costs with and without a window
            (the interposed pthread_create arms the thread's timer).
  threads   the agent's own CPU (its pullprof-* threads, from
            /proc/PID/task/*/stat) during a 5 s 100 Hz window, against the
            number of host threads (one busy, the rest blocked).

--before DIR runs every table a second time with DIR's build (a worktree
of an earlier commit, built), interleaved with this one, so both sets of
figures come from the same minutes of this machine. Both run this tree's
tests/cpu/deep, each with its own build's libpullprof (DIR/.libs through
LD_LIBRARY_PATH, which deep's run path yields to): the host's code and its
layout are the same for both, only the library differs.

Usage: bench/bench_unwind.py [--before DIR] [--runs N] [TABLE...]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(TOP, "tests", "integration"))
from pptest import Profile  # noqa: E402  (protoc-based decoder)

LIBPROFILER = next((p for p in ("/usr/lib/x86_64-linux-gnu/libprofiler.so.0",
                                "/usr/lib/x86_64-linux-gnu/libprofiler.so")
                    if os.path.exists(p)), None)
TICK = os.sysconf("SC_CLK_TCK")


class Host:
    """tests/cpu/deep from one build, with the agent on a free port."""

    def __init__(self, top, args, env=None):
        e = dict(os.environ, PULLPROF_LISTEN="127.0.0.1:0",
                 LD_LIBRARY_PATH=os.path.join(top, ".libs"))
        e.update(env or {})
        self.p = subprocess.Popen([os.path.join(TOP, "tests/cpu/deep")] +
                                  [str(a) for a in args], env=e,
                                  stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        first = self.p.stdout.readline().split()
        if len(first) != 2:  # did not start (a mode this build lacks)
            self.p.wait(timeout=30)
            raise OSError("deep did not start")
        self.port = int(first[1])
        self.base = "http://127.0.0.1:%d/debug/pprof" % self.port

    def line(self):
        return self.p.stdout.readline().strip()

    def get(self, path, timeout=120):
        with urllib.request.urlopen(self.base + path, timeout=timeout) as r:
            return r.read()

    def status(self):
        return json.loads(self.get("/status"))

    def wait_window(self):
        while self.status()["cpu"]["windows_open"] < 1:
            time.sleep(0.02)

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=60)


def profile_async(host, seconds, hz):
    out = {}

    def fetch():
        try:
            out["p"] = Profile(host.get("/profile?seconds=%d&hz=%d" %
                                        (seconds, hz)))
        except OSError:  # the host ended the window (fixed work done)
            out["p"] = None
    t = threading.Thread(target=fetch)
    t.start()
    return t, out


def handler_table(builds, runs):
    print("\n### Handler cost per sample (ns), 1000 Hz, no frame pointers\n")
    modes = ["libunwind", "dwarf", "fp"]
    rows = []
    for depth in (3, 30, 60, 120):
        for name, top in builds:
            for mode in modes:
                vals, fast, frames = [], [], []
                for _ in range(runs):
                    try:
                        h = Host(top, ["depth", depth, 1],
                                 {"PULLPROF_UNWIND": mode})
                    except OSError:
                        break
                    h.line()  # ready
                    t, out = profile_async(h, 3, 1000)
                    t.join()
                    st = h.status()["cpu"]
                    h.close()
                    if st["handler"]["calls"] == 0:
                        break
                    vals.append(st["handler"]["mean_ns"])
                    fast.append(st["unwind"].get("fallbacks"))
                    p = out["p"]
                    # Frames in the spinning thread's samples.
                    ds = [len(s.get("location_id", [])) for s in p.samples]
                    frames.append(statistics.median(ds) if ds else 0)
                if not vals:
                    continue  # this build has no such mode
                rows.append((depth, name, mode, statistics.median(vals),
                             min(vals), max(vals),
                             statistics.median(frames)))
    print("| depth | build | unwind | handler ns (median) | spread | "
          "frames captured |")
    print("|---:|---|---|---:|---|---:|")
    for d, n, m, med, lo, hi, fr in rows:
        print("| %d | %s | %s | %d | %d-%d | %d |" % (d, n, m, med, lo, hi,
                                                     fr))
    sys.stdout.flush()


def short_table(builds, runs):
    print("\n### Short-lived threads, 2 at a time, 5 s window at 100 Hz\n")
    print("| lifetime | build | real CPU s | profile s | accounted | "
          "of which in short_work() |")
    print("|---:|---|---:|---:|---:|---:|")
    for life_ms in (1, 5, 20, 100):
        for name, top in builds:
            acc = []
            for _ in range(runs):
                h = Host(top, ["short", life_ms * 1000, 2, 4])
                t, out = profile_async(h, 5, 100)
                h.wait_window()
                h.p.stdin.write("go\n")
                h.p.stdin.flush()
                real = float(h.line().split()[1]) / 1e3
                t.join()
                h.close()
                p = out["p"]
                names = [{f[0] for fs in p.stack(s) for f in fs}
                         for s in p.samples]
                # The threads' CPU: every sample under their start
                # routine; the exact part: those with short_work().
                prof = sum(s["value"][1] for s, n in zip(p.samples, names)
                           if "short_thread" in n) / 1e9
                exact = sum(s["value"][1] for s, n in zip(p.samples, names)
                            if "short_work" in n) / 1e9
                acc.append((real, prof, exact))
            real = statistics.median(a[0] for a in acc)
            prof = statistics.median(a[1] for a in acc)
            exact = statistics.median(a[2] for a in acc)
            print("| %d ms | %s | %.2f | %.2f | %.1f%% | %.1f%% |" %
                  (life_ms, name, real, prof, 100 * prof / real,
                   100 * exact / real))
            sys.stdout.flush()


def agent_cpu(pid):
    """CPU seconds used so far by the agent's threads (pullprof-*)."""
    total = 0
    tdir = "/proc/%d/task" % pid
    for tid in os.listdir(tdir):
        try:
            with open("%s/%s/stat" % (tdir, tid)) as f:
                s = f.read()
        except OSError:
            continue
        name = s[s.index("(") + 1:s.rindex(")")]
        if name.startswith("pullprof"):
            f = s[s.rindex(")") + 2:].split()
            total += (int(f[11]) + int(f[12])) / TICK
    return total


def threads_table(builds, runs):
    print("\n### Agent CPU during a 5 s 100 Hz window, by host threads\n")
    print("| host threads | build | agent CPU s (median) | spread |")
    print("|---:|---|---:|---|")
    for n in (10, 300, 1000, 3000):
        for name, top in builds:
            vals = []
            for _ in range(runs):
                h = Host(top, ["threads", n - 1])
                h.line()  # ready
                before = agent_cpu(h.p.pid)
                t, out = profile_async(h, 5, 100)
                t.join()
                vals.append(agent_cpu(h.p.pid) - before)
                h.close()
            print("| %d | %s | %.2f | %.2f-%.2f |" %
                  (n, name, statistics.median(vals), min(vals), max(vals)))
            sys.stdout.flush()


def spawn_table(builds, runs):
    print("\n### Starting a thread (pthread_create + join of an empty "
          "thread), µs\n")
    print("| build | no window | during a 100 Hz window |")
    print("|---|---:|---:|")
    for name, top in builds:
        res = {False: [], True: []}
        for _ in range(runs):
            for window in (False, True):
                h = Host(top, ["spawn", 20000])
                t = None
                if window:
                    t, _ = profile_async(h, 30, 100)
                    h.wait_window()
                h.p.stdin.write("go\n")
                h.p.stdin.flush()
                res[window].append(float(h.line().split()[1]))
                h.close()
                if t:
                    t.join()
        print("| %s | %.1f | %.1f |" % (name, statistics.median(res[False]),
                                        statistics.median(res[True])))
        sys.stdout.flush()


def fixed_work(top, hz, profiler):
    """One run of 2 threads doing fixed work at depth 30: work per CPU s."""
    args = [os.path.join(TOP, "tests/cpu/deep"), "fixed", 30, 2, 1000000]
    e = dict(os.environ, PULLPROF_LISTEN="127.0.0.1:0",
             LD_LIBRARY_PATH=os.path.join(top, ".libs"))
    if profiler == "gperftools":
        e.update(LD_PRELOAD=LIBPROFILER, CPUPROFILE="/tmp/bench_unwind.prof",
                 CPUPROFILE_FREQUENCY=str(hz))
    p = subprocess.Popen([str(a) for a in args], env=e, text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    port = int(p.stdout.readline().split()[1])
    t = None
    if profiler == "pullprof":
        h = type("H", (), {})()
        h.get = lambda path, timeout=120: urllib.request.urlopen(
            "http://127.0.0.1:%d/debug/pprof%s" % (port, path),
            timeout=timeout).read()
        t, _ = profile_async(h, 30, hz)
        while json.loads(h.get("/status"))["cpu"]["windows_open"] < 1:
            time.sleep(0.02)
    p.stdin.write("go\n")
    p.stdin.flush()
    w = p.stdout.readline().split()  # units U cpu_ms C
    p.stdin.close()
    if t:
        # The window outlives the work; the process ends with it.
        pass
    p.wait(timeout=120)
    return float(w[1]) / float(w[3])


def overhead_table(builds, runs):
    print("\n### Work per CPU second at depth 30, 2 threads "
          "(relative to unprofiled)\n")
    print("| profiler | hz | build | median | spread |")
    print("|---|---:|---|---:|---|")
    for hz in (100, 1000):
        configs = [("none", None)] + [("pullprof", n) for n, _ in builds]
        if LIBPROFILER:
            configs.append(("gperftools", None))
        res = {c: [] for c in configs}
        for _ in range(runs):  # interleaved
            for prof, bname in configs:
                top = dict(builds)[bname] if bname else builds[0][1]
                res[(prof, bname)].append(fixed_work(top, hz, prof))
        base = statistics.median(res[("none", None)])
        for (prof, bname), v in res.items():
            if prof == "none":
                continue
            r = [x / base for x in v]
            print("| %s | %d | %s | %.3f | %.3f-%.3f |" %
                  (prof, hz, bname or "-", statistics.median(r), min(r),
                   max(r)))
        sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("tables", nargs="*",
                    default=["handler", "overhead", "short", "threads",
                             "spawn"])
    a = ap.parse_args()
    builds = [("now", TOP)]
    if a.before:
        builds.insert(0, ("before", os.path.abspath(a.before)))
    print("bench_unwind on %d cores, %s" % (os.cpu_count(),
                                            time.strftime("%Y-%m-%d")))
    for t in a.tables:
        t0 = time.time()
        globals()[t + "_table"](builds, a.runs)
        print("\n(%s: %.0f s)" % (t, time.time() - t0))


if __name__ == "__main__":
    main()

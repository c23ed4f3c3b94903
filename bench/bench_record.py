#!/usr/bin/env python3
"""bench_record: the record (PULLPROF_RECORD), what it costs the host, the
memory it holds, how fast it answers, and what it catches of a burst that
was over before anyone asked, beside the peers' ways of getting the same
answer, in one run.

Four tables, each printed in Markdown, the machine's load with each:

  cost      work per CPU second of 2 threads doing fixed work at stack
            depth 3 and 30 (tests/cpu/deep fixed, bench_unwind's method:
            the threads' own CPU clocks, the handler included), with
            PULLPROF_RECORD=5m at 19 Hz (the default) and at
            PULLPROF_RECORD_HZ=100, relative to the same host with the
            agent and no record; beside it gperftools' profiler left on
            for the whole run at the same rates (CPUPROFILE, the peer that
            samples all the time). Runs interleaved, median (min-max). The
            handler's own figure (/status cpu.handler.mean_ns times the
            samples a busy thread takes a second) is printed with it: at
            these rates it is far below what a ratio of runs can resolve.
            The agent's own threads' CPU (the collector keeps the record)
            is printed per second of the run; then the agent's CPU and
            wake-ups on an idle host (bench/tracework, every thread
            blocked) with and without the record.
  memory    /debug/pprof/record's memory for 1, 8 and 64 busy threads
            (bench/tracework: tw_top -> tw_mid recursing 2..25 deep ->
            tw_leaf, so stacks vary) at 19 Hz: bytes_per_sample, and
            memory.bytes (chunks, stacks) over each minute of burning.
  answer    the time to answer /profile?last=60 and ?last=600 (curl's
            time_total, median of RUNS) on a record of PULLPROF_RECORD=10m.
            Filled in less than 10 minutes: 2 busy threads under
            /profile?hz=1000 windows (the record keeps a window's faster
            samples: about 250 a second a thread, the kernel's tick) until
            it holds the samples of 10 minutes of C busy cores at 19 Hz,
            then 62 s of the same at the record's own 19 Hz; the table
            says what each range held. The peer's answer is a window of
            the same length: 60 s or 600 s.
  burst     a calm host (bench/recordwork: 1 ms of calm_work() every
            50 ms) runs burst_f() for 2 s of CPU at a random moment of a
            calm period; the fraction of burst_f's CPU each approach
            catches, and when its answer was there (after the burst's end):
              record      PULLPROF_RECORD=5m at 19 Hz, ?last=60 read 1 s
                          after the burst (when it is noticed)
              window      pullprof's /profile?seconds=30 opened 1 s after
                          the burst (Go's way: a profile asked for when
                          the spike is noticed)
              gperftools  CPUPROFILESIGNAL: the profiler switched on by a
                          signal 1 s after the burst, off 30 s later
              scrape      a continuous profiler's scrape: ?seconds=15
                          windows back to back all along (Parca,
                          Pyroscope); it catches what its windows covered,
                          when the window holding the burst's end is in.
              scrape from the record
                          the same scraper reading the record instead
                          (PULLPROF_RECORD=5m, 19 Hz): every 15 s
                          ?start=<its last end>&end=<now>, no window held

Usage: bench/bench_record.py [--runs N] [--fill-cores C] [TABLE...]
"""
import argparse
import json
import os
import random
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
sys.path.insert(0, HERE)
# bench_unwind's helpers: gperftools' library and (through it) the
# protoc-based profile decoder.
from bench_unwind import LIBPROFILER  # noqa: E402
from pptest import Profile  # noqa: E402

DEEP = os.path.join(TOP, "tests", "cpu", "deep")
TRACEWORK = os.path.join(HERE, "tracework")
RECORDWORK = os.path.join(HERE, "recordwork")


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def say_load(what):
    print("\n(%s: load average %s, %s UTC)" %
          (what, load(), time.strftime("%H:%M:%S", time.gmtime())))
    sys.stdout.flush()


def agent_cpu(pid):
    """CPU seconds the agent's threads (pullprof-*) used so far: as
    bench_unwind's agent_cpu, from schedstat's nanoseconds (its clock
    ticks are too coarse for a few seconds at 19 Hz)."""
    total = 0
    tdir = "/proc/%d/task" % pid
    for tid in os.listdir(tdir):
        try:
            with open("%s/%s/comm" % (tdir, tid)) as f:
                name = f.read()
            with open("%s/%s/schedstat" % (tdir, tid)) as f:
                ns = int(f.read().split()[0])
        except OSError:
            continue
        if name.startswith("pullprof"):
            total += ns / 1e9
    return total


def fetch(port, path, timeout=900):
    url = "http://127.0.0.1:%d/debug/pprof%s" % (port, path)
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def fetch_json(port, path):
    return json.loads(fetch(port, path))


def cpu_by_function(prof, fn):
    """CPU nanoseconds in samples whose stack holds fn, and in all."""
    hit = total = 0
    for s in prof.samples:
        v = s["value"][1]
        total += v
        if any(f[0] == fn for fs in prof.stack(s) for f in fs):
            hit += v
    return hit, total


def spread(vals, fmt="%.3f"):
    return (fmt + " (" + fmt + "-" + fmt + ")") % (
        statistics.median(vals), min(vals), max(vals))


# --- cost -------------------------------------------------------------------

def fixed_run(depth, units, conf):
    """One run of deep fixed: (work per CPU s, extra) for one
    configuration: None, ("record", hz) or ("gperftools", hz)."""
    e = dict(os.environ, PULLPROF_LISTEN="127.0.0.1:0")
    tmp = None
    if conf and conf[0] == "record":
        e.update(PULLPROF_RECORD="5m", PULLPROF_RECORD_HZ=str(conf[1]))
    elif conf and conf[0] == "gperftools":
        tmp = tempfile.NamedTemporaryFile(suffix=".prof", delete=False)
        tmp.close()
        e.update(LD_PRELOAD=LIBPROFILER, CPUPROFILE=tmp.name,
                 CPUPROFILE_FREQUENCY=str(conf[1]))
    p = subprocess.Popen([DEEP, "fixed", str(depth), "2", str(units)],
                         env=e, text=True, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE)
    port = int(p.stdout.readline().split()[1])
    a0, t0 = agent_cpu(p.pid), time.monotonic()
    st0 = fetch_json(port, "/status")["cpu"]
    p.stdin.write("go\n")
    p.stdin.flush()
    w = p.stdout.readline().split()  # units U cpu_ms C
    wall = time.monotonic() - t0
    extra = {"agent_per_s": (agent_cpu(p.pid) - a0) / wall}
    if conf and conf[0] == "record":
        st = fetch_json(port, "/status")["cpu"]
        rec = fetch_json(port, "/record")
        n = st["samples"] - st0["samples"]
        thread_s = float(w[3]) / 1e3
        extra.update(handler_ns=st["handler"]["mean_ns"],
                     per_thread_s=n / thread_s if thread_s else 0,
                     add_cpu=rec["cost"]["add_cpu_seconds"] / wall,
                     kept=rec["samples"]["added"])
    p.stdin.close()
    p.wait(timeout=120)
    if tmp:
        os.unlink(tmp.name)
    return float(w[1]) / float(w[3]), extra


def cost_table(a):
    units = a.units
    confs = [("agent, no record", None),
             ("record 5m, 19 Hz", ("record", 19)),
             ("record 5m, 100 Hz", ("record", 100))]
    if LIBPROFILER:
        confs += [("gperftools on all along, 19 Hz", ("gperftools", 19)),
                  ("gperftools on all along, 100 Hz", ("gperftools", 100))]
    print("\n### The record's cost: work per CPU second, 2 threads at depth "
          "3 and 30 (tests/cpu/deep fixed, %d units a thread), against the "
          "agent with no record\n" % units)
    print("%d runs of each, interleaved; median (min-max). Handler: "
          "/status cpu.handler.mean_ns; estimate: that times the samples a "
          "busy thread took a CPU second. Agent CPU: its own threads "
          "(the collector keeps the record), per second of the run; record "
          "add: /record cost.add_cpu_seconds per second.\n" % a.runs)
    print("| depth | configuration | work per CPU s vs no record | "
          "samples / thread CPU s | handler ns | estimate | agent CPU | "
          "record add |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for depth in (3, 30):
        res = {n: [] for n, _ in confs}
        for _ in range(a.runs):
            for name, conf in confs:
                res[name].append(fixed_run(depth, units, conf))
        base = statistics.median(r[0] for r in res[confs[0][0]])
        for name, conf in confs:
            rows = res[name]
            ratio = [r[0] / base for r in rows]
            ag = statistics.median(r[1]["agent_per_s"] for r in rows)
            cols = ["—"] * 4
            if conf and conf[0] == "record":
                hn = statistics.median(r[1]["handler_ns"] for r in rows)
                pt = statistics.median(r[1]["per_thread_s"] for r in rows)
                ad = statistics.median(r[1]["add_cpu"] for r in rows)
                cols = ["%.1f" % pt, "%d" % hn,
                        "%.4f%%" % (hn * pt / 1e9 * 100),
                        "%.3f ms/s" % (ad * 1e3)]
            print("| %d | %s | %s | %s | %s | %s | %.2f ms/s | %s |" %
                  (depth, name, "1 (%.3f-%.3f)" % (min(ratio), max(ratio))
                   if conf is None else spread(ratio), cols[0], cols[1],
                   cols[2], ag * 1e3, cols[3]))
        sys.stdout.flush()
    idle_rows(a)
    say_load("cost")


def collector_wakes(pid):
    """Voluntary context switches of the agent's threads so far."""
    total = 0
    tdir = "/proc/%d/task" % pid
    for tid in os.listdir(tdir):
        try:
            with open("%s/%s/comm" % (tdir, tid)) as f:
                name = f.read()
            with open("%s/%s/status" % (tdir, tid)) as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        n = int(line.split()[1])
        except OSError:
            continue
        if name.startswith("pullprof"):
            total += n
    return total


def idle_rows(a):
    """The record on an idle host: what the agent's threads use."""
    secs = a.idle
    print("\nThe agent's threads on an idle host (bench/tracework between "
          "commands: every thread blocked) over %d s, median of %d:\n"
          % (secs, a.runs))
    print("| configuration | agent CPU | agent wake-ups a second |")
    print("|---|---:|---:|")
    confs = [("agent, no record", {}),
             ("record 5m, 19 Hz", {"PULLPROF_RECORD": "5m"}),
             ("record 5m, 100 Hz", {"PULLPROF_RECORD": "5m",
                                    "PULLPROF_RECORD_HZ": "100"})]
    res = {n: [] for n, _ in confs}
    for _ in range(a.runs):
        for name, env in confs:
            e = dict(os.environ, PULLPROF_LISTEN="127.0.0.1:0", **env)
            p = subprocess.Popen([TRACEWORK], env=e, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
            p.stdout.readline()
            time.sleep(1)  # started, first thread scans done
            c0, w0 = agent_cpu(p.pid), collector_wakes(p.pid)
            time.sleep(secs)
            res[name].append(((agent_cpu(p.pid) - c0) / secs,
                              (collector_wakes(p.pid) - w0) / secs))
            p.stdin.close()
            p.wait(timeout=60)
    for name, _ in confs:
        print("| %s | %.3f ms/s | %.0f |" % (
            name, statistics.median(r[0] for r in res[name]) * 1e3,
            statistics.median(r[1] for r in res[name])))
    sys.stdout.flush()


# --- memory -----------------------------------------------------------------

def memory_table(a):
    minutes = a.minutes
    print("\n### The record's memory at 19 Hz: T threads burning through "
          "varied stacks (bench/tracework) for %d min\n" % minutes)
    print("/debug/pprof/record before the burn and after each minute: "
          "memory.bytes is the chunks (16 KiB each, so it moves by whole "
          "chunks), the stacks and the tables; bytes_per_sample a sample's "
          "coded size, its stack apart.\n")
    hdr = ["threads", "host CPU s/min", "samples/min",
           "samples per host CPU s", "bytes_per_sample",
           "coded bytes/min", "stacks live", "memory.stacks",
           "memory.bytes before"]
    hdr += ["bytes, minute %d" % (m + 1) for m in range(minutes)]
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---:|" * len(hdr))
    for threads in (1, 8, 64):
        e = dict(os.environ, PULLPROF_LISTEN="127.0.0.1:0",
                 PULLPROF_RECORD="10m")
        p = subprocess.Popen([TRACEWORK], env=e, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
        port = int(p.stdout.readline().split()[1])
        time.sleep(0.5)
        snaps = [fetch_json(port, "/record")]
        cpu0 = proc_cpu(p.pid)
        p.stdin.write("burn %d %d\n" % (threads, minutes * 60000))
        p.stdin.flush()
        t0 = time.monotonic()
        for m in range(minutes):
            time.sleep(max(0, t0 + 60 * (m + 1) - 0.5 - time.monotonic()))
            snaps.append(fetch_json(port, "/record"))
        p.stdout.readline()  # burnt
        cpu = proc_cpu(p.pid) - cpu0
        last = snaps[-1]
        added = last["samples"]["added"] - snaps[0]["samples"]["added"]
        growth = ["%+d" % (snaps[m + 1]["memory"]["bytes"] -
                           snaps[m]["memory"]["bytes"])
                  for m in range(minutes)]
        print("| %d | %.1f | %d | %.1f | %.2f | %d | %d | %d | %d | %s |" %
              (threads, cpu / minutes, added / minutes, added / cpu,
               last["memory"]["bytes_per_sample"],
               last["memory"]["bytes_per_sample"] * added / minutes,
               last["stacks"]["live"],
               last["memory"]["stacks"], snaps[0]["memory"]["bytes"],
               " | ".join(growth)))
        sys.stdout.flush()
        p.stdin.close()
        p.wait(timeout=60)
    say_load("memory")


def proc_cpu(pid):
    with open("/proc/%d/stat" % pid) as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


# --- answer -----------------------------------------------------------------

def curl_time(port, path):
    out = subprocess.run(
        ["curl", "-s", "-o", "/dev/null", "-w",
         "%{http_code} %{time_total} %{size_download}",
         "http://127.0.0.1:%d/debug/pprof%s" % (port, path)],
        capture_output=True, text=True, check=True).stdout.split()
    if out[0] != "200":
        raise RuntimeError("%s: HTTP %s" % (path, out[0]))
    return float(out[1]), int(out[2])


def answer_table(a):
    e = dict(os.environ, PULLPROF_LISTEN="127.0.0.1:0",
             PULLPROF_RECORD="10m")
    p = subprocess.Popen([TRACEWORK], env=e, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    port = int(p.stdout.readline().split()[1])
    # The fill: windows at 1000 Hz raise the sampler's rate and the record
    # keeps their samples (weighted by their period); 10 s pieces until the
    # record holds what 10 minutes of a.fill_cores busy cores at 19 Hz
    # would give (a loaded machine takes longer, not fewer).
    want = 600 * 19 * a.fill_cores
    t0 = time.monotonic()
    while (fetch_json(port, "/record")["samples"]["kept"] < want and
           time.monotonic() - t0 < 500):
        t = threading.Thread(target=lambda: fetch(
            port, "/profile?seconds=11&hz=1000"))
        t.start()
        while fetch_json(port, "/status")["cpu"]["windows_open"] < 1:
            time.sleep(0.02)
        p.stdin.write("burn 2 10000\n")
        p.stdin.flush()
        p.stdout.readline()
        t.join()
    fill_s = time.monotonic() - t0
    filled = fetch_json(port, "/record")["samples"]["kept"]
    p.stdin.write("burn 2 62000\n")
    p.stdin.flush()
    p.stdout.readline()
    rec = fetch_json(port, "/record")
    print("\n### Answering from the record: /profile?last=N on "
          "PULLPROF_RECORD=10m, median of %d requests (curl time_total)\n"
          % a.runs)
    print("Filled in %.0f s, not 10 minutes: 2 busy threads (tracework, "
          "varied stacks) under 1000 Hz windows until the record held %d "
          "samples (10 minutes of %d busy cores at 19 Hz: %d), then 62 s of "
          "the same at the record's 19 Hz. The record then held %d samples, "
          "%d stacks, %.0f s, %.2f MiB; ?last=600 reads all of it, ?last=60 "
          "the 19 Hz part. The peer's answer is a window of that length.\n" %
          (fill_s, filled, a.fill_cores, want, rec["samples"]["kept"],
           rec["stacks"]["live"], rec["coverage"]["seconds"],
           rec["memory"]["bytes"] / 1048576))
    print("| request | samples in range | answer | time, ms (median, "
          "min-max) | agent CPU per read | a window's answer |")
    print("|---|---:|---:|---:|---:|---:|")
    for last in (60, 600):
        # ?last=60 holds 19 Hz samples, one expiry each; ?last=600 all the
        # record (the fill's samples weigh several expiries).
        prof = Profile(fetch(port, "/profile?last=%d" % last))
        n = (sum(s["value"][0] for s in prof.samples) if last == 60 else
             rec["samples"]["kept"])
        for form, q in (("pprof", ""), ("folded", "&format=folded"),
                        ("trace", None)):
            path = ("/trace?last=%d" % last if q is None else
                    "/profile?last=%d%s" % (last, q))
            curl_time(port, path)  # warm
            r0 = fetch_json(port, "/record")["cost"]
            times, size = [], 0
            for _ in range(a.runs):
                dt, size = curl_time(port, path)
                times.append(dt * 1e3)
            r1 = fetch_json(port, "/record")["cost"]
            per = ((r1["read_cpu_seconds"] - r0["read_cpu_seconds"]) /
                   max(1, r1["reads"] - r0["reads"]))
            print("| `%s` | %d | %.0f KiB | %s | %.1f ms | %d s |" %
                  (path, n, size / 1024, spread(times, "%.1f"), per * 1e3,
                   last))
            sys.stdout.flush()
    p.stdin.close()
    p.wait(timeout=60)
    say_load("answer")


# --- burst ------------------------------------------------------------------

class Burst:
    """bench/recordwork with the agent on a free port."""

    def __init__(self, env):
        e = dict(os.environ, PULLPROF_LISTEN="127.0.0.1:0")
        e.update(env)
        # gperftools says which signal switches it and what it wrote.
        quiet = subprocess.DEVNULL if "CPUPROFILE" in env else None
        self.p = subprocess.Popen([RECORDWORK], env=e, text=True,
                                  stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=quiet)
        self.port = int(self.p.stdout.readline().split()[1])
        self.f = int(self.p.stdout.readline().split()[1], 16)

    def burst(self, ms):
        """Run the burst; (start, end) Unix times and its CPU ns."""
        self.p.stdin.write("burst %d\n" % ms)
        self.p.stdin.flush()
        w = self.p.stdout.readline().split()
        return float(w[1]), float(w[2]), int(w[3])

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=60)


def f_size():
    out = subprocess.run(["nm", "-S", RECORDWORK], capture_output=True,
                         text=True, check=True).stdout
    for line in out.splitlines():
        w = line.split()
        if len(w) == 4 and w[3] == "burst_f":
            return int(w[1], 16)
    raise RuntimeError("no burst_f in " + RECORDWORK)


def gperftools_hits(path, lo, hi):
    """CPU ns in records of a gperftools profile with a PC in [lo, hi),
    and in all (bench_cpu's reading of the format)."""
    data = open(path, "rb").read()
    words = struct.unpack_from("<%dQ" % (len(data) // 8), data)
    if len(words) < 5:
        raise ValueError("not written yet")
    period_ns = words[3] * 1000
    i, hit, total = 5, 0, 0
    while i + 2 < len(words):
        count, n = words[i], words[i + 1]
        if count == 0 and n == 1 and words[i + 2] == 0:
            return hit * period_ns, total * period_ns
        total += count
        if any(lo <= pc < hi for pc in words[i + 2:i + 2 + n]):
            hit += count
        i += 2 + n
    raise ValueError("no trailer yet")


def burst_record(a, calm):
    h = Burst({"PULLPROF_RECORD": "5m"})
    time.sleep(random.uniform(2, calm))
    start, end, cpu = h.burst(a.burst_ms)
    time.sleep(max(0, end + 1 - time.time()))  # noticed
    body = fetch(h.port, "/profile?last=60")
    ready = time.time()
    hit, _ = cpu_by_function(Profile(body), "burst_f")
    h.close()
    return hit / cpu, ready - end


def burst_window(a, calm):
    h = Burst({})
    time.sleep(random.uniform(2, calm))
    start, end, cpu = h.burst(a.burst_ms)
    time.sleep(max(0, end + 1 - time.time()))
    body = fetch(h.port, "/profile?seconds=%d" % a.after)
    ready = time.time()
    hit, _ = cpu_by_function(Profile(body), "burst_f")
    h.close()
    return hit / cpu, ready - end


def burst_gperftools(a, calm, control=False):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cpu.prof")
        h = Burst({"LD_PRELOAD": LIBPROFILER, "CPUPROFILE": out,
                   "CPUPROFILESIGNAL": str(int(signal.SIGUSR2))})
        time.sleep(random.uniform(2, calm))
        if control:  # on before the burst: the reading is right
            os.kill(h.p.pid, signal.SIGUSR2)
            time.sleep(0.5)
        start, end, cpu = h.burst(a.burst_ms)
        if control:
            time.sleep(0.5)
        else:
            time.sleep(max(0, end + 1 - time.time()))
            os.kill(h.p.pid, signal.SIGUSR2)  # on
            time.sleep(a.after)
        os.kill(h.p.pid, signal.SIGUSR2)  # off: the profile is written
        path = out + ".0"
        deadline = time.time() + 10
        while True:  # written by the signal's handler, then closed
            try:
                hit, _ = gperftools_hits(path, h.f, h.f + F_SIZE)
                break
            except (OSError, ValueError):
                if time.time() > deadline:
                    raise
                time.sleep(0.05)
        ready = time.time()
        h.close()
    return hit / cpu, ready - end


def scrape_burst(h, a, calm, scrape):
    """A burst while a scraper runs: scrape(stop, got) appends
    (returned at, covered up to, profile) until stop is set. Returns the
    share of the burst's CPU in the profiles that began before its end,
    and how long after the end the first profile covering it returned."""
    got = []
    stop = threading.Event()
    t = threading.Thread(target=scrape, args=(stop, got))
    t.start()
    time.sleep(random.uniform(2, calm))
    start, end, cpu = h.burst(a.burst_ms)
    while not got or got[-1][1] < end:
        time.sleep(0.05)
    stop.set()
    hit, ready = 0, None
    for at, upto, prof in list(got):
        if prof.field(prof.raw, "time_nanos") / 1e9 > end:
            continue
        hit += cpu_by_function(prof, "burst_f")[0]
        if upto >= end and ready is None:
            ready = at
    h.close()  # ends a window in flight, and its scraper with it
    t.join()
    return hit / cpu, ready - end


def burst_scrape(a, calm):
    """Windows of ?seconds=15, back to back."""
    h = Burst({})

    def scrape(stop, got):
        while not stop.is_set():
            try:
                body = fetch(h.port, "/profile?seconds=15")
            except OSError:
                return
            now = time.time()
            got.append((now, now, Profile(body)))
    return scrape_burst(h, a, calm, scrape)


def burst_scrape_record(a, calm):
    """A scraper that reads the record instead of holding windows open:
    every 15 s, ?start=<its last end>&end=<now>, so the ranges tile."""
    h = Burst({"PULLPROF_RECORD": "5m"})

    def scrape(stop, got):
        last = time.time()
        while not stop.wait(max(0, last + 15 - time.time())):
            now = time.time()
            try:
                body = fetch(h.port, "/profile?start=%.6f&end=%.6f" %
                             (last, now))
            except OSError:
                return
            got.append((time.time(), now, Profile(body)))
            last = now
    return scrape_burst(h, a, calm, scrape)


F_SIZE = 0


def burst_table(a):
    global F_SIZE
    F_SIZE = f_size()
    calm = a.calm
    approaches = [("record, ?last=60 read 1 s after", burst_record),
                  ("window, ?seconds=%d opened 1 s after" % a.after,
                   burst_window)]
    if LIBPROFILER:
        approaches.append(("gperftools, CPUPROFILESIGNAL on 1 s after, "
                           "off %d s later" % a.after, burst_gperftools))
    approaches.append(("scrape, ?seconds=15 back to back", burst_scrape))
    approaches.append(("scrape from the record, ?start=&end= every 15 s",
                       burst_scrape_record))
    if LIBPROFILER:
        approaches.append(("(control: gperftools on from before the "
                           "burst to after it)",
                           lambda a, calm: burst_gperftools(a, calm, True)))
    res = {n: [] for n, _ in approaches}
    for _ in range(a.runs):
        for name, fn in approaches:
            res[name].append(fn(a, calm))
    print("\n### A %d ms CPU burst in burst_f() at a random moment of a "
          "calm period (bench/recordwork): what each approach catches\n"
          % a.burst_ms)
    print("%d runs of each, interleaved; the burst %.0f-%.0f s into a "
          "calm host; median (min-max). Caught: burst_f's CPU in the "
          "answer over the CPU the burst used (its thread's clock). "
          "Answer there: seconds from the burst's end to the answer in "
          "hand.\n" % (a.runs, 2, calm))
    print("| approach | burst_f's CPU caught | answer there after the "
          "burst |")
    print("|---|---:|---:|")
    for name, _ in approaches:
        fr = [r[0] * 100 for r in res[name]]
        lat = [r[1] for r in res[name]]
        print("| %s | %s | %s s |" % (name, spread(fr, "%.1f%%"),
                                      spread(lat, "%.1f")))
    sys.stdout.flush()
    say_load("burst")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--units", type=int, default=1500000,
                    help="cost: units of work a thread")
    ap.add_argument("--idle", type=int, default=10,
                    help="cost: seconds of an idle host")
    ap.add_argument("--minutes", type=int, default=2,
                    help="memory: minutes of burning")
    ap.add_argument("--fill-cores", type=int, default=4,
                    help="answer: fill the record with the samples of 10 "
                    "minutes of this many busy cores at 19 Hz")
    ap.add_argument("--calm", type=float, default=15,
                    help="burst: the burst comes 2..CALM s in")
    ap.add_argument("--after", type=int, default=30,
                    help="burst: the window opened after it, seconds")
    ap.add_argument("--burst-ms", type=int, default=2000)
    ap.add_argument("tables", nargs="*",
                    default=["cost", "memory", "answer", "burst"])
    a = ap.parse_args()
    for prog in (DEEP, TRACEWORK, RECORDWORK):
        if not os.path.exists(prog):
            sys.exit("%s is missing: make %s" %
                     (prog, os.path.relpath(prog, TOP)))
    print("bench_record on %d cores, %s; load average %s at the start" %
          (os.cpu_count(), time.strftime("%Y-%m-%d %H:%M UTC",
                                         time.gmtime()), load()))
    for t in a.tables:
        t0 = time.time()
        globals()[t + "_table"](a)
        print("\n(%s: %.0f s)" % (t, time.time() - t0))
        sys.stdout.flush()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""bench_threads: what a thread dump and a wall-clock profile cost the
host, by its thread count, against gdb's `thread apply all bt`.

The host is bench/threadswork: N threads of its own (the main thread, one
worker doing CPU work in ~20 µs units, and N-2 threads blocked for good in
pthread_cond_wait, nanosleep, read on a pipe and epoll_wait, under
block_in_condvar/_nanosleep/_read/_epoll), plus the agent's threads. For
each N it measures, each phase against quiet time of the phase's length
(half just before, half just after it, so a change in the machine's other
load during the phase weighs on both alike):

  dumps   /debug/pprof/goroutine?debug=2 (text, one block per thread) and
          plain /goroutine (gzipped pprof), requested back to back for
          SECS seconds (at least 3 requests): the request's wall time
          (median, min-max, and the first one, which also sets up the
          agent's unwind tables and symbols), the agent's CPU per dump,
          the worker's work rate against the quiet one ("host work
          lost") and its work per CPU second of its own against the
          quiet one (unchanged when all that is lost is CPU time others
          took), the worker's longest gap between two units (its max
          stall) against the quiet one, the times the worker was
          stopped ("worker stops": its voluntary context switches; it
          makes no system call, so nothing else puts it to sleep), and
          the time it was stopped: neither on a CPU nor waiting for one
          (its /proc schedstat against the clock; only as exact as a
          run-queue wait under way at either end of the phase, which
          schedstat counts only once it ends).
  gdb     the peer, on the same host: `gdb -p PID -batch -ex 'thread apply
          all bt'` (with -nx and debuginfod off, so no network and no
          user init file), RUNS times back to back: its wall time, gdb's
          own CPU, and the same measures of the worker meanwhile. gdb
          stops every thread with ptrace for the whole walk; pullprof
          stops none.
  wall    /debug/pprof/wall?seconds=WALL&hz=99 and hz=1000: the agent's
          CPU per second of window, the same measures of the worker, and
          the window's ticks, late ticks and samples (threads looked at)
          from /status.

The agent's CPU is the process's CPU (its CPU clock, which keeps the time
of threads that ended, such as a window's pullprof-wall) less that of the
host's own threads (/proc/PID/task/TID/schedstat of every thread not named
pullprof-*), over the phase. "found" is how many of the N-2 blocked
threads the first debug=2 dump (or gdb's output) shows in their
block_in_* function. The client (this script) runs on the same machine,
so its own CPU (asking and reading answers, "client CPU") also competes
with the worker.

Usage: bench/bench_threads.py [--secs S] [--wall S] [--gdb-runs R]
                              [COUNT...]        (default 10 300 1000 3000)
"""
import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
THREADSWORK = os.path.join(HERE, "threadswork")
GDB = "/usr/bin/gdb"


class Host:
    """bench/threadswork N with the agent on a free port."""

    def __init__(self, n):
        e = dict(os.environ, PULLPROF_LISTEN="127.0.0.1:0")
        self.p = subprocess.Popen([THREADSWORK, str(n - 2)], env=e,
                                  stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        try:
            self.port = int(self.p.stdout.readline().split()[1])
            if self.p.stdout.readline().strip() != "ready":
                raise OSError("threadswork did not get ready")
            wtid = next(int(t) for t in os.listdir(
                "/proc/%d/task" % self.p.pid) if self.comm(t) == "worker")
            self.worker = "/proc/%d/task/%d/schedstat" % (self.p.pid, wtid)
        except Exception:
            self.close()
            raise
        self.base = "http://127.0.0.1:%d/debug/pprof" % self.port

    def get(self, path, timeout=300):
        with urllib.request.urlopen(self.base + path, timeout=timeout) as r:
            return r.read()

    def status(self):
        return json.loads(self.get("/status"))

    def comm(self, tid):
        with open("/proc/%d/task/%s/comm" % (self.p.pid, tid)) as f:
            return f.read().strip()

    def stats(self):
        """(units so far, longest gap in ms since the last call, time)."""
        self.p.stdin.write("stats\n")
        self.p.stdin.flush()
        w = self.p.stdout.readline().split()  # units U maxgap_us G
        return int(w[1]), int(w[3]) / 1e3, time.monotonic()

    def worker_sched(self):
        """The worker's seconds on a CPU and waiting for one so far, and
        the times it left its CPU of its own accord (voluntary context
        switches): it makes no system call, so only a stop (ptrace) or
        a sleep forced on it (a lock in a page fault) counts there."""
        with open(self.worker) as f:
            w = f.read().split()
        with open(self.worker.replace("schedstat", "status")) as f:
            vol = next(int(line.split()[1]) for line in f
                       if line.startswith("voluntary_ctxt_switches"))
        return int(w[0]) / 1e9, int(w[1]) / 1e9, vol

    def process_cpu(self):
        """The whole process's CPU seconds, threads that ended included,
        in ns from its CPU clock (clock_getcpuclockid's encoding of a
        pid: CPUCLOCK_SCHED of the thread group), not /proc's ticks."""
        return time.clock_gettime(((~self.p.pid) << 3) | 2)

    def host_cpu(self):
        """CPU seconds of the live threads that are not the agent's."""
        total = 0
        tdir = "/proc/%d/task" % self.p.pid
        for tid in os.listdir(tdir):
            try:
                if self.comm(tid).startswith("pullprof"):
                    continue
                with open("%s/%s/schedstat" % (tdir, tid)) as f:
                    total += int(f.read().split()[0]) / 1e9
            except OSError:
                continue  # ended meanwhile
        return total

    def agent_cpu(self):
        return self.process_cpu() - self.host_cpu()

    def close(self):
        """End the host whatever state it is in (even stopped by gdb)."""
        if self.p.poll() is not None:
            return
        try:
            os.kill(self.p.pid, signal.SIGCONT)
            self.p.stdin.close()
            self.p.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            self.p.kill()
            self.p.wait(timeout=20)


class Phase:
    """The worker's rate and longest gap over a phase, against quiet
    time of the same total length split before and after it (so a change
    in the machine's other load during the phase weighs on both), and
    the agent's and this client's CPU over the phase."""

    def __init__(self, host, secs):
        self.h, self.quiet = host, secs / 2
        self.q0 = self.quiet_slice()
        self.c0 = host.process_cpu(), host.host_cpu(), time.process_time()
        self.u0, _, self.t0 = host.stats()  # also resets the gap
        self.w0 = host.worker_sched()

    def quiet_slice(self):
        """(units, seconds, longest gap, the worker's CPU seconds)."""
        u0, _, t0 = self.h.stats()
        w0 = self.h.worker_sched()[0]
        time.sleep(self.quiet)
        u1, gap, t1 = self.h.stats()
        return u1 - u0, t1 - t0, gap, self.h.worker_sched()[0] - w0

    def end(self):
        u1, self.gap, t1 = self.h.stats()
        w1 = self.h.worker_sched()
        c1 = self.h.process_cpu(), self.h.host_cpu(), time.process_time()
        # Neither running nor waiting for a CPU: stopped (by ptrace).
        # Right to a scheduler tick or so (a running thread's CPU time
        # moves at ticks; a wait is counted when it ends). Another
        # process's thread has no CPU clock to read more exactly.
        self.stopped = max(0.0, (t1 - self.t0) - (w1[0] - self.w0[0]) -
                           (w1[1] - self.w0[1]))
        self.stops = w1[2] - self.w0[2]
        q1 = self.quiet_slice()
        self.rate = (u1 - self.u0) / (t1 - self.t0)
        self.base_rate = (self.q0[0] + q1[0]) / (self.q0[1] + q1[1])
        self.base_gap = max(self.q0[2], q1[2])
        self.lost = 1 - self.rate / self.base_rate
        # Work per CPU second of the worker's: whether what is lost is
        # CPU time taken by others (unchanged) or the worker's own
        # running slowed (caches, interrupts: lower).
        per_cpu = (u1 - self.u0) / max(w1[0] - self.w0[0], 1e-9)
        base_per_cpu = (self.q0[0] + q1[0]) / max(self.q0[3] + q1[3], 1e-9)
        self.per_cpu = per_cpu / base_per_cpu - 1
        self.agent = (c1[0] - self.c0[0]) - (c1[1] - self.c0[1])
        self.client = c1[2] - self.c0[2]
        return self


def found_in(text, sep):
    """Blocks of a dump (split at sep) that show a block_in_* frame."""
    return sum(1 for b in text.split(sep) if "block_in_" in b)


def dumps(h, secs, path):
    """Back-to-back requests of path for secs (at least 3)."""
    ph = Phase(h, secs)
    times, first = [], None
    while len(times) < 3 or time.monotonic() - ph.t0 < secs:
        t = time.monotonic()
        body = h.get(path)
        times.append(time.monotonic() - t)
        if first is None:
            first = body
    ph.end()
    return ph, times, first


def run_gdb(h, secs, runs):
    """gdb's thread apply all bt, runs times back to back."""
    ph = Phase(h, secs)
    times, out, cpu = [], None, 0.0
    for _ in range(runs):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.monotonic()
        try:
            p = subprocess.run(
                [GDB, "-nx", "-batch", "-p", str(h.p.pid),
                 "-iex", "set debuginfod enabled off",
                 "-ex", "thread apply all bt"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                timeout=600)
        finally:
            # A gdb killed by the timeout may leave the host stopped.
            os.kill(h.p.pid, signal.SIGCONT)
        times.append(time.monotonic() - t)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu += (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        if out is None:
            out = p.stdout
            if "block_in_" not in out:
                sys.stderr.write("gdb: %s\n" % p.stderr.strip()[-500:])
    ph.end()
    return ph, times, cpu / runs, out


def wall(h, secs, hz):
    ph = Phase(h, secs)
    s0 = h.status()["threads"]["wall"]
    t = time.monotonic()
    h.get("/wall?seconds=%d&hz=%d" % (secs, hz))
    answer = time.monotonic() - t
    s1 = h.status()["threads"]["wall"]
    ph.end()
    d = {k: s1[k] - s0[k] for k in ("ticks", "late_ticks", "samples")}
    return ph, answer, d


def ms(x):
    return "%.1f" % (x * 1e3) if x < 10 else "%.0f" % (x * 1e3)


def pct(x):
    return "%+.1f%%" % (100 * x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--secs", type=float, default=3,
                    help="each baseline and dump phase (s)")
    ap.add_argument("--wall", type=int, default=5,
                    help="the wall-clock window (s)")
    ap.add_argument("--gdb-runs", type=int, default=3)
    ap.add_argument("counts", nargs="*", type=int,
                    default=[10, 300, 1000, 3000])
    a = ap.parse_args()
    if not os.access(GDB, os.X_OK):
        sys.stderr.write("bench_threads: no %s, the peer is left out\n" % GDB)
    print("bench_threads on %d cores, %s; host: main + worker + N-2 "
          "blocked threads (64 KiB stacks)\n" %
          (os.cpu_count(), time.strftime("%Y-%m-%d")))
    load0 = os.getloadavg()[0]
    dump_rows, wall_rows = [], []
    for n in a.counts:
        t_n = time.monotonic()
        h = Host(n)
        try:
            for what, path in (("pullprof debug=2", "/goroutine?debug=2"),
                               ("pullprof pprof", "/goroutine")):
                ph, times, first = dumps(h, a.secs, path)
                found = (found_in(first.decode(), "\n\nthread ")
                         if "debug=2" in path else None)
                dump_rows.append((n, what, times, ph.agent / len(times),
                                  ph.client / len(times), ph, found,
                                  len(first)))
            if os.access(GDB, os.X_OK):
                ph, times, cpu, out = run_gdb(h, a.secs, a.gdb_runs)
                dump_rows.append((n, "gdb thread apply all bt", times, cpu,
                                  ph.client / len(times), ph,
                                  found_in(out or "", "\nThread "),
                                  len(out or "")))
            for hz in (99, 1000):
                ph, answer, d = wall(h, a.wall, hz)
                wall_rows.append((n, hz, ph, answer, d))
        finally:
            h.close()
        sys.stderr.write("bench_threads: %d threads done in %.0f s\n" %
                         (n, time.monotonic() - t_n))

    print("### One thread dump: its cost (requested back to back for %g s; "
          "gdb: %d runs)\n" % (a.secs, a.gdb_runs))
    print("| host threads | dumper | wall ms (median) | min-max | first | "
          "dumper CPU ms per dump | client CPU ms per dump | answer KiB | "
          "blocked threads found |")
    print("|---:|---|---:|---|---:|---:|---:|---:|---:|")
    for n, what, times, cpu, client, ph, found, size in dump_rows:
        print("| %d | %s | %s | %s-%s | %s | %s | %s | %.0f | %s |"
              % (n, what, ms(statistics.median(times)), ms(min(times)),
                 ms(max(times)), ms(times[0]), ms(cpu), ms(client),
                 size / 1024,
                 "—" if found is None else "%d/%d" % (found, n - 2)))
    print("\n### One thread dump: what the host's worker felt\n")
    print("| host threads | dumper | dumps | host work lost | "
          "work per worker CPU s | max stall ms, quiet | "
          "max stall ms, during | worker stops | "
          "worker stopped ms per dump |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for n, what, times, cpu, client, ph, found, size in dump_rows:
        print("| %d | %s | %d | %s | %s | %.1f | %.1f | %d | %s |"
              % (n, what, len(times), pct(ph.lost), pct(ph.per_cpu),
                 ph.base_gap, ph.gap, ph.stops,
                 ms(ph.stopped / len(times))))
    print("\n### Wall-clock profile, %d s window: its cost\n" % a.wall)
    print("| host threads | hz | agent CPU ms per s of window | ticks | "
          "late ticks | samples (threads looked at) | answer s |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n, hz, ph, answer, d in wall_rows:
        print("| %d | %d | %.1f | %d | %d | %d | %.2f |"
              % (n, hz, ph.agent / a.wall * 1e3, d["ticks"],
                 d["late_ticks"], d["samples"], answer))
    print("\n### Wall-clock profile, %d s window: what the host's worker "
          "felt\n" % a.wall)
    print("| host threads | hz | host work lost | work per worker CPU s | "
          "max stall ms, quiet | max stall ms, during | worker stops | "
          "worker stopped ms |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, hz, ph, answer, d in wall_rows:
        print("| %d | %d | %s | %s | %.1f | %.1f | %d | %s |"
              % (n, hz, pct(ph.lost), pct(ph.per_cpu), ph.base_gap, ph.gap,
                 ph.stops, ms(ph.stopped)))
    print("\nLoad average (1 min) at the start %.2f, at the end %.2f" %
          (load0, os.getloadavg()[0]))

if __name__ == "__main__":
    main()

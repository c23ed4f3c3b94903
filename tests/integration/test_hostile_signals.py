"""Hosts that use signals themselves (issue 27, items 5 and 6), each a real
process (tests/hostile/sighost) with libpullprof preloaded: the host's
signal dispositions are exactly as before after a window (and what it
execs inherits them), a host's own SIGPROF profiler keeps all its ticks and
never gets pullprof's, a host that resets every disposition during a window
survives and the window says why it stopped, a host with a SIGURG handler
of its own gets none of pullprof's, and hosts that block every signal and
read them with signalfd or sigwait read none of pullprof's while the
profile says what could not be sampled."""
import os
import re
import tempfile
import threading
import time

import pptest
from pptest import (BUILD, Proc, Profile, curl, eq, ok, preload_env, run,
                    until)

SIGHOST = os.path.join(BUILD, "tests", "hostile", "sighost")
JUMPHOST = os.path.join(BUILD, "tests", "hostile", "jumphost")
BLOCKED_FRAME = "[pullprof: not sampled, the thread blocks the signal]"
SIGPROF_BIT, SIGURG_BIT = 1 << 26, 1 << 22


class SigHost(Proc):
    def __init__(self, env=None, exe=SIGHOST):
        super().__init__([exe], env=preload_env(
            PULLPROF_LISTEN="127.0.0.1:0", **(env or {})))
        m = self.wait_line(self.err_lines,
                           r"serving http://127\.0\.0\.1:(\d+)/debug/pprof/",
                           timeout=30)
        self.port = int(m.group(1)) if m else None
        self.base = f"http://127.0.0.1:{self.port}/debug/pprof"

    def cmd(self, line, timeout=15):
        return self.ask(line, timeout)

    def status(self):
        r = curl(f"{self.base}/status")
        return r.json()["cpu"] if r.status == 200 else {}

    def sig_masks(self):
        with open(f"/proc/{self.pid}/status") as f:
            text = f.read()
        return {k: int(re.search(k + r":\s*([0-9a-f]+)", text).group(1), 16)
                for k in ("SigIgn", "SigCgt", "SigBlk")}

    def cpu_ns(self):
        """The CPU time of all the process's threads, in ns (schedstat:
        exact, where utime + stime count whole clock ticks)."""
        total = 0
        for tid in os.listdir(f"/proc/{self.pid}/task"):
            try:
                with open(f"/proc/{self.pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except OSError:
                pass
        return total

    def host_cpu_ns(self):
        """The CPU time of the host's own threads (not pullprof's), in
        ns."""
        total = 0
        for tid in os.listdir(f"/proc/{self.pid}/task"):
            try:
                with open(f"/proc/{self.pid}/task/{tid}/comm") as f:
                    if f.read().startswith("pullprof"):
                        continue
                with open(f"/proc/{self.pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except OSError:
                pass
        return total

    def quit(self):
        try:
            self.cmd("quit")
        except OSError:  # it is gone (killed)
            pass
        try:
            return self.p.wait(10)
        except Exception:
            self.p.kill()
            return None


def comments(prof):
    return [prof.s(i) for i in prof.raw.get("comment", [])]


def frame_value(prof, name):
    """The cpu nanoseconds of samples whose leaf is the function name."""
    total = 0
    for s in prof.samples:
        st = prof.stack(s)
        if st and st[0] and st[0][0][0] == name:
            total += s["value"][1]
    return total


def stack_value(prof, name):
    """The cpu nanoseconds of samples with the function name anywhere in
    their stack (under TSan the leaf is often its instrumentation)."""
    total = 0
    for s in prof.samples:
        if any(f[0] == name for loc in prof.stack(s) for f in loc):
            total += s["value"][1]
    return total


def thread_samples(prof, prefix):
    return sum(s["value"][0] for s in prof.samples
               if str(prof.labels(s).get("thread_name", "")).startswith(prefix))


def in_background(url, timeout=60):
    res = {}
    t = threading.Thread(target=lambda: res.update(r=curl(url, timeout=timeout)),
                         daemon=True)
    t.start()
    return t, res


def threads_cpu(pid, prefix):
    """CPU seconds the threads named prefix* used so far; prefix None:
    every thread but the agent's."""
    if prefix is None:
        return pptest.threads_cpu(
            pid, lambda tid, name: not name.startswith("pullprof"))
    return pptest.threads_cpu(pid,
                              lambda tid, name: name.startswith(prefix))


def idle(h):
    return until(lambda: h.status().get("timer_mode") == "off" and
                 h.status().get("windows_open") == 0, timeout=30)


def answered(t, res, name):
    """The answer of a window opened in the background (in_background),
    once it ends: checked to be 200 under name; None when it is not."""
    t.join(60)
    r = res.get("r")
    eq(r and r.status, 200, name)
    return r if r and r.status == 200 else None


def ticks_on(h, name):
    """The host's own profiler goes on ticking (ITIMER_PROF, its handler)."""
    t0 = int(h.cmd("ticks").split()[1])
    ok(until(lambda: int(h.cmd("ticks").split()[1]) > t0 + 10, timeout=20),
       name)


def test_disposition_restored():
    h = SigHost()
    ok(h.port, "the host serves", h.stderr_text())
    before = h.sig_masks()
    with tempfile.TemporaryDirectory() as d:
        eq(h.cmd(f"exec {d}/before"), "exited 0", "the host execs cat")
        r = curl(f"{h.base}/profile?seconds=1")
        eq(r.status, 200, "a 1 s window: 200")
        ok(idle(h), "sampling is off after the window")
        after = h.sig_masks()
        eq(hex(after["SigIgn"]), hex(before["SigIgn"]),
           "SigIgn as before the window (no signal left ignored)")
        eq(hex(after["SigCgt"]), hex(before["SigCgt"]),
           "SigCgt as before the window (no handler left)")
        eq(h.cmd(f"exec {d}/after"), "exited 0", "the host execs cat again")
        ign = {}
        for name in ("before", "after"):
            with open(f"{d}/{name}") as f:
                ign[name] = re.search(r"SigIgn:\s*(\S+)", f.read()).group(1)
        eq(ign["after"], ign["before"],
           "a program the host execs inherits the host's dispositions")
    eq(h.quit(), 0, "the host exits 0")


def test_own_profiler():
    """A host with its own SIGPROF handler and ITIMER_PROF: its ticks per
    CPU tick stay what they are before, during and after windows, whether
    its profiler started before a window or during one."""
    h = SigHost()
    eq(h.cmd("burn 2"), "ok", "2 burner threads")

    def rate(seconds):
        t0, c0 = int(h.cmd("ticks").split()[1]), h.cpu_ns()
        time.sleep(seconds)
        t1, c1 = int(h.cmd("ticks").split()[1]), h.cpu_ns()
        # ITIMER_PROF at 10 ms of process CPU: one tick per 10 ms of CPU.
        # The kernel merges an expiry into one still pending, so a thread
        # slow to take it costs ticks; pullprof's signals reaching the
        # handler would show in the other count ("ticks T O").
        return (t1 - t0) / ((c1 - c0) / 1e7) if c1 > c0 else 0

    def inside(seconds):
        """The rate over a measure that lies inside the open window (a
        window that ended meanwhile would measure the profile's build)."""
        r = rate(seconds)
        return r, h.status().get("windows_open") == 1

    eq(h.cmd("prof"), "ok", "the host starts its own profiler")
    before = rate(1.0)
    ok(0.6 < before < 1.4, "before any window: one tick per 10 ms of CPU",
       before)
    # Its profiler is started again during a window.
    t, res = in_background(f"{h.base}/profile?seconds=6")
    ok(until(lambda: h.status().get("samples", 0) > 0, timeout=20),
       "the window samples")
    eq(h.cmd("prof"), "ok", "the host starts its profiler again mid-window")
    during, open_ = inside(1.0)
    ok(open_, "the measure lies inside the window")
    r = answered(t, res, "the window ends 200")
    if r:
        prof = Profile(r.body)
        ok(thread_samples(prof, "burn-") > 0, "the burners are sampled")
    ok(idle(h), "sampling is off after the window")
    after = rate(1.0)
    print(f"# ticks per 10 ms of CPU: before {before:.2f}, during "
          f"{during:.2f}, after {after:.2f}", flush=True)
    ok(0.6 < during < 1.4,
       "during the window the host's handler gets its own ticks only "
       "(ticks per 10 ms of CPU)", during)
    ok(0.6 < after < 1.4,
       "after the window the host's handler still gets its ticks", after)
    masks = h.sig_masks()
    ok(masks["SigCgt"] & SIGPROF_BIT, "its SIGPROF handler is in place")

    # A window opened while its profiler runs: shared, not refused.
    t, res = in_background(f"{h.base}/profile?seconds=6")
    ok(until(lambda: h.status().get("samples", 0) > 0 and
             h.status().get("windows_open") == 1, timeout=20),
       "a window opens beside the host's profiler")
    during, open_ = inside(1.0)
    ok(open_, "the measure lies inside the window")
    r = answered(t, res, "a window beside the host's profiler: 200")
    if r:
        ok(thread_samples(Profile(r.body), "burn-") > 0,
           "the burners are sampled")
    ok(0.6 < during < 1.4, "the host's ticks per 10 ms of CPU during it",
       during)
    st = h.status()
    eq(st.get("foreign_signals", 0), 0,
       "pullprof's handler saw none of the host's signals")
    eq(int(h.cmd("ticks").split()[2]), 0,
       "the host's handler saw no SIGPROF but its own ITIMER_PROF's")
    eq(h.quit(), 0, "the host exits 0")


def test_reset_during_window():
    h = SigHost()
    eq(h.cmd("burn 2"), "ok", "2 burner threads")
    # A window long enough to be open whenever the reset comes, however
    # slowly a busy machine runs the host: the reset ends it.
    t, res = in_background(f"{h.base}/profile?seconds=60")
    ok(until(lambda: h.status().get("samples", 0) > 20, timeout=50),
       "the window samples")
    eq(h.cmd("reset"), "ok", "the host resets every disposition to SIG_DFL")
    t.join(60)
    r = res.get("r")
    ok(h.p.poll() is None, "the host is alive",
       f"exit status {h.p.returncode}")
    eq(r and r.status, 200, "the window is answered")
    if r and r.status == 200:
        prof = Profile(r.body)
        c = " | ".join(comments(prof))
        ok("sampling stopped" in c and "SIG_DFL" in c,
           "the profile says sampling stopped and why", c)
        d = prof.raw["duration_nanos"][0]
        ok(d < 60e9, "its duration is the time sampled", d)
        pid_ = r.header("X-Pullprof-Profile-Id")
        txt = curl(f"{h.base}/profile?id={pid_}&debug=1") if pid_ else None
        ok(txt and txt.status == 200 and "sampling stopped" in txt.text,
           "the text form says so too", txt and txt.text[-2000:])
    ok(idle(h), "sampling is off")
    ok("CPU sampling stopped" in h.stderr_text(), "stderr says it once",
       h.stderr_text())
    # The host ran on: a new window takes the signal again.
    r = curl(f"{h.base}/profile?seconds=1")
    eq(r.status, 200, "a window after the reset: 200")
    if r.status == 200:
        ok(thread_samples(Profile(r.body), "burn-") > 0, "and samples")
    ok(idle(h), "sampling is off again")
    eq(h.quit(), 0, "the host exits 0")


def test_sigurg_host():
    """A host with its own SIGURG handler (a Go runtime has one): pullprof
    samples with SIGPROF, and none of its signals reach the host's
    handler; with SIGPROF taken too, a 409 naming both."""
    h = SigHost()
    eq(h.cmd("burn 1"), "ok", "a burner thread")
    eq(h.cmd("urg"), "ok", "the host installs its own SIGURG handler")
    # The signal is read from a status taken while the window is open and
    # has samples (it is null once sampling is off: a short window may be
    # over before a busy machine answers the next request).
    t, res = in_background(f"{h.base}/profile?seconds=3")
    seen = {}

    def open_and_sampled():
        seen.clear()
        seen.update(h.status())
        return seen.get("windows_open") == 1 and seen.get("samples", 0) > 0
    ok(until(open_and_sampled, timeout=20), "the window samples", seen)
    eq(seen.get("signal"), "SIGPROF", "pullprof samples with SIGPROF")
    t.join(60)
    eq(res.get("r") and res["r"].status, 200, "the window: 200")
    eq(h.cmd("urgs"), "urgs 0", "the host's SIGURG handler got nothing")
    ok(idle(h), "sampling is off")
    # Its own SIGPROF profiler starts during a window on SIGPROF: the
    # window stops and says why, the host keeps its handler and ticks.
    # Open (samples counts since the start: the first window's count
    # alone says nothing of this one) and long enough to be open whenever
    # the host's profiler starts on a busy machine: that ends it.
    before = h.status().get("samples", 0)
    t, res = in_background(f"{h.base}/profile?seconds=60")
    ok(until(lambda: h.status().get("windows_open") == 1 and
             h.status().get("samples", 0) > before + 30, timeout=50),
       "a second window samples")
    eq(h.cmd("prof"), "ok", "the host starts its own SIGPROF profiler")
    r = answered(t, res, "the window is answered")
    if r:
        c = " | ".join(comments(Profile(r.body)))
        ok("sampling stopped" in c and "SIGPROF" in c,
           "the profile says sampling stopped and why", c)
    ok(idle(h), "sampling is off")
    ticks_on(h, "the host's profiler ticks on")
    r = curl(f"{h.base}/profile?seconds=1")
    eq(r.status, 409, "SIGURG and SIGPROF both the host's: 409")
    ok("SIGURG" in r.text and "SIGPROF" in r.text, "the 409 names both",
       r.text)
    eq(h.quit(), 0, "the host exits 0")


def test_sigurg_handler_mid_window():
    """A host that installs a SIGURG handler of its own during a window:
    sampling stops within the collector's check (10 ms), the window says
    why, the host's handler gets nothing from then on, and the next window
    samples with SIGPROF."""
    h = SigHost()
    eq(h.cmd("burn 1"), "ok", "a burner thread")
    t, res = in_background(f"{h.base}/profile?seconds=60")
    ok(until(lambda: h.status().get("windows_open") == 1 and
             h.status().get("samples", 0) > 20, timeout=50),
       "the window samples")
    eq(h.status().get("signal"), "SIGURG", "with SIGURG")
    eq(h.cmd("urg"), "ok", "the host installs its own SIGURG handler")
    r = answered(t, res, "the window is answered")
    if r:
        c = " | ".join(comments(Profile(r.body)))
        ok("sampling stopped" in c and "SIGURG" in c and
           "handler of its own" in c, "the profile says why", c)
    ok(idle(h), "sampling is off")
    u1 = h.cmd("urgs")
    r = curl(f"{h.base}/profile?seconds=1")
    eq(r.status, 200, "the next window: 200")
    eq(h.cmd("urgs"), u1, "the host's SIGURG handler got nothing more")
    masks = h.sig_masks()
    ok(masks["SigCgt"] & SIGURG_BIT, "its SIGURG handler is in place")
    eq(h.quit(), 0, "the host exits 0")


def check_blocking_host(mode):
    h = SigHost()
    eq(h.cmd(f"blockall {mode}"), "ok",
       f"the host blocks every signal and reads them ({mode})")
    eq(h.cmd("burn 2"), "ok", "2 burner threads (every signal blocked)")
    # Every thread of the host blocks the signal: the burners, and the
    # thread reading them, which burns between reads.
    t0, used0 = time.time(), threads_cpu(h.pid, None)
    r = curl(f"{h.base}/profile?seconds=2")
    took, used = time.time() - t0, threads_cpu(h.pid, None) - used0
    eq(r.status, 200, f"{mode}: a 2 s window: 200")
    read = h.cmd("read")
    eq(read, "read 0 0 0", f"{mode}: the host read none of pullprof's signals")
    if r.status == 200:
        prof = Profile(r.body)
        v = frame_value(prof, BLOCKED_FRAME)
        # Against what the burners used at their rate over the round
        # trip (a loaded machine gave two of them 0.5 s in 2 s): at
        # least a third of that, never more than they used.
        in2 = 2 / max(took, 2)
        ok(used * in2 / 3 < v / 1e9 <= used * 1.05 + 0.02,
           f"{mode}: the CPU not sampled is charged to {BLOCKED_FRAME} "
           f"({v / 1e9:.2f} s; the host's threads used {used:.2f} s in the "
           f"{took:.1f} s round trip)", v)
        c = " | ".join(comments(prof))
        ok("block" in c and "signalfd" in c, f"{mode}: a note says why", c)
        txt = curl(f"{h.base}/profile?seconds=1&debug=1")
        ok(txt.status == 200 and "signalfd" in txt.text,
           f"{mode}: the text form says so too", txt.text[-2000:])
    st = h.status()
    ok(st.get("threads_blocking_signal", 0) >= 0, "status answers")
    ok(idle(h), "sampling is off")
    eq(h.cmd("read"), "read 0 0 0", f"{mode}: nothing pending was read after")
    eq(h.quit(), 0, "the host exits 0")


def test_blocks_mid_window():
    """Threads that block every signal after their timers were armed, and
    read their own with sigtimedwait: found (CPU without samples, then
    SigBlk), their timers deleted, their CPU charged from then on."""
    h = SigHost()
    eq(h.cmd("burn 2"), "ok", "2 burner threads")
    t, res = in_background(f"{h.base}/profile?seconds=6")
    ok(until(lambda: h.status().get("samples", 0) > 5, timeout=20),
       "the window samples")
    eq(h.cmd("blocklater"), "ok", "the burners block every signal now")
    # (>= 2: under TSan its background thread, which blocks every signal,
    # is one more.)
    ok(until(lambda: h.status().get("threads_blocking_signal", 0) >= 2,
             timeout=20), "the collector finds both", h.status())
    r1 = h.cmd("read")
    time.sleep(0.5)
    r2 = h.cmd("read")
    if pptest.SANITIZER == "tsan":
        # TSan hands a signal to the disposition in place when it
        # delivers it, at its next safe point: expiries from before the
        # switch reach the host's signalfd late.
        pptest.skip("from then on the host reads none of pullprof's "
                    "signals", "tsan build: TSan delivers signals late")
    else:
        eq(r2, r1, "from then on the host reads none of pullprof's signals")
    r = answered(t, res, "the window: 200")
    if r:
        prof = Profile(r.body)
        ok(frame_value(prof, BLOCKED_FRAME) > 0.3e9,
           "their CPU since is charged to the frame",
           frame_value(prof, BLOCKED_FRAME))
        ok(thread_samples(prof, "burn-") > 0, "their samples before are there")
    ok(idle(h), "sampling is off")
    eq(h.quit(), 0, "the host exits 0")


def test_signalfd_host():
    check_blocking_host("signalfd")


def test_sigwait_host():
    check_blocking_host("sigwait")


def test_latch_threads():
    """PostgreSQL's pattern (14+, its latches on Linux): threads that block
    SIGURG only and read it from a signalfd are sampled with SIGPROF, which
    the host leaves free; their CPU is in the profile under their own
    function, their signalfd reads none of pullprof's signals, and only a
    thread that blocks both is charged to the frame."""
    h = SigHost()
    before = h.sig_masks()
    eq(h.cmd("latch 2 self"), "ok", "2 threads block SIGURG, read a signalfd")
    eq(h.cmd("both 1"), "ok", "1 thread blocks SIGURG and SIGPROF")
    # What the threads used, over the request's round trip: a loaded
    # machine gives them a fraction of a core (0.27 s in 3 s at load 20),
    # so what the window holds is checked against their rate.
    t0, latch0, both0 = time.time(), threads_cpu(h.pid, "latch-"), \
        threads_cpu(h.pid, "both-")
    # 8 s: on a machine at load 20 the collector's first scans of the
    # threads come late; what /status says is read from the one answer
    # that shows both latch threads on SIGPROF, while the window is open.
    win = 8
    t, res = in_background(f"{h.base}/profile?seconds={win}")
    seen = {}

    def on_sigprof():
        seen["st"] = h.status()
        return seen["st"].get("threads_sigprof", 0) >= 2 and \
            seen["st"].get("threads_blocking_signal", 0) >= 1
    ok(until(on_sigprof, timeout=win),
       "both latch threads are sampled with SIGPROF, the third blocks both",
       seen.get("st"))
    st = seen.get("st", {})
    eq(st.get("signal"), "SIGURG+SIGPROF", "/status says both signals")
    ok(st.get("threads_blocking_signal", 0) >= 1,
       "the thread blocking both is counted", st)
    t.join(60)
    took = time.time() - t0
    latch = threads_cpu(h.pid, "latch-") - latch0
    both = threads_cpu(h.pid, "both-") - both0
    r = res.get("r")
    eq(r and r.status, 200, "the window: 200")
    eq(h.cmd("read"), "read 0 0 0", "the host read none of pullprof's signals")
    if r and r.status == 200:
        prof = Profile(r.body)
        # In the window at their rate over the round trip (the window is
        # inside it): at least a third of that, never more than they used.
        inw = win / max(took, win)
        v = stack_value(prof, "latch_work")
        ok(latch * inw / 3 < v / 1e9 <= latch * 1.05 + 0.02,
           f"the latch threads' CPU is under latch_work ({v / 1e9:.2f} s; "
           f"they used {latch:.2f} s in the {took:.1f} s round trip)", v)
        ok(thread_samples(prof, "latch-") > 0, "samples of latch-* threads")
        eq(thread_samples(prof, "both-"), 0, "none of the thread blocking both")
        b = frame_value(prof, BLOCKED_FRAME)
        ok(both * inw / 3 < b / 1e9 <= both * 1.05 + 0.02,
           f"its CPU is charged to {BLOCKED_FRAME} ({b / 1e9:.2f} s; it "
           f"used {both:.2f} s in the {took:.1f} s round trip)", b)
        ok(b < (win - 0.5) * 1e9, f"and only its CPU (one thread, {win} s)", b)
        c = " | ".join(comments(prof))
        ok("both SIGURG and SIGPROF" in c, "the note says what it blocks", c)
    ok(idle(h), "sampling is off")
    after = h.sig_masks()
    eq(hex(after["SigIgn"]), hex(before["SigIgn"]), "SigIgn as before")
    eq(hex(after["SigCgt"]), hex(before["SigCgt"]), "SigCgt as before")
    eq(h.cmd("read"), "read 0 0 0", "nothing pending was read after")
    eq(h.quit(), 0, "the host exits 0")


def test_latch_started_mid_window():
    """A thread that starts during a window with SIGURG blocked (its creator
    blocked it) is sampled with SIGPROF."""
    h = SigHost()
    eq(h.cmd("latch 1 self"), "ok", "a latch thread (SIGPROF taken for it)")
    t, res = in_background(f"{h.base}/profile?seconds=3")
    ok(until(lambda: h.status().get("threads_sigprof", 0) >= 1, timeout=20),
       "it is sampled with SIGPROF", h.status())
    eq(h.cmd("latch 2 inherit"), "ok", "2 more start with SIGURG blocked")
    ok(until(lambda: h.status().get("threads_sigprof", 0) >= 3, timeout=20),
       "they are sampled with SIGPROF too", h.status())
    t.join(60)
    r = res.get("r")
    eq(r and r.status, 200, "the window: 200")
    eq(h.cmd("read"), "read 0 0 0", "the host read none of pullprof's signals")
    if r and r.status == 200:
        prof = Profile(r.body)
        for k in (1, 2):
            ok(thread_samples(prof, f"latch-{k}") > 0,
               f"latch-{k} (started in the window) has samples")
        # (Under TSan its background thread, which blocks every signal,
        # is charged there: a little.)
        b = frame_value(prof, BLOCKED_FRAME)
        if pptest.SANITIZER == "tsan":
            ok(b < 0.2e9, "almost nothing charged to the frame (TSan's "
               "own thread)", b)
        else:
            eq(b, 0, "nothing charged to the frame")
    ok(idle(h), "sampling is off")
    eq(h.quit(), 0, "the host exits 0")


def test_blocks_urg_mid_window():
    """Threads that block SIGURG only after their timers were armed, and
    read it with sigtimedwait: moved to SIGPROF, sampled on; from then on
    they read nothing of pullprof's."""
    h = SigHost()
    eq(h.cmd("burn 2"), "ok", "2 burner threads")
    # A window long enough for what follows on a busy machine: the move
    # waits for the burners to run four periods unsampled, and starved
    # burners take seconds to (one CI run: 13 samples in 5 s).
    t, res = in_background(f"{h.base}/profile?seconds=20")
    ok(until(lambda: h.status().get("samples", 0) > 5, timeout=20),
       "the window samples")
    eq(h.cmd("urglater"), "ok", "the burners block SIGURG now")
    ok(until(lambda: h.status().get("threads_sigprof", 0) >= 2, timeout=20),
       "the collector moves both to SIGPROF", h.status())
    s1 = h.status().get("samples", 0)
    r1 = h.cmd("read")
    time.sleep(0.5)
    r2 = h.cmd("read")
    if pptest.SANITIZER == "tsan":
        # TSan hands a signal to the disposition in place when it
        # delivers it, at its next safe point: expiries from before the
        # switch reach the host's signalfd late.
        pptest.skip("from then on the host reads none of pullprof's "
                    "signals", "tsan build: TSan delivers signals late")
    else:
        eq(r2, r1, "from then on the host reads none of pullprof's signals")
    ok(until(lambda: h.status().get("samples", 0) > s1 + 20, timeout=20),
       "and they are sampled on")
    t.join(60)
    r = res.get("r")
    eq(r and r.status, 200, "the window: 200")
    ok(idle(h), "sampling is off")
    eq(h.quit(), 0, "the host exits 0")


def test_prof_taken_mid_window():
    """A host that starts its own SIGPROF profiler while a latch thread is
    sampled with SIGPROF: the window stops and says why, the host lives on
    and gets its own ticks, and neither of its handlers is replaced."""
    h = SigHost()
    eq(h.cmd("latch 1 self"), "ok", "a latch thread")
    t, res = in_background(f"{h.base}/profile?seconds=20")
    ok(until(lambda: h.status().get("threads_sigprof", 0) >= 1, timeout=20),
       "it is sampled with SIGPROF", h.status())
    eq(h.cmd("prof"), "ok", "the host takes SIGPROF mid-window")
    r = answered(t, res, "the window ends early: 200")
    if r:
        c = " | ".join(comments(Profile(r.body)))
        ok("sampling stopped" in c and "SIGPROF" in c,
           "a note says the host took SIGPROF", c)
    ok(idle(h), "sampling is off")
    ticks_on(h, "the host's profiler gets its ticks")
    ok(h.sig_masks()["SigCgt"] & SIGPROF_BIT, "its SIGPROF handler stays")
    eq(h.cmd("read"), "read 0 0 0", "the host read none of pullprof's signals")
    eq(h.quit(), 0, "the host exits 0")


def test_siglongjmp_host():
    """A host whose SIGALRM handler (ITIMER_REAL every 200 us on the main
    thread, sa_mask empty) siglongjmps out of whatever it interrupted:
    pullprof's handler is never interrupted by it (its sa_mask blocks
    every signal but the faults), so 1000 Hz windows hold the CPU the
    host's threads used, and the host exits at once."""
    if pptest.SANITIZER == "tsan":
        # TSan defers a signal to its next safe point and runs the host's
        # handler from its own: a siglongjmp out of it left TSan's state
        # behind, and the host died of a jump to no code (seen).
        pptest.skip("a host that siglongjmps", "tsan build: a siglongjmp "
                    "out of a handler TSan called crashes TSan")
        return
    if pptest.SANITIZER == "asan":
        # Run alone under ASan it passes (10258 jumps, exit in 0.21 s).
        # In a whole ASan run beside the plain suite, once, the host's
        # main thread made no jump at all and never answered again: a
        # handler that siglongjmps out of whatever it interrupted can
        # leave that thread inside ASan's interceptors (the host's own
        # undefined behaviour), which is not told apart yet from a fault
        # of pullprof's. Open; the plain and TSan runs keep the test.
        pptest.skip("a host that siglongjmps", "asan build: once hung "
                    "inside a whole run, not understood yet")
        return
    h = SigHost(exe=JUMPHOST)
    ok(h.port, "the host serves", h.stderr_text())
    eq(h.cmd(None), "ready", "its alarms run")
    ratios, mains = [], []
    for i in range(3):
        t0, c0 = time.monotonic(), h.host_cpu_ns()
        r = curl(f"{h.base}/profile?seconds=2&hz=1000", timeout=60)
        t1, c1 = time.monotonic(), h.host_cpu_ns()
        eq(r.status, 200, f"window {i + 1}: 200")
        if r.status != 200:
            continue
        prof = Profile(r.body)
        total = sum(smp["value"][1] for smp in prof.samples)
        # The host's threads burn all the time: their CPU over the
        # window is their rate over the request times its span.
        rate = (c1 - c0) / ((t1 - t0) * 1e9)
        expect = rate * prof.raw["duration_nanos"][0]
        ratios.append(total / expect if expect else 0)
        # The main thread, whose alarms jump, burns as much as burn-1.
        main = sum(smp["value"][1] for smp in prof.samples
                   if prof.labels(smp).get("thread_name") == "jumphost")
        mains.append(main / total if total else 0)
    jumps = int((h.cmd("jumps") or "jumps 0").split()[1])
    st = h.status()
    print(f"# profile CPU / host CPU, 3 windows at 1000 Hz: "
          f"{', '.join(f'{x:.2f}' for x in ratios)} (the main thread's "
          f"share: {', '.join(f'{x:.2f}' for x in mains)}); "
          f"{jumps} siglongjmps; "
          f"handlers_left {st.get('handlers_left')}, ring_slots_taken_back "
          f"{st.get('ring_slots_taken_back')}", flush=True)
    ok(jumps > 1000, "the host jumped out of its handler all along", jumps)
    ok(len(ratios) == 3 and all(0.6 < x < 1.4 for x in ratios),
       "each profile holds the CPU the host used (0.6..1.4 of it)", ratios)
    ok(len(mains) == 3 and all(x > 0.25 for x in mains),
       "the main thread, whose handler jumps, has its share in each", mains)
    eq(st.get("handlers_left"), 0, "no handler of pullprof's was left")
    t = time.monotonic()
    eq(h.cmd("quit"), "ok", "the host is told to exit")
    try:
        rc = h.p.wait(20)
    except Exception:
        rc = None
        h.p.kill()
    took = time.monotonic() - t
    print(f"# exit took {took:.2f} s", flush=True)
    eq(rc, 0, "the host exits 0, at once (pullprof's stop waits on "
       "nothing left behind)")
    ok(took < 10, "within 10 s", took)


def record_json(h):
    r = curl(f"{h.base}/record")
    return r.json() if r.status == 200 else {}


def test_sigurg_handler_record():
    """With the record on, a host installs a SIGURG handler of its own in
    main() after the agent started sampling with SIGURG: its handler gets
    none of pullprof's signals (the agent moves off SIGURG before the
    host's sigaction goes on), and the record samples on with SIGPROF, a
    gap with a note over the pause."""
    h = SigHost(env={"PULLPROF_RECORD": "2m", "PULLPROF_RECORD_HZ": "997"})
    ok(h.port, "the host serves", h.stderr_text())
    eq(h.cmd("burn 2"), "ok", "2 burner threads")
    seen = {}

    def sampling_urg():
        seen.clear()
        seen.update(h.status())
        return seen.get("signal") == "SIGURG" and seen.get("samples", 0) > 50
    ok(until(sampling_urg, timeout=30), "the record samples with SIGURG",
       seen)
    eq(h.cmd("urg"), "ok", "the host installs its own SIGURG handler")
    urgs = h.cmd("urgs")
    if pptest.SANITIZER == "tsan" and urgs != "urgs 0":
        # TSan hands a signal to the disposition in place when it delivers
        # it, at its next safe point: an expiry from before the switch
        # reached the host's new handler late (seen: 1).
        pptest.skip("its handler got none of pullprof's signals",
                    f"tsan build: TSan delivers signals late ({urgs})")
    else:
        eq(urgs, "urgs 0", "its handler got none of pullprof's signals")
    rec = {}

    def resumed():
        rec.clear()
        rec.update(record_json(h))
        gaps = rec.get("gaps") or []
        return gaps and gaps[-1].get("end") and h.status().get(
            "signal") == "SIGPROF"
    ok(until(resumed, timeout=30),
       "the record samples on with SIGPROF, a gap closed", rec)
    gaps = rec.get("gaps") or [{}]
    eq(rec.get("sampling"), "on", "/record: sampling on")
    eq(gaps[-1].get("then"), "SIGPROF", "the gap says it went on with SIGPROF")
    ok("SIGURG" in gaps[-1].get("why", "") and
       "handler of its own" in gaps[-1].get("why", ""),
       "the gap says why", gaps[-1])
    print(f"# gap: {gaps[-1]}", flush=True)
    added = rec.get("samples", {}).get("added", 0)
    ok(until(lambda: record_json(h).get("samples", {}).get("added", 0) >
             added + 50, timeout=30), "samples are added after the gap")
    r = curl(f"{h.base}/profile?last=60")
    eq(r.status, 200, "a read of the record over the gap: 200")
    if r.status == 200:
        c = " | ".join(comments(Profile(r.body)))
        ok("no samples from" in c and "went on with SIGPROF" in c,
           "its note says where the gap was and why", c)
    time.sleep(0.5)
    if pptest.SANITIZER == "tsan":
        # TSan's own handler takes every signal and hands it, at its next
        # safe point, to the handler in place then: an expiry of ours
        # that came before the host's sigaction is handed to the host's
        # (22 of them seen). The kernel does not do that.
        pptest.skip("the host's handler still got nothing",
                    "tsan build: TSan hands a signal to the handler in "
                    "place when it delivers it")
    else:
        eq(h.cmd("urgs"), "urgs 0", "the host's handler still got nothing")
    ok(h.sig_masks()["SigCgt"] & SIGURG_BIT, "its SIGURG handler is in place")
    eq(h.quit(), 0, "the host exits 0")


if __name__ == "__main__":
    run([test_disposition_restored, test_own_profiler,
         test_reset_during_window, test_sigurg_host,
         test_sigurg_handler_mid_window, test_blocks_mid_window,
         test_signalfd_host,
         test_sigwait_host, test_latch_threads, test_latch_started_mid_window,
         test_blocks_urg_mid_window, test_prof_taken_mid_window,
         test_siglongjmp_host, test_sigurg_handler_record])

#!/usr/bin/env python3
"""A host under a seccomp filter that kills (hardening issue, item 1).

systemd's SystemCallFilter=@system-service leaves perf_event_open out (it
is in @debug), and systemd's default action kills the process with SIGSYS.
tests/hostile/seccomp_launch does what systemd does: PR_SET_NO_NEW_PRIVS,
a BPF filter returning SECCOMP_RET_KILL_PROCESS for the named calls, then
execs `env LD_PRELOAD=... dropper` (the wrapper outside the preload).
dropper has threads blocked in read() and nanosleep() and one spinning;
tests/host forks, tests/fork/rawfork makes a child with a raw clone.

Before the fix the first /goroutine killed the host (perf_event_open to
sample the spinning thread): exit -31 (SIGSYS), 159 from a shell. Now the
agent probes each late call in a child first (util/seccomp.h), makes no
call the filter kills for, answers every endpoint, says why on each answer
it changes and in /status, and the host runs on and exits 0.
"""
import os
import re
import signal

import pptest
from pptest import Host, Proc, Profile, curl, eq, ok, run, until

DROPPER = os.path.join(pptest.BUILD, "tests", "threads", "dropper")
HOST = os.path.join(pptest.BUILD, "tests", "host")
RAWFORK = os.path.join(pptest.BUILD, "tests", "fork", "rawfork")
LAUNCH = os.path.join(pptest.BUILD, "tests", "hostile", "seccomp_launch")
LIB = os.environ.get("PP_PRELOAD_LIB") or pptest.LIBSO
NR_PERF = {"x86_64": 298, "aarch64": 241}.get(os.uname().machine)
NR_VM_READV = {"x86_64": 310, "aarch64": 270}.get(os.uname().machine)
LATE = ("timer_create,timer_settime,timer_delete,getitimer,setitimer,"
        "pidfd_open,kcmp,memfd_create")


def prefix(action, calls, **extra):
    """The launcher and the preload's environment, before the program."""
    env = pptest.preload_env(lib=LIB, PULLPROF_LISTEN="127.0.0.1:0",
                             **extra)
    return [LAUNCH, action, calls, "env",
            *(f"{k}={v}" for k, v in env.items())]


class Filtered(pptest.Served):
    def __init__(self, action, calls, **extra):
        super().__init__(env={}, exe=DROPPER,
                         prefix=prefix(action, calls, **extra))
        self.served()

    def seccomp_field(self):
        with open(f"/proc/{self.pid}/status") as f:
            m = re.search(r"^Seccomp:\s*(\d+)", f.read(), re.M)
        return int(m.group(1)) if m else None

    def alive(self):
        return self.p.poll() is None

    def filters(self):
        with open(f"/proc/{self.pid}/status") as f:
            m = re.search(r"^Seccomp_filters:\s*(\d+)", f.read(), re.M)
        return int(m.group(1)) if m else None


def by_thread(prof):
    out = {}
    for s in prof.samples:
        lab = prof.labels(s)
        names = [fr[0] for loc in prof.stack(s) for fr in loc]
        out[lab.get("thread_name")] = (lab.get("state"), names)
    return out


def ended(h, name):
    """The host's end, for a failed check."""
    code = h.p.poll()
    return f"{name}: host exit {code}; stderr: {h.stderr_text()[-1500:]}"


def check_threads(name, h, forbidden, walks=True):
    """/goroutine in every form, /wall and /fgprof: answered, host alive.
    forbidden: perf_event_open is; walks: process_vm_readv is allowed (the
    blocked threads' callers are read with it)."""
    r = h.get("goroutine")
    ok(r.status == 200, f"{name}: /goroutine answers 200",
       ended(h, name) if not h.alive() else r.text[:300])
    ok(h.alive(), f"{name}: the host lives after /goroutine", ended(h, name))
    if r.status != 200:
        return
    prof = Profile(r.body)
    threads = by_thread(prof)
    blocked = threads.get("blocked-read", (None, []))[1]
    if walks:
        ok("wait_read" in blocked, f"{name}: a blocked thread's stack is read",
           threads)
    else:
        ok(blocked and "read" in blocked[0] and "wait_read" not in blocked,
           f"{name}: a blocked thread is shown where it waits", threads)
        notes = [prof.s(i) for i in prof.raw.get("comment", [])]
        ok(any("end at the function they wait in: a seccomp filter kills "
               "the process for process_vm_readv" in n for n in notes),
           f"{name}: the profile's comment says why", notes)
    spin = threads.get("spinner", (None, []))
    if forbidden:
        ok(spin[1] and "seccomp filter kills" in spin[1][0],
           f"{name}: the running thread's frame names the filter", spin)
        notes = [prof.s(i) for i in prof.raw.get("comment", [])]
        ok(any("seccomp filter kills the process for perf_event_open" in n
               for n in notes),
           f"{name}: the profile's comment says why", notes)
    waits = "wait_read" if walks else "read"
    d1 = h.get("goroutine?debug=1")
    ok(d1.status == 200 and waits in d1.text,
       f"{name}: /goroutine?debug=1 answers", d1.text[:300])
    if forbidden:
        ok("seccomp filter kills the process for perf_event_open" in d1.text,
           f"{name}: debug=1 says why running threads have no stack",
           d1.text[:1500])
    d2 = h.get("goroutine?debug=2")
    ok(d2.status == 200 and waits in d2.text,
       f"{name}: /goroutine?debug=2 answers", d2.text[:300])
    for path in ("wall?seconds=1", "fgprof?seconds=1"):
        w = h.get(path)
        ok(w.status == 200, f"{name}: /{path} answers 200",
           ended(h, name) if not h.alive() else w.text[:300])
        if w.status == 200 and forbidden:
            t = h.get(path + "&debug=1")
            ok("seccomp filter" in t.text,
               f"{name}: /{path} says why in its text form", t.text[:800])
    ok(h.alive(), f"{name}: the host lives after the thread endpoints",
       ended(h, name))


def finish(name, h):
    ok(h.alive(), f"{name}: the host runs on", ended(h, name))
    code = h.quit()
    eq(code, 0, f"{name}: the host exits 0")
    if code != 0:
        print("# " + h.stderr_text()[-3000:].replace("\n", "\n# "))


def test_kill_perf_event_open():
    """systemd's @system-service with its default action."""
    h = Filtered("kill", "perf_event_open")
    try:
        ok(h.port, "perf: the agent serves", h.stderr_text())
        eq(h.seccomp_field(), 2, "perf: the host is under a filter")
        check_threads("perf", h, forbidden=True)
        p = h.get("profile?seconds=1")
        ok(p.status == 200, "perf: /profile answers 200 (timers allowed)",
           p.text[:300])
        st = h.status()
        sc = st.get("seccomp", {})
        eq(sc.get("mode"), 2, "perf: /status seccomp.mode")
        pe = sc.get("calls", {}).get("perf_event_open", {})
        eq(pe.get("verdict"), "forbidden", "perf: perf_event_open forbidden")
        eq(pe.get("signal"), "SIGSYS", "perf: its probe died of SIGSYS")
        tc = sc.get("calls", {}).get("timer_create", {})
        eq(tc.get("verdict"), "allowed", "perf: timer_create allowed")
        perf = st.get("threads", {}).get("perf_event", "")
        ok(perf.startswith("unavailable: a seccomp filter kills"),
           "perf: threads.perf_event says why", perf)
        ok(st.get("threads", {}).get("looks", {}).get("seccomp", 0) > 0,
           "perf: looks.seccomp counts them", st.get("threads"))
    finally:
        finish("perf", h)


def test_trap_perf_event_open():
    """SECCOMP_RET_TRAP: SIGSYS with no handler kills just as well."""
    h = Filtered("trap", "perf_event_open")
    try:
        ok(h.port, "trap: the agent serves", h.stderr_text())
        check_threads("trap", h, forbidden=True)
    finally:
        finish("trap", h)


def test_eperm_perf_event_open():
    """The control: a filter that refuses with EPERM (handled before)."""
    h = Filtered("eperm", "perf_event_open")
    try:
        ok(h.port, "eperm: the agent serves", h.stderr_text())
        check_threads("eperm", h, forbidden=False)
        st = h.status()
        pe = st.get("seccomp", {}).get("calls", {}).get("perf_event_open",
                                                        {})
        eq(pe.get("verdict"), "allowed",
           "eperm: the probe returned (the call is refused, not killed)")
        perf = st.get("threads", {}).get("perf_event", "")
        ok("Operation not permitted" in perf,
           "eperm: threads.perf_event has the errno", perf)
    finally:
        finish("eperm", h)


def test_kill_late_calls():
    """Every other late call killed: timers, pidfd_open, kcmp."""
    h = Filtered("kill", LATE + ",perf_event_open")
    try:
        ok(h.port, "late: the agent serves", h.stderr_text())
        check_threads("late", h, forbidden=True)
        p = h.get("profile?seconds=1")
        eq(p.status, 503, "late: /profile answers 503")
        ok("seccomp filter kills the process for timer_create" in p.text,
           "late: and names the filter and the call", p.text[:400])
        eq(p.header("X-Go-Pprof"), "1", "late: as a profile error")
        ok(h.alive(), "late: the host lives after /profile", ended(h, "late"))
        for path in ("heap", "mutex", "block", "threadcreate"):
            r = h.get(path)
            ok(r.status == 200, f"late: /{path} answers 200", r.text[:200])
        # The host forks: the child's agent would watch its parent with
        # pidfd_open, and a child made without fork() asks kcmp.
        st = h.status()
        calls = st.get("seccomp", {}).get("calls", {})
        eq(calls.get("timer_create", {}).get("verdict"), "forbidden",
           "late: /status timer_create forbidden")
    finally:
        finish("late", h)


def test_kill_timers_record():
    """PULLPROF_RECORD starts the sampler with the agent: under a filter
    that kills for timer_create it does not, and /record says why (before:
    killed at start)."""
    h = Filtered("kill", "timer_create", PULLPROF_RECORD="60")
    try:
        ok(h.port, "record: the agent serves", h.stderr_text())
        r = h.get("record")
        why = r.json().get("sampling", "") if r.status == 200 else r.text
        ok("seccomp filter kills the process for timer_create" in why and
           why.endswith("(the CPU timers need it)"),
           "record: /record says why it holds nothing", why)
        ok("the record cannot sample: CPU profiling is off" in
           h.stderr_text(), "record: stderr says it once", h.stderr_text())
    finally:
        finish("record", h)


def test_kill_process_vm_readv():
    """The checked reads' call killed: never made, said where it shows."""
    h = Filtered("kill", "process_vm_readv")
    try:
        ok(h.port, "vm_readv: the agent serves", h.stderr_text())
        check_threads("vm_readv", h, forbidden=False, walks=False)
        p = h.get("profile?seconds=1")
        eq(p.status, 503, "vm_readv: /profile answers 503")
        ok("process_vm_readv" in p.text and "seccomp" in p.text,
           "vm_readv: naming the filter and the call", p.text[:400])
        for path in ("heap", "maps", "status", "symbol"):
            r = h.get(path)
            ok(r.status == 200, f"vm_readv: /{path} answers 200",
               r.text[:200])
        r = h.get("heap?debug=1")
        ok("heap samples' stacks may end after their first frames: a "
           "seccomp filter kills the process for process_vm_readv" in r.text,
           "vm_readv: /heap says why its stacks may be short", r.text[:800])
        m = h.get("maps").json()
        main = [x for x in m.get("mappings", []) if x.get("main")]
        ok(main and main[0].get("build_id") and main[0].get("symbols"),
           "vm_readv: /maps still has the build ID and symbols", main)
        calls = h.status().get("seccomp", {}).get("calls", {})
        eq(calls.get("process_vm_readv", {}).get("verdict"), "forbidden",
           "vm_readv: /status process_vm_readv forbidden")
    finally:
        finish("vm_readv", h)


def test_kill_pidfd_open():
    """A fork()ed child's agent watches its parent with a pidfd (at once
    with PULLPROF_FORK=follow; in adopt mode once the parent is gone or
    the child forks): under a filter that kills for pidfd_open, the child
    lives (before: killed by SIGSYS) and watches its parent by polling."""
    h = Host(env={}, exe=HOST,
             prefix=prefix("kill", "pidfd_open", PULLPROF_FORK="follow"))
    try:
        ok(h.wait_line(h.err_lines, r"serving http://", timeout=30),
           "pidfd: the host serves", h.stderr_text())
        line = h.cmd("fork 2")
        ok(line.startswith("child "), "pidfd: the host forks", line)
        if line.startswith("child "):
            eq(h.cmd(f"wait {line.split()[1]}", timeout=30), "exit 0",
               "pidfd: the child runs to its end (not killed: exit -1)")
    finally:
        eq(h.quit(), 0, "pidfd: the host exits 0")


def test_kill_kcmp():
    """A child made by a raw clone asks kcmp whether it shares the
    descriptor table before it closes its copies of the listening socket:
    under a filter that kills for kcmp, it exits 0 (before: SIGSYS)."""
    p = Proc([*prefix("kill", "kcmp"), RAWFORK, "clone"], env={},
             stdout_lines=True)

    def cmd(line, pattern):
        p.p.stdin.write(line.encode() + b"\n")
        p.p.stdin.flush()
        return p.wait_line(p.out_lines, pattern, timeout=30)
    try:
        ok(p.wait_line(p.err_lines, r"serving http://", timeout=30),
           "kcmp: the host serves", p.stderr_text())
        c = cmd("child", r"^child (\d+)$")
        ok(c, "kcmp: a child is made", p.out_lines)
        if not c:
            return
        child = int(c.group(1))
        allocated = p.wait_line(p.out_lines, rf"^child {child} allocated$",
                                timeout=30)
        stuck = [] if allocated or pptest.SANITIZER != "asan" else \
            pptest.threads_waiting_in(child, "libasan")
        if stuck:
            # A raw clone copies ASan's allocator as it is: a lock another
            # thread held at that moment (an agent thread allocating) is
            # held in the child for good (faulty.c says more). Not the
            # agent's: skipped, with where the child waits.
            pptest.skip("kcmp: the child allocated and its exit() runs to "
                        "its end", f"asan build: the raw clone's child "
                        f"waits inside libasan ({stuck})")
            os.kill(child, signal.SIGKILL)
            cmd(f"reap {child}", rf"^(reaped|hung) {child}.*")
            return
        ok(allocated, "kcmp: the child allocated", p.out_lines)
        os.kill(child, signal.SIGUSR1)
        r = cmd(f"reap {child}", rf"^(reaped|hung) {child}.*")
        ok(r and re.match(rf"reaped {child} status 0 ", r.group(0)),
           "kcmp: the child's exit() runs to its end",
           r.group(0) if r else p.out_lines)
    finally:
        p.p.stdin.write(b"quit\n")
        p.p.stdin.flush()
        eq(p.p.wait(20), 0, "kcmp: the host exits 0")


class Late(Filtered):
    """dropper with no filter at start; it puts one on later."""

    def __init__(self):
        env = pptest.preload_env(lib=LIB, PULLPROF_LISTEN="127.0.0.1:0")
        Host.__init__(self, env=env, exe=DROPPER)
        m = self.wait_line(self.err_lines,
                           r"serving http://127\.0\.0\.1:(\d+)/debug/pprof/",
                           timeout=30)
        self.port = int(m.group(1)) if m else None


def test_filter_after_start():
    """A host that sandboxes itself after the agent started: a filter on
    every thread (SECCOMP_FILTER_FLAG_TSYNC) killing for perf_event_open,
    after a dump that used it. The next dump asks again."""
    h = Late()
    try:
        ok(h.port, "after: the agent serves", h.stderr_text())
        # 0 here; 2 where the tests run under a container's filter
        # (Docker's refuses with EPERM), whose count the new one raises.
        before = h.filters()
        r = h.get("goroutine?debug=1")
        ok(r.status == 200 and "seccomp filter" not in r.text,
           "after: a dump before the filter", r.text[:300])
        eq(h.cmd(f"killfor {NR_PERF}"), "filtered", "after: the host's filter")
        eq(h.seccomp_field(), 2, "after: now under a filter")
        eq(h.filters(), before + 1, "after: one filter more")
        check_threads("after", h, forbidden=True)
        pe = h.status().get("seccomp", {}).get("calls", {}).get(
            "perf_event_open", {})
        eq(pe.get("verdict"), "forbidden", "after: perf_event_open forbidden")
        # One more, for the checked reads' call: the HTTP loop looks
        # about every second (the sampling handler and the heap sampler
        # cannot probe), /status only reports.
        eq(h.cmd(f"killfor {NR_VM_READV}"), "filtered",
           "after: a filter for process_vm_readv")

        def pvr():
            c = h.status().get("seccomp", {}).get("calls", {})
            return c.get("process_vm_readv", {}).get("verdict")
        ok(until(lambda: pvr() == "forbidden", 10),
           "after: the loop finds process_vm_readv forbidden", pvr())
        p = h.get("profile?seconds=1")
        eq(p.status, 503, "after: /profile answers 503")
        ok("process_vm_readv" in p.text, "after: naming the call", p.text)
    finally:
        finish("after", h)


TESTS = [test_filter_after_start, test_kill_perf_event_open,
         test_trap_perf_event_open, test_eperm_perf_event_open,
         test_kill_late_calls, test_kill_timers_record,
         test_kill_process_vm_readv, test_kill_pidfd_open, test_kill_kcmp]


def test_tsan():
    # A probe's child shares the process's memory (clone with CLONE_VM),
    # TSan's shadow state with it, and TSan does not know it: in a TSan
    # build these hosts reported a race (the job thread's read of a job,
    # the HTTP thread's free of it) seen in no other host, not told apart
    # yet from a real one. Open; the plain and ASan runs keep the tests.
    pptest.skip("seccomp hosts", "tsan build: the probes' CLONE_VM child "
                "shares TSan's state")


run([test_tsan] if pptest.SANITIZER == "tsan" else TESTS)

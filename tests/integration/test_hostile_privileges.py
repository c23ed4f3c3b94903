#!/usr/bin/env python3
"""A server that drops its privileges after start (issue 27, item 7).

tests/threads/dropper (preloaded; the agent starts before main, with the
privileges the process had) has threads blocked in read() (wait_read) and
nanosleep() (wait_sleep) and one spinning (spin). Then it calls
setuid(65534) (started as root), or, started as uid 65534, sets
PR_SET_DUMPABLE 0. Either way the process is no longer dumpable: the kernel
makes its /proc files root's, and /proc/self/task/TID/syscall (mode 0400),
where the agent reads where a blocked thread stopped, can no longer be
opened. Before the fix /goroutine listed only the dumping thread, /wall had
no samples, and /status counted every look as "gone", without a word.

Now: every thread is listed, with its name and state; a blocked thread
whose stack cannot be read is shown under a synthetic frame that says why,
the profile has a comment saying how many and why (also in the debug=1
text), /status counts them as `denied` (not `gone`), and a running thread is
still sampled with perf_event (its permission check is the same-process
one, which passes).
"""
import os
import re

import pptest
from pptest import Host, Profile, curl, eq, ok, run, skip, until

DROPPER = os.path.join(pptest.BUILD, "tests", "threads", "dropper")
LIB = os.environ.get("PP_PRELOAD_LIB") or pptest.LIBSO
HOST_THREADS = {"blocked-read": "wait_read", "blocked-sleep": "wait_sleep",
                "spinner": "spin"}
DENIED = "stack not readable"


class Dropper(pptest.Served):
    def __init__(self, prefix=()):
        env = pptest.preload_env(lib=LIB, PULLPROF_LISTEN="127.0.0.1:0")
        if prefix:
            # A wrapper (setpriv) goes outside the preload: the agent
            # starts in dropper only.
            prefix = (*prefix, "env", *(f"{k}={v}" for k, v in env.items()))
            env = {}
        super().__init__(env=env, exe=DROPPER, prefix=prefix)
        self.served()


def looks(st):
    return (st.get("threads", {}).get("looks")
            or st.get("looks") or {})


def by_thread(prof):
    """thread_name -> (state, [function names, leaf first])."""
    out = {}
    for s in prof.samples:
        lab = prof.labels(s)
        names = [fr[0] for loc in prof.stack(s) for fr in loc]
        out[lab.get("thread_name")] = (lab.get("state"), names)
    return out


def perf_works(st):
    return str(st.get("threads", {}).get("perf_event") or
               st.get("perf_event", "")).startswith("ok")


def check_dropped(name, h):
    """After the drop: what each endpoint says."""
    tids = os.listdir(f"/proc/{h.pid}/task")
    before = looks(h.status())
    r = h.get("goroutine")
    eq(r.status, 200, f"{name}: /goroutine answers")
    prof = Profile(r.body) if r.status == 200 else None
    threads = by_thread(prof) if prof else {}
    total = sum(prof.field(s, "value") for s in prof.samples) if prof else 0
    eq(total, len(tids), f"{name}: /goroutine counts every thread of the "
       "process, not only the dumping one")
    for t in ("blocked-read", "blocked-sleep"):
        state, names = threads.get(t, (None, []))
        ok(state == "sleeping" and any(DENIED in (n or "") and
                                       "dumpable" in n for n in names),
           f"{name}: {t} is listed, sleeping, under a frame that says "
           "its stack is not readable and why", threads.get(t))
    comments = [prof.s(c) for c in prof.raw.get("comment", [])] if prof \
        else []
    ok(any("dumpable" in c and "/proc/self/task/TID/syscall" in c
           for c in comments),
       f"{name}: the profile's comment says how many looks were refused "
       "and why", comments)
    st = h.status()
    if perf_works(st):
        # A dump waits 50 ms for a running thread's perf_event sample; on
        # a loaded machine the spinner may not be on a CPU in that time
        # (then it is listed under the frame that says its stack cannot
        # be read): asked again until one dump caught it.
        seen = {"spinner": threads.get("spinner")}

        def sampled():
            state, names = seen["spinner"] or (None, [])
            if state == "running" and "spin" in names:
                return True
            g = h.get("goroutine")
            seen["spinner"] = by_thread(Profile(g.body)).get("spinner") \
                if g.status == 200 else None
            return False
        ok(until(sampled, timeout=60),
           f"{name}: the running thread is still sampled (perf_event): "
           "spin", seen["spinner"])
    else:
        skip(f"{name}: the running thread is still sampled",
             f"perf_event unavailable here: {st.get('perf_event')}")

    r = h.get("goroutine?debug=1")
    ok(r.status == 200 and DENIED in r.text and
       re.search(r"^# pullprof: \d+ of \d+ thread looks", r.text, re.M),
       f"{name}: debug=1 text shows the frame and the comment", r.text[:600])
    m = re.match(r"goroutine profile: total (\d+)", r.text)
    eq(int(m.group(1)) if m else None, len(tids),
       f"{name}: debug=1 total is the number of threads")
    r = h.get("goroutine?debug=2")
    ok(r.status == 200 and
       re.search(r'thread \d+ "blocked-read" \[sleeping\]:', r.text) and
       re.search(r"stack: \[pullprof: " + DENIED, r.text),
       f"{name}: debug=2 lists blocked-read, sleeping, and why its stack "
       "is missing", r.text[:800])

    r = h.get("wall?seconds=1")
    eq(r.status, 200, f"{name}: /wall answers")
    wp = Profile(r.body) if r.status == 200 else None
    ok(wp and len(wp.samples) > 0 and
       any(DENIED in (n or "") for v in by_thread(wp).values()
           for n in v[1]),
       f"{name}: /wall has samples, the unreadable threads' under the "
       "frame that says why", wp and by_thread(wp))
    after = looks(h.status())
    ok(after.get("denied", 0) > before.get("denied", 0),
       f"{name}: /status counts the refused looks as denied",
       (before, after))
    ok(after.get("gone", 0) - before.get("gone", 0) <
       after.get("denied", 0) - before.get("denied", 0),
       f"{name}: ... not as gone", (before, after))
    r = h.get("threads")
    names = sorted(t["name"] for t in r.json()["threads"]) \
        if r.status == 200 else []
    ok(all(n in names for n in HOST_THREADS),
       f"{name}: /threads lists the host's threads", names)


def check_before(name, h):
    # dropper says "ready" when it has created its threads, not when they
    # are blocked: on a busy machine they may not be there yet.
    last = {}

    def read():
        r = last["r"] = h.get("goroutine?debug=2")
        return (r.status == 200 and "wait_read" in r.text and
                "wait_sleep" in r.text)
    ok(until(read, timeout=30),
       f"{name}: before the drop the blocked threads' stacks are read",
       last.get("r") and last["r"].text[:3000])


def test_setuid():
    if os.geteuid() != 0:
        skip("setuid(65534) after start", "needs root to change uid")
        return
    h = Dropper()
    try:
        ok(h.port, "setuid: the agent serves", h.stderr_text())
        check_before("setuid", h)
        eq(h.cmd("setuid 65534"), "dropped 65534 0",
           "setuid: the host is uid 65534 and not dumpable")
        check_dropped("setuid", h)
    finally:
        eq(h.quit(), 0, "setuid: the host exits 0")


def test_nodump():
    if os.geteuid() != 0:
        prefix = ()
    else:
        # As root the files stay readable (root reads root's files): the
        # host runs as uid 65534 from the start, as a non-root daemon does.
        prefix = ("setpriv", "--reuid=65534", "--regid=65534",
                  "--clear-groups")
    h = Dropper(prefix=prefix)
    try:
        ok(h.port, "nodump: the agent serves", h.stderr_text())
        check_before("nodump", h)
        line = h.cmd("nodump")
        ok(re.match(r"dropped \d+ 0$", line),
           "nodump: PR_SET_DUMPABLE 0 holds", line)
        check_dropped("nodump", h)
    finally:
        code = h.quit()
        eq(code, 0, "nodump: the host exits 0")
        if code != 0:
            print("# " + h.stderr_text()[-3000:].replace("\n", "\n# "))


def test_nodump_as_root():
    """The control: root may read root's files, so nothing is refused."""
    if os.geteuid() != 0:
        skip("PR_SET_DUMPABLE 0 as root", "not root")
        return
    h = Dropper()
    try:
        eq(h.cmd("nodump"), "dropped 0 0", "as root: PR_SET_DUMPABLE 0")
        r = h.get("goroutine?debug=2")
        ok(r.status == 200 and "wait_read" in r.text and DENIED not in r.text,
           "as root: the stacks are still read", r.text[:600])
    finally:
        eq(h.quit(), 0, "as root: the host exits 0")


run([test_setuid, test_nodump, test_nodump_as_root])

#!/usr/bin/env python3
"""Children made without glibc's fork() (issue 27, item 4).

_Fork() (glibc 2.34's async-signal-safe fork) and the raw clone system call
run none of fork()'s handlers: the child has a copy of the agent's memory
(which says an agent runs), none of its threads, and copies of its
descriptors. Such a child that allocated (heap sampling on) and called
exit() hung for good in the agent's destructor, joining a thread of its
parent's, and kept the listening socket. The host is tests/fork/rawfork,
preloaded: its child allocates for 0.5 s, says so, waits for SIGUSR1 and
calls exit(0); the parent reaps it and must go on serving."""
import os
import re
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pptest import (BUILD, NO_HEAP_WHY, Proc, Profile, curl, eq,  # noqa: E402
                    fork_safe_env, listening_inode, ok, preload_env, run,
                    sanitized, skip, socket_inodes)

RAWFORK = os.path.join(BUILD, "tests", "fork", "rawfork")
SERVING = r"pullprof\[\d+\]: serving (http://\S+)"


class Rawfork(Proc):
    def __init__(self, mode):
        super().__init__([RAWFORK, mode], env=fork_safe_env(preload_env(
            PULLPROF_LISTEN="127.0.0.1:0", PULLPROF_HEAP_RATE="4096")),
            stdout_lines=True)

    def cmd(self, line, pattern, timeout=30):
        """Send line; wait for its answer (pattern: one no other line
        matches)."""
        self.p.stdin.write(line.encode() + b"\n")
        self.p.stdin.flush()
        return self.wait_line(self.out_lines, pattern, timeout=timeout)


def check(mode):
    p = Rawfork(mode)
    try:
        m = p.wait_line(p.err_lines, SERVING, timeout=30)
        ok(m, f"{mode}: the host serves", p.stderr_text())
        if not m:
            return
        url = m.group(1)
        port = int(re.search(r":(\d+)/", url).group(1))
        listen = listening_inode(port)
        ok(listen in socket_inodes(p.pid),
           f"{mode}: the host holds its listening socket")
        c = p.cmd("child", r"^child (-?\d+)$")
        ok(c and int(c.group(1)) > 0, f"{mode}: a child is made",
           p.out_lines)
        if not c or int(c.group(1)) <= 0:
            return
        child = int(c.group(1))
        ok(p.wait_line(p.out_lines, rf"^child {child} allocated$",
                       timeout=30),
           f"{mode}: the child allocated for 0.5 s (heap sampling on)",
           p.stderr_text())
        if sanitized():
            # The child then calls nothing of pullprof's before exit.
            skip(f"{mode}: the child does not keep the listening socket",
                 "it lets go of it when it first allocates into the heap "
                 "sampler: " + NO_HEAP_WHY)
        else:
            ok(listen not in socket_inodes(child),
               f"{mode}: the child does not keep the listening socket")
        os.kill(child, signal.SIGUSR1)
        r = p.cmd(f"reap {child}", rf"^(reaped|hung) {child}")
        ok(r and r.group(1) == "reaped",
           f"{mode}: the child's exit(0) returns (it hung in the agent's "
           "destructor, joining its parent's thread)",
           r and r.string)
        if r and r.group(1) == "reaped":
            ok(re.search(r"status 0 ", r.string),
               f"{mode}: the child exits 0", r.string)
        st = curl(url + "status")
        ok(st.status == 200 and st.json()["pid"] == p.pid,
           f"{mode}: the parent goes on serving", st.status)
        ok(p.cmd("alloc", r"^allocated$"), f"{mode}: the parent allocates")
        h = curl(url + "heap")
        ok(h.status == 200, f"{mode}: /heap answers", h)
        if sanitized():
            skip(f"{mode}: the parent's allocations are sampled", NO_HEAP_WHY)
        elif h.status == 200:
            prof = Profile(h.body)
            ok(any(f[0] == "allocate" for smp in prof.samples
                   for frames in prof.stack(smp) for f in frames),
               f"{mode}: the parent's allocations are sampled")
        p.p.stdin.write(b"quit\n")
        p.p.stdin.flush()
        eq(p.p.wait(timeout=30), 0, f"{mode}: the parent exits 0")
        p.drain()
        lines = [x for x in p.stderr_text().splitlines()
                 if x.startswith("pullprof[")]
        eq(len(lines), 1, f"{mode}: one line from pullprof, the host's "
           f"serving line: {lines}")
    finally:
        if p.p.poll() is None:
            p.p.kill()
            p.p.wait()


def test_fork_underscore():
    check("_Fork")


def test_raw_clone():
    check("clone")


run([test_fork_underscore, test_raw_clone])

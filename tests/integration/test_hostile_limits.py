#!/usr/bin/env python3
"""A host sized to its resource limits (the hardening issue, items 7-8).

tests/hostile/tight, preloaded, allocates blocks of a given size one at a
time ("round N MB") and answers how many it got.

* RLIMIT_AS: glibc gave each agent thread that allocated a malloc arena of
  its own (64 MiB of address space each) and each an 8 MiB stack: VmSize
  grew by 270 MB after a /profile and a /heap, and a host sized to its
  limit saw its own allocations fail. Now the agent's threads allocate from
  one heap of the agent's (src/shim/agentmem.c) on 512 KiB stacks: the
  host's allocations succeed as they do without the agent, while every
  endpoint answers, and /status says what the agent holds
  (address_space).
* RLIMIT_NPROC: the 503 of a /profile whose thread cannot be made names
  the errno, as /wall's does.
* RLIMIT_NOFILE of 16 to 32: the agent's share of descriptors (a quarter
  there) held less than its server keeps open: "serving" was printed and
  every connection was reset. Now stderr and /status say the share is too
  small, and one connection at a time is let in past it for /healthz and
  /status.
* PULLPROF_EXEC_LISTEN= (empty) is unset: a spawn loop's children print
  nothing (each printed "not started").
"""
import os
import subprocess
import threading
import time

import pptest
from pptest import Proc, curl, eq, ok, run, skip

TIGHT = os.path.join(pptest.BUILD, "tests", "hostile", "tight")
LIB = os.environ.get("PP_PRELOAD_LIB") or pptest.LIBSO
PREFIX = "/debug/pprof/"
MB = 1 << 20


class Tight(Proc):
    def __init__(self, agent=True, prefix=(), **extra):
        env = {}
        if agent:
            env = pptest.preload_env(lib=LIB, PULLPROF_LISTEN="127.0.0.1:0",
                                     **extra)
        if prefix:
            prefix = (*prefix, "env", *(f"{k}={v}" for k, v in env.items()))
            env = {}
        super().__init__([*prefix, TIGHT], env=env)
        self.port = None
        if agent:
            m = self.wait_line(
                self.err_lines,
                r"serving http://127\.0\.0\.1:(\d+)/debug/pprof/", timeout=30)
            self.port = int(m.group(1)) if m else None
        self.ready = self.cmd(None, timeout=30)

    def cmd(self, line, timeout=120):
        if line is not None:
            self.p.stdin.write((line + "\n").encode())
            self.p.stdin.flush()
        out = {}

        def read():
            out["line"] = self.p.stdout.readline().decode().strip()
        t = threading.Thread(target=read, daemon=True)
        t.start()
        t.join(timeout)
        return out.get("line")

    def get(self, path, timeout=60):
        return curl(f"http://127.0.0.1:{self.port}{PREFIX}{path}",
                    timeout=timeout)

    def vm(self):
        return int(self.cmd("vm").split()[1]) * 1024

    def rounds(self, n, mb):
        """(got, refused), or None when the host is gone."""
        try:
            w = (self.cmd(f"round {n} {mb}") or "").split()
        except BrokenPipeError:
            w = []
        if len(w) != 3:
            return None
        return int(w[1]), int(w[2])

    def quit(self):
        try:
            self.p.stdin.write(b"quit\n")
            self.p.stdin.flush()
            return self.p.wait(20)
        except (BrokenPipeError, subprocess.TimeoutExpired):
            self.p.kill()
            return self.p.wait()


def set_limit(pid, what, value, prefix=()):
    """Lowered from outside (as the process's own user: root may lack
    CAP_SYS_RESOURCE in a container)."""
    subprocess.run([*prefix, "prlimit", f"--pid={pid}", f"--{what}={value}"],
                   check=True)


ENDPOINTS = ["profile?seconds=2", "heap", "allocs", "goroutine?debug=2",
             "goroutine", "wall?seconds=1", "status", "record?seconds=5",
             "threadcreate", "mutex", "block", "metrics", "maps", "ui/",
             "healthz", "symbol", "heap?seconds=1", "profile?seconds=1"]


def answered(r):
    """200, or a 503 that says the memory ran out."""
    if r.status == 200:
        return True
    text = r.body.decode("utf-8", "replace")
    return r.status == 503 and ("ENOMEM" in text or
                                "Cannot allocate memory" in text)


# The agent's work (stacks, its heap, the debug files libdw maps) must fit
# in this much above what it holds idle: 270 MB before the fix.
HEADROOM = 64 * MB
BLOCK_MB = 100


def test_address_space():
    """Blocks sized to RLIMIT_AS while every endpoint is asked."""
    if pptest.SANITIZER != "none":
        # ASan and TSan reserve terabytes of shadow memory at start (a
        # VmSize of 20 TB) and take their own from it, and the agent's
        # own heap is built out there (the sanitizer's allocator comes
        # first): an address-space limit measures neither.
        pptest.skip("RLIMIT_AS", f"{pptest.SANITIZER} build: the "
                    "sanitizer's shadow memory is the address space")
        return
    h = Tight()
    ok(h.port, "tight serves", h.stderr_text())
    if not h.port:
        h.quit()
        return
    ok(h.get("status").status == 200, "/status before the limit")
    idle = h.vm()
    limit = idle + BLOCK_MB * MB + HEADROOM
    set_limit(h.pid, "as", limit)
    answers = []

    def ask():
        for _ in range(2):
            for path in ENDPOINTS:
                answers.append((path, h.get(path, timeout=90)))
    t = threading.Thread(target=ask)
    t.start()
    got = bad = 0
    gone = False
    while t.is_alive() and not gone:
        r = h.rounds(5, BLOCK_MB)
        gone = r is None
        got, bad = (got + r[0], bad + r[1]) if r else (got, bad)
    t.join()
    r = None if gone else h.rounds(20, BLOCK_MB)
    got, bad = (got + r[0], bad + r[1]) if r else (got, bad)
    alive = h.p.poll() is None and r is not None
    vm_after = h.vm() if alive else 0
    st = h.get("status")
    h.quit()
    ok(alive, "the host lives", h.stderr_text()[-2000:])
    eq(bad, 0, f"{got + bad} blocks of {BLOCK_MB} MB under RLIMIT_AS "
               f"{limit // MB} MB (idle VmSize {idle // MB} MB, "
               f"after {vm_after // MB} MB): none refused")
    wrong = [(p, r.status, r.body[:200]) for p, r in answers
             if not answered(r)]
    ok(not wrong, f"every endpoint answered ({len(answers)} requests): "
                  "200, or 503 naming ENOMEM", wrong)
    ok(alive and vm_after - idle < HEADROOM,
       f"the agent's work took {(vm_after - idle) // MB} MB of address "
       f"space beyond idle (under {HEADROOM // MB})")
    a = st.json().get("address_space", {}) if st.status == 200 else {}
    eq(a.get("limit"), limit, "/status address_space.limit")
    ok(a.get("own_heap") is True and a.get("stack_bytes") == 512 << 10,
       "/status: the agent's own heap, 512 KiB stacks", a)
    ok(0 < (a.get("heap_peak") or 0) < HEADROOM,
       "/status address_space.heap_peak", a)

    # The same host without the agent, under the same limit: the same
    # count.
    n = Tight(agent=False)
    set_limit(n.pid, "as", limit)
    g, b = n.rounds(got + bad, BLOCK_MB) or (0, 0)
    n.quit()
    eq((g, b), (got, bad), "without the agent: the same count")


def test_free_anywhere():
    """Blocks the agent's threads allocated are freed by the host's (a
    realloc too): every endpoint's work done, the host's allocations run on
    (an allocation made by an agent thread and freed by the host is the
    thread dump's text, the profile's bytes, libdw's caches at stop)."""
    h = Tight()
    if not h.port:
        ok(False, "tight serves", h.stderr_text())
        return
    for path in ("profile?seconds=1", "heap", "goroutine?debug=2"):
        eq(h.get(path).status, 200, f"/{path}")
    g, b = h.rounds(200, 1)
    eq((g, b), (200, 0), "the host allocates on")
    ok(h.p.poll() is None, "alive")
    h.quit()
    ok(h.p.returncode == 0, "exits cleanly", h.stderr_text()[-2000:])


def test_nproc():
    """No thread can be made: the CPU profiler's 503 names the errno."""
    if os.geteuid() != 0:
        skip("RLIMIT_NPROC", "needs root to run the host as uid 65534")
        return
    prefix = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
    h = Tight(prefix=prefix)
    if not h.port:
        ok(False, "tight serves", h.stderr_text())
        h.quit()
        return
    # The job thread is made by the first profile request.
    eq(h.get("heap").status, 200, "/heap before the limit")
    set_limit(h.pid, "nproc", 1, prefix)
    r = h.get("profile?seconds=1")
    text = r.body.decode("utf-8", "replace")
    ok(r.status == 503 and "CPU profiler's thread: Resource temporarily "
       "unavailable" in text, "/profile: 503 naming EAGAIN", (r.status, text))
    r = h.get("wall?seconds=1")
    text = r.body.decode("utf-8", "replace")
    ok(r.status == 503 and "Resource temporarily unavailable" in text,
       "/wall: 503 naming EAGAIN", (r.status, text))
    eq(h.get("status").status, 200, "/status")
    h.quit()


def test_nofile():
    """RLIMIT_NOFILE 16, 24, 32: said on stderr and in /status; /healthz
    and /status served; a profile answered with why, never reset."""
    for n in (16, 24, 32):
        h = Tight(prefix=("prlimit", f"--nofile={n}"))
        if not h.port:
            ok(False, f"nofile {n}: serves", h.stderr_text())
            h.quit()
            continue
        line = h.wait_line(h.err_lines, rf"RLIMIT_NOFILE {n} leaves the "
                           r"agent \d+ descriptors", timeout=5)
        ok(line, f"nofile {n}: stderr says the share is too small",
           h.stderr_text())
        eq(h.get("healthz").status, 200, f"nofile {n}: /healthz")
        r = h.get("status")
        d = r.json().get("descriptors", {}) if r.status == 200 else {}
        ok(r.status == 200 and d.get("share_too_small") is True and
           d.get("limit") == n and (d.get("limit_needed") or 0) > n,
           f"nofile {n}: /status descriptors.share_too_small", (r.status, d))
        r = h.get("heap")
        text = r.body.decode("utf-8", "replace")
        ok(r.status in (429, 503) and "RLIMIT_NOFILE" in text,
           f"nofile {n}: /heap answered with why, not reset",
           (r.status, text, r.stderr))
        eq(h.get("healthz").status, 200, f"nofile {n}: /healthz again")
        ok(h.p.poll() is None, f"nofile {n}: alive")
        h.quit()
    h = Tight(prefix=("prlimit", "--nofile=64"))
    r = h.get("status")
    d = r.json().get("descriptors", {}) if r.status == 200 else {}
    ok(d.get("share_too_small") is False and
       "RLIMIT_NOFILE" not in h.stderr_text(),
       "nofile 64: nothing said", (d, h.stderr_text()))
    eq(h.get("heap").status, 200, "nofile 64: /heap")
    h.quit()


def test_exec_listen_empty():
    """PULLPROF_EXEC_LISTEN= is unset: 200 children, not a line."""
    h = Tight(PULLPROF_EXEC_LISTEN="")
    eq(h.cmd("spawn 200"), "spawned 200", "200 children run")
    ok(h.p.poll() is None, "alive")
    h.quit()
    h.drain()
    lines = [x for x in h.err_lines if "not started" in x]
    eq(len(lines), 0, "no \"not started\" line from the children")


if __name__ == "__main__":
    run([test_address_space, test_free_anywhere, test_nproc, test_nofile,
         test_exec_listen_empty])

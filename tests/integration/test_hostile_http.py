"""Hostile HTTP clients and hosts (issue 27, items 8 and 10), against real
preloaded processes over real sockets:

* one local client holding its whole connection limit with long profile
  windows (16 x heap?seconds=20 from 127.0.0.1, the default per-client
  limit and max_heap_profiles) must not lock out /healthz, /status and
  /metrics from that same address, and a further profile is answered 429
  with Retry-After, never closed unanswered; the same with small
  PULLPROF_MAX_CLIENT_CONNECTIONS and PULLPROF_MAX_CONNECTIONS;
* requests HTTP forbids that libmicrohttpd hands on (two Host headers, an
  HTTP/1.1 request without one, a raw NUL in the target) get 400, and an
  absolute-form target is served (RFC 9112 3.2.2);
* HEAD on a profile is answered at once, without opening a window;
* a host that chroots into an empty directory: profiles answer 503 naming
  /proc/self/maps, the chroot and what to do.
"""
import json
import os
import re
import select
import socket
import sys
import tempfile
import time

from pptest import (LIBSO, SANITIZER, Host, Proc, curl, eq, ok, preload_env, run, skip,
                    until)

SLEEP = "/bin/sleep"
# Under TSan a CPU window in a preloaded program reports a race that is not
# this file's (pp_shim written by libpullprof.so's constructor in
# src/shim/dlclose.c after the autostarted agent's threads exist, read by
# pp_unwind_init at the first window), and halt_on_error ends the host: the
# HTTP checks run in the linked host there, and the chrooting host (python,
# preloaded) is asked no CPU or wall window.
TSAN_PRELOAD_WHY = ("tsan build: a CPU window in a preloaded program trips an "
                    "unrelated race at start (src/shim/dlclose.c)")


def agent(env=None, argv=(SLEEP, "600")):
    """A preloaded program (the linked tests/host under TSan) serving on a
    free port; (proc, port)."""
    if SANITIZER == "tsan":
        h = Host(env=env)
        port = h.start("127.0.0.1:0")
        ok(isinstance(port, int), "the agent serves", port)
        return h, port if isinstance(port, int) else 0
    p = Proc(list(argv), env=preload_env(PULLPROF_LISTEN="127.0.0.1:0", **(env or {})))
    m = p.wait_line(p.err_lines, r"serving http://127\.0\.0\.1:(\d+)/", timeout=20)
    ok(m, "the agent serves", p.stderr_text())
    return p, int(m.group(1)) if m else 0


def status(port, source="127.0.0.250"):
    """/status asked from an address the test does not fill."""
    r = curl(f"http://127.0.0.1:{port}/debug/pprof/status", "--interface", source,
             timeout=10)
    try:
        return json.loads(r.text) if r.status == 200 else {}
    except ValueError:
        return {}


def open_request(port, path, source="127.0.0.1", method="GET"):
    s = socket.create_connection(("127.0.0.1", port), timeout=30,
                                 source_address=(source, 0))
    s.sendall(f"{method} {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
    return s


def answered(socks, timeout):
    """{socket: first bytes} of the sockets that answered within timeout."""
    got = {}
    end = time.time() + timeout
    while time.time() < end:
        left = [s for s in socks if s not in got]
        if not left:
            break
        r, _, _ = select.select(left, [], [], min(0.2, max(0, end - time.time())))
        for s in r:
            try:
                got[s] = s.recv(4096)
            except OSError:
                got[s] = b""
    return got


def waiting_reached(port, want, socks):
    """The agent has taken every request: `want` wait for their windows
    (connections.waiting) — or, for a build without that field, every
    connection is open."""
    def pred():
        c = status(port).get("connections", {})
        if "waiting" in c:
            return c["waiting"] == want
        return c.get("active", 0) >= len(socks) + 1
    return until(pred, timeout=30)


def check_cheap_answered(port, what, source="127.0.0.1"):
    """healthz, status, metrics and a short profile from `source`: each
    answered, the profile with 200 or a 429 that says why."""
    base = f"http://127.0.0.1:{port}/debug/pprof"
    t0 = time.time()
    for path in ("healthz", "status", "metrics", "", "cmdline"):
        r = curl(f"{base}/{path}", "--interface", source, timeout=10)
        eq(r.status, 200, f"{what}: /{path} from {source} is answered")
    r = curl(f"{base}/profile?seconds=1", "--interface", source, timeout=15)
    ok(r.status in (200, 429), f"{what}: /profile from {source} is answered (200 or 429)", r)
    if r.status == 429:
        ok(r.header("retry-after") and r.header("retry-after").isdigit(),
           f"{what}: the 429 has Retry-After", r.headers)
        ok("PULLPROF_MAX_" in r.text, f"{what}: the 429 names the setting", r.text)
    ok(time.time() - t0 < 15, f"{what}: all of them within the windows, not after",
       time.time() - t0)
    return r


def test_one_client_long_windows():
    """Item 8 as reported: 16 heap windows from 127.0.0.1."""
    p, port = agent()
    socks = [open_request(port, "/debug/pprof/heap?seconds=20") for _ in range(16)]
    ok(waiting_reached(port, 15, socks), "the agent took all 16 requests",
       status(port).get("connections"))
    got = answered(socks, 5)
    refused = [b for b in got.values() if b.startswith(b"HTTP/1.1 429")]
    eq(len(refused), 1, "one window over the client's share is answered 429 at once")
    if refused:
        ok(re.search(rb"Retry-After: \d+", refused[0]) and
           b"PULLPROF_MAX_CLIENT_CONNECTIONS" in refused[0],
           "with Retry-After and a sentence naming PULLPROF_MAX_CLIENT_CONNECTIONS",
           refused[0])
    check_cheap_answered(port, "16 heap windows from 127.0.0.1")
    c = status(port).get("connections", {})
    ok(c.get("waiting") == 15 and c.get("waits_refused", 0) >= 2,
       "/status counts the windows waiting and the requests refused", c)
    for s in socks:
        s.close()
    p.stop()


def test_small_limits():
    # A client limit of 2: one window, then the client's share is full.
    p, port = agent({"PULLPROF_MAX_CLIENT_CONNECTIONS": "2"})
    a = open_request(port, "/debug/pprof/profile?seconds=20")
    b = open_request(port, "/debug/pprof/heap?seconds=20")
    ok(waiting_reached(port, 1, [a, b]), "limit 2: one window waits",
       status(port).get("connections"))
    got = answered([a, b], 5)
    ok(len(got) == 1 and list(got.values())[0].startswith(b"HTTP/1.1 429"),
       "limit 2: the second window is answered 429", got)
    check_cheap_answered(port, "PULLPROF_MAX_CLIENT_CONNECTIONS=2")
    a.close()
    b.close()
    p.stop()
    # A client limit of 1: its one window holds it; cheap requests come in
    # on the places kept past the limit.
    p, port = agent({"PULLPROF_MAX_CLIENT_CONNECTIONS": "1"})
    a = open_request(port, "/debug/pprof/heap?seconds=20")
    ok(waiting_reached(port, 1, [a]), "limit 1: the window waits",
       status(port).get("connections"))
    r = check_cheap_answered(port, "PULLPROF_MAX_CLIENT_CONNECTIONS=1")
    eq(r.status, 429, "limit 1: a second window is 429, on a kept place")
    ok(r.header("connection") == "close", "the kept place is given back after its answer",
       r.headers)
    c = status(port).get("connections", {})
    ok(c.get("reserved", 0) >= 5, "/status counts the connections let in on kept places", c)
    a.close()
    p.stop()
    # A total limit of 3, windows from two addresses: a third address
    # gets 429 for a window and its status answered.
    p, port = agent({"PULLPROF_MAX_CONNECTIONS": "3"})
    socks = [open_request(port, "/debug/pprof/heap?seconds=20", source=src)
             for src in ("127.0.0.2", "127.0.0.3")]
    ok(waiting_reached(port, 2, socks), "total 3: two windows wait",
       status(port).get("connections"))
    r = check_cheap_answered(port, "PULLPROF_MAX_CONNECTIONS=3", source="127.0.0.4")
    eq(r.status, 429, "total 3: a third window is 429")
    ok("PULLPROF_MAX_CONNECTIONS" in r.text, "naming PULLPROF_MAX_CONNECTIONS", r.text)
    for s in socks:
        s.close()
    p.stop()


def raw(port, data, timeout=10):
    """Send bytes; the whole answer (the agent closes after these)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(data)
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except OSError:
        pass
    s.close()
    return out


def status_of(answer):
    m = re.match(rb"HTTP/1\.[01] (\d{3})", answer)
    return int(m.group(1)) if m else 0


def test_protocol_errors():
    p, port = agent()
    P = f"127.0.0.1:{port}".encode()
    close = b"Connection: close\r\n"
    cases = [
        ("two Host headers", b"GET /debug/pprof/status HTTP/1.1\r\nHost: 127.0.0.1\r\n"
         b"Host: rebound.example.com\r\n" + close + b"\r\n", 400, b"2 Host headers"),
        ("two Host headers on healthz", b"GET /debug/pprof/healthz HTTP/1.1\r\n"
         b"Host: 127.0.0.1\r\nhost: 127.0.0.1\r\n" + close + b"\r\n", 400, b"Host"),
        ("HTTP/1.1 without Host", b"GET /debug/pprof/status HTTP/1.1\r\n" + close +
         b"\r\n", 400, b"must carry a Host header"),
        ("HTTP/1.0 without Host is served", b"GET /debug/pprof/healthz HTTP/1.0\r\n\r\n",
         200, b"ok"),
        ("raw NUL in the path", b"GET /debug/pprof/status\x00/../cmdline HTTP/1.1\r\n"
         b"Host: 127.0.0.1\r\n" + close + b"\r\n", 400, b"NUL"),
        ("raw NUL before a query", b"GET /debug/pprof/healthz\x00?x=1 HTTP/1.1\r\n"
         b"Host: 127.0.0.1\r\n" + close + b"\r\n", 400, b"NUL"),
        ("absolute-form target", b"GET http://" + P + b"/debug/pprof/healthz HTTP/1.1\r\n"
         b"Host: " + P + b"\r\n" + close + b"\r\n", 200, b"ok"),
        ("absolute-form: its authority replaces Host",
         b"GET http://" + P + b"/debug/pprof/status HTTP/1.1\r\n"
         b"Host: rebound.example.com\r\n" + close + b"\r\n", 200, b'"pid"'),
        ("absolute-form naming another host", b"GET http://rebound.example.com/debug/"
         b"pprof/status HTTP/1.1\r\nHost: 127.0.0.1\r\n" + close + b"\r\n", 403,
         b"rebound.example.com"),
        ("absolute-form with user information", b"GET http://u:p@" + P +
         b"/debug/pprof/status HTTP/1.1\r\nHost: 127.0.0.1\r\n" + close + b"\r\n", 400,
         b"user information"),
        ("absolute-form of another scheme", b"GET ftp://" + P + b"/debug/pprof/status "
         b"HTTP/1.1\r\nHost: 127.0.0.1\r\n" + close + b"\r\n", 400, b"not an http"),
        ("absolute-form with a query", b"GET http://" + P + b"/debug/pprof/heap?"
         b"seconds=abc HTTP/1.1\r\nHost: 127.0.0.1\r\n" + close + b"\r\n", 400,
         b"seconds"),
    ]
    for what, req, want, says in cases:
        got = raw(port, req)
        eq(status_of(got), want, f"{what}: {want}")
        ok(says in got, f"{what}: the answer says {says.decode()!r}", got[:600])
    eq(curl(f"http://127.0.0.1:{port}/debug/pprof/healthz").status, 200,
       "the agent answers after every one")
    p.stop()


def test_head():
    p, port = agent()
    for path, ctype in (("profile?seconds=20", "application/octet-stream"),
                        ("wall?seconds=20", "application/octet-stream"),
                        ("trace?seconds=20", "application/"),
                        ("heap?seconds=20", "application/octet-stream"),
                        ("profile?seconds=20&format=text", "text/plain")):
        t0 = time.time()
        got = raw(port, f"HEAD /debug/pprof/{path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                  .encode(), timeout=30)
        took = time.time() - t0
        head, _, body = got.partition(b"\r\n\r\n")
        eq(status_of(got), 200, f"HEAD /{path}: 200")
        ok(took < 5, f"HEAD /{path}: answered at once, not after the window", took)
        ok(body == b"", f"HEAD /{path}: no body, not even a last chunk", body[:40])
        ok(b"Content-Length: 0" not in head and ctype.encode() in head,
           f"HEAD /{path}: GET's Content-Type, no false Content-Length", head)
    c = status(port)
    eq(c.get("cpu", {}).get("windows_open"), 0, "no CPU window was opened")
    got = raw(port, b"HEAD /debug/pprof/profile?seconds=abc HTTP/1.1\r\n"
              b"Host: 127.0.0.1\r\nConnection: close\r\n\r\n")
    eq(status_of(got), 400, "HEAD with a bad parameter: 400 as GET")
    p.stop()


CHROOT_HOST = r"""
import os, sys, time
sys.stdin.readline()
os.chroot(sys.argv[1])
os.chdir("/")
print("chrooted", flush=True)
time.sleep(600)
"""


def test_chroot():
    if os.geteuid() != 0:
        skip("a host that chroots", "chroot needs root (CAP_SYS_CHROOT)")
        return
    empty = tempfile.mkdtemp(prefix="pp-chroot-")
    # The real interpreter, not a shell shim in front of it.
    p = Proc([os.path.realpath(sys.executable), "-c", CHROOT_HOST, empty],
             env=preload_env(PULLPROF_LISTEN="127.0.0.1:0"), stdout_lines=True)
    m = p.wait_line(p.err_lines, r"serving http://127\.0\.0\.1:(\d+)/", timeout=20)
    ok(m, "the chrooting host serves", p.stderr_text())
    if not m:
        p.stop()
        return
    port = int(m.group(1))
    base = f"http://127.0.0.1:{port}/debug/pprof"
    eq(curl(base + "/goroutine").status, 200, "before the chroot: a thread dump")
    p.p.stdin.write(b"go\n")
    p.p.stdin.flush()
    ok(p.wait_line(p.out_lines, "^chrooted$", timeout=10), "the host chrooted")
    paths = ["profile?seconds=1", "heap", "goroutine", "wall?seconds=1", "maps", "threads"]
    if SANITIZER == "tsan":
        skip("after chroot: CPU and wall windows", TSAN_PRELOAD_WHY)
        paths = paths[1:3] + paths[4:]
    for path in paths:
        r = curl(f"{base}/{path}", timeout=30)
        ok(r.status == 503, f"after chroot: /{path} is 503",
           (r, p.stderr_text()[-3000:]))
        ok("/proc/self/" in r.text and "chroot" in r.text and "mount" in r.text,
           f"after chroot: /{path} names the file, the chroot and what to do", r.text)
    eq(curl(base + "/healthz").status, 200, "the agent still answers")
    ok(p.p.poll() is None, "the host runs on")
    p.stop()
    os.rmdir(empty)


if __name__ == "__main__":
    assert os.path.exists(LIBSO), LIBSO
    run([test_one_client_long_windows, test_small_limits, test_protocol_errors,
         test_head, test_chroot])

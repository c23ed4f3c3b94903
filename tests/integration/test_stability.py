"""Resource stability: a real host process (tests/host) with the agent
answers 10,000 sequential mixed requests, and afterwards holds the same open
descriptors and threads as before, and its RSS grew by less than 1 MiB.

The mix (one cycle of MIX, repeated; the foreground loop is sequential):
  - JSON: /status, /threads, /maps, /cmdline;
  - heap: /heap and /allocs in every format (pprof, text via debug=1, folded,
    json, gzip-encoded text), sample_index by name and by number;
  - /symbol: GET "num_symbols", GET and POST address lists;
  - thread dumps: /goroutine as pprof, debug=1, debug=2 and folded, and
    /threadcreate (every thread read from outside, perf events opened and
    closed); /mutex and /block (pprof, debug=1, folded);
  - pages: the index, /ui/ and its assets (the viewer's style and every
    one of its script modules), the /ui redirect;
  - bad requests, each with its 4xx: malformed query values, an unknown
    path, a path outside the prefix, a wrong method, a traversal in /ui,
    an oversized /symbol body (Content-Length over the limit), and
    mixed-case parameter names (?sample_Index=1 once crashed the host;
    fuzz_query found it).
  Most go over one persistent HTTP/1.1 connection (http.client); every
  NEWCONN-th request opens a connection of its own.
  - CPU profiles (seconds=1, pprof/text/folded/legacy in turn) are slow:
    PROFILERS background threads fetch one window after another, each on a
    new connection, WINDOWS each, while the foreground loop runs, and the
    loop goes on with the mix until the windows end: 4 windows beside
    10,000-15,000 requests, some 10 s on the 2-core test machine.

Measured after a warm-up and again after the loop, once every client
connection is closed: /proc/PID/fd entries, /proc/PID/task entries, VmRSS,
and the bytes the host's malloc has in use (tests/host's "mem": mallinfo2).
The warm-up first symbolizes one address in every executable mapping (the
first address of a module loads its debug information: 2.5 MB for libc's,
and which modules the CPU windows' samples land in is chance), then runs
WARMUP requests of the mix with the background windows. The server closes
its side of a connection asynchronously, so the after-values are read when
they settle (polled, no timing asserted).
"""
import http.client
import json
import os
import socket
import threading
import time

import pptest
from pptest import Host, eq, ok, run, skip

TOTAL = int(os.environ.get("PP_STABILITY_REQUESTS", "10000"))
NEWCONN = 10
PROFILERS = 2
PREFIX = "/debug/pprof"
RSS_LIMIT_KB = 1024
WARMUP = 3000
WARM_WINDOWS = 4  # per profiler
WINDOWS = 2  # per profiler, beside the 10,000

# (method, path, body, expected status). Paths below the prefix unless they
# start with "!" (taken as they are).
HEAP_TYPES = ("heap", "allocs")
MIX = [
    ("GET", "/status", None, 200),
    ("GET", "/threads", None, 200),
    ("GET", "/maps", None, 200),
    ("GET", "/cmdline", None, 200),
    ("GET", "/", None, 200),
    ("GET", "/ui/", None, 200),
    ("GET", "/ui/viewer.js", None, 200),
    ("GET", "/ui/viewer.css", None, 200),
] + [
    # viewer.js's modules, as the page loads them
    ("GET", f"/ui/{m}.js", None, 200)
    for m in ("state", "format", "agent", "model", "draw", "chart", "flame",
              "timeline", "tables", "profile", "form", "recent", "address")
] + [
    ("GET", "/ui", None, 302),
    ("GET", "/symbol", None, 200),
    ("GET", "/symbol?0x1+0x2", None, 200),
    ("POST", "/symbol", b"0x1+0x2+0x3", 200),
    ("HEAD", "/status", None, 200),
    # bad requests
    ("GET", "/heap?debug=2", None, 400),
    ("GET", "/heap?format=xml", None, 400),
    ("GET", "/profile?seconds=abc", None, 400),
    ("GET", "/profile?seconds=1&seconds=2", None, 400),
    ("GET", "/heap?sample_index=nope", None, 400),
    ("GET", "/heap?top=5", None, 400),
    ("GET", "/nope", None, 404),
    ("GET", "!/elsewhere", None, 404),
    ("GET", "/ui/../status", None, 404),
    ("DELETE", "/status", None, 405),
    ("POST", "/heap", b"x", 405),
    ("POST", "/symbol", b"0x12+zz", 400),
    ("GET", "/heap?debug=1&sample_Index=1", None, 200),
    # thread dumps (each reads every thread from outside, perf events
    # included) and their bad input
    ("GET", "/goroutine", None, 200),
    ("GET", "/goroutine?debug=1", None, 200),
    ("GET", "/goroutine?debug=2", None, 200),
    ("GET", "/goroutine?format=folded", None, 200),
    ("GET", "/threadcreate?debug=1", None, 200),
    ("GET", "/goroutine?debug=3", None, 400),
    # the lock profiles (the host's own lock calls go through the
    # interposed wrappers meanwhile)
    ("GET", "/mutex", None, 200),
    ("GET", "/mutex?debug=1", None, 200),
    ("GET", "/block?format=folded", None, 200),
    ("GET", "/block?debug=2", None, 400),
    ("GET", "/wall?hz=0", None, 400),
]
for t in HEAP_TYPES:
    MIX += [
        ("GET", f"/{t}", None, 200),
        ("GET", f"/{t}?debug=1", None, 200),
        ("GET", f"/{t}?format=text&top=5", None, 200),
        ("GET", f"/{t}?format=folded&sample_index=inuse_space", None, 200),
        ("GET", f"/{t}?format=json&sample_index=1", None, 200),
        ("GET", f"/{t}?format=pprof", None, 200),
        ("GET", f"/{t}?format=legacy", None, 400),
    ]
# The oversized body is sent by hand (see oversized()); marked here.
MIX.append(("BIG", "/symbol", None, 413))

CPU_FORMATS = ("pprof", "text", "folded", "legacy")


def path_of(p):
    return p[1:] if p.startswith("!") else PREFIX + p


def rss_kb(pid, field="VmRSS"):
    """VmRSS (or RssAnon, RssFile) of pid, in kB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def oversized(port):
    """A /symbol POST declaring a body over the 4 MiB limit: the answer
    comes after the headers, without the body being sent."""
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    try:
        s.sendall(f"POST {PREFIX}/symbol HTTP/1.1\r\nHost: localhost\r\n"
                  f"Content-Length: {5 << 20}\r\n\r\n".encode())
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        return int(data.split()[1]) if data.startswith(b"HTTP/") else 0
    finally:
        s.close()


class Client:
    def __init__(self, port):
        self.port = port
        self.conn = None
        self.bad = []  # (request, got) of every unexpected answer
        self.count = 0
        self.new_connections = 0

    def request(self, method, path, body, want, fresh=False):
        self.count += 1
        if method == "BIG":
            got = oversized(self.port)
            self.new_connections += 1
        else:
            headers = {"Accept-Encoding": "gzip"} if self.count % 3 == 0 \
                else {}
            if fresh or self.conn is None:
                c = http.client.HTTPConnection("127.0.0.1", self.port,
                                               timeout=60)
                self.new_connections += 1
            else:
                c = self.conn
            try:
                c.request(method, path_of(path), body=body, headers=headers)
                r = c.getresponse()
                r.read()
                got = r.status
                closing = r.will_close
            except (http.client.HTTPException, OSError) as e:
                got, closing = repr(e), True
            if fresh or closing:
                c.close()
                if c is self.conn:
                    self.conn = None
            else:
                self.conn = c
        if got != want:
            self.bad.append((method, path, want, got))

    def close(self):
        if self.conn:
            self.conn.close()
            self.conn = None


def cpu_profiles(port, results, index, count):
    """Background: `count` CPU windows of one second, one after another."""
    for n in range(count):
        fmt = CPU_FORMATS[(n + index) % len(CPU_FORMATS)]
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        try:
            c.request("GET", f"{PREFIX}/profile?seconds=1&format={fmt}")
            r = c.getresponse()
            body = r.read()
            results.append((fmt, r.status, len(body)))
        except (http.client.HTTPException, OSError) as e:
            results.append((fmt, repr(e), 0))
        finally:
            c.close()


def good(p):
    """A CPU window's answer: 200 with a body. An idle host may give a
    window without samples: folded is empty then, every other format has a
    header."""
    fmt, status, size = p
    return status == 200 and (size > 0 or fmt == "folded")


def phase(h, port, n, windows):
    """n foreground requests of the mix (every NEWCONN-th on a new
    connection), while PROFILERS threads fetch `windows` CPU windows each,
    and on until they did. Returns the client, the windows' results and an
    RSS trace."""
    profiles = []
    bg = [threading.Thread(target=cpu_profiles,
                           args=(port, profiles, i, windows))
          for i in range(PROFILERS)]
    for t in bg:
        t.start()
    c = Client(port)
    trace = []
    for i in range(n):
        c.request(*MIX[i % len(MIX)], fresh=i % NEWCONN == 0)
        if i % 1000 == 999:
            trace.append(f"{i + 1}: {rss_kb(h.pid)} kB")
    i = 0
    while any(t.is_alive() for t in bg) and i < 100 * n:
        c.request(*MIX[i % len(MIX)], fresh=i % NEWCONN == 0)
        i += 1
    for t in bg:
        t.join()
    c.close()
    return c, profiles, trace


def settle(read, want, limit=60):
    """The value read() settles at: want as soon as it is seen, else the
    last value after limit seconds."""
    deadline = time.time() + limit
    v = read()
    while v != want and time.time() < deadline:
        time.sleep(0.2)
        v = read()
    return v


def symbols(port):
    """The symbolizer's counters from /status."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        c.request("GET", f"{PREFIX}/status")
        return json.loads(c.getresponse().read())["symbols"]
    finally:
        c.close()


def warm_symbolizer(pid, port):
    """Symbolize one address in the middle of every executable mapping:
    the first address of a module makes the symbolizer load its debug
    information (2.5 MB for libc's), and which modules the background CPU
    windows' samples land in is chance. Returns the answer's status."""
    addrs = []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            w = line.split()
            if len(w) >= 6 and w[1][2] == "x" and w[5].startswith("/"):
                lo, hi = (int(x, 16) for x in w[0].split("-"))
                addrs.append(hex((lo + hi) // 2))
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        c.request("POST", f"{PREFIX}/symbol", body="+".join(addrs))
        r = c.getresponse()
        r.read()
        return r.status
    finally:
        c.close()


def mem(h):
    """(bytes in use, free bytes kept) by the host's malloc (mallinfo2)."""
    w = h.cmd("mem").split()
    return int(w[1]), int(w[2])


def test_stability():
    h = Host()
    try:
        port = h.start("127.0.0.1:0")
        ok(isinstance(port, int), "host started the agent", port)

        eq(warm_symbolizer(h.pid, port), 200,
           "every module's debug information loaded")
        # Warm-up: the same mix with more background windows (the
        # allocator's arenas reach their high-water mark, and the code the
        # windows' samples land in has its debug information loaded).
        c, profiles, _ = phase(h, port, WARMUP, WARM_WINDOWS)
        eq(c.bad[:20], [], f"warm-up, {c.count} requests: every answer "
           "as expected")
        eq([p for p in profiles if not good(p)], [],
           f"warm-up, {len(profiles)} CPU windows: all 200")
        fds0 = settle(h.fds, None, 2)  # the server closed its side
        threads0, rss0 = len(h.threads()), rss_kb(h.pid)
        anon0, file0 = rss_kb(h.pid, "RssAnon"), rss_kb(h.pid, "RssFile")
        used0, free0 = mem(h)
        sym0 = symbols(port)

        t0 = time.time()
        c, profiles, trace = phase(h, port, TOTAL, WINDOWS)
        elapsed = time.time() - t0
        print(f"# {c.count} requests in {elapsed:.1f} s "
              f"({c.new_connections} on new connections), "
              f"{len(profiles)} CPU profiles beside them", flush=True)
        eq(c.bad[:20], [], f"{c.count} requests: every answer as expected")
        print("# RSS along the loop: " + ", ".join(trace), flush=True)
        eq([p for p in profiles if not good(p)], [],
           f"{len(profiles)} background CPU profiles: all 200")
        ok(len(profiles) >= PROFILERS, "the CPU windows ran beside the loop")

        fds1 = settle(h.fds, fds0)
        threads1 = settle(lambda: len(h.threads()), threads0)
        rss1 = rss_kb(h.pid)
        anon1, file1 = rss_kb(h.pid, "RssAnon"), rss_kb(h.pid, "RssFile")
        used1, free1 = mem(h)
        sym1 = symbols(port)
        print(f"# symbolizer before: {sym0}; after: {sym1}", flush=True)
        print(f"# before: {fds0} fds, {threads0} threads, {rss0} kB RSS, "
              f"malloc {used0 // 1024} kB in use, {free0 // 1024} kB kept "
              f"free; after: {fds1} fds, {threads1} threads, {rss1} kB RSS "
              f"({rss1 - rss0:+d} kB), malloc {used1 // 1024} kB in use "
              f"({(used1 - used0) // 1024:+d} kB), {free1 // 1024} kB kept "
              f"free ({(free1 - free0) // 1024:+d} kB); RssAnon {anon0} -> "
              f"{anon1} kB, RssFile {file0} -> {file1} kB", flush=True)
        eq(fds1, fds0, "open descriptors unchanged")
        eq(threads1, threads0, "threads unchanged")
        ok(used1 - used0 < RSS_LIMIT_KB * 1024,
           f"memory in use (malloc) grew by less than {RSS_LIMIT_KB} kB",
           f"{used0} -> {used1} bytes")
        if pptest.sanitized():
            # ASan holds freed blocks in its quarantine (up to 256 MiB)
            # before reuse, TSan maps shadow memory as the process touches
            # memory: the RSS is the sanitizer's, not the host's.
            skip("RSS growth", f"{pptest.SANITIZER} build: the sanitizer's "
                 "quarantine and shadow memory make the RSS")
        else:
            ok(rss1 - rss0 < RSS_LIMIT_KB,
               f"RSS grew by less than {RSS_LIMIT_KB} kB after warm-up",
               f"{rss0} kB -> {rss1} kB")
        # alive counts the ticks of 20 ms: on a loaded machine one try may
        # see none.
        ok(any(h.alive() for _ in range(10)),
           "the host's own thread still works")
    finally:
        h.quit()


run([test_stability])

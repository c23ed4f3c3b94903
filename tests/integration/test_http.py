"""HTTP behaviour of the agent in a linked host: index, status, cmdline,
errors, methods, redirects, prefixes, IPv6. Real process, real curl."""
import datetime
import os
import re
import socket
import time

import pptest
from pptest import (HOST, SRC, Host, curl, eq, ipv6_loopback, ok, run,
                    skip, version)

ARGS = ("--flag", "with space", "", "ünï")
RAW_ARG = b"latin1-\xe9"  # not UTF-8: /status must still be valid JSON
h = None
base = None
seen = []  # every response, to check the headers all answers share


def get(path, *args):
    r = curl(base + path, *args)
    seen.append((path, r))
    return r


def setup():
    global h, base
    h = Host(args=(*ARGS, RAW_ARG))
    port = h.start("127.0.0.1:0")
    ok(isinstance(port, int) and port > 0, "agent starts on port 0", port)
    base = f"http://127.0.0.1:{port}"
    # Nothing went wrong yet: libmicrohttpd said nothing at its start
    # (it warns when its logger is not the first option it is given).
    eq(get("/debug/pprof/status").json()["connections"]["server_errors"], 0,
       "a fresh agent has counted no server errors")


def test_index():
    r = get("/debug/pprof/")
    eq(r.status, 200, "index: 200")
    eq(r.header("content-type"), "text/html; charset=utf-8", "index: html")
    for link, name in (("status", "status"), ("cmdline", "cmdline")):
        ok(f'href="{link}"' in r.text and f">{name}<" in r.text,
           f"index links {name}", r.text[-800:])
    ok(version() in r.text, "index shows the version")
    ok(str(h.pid) in r.text, "index shows the pid")
    # Every link on the page answers 200.
    import re
    for href in re.findall(r'href="([^"]+)"', r.text):
        if href.startswith("data:"):
            continue  # the inline icon: nothing to fetch
        # A CPU profile link asks for 30 s; one second proves the link.
        rr = get("/debug/pprof/" + href.replace("seconds=30", "seconds=1"))
        eq(rr.status, 200, f"index link {href} answers 200")


def test_status_fields():
    t0 = time.time()
    r = get("/debug/pprof/status")
    eq(r.status, 200, "status: 200")
    eq(r.header("content-type"), "application/json", "status: JSON type")
    s = r.json()
    eq(s["version"], version(), "status.version is the package version")
    eq(s["pid"], h.pid, "status.pid is the host's pid")
    eq(s["executable"], os.path.realpath(HOST), "status.executable")
    eq(s["cmdline"], [HOST, *ARGS, "latin1-\ufffd"],
       "status.cmdline is argv, bytes that are not UTF-8 replaced")
    port = int(base.rsplit(":", 1)[1])
    eq(s["listen"], f"127.0.0.1:{port}", "status.listen is the bound address")
    eq(s["port"], port, "status.port")
    eq(s["autostarted"], False, "status.autostarted false for a linked host")
    eq(s["config"], {"listen": "127.0.0.1:0", "prefix": "/debug/pprof",
                     "max_connections": 32, "idle_timeout": 30, "cpu_hz": 100,
                     "max_seconds": 300, "max_cpu_windows": 8, "max_depth": 128,
                     "unwind": "dwarf", "heap_rate": 524288,
                     "token": False, "insecure": 0, "tls_cert": None,
                     "tls_key": None, "allow": None,
                     "max_client_connections": 16, "max_header_bytes": 32768,
                     "max_profile_mb": 64, "max_heap_profiles": 16,
                     "max_lookups": 4, "max_body_bytes": 4194304,
                     "metrics_path": None, "max_thread_dumps": 4,
                     "max_wall_profiles": 2, "wall_threads": 16,
                     "mutex_rate": 10, "block_rate": 10000,
                     "request_timeout": 10, "hosts": None,
                     "max_answers_mb": 256, "fork": "adopt",
                     "record": None, "record_hz": 19, "record_mb": 32},
       "status.config is the effective configuration")

    def parse(ts):
        return datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
            tzinfo=datetime.timezone.utc).timestamp()
    start = parse(s["start_time"])
    pstart = parse(s["process_start_time"])
    ok(t0 - 60 < start <= t0 + 1, "status.start_time is recent", s["start_time"])
    ok(pstart <= start + 0.02, "process started before the agent",
       (s["process_start_time"], s["start_time"]))
    ok(0 <= s["uptime_seconds"] <= time.time() - start + 1,
       "status.uptime_seconds agrees with start_time", s["uptime_seconds"])
    ok(s["process_uptime_seconds"] >= s["uptime_seconds"] - 0.02,
       "process uptime >= agent uptime")
    time.sleep(0.3)
    s2 = get("/debug/pprof/status").json()
    ok(s2["uptime_seconds"] - s["uptime_seconds"] >= 0.25,
       "uptime advances", (s["uptime_seconds"], s2["uptime_seconds"]))
    ok(s2["connections"]["active"] >= 1, "the asking connection is active")
    ok(s2["connections"]["total"] > s["connections"]["total"],
       "connections.total counts")


def test_status_counters():
    before = get("/debug/pprof/status").json()["requests"]
    get("/debug/pprof/cmdline")
    get("/debug/pprof/cmdline")
    get("/debug/pprof/nope")
    get("/debug/pprof/status", "-X", "DELETE")
    get("/elsewhere")
    after = get("/debug/pprof/status").json()["requests"]
    b, a = before["by_endpoint"], after["by_endpoint"]
    eq(a["cmdline"]["2xx"] - b["cmdline"]["2xx"], 2, "cmdline 2xx counted")
    eq(a["other"]["4xx"] - b["other"]["4xx"], 2, "unknown paths counted as other 4xx")
    eq(a["status"]["4xx"] - b["status"]["4xx"], 1, "405 counted on its endpoint")
    # The first status answer was counted after it was built, the DELETE and
    # the four others in between: 6 in all.
    eq(after["total"] - before["total"], 6, "requests.total is the sum")
    # The table as the agent makes it (the routes of no kind and every
    # kind's endpoints), from tests/settings_dump.
    names = [rt["name"] for rt in pptest.routes()]
    ok(len(names) >= 8, "found the routing table", names)
    eq(sorted(a), sorted(names + ["other"]),
       "every endpoint of the routing table has counters")
    eq(sorted(a["status"]), ["1xx", "2xx", "3xx", "4xx", "5xx"][1:],
       "status classes 2xx..5xx")


def test_cmdline():
    r = get("/debug/pprof/cmdline")
    eq(r.status, 200, "cmdline: 200")
    eq(r.header("content-type"), "text/plain; charset=utf-8", "cmdline: text")
    want = b"\0".join([*(a.encode() for a in (HOST, *ARGS)), RAW_ARG])
    eq(r.body, want, "cmdline: argv joined by NUL, as Go serves it")


def test_not_found():
    for path in ("/debug/pprof/nope", "/debug/pprof/status/",
                 "/debug/pprofx", "/favicon.ico", "/debug/pprof/%00",
                 "/debug/pprof/../pprof/status"):
        r = get(path, "--path-as-is")
        eq(r.status, 404, f"{path}: 404")
        ok(r.header("x-go-pprof") == "1" and
           r.header("content-type") == "text/plain; charset=utf-8",
           f"{path}: text/plain with X-Go-Pprof", r)
        ok("pprof" in r.text, f"{path}: says where the endpoints are", r.text)


def test_methods():
    for m in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
        r = get("/debug/pprof/status", "-X", m)
        eq(r.status, 405, f"{m} /status: 405")
        eq(r.header("allow"), "GET, HEAD", f"{m} /status: Allow header")
        j = r.json()
        ok(j["status"] == 405 and m in j["error"],
           f"{m} /status: JSON error body", j)
    r = get("/debug/pprof/cmdline", "-X", "POST", "-d", "x=1")
    eq(r.status, 405, "POST /cmdline: 405")
    eq(r.header("x-go-pprof"), "1", "POST /cmdline: X-Go-Pprof error")
    r = get("/debug/pprof/status", "-X", "GET", "-d", "body")
    eq(r.status, 413, "GET with a body: 413")
    ok("no request body" in r.json()["error"], "413 says why", r.text)


def raw(request, timeout=5):
    """Send bytes on a fresh connection; return all the server sends back
    until it closes (or the timeout passes)."""
    s = socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1])), 5)
    s.sendall(request)
    s.settimeout(timeout)
    data = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        pass
    s.close()
    return data


def test_head():
    r = get("/debug/pprof/status", "-I")
    eq(r.status, 200, "HEAD /status: 200")
    data = raw(b"HEAD /debug/pprof/status HTTP/1.1\r\nHost: localhost\r\n"
               b"Connection: close\r\n\r\n")
    head, _, body = data.partition(b"\r\n\r\n")
    ok(head.startswith(b"HTTP/1.1 200"), "raw HEAD answered", data[:200])
    eq(body, b"", "HEAD sends no body")
    ok(b"Content-Length: " in head and
       int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0]) > 100,
       "HEAD gives the length of the GET body", head)


def test_redirects():
    for path in ("/", "/debug/pprof"):
        r = get(path)
        eq(r.status, 302, f"{path}: redirect")
        eq(r.header("location"), "/debug/pprof/", f"{path}: to the index")
    r = get("/", "-L")
    eq(r.status, 200, "following the redirect reaches the index")


def test_query_and_keepalive():
    eq(get("/debug/pprof/status?x=1&y").status, 200, "unknown query ignored")


def test_common_headers():
    bad = [(p, r.status) for p, r in seen
           if r.header("x-content-type-options") != "nosniff"]
    eq(bad, [], "every answer carries X-Content-Type-Options: nosniff")
    bad = [(p, r.status) for p, r in seen if r.header("cache-control") != "no-store"]
    eq(bad, [], "every answer carries Cache-Control: no-store")


def test_keepalive():
    # Two URLs on one curl command line: the second reuses the connection.
    import subprocess
    from pptest import CURL
    p = subprocess.run([CURL, "-sv", "-o", "/dev/null", "-o", "/dev/null",
                        base + "/debug/pprof/status", base + "/debug/pprof/cmdline"],
                       capture_output=True, timeout=20)
    ok(b"Re-using existing connection" in p.stderr, "connections are kept alive",
       p.stderr.decode()[-500:])


def test_malformed():
    for req in (b"GET /debug/pprof/status HTTP/1.1\r\nHost: localhost\r\nNoColon\r\n\r\n",
                b"GET /debug/pprof/status HTTP/1.1\r\nHost: localhost\r\n"
                b"Content-Length: abc\r\n\r\n",
                b"GET  HTTP/1.1\r\nHost: localhost\r\n\r\n"):
        data = raw(req)
        ok(data.startswith(b"HTTP/1.1 400"), f"malformed {req[:48]!r}...: 400",
           data[:100])
    t = time.time()
    data = raw(b"GARBAGE\r\n\r\n", timeout=10)
    ok(data == b"" or data.startswith(b"HTTP/1.1 4"),
       "a garbage request line is refused or dropped", data[:100])
    ok(time.time() - t < 9, "... at once, not after a timeout")
    data = raw(b"GET /debug/pprof/status HTTP/1.1\r\nHost: localhost\r\n" +
               b"X-Big: " + b"a" * 100000 + b"\r\n\r\n")
    ok(data == b"" or b" 431 " in data.split(b"\r\n")[0] or
       b" 413 " in data.split(b"\r\n")[0],
       "a 100 kB header is refused", data[:100])
    r = get("/debug/pprof/" + "a" * 20000)
    ok(400 <= r.status < 500, "a 20 kB URL gets a 4xx", r.status)
    ok(h.alive(), "the host is alive after bad requests")
    eq(get("/debug/pprof/status").status, 200, "the agent still answers")


def test_custom_prefix():
    for env_prefix, root in (("/ops/pp/", "/ops/pp"), ("", "")):
        h2 = Host(env={"PULLPROF_PREFIX": env_prefix})
        port = h2.start("127.0.0.1:0")
        b = f"http://127.0.0.1:{port}"
        r = curl(b + root + "/status")
        eq(r.status, 200, f"prefix {env_prefix!r}: status served at {root}/status")
        eq(r.json()["config"]["prefix"], root, f"prefix {env_prefix!r} normalized")
        r = curl(b + root + "/")
        eq(r.status, 200, f"prefix {env_prefix!r}: index at {root}/")
        ok('href="status"' in r.text, "index links are relative")
        if root:
            eq(curl(b + "/debug/pprof/status").status, 404,
               "the default prefix is not served then")
        h2.quit()


def test_ipv6():
    if not ipv6_loopback():
        skip("IPv6 listen", "no IPv6 loopback here")
        return
    h6 = Host()
    port = h6.start("[::1]:0")
    ok(isinstance(port, int), "agent listens on [::1]:0", port)
    r = curl(f"http://[::1]:{port}/debug/pprof/status")
    eq(r.status, 200, "status over IPv6")
    eq(r.json()["listen"], f"[::1]:{port}", "status.listen shows [::1]")
    h6.quit()


def teardown():
    eq(h.quit(), 0, "host exits cleanly with the agent running")


run([setup, test_index, test_status_fields, test_status_counters, test_cmdline,
     test_not_found, test_methods, test_head, test_redirects,
     test_query_and_keepalive, test_keepalive, test_malformed,
     test_custom_prefix, test_ipv6, test_common_headers, teardown])

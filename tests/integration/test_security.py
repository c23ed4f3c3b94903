"""Security over real HTTP(S): the token (Bearer and Basic, on every route
but healthz), no non-loopback address without it, HTTPS with a real
certificate (curl, go tool pprof), the client allow-list, connection and
header limits, slow clients, and the table of bad inputs (docs/security.md) — each row
is tried against a running agent and must get the answer the table says.
Real processes: tests/host and tests/cpu/burn."""
import http.server
import json
import os
import re
import select
import socket
import subprocess
import tempfile
import threading
import time
import warnings

# cdp runs the whole program again under Debian's python3 when the one
# running it has no websocket module (python3-websocket is Debian's): it
# must be imported before the first line of TAP, or the TAP is printed
# twice (226 checks counted as errors in a run of scripts/test.sh).
from cdp import Browser, CDPError, find_chromium
import pptest  # noqa: E402
from pptest import (BUILD, Host, Proc, SRC, curl, eq, go_pprof, ipv6_loopback,
                    ok, preload_env, run, skip, until)

BURN = os.path.join(BUILD, "tests", "cpu", "burn")
TOKEN = "t0ken-for-the-tests-123"
def route_paths():
    return [rt["path"] for rt in pptest.routes()]


def burn(env, threads=1, seconds=600):
    p = Proc([BURN, str(threads), str(seconds)],
             env={"PULLPROF_LISTEN": "127.0.0.1:0", **env}, stdin=False)
    try:
        m = p.wait_line(p.out_lines, r"^port (\d+)", timeout=15)
    except Exception:  # noqa: BLE001 - the caller looks at stderr
        return p, None
    return p, int(m.group(1))


def start_error(env):
    """What a start with env says on stderr, and its return line."""
    h = Host(env=env)
    line = h.start(env.get("PULLPROF_LISTEN", "127.0.0.1:0"))
    h.quit()
    h.drain()
    return line, h.stderr_text()


def test_refused_starts():
    cases = [
        ({"PULLPROF_LISTEN": "0.0.0.0:0"},
         "is not a loopback address", "PULLPROF_INSECURE=1"),
        ({"PULLPROF_LISTEN": ":0"}, "is not a loopback address", "PULLPROF_TOKEN"),
        ({"PULLPROF_TOKEN": "short"}, "PULLPROF_TOKEN: must be 8 to 256", "5 characters"),
        ({"PULLPROF_TOKEN": "has space in it"}, "PULLPROF_TOKEN: must be", "not printable"),
        ({"PULLPROF_TLS_CERT": "/nonexistent.pem"}, "PULLPROF_TLS_CERT is set but not "
         "PULLPROF_TLS_KEY", "both"),
        ({"PULLPROF_TLS_CERT": "/nonexistent.pem", "PULLPROF_TLS_KEY": "/nonexistent.key"},
         "PULLPROF_TLS_CERT: cannot read /nonexistent.pem", "No such file"),
        ({"PULLPROF_TLS_CERT": "/etc/hostname", "PULLPROF_TLS_KEY": "/etc/hostname"},
         "is not a PEM file", "BEGIN"),
        ({"PULLPROF_ALLOW": "10.1.2.3/8"}, "PULLPROF_ALLOW", "past the prefix length"),
        ({"PULLPROF_ALLOW": "10.0.0.0/33"}, "PULLPROF_ALLOW", "0..32"),
        ({"PULLPROF_ALLOW": "intranet"}, "PULLPROF_ALLOW", "not an IPv4 or IPv6"),
        ({"PULLPROF_MAX_HEADER_BYTES": "100"}, "PULLPROF_MAX_HEADER_BYTES", "4096"),
    ]
    for env, want, also in cases:
        line, err = start_error(env)
        ok(line.startswith("err ") and want in err and also in err,
           f"start refused: {env}: {want!r}", (line, err))
        if "PULLPROF_TOKEN" in env:
            ok(env["PULLPROF_TOKEN"] not in err, "the message does not repeat the token",
               err)
    # The explicit opt-outs start.
    for env in ({"PULLPROF_LISTEN": "0.0.0.0:0", "PULLPROF_INSECURE": "1"},
                {"PULLPROF_LISTEN": "0.0.0.0:0", "PULLPROF_TOKEN": TOKEN}):
        p, port = burn(env)
        ok(port, f"starts: {sorted(env)}", p.stderr_text())
        if port:
            r = curl(f"http://127.0.0.1:{port}/debug/pprof/status",
                     "-H", f"Authorization: Bearer {TOKEN}")
            eq(r.status, 200, f"and answers: {sorted(env)}")
        p.stop()


def test_token():
    p, port = burn({"PULLPROF_TOKEN": TOKEN, "PULLPROF_HEAP_RATE": "65536"})
    base = f"http://127.0.0.1:{port}/debug/pprof"
    for path in route_paths():
        url = base + path
        r = curl(url)
        if path == "/healthz":
            ok(r.status == 200 and r.text == "ok\n", "healthz: 200 ok without the token", r)
            continue
        www = r.headers.get("www-authenticate", "")
        ok(r.status == 401 and "needs its token" in r.text and
           "Authorization: Bearer TOKEN" in r.text,
           f"{path} without the token: 401 saying how to pass it", r)
        if path == "/status":
            ok(r.json()["status"] == 401, "a JSON endpoint's 401 is JSON", r)
        if path == "/profile":
            eq(r.header("x-go-pprof"), "1", "profile's 401 carries X-Go-Pprof")
        ok(www, f"{path}: WWW-Authenticate", r.headers)
    # curl keeps only the last header of a name: read them raw.
    raw = subprocess.run(["curl", "-s", "-D", "-", "-o", "/dev/null", base + "/status"],
                         capture_output=True, text=True).stdout
    ok('WWW-Authenticate: Bearer realm="pullprof"' in raw and
       'WWW-Authenticate: Basic realm="pullprof"' in raw,
       "401 challenges Bearer and Basic", raw)
    for how, args in [("Bearer", ["-H", f"Authorization: Bearer {TOKEN}"]),
                      ("bearer, lower case, extra spaces",
                       ["-H", f"Authorization: bearer   {TOKEN}  "]),
                      ("Basic (curl -u)", ["-u", f"anyone:{TOKEN}"]),
                      ("Basic in the URL", [])]:
        url = (base.replace("http://", f"http://pullprof:{TOKEN}@")
               if how == "Basic in the URL" else base) + "/status"
        r = curl(url, *args)
        eq(r.status, 200, f"the token as {how}: 200")
        if r.status == 200:
            ok(TOKEN not in r.text and r.json()["config"]["token"] is True,
               "status says a token is set, never which", r.text[:300])
    for how, args in [("a wrong Bearer", ["-H", "Authorization: Bearer wrong-token-1"]),
                      ("the token's prefix", ["-H", f"Authorization: Bearer {TOKEN[:-1]}"]),
                      ("the token plus a byte", ["-H", f"Authorization: Bearer {TOKEN}x"]),
                      ("a wrong Basic password", ["-u", "pullprof:nope-nope"]),
                      ("the token as the Basic user", ["-u", f"{TOKEN}:"]),
                      ("another scheme", ["-H", f"Authorization: Token {TOKEN}"])]:
        r = curl(base + "/status", *args)
        expected = "does not match" if "scheme" not in how else "needs its token"
        ok(r.status == 401 and expected in r.text, f"{how}: 401", r)
    # A body to /symbol without the token is not read: 401 at once.
    r = curl(base + "/symbol", "-X", "POST", "--data-binary", "0x1234")
    eq(r.status, 401, "POST /symbol without the token: 401")
    # go tool pprof: the URL's user:password is sent as Basic.
    code, out, err = go_pprof(
        "-raw", f"http://pullprof:{TOKEN}@127.0.0.1:{port}/debug/pprof/profile?seconds=1")
    ok(code == 0 and "PeriodType: cpu nanoseconds" in out,
       "go tool pprof with the token in the URL", err[-500:])
    code, out, err = go_pprof("-raw", f"{base}/profile?seconds=1")
    ok(code != 0 and "401" in err and "needs its token" in err,
       "go tool pprof without it prints the agent's explanation", err[-500:])
    p.stop()


def make_certs(d):
    """A CA and a server certificate for 127.0.0.1 signed by it."""
    def sh(*a):
        subprocess.run(a, cwd=d, check=True, capture_output=True)
    sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
       "-out", "ca.pem", "-days", "2", "-subj", "/CN=pullprof test CA")
    sh("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key",
       "-out", "server.csr", "-subj", "/CN=127.0.0.1")
    with open(os.path.join(d, "ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    sh("openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
       "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "ext")


def tls_handshake(port, version):
    """Does a TLS handshake of exactly this version succeed?"""
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    except ssl.SSLError:
        pass
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        v = getattr(ssl.TLSVersion, version)
    ctx.minimum_version = ctx.maximum_version = v
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            with ctx.wrap_socket(s) as t:
                return t.version() is not None
    except (ssl.SSLError, OSError):
        return False


def test_tls():
    with tempfile.TemporaryDirectory() as d:
        make_certs(d)
        cert, key, ca = (os.path.join(d, n) for n in ("server.pem", "server.key", "ca.pem"))
        p, port = burn({"PULLPROF_TLS_CERT": cert, "PULLPROF_TLS_KEY": key,
                        "PULLPROF_TOKEN": TOKEN})
        ok(port, "HTTPS agent started", p.stderr_text())
        base = f"https://127.0.0.1:{port}/debug/pprof"
        r = curl(base + "/status", "--cacert", ca, "-H", f"Authorization: Bearer {TOKEN}")
        ok(r.status == 200 and r.json()["config"]["tls_cert"] == cert,
           "curl --cacert: HTTPS status 200, verified against the CA", r)
        r = curl(base + "/healthz", "--cacert", ca)
        eq(r.status, 200, "healthz over HTTPS")
        r = curl(base + "/status", "--cacert", ca)
        ok(r.status == 401 and "https://pullprof:TOKEN@" in r.text,
           "401 over HTTPS names the https URL form", r)
        r = curl(base + "/status")
        ok(r.status == 0 and r.exit_code == 60,
           "curl without the CA refuses the certificate (exit 60)", r)
        r = curl(base.replace("https:", "http:") + "/healthz", timeout=5)
        ok(r.status != 200, "plain HTTP to the HTTPS port gets no answer", r)
        code, out, err = go_pprof(
            "-raw", f"https+insecure://pullprof:{TOKEN}@127.0.0.1:{port}"
            "/debug/pprof/profile?seconds=1")
        ok(code == 0 and "PeriodType: cpu nanoseconds" in out,
           "go tool pprof https+insecure:// with the token", err[-500:])
        # TLS 1.2 and 1.3 only. The client is made willing to speak 1.0
        # and 1.1 (Debian's OpenSSL refuses them by default), so a refusal
        # is the agent's.
        for ver, want in (("TLSv1", False), ("TLSv1_1", False),
                          ("TLSv1_2", True), ("TLSv1_3", True)):
            got = tls_handshake(port, ver)
            ok(got == want, f"{ver}: {'offered' if want else 'refused'}", got)
        r = curl(base + "/status", "--cacert", ca, "-H", f"Authorization: Bearer {TOKEN}")
        ok(r.status == 200, "the agent still answers after all that", r)
        p.stop()
        # The line a preloaded host prints says https, and which versions.
        pre = Proc(["sleep", "30"], env=preload_env(
            PULLPROF_TLS_CERT=cert, PULLPROF_TLS_KEY=key, PULLPROF_LISTEN="127.0.0.1:0"))
        line = pre.wait_line(pre.err_lines, r"pullprof\[\d+\]: serving \S+", timeout=15)
        ok(line and "serving https://127.0.0.1:" in line.group(0) and
           "(TLS 1.2 and 1.3)" in pre.stderr_text(),
           "a preloaded HTTPS agent says serving https://, TLS 1.2 and 1.3",
           pre.stderr_text())
        pre.stop()
        # A FIFO, a device or a directory as a TLS file: refused at once,
        # without reading (a FIFO without a writer would block for ever,
        # /dev/stdin would eat the host's input).
        fifo = os.path.join(d, "fifo.pem")
        os.mkfifo(fifo)
        for what, path in (("a FIFO", fifo), ("a character device", "/dev/zero"),
                           ("a directory", d)):
            t0 = time.time()
            line, err = start_error({"PULLPROF_TLS_CERT": path, "PULLPROF_TLS_KEY": key})
            ok(line.startswith("err ") and f"is not a regular file ({what})" in err
               and time.time() - t0 < 10, f"TLS cert {what}: refused at once", err)
        # Certificate and key swapped: a clear start error.
        line, err = start_error({"PULLPROF_TLS_CERT": key, "PULLPROF_TLS_KEY": cert})
        ok(line.startswith("err ") and "cannot start HTTPS" in err,
           "cert and key swapped: start refused", err)


def test_allow():
    for allow, want in (("10.0.0.0/8", 403), ("127.0.0.0/8", 200),
                        ("192.168.0.0/16, 127.0.0.1", 200), ("::1/128", 403)):
        p, port = burn({"PULLPROF_ALLOW": allow})
        for path in ("/status", "/healthz"):
            r = curl(f"http://127.0.0.1:{port}/debug/pprof{path}")
            ok(r.status == want and (want == 200 or "PULLPROF_ALLOW" in r.text),
               f"ALLOW={allow}: {path} from 127.0.0.1: {want}", r)
        p.stop()
    if not ipv6_loopback():
        return
    for allow, want in (("::1/128", 200), ("127.0.0.0/8", 403)):
        p, port = burn({"PULLPROF_ALLOW": allow, "PULLPROF_LISTEN": "[::1]:0"})
        r = curl(f"http://[::1]:{port}/debug/pprof/status")
        eq(r.status, want, f"ALLOW={allow}: from ::1: {want}")
        p.stop()


def raw(port, data, timeout=5.0):
    """Send bytes on a new connection; the status of the answer (0: none)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        got = b""
        while b"\r\n" not in got:
            b = s.recv(4096)
            if not b:
                break
            got += b
    except OSError:
        got = b""
    finally:
        s.close()
    m = re.match(rb"HTTP/1\.[01] (\d+)", got)
    return int(m.group(1)) if m else 0


def agent_status(port, source="127.0.0.2"):
    """/status, asked from another loopback address (so as not to count
    against 127.0.0.1's connections); {} when there is no answer."""
    r = curl(f"http://127.0.0.1:{port}/debug/pprof/status", "--interface", source)
    return json.loads(r.text) if r.status == 200 else {}


def windows_open(port):
    return agent_status(port).get("cpu", {}).get("windows_open", -1)


def test_limits():
    p, port = burn({"PULLPROF_MAX_CLIENT_CONNECTIONS": "3", "PULLPROF_IDLE_TIMEOUT": "2"})
    base = f"http://127.0.0.1:{port}/debug/pprof"
    # Three CPU windows asked on three connections: a client's windows take
    # all but one place of its limit, so the third is answered 429 (never
    # closed unanswered), and the address's /healthz is answered while the
    # two others run (tests/integration/test_hostile_http.py has the rest).
    held = []
    for _ in range(3):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"GET /debug/pprof/profile?seconds=30 HTTP/1.1\r\n"
                  b"Host: localhost\r\n\r\n")
        held.append(s)
    ok(until(lambda: windows_open(port) == 2), "two windows open from 127.0.0.1")
    ready, _, _ = select.select(held, [], [], 10)
    third = ready[0].recv(4096) if len(ready) == 1 else ready
    ok(third.startswith(b"HTTP/1.1 429") and b"PULLPROF_MAX_CLIENT_CONNECTIONS" in third,
       "the third is answered 429 naming PULLPROF_MAX_CLIENT_CONNECTIONS", third)
    r = curl(base + "/healthz", timeout=5)
    eq(r.status, 200, "/healthz from the same address is answered meanwhile")
    r = curl(base + "/healthz", "--interface", "127.0.0.2", timeout=5)
    eq(r.status, 200, "another address is answered meanwhile")
    for s in held:
        s.close()
    ok(until(lambda: agent_status(port).get("connections", {}).get("active") == 1),
       "the three are gone once closed (the only connection left is the "
       "one asking)")
    eq(curl(base + "/healthz").status, 200, "answered again once they closed")
    # Slow client: headers that never end are cut at the idle timeout, and
    # the agent answers others meanwhile.
    slow = socket.create_connection(("127.0.0.1", port))
    slow.sendall(b"GET /debug/pprof/status HTTP/1.1\r\nHost: localhost\r\n")
    eq(curl(base + "/healthz").status, 200, "answers others while a client dawdles")
    slow.settimeout(10)
    t0 = time.time()
    try:
        closed = slow.recv(100) == b""
    except OSError:
        closed = True
    ok(closed and time.time() - t0 < 8, "the slow client is cut off by the idle timeout",
       time.time() - t0)
    slow.close()
    # Headers past PULLPROF_MAX_HEADER_BYTES (32 KiB by default).
    big = raw(port, b"GET /debug/pprof/status HTTP/1.1\r\nHost: localhost\r\nX-Big: " +
              b"a" * 40000 + b"\r\n\r\n")
    ok(big in (413, 414, 431), "a 40 KB header: refused with 4xx", big)
    long_url = raw(port, b"GET /debug/pprof/status?" + b"a" * 40000 +
                   b" HTTP/1.1\r\nHost: localhost\r\n\r\n")
    ok(long_url in (413, 414, 431), "a 40 KB request line: refused with 4xx", long_url)
    eq(curl(base + "/healthz").status, 200, "and the agent goes on")
    p.stop()


# The table of bad inputs in docs/security.md: every row is run here.
BAD = [
    ("malformed query", "/debug/pprof/profile?seconds=abc", "GET", 400),
    ("huge seconds", "/debug/pprof/profile?seconds=999999", "GET", 400),
    ("negative number", "/debug/pprof/profile?seconds=-1", "GET", 400),
    ("overflowing number", "/debug/pprof/profile?hz=99999999999999999999999", "GET", 400),
    ("a value given twice", "/debug/pprof/heap?seconds=1&seconds=2", "GET", 400),
    ("unknown format", "/debug/pprof/profile?format=xml", "GET", 400),
    ("thread dump debug level", "/debug/pprof/goroutine?debug=3", "GET", 400),
    ("a delta dump as text", "/debug/pprof/goroutine?seconds=5&debug=1", "GET", 400),
    ("wall-clock rate", "/debug/pprof/wall?hz=5000", "GET", 400),
    ("a trace in another format", "/debug/pprof/trace?format=pprof", "GET", 400),
    ("a timeline of a profile that keeps none", "/debug/pprof/heap?format=perfetto",
     "GET", 400),
    ("unknown method", "/debug/pprof/status", "BREW", 405),
    ("body where none is taken", "/debug/pprof/status", "GET:body", 413),
    ("unknown path", "/debug/pprof/nope", "GET", 404),
    ("outside the prefix", "/etc/passwd", "GET", 404),
    ("traversal in the viewer", "/debug/pprof/ui/../status", "GET", 404),
    ("encoded traversal", "/debug/pprof/ui/%2e%2e/%2e%2e/etc/passwd", "GET", 404),
    ("NUL in the path", "/debug/pprof/ui/index.html%00.js", "GET", 404),
    ("bad symbol body", "/debug/pprof/symbol", "POST:not-an-address", 400),
    ("too many query parameters",
     "/debug/pprof/healthz?" + "&".join(f"a{i}=1" for i in range(500)), "GET", 414),
    ("a Host that is not this agent's", "/debug/pprof/status",
     "GET:hdr=Host: rebound.example.com:6060", 403),
    ("a request a page of another site made", "/debug/pprof/heap?peak=reset",
     "GET:hdr=Sec-Fetch-Site: cross-site", 403),
    ("a request from another origin", "/debug/pprof/status",
     "GET:hdr=Origin: http://evil.example", 403),
    ("a browser's window without its own page's Referer",
     "/debug/pprof/profile?seconds=300",
     "GET:hdr=User-Agent: Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0", 403),
    ("missing token", "/debug/pprof/status", "GET:token", 401),
    ("wrong token", "/debug/pprof/status", "GET:badtoken", 401),
    # HTTP-level inputs libmicrohttpd hands on (issue 27): RAW rows are sent
    # as they are on a socket, {port} filled in.
    ("two Host headers", "GET /debug/pprof/status HTTP/1.1\r\nHost: 127.0.0.1\r\n"
     "Host: rebound.example.com\r\n\r\n", "RAW", 400),
    ("HTTP/1.1 without Host", "/debug/pprof/status", "GET:hdr=Host:", 400),
    ("raw NUL in the path", "GET /debug/pprof/status\x00/../cmdline HTTP/1.1\r\n"
     "Host: 127.0.0.1\r\n\r\n", "RAW", 400),
    ("absolute-form target", "http://127.0.0.1:{port}/debug/pprof/healthz", "GET:target",
     200),
    ("HEAD on a profile", "/debug/pprof/profile?seconds=60", "HEAD", 200),
]


def test_bad_inputs_table():
    with open(os.path.join(SRC, "docs", "security.md")) as f:
        readme = f.read()
    plain, port = burn({})
    tok, tport = burn({"PULLPROF_TOKEN": TOKEN})
    for what, path, method, want in BAD:
        args = ["--path-as-is"]
        target = port
        if method == "GET:body":
            args += ["-X", "GET", "--data-binary", "x" * 100]
        elif method.startswith("POST"):
            args += ["-X", "POST", "--data-binary", method[5:] or "x"]
        elif method == "GET:token":
            target = tport
        elif method.startswith("GET:hdr="):
            args += ["-H", method[8:]]
        elif method == "GET:badtoken":
            target = tport
            args += ["-H", "Authorization: Bearer not-the-token"]
        elif method == "GET:target":
            args += ["--request-target", path.format(port=target)]
        elif method == "HEAD":
            args += ["--head"]
        elif method not in ("GET", "RAW"):
            args += ["-X", method]
        if method == "RAW":
            status = raw(target, path.format(port=target).encode("latin-1"))
        else:
            t0 = time.time()
            r = curl(f"http://127.0.0.1:{target}" +
                     ("/" if method == "GET:target" else path), *args)
            status = r.status
            if method == "HEAD":
                ok(time.time() - t0 < 10, f"{what}: answered at once", time.time() - t0)
        eq(status, want, f"{what}: {method.split(':')[0]} {path!r} -> {want}")
        row = re.search(r"^\| " + re.escape(what) + r" \|.*\| `?(\d{3})", readme, re.M)
        ok(row and int(row.group(1)) == want, f"docs/security.md says {want} for {what}",
           row.group(0) if row else "no row")
    eq(curl(f"http://127.0.0.1:{port}/debug/pprof/healthz").status, 200,
       "the agent answers after every bad input")
    plain.stop()
    tok.stop()


CHROME = ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like "
          "Gecko) Chrome/120.0.0.0 Safari/537.36")
IMG_ACCEPT = "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8"


def own_name():
    """This machine's name as the agent knows it (gethostname), and whether
    it resolves to loopback here; the tests reach it with curl --resolve,
    so they send it as a browser would (Host: NAME:PORT) either way."""
    name = socket.gethostname()
    try:
        loop = socket.gethostbyname(name).startswith("127.")
    except OSError:
        loop = False
    return name, loop


def test_cross_site():
    """What a page of another site can make a browser send here, to
    127.0.0.1 (a potentially trustworthy URL: browsers add Sec-Fetch-*)
    and to the machine's own name (not one: no Sec-Fetch-*, and an <img>
    GET has no Origin either). Every such request that would open a window
    or change something is refused; the same requests from the agent's own
    pages, typed URLs on 127.0.0.1, links the user followed there, curl and
    go tool pprof are served."""
    p, port = burn({"PULLPROF_RECORD": "1m"})
    name, loop = own_name()
    by_name = f"http://{name}:{port}"
    via = ["--resolve", f"{name}:{port}:127.0.0.1"]
    cases = [
        # (what, base, path, method, headers, status)
        ("<img> from another site to the machine's name, with its Referer",
         by_name, "/debug/pprof/profile?seconds=300&hz=1000", "GET",
         [f"User-Agent: {CHROME}", f"Accept: {IMG_ACCEPT}",
          "Referer: http://evil.example/"], 403),
        ("<img referrerpolicy=no-referrer> to the machine's name",
         by_name, "/debug/pprof/profile?seconds=300&hz=1000", "GET",
         [f"User-Agent: {CHROME}", f"Accept: {IMG_ACCEPT}"], 403),
        ("no-cors fetch() to the machine's name, no Referer",
         by_name, "/debug/pprof/wall?seconds=300", "GET",
         [f"User-Agent: {CHROME}", "Accept: */*"], 403),
        ("<img> of the heap peak's reset by the machine's name",
         by_name, "/debug/pprof/heap?peak=reset", "GET",
         [f"User-Agent: {CHROME}", f"Accept: {IMG_ACCEPT}"], 403),
        ("cross-origin fetch() (CORS) of /cmdline by the machine's name",
         by_name, "/debug/pprof/cmdline", "GET",
         [f"User-Agent: {CHROME}", "Origin: http://evil.example"], 403),
        ("no-cors POST to /record/save by the machine's name",
         by_name, "/debug/pprof/record/save?reason=evil", "POST",
         [f"User-Agent: {CHROME}", "Origin: http://evil.example",
          "Content-Type: text/plain;charset=UTF-8"], 403),
        ("a POST from a sandboxed frame (Origin: null)",
         by_name, "/debug/pprof/record/save", "POST",
         [f"User-Agent: {CHROME}", "Origin: null"], 403),
        ("a clicked cross-site form POST to 127.0.0.1",
         f"http://127.0.0.1:{port}", "/debug/pprof/record/save?reason=click",
         "POST", [f"User-Agent: {CHROME}", "Origin: http://evil.example",
                  "Sec-Fetch-Site: cross-site", "Sec-Fetch-Mode: navigate",
                  "Sec-Fetch-User: ?1", "Sec-Fetch-Dest: document"], 403),
        ("a clicked cross-site POST that hides its Origin",
         f"http://127.0.0.1:{port}", "/debug/pprof/record/save?reason=click",
         "POST", [f"User-Agent: {CHROME}", "Sec-Fetch-Site: cross-site",
                  "Sec-Fetch-Mode: navigate", "Sec-Fetch-User: ?1"], 403),
        ("an <img> to 127.0.0.1 (Sec-Fetch-Site: cross-site)",
         f"http://127.0.0.1:{port}", "/debug/pprof/profile?seconds=300",
         "GET", [f"User-Agent: {CHROME}", "Sec-Fetch-Site: cross-site",
                 "Sec-Fetch-Mode: no-cors", "Sec-Fetch-Dest: image"], 403),
        ("a browser POST with a Referer of another site and no Origin",
         by_name, "/debug/pprof/record/save", "POST",
         [f"User-Agent: {CHROME}", "Referer: http://evil.example/x"], 403),
        # Served:
        ("the viewer's own fetch by the machine's name (same-origin Referer)",
         by_name, "/debug/pprof/profile?seconds=1", "GET",
         [f"User-Agent: {CHROME}", "Accept: */*",
          f"Referer: {by_name}/debug/pprof/ui/"], 200),
        ("a same-origin POST by the machine's name",
         by_name, "/debug/pprof/record/save?reason=mine", "POST",
         [f"User-Agent: {CHROME}", f"Origin: {by_name}"], 200),
        ("the index, typed by the machine's name",
         by_name, "/debug/pprof/", "GET",
         [f"User-Agent: {CHROME}", "Accept: text/html",
          "Upgrade-Insecure-Requests: 1"], 200),
        ("a link the user followed to 127.0.0.1",
         f"http://127.0.0.1:{port}", "/debug/pprof/profile?seconds=1", "GET",
         [f"User-Agent: {CHROME}", "Sec-Fetch-Site: cross-site",
          "Sec-Fetch-Mode: navigate", "Sec-Fetch-User: ?1",
          "Referer: https://grafana.example/"], 200),
        ("curl by the machine's name", by_name,
         "/debug/pprof/profile?seconds=1", "GET", [], 200),
        ("curl's POST by the machine's name", by_name,
         "/debug/pprof/record/save?reason=curl", "POST", [], 200),
        ("go tool pprof by the machine's name", by_name,
         "/debug/pprof/profile?seconds=1", "GET",
         ["User-Agent: Go-http-client/1.1"], 200),
        ("a CORS request of the agent's own page (its Origin)",
         f"http://127.0.0.1:{port}", "/debug/pprof/status", "GET",
         [f"Origin: http://127.0.0.1:{port}"], 200),
    ]
    try:
        for what, base, path, method, headers, want in cases:
            args = list(via) + ["-H", "Accept:"]
            for h in headers:
                args += ["-H", h]
            if method == "POST":
                args += ["-X", "POST", "--data-binary", ""]
            r = curl(base + path, *args, timeout=10)
            ok(r.status == want,
               f"{what}: {method} {path} -> {want}",
               (r.status, r.body[:300]))
            if want == 403:
                ok(until(lambda: windows_open(port) == 0, 10),
                   f"{what}: no window left open", windows_open(port))
        lst = json.loads(curl(f"http://127.0.0.1:{port}/debug/pprof/record"
                              ).body)["savings"]["list"]
        eq(sorted(s["reason"] for s in lst), ["curl", "mine"],
           "only the savings asked by the agent's own origin and curl")
        if not loop:
            skip(f"{name} resolving to 127.0.0.1",
                 "the name is not in /etc/hosts here; the cases above "
                 "reached it with curl --resolve")
    finally:
        p.stop()


EVIL_PAGE = """<!doctype html><title>another site</title>
<script>
window.settled = 0;
const agent = "AGENT";
function done() { window.settled++; }
const img = new Image();
img.onload = img.onerror = done;
img.src = agent + "/debug/pprof/profile?seconds=300&hz=1000";
for (let i = 0; i < 20; i++)
  fetch(agent + "/debug/pprof/record/save?reason=evil" + i,
        {method: "POST", mode: "no-cors"}).then(done, done);
</script>"""


def test_cross_site_chromium():
    """The issue's page, in a real browser: a page of another origin
    (http://127.0.0.2:N, a machine of the local network as far as the
    browser knows) loads an <img> of a 300 s 1000 Hz window and sends 20
    no-cors POSTs to /record/save, all through http://NAME:PORT, this
    machine's name (not potentially trustworthy: Chromium sends no
    Sec-Fetch-* there). Every one is answered at once with 403: no window,
    no saving (before: a window open for 300 s, 20 savings)."""
    name, loop = own_name()
    exe = find_chromium()
    if not loop or not exe:
        skip("a page of another site in Chromium",
             f"{name} does not resolve to 127.0.0.1 here" if not loop
             else "no chromium (scripts/deps.sh --test installs it)")
        return
    p, port = burn({"PULLPROF_RECORD": "1m"})
    page = EVIL_PAGE.replace("AGENT", f"http://{name}:{port}").encode()

    class Evil(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.2", 0), Evil)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    browser = None
    try:
        try:
            browser = Browser(exe)
        except CDPError as e:
            ok(False, "chromium runs headless", e)
            return
        browser.navigate(f"http://127.0.0.2:{srv.server_address[1]}/")
        settled = browser.wait("window.settled === 21", timeout=30)
        ok(settled, "the <img> and the 20 POSTs are all answered at once",
           browser.evaluate("window.settled"))
        eq(windows_open(port), 0, "no window is open")
        rec = json.loads(curl(f"http://127.0.0.1:{port}/debug/pprof/record"
                              ).body)["savings"]
        ok(rec["kept"] == 0, "no saving was made", rec)
    finally:
        if browser:
            browser.close()
        srv.shutdown()
        p.stop()


def test_slow_clients():
    """Clients that trickle a byte at a time hold every connection they
    can get, from two addresses: the request deadline closes them, and a
    newcomer takes the place of the oldest meanwhile."""
    v6 = ipv6_loopback()
    env = {"PULLPROF_REQUEST_TIMEOUT": "3"}
    if v6:
        env.update({"PULLPROF_LISTEN": "[::]:0", "PULLPROF_TOKEN": TOKEN})
    p, port = burn(env)
    auth = ["-H", f"Authorization: Bearer {TOKEN}"] if v6 else []
    addrs = [("127.0.0.1", socket.AF_INET)] + ([("::1", socket.AF_INET6)] if v6 else [])
    per = 16
    slow = []
    for host, fam in addrs:
        for _ in range(per):
            s = socket.socket(fam, socket.SOCK_STREAM)
            s.connect((host, port))
            s.sendall(b"GET /debug/pprof/status HTTP/1.1\r\n")
            slow.append(s)
    t0 = time.time()
    closed = {}
    stop = threading.Event()

    def trickle():
        while not stop.is_set():
            for i, s in enumerate(slow):
                if i in closed:
                    continue
                try:
                    s.sendall(b"X")
                except OSError:
                    closed[i] = time.time() - t0
            stop.wait(0.5)
    th = threading.Thread(target=trickle, daemon=True)
    th.start()
    time.sleep(1.5)  # the tricklers are over a second old: evictable
    for host, _ in addrs:
        url = f"http://{'[::1]' if ':' in host else host}:{port}/debug/pprof"
        a = time.time()
        r = curl(url + "/healthz", timeout=10)
        took = time.time() - a
        ok(r.status == 200 and took < 3, f"healthz from {host} answered while "
           f"{len(slow)} connections trickle", (r.status, took))
        a = time.time()
        r = curl(url + "/status", *auth, timeout=10)
        took = time.time() - a
        ok(r.status == 200 and took < 3, f"/status from {host} answered too",
           (r.status, took))
    for i, s in enumerate(slow):
        s.settimeout(0.2)
    ok(until(lambda: len(closed) == len(slow), timeout=3 + 10),
       "every trickling connection is closed", (len(closed), len(slow)))
    late = max(closed.values()) if closed else None
    ok(late is not None and late < 3 + 5,
       "the last within the request deadline (3 s) and a little",
       late)
    stop.set()
    st = json.loads(curl(f"http://127.0.0.1:{port}/debug/pprof/status", *auth).text)
    c = st["connections"]
    ok(c["timed_out"] + c["evicted"] >= len(slow) - 2,
       "status counts them as timed out or evicted", c)
    for s in slow:
        s.close()
    p.stop()


run([test_refused_starts, test_token, test_tls, test_allow, test_limits,
     test_slow_clients, test_cross_site, test_cross_site_chromium,
     test_bad_inputs_table])

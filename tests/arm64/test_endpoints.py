#!/usr/bin/env python3
"""Every endpoint of docs/endpoints.md, answered by an arm64 agent in the
emulated arm64 Debian (HACKING.md, "arm64: the emulated Debian"): one boot
of scripts/arm64-run.sh runs tests/arm64/profhost (cross-built -O2 with
-mbranch-protection=standard: heap sites, threads blocked in several
calls, lock contention) with the cross-built libpullprof.so preloaded and
the agent's port forwarded. From the x86_64 side, over real HTTP (curl):

* each path the doc's table lists, /trace, goroutine's debug=1 and 2, the
  viewer and its files, answers 200 with the content type the doc states;
  / and /debug/pprof redirect (302), /ui too;
* /metrics passes promtool check metrics (/opt/pullprof-test/promtool,
  when there);
* /symbol names an address taken from the agent's own heap profile (POST);
* a bad parameter of each family gets the doc's 4xx (400; 404 for unknown
  paths and below ui/; 405 with Allow for a method not taken; 413 for a
  body to an endpoint that takes none).

TAP on stdout (tests/integration/pptest.py); "1..0 # SKIP why" where
tests/arm64/run.sh skips. The wall time is the last line."""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "integration"))
import guestcheck  # noqa: E402  (tests/arm64: can the guest run here)
from pptest import (Profile, curl, eq, free_port, ok, run, skip,  # noqa: E402
                    until)

T0 = time.time()
PROMTOOL = "/opt/pullprof-test/promtool"
OCTET = "application/octet-stream"
JSON = "application/json"
TEXT = "text/plain"
HTML = "text/html"


def preconditions():
    guestcheck.require()


class Guest:
    """profhost, preloaded, in one boot."""

    def __init__(self, tmp):
        bindir = os.path.join(tmp, "bin")
        os.mkdir(bindir)
        exe = os.path.join(bindir, "profhost")
        subprocess.run(
            ["aarch64-linux-gnu-gcc", "-O2", "-Wall", "-Wextra", "-Werror",
             "-mbranch-protection=standard", "-pthread", "-o", exe,
             os.path.join(HERE, "profhost.c")], check=True)
        self.agent, ctl = free_port(), free_port()
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("PULLPROF_")}
        # Every profile on: the heap at a rate that samples profhost's
        # sites, every contended unlock and every wait recorded.
        env.update(PULLPROF_LISTEN="0.0.0.0:6060", PULLPROF_INSECURE="1",
                   PULLPROF_HEAP_RATE="4096", PULLPROF_MUTEX_RATE="1",
                   PULLPROF_BLOCK_RATE="1", PP_ARM64_TIMES="1",
                   PP_ARM64_TIMEOUT=os.environ.get("PP_ARM64_TIMEOUT", "600"))
        self.out = open(os.path.join(tmp, "out"), "w+")
        self.err = open(os.path.join(tmp, "err"), "w+")
        self.p = subprocess.Popen(
            [os.path.join(SRC, "scripts", "arm64-run.sh"), "--preload",
             "--port", f"{self.agent}:6060", "--port", f"{ctl}:8080",
             "--", exe, "8080"],
            stdin=subprocess.DEVNULL, stdout=self.out, stderr=self.err,
            env=env)
        self.ctl = ctl

    def text(self, f):
        with open(f.name) as g:
            return g.read()

    def wait_ready(self, timeout):
        end = time.time() + timeout
        while time.time() < end and self.p.poll() is None:
            if re.search(r"^profhost: ready \d+$", self.text(self.out), re.M):
                return True
            time.sleep(0.3)
        return False

    def url(self, path):
        return f"http://127.0.0.1:{self.agent}{path}"

    def get(self, path, *args, timeout=120):
        return curl(self.url(path), *args, timeout=timeout)

    def quit(self):
        try:
            with socket.create_connection(("127.0.0.1", self.ctl),
                                          timeout=30) as s:
                s.sendall(b"quit\n")
                s.recv(64)
        except OSError:
            pass
        try:
            return self.p.wait(120)
        except subprocess.TimeoutExpired:
            self.p.terminate()
            return self.p.wait(60)


G = {}
P = "/debug/pprof"


def ctype(r):
    return r.header("content-type") or ""


def expect(path, status, ctype_prefix, *args, timeout=120, check=None):
    """GET (or curl args) path: status and content type as the doc says."""
    r = G["g"].get(path, *args, timeout=timeout)
    good = r.status == status and ctype(r).startswith(ctype_prefix)
    if good and check:
        good = check(r)
    ok(good, f"{' '.join(args) + ' ' if args else ''}{path}: {status} "
       f"{ctype_prefix}", repr(r))
    return r


def test_boot():
    tmp = G["tmp"] = tempfile.mkdtemp(prefix="pp-arm64ep-")
    g = G["g"] = Guest(tmp)
    t = time.time()
    ready = g.wait_ready(900)  # the first run cross-builds the library
    up = ready and until(
        lambda: g.get(f"{P}/status", timeout=10).status == 200, 60)
    ok(up, f"profhost boots preloaded and its agent answers through the "
       f"forwarded port ({time.time() - t:.1f} s)",
       g.text(g.out)[-1500:] + g.text(g.err)[-3000:])
    G["up"] = up


def test_pages():
    if not G.get("up"):
        return
    expect(f"{P}/", 200, HTML, check=lambda r: b"/profile" in r.body)
    expect(f"{P}/healthz", 200, TEXT, check=lambda r: r.body.strip() == b"ok")
    st = expect(f"{P}/status", 200, JSON)
    if st.status == 200:
        eq(st.json().get("cpu", {}).get("handler") is not None, True,
           "/status has the CPU sampler's part")
    expect(f"{P}/threads", 200, JSON,
           check=lambda r: r.json().get("count", 0) >= 8)
    expect(f"{P}/cmdline", 200, TEXT,
           check=lambda r: r.body.split(b"\0")[0].endswith(b"profhost"))
    expect(f"{P}/children", 200, JSON, check=lambda r: "mode" in r.json())
    expect(f"{P}/maps", 200, JSON,
           check=lambda r: b"libpullprof" in r.body and b"profhost" in r.body)
    for path in ("/", P):
        r = G["g"].get(path, timeout=30)
        ok(r.status == 302 and (r.header("location") or "").endswith(P + "/"),
           f"{path}: 302 to {P}/", repr(r))
    r = G["g"].get(f"{P}/ui", timeout=30)
    ok(r.status in (301, 302, 307, 308) and
       (r.header("location") or "").endswith("ui/"),
       f"{P}/ui redirects to ui/", repr(r))
    expect(f"{P}/ui/", 200, HTML, check=lambda r: b"viewer.js" in r.body)
    # viewer.js, the entry module, and the modules it imports
    for m in ("viewer", "state", "format", "agent", "model", "draw", "chart",
              "flame", "timeline", "tables", "profile", "form", "recent",
              "address"):
        r = G["g"].get(f"{P}/ui/{m}.js", timeout=30)
        ok(r.status == 200 and "javascript" in ctype(r),
           f"{m}.js: 200, JavaScript", repr(r))
    r = G["g"].get(f"{P}/ui/viewer.css", timeout=30)
    ok(r.status == 200 and ctype(r).startswith("text/css"),
       "viewer.css: 200 text/css", repr(r))


def test_metrics():
    if not G.get("up"):
        return
    r = expect(f"{P}/metrics", 200, "text/plain; version=0.0.4",
               check=lambda r: b"pullprof_cpu_handler" in r.body)
    if not os.access(PROMTOOL, os.X_OK):
        skip("promtool check metrics", f"no {PROMTOOL}")
        return
    p = subprocess.run([PROMTOOL, "check", "metrics"], input=r.body,
                       capture_output=True, timeout=60)
    ok(p.returncode == 0, "/metrics passes promtool check metrics",
       (p.stdout + p.stderr).decode()[-2000:])


def test_profiles():
    if not G.get("up"):
        return
    prof = {}

    def decodes(name):
        def check(r):
            try:
                prof[name] = Profile(r.body)
                return bool(prof[name].sample_types())
            except Exception:  # noqa: BLE001 - a failed decode fails the check
                return False
        return check

    expect(f"{P}/profile?seconds=1", 200, OCTET, timeout=120,
           check=decodes("profile"))
    expect(f"{P}/heap", 200, OCTET, check=decodes("heap"))
    expect(f"{P}/allocs", 200, OCTET, check=decodes("allocs"))
    expect(f"{P}/goroutine", 200, OCTET, check=decodes("goroutine"))
    expect(f"{P}/goroutine?debug=1", 200, TEXT,
           check=lambda r: b"wait_in_cond" in r.body)
    expect(f"{P}/goroutine?debug=2", 200, TEXT,
           check=lambda r: b"wait_in_nanosleep" in r.body)
    expect(f"{P}/threadcreate", 200, OCTET, check=decodes("threadcreate"))
    expect(f"{P}/mutex", 200, OCTET, check=decodes("mutex"))
    expect(f"{P}/block", 200, OCTET, check=decodes("block"))
    expect(f"{P}/wall?seconds=1", 200, OCTET, check=decodes("wall"))
    expect(f"{P}/fgprof?seconds=1", 200, OCTET, check=decodes("fgprof"))
    expect("/debug/fgprof?seconds=1", 200, OCTET)
    expect(f"{P}/trace?seconds=1", 200, OCTET,
           check=lambda r: len(r.body) > 100)
    G["heap"] = prof.get("heap")


def test_symbol():
    if not G.get("up"):
        return
    expect(f"{P}/symbol", 200, TEXT,
           check=lambda r: r.body.startswith(b"num_symbols: 1"))
    heap = G.get("heap")
    # An address the agent itself put in a profile: a heap site's caller
    # frame in profhost.
    addr = None
    if heap:
        for loc in heap.locations:
            fr = heap.frames(loc)
            if fr and fr[0][0] and fr[0][0].startswith("site_"):
                addr, name = loc["address"][0], fr[0][0]
                break
    if not ok(addr is not None, "the heap profile has an address in a "
              "profhost site to look up"):
        return
    r = expect(f"{P}/symbol", 200, TEXT, "--data-binary", "0x%x" % addr,
               check=lambda r: name.encode() in r.body)
    ok(re.search(rb"^0x0*%x %s" % (addr, name.encode()), r.body, re.M),
       f"/symbol names 0x{addr:x} {name}", r.text[:500])


def test_errors():
    if not G.get("up"):
        return
    for path in (f"{P}/profile?seconds=abc", f"{P}/profile?hz=-1",
                 f"{P}/heap?gc=maybe", f"{P}/allocs?seconds=x",
                 f"{P}/goroutine?debug=7", f"{P}/threadcreate?debug=5",
                 f"{P}/mutex?debug=3", f"{P}/block?seconds=zz",
                 f"{P}/wall?seconds=abc", f"{P}/trace?debug=1",
                 f"{P}/trace?format=pprof", f"{P}/children?pid=abc"):
        r = G["g"].get(path, timeout=30)
        eq(r.status, 400, f"{path}: 400")
    r = G["g"].get(f"{P}/symbol", "--data-binary", "not-an-address",
                   timeout=30)
    eq(r.status, 400, "POST /symbol not-an-address: 400")
    for path in (f"{P}/nope", f"{P}/ui/nope.js", f"{P}/delta_heap"):
        r = G["g"].get(path, timeout=30)
        ok(r.status == 404 and ctype(r).startswith(TEXT),
           f"{path}: 404 text/plain", repr(r))
    r = G["g"].get(f"{P}/status", "-X", "DELETE", timeout=30)
    ok(r.status == 405 and "GET" in (r.header("allow") or ""),
       "DELETE /status: 405 with Allow", repr(r))
    r = G["g"].get(f"{P}/heap", "-X", "GET", "--data-binary", "x",
                   timeout=30)
    eq(r.status, 413, "GET /heap with a body: 413")


def test_end():
    g = G.get("g")
    if not g:
        return
    code = g.quit()
    eq(code, 0, "profhost quits and the VM powers off with its status")


if __name__ == "__main__":
    preconditions()
    try:
        run([test_boot, test_pages, test_metrics, test_profiles, test_symbol,
             test_errors, test_end])
    finally:
        if G.get("tmp"):
            shutil.rmtree(G["tmp"], ignore_errors=True)
        print(f"# wall time {time.time() - T0:.1f} s", flush=True)

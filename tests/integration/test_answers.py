#!/usr/bin/env python3
"""The memory answers hold (PULLPROF_MAX_ANSWERS_MB): answers in flight are
bounded together, a profile request past the bound gets 503 while small
answers (/status) still go out, and the memory of large answers is given
back when they end — a host does not keep hundreds of MiB after a burst of
large JSON heap profiles. The host is an unmodified CPython, preloaded, whose
heap profile at PULLPROF_HEAP_RATE=1 is tens of MB of JSON."""
import json
import os
import shutil
import socket
import time
from concurrent.futures import ThreadPoolExecutor

from pptest import (NO_HEAP_WHY, Proc, curl, eq, ok, preload_env, run,
                    sanitized, skip, until)

PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else shutil.which("python3")
CODE = ("import time, json, email, decimal, csv, argparse\n"
        "keep = [{'k%d' % i: [str(j) * 5 for j in range(20)]} for i in range(20000)]\n"
        "print('ready', flush=True)\n"
        "time.sleep(600)\n")


def start(**env):
    p = Proc([PY, "-c", CODE], env=preload_env(
        PULLPROF_LISTEN="127.0.0.1:0", PULLPROF_HEAP_RATE="1",
        PYTHONMALLOC="malloc", **env), stdin=False)
    m = p.wait_line(p.err_lines, r"serving http://127\.0\.0\.1:(\d+)/debug/pprof/",
                    timeout=30)
    ok(m and p.wait_line(p.out_lines, "ready", timeout=120), "python host ready",
       p.stderr_text())
    return p, int(m.group(1)) if m else None


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def status(port):
    r = curl(f"http://127.0.0.1:{port}/debug/pprof/status")
    return json.loads(r.text) if r.status == 200 else {}


def test_bound():
    p, port = start(PULLPROF_MAX_ANSWERS_MB="1")
    base = f"http://127.0.0.1:{port}/debug/pprof"
    r = curl(base + "/heap?format=json")
    ok(r.status == 200 and len(r.body) > 2 << 20,
       "a JSON heap profile of over 2 MiB", (r.status, len(r.body)))
    # A client that asks and does not read: its answer stays in flight.
    slow = socket.socket()
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.connect(("127.0.0.1", port))
    slow.sendall(b"GET /debug/pprof/heap?format=json HTTP/1.1\r\n"
                 b"Host: localhost\r\n\r\n")
    slow.recv(1024)
    ok(until(lambda: status(port).get("answers", {}).get("bytes", 0) >= 1 << 20),
       "an unread answer holds over 1 MiB")
    r = curl(base + "/heap?format=json")
    ok(r.status == 503 and "PULLPROF_MAX_ANSWERS_MB" in r.text and
       r.headers.get("retry-after") == "1",
       "another profile past the bound: 503, Retry-After, naming the setting", r)
    r = curl(base + "/profile?seconds=1")
    eq(r.status, 503, "a CPU profile too")
    st = status(port)
    ok(st.get("answers", {}).get("refused", 0) >= 2, "/status still answers, "
       "and counts the refusals", st.get("answers"))
    eq(curl(base + "/healthz").status, 200, "healthz still answers")
    slow.close()
    ok(until(lambda: status(port).get("answers", {}).get("bytes", 1) < 64 << 10),
       "the unread answer is let go when its client leaves")
    eq(curl(base + "/heap?format=json").status, 200, "profiles are answered again")
    p.stop()


def test_memory_given_back():
    p, port = start()
    base = f"http://127.0.0.1:{port}/debug/pprof"
    pid = p.p.pid
    eq(curl(base + "/heap?format=json").status, 200, "one large answer")
    one = rss_kib(pid)
    with ThreadPoolExecutor(16) as ex:
        codes = list(ex.map(lambda _: curl(base + "/heap?format=json",
                                           timeout=300).status, range(16)))
    ok(all(c == 200 for c in codes), "16 at once: all answered", codes)
    ok(until(lambda: status(port).get("answers", {}).get("bytes", 1) < 64 << 10),
       "and all let go")
    after = rss_kib(pid)
    ok(after - one < 64 * 1024,
       "the host's RSS after 16 concurrent large answers is within 64 MiB "
       "of its RSS after one (their memory was given back)",
       f"after one: {one} KiB, after sixteen: {after} KiB")
    p.stop()


if sanitized():
    skip("answers' memory in a preloaded python", NO_HEAP_WHY)
    run([])
else:
    run([test_bound, test_memory_given_back])

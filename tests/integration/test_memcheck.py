"""valgrind memcheck over the agent's life in a real host: start/stop cycles,
every endpoint, errors, a failed start, exit with the agent running. No
invalid access, no uninitialised use, no definite leak."""
import re
import shutil

import pptest
from pptest import (HOST, MEMCHECK, NO_VALGRIND_WHY, Host, curl, eq,
                    memcheck_quit, ok, run, sanitized, skip)


class ValgrindHost(Host):
    def __init__(self):
        pptest.Proc.__init__(self, [*MEMCHECK, HOST])
        self.ready = self.cmd(None, timeout=120)


def test_memcheck():
    if sanitized():
        skip("memcheck", NO_VALGRIND_WHY)
        return
    if not shutil.which("valgrind"):
        skip("memcheck", "valgrind not installed")
        return
    h = ValgrindHost()
    for i in range(4):
        port = h.start()
        ok(isinstance(port, int), f"cycle {i}: start under valgrind", port)
        for path in ("/debug/pprof/", "/debug/pprof/status", "/debug/pprof/cmdline",
                     "/debug/pprof/nope", "/", "/debug/pprof/heap",
                     "/debug/pprof/allocs?seconds=1", "/debug/pprof/heap?peak=1"):
            curl(f"http://127.0.0.1:{port}{path}", timeout=60)
        curl(f"http://127.0.0.1:{port}/debug/pprof/status", "-X", "POST",
             "-d", "x", timeout=60)
        r = curl(f"http://127.0.0.1:{port}/debug/pprof/profile?seconds=1",
                 timeout=120)
        eq(r.status, 200, f"cycle {i}: a CPU profile under valgrind")
        eq(h.cmd("stop", timeout=60), "ok", f"cycle {i}: stop")
    ok(h.start("bogus:port").startswith("err"), "a failed start")
    port = h.start()
    eq(curl(f"http://127.0.0.1:{port}/debug/pprof/status", timeout=60).status, 200,
       "served once more before exit")
    report = memcheck_quit(h, "host", timeout=120)
    m = re.search(r"definitely lost: ([\d,]+) bytes", report)
    ok(m is None or m.group(1) == "0", "memcheck: nothing definitely lost",
       m and m.group(0))


run([test_memcheck])

"""The demo program of README command 1: it starts, serves, works, stops."""
import re
import signal
import time

from pptest import (DEMO, NO_HEAP_WHY, Proc, Profile, curl, eq, ok, run,
                    sanitized, skip, until)


def test_demo():
    p = Proc([DEMO, "--threads", "2"], env={"PULLPROF_LISTEN": "127.0.0.1:0"},
             stdin=False)
    try:
        demo_checks(p)
    finally:
        # A failed check must not leave the demo burning two cores
        # (seen: one left for 50 minutes under a later CI run).
        if p.p.poll() is None:
            p.stop(signal.SIGKILL)


def demo_checks(p):
    m = p.wait_line(p.out_lines, r"serving on port (\d+)", timeout=10)
    ok(m, "demo prints where it serves", p.out_lines)
    port = int(m.group(1))
    urls = "\n".join(p.out_lines)
    ok(f"http://127.0.0.1:{port}/debug/pprof/" in urls, "demo prints the index URL",
       urls)
    r = curl(f"http://127.0.0.1:{port}/debug/pprof/status")
    eq(r.status, 200, "demo serves status")
    eq(r.json()["cmdline"][1:], ["--threads", "2"], "status shows the demo's argv")
    until(lambda: p.threads().count("demo-hash") == 2 and
          "demo-cache" in p.threads(), timeout=30)
    names = p.threads()
    ok(names.count("demo-hash") == 2, "two hashing threads", names)
    ok("demo-sort" in names and "demo-cache" in names, "sort and cache threads",
       names)

    def cpu_ticks():
        with open(f"/proc/{p.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])

    # Waited for, not timed: on a busy machine the demo's threads get
    # less than a core each.
    until(lambda: cpu_ticks() > 20, timeout=60)
    ok(cpu_ticks() > 20, "the demo burns CPU for profiles to see", cpu_ticks())
    ok("/debug/pprof/heap" in urls, "demo prints the heap command", urls)
    time.sleep(1)
    r = curl(f"http://127.0.0.1:{port}/debug/pprof/heap")
    eq(r.status, 200, "demo serves a heap profile")
    prof = Profile(r.body)
    names = {fr[0] for s in prof.samples if s["value"][3] > 0
             for loc in prof.stack(s) for fr in loc}
    if sanitized():
        skip("the demo's cache is in use in the heap profile", NO_HEAP_WHY)
    else:
        ok("cache_worker" in names,
           "the demo's cache is in use in the heap profile", sorted(names))
    eq(p.stop(signal.SIGINT), 0, "demo exits 0 on SIGINT")
    ok(any("demo: done" in l for l in p.out_lines), "demo says done")


def test_demo_usage():
    p = Proc([DEMO, "--bogus"], stdin=False)
    eq(p.p.wait(10), 2, "bad argument: exit 2")
    p.drain()
    ok(p.wait_line(p.err_lines, "usage", timeout=2), "prints usage")


def test_demo_port_taken():
    a = Proc([DEMO, "--threads", "0"], env={"PULLPROF_LISTEN": "127.0.0.1:0"},
             stdin=False)
    port = int(a.wait_line(a.out_lines, r"serving on port (\d+)").group(1))
    b = Proc([DEMO, "--threads", "0", "--seconds", "1"],
             env={"PULLPROF_LISTEN": f"127.0.0.1:{port}"}, stdin=False)
    eq(b.p.wait(20), 0, "a demo whose port is taken still runs to the end")
    b.drain()
    ok(re.search("running without the profiling agent", b.stderr_text()),
       "and says it runs without the agent", b.stderr_text())
    a.stop()


run([test_demo, test_demo_usage, test_demo_port_taken])

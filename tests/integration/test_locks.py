"""Lock semantics with the agent in the process: tests/locks/lockconf checks
every pthread lock call a lock profiler interposes, call by call (return
values, recursion counts, timeouts that do not end early, robust recovery,
priority inheritance, a process-shared mutex across fork, rwlocks,
condition variables, semaphores, joins, a lock taken in a constructor),
first without the agent and then with it running and serving a thread dump
and a CPU window meanwhile: both runs must agree with glibc's documented
answers."""
import os
import threading

from pptest import BUILD, SANITIZER, Proc, curl, eq, ok, run, skip

LOCKCONF = os.path.join(BUILD, "tests", "locks", "lockconf")


def result(p):
    m = p.wait_line(p.out_lines, r"^checks (\d+) bad (\d+)", timeout=120)
    bad = [ln for ln in p.out_lines if ln.startswith("bad:")]
    return int(m.group(1)), int(m.group(2)), bad


def test_without_agent():
    p = Proc([LOCKCONF], stdin=False)
    checks, bad, lines = result(p)
    ok(checks > 100, f"lockconf ran its checks ({checks})")
    eq(bad, 0, "glibc alone: every answer as documented")
    ok(not lines, "no bad answer", lines[:10])
    eq(p.p.wait(timeout=60), 0, "exits 0")


def test_with_agent():
    p = Proc([LOCKCONF, "agent"], env={"PULLPROF_LISTEN": "127.0.0.1:0"},
             stdin=False)
    port = int(p.wait_line(p.out_lines, r"^port (\d+)", timeout=30).group(1))
    res = {}
    bg = threading.Thread(target=lambda: res.setdefault("r", (
        curl(f"http://127.0.0.1:{port}/debug/pprof/goroutine", timeout=30),
        curl(f"http://127.0.0.1:{port}/debug/pprof/profile?seconds=1",
             timeout=30))))
    bg.start()
    checks, bad, lines = result(p)
    bg.join()
    ok(checks > 100, f"lockconf ran its checks with the agent ({checks})")
    eq(bad, 0, "with the agent: every answer as without it")
    ok(not lines, "no bad answer", lines[:10])
    eq(p.p.wait(timeout=60), 0, "exits 0")


ALL = [test_without_agent, test_with_agent]
if SANITIZER == "tsan":
    for t in ALL:
        skip(t.__name__, "ThreadSanitizer reports the misuses lockconf "
             "makes on purpose (an unlock by another thread, a thread that "
             "exits holding a robust mutex)")
    ALL = []
run(ALL)

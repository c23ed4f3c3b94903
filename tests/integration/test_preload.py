"""Zero-code use: LD_PRELOAD=libpullprof.so into unmodified programs."""
import os
import re
import shutil
import subprocess
import time

import pptest
from pptest import (NO_HEAP_WHY, Host, Proc, Profile, curl, eq, free_port, ok,
                    run, sanitized, skip)

SLEEP = shutil.which("sleep")


def preload_env(**extra):
    return pptest.preload_env(**extra)


def serving_port(p):
    m = p.wait_line(p.err_lines, r"serving http://127\.0\.0\.1:(\d+)/debug/pprof/",
                    timeout=10)
    return int(m.group(1)) if m else None


def test_sleep_serves_status():
    p = Proc([SLEEP, "30"], env=preload_env(PULLPROF_LISTEN="127.0.0.1:0"),
             stdin=False)
    port = serving_port(p)
    ok(port, "the preloaded agent says where it serves", p.stderr_text())
    r = curl(f"http://127.0.0.1:{port}/debug/pprof/status")
    eq(r.status, 200, "unmodified sleep serves status")
    s = r.json()
    eq(s["pid"], p.pid, "status.pid is sleep's pid")
    eq(s["executable"], os.path.realpath(SLEEP), "status.executable is sleep")
    eq(s["cmdline"], [SLEEP, "30"], "status.cmdline is sleep's argv")
    eq(s["autostarted"], True, "status.autostarted")
    r = curl(f"http://127.0.0.1:{port}/debug/pprof/cmdline")
    eq(r.body, (SLEEP + "\0" + "30").encode(), "cmdline of sleep")
    ok("pullprof-http" in p.threads(), "the agent thread runs inside sleep")
    eq(p.stop(), -15, "sleep still dies of SIGTERM as usual")


def test_program_output_untouched():
    out = subprocess.run(["sh", "-c", "echo hello; echo err >&2"],
                         env={**os.environ,
                              **preload_env(PULLPROF_LISTEN="127.0.0.1:0",
                                            PULLPROF_QUIET="1")},
                         capture_output=True, timeout=20)
    eq(out.returncode, 0, "preloaded sh exits 0")
    eq(out.stdout, b"hello\n", "stdout is the program's own")
    eq(out.stderr, b"err\n", "with PULLPROF_QUIET=1 stderr is the program's own")


def test_port_taken():
    a = Host()
    port = a.start()
    out = subprocess.run(["sh", "-c", "echo hello"],
                         env={**os.environ,
                              **preload_env(PULLPROF_LISTEN=f"127.0.0.1:{port}")},
                         capture_output=True, timeout=20)
    eq(out.returncode, 0, "taken port: the program runs and exits 0")
    eq(out.stdout, b"hello\n", "taken port: the program's output is intact")
    lines = out.stderr.decode().splitlines()
    eq(len(lines), 1, "taken port: one line on stderr")
    ok(lines and re.match(r"pullprof\[\d+\]: not started: cannot listen on "
                          rf"127\.0\.0\.1:{port}: address already in use", lines[0]),
       "the line says which address and why", lines)
    a.quit()


def test_bad_values():
    for env, word in (({"PULLPROF_LISTEN": "bogus"}, "PULLPROF_LISTEN"),
                      ({"PULLPROF_LISTEN": "127.0.0.1:0",
                        "PULLPROF_MAX_CONNECTIONS": "-3"},
                       "PULLPROF_MAX_CONNECTIONS"),
                      ({"PULLPROF_AUTOSTART": "yes"}, "PULLPROF_AUTOSTART")):
        out = subprocess.run(["true"], env={**os.environ, **preload_env(**env)},
                             capture_output=True, timeout=20)
        eq(out.returncode, 0, f"{env}: program exits 0")
        lines = out.stderr.decode().splitlines()
        ok(len(lines) == 1 and word in lines[0], f"{env}: one line naming {word}",
           lines)


def test_autostart_switches():
    # PULLPROF_AUTOSTART=0 keeps a preloaded library quiet and idle.
    p = Proc([SLEEP, "5"], env=preload_env(PULLPROF_LISTEN="127.0.0.1:0",
                                           PULLPROF_AUTOSTART="0"), stdin=False)
    time.sleep(0.5)
    ok("pullprof-http" not in p.threads(), "PULLPROF_AUTOSTART=0: no agent")
    eq(p.err_lines, [], "PULLPROF_AUTOSTART=0: nothing on stderr")
    p.stop()
    # Without PULLPROF_LISTEN, preloading alone does not start a server.
    p = Proc([SLEEP, "5"], env=preload_env(), stdin=False)
    time.sleep(0.5)
    ok("pullprof-http" not in p.threads(), "no PULLPROF_LISTEN: no agent")
    p.stop()
    # A linked host with PULLPROF_LISTEN set starts only when it asks.
    h = Host(env={"PULLPROF_LISTEN": "127.0.0.1:0"})
    eq(h.cmd("port"), "port 0", "linked host: no autostart without preload")
    ok(isinstance(h.start(), int), "linked host: its own start works")
    h.quit()
    # ...unless PULLPROF_AUTOSTART=1 asks for it.
    h = Host(env={"PULLPROF_LISTEN": "127.0.0.1:0", "PULLPROF_AUTOSTART": "1"})
    line = h.cmd("port")
    ok(line != "port 0", "linked host: PULLPROF_AUTOSTART=1 starts it", line)
    eq(h.start().split()[:2], ["err", "-114"], "then pullprof_start says EALREADY")
    h.quit()


def test_quiet_fixed_port():
    port = free_port()
    p = Proc([SLEEP, "10"], env=preload_env(PULLPROF_LISTEN=f"127.0.0.1:{port}",
                                            PULLPROF_QUIET="1"), stdin=False)
    deadline = time.time() + 10
    r = None
    while time.time() < deadline:
        r = curl(f"http://127.0.0.1:{port}/debug/pprof/status", timeout=2)
        if r.status == 200:
            break
        time.sleep(0.1)
    eq(r.status, 200, "fixed port, quiet: serves")
    eq(p.err_lines, [], "quiet: nothing on stderr")
    p.stop()


def test_short_program_exits():
    t = time.time()
    out = subprocess.run(["true"], env={**os.environ,
                                        **preload_env(PULLPROF_LISTEN="127.0.0.1:0")},
                         capture_output=True, timeout=20)
    eq(out.returncode, 0, "a preloaded short program exits 0")
    ok(time.time() - t < 3, "and promptly (the agent stops at exit)")


def test_preloaded_children():
    # A preloaded shell runs a preloaded child: each gets its own agent on
    # its own port 0 and both exit normally.
    if sanitized():
        # Not pullprof's: with libasan or libtsan preloaded ahead of
        # libp11-kit (which libmicrohttpd's gnutls loads), an unmodified
        # `sleep` hangs at exit in p11-kit's destructor (freelocale waits
        # for glibc's setlocale lock);
        # `LD_PRELOAD="libasan.so.8 libp11-kit.so.0" sleep 0.1` (or
        # libtsan.so.2) hangs the same way without pullprof.
        skip("preloaded parent and child exit", f"{pptest.SANITIZER} build: "
             "the sanitizer runtime + libp11-kit preloaded into sleep hang "
             "at exit, pullprof or not")
        return
    out = subprocess.run(["sh", "-c", "sleep 0.2; echo child-done"],
                         env={**os.environ, **preload_env(PULLPROF_LISTEN="127.0.0.1:0")},
                         capture_output=True, timeout=20)
    eq(out.returncode, 0, "preloaded parent and child exit 0")
    eq(out.stdout, b"child-done\n", "child output intact")
    eq(len(re.findall(r"serving http://", out.stderr.decode())), 2,
       "each process reports its own agent")


def test_python_heap():
    """An unmodified CPython, preloaded: its large buffers come from malloc,
    so /heap sees them. 20,000 bytearrays of 4 KiB = 80 MiB live (the
    default rate gives about 160 samples of them: 8% standard deviation,
    so the check is a generous 25%)."""
    if sanitized():
        skip("preloaded python's heap", NO_HEAP_WHY)
        return
    py = shutil.which("python3")
    code = ("import sys, time\n"
            "keep = [bytearray(4096) for _ in range(20000)]\n"
            "print('ready', flush=True)\n"
            "time.sleep(60)\n")
    p = Proc([py, "-c", code], env=preload_env(PULLPROF_LISTEN="127.0.0.1:0"),
             stdin=False)
    port = serving_port(p)
    ok(p.wait_line(p.out_lines, "ready", timeout=30), "python allocated")
    r = curl(f"http://127.0.0.1:{port}/debug/pprof/heap")
    eq(r.status, 200, "preloaded python serves /heap")
    prof = Profile(r.body)
    inuse = sum(s["value"][3] for s in prof.samples)
    want = 20000 * 4096
    ok(abs(inuse - want) <= want * 0.25,
       "the heap profile sees python's 80 MiB of buffers",
       f"{inuse} vs {want}")
    p.stop()


run([test_sleep_serves_status, test_program_output_untouched, test_port_taken,
     test_bad_values, test_autostart_switches, test_quiet_fixed_port,
     test_short_program_exits, test_preloaded_children, test_python_heap])

"""Zero-code use: LD_PRELOAD=libpullprof.so into unmodified programs."""
import os
import re
import shutil
import subprocess
import tempfile
import time

import pptest
from pptest import (NO_HEAP_WHY, Host, Proc, Profile, curl, eq, fork_safe_env,
                    free_port, ok, run, sanitized, skip, until)

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


# The agent's object and the libraries only it needs: a process without an
# agent maps none of them.
AGENT_LIBS = ("libpullprof-agent", "libmicrohttpd", "libgnutls", "libdw",
              "libunwind", "libjson-c")
SERVING = r"serving https?://"


def mapped(pid):
    """File names of the shared objects pid maps."""
    with open(f"/proc/{pid}/maps") as f:
        paths = re.findall(r"\s(/\S+)$", f.read(), re.M)
    return sorted({os.path.basename(p) for p in paths if ".so" in p})


def check_light(what, pid):
    """pid (an exec'd descendant of a profiled process, or a process
    without an agent) has the light library and nothing of the agent."""
    # Once the program runs: its libraries mapped, its constructors done.
    until(lambda: any(n.startswith("libc.so") for n in mapped(pid)) and
          open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "S",
          10)
    libs = mapped(pid)
    ok(any(n.startswith("libpullprof.so") for n in libs),
       f"{what}: libpullprof.so is mapped (LD_PRELOAD is inherited)", libs)
    eq([n for n in libs if n.startswith(AGENT_LIBS)], [],
       f"{what}: nothing of the agent is loaded")


def stderr_done(p):
    """Wait until p's stderr has ended (every line it wrote is read)."""
    p.wait_line(p.err_lines, r"(?!)", timeout=10)


def pullprof_lines(text):
    return [line for line in text.splitlines() if line.startswith("pullprof[")]


def test_preloaded_children():
    # A preloaded shell runs a preloaded child: the shell's agent serves,
    # the child (an exec'd descendant) starts none and says nothing, and
    # both exit normally.
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
    for extra, want in (({}, 1), ({"PULLPROF_EXEC_LISTEN": "127.0.0.1:0"}, 2)):
        out = subprocess.run(["sh", "-c", "sleep 0.2; echo child-done"],
                             env={**os.environ, **preload_env(
                                 PULLPROF_LISTEN="127.0.0.1:0", **extra)},
                             capture_output=True, timeout=20)
        eq(out.returncode, 0, f"{extra}: preloaded parent and child exit 0")
        eq(out.stdout, b"child-done\n", f"{extra}: child output intact")
        err = out.stderr.decode()
        ok(len(pullprof_lines(err)) == want,
           f"{extra}: {want} line(s) from pullprof, one per agent", err)
        ok(len(re.findall(SERVING, err)) == want,
           f"{extra}: each agent says where it serves", err)


def quiet_descendant(what, host, pid_line, stop):
    """host (a Proc, preloaded with an agent that serves) ran a descendant
    that prints its pid (pid_line: a regex of host's stdout) and sleeps:
    the descendant has no agent, and once it ended the host's stderr holds
    its own "serving" line and nothing else from pullprof."""
    ok(host.wait_line(host.err_lines, SERVING, timeout=20),
       f"{what}: the host serves", host.stderr_text())
    m = host.wait_line(host.out_lines, pid_line, timeout=20)
    ok(m, f"{what}: the descendant runs", host.stderr_text())
    if not m:
        host.p.kill()
        return
    pid = int(m.group(1))
    ok(until(lambda: "sleep" in open(f"/proc/{pid}/comm").read(), 10),
       f"{what}: the descendant sleeps")
    check_light(what, pid)
    stop(pid)
    host.p.wait(timeout=20)
    stderr_done(host)
    lines = pullprof_lines(host.stderr_text())
    ok(len(lines) == 1, f"{what}: one line from pullprof, the host's own",
       lines)


def test_descendants_quiet():
    """What a preloaded host runs stays quiet and light: a python3
    subprocess, /bin/sh -c's children, a C host's system()."""
    env = preload_env(PULLPROF_LISTEN="127.0.0.1:0")
    py = Proc(["/usr/bin/python3", "-c",
               "import subprocess, sys\n"
               "c = subprocess.Popen(['sleep', '60'])\n"
               "print('pid', c.pid, flush=True)\n"
               "sys.stdin.readline()\n"
               "c.kill(); c.wait()\n"
               "subprocess.run(['/bin/sh', '-c', 'echo child >&2'])\n"],
              env=env, stdout_lines=True)

    def stop_py(pid):
        py.p.stdin.write(b"\n")
        py.p.stdin.close()
    quiet_descendant("python3 subprocess", py, r"^pid (\d+)", stop_py)
    eq(py.err_lines.count("child"), 1, "the child's own stderr line is intact")

    sh = Proc(["/bin/sh", "-c", "sleep 60 & echo pid $!; wait"], env=env,
              stdin=False)
    quiet_descendant("sh -c", sh, r"^pid (\d+)", lambda pid: os.kill(pid, 15))

    host = Host(env=env)
    m = re.match(r"pid (\d+)$", host.cmd("system echo pid $$; exec sleep 60",
                                         timeout=20))
    ok(m, "system(): the descendant runs", host.stderr_text())
    if m:
        pid = int(m.group(1))
        ok(until(lambda: "sleep" in open(f"/proc/{pid}/comm").read(), 10),
           "system(): the descendant sleeps")
        check_light("system()", pid)
        os.kill(pid, 15)
        eq(host.cmd(None), "system -1", "system() returns when it ends")
    host.quit()
    stderr_done(host)
    lines = pullprof_lines(host.stderr_text())
    ok(len(lines) == 1 and re.search(SERVING, lines[0]),
       "system(): one line from pullprof, the C host's serving line", lines)


def test_exec_listen():
    """PULLPROF_EXEC_LISTEN: exec'd descendants serve, each on its own
    address."""
    if sanitized():
        skip("descendants serve on their own address",
             f"{pptest.SANITIZER} build: sleep hangs at exit with the "
             "sanitizer runtime and libp11-kit preloaded (see above)")
        return
    sh = Proc(["/bin/sh", "-c", "sleep 60 & echo pid $!; wait"],
              env=preload_env(PULLPROF_LISTEN="127.0.0.1:0",
                              PULLPROF_EXEC_LISTEN="127.0.0.1:0"),
              stdin=False)
    m = sh.wait_line(sh.out_lines, r"^pid (\d+)", timeout=20)
    ok(m, "the descendant runs", sh.stderr_text())
    if not m:
        sh.p.kill()
        return
    pid = int(m.group(1))
    ok(until(lambda: len(re.findall(SERVING, sh.stderr_text())) == 2, 20),
       "the shell and its descendant each say where they serve",
       sh.stderr_text())
    ports = {int(p) for p in re.findall(r"serving http://127\.0\.0\.1:(\d+)/",
                                        sh.stderr_text())}
    eq(len(ports), 2, "on two ports")
    for port in ports:
        r = curl(f"http://127.0.0.1:{port}/debug/pprof/status")
        ok(r.status == 200 and r.json()["pid"] in (sh.pid, pid),
           f"port {port} serves one of the two", r.status)
    pids = {curl(f"http://127.0.0.1:{p}/debug/pprof/status").json()["pid"]
            for p in ports}
    eq(pids, {sh.pid, pid}, "each process serves its own profiles")
    os.kill(pid, 15)
    eq(sh.p.wait(timeout=20), 0, "the shell ends with its descendant")


def test_wrappers_serve_once():
    """nice and env exec the program they run: the agent starts again in
    it (the wrapper's own is gone with its image) and says so once."""
    port = free_port()
    for wrapper in (["nice", "-n", "1"], ["env", "FOO=1"]):
        p = Proc([*wrapper, SLEEP, "60"],
                 env=preload_env(PULLPROF_LISTEN=f"127.0.0.1:{port}"),
                 stdin=False)
        ok(until(lambda: os.path.realpath(f"/proc/{p.pid}/exe") ==
                 os.path.realpath(SLEEP) and "pullprof-http" in p.threads(),
                 20), f"{wrapper[0]}: the program runs with its agent")
        r = curl(f"http://127.0.0.1:{port}/debug/pprof/status")
        eq(r.status, 200, f"{wrapper[0]}: the agent serves")
        if r.status == 200:
            eq(r.json()["cmdline"], [SLEEP, "60"],
               f"{wrapper[0]}: the program's agent answers, not the wrapper's")
        p.p.terminate()
        p.p.wait(timeout=20)
        stderr_done(p)
        lines = pullprof_lines(p.stderr_text())
        ok(len(lines) == 1 and re.search(SERVING, lines[0]),
           f"{wrapper[0]}: \"serving\" is printed once, nothing else",
           lines)


def test_lines_once_across_fork():
    """A line pullprof printed before the host forked is never printed
    again by the children (pp_log writes it whole, with no buffer a child
    could inherit and flush)."""
    code = ("import os, sys\n"
            "for i in range(7):\n"
            "    pid = os.fork()\n"
            "    if pid == 0:\n"
            "        sys.stderr.write(f'child {i}\\n')\n"
            "        sys.exit(0)\n"  # flushes every stdio buffer it has
            "    os.waitpid(pid, 0)\n")
    # ASan: the quarantine off in the children (fork_safe_env), leak
    # checks off as for every preloaded program (preload_env): a child
    # holds the agent's memory without the threads that point to it.
    env = fork_safe_env(preload_env(PULLPROF_LISTEN="127.0.0.1:0"))
    out = subprocess.run(["/usr/bin/python3", "-c", code],
                         env={**os.environ, **env}, capture_output=True,
                         timeout=60)
    eq(out.returncode, 0, "the forking host exits 0")
    err = out.stderr.decode().splitlines()
    ok(len([l for l in err if re.search(SERVING, l)]) == 1,
       "the serving line is on stderr once", err)
    eq(sorted(l for l in err if l.startswith("child")),
       [f"child {i}" for i in range(7)], "each child's line once")


def test_agent_missing():
    """libpullprof.so without the agent beside it: one line says so, and
    the program runs on."""
    with tempfile.TemporaryDirectory() as d:
        lib = os.path.join(d, "libpullprof.so")
        shutil.copy(os.path.realpath(pptest.LIBSO), lib)
        out = subprocess.run(["sh", "-c", "echo hello"],
                             env={**os.environ, **preload_env(
                                 lib=lib, PULLPROF_LISTEN="127.0.0.1:0")},
                             capture_output=True, timeout=20)
    eq(out.returncode, 0, "without the agent: the program exits 0")
    eq(out.stdout, b"hello\n", "without the agent: its output is intact")
    lines = out.stderr.decode().splitlines()
    ok(len(lines) == 1 and re.match(
        r"pullprof\[\d+\]: cannot load the agent: .*libpullprof-agent\.so",
        lines[0]), "one line says the agent cannot be loaded", lines)


def test_no_listen_is_light():
    """Preloaded without PULLPROF_LISTEN: the light library alone."""
    p = Proc([SLEEP, "60"], env=preload_env(), stdin=False)
    ok(until(lambda: os.path.realpath(f"/proc/{p.pid}/exe") ==
             os.path.realpath(SLEEP), 10), "sleep runs")
    check_light("no PULLPROF_LISTEN", p.pid)
    p.p.terminate()
    p.p.wait(timeout=20)
    stderr_done(p)
    eq(p.stderr_text(), "", "and says nothing")


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
     test_short_program_exits, test_preloaded_children, test_python_heap,
     test_descendants_quiet, test_exec_listen, test_wrappers_serve_once,
     test_lines_once_across_fork, test_agent_missing,
     test_no_listen_is_light])

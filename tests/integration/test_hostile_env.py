#!/usr/bin/env python3
"""Hosts that get in the way of the environment (issue 27, item 1).

bash defines getenv and setenv itself: its setenv, called before its main(),
makes a table of its own, where its getenv then looks alone. The preload
read its settings through them and found none: under bash the token and the
allow-list were dropped, PULLPROF_LISTEN was read as 6060 and
PULLPROF_LISTEN=none served all the same. Checked here as real processes:
bash, dash for comparison, tests/env/envhost (a host of ours whose getenv
knows nothing before main), wrapper chains that exec through sh and bash,
and a pyenv-style chain of shims (env, bash, ... python3) in one process,
which must print one "serving" line, with the address really served."""
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pptest  # noqa: E402
from pptest import (BUILD, Proc, curl, eq, fd_targets, free_port,  # noqa: E402,E501
                    listening_inode, ok, preload_env, raw_http, run,
                    socket_owners, until)

ENVHOST = os.path.join(BUILD, "tests", "env", "envhost")
BASH = shutil.which("bash") or "/bin/bash"
DASH = shutil.which("dash") or "/bin/sh"
PYTHON = "/usr/bin/python3"
SLEEP = shutil.which("sleep") or "/bin/sleep"
TOKEN = "hostile-env-token-1234"
SERVING = r"pullprof\[\d+\]: serving (https?://\S+)"


def pullprof_lines(p):
    return [line for line in p.stderr_text().splitlines()
            if line.startswith("pullprof[")]


def served(p, timeout=30):
    """The URL of p's "serving" line, once there is one."""
    m = p.wait_line(p.err_lines, SERVING, timeout=timeout)
    return m.group(1) if m else None


def end(p):
    if p.p.poll() is None:
        p.p.kill()
    p.p.wait(timeout=20)
    p.drain()


def check_settings(what, argv, env_extra=None):
    """A host given a port, a token and an allow-list serves with all
    three."""
    port = free_port()
    p = Proc(argv, env=preload_env(PULLPROF_LISTEN=f"127.0.0.1:{port}",
                                   PULLPROF_TOKEN=TOKEN,
                                   PULLPROF_ALLOW="127.0.0.0/8",
                                   **(env_extra or {})), stdout_lines=True)
    try:
        url = served(p)
        eq(url, f"http://127.0.0.1:{port}/debug/pprof/",
           f"{what}: serves on the address PULLPROF_LISTEN names")
        r = curl(f"http://127.0.0.1:{port}/debug/pprof/cmdline")
        eq(r.status, 401, f"{what}: no token, no answer (PULLPROF_TOKEN kept)")
        r = curl(f"http://127.0.0.1:{port}/debug/pprof/status",
                 "-H", f"Authorization: Bearer {TOKEN}")
        eq(r.status, 200, f"{what}: the token opens it")
        if r.status == 200:
            c = r.json()["config"]
            eq((c["listen"], c["token"], c["allow"], r.json()["pid"]),
               (f"127.0.0.1:{port}", True, "127.0.0.0/8", p.pid),
               f"{what}: /status shows the settings given, this process")
        return p
    except Exception:
        end(p)
        raise


def test_bash_and_dash():
    """bash (own getenv/setenv) and dash (the C library's) both serve with
    the settings given; bash's children get the records (PID, URL)."""
    for name, sh in (("bash", BASH), ("dash", DASH)):
        # Not a lone command (which the shell would exec): the shell stays
        # the host. Its child prints what the shell exported to it.
        p = check_settings(name, [sh, "-c",
                                  "env | grep '^PULLPROF_AGENT_'; read x || :"])
        try:
            until(lambda: len([x for x in p.out_lines
                               if x.startswith("PULLPROF_AGENT_")]) == 2, 20)
            got = dict(x.split("=", 1) for x in p.out_lines
                       if x.startswith("PULLPROF_AGENT_"))
            url = served(p)
            eq(got, {"PULLPROF_AGENT_PID": str(p.pid),
                     "PULLPROF_AGENT_URL": url or "?"},
               f"{name}: its children see the records of its agent")
            p.p.stdin.close()
            rc = p.p.wait(timeout=20)
            ok(rc == 0, f"{name}: exits 0",
               f"exit status {rc}; its stderr:\n" +
               "\n".join(p.stderr_text().splitlines()[-30:]))
            p.drain()
            eq(len(pullprof_lines(p)), 1,
               f"{name}: one line from pullprof: {pullprof_lines(p)}")
        finally:
            end(p)


def test_bash_listen_none():
    """PULLPROF_LISTEN=none under bash: no server, and says so."""
    p = Proc([BASH, "-c", "read x; echo done"],
             env=preload_env(PULLPROF_LISTEN="none"))
    try:
        ok(p.wait_line(p.err_lines, r"profiling without an HTTP server",
                       timeout=30),
           "bash, PULLPROF_LISTEN=none: says it serves nothing",
           p.stderr_text())
        ok(until(lambda: "pullprof-jobs" in p.threads(), 20),
           "the agent runs", p.threads())
        ok("pullprof-http" not in p.threads(), "no HTTP server thread",
           p.threads())
        socks = [os.readlink(f"/proc/{p.pid}/fd/{fd}")
                 for fd in os.listdir(f"/proc/{p.pid}/fd")]
        eq([s for s in socks if s.startswith("socket:")], [],
           "bash holds no socket")
        p.p.stdin.close()
        eq(p.p.wait(timeout=20), 0, "bash exits 0")
    finally:
        end(p)


def test_interposing_host():
    """A host whose getenv knows nothing before its main and whose setenv
    keeps to its own table: the settings are read all the same, and the
    records reach the table its main fills from the environment."""
    p = check_settings("envhost", [ENVHOST])
    try:
        ok(p.wait_line(p.out_lines, r"^ready$", timeout=20), "envhost runs")
        url = served(p)
        env = {x[4:].split("=", 1)[0]: x.split("=", 1)[1]
               for x in p.out_lines if x.startswith("env ")}
        eq((env.get("PULLPROF_AGENT_PID"), env.get("PULLPROF_AGENT_URL")),
           (str(p.pid), url), "the records are in the host's own table")
        p.p.stdin.close()
        eq(p.p.wait(timeout=20), 0, "envhost exits 0")
    finally:
        end(p)


def chain(what, argv, exe, env=None, stdin=False):
    """argv execs through wrappers into exe, in one process (port 0):
    one "serving" line, whose address the last program serves."""
    p = Proc(argv, env=preload_env(PULLPROF_LISTEN="127.0.0.1:0",
                                   **(env or {})), stdin=stdin)
    try:
        ok(until(lambda: os.path.realpath(f"/proc/{p.pid}/exe") == exe and
                 "pullprof-http" in p.threads(), 30),
           f"{what}: the last program runs with its agent", p.stderr_text())
        url = served(p)
        ok(url, f"{what}: says where it serves", p.stderr_text())
        if url:
            r = curl(url + "status")
            ok(r.status == 200 and r.json()["pid"] == p.pid and
               os.path.realpath(r.json()["executable"]) == exe,
               f"{what}: that address is served by the last program",
               r.status)
        lines = pullprof_lines(p)
        ok(len(lines) == 1 and re.search(SERVING, lines[0]),
           f"{what}: one line from pullprof in the whole chain", lines)
        return p, url
    except Exception:
        end(p)
        raise


def test_wrapper_chain():
    """sh -c 'exec sh -c "exec bash -c \\"exec sleep\\""': four programs in
    one process."""
    sleep = os.path.realpath(SLEEP)
    p, url = chain("sh/sh/bash/sleep",
                   [DASH, "-c", f"exec {DASH} -c \"exec {BASH} -c "
                    f"\\\"exec {SLEEP} 60\\\"\""], sleep)
    p.p.terminate()
    p.p.wait(timeout=20)


def test_pyenv_chain():
    """A pyenv-style shim: python3 (#!/usr/bin/env bash) execs the pyenv
    script (bash), which execs pyenv-exec (bash), which execs python3:
    env, bash, env, bash, env, bash, python3 in one process."""
    if pptest.SANITIZER == "tsan":
        # Seen once in a TSan run: python3's main thread read an
        # environment string (strncpy) that an agent thread had just
        # allocated: the agent's setenv of PULLPROF_AGENT_* from its own
        # thread racing with the host reading its environment. Open.
        pptest.skip("a pyenv-style chain", "tsan build: a race with "
                    "python3 reading its environment, open")
        return
    with tempfile.TemporaryDirectory() as d:
        scripts = {
            "python3": f'exec "{d}/pyenv" exec python3 "$@"\n',
            "pyenv": f'cmd=$1; shift; exec "{d}/pyenv-$cmd" "$@"\n',
            "pyenv-exec": f'shift; exec {PYTHON} "$@"\n',
        }
        for name, body in scripts.items():
            with open(os.path.join(d, name), "w") as f:
                f.write("#!/usr/bin/env bash\n" + body)
            os.chmod(os.path.join(d, name), 0o755)
        p, url = chain("pyenv shim", [os.path.join(d, "python3"), "-c",
                                      "import sys; sys.stdin.readline()"],
                       os.path.realpath(PYTHON), stdin=True)
        p.p.stdin.close()
        eq(p.p.wait(timeout=20), 0, "python3 exits 0")


def test_bash_closing_twice():
    """bash closes a pipe end a second time after it forks a pipeline
    (close(N) = 0, then close(N) = EBADF, seen with strace). A connection
    the agent accepted in between got number N, and bash's second close cut
    it: a request failed, and the server was set up again (seen once, in an
    ASan run). The agent's connections and its server's descriptors now sit
    far above the host's numbers. Here bash runs pipelines in a loop while
    requests come one connection each: every one answers, and the agent
    says nothing of closed descriptors."""
    port = free_port()
    p = Proc([BASH, "-c", "read x; while read -t 0.0001 y; "
              "[ $? -gt 128 ]; do echo x | cat >/dev/null; done"],
             env=preload_env(PULLPROF_LISTEN=f"127.0.0.1:{port}"),
             stdout_lines=True)
    try:
        ok(served(p), "bash serves", p.stderr_text())
        # Low numbers stay for what others make: libunwind's pipe and
        # libmicrohttpd's epoll set (checked as every other one is).
        own = sorted((n, w) for n, w in fd_targets(p.pid).items() if n > 2)
        print(f"# bash's descriptors, the agent's among them: {own}")
        ok([n for n, w in own if "socket" in w] and
           all(n >= 64 for n, w in own if "socket" in w),
           "the agent's listening socket is above the host's numbers", own)
        p.p.stdin.write(b"go\n")
        p.p.stdin.flush()
        codes = Counter()
        t0 = time.monotonic()
        while time.monotonic() - t0 < 4 or sum(codes.values()) < 200:
            try:
                data = raw_http(port, b"GET /debug/pprof/ HTTP/1.1\r\n"
                                b"Host: 127.0.0.1\r\nConnection: close"
                                b"\r\n\r\n", timeout=20)
                codes[data.split(b" ", 2)[1].decode()
                      if data.startswith(b"HTTP/1.1 ") else "cut"] += 1
            except OSError as e:
                codes[type(e).__name__] += 1
        n = sum(codes.values())
        took = time.monotonic() - t0
        conn = curl(f"http://127.0.0.1:{port}/debug/pprof/status").json()[
            "connections"]
        # What remains is the microsecond between accept() and the move:
        # bash's second close may land there. Such a connection is counted
        # (connections.lost), its client sees it reset, and nothing else
        # is touched.
        failed = n - codes["200"]
        print(f"# {n} requests in {took:.1f} s while bash ran pipelines: "
              f"{dict(codes)}; connections.lost {conn.get('lost')}")
        eq(failed, conn.get("lost"), "every request not answered is a "
           "connection bash closed the moment it was accepted "
           "(connections.lost)")
        ok(failed * 20 <= n, f"at most 1 in 20 ({failed} of {n})")
        p.p.stdin.write(b"stop\n")
        p.p.stdin.close()
        eq(p.p.wait(timeout=30), 0, "bash exits 0")
        p.drain()
        eq(pullprof_lines(p), [pullprof_lines(p)[0]] if pullprof_lines(p)
           else ["?"], "one line from pullprof (no descriptor lost)")
    finally:
        end(p)


def test_address_taken_meanwhile():
    """The port served before the exec is taken when the program starts:
    it serves a new one, and stderr says why."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        env = preload_env(PULLPROF_LISTEN="127.0.0.1:0")
        lib = env.pop("LD_PRELOAD")
        # As if a wrapper in this process had served `port` before it
        # exec'd sleep (sh itself runs without the preload).
        p = Proc([DASH, "-c",
                  "PULLPROF_AGENT_PID=$$ PULLPROF_AGENT_URL="
                  f"http://127.0.0.1:{port}/debug/pprof/ "
                  f"LD_PRELOAD='{lib}' exec {SLEEP} 60"], env=env,
                 stdin=False)
        try:
            url = served(p)
            ok(url and f":{port}/" not in url,
               "serves on another port", p.stderr_text())
            ok(re.search(rf"could not serve 127\.0\.0\.1:{port} again.*"
                         r"address already in use", p.stderr_text()),
               "and says why", p.stderr_text())
            if url:
                eq(curl(url + "status").json()["pid"], p.pid,
                   "the new address answers")
        finally:
            end(p)


def test_last_program_without_pullprof():
    """A chain whose last program does not load pullprof: nothing listens
    once it runs (the wrappers' sockets closed at exec)."""
    sleep = os.path.realpath(SLEEP)
    p = Proc([DASH, "-c", f"exec env -u LD_PRELOAD {SLEEP} 60"],
             env=preload_env(PULLPROF_LISTEN="127.0.0.1:0"), stdin=False)
    try:
        url = served(p)
        ok(url, "the wrapper said where it serves", p.stderr_text())
        ok(until(lambda: os.path.realpath(f"/proc/{p.pid}/exe") == sleep,
                 20), "sleep runs")
        fds = [os.readlink(f"/proc/{p.pid}/fd/{fd}")
               for fd in os.listdir(f"/proc/{p.pid}/fd")]
        eq([f for f in fds if f.startswith("socket:")], [],
           "sleep holds no socket")
        if url:
            port = int(re.search(r":(\d+)/", url).group(1))
            # Read from the kernel's table, not by connecting (a connect
            # to a free port can meet itself); a listener there is only
            # a fault if it is sleep's (another test's agent may have
            # been given the freed port meanwhile).
            inode = listening_inode(port)
            owners = socket_owners(inode) if inode else []
            ok(p.pid not in owners,
               "nothing of the chain listens on the wrappers' address",
               f"listening there: pids {owners}")
    finally:
        p.p.send_signal(signal.SIGTERM)
        end(p)


run([test_bash_and_dash, test_bash_closing_twice, test_bash_listen_none, test_interposing_host,
     test_wrapper_chain, test_pyenv_chain, test_address_taken_meanwhile,
     test_last_program_without_pullprof])

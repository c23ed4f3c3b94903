"""Agent lifecycle in a linked host: start/stop/start, thread naming and
signal masks, a taken port, bad configuration, environment precedence, fork,
exit with the agent running."""
import errno
import time

from pptest import Host, curl, eq, fd_targets, ok, run


def status(port, path="/debug/pprof/status"):
    return curl(f"http://127.0.0.1:{port}{path}", timeout=5)


def unwind_pipe(before, after):
    """The descriptors new in `after` are nothing but libunwind's
    memory-validation pipe: one pipe, both ends, which libunwind opens once
    per process when it is first initialised (the heap profiler sets it up
    at start) and keeps for the process's life."""
    new = {fd: t for fd, t in after.items() if fd not in before}
    if not new:
        return True
    return len(new) == 2 and len(set(new.values())) == 1 and \
        next(iter(new.values())).startswith("pipe:")


def test_start_stop_start():
    h = Host()
    fds0, threads0 = h.fds(), len(h.threads())
    targets0 = fd_targets(h.pid)
    ok("pullprof-http" not in h.threads(), "no agent thread before start")
    port = h.start()
    eq(status(port).status, 200, "first start serves")
    eq(h.threads().count("pullprof-http"), 1, "one thread named pullprof-http")
    eq(h.cmd("port"), f"port {port}", "pullprof_port() is the bound port")
    eq(h.cmd("stop"), "ok", "stop returns 0")
    eq(h.cmd("port"), "port 0", "pullprof_port() is 0 when stopped")
    r = status(port)
    eq((r.status, r.exit_code), (0, 7), "stopped agent refuses connections")
    ok("pullprof-http" not in h.threads(), "stop joins the agent thread")
    after = fd_targets(h.pid)
    ok(unwind_pipe(targets0, after),
       "stop closes every descriptor it opened (libunwind's own pipe aside)",
       f"before {targets0} after {after}")
    fds0 = h.fds()
    port2 = h.start()
    r = status(port2)
    eq(r.status, 200, "second start serves")
    s = r.json()
    ok(s["uptime_seconds"] < 5, "uptime restarts with the agent")
    eq(s["requests"]["total"], 0, "counters restart with the agent")
    eq(h.cmd("stop"), "ok", "second stop")
    # Many cycles, with a request each: nothing accumulates.
    for i in range(30):
        p = h.start()
        if status(p).status != 200 or h.cmd("stop") != "ok":
            ok(False, f"cycle {i} failed")
            break
    eq(h.fds(), fds0, "30 start/stop cycles leak no descriptor")
    eq(len(h.threads()), threads0, "30 start/stop cycles leak no thread")
    eq(h.cmd("stop"), "ok", "stop when not running returns 0")
    ok(h.alive(), "host alive after the cycles")
    eq(h.quit(), 0, "host exits cleanly")


def test_start_twice():
    h = Host()
    port = h.start()
    line = h.start()
    eq(line.split()[:2], ["err", str(-errno.EALREADY)],
       "a second start returns -EALREADY")
    eq(status(port).status, 200, "the first agent keeps serving")
    h.quit()


def test_thread_signal_mask():
    h = Host()
    h.start()
    tids = h.thread_ids("pullprof-http")
    eq(len(tids), 1, "found the agent thread")
    with open(f"/proc/{h.pid}/task/{tids[0]}/status") as f:
        blk = [l for l in f if l.startswith("SigBlk:")][0].split()[1]
    mask = int(blk, 16)
    for name, num in (("SIGINT", 2), ("SIGTERM", 15), ("SIGPROF", 27), ("SIGURG", 23),
                      ("SIGCHLD", 17), ("SIGUSR1", 10)):
        ok(mask & (1 << (num - 1)), f"agent thread blocks {name}", blk)
    h.quit()


def test_port_taken():
    a = Host()
    port = a.start()
    b = Host()
    line = b.start(f"127.0.0.1:{port}")
    eq(line.split()[:2], ["err", str(-errno.EADDRINUSE)],
       "start on a taken port returns -EADDRINUSE")
    ok("address already in use" in line, "pullprof_strerror says why", line)
    m = b.wait_line(b.err_lines, r"pullprof\[\d+\]: not started: .*", timeout=5)
    ok(m and f"127.0.0.1:{port}" in m.group(0) and "already in use" in m.group(0),
       "one stderr line names the address and the reason", b.stderr_text())
    eq(len(b.err_lines), 1, "exactly one line on stderr")
    ok(b.alive(), "the host whose agent failed runs on")
    eq(b.cmd("port"), "port 0", "the failed agent holds nothing")
    eq(status(port).status, 200, "the first agent still serves")
    # The failed start left nothing behind: the next start works.
    p2 = b.start()
    eq(status(p2).status, 200, "a later start on a free port works")
    eq(a.quit(), 0, "first host exits cleanly")
    eq(b.quit(), 0, "second host exits cleanly")


def test_bad_config():
    cases = [
        ({"PULLPROF_LISTEN": "nonsense"}, "PULLPROF_LISTEN"),
        ({"PULLPROF_LISTEN": "example.com:80"}, "literal"),
        ({"PULLPROF_PREFIX": "debug"}, "PULLPROF_PREFIX"),
        ({"PULLPROF_MAX_CONNECTIONS": "0"}, "PULLPROF_MAX_CONNECTIONS"),
        ({"PULLPROF_IDLE_TIMEOUT": "soon"}, "PULLPROF_IDLE_TIMEOUT"),
        ({"PULLPROF_LISTEN": "192.0.2.1:0", "PULLPROF_INSECURE": "1"},
         "no such address"),
        ({"PULLPROF_LISTEN": "192.0.2.1:0"}, "PULLPROF_TOKEN"),
        ({"PULLPROF_UNWIND": "frames"}, "dwarf|libunwind|fp"),
        ({"PULLPROF_CPU_HZ": "5000"}, "PULLPROF_CPU_HZ"),
        ({"PULLPROF_MAX_DEPTH": "4"}, "PULLPROF_MAX_DEPTH"),
    ]
    for env, want in cases:
        h = Host(env=env)
        line = h.start()
        ok(line.startswith("err "), f"{env}: start fails", line)
        m = h.wait_line(h.err_lines, "not started", timeout=5)
        ok(m and want in h.stderr_text(), f"{env}: stderr names {want}",
           h.stderr_text())
        ok(h.alive(), f"{env}: host runs on")
        eq(h.quit(), 0, f"{env}: host exits cleanly")


def test_env_precedence():
    # The struct asks for port 1 (privileged, would fail); the operator's
    # PULLPROF_LISTEN wins.
    h = Host(env={"PULLPROF_LISTEN": "127.0.0.1:0", "PULLPROF_PREFIX": "/env"})
    port = h.start("127.0.0.1:1", "/code")
    ok(isinstance(port, int) and port != 1, "PULLPROF_LISTEN overrides the struct",
       port)
    eq(status(port, "/env/status").status, 200, "PULLPROF_PREFIX overrides too")
    h.cmd("stop")
    port = h.start("127.0.0.1:0", "/code", noenv=True)
    eq(status(port, "/code/status").status, 200, "ignore_env uses the struct alone")
    h.quit()


def test_fork():
    h = Host()
    port = h.start()
    child = h.cmd("fork 2")
    ok(child.startswith("child "), "host forks", child)
    pid = child.split()[1]
    eq(h.cmd("stop"), "ok", "parent stops its agent while the child lives")
    r = status(port)
    eq(r.exit_code, 7,
       "the port closes: the child did not keep the listening socket")
    eq(h.cmd(f"wait {pid}"), "exit 0", "the child ran without an agent")
    port = h.start()
    eq(status(port).status, 200, "the parent can start again")
    h.quit()


def test_exit_running():
    h = Host()
    port = h.start()
    # A client connected and idle while the host exits.
    import socket
    s = socket.create_connection(("127.0.0.1", port))
    t = time.time()
    eq(h.quit(), 0, "exit() with the agent running and a client connected: 0")
    ok(time.time() - t < 5, "exit is not delayed by the agent")
    s.close()


def recv_or_closed(s, request=None):
    """What the server sends (b"" once it closed the connection, "hung"
    when it neither answers nor closes within 5 s)."""
    import socket
    s.settimeout(5)
    try:
        if request:
            s.sendall(request)
        return s.recv(100)
    except socket.timeout:
        return "hung"
    except OSError:
        return b""


def test_stop_with_clients():
    import socket
    h = Host()
    port = h.start()
    conns = []
    # An idle keep-alive connection, a half-sent request, a bare connect.
    a = socket.create_connection(("127.0.0.1", port))
    a.sendall(b"GET /debug/pprof/status HTTP/1.1\r\nHost: localhost\r\n\r\n")
    a.recv(65536)
    b = socket.create_connection(("127.0.0.1", port))
    b.sendall(b"GET /debug/pprof/status HTTP/1.1\r\nHos")
    c = socket.create_connection(("127.0.0.1", port))
    conns += [a, b, c]
    time.sleep(0.2)
    t = time.time()
    eq(h.cmd("stop", timeout=10), "ok", "stop with three clients connected")
    ok(time.time() - t < 2, "stop does not wait for clients",
       time.time() - t)
    for i, s in enumerate(conns):
        eq(recv_or_closed(s), b"", f"client {i} sees its connection closed")
        s.close()
    ok(h.alive(), "host alive after stopping under clients")
    h.quit()


def test_connection_limit():
    import socket
    h = Host(env={"PULLPROF_MAX_CONNECTIONS": "2", "PULLPROF_IDLE_TIMEOUT": "1"})
    port = h.start()
    a = socket.create_connection(("127.0.0.1", port))
    b = socket.create_connection(("127.0.0.1", port))
    time.sleep(0.2)
    c = socket.create_connection(("127.0.0.1", port))
    t = time.time()
    data = recv_or_closed(c, b"GET /debug/pprof/status HTTP/1.1\r\nHost: localhost\r\n\r\n")
    eq(data, b"", "a third connection over a limit of 2 is closed unanswered")
    ok(time.time() - t < 2, "... at once")
    c.close()
    # The idle timeout (1 s) frees the two slots...
    for s in (a, b):
        t = time.time()
        data = recv_or_closed(s)
        ok(data == b"" and time.time() - t < 4,
           "an idle connection is closed after PULLPROF_IDLE_TIMEOUT", data)
        s.close()
    # ...and the agent answers again.
    r = status(port)
    eq(r.status, 200, "served again once the idle connections are gone")
    eq(r.json()["config"]["max_connections"], 2, "status shows the limit")
    ok(r.json()["connections"]["refused"] >= 1, "status counts the refusal",
       r.json()["connections"])
    # Many rounds over the limit never leave the agent deaf.
    for i in range(5):
        extra = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
        time.sleep(0.1)
        for s in extra:
            s.close()
    time.sleep(0.3)
    eq(status(port).status, 200, "still serving after repeated overload")
    h.quit()


run([test_start_stop_start, test_stop_with_clients, test_connection_limit, test_start_twice, test_thread_signal_mask,
     test_port_taken, test_bad_config, test_env_precedence, test_fork,
     test_exit_running])

"""A host that closes descriptors it did not open (closefrom(3) or
close_range(3, ~0U, 0), as daemons do at start-up) takes the agent's
listening socket, libmicrohttpd's epoll set, the server's wake-up and
libunwind's validation pipe, and then gets the numbers again for files and
pipes of its own. The host (tests/hostile/closefrom, preloaded) closes
everything at chosen moments: before any request, during a CPU window, with
an idle client connected; then writes known bytes into files and pipes that
reuse the numbers. Checked: those bytes, byte for byte, while the agent
profiles (CPU samples through code without unwind tables, where libunwind
1.6 validated addresses through its pipe; heap-sampled mallocs) and after
the exit; that the host exits promptly; that /status says the descriptors
were lost and the server serves again on its address; that the window the
host cut off lets go of its place (PULLPROF_MAX_CPU_WINDOWS=1); that the
host lives when libmicrohttpd's close of a connection answers EBADF (the
host closed it between the agent's check and libmicrohttpd's use: its
panic, which would end the process); and the issue's repro: close_range, a
pipe, a loop of mallocs, which must finish."""
import os
import re
import shutil
import socket
import tempfile
import threading
import time

from pptest import (BUILD, Host, curl, eq, ok, preload_env, run, sanitized,
                    until)

EXE = os.path.join(BUILD, "tests", "hostile", "closefrom")
LOST = re.compile(r"the host closed descriptors the agent had open")
tmp = tempfile.mkdtemp(prefix="pp-hostile-fds-")


def start(**env):
    """The host, preloaded, serving on a free port: (host, port)."""
    e = preload_env(PULLPROF_LISTEN="127.0.0.1:0", **env)
    h = Host(env=e, exe=EXE)
    m = h.wait_line(h.err_lines, r"serving http://127\.0\.0\.1:(\d+)/",
                    timeout=30)
    return h, int(m.group(1)) if m else 0


def status(port):
    r = curl(f"http://127.0.0.1:{port}/debug/pprof/status", timeout=10)
    return r.json() if r.status == 200 else None


def lost_seen(port, times=1):
    """/status, once it reports `times` losses and a server set up again."""
    found = {}

    def look():
        st = status(port)
        d = (st or {}).get("descriptors", {})
        if d.get("lost", 0) >= times and d.get("server_restarts", 0) >= times:
            found["st"] = st
            return True
        return False
    until(look, timeout=30)
    return found.get("st")


def exit_time(h, timeout=20):
    """Seconds from `exit` (return from main) to the process's end; None
    when it did not end within timeout (then it is killed)."""
    t0 = time.monotonic()
    h.p.stdin.write(b"exit\n")
    h.p.stdin.flush()
    try:
        h.p.wait(timeout)
    except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired
        h.p.kill()
        h.p.wait()
        return None
    return time.monotonic() - t0


def file_bytes(d, n):
    """The files the host wrote, read from disk after its exit."""
    out = []
    for i in range(n):
        with open(os.path.join(d, f"file{i}"), "rb") as f:
            out.append(f.read())
    return out


def want_files(n):
    return [f"file {i}: the host's own bytes, not pullprof's\n".encode()
            for i in range(n)]


def finish(h, d, n, what):
    """The host's exit: prompt, 0, its files as it wrote them, one line
    on stderr about the loss."""
    took = exit_time(h)
    ok(took is not None and took < 5,
       f"{what}: the host exits promptly after main returns "
       f"({took if took is None else round(took, 2)} s)")
    eq(h.p.returncode, 0, f"{what}: exit status 0")
    h.drain()
    eq(file_bytes(d, n), want_files(n),
       f"{what}: the host's files hold its bytes, byte for byte")
    said = [line for line in h.err_lines if LOST.search(line)]
    eq(len(said), 1, f"{what}: stderr says it once")
    ok(not [line for line in h.err_lines if "Fatal error" in line],
       f"{what}: libmicrohttpd never aborted", h.stderr_text())


def test_before_any_request():
    d = tempfile.mkdtemp(dir=tmp)
    h, port = start()
    ok(port, "the host serves", h.stderr_text())
    eq(h.cmd("close"), "closed", "the host closes every descriptor from 3 on")
    line = h.cmd(f"reuse {d} 3")
    ok(line.startswith("reused ") and ":" not in line,
       "and opens 3 files and 3 pipes, which take the numbers", line)
    st = lost_seen(port)
    ok(st is not None, "/status answers on the same port afterwards",
       h.stderr_text())
    fds = (st or {}).get("descriptors", {})
    ok(fds.get("lost", 0) >= 1 and fds.get("server_restarts", 0) >= 1,
       "/status: descriptors.lost and descriptors.server_restarts", fds)
    ok("descriptor" in (fds.get("lost_last") or ""),
       "descriptors.lost_last names what was found closed", fds)
    eq(h.cmd("check"), "check ok", "the host's files and pipes are intact")
    r = curl(f"http://127.0.0.1:{port}/debug/pprof/profile?seconds=1",
             timeout=30)
    eq(r.status, 200, "a CPU profile afterwards: 200")
    r = curl(f"http://127.0.0.1:{port}/debug/pprof/heap", timeout=30)
    eq(r.status, 200, "a heap profile afterwards: 200")
    eq(h.cmd("alloc 20000", timeout=60), "alloc done 0",
       "heap-sampled mallocs run")
    eq(h.cmd("check"), "check ok", "the host's files and pipes still intact")
    finish(h, d, 3, "closed before any request")


def test_during_a_window():
    """A CPU window is open (the only one allowed) when the host closes
    everything; it samples code without unwind tables meanwhile."""
    d = tempfile.mkdtemp(dir=tmp)
    h, port = start(PULLPROF_MAX_CPU_WINDOWS="1")
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("r", curl(
        f"http://127.0.0.1:{port}/debug/pprof/profile?seconds=4&hz=1000",
        timeout=40)))
    t.start()
    ok(until(lambda: ((status(port) or {}).get("cpu") or {})
             .get("windows_open") == 1, timeout=20),
       "the window is open")
    eq(h.cmd("close"), "closed", "the host closes every descriptor from 3 on")
    line = h.cmd(f"reuse {d} 4")
    ok(line.startswith("reused ") and ":" not in line,
       "files and pipes take the numbers",
       f"{line!r}; the host's stderr: {h.stderr_text()[-3000:]}")
    eq(h.cmd("spin 2", timeout=60), "spun",
       "the host burns CPU through code without unwind tables")
    eq(h.cmd("check"), "check ok",
       "its pipes hold their bytes (no byte read or written by libunwind)")
    t.join(60)
    r = got.get("r")
    ok(r is not None and r.status in (0, 200),
       "the cut-off window's request ends (its connection was the host's "
       "to close)", r)
    st = lost_seen(port)
    ok(st is not None, "/status answers afterwards", h.stderr_text())
    r = curl(f"http://127.0.0.1:{port}/debug/pprof/profile?seconds=1",
             timeout=30)
    eq(r.status, 200, "a new window (PULLPROF_MAX_CPU_WINDOWS=1): 200, the "
       "cut-off one let go of its place")
    eq(h.cmd("check"), "check ok", "the host's files and pipes still intact")
    finish(h, d, 4, "closed during a window")


def test_idle_client():
    """A client connected and idle; the host closes everything and reuses
    the numbers; past the idle timeout nothing of the host's is closed."""
    d = tempfile.mkdtemp(dir=tmp)
    h, port = start(PULLPROF_IDLE_TIMEOUT="1", PULLPROF_REQUEST_TIMEOUT="2")
    c = socket.create_connection(("127.0.0.1", port))
    c.sendall(b"GET /debug/pprof/status HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    ok(until(lambda: ((status(port) or {}).get("connections") or {})
             .get("active", 0) >= 2, timeout=20),
       "the idle client is connected")
    eq(h.cmd("close"), "closed", "the host closes every descriptor from 3 on")
    line = h.cmd(f"reuse {d} 4")
    ok(line.startswith("reused ") and ":" not in line,
       "files and pipes take the numbers", line)
    st = lost_seen(port)
    ok(st is not None, "/status answers afterwards", h.stderr_text())
    # Past the idle and request timeouts of the old connection.
    time.sleep(3)
    eq(h.cmd("check"), "check ok", "the host's files and pipes are intact "
       "after the old connection's timeouts")
    c.close()
    finish(h, d, 4, "closed with an idle client")


def sockets(pid):
    """The process's socket descriptors: {number: inode}."""
    out = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        m = re.match(r"socket:\[(\d+)\]", link)
        if m:
            out[int(fd)] = int(m.group(1))
    return out


def test_one_connection():
    """The host closes one descriptor only, a client's connection to the
    agent, and opens a file that takes its number; everything else is as
    it was. The agent must not close that file when the connection's
    timeouts pass."""
    d = tempfile.mkdtemp(dir=tmp)
    h, port = start(PULLPROF_IDLE_TIMEOUT="1", PULLPROF_REQUEST_TIMEOUT="2")
    before = sockets(h.pid)
    c = socket.create_connection(("127.0.0.1", port))
    c.sendall(b"GET /debug/pprof/status HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    # Accepted at the lowest free number, the connection is moved high at
    # once; a look in between (a loaded machine, a sanitizer's slower
    # calls) would see it low and have the host close the agent's number
    # before the move: what the agent does then is test_accept_race's.
    # This test is about a connection the agent holds: it waits for it.

    def moved():
        new = set(sockets(h.pid)) - set(before)
        return len(new) == 1 and min(new) >= 64
    ok(until(moved, timeout=20),
       "the agent accepted the client's connection and moved it high")
    new = sorted(set(sockets(h.pid)) - set(before))
    fd = new[0] if new else -1
    eq(h.cmd(f"closefd {fd}"), f"closed {fd} 0",
       "the host closes that one descriptor")
    # The agent keeps its connections far above the host's numbers
    # (util/fds.h), where no open() of the host's lands: the host puts
    # its file there itself (dup2), as a host with fixed numbers would.
    ok(fd >= 64, f"the agent's connection is above the host's numbers "
       f"({fd})", fd)
    line = h.cmd(f"reuse {d} 1 {fd}")
    ok(line.startswith(f"reused {fd} "),
       "a file of the host's takes its number", line)
    st = lost_seen(port)
    ok(st is not None, "/status answers afterwards", h.stderr_text())
    ok("connection" in ((st or {}).get("descriptors", {})
                        .get("lost_last") or ""),
       "descriptors.lost_last: a client's connection",
       (st or {}).get("descriptors"))
    time.sleep(3)  # past the old connection's timeouts: nothing happens
    eq(h.cmd("check"), "check ok", "the host's file and pipe are intact")
    c.close()
    r = curl(f"http://127.0.0.1:{port}/debug/pprof/profile?seconds=1",
             timeout=30)
    eq(r.status, 200, "a CPU profile afterwards: 200")
    finish(h, d, 1, "one connection closed")


def test_panic():
    """The agent's HTTP thread closes a finished connection and close()
    answers EBADF, as when the host closed that number a moment before
    (the window between the agent's check and libmicrohttpd's use):
    libmicrohttpd panics, which by default ends the process. The agent
    leaves that run, abandons the daemon and serves again; the host
    lives."""
    h, port = start()
    eq(h.cmd("losenext"), "armed", "the host will fail the agent's next "
       "close of a socket with EBADF")
    r = curl(f"http://127.0.0.1:{port}/debug/pprof/status", timeout=10)
    eq(r.status, 200, "the request answers before its connection closes")
    st = lost_seen(port)
    ok(st is not None, "/status answers again, from a daemon set up anew",
       h.stderr_text())
    last = ((st or {}).get("descriptors") or {}).get("lost_last") or ""
    ok(last.startswith("libmicrohttpd stopped on one: Close socket failed"),
       "/status names libmicrohttpd's panic as the loss", last)
    r = curl(f"http://127.0.0.1:{port}/debug/pprof/profile?seconds=1",
             timeout=30)
    eq(r.status, 200, "a CPU profile from the new daemon")
    eq(h.cmd("alloc 1000"), "alloc done 0", "the host goes on")
    took = exit_time(h)
    ok(took is not None and took < 5, "the host exits promptly", took)
    ok(h.p.returncode == 0, "exit status 0 (no abort)",
       f"{h.p.returncode}: {h.stderr_text()}")
    h.drain()
    ok(not [line for line in h.err_lines if "Fatal error" in line],
       "libmicrohttpd's own panic message never printed", h.stderr_text())
    said = [line for line in h.err_lines if LOST.search(line)]
    ok(len(said) == 1, "stderr says it once", h.stderr_text())


def test_accept_race():
    """Between accept4() and the agent's first look at the number, the
    host closes the new connection and puts a socket of its own there (a
    stray close, then a socket(): the host's accept4 does it, so the
    moment is hit every time). The agent must leave the host's socket
    where it is, whole: before, it took it for the connection, moved it
    high and closed the host's number."""
    h, port = start()
    eq(h.cmd("swapnext"), "armed", "the host will take the agent's next "
       "connection between accept and the look")
    r = curl(f"http://127.0.0.1:{port}/debug/pprof/status", timeout=10)
    ok(r.status != 200, "that request is cut (the host closed its "
       f"connection): {r.status}")
    line = h.cmd("sockcheck")
    ok(line.startswith("sock ok "), "the host's socket at that number is "
       "whole: what it writes to its pair is read there", line)
    st = status(port)
    ok(st is not None, "/status answers on the next connection")
    lost = ((st or {}).get("connections") or {}).get("lost", 0)
    ok(lost >= 1, "connections.lost counts the one taken", lost)
    eq(h.cmd("alloc 1000"), "alloc done 0", "the host runs on")
    took = exit_time(h)
    ok(took is not None and took < 5, "the host exits promptly", took)
    eq(h.p.returncode, 0, "exit status 0")


def test_issue_repro():
    """close_range(3, ~0U, 0), a pipe, then mallocs in a loop (every one
    heap-sampled where the sampler runs): it finishes, and so does exit."""
    d = tempfile.mkdtemp(dir=tmp)
    h, port = start(PULLPROF_HEAP_RATE="1")
    eq(h.cmd("close"), "closed", "close_range(3, ~0U, 0)")
    line = h.cmd(f"reuse {d} 1")
    ok(line.startswith("reused "), "a pipe (and a file)", line)
    eq(h.cmd("alloc 200000", timeout=120), "alloc done 0",
       "200000 mallocs finish" + (" (no heap sampling in a sanitizer "
                                   "build)" if sanitized() else ""))
    eq(h.cmd("check"), "check ok", "the pipe holds its bytes")
    ok(lost_seen(port) is not None, "/status says the descriptors were lost")
    finish(h, d, 1, "the issue's repro")


try:
    run([test_before_any_request, test_during_a_window, test_idle_client,
         test_one_connection, test_accept_race, test_panic,
         test_issue_repro])
finally:
    shutil.rmtree(tmp, ignore_errors=True)

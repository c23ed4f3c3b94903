"""Shared helpers for pullprof's integration tests.

Each test file is a TAP producer run by automake's tap-driver: every check is
one "ok"/"not ok" line, so the suite's summary counts checks, not files.
Everything here talks to real processes over real HTTP with curl.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

SRC = os.environ.get("PP_SRCDIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("PP_BUILDDIR") or SRC
CURL = os.environ.get("PP_CURL") or shutil.which("curl") or "curl"
HOST = os.path.join(BUILD, "tests", "host")
DEMO = os.path.join(BUILD, "examples", "demo")
LIBSO = os.path.join(BUILD, ".libs", "libpullprof.so")

# Sanitizer builds (configure --enable-asan / --enable-tsan; Makefile.am
# exports these): "none", "asan" (ASan + UBSan) or "tsan", and the path of
# the sanitizer's runtime library.
SANITIZER = os.environ.get("PP_SANITIZE") or "none"
SAN_RUNTIME = os.environ.get("PP_SAN_RUNTIME") or ""
# Sanitizer builds leave libpullprof's malloc wrappers out (configure.ac,
# src/shim/malloc.c): the sanitizer's runtime defines malloc & co. and
# is first in the library list, linked or preloaded, so the wrappers would
# never run. Tests of what the heap sampler sees skip there.
NO_HEAP_WHY = (f"{SANITIZER} build: the sanitizer's allocator replaces "
               "malloc, so libpullprof's heap interposition is built out")
NO_VALGRIND_WHY = (f"{SANITIZER} build: valgrind cannot run a sanitized "
                   "program (both own the address space and malloc)")


# ThreadSanitizer delivers an asynchronous signal only when the thread next
# reaches one of its own safe points (an intercepted call), and hands the
# handler the context of that point: under TSan a CPU sample does not say
# where the thread was burning CPU, so checks of what a CPU profile contains
# (shares, leaves, durations at load) cannot hold there.
NO_CPU_TRUTH_WHY = ("tsan build: TSan defers the sampling signal to its own "
                    "safe points, so samples do not show where the CPU was "
                    "spent")


def sanitized():
    return SANITIZER != "none"


def fork_safe_env(env=None):
    """env for a host whose children fork while its threads free memory.
    Under ASan, without the quarantine: GCC 12's libasan does not reset the
    quarantine's lock in a fork child, so a child forked while a parent
    thread drained the quarantine hangs at its first drain (seen: a child's
    exiting thread spinning in Quarantine::Drain, 1 child in 200-400 under
    load; with the quarantine off, 800 of 800). Use after free is the
    other tests' business. ASAN_OPTIONS already in env (preload_env's) is
    kept and added to."""
    env = dict(env or {})
    if SANITIZER == "asan":
        env["ASAN_OPTIONS"] = ((env.get("ASAN_OPTIONS") or
                                os.environ.get("ASAN_OPTIONS", "")) +
                               ":quarantine_size_mb=0"
                               ":thread_local_quarantine_size_kb=0")
    return env


def preload_env(lib=LIBSO, **extra):
    """The environment that preloads `lib` (libpullprof by default) into
    an unmodified program. In a sanitizer build the sanitizer's runtime has
    to be loaded first (its interceptors must be in place before anything
    else runs, and ASan checks that it comes first); leak detection is off
    there, since what such a program (sh, python3) leaves allocated at exit
    is its own business, not libpullprof's. The linked hosts keep it on."""
    env = {"LD_PRELOAD": lib}
    if SAN_RUNTIME:
        env["LD_PRELOAD"] = f"{SAN_RUNTIME} {lib}"
        if SANITIZER == "asan":
            env["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + \
                ":detect_leaks=0"
    env.update(extra)
    return env

_count = 0
_failed = 0


def ok(cond, name, diag=None):
    """Record one check."""
    global _count, _failed
    _count += 1
    if cond:
        print(f"ok {_count} - {name}", flush=True)
    else:
        _failed += 1
        print(f"not ok {_count} - {name}", flush=True)
        if diag is not None:
            for line in str(diag).splitlines() or [""]:
                print(f"# {line}", flush=True)
    return bool(cond)


def eq(got, want, name):
    return ok(got == want, name, f"got:  {got!r}\nwant: {want!r}")


def skip(name, why):
    global _count
    _count += 1
    print(f"ok {_count} - {name} # SKIP {why}", flush=True)


def run(tests):
    """Run test functions in order; an exception fails that test, not the
    file, so one broken check never hides the others. PP_ONLY=name[,name]
    runs only those (for a developer re-running one test)."""
    only = os.environ.get("PP_ONLY")
    if only:
        tests = [t for t in tests if t.__name__ in only.split(",")]
    for t in tests:
        try:
            t()
        except Exception:  # noqa: BLE001 - report anything
            ok(False, f"{t.__name__} raised", traceback.format_exc())
    print(f"1..{_count}", flush=True)
    sys.exit(1 if _failed else 0)


def version():
    """PACKAGE_VERSION as configure wrote it."""
    with open(os.path.join(BUILD, "pp-autoconf.h")) as f:
        return re.search(r'#define PACKAGE_VERSION "([^"]+)"', f.read()).group(1)


class Response:
    def __init__(self, status, headers, body, exit_code, stderr):
        self.status = status
        self.headers = headers  # lower-case name -> last value
        self.body = body
        self.exit_code = exit_code
        self.stderr = stderr

    def header(self, name):
        return self.headers.get(name.lower())

    def json(self):
        return json.loads(self.body.decode())

    @property
    def text(self):
        return self.body.decode("utf-8", "replace")

    def __repr__(self):
        return (f"<{self.status} {self.headers} {self.body[:300]!r} "
                f"curl={self.exit_code} {self.stderr.strip()}>")


def curl(url, *args, timeout=20):
    """Fetch url with the real curl; returns status, headers and body."""
    with tempfile.TemporaryDirectory() as d:
        hdr, body = os.path.join(d, "h"), os.path.join(d, "b")
        p = subprocess.run(
            [CURL, "-s", "-S", "--max-time", str(timeout), "-D", hdr, "-o", body,
             "-w", "%{http_code}", *args, url],
            capture_output=True, timeout=timeout + 10)
        headers = {}
        if os.path.exists(hdr):
            with open(hdr, "rb") as f:
                for line in f.read().decode("latin-1").split("\r\n"):
                    if ":" in line and not line.startswith("HTTP/"):
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
        data = b""
        if os.path.exists(body):
            with open(body, "rb") as f:
                data = f.read()
        code = p.stdout.decode().strip()
        return Response(int(code) if code.isdigit() else 0, headers, data,
                        p.returncode, p.stderr.decode())


class Proc:
    """A child process whose stderr lines are collected as they come."""

    def __init__(self, argv, env=None, stdin=True, stdout_lines=False):
        """stdin=True keeps a pipe to the child's stdin (self.p.stdin);
        stdout lines are collected when there is none, or stdout_lines."""
        e = dict(os.environ)
        for k in list(e):
            if k.startswith("PULLPROF_") or k == "LD_PRELOAD":
                del e[k]
        e.update(env or {})
        self.p = subprocess.Popen(
            argv, env=e, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.pid = self.p.pid
        self.err_lines = []
        self.out_lines = []
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._eof = set()  # ids of the line lists whose stream ended
        self._pumps = [threading.Thread(target=self._pump,
                                        args=(self.p.stderr, self.err_lines),
                                        daemon=True)]
        if not stdin or stdout_lines:
            self._pumps.append(threading.Thread(
                target=self._pump, args=(self.p.stdout, self.out_lines),
                daemon=True))
        for t in self._pumps:
            t.start()

    def _pump(self, stream, into):
        for line in stream:
            with self._cv:
                into.append(line.decode("utf-8", "replace").rstrip("\n"))
                self._cv.notify_all()
        with self._cv:
            self._eof.add(id(into))
            self._cv.notify_all()

    def ask(self, line, timeout=15):
        """Write one command line to the child's stdin (None: write
        nothing) and read its one-line answer from its stdout; None when
        none came in time. For a child whose stdout lines are not
        collected (stdin=True, stdout_lines=False)."""
        if line is not None:
            self.p.stdin.write((line + "\n").encode())
            self.p.stdin.flush()
        got = {}

        def read():
            got["line"] = self.p.stdout.readline().decode().strip()
        t = threading.Thread(target=read, daemon=True)
        t.start()
        t.join(timeout)
        return got.get("line")

    def wait_line(self, lines, pattern, timeout=10):
        """Wait until a line of `lines` matches pattern; returns the match."""
        deadline = time.time() + timeout
        rx = re.compile(pattern)
        with self._cv:
            while True:
                for line in lines:
                    m = rx.search(line)
                    if m:
                        return m
                left = deadline - time.time()
                # Give up at the deadline, or once the stream has ended
                # (every line it will ever have is here).
                if left <= 0 or id(lines) in self._eof:
                    return None
                self._cv.wait(min(left, 0.1))

    def stderr_text(self):
        with self._lock:
            return "\n".join(self.err_lines)

    def threads(self):
        """Names of the process's threads."""
        names = []
        try:
            for tid in os.listdir(f"/proc/{self.pid}/task"):
                try:
                    with open(f"/proc/{self.pid}/task/{tid}/comm") as f:
                        names.append(f.read().strip())
                except OSError:
                    pass
        except OSError:
            pass
        return names

    def thread_ids(self, name):
        out = []
        for tid in os.listdir(f"/proc/{self.pid}/task"):
            try:
                with open(f"/proc/{self.pid}/task/{tid}/comm") as f:
                    if f.read().strip() == name:
                        out.append(int(tid))
            except OSError:
                pass
        return out

    def fds(self):
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def stop(self, sig=signal.SIGTERM, timeout=10):
        if self.p.poll() is None:
            self.p.send_signal(sig)
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.drain()
        return self.p.returncode

    def drain(self, timeout=5):
        """After exit: wait until every output line has been collected."""
        for t in self._pumps:
            t.join(timeout)


class Host(Proc):
    """tests/host: a program linking libpullprof, driven over stdin."""

    def __init__(self, env=None, args=(), exe=None, prefix=()):
        super().__init__([*prefix, exe or HOST, *args], env=env)
        self.ready = self.cmd(None, timeout=60)

    def cmd(self, line, timeout=15):
        if line is not None:
            self.p.stdin.write((line + "\n").encode())
            self.p.stdin.flush()
        result = {}

        def read():
            result["line"] = self.p.stdout.readline().decode().strip()
        t = threading.Thread(target=read, daemon=True)
        t.start()
        t.join(timeout)
        if "line" not in result:
            raise TimeoutError(f"host did not answer {line!r} in {timeout}s")
        return result["line"]

    def start(self, listen="127.0.0.1:0", prefix=None, noenv=False,
              timeout=15):
        """Returns the port, or the 'err ...' line."""
        words = ["start-noenv" if noenv else "start", listen or "-"]
        if prefix is not None:
            words.append(prefix if prefix != "" else '""')
        line = self.cmd(" ".join(words), timeout=timeout)
        if line.startswith("ok "):
            return int(line.split()[1])
        return line

    def alive(self, timeout=20):
        """True when the host's own worker thread is still making progress
        (asked again until it has ticked: on a busy machine it may not have
        run yet)."""
        def ticked():
            line = self.cmd("alive")
            return line.startswith("alive ") and int(line.split()[1]) > 0
        return until(ticked, timeout)

    def quit(self, timeout=10):
        try:
            self.p.stdin.write(b"quit\n")
            self.p.stdin.flush()
        except BrokenPipeError:
            pass
        try:
            return self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            return None


# valgrind memcheck in front of a test program: errors and definite leaks
# make it exit 9; libunwind's address probes are suppressed
# (tests/valgrind.supp says why). valgrind runs one thread at a time; its
# default lock lets a busy thread take it back again and again on a busy
# machine, so the fair (ticket) lock: our hosts have CPU-bound workers,
# and a command thread starved of its turn made a stop take minutes.
MEMCHECK = ["valgrind", "--fair-sched=yes", "--leak-check=full",
            "--show-leak-kinds=definite",
            "--errors-for-leak-kinds=definite", "--error-exitcode=9",
            "--track-fds=no",
            "--suppressions=" + os.path.join(SRC, "tests", "valgrind.supp")]


def memcheck_quit(proc, what, timeout=300):
    """Quit a program run under MEMCHECK and check valgrind's verdict;
    returns valgrind's report."""
    code = proc.quit(timeout=timeout)
    proc.drain()
    report = proc.stderr_text()
    eq(code, 0, f"{what} exits 0 under valgrind (9 would mean errors or leaks)")
    m = re.search(r"ERROR SUMMARY: (\d+) errors", report)
    ok(m and m.group(1) == "0", "memcheck: 0 errors",
       "\n".join(l for l in report.splitlines() if "==" in l)[-3000:])
    return report


def fd_targets(pid):
    """{number: what it names} of pid's open descriptors."""
    out = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out[int(fd)] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            pass
    return out


def raw_http(port, request, timeout=10):
    """Send request (bytes) on a new connection to 127.0.0.1:port and
    read until the server closes it: the answer's bytes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(request)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return data
            data += chunk


def socket_inodes(pid):
    """The inodes of the sockets pid has open."""
    out = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            m = re.match(r"socket:\[(\d+)\]$",
                         os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
        if m:
            out.add(int(m.group(1)))
    return out


def listening_inode(port):
    """The inode of the socket listening on 127.0.0.1:port."""
    with open("/proc/net/tcp") as f:
        for line in f.read().splitlines()[1:]:
            cols = line.split()
            if cols[1] == f"0100007F:{port:04X}" and cols[3] == "0A":
                return int(cols[9])
    return None


def socket_owners(inode):
    """The pids holding the socket with this inode (any process this
    user can read)."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if inode in socket_inodes(int(pid)):
                pids.append(int(pid))
        except OSError:
            continue
    return pids


def threads_cpu(pid, keep):
    """CPU seconds the threads of pid that keep(tid, name) takes used so
    far, by the scheduler's own count (schedstat, in nanoseconds)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            if not keep(int(tid), name):
                continue
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            pass
    return total


def cpu_ticks(pid):
    """utime + stime of a process, in clock ticks (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return 0


def until(pred, timeout=30):
    """Poll pred until it holds (True) or timeout seconds pass (False)."""
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.1)
    return False


def threads_waiting_in(pid, lib):
    """Of pid's threads, those waiting in a system call made from inside the
    library whose path contains lib ("libasan"): [(tid, name)]. From
    /proc/PID/task/TID/syscall (its last field is the user PC) and the
    library's executable mappings in /proc/PID/maps."""
    ranges = []
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6 and lib in parts[5] and "x" in parts[1]:
                    lo, hi = (int(x, 16) for x in parts[0].split("-"))
                    ranges.append((lo, hi))
        out = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/syscall") as f:
                    fields = f.read().split()
                with open(f"/proc/{pid}/task/{tid}/comm") as f:
                    name = f.read().strip()
            except OSError:
                continue
            if len(fields) == 9:
                pc = int(fields[8], 16)
                if any(lo <= pc < hi for lo, hi in ranges):
                    out.append((int(tid), name))
        return out
    except OSError:
        return []


def routes():
    """The agent's routing table as it makes it (the routes of no kind and
    every kind's endpoints): [{"path", "name", "methods", "help"}], from
    tests/settings_dump --routes."""
    return json.loads(subprocess.run(
        [os.path.join(BUILD, "tests", "settings_dump"), "--routes"],
        capture_output=True, text=True, check=True).stdout)


def find_protos():
    """$PP_PERFETTO_PROTOS, or shared/perfetto-protos beside the source tree
    or beside any directory above it (distcheck builds deep inside)."""
    if os.environ.get("PP_PERFETTO_PROTOS"):
        return os.environ["PP_PERFETTO_PROTOS"]
    d = os.path.abspath(SRC)
    while True:
        cand = os.path.join(os.path.dirname(d), "shared", "perfetto-protos")
        if os.path.isdir(cand) or os.path.dirname(d) == d:
            return cand
        d = os.path.dirname(d)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def ipv6_loopback():
    try:
        s = socket.socket(socket.AF_INET6)
        s.bind(("::1", 0))
        s.close()
        return True
    except OSError:
        return False


# --- profiles -------------------------------------------------------------

PROFILE_PROTO_DIR = "/usr/share/gocode/src/github.com/google/pprof/proto"
GO = shutil.which("go") or "/usr/bin/go"


def _parse_text_format(text):
    """protoc's text format -> dict; every field is a list of values (ints,
    strings or dicts), since any field may repeat."""
    root = {}
    stack = [root]
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line == "}":
            stack.pop()
            continue
        if line.endswith("{"):
            name = line[:-1].strip()
            child = {}
            stack[-1].setdefault(name, []).append(child)
            stack.append(child)
            continue
        name, _, value = line.partition(": ")
        if value.startswith('"'):
            v = bytes(value[1:-1], "latin-1").decode("unicode_escape").encode(
                "latin-1").decode("utf-8", "replace")
        elif value in ("true", "false"):
            v = value == "true"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
            v = value  # an enum's name
        else:
            try:
                v = int(value)
            except ValueError:
                v = float(value)
        stack[-1].setdefault(name, []).append(v)
    return root


def decode_profile(data):
    """Decode a profile (gzipped or not) with protoc against the
    profile.proto Debian ships; returns the text-format dict."""
    import gzip
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    p = subprocess.run(
        ["protoc", f"-I{PROFILE_PROTO_DIR}", "--decode=perftools.profiles.Profile",
         "profile.proto"], input=data, capture_output=True, timeout=120)
    if p.returncode != 0:
        raise ValueError("protoc could not decode: " + p.stderr.decode())
    return _parse_text_format(p.stdout.decode("utf-8", "replace"))


class Profile:
    """A decoded profile with the string table and IDs resolved."""

    def __init__(self, data):
        self.raw = decode_profile(data)
        r = self.raw
        self.strings = r.get("string_table", [])
        self.mappings = r.get("mapping", [])
        self.locations = r.get("location", [])
        self.functions = r.get("function", [])
        self.samples = r.get("sample", [])
        self.loc_by_id = {l["id"][0]: l for l in self.locations}
        self.fn_by_id = {f["id"][0]: f for f in self.functions}
        self.map_by_id = {m["id"][0]: m for m in self.mappings}

    def s(self, i):
        return self.strings[i] if i < len(self.strings) else None

    def field(self, msg, name, default=0):
        v = msg.get(name)
        return v[0] if v else default

    def sample_types(self):
        return [(self.s(self.field(t, "type")), self.s(self.field(t, "unit")))
                for t in self.raw.get("sample_type", [])]

    def frames(self, loc):
        """[(function name, system name, file, line, start line)] innermost
        first."""
        out = []
        for ln in loc.get("line", []):
            f = self.fn_by_id[self.field(ln, "function_id")]
            out.append((self.s(self.field(f, "name")),
                        self.s(self.field(f, "system_name")),
                        self.s(self.field(f, "filename")),
                        self.field(ln, "line"),
                        self.field(f, "start_line")))
        return out

    def stack(self, sample):
        """The sample's stack as a list of frame lists, leaf first."""
        return [self.frames(self.loc_by_id[i]) for i in sample.get("location_id", [])]

    def labels(self, sample):
        out = {}
        for l in sample.get("label", []):
            key = self.s(self.field(l, "key"))
            if l.get("str"):
                out[key] = self.s(l["str"][0])
            else:
                out[key] = (self.field(l, "num"), self.s(self.field(l, "num_unit")))
        return out


def by_function(prof, type_name, want=None):
    """Cumulative value of each function for one sample type (a function
    counted once per sample however often it appears in the stack); want:
    only the samples it passes."""
    idx = [t for t, _ in prof.sample_types()].index(type_name)
    out = {}
    for s in prof.samples:
        if want and not want(s):
            continue
        for n in {f[0] for loc in prof.stack(s) for f in loc}:
            out[n] = out.get(n, 0) + s["value"][idx]
    return out


def check_near(got, want, pct, name):
    """got within pct percent of want (printed either way)."""
    print(f"# {name}: {got} of {want} "
          f"({(got - want) * 100 / want if want else 0:+.1f}%)")
    return ok(want and abs(got - want) <= want * pct / 100, name,
              f"got {got} want {want} "
              f"({(got - want) * 100 / want if want else 0:+.1f}%)")


def check_mapped(prof, what):
    """Every location names a mapping of the table (Grafana Pyroscope's
    symbolizer refuses a whole profile with one mapping_id 0), and
    pullprof's synthetic frames ("[pullprof: ...]") are in a mapping of
    their own, "[pullprof]", which claims its functions (so no symbolizer
    works on it). Returns the synthetic names found."""
    bad = [(l["id"][0], prof.field(l, "mapping_id")) for l in prof.locations
           if prof.field(l, "mapping_id") not in prof.map_by_id]
    eq(bad[:10], [], f"{what}: every location's mapping_id is in the "
       "mapping table")
    ids = [m["id"][0] for m in prof.mappings]
    eq(ids, list(range(1, len(ids) + 1)), f"{what}: mapping IDs 1..N in order")
    names, homes = set(), set()
    for l in prof.locations:
        fr = prof.frames(l)
        if len(fr) == 1 and fr[0][0].startswith("[pullprof:"):
            names.add(fr[0][0])
            m = prof.map_by_id.get(prof.field(l, "mapping_id"), {})
            homes.add((prof.s(prof.field(m, "filename")),
                       prof.field(m, "has_functions", False)))
    if names:
        eq(homes, {("[pullprof]", True)}, f"{what}: synthetic frames are in "
           "the mapping [pullprof], which has its functions")
    bad = [n for n in names if set(n) & set("()<>")]
    eq(bad, [], f"{what}: no synthetic name holds what pprof cuts from "
       "function names (parentheses, angle brackets)")
    return names


def go_pprof(*args, timeout=120):
    """Run `go tool pprof` with a private HOME (it writes ~/pprof) and no
    binaries to find: what it shows comes from the profile alone."""
    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, HOME=home, PPROF_TMPDIR=home,
                   PPROF_BINARY_PATH="/nonexistent")
        p = subprocess.run([GO, "tool", "pprof", *args], capture_output=True,
                           timeout=timeout, env=env)
        return p.returncode, p.stdout.decode("utf-8", "replace"), \
            p.stderr.decode("utf-8", "replace")


def source_line(path, marker):
    """The 1-based line of `marker` in a source file."""
    with open(path) as f:
        for i, line in enumerate(f, 1):
            if marker in line:
                return i
    raise ValueError(f"{marker} not in {path}")


def elf_build_id(path):
    """The GNU build ID of an ELF file, as readelf prints it."""
    p = subprocess.run(["readelf", "-n", path], capture_output=True, text=True)
    m = re.search(r"Build ID: ([0-9a-f]+)", p.stdout)
    return m.group(1) if m else None


HEAPWORK = os.path.join(BUILD, "tests", "heap", "heapwork")


class Served(Host):
    """A host whose agent starts at load and says so on stderr
    ("serving http://127.0.0.1:PORT/debug/pprof/"): a subclass calls
    served() once its process runs; port is None when it never said so."""

    def served(self, timeout=30):
        m = self.wait_line(self.err_lines,
                           r"serving http://127\.0\.0\.1:(\d+)/debug/pprof/",
                           timeout=timeout)
        self.port = int(m.group(1)) if m else None

    def url(self, path):
        return f"http://127.0.0.1:{self.port}/debug/pprof/{path}"

    def get(self, path, *args, timeout=60):
        return curl(self.url(path), *args, timeout=timeout)

    def status(self):
        r = self.get("status")
        return r.json() if r.status == 200 else {}


class Work(Host):
    """tests/heap/heapwork: the heap tests' host, driven on stdin."""

    def __init__(self, env=None, preload=None, prefix=()):
        e = {"PULLPROF_LISTEN": "127.0.0.1:0", **(env or {})}
        if preload:
            e["LD_PRELOAD"] = preload
        super().__init__(env=e, exe=HEAPWORK, prefix=prefix)
        m = re.match(r"port (\d+)", self.ready)
        self.port = int(m.group(1)) if m else None

    def url(self, path):
        return f"http://127.0.0.1:{self.port}/debug/pprof/{path}"

    def get(self, path, timeout=60):
        return curl(self.url(path), timeout=timeout)

    def profile(self, path="heap"):
        r = self.get(path)
        if r.status != 200:
            raise AssertionError(f"{path}: {r.status} {r.body[:300]!r}")
        return Profile(r.body)


LABELWORK = os.path.join(BUILD, "tests", "labels", "labelwork")


class Labelwork(Host):
    """tests/labels/labelwork: a server of labelled requests (profile
    labels, scrapers), driven on stdin; it starts the agent itself."""

    def __init__(self, env=None):
        e = {"PULLPROF_LISTEN": "127.0.0.1:0", **(env or {})}
        super().__init__(env=e, exe=LABELWORK)
        m = re.match(r"port (\d+)", self.ready)
        self.port = int(m.group(1)) if m else None

    def url(self, path):
        return f"http://127.0.0.1:{self.port}/debug/pprof/{path}"


def cpu_sample_counts(port):
    """The agent's CPU signals so far and the timer periods they stood for
    (/status cpu.samples, cpu.samples_weighted)."""
    c = curl(f"http://127.0.0.1:{port}/debug/pprof/status").json()["cpu"]
    return c["samples"], c["samples_weighted"]


def periods_per_signal(before, after):
    """Timer periods one signal stood for between two cpu_sample_counts,
    at least 1. Above the kernel's tick rate (CONFIG_HZ=250 on Debian) a
    per-thread timer fires at ticks and a signal carries its overruns, so
    a profile's period count overstates its independent draws."""
    signals = after[0] - before[0]
    return max(1.0, (after[1] - before[1]) / signals) if signals > 0 else 1.0


def text_range(pid, lib="libc.so"):
    """(start, end) of the first executable mapping of lib in pid."""
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            col = line.split()
            if len(col) >= 6 and "x" in col[1] and lib in col[5]:
                lo, hi = (int(v, 16) for v in col[0].split("-"))
                return lo, hi
    raise RuntimeError(f"no executable mapping of {lib} in {pid}")

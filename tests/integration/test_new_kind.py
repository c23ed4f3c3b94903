"""A new kind of profile is a folder and a row. tests/kinds/fd.patch adds
one, /debug/pprof/fd (the process's open descriptors by what they are), to
a copy of the source tree, as a contributor would (HACKING.md, "Adding a
kind of profile"). The test counts the files the patch touches outside the
kind's folder (at most 8, none in src/server/ or src/api/), builds the
copy, and asks the new endpoint over real HTTP in a preloaded python3: a
pprof profile protoc and go tool pprof read, with the descriptors the host
opened; its change over seconds=N; its 400s; its place among /status's
kinds (the viewer's list) and on the index page; and the copy's own docs
checks for every endpoint."""
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time

import pptest
from pptest import (SRC, Profile, Served, curl, eq, go_pprof, ok, preload_env,
                    run)

PATCH = os.path.join(SRC, "tests", "kinds", "fd.patch")
FOLDER = "src/fd/"
state = {}


def copy_tree(dest):
    """The files of the source tree: what git tracks (and what is new and
    not ignored) in a checkout, else the whole tree (make distcheck's
    unpacked tarball, which holds no build)."""
    if os.path.isdir(os.path.join(SRC, ".git")) or os.path.isfile(
            os.path.join(SRC, ".git")):
        files = subprocess.run(
            ["git", "-C", SRC, "ls-files", "-co", "--exclude-standard", "-z"],
            capture_output=True, check=True).stdout.split(b"\0")
        for f in files:
            f = f.decode()
            src = os.path.join(SRC, f)
            if not f or not os.path.isfile(src):
                continue
            os.makedirs(os.path.dirname(os.path.join(dest, f)), exist_ok=True)
            shutil.copy2(src, os.path.join(dest, f))
    else:
        shutil.copytree(SRC, dest, dirs_exist_ok=True, symlinks=True)


def test_patch():
    with open(PATCH) as f:
        text = f.read()
    touched = sorted(set(re.findall(r"^\+\+\+ b/(\S+)", text, re.M)))
    ok(f"{FOLDER}kind.c" in touched, "the patch adds the kind's folder",
       touched)
    outside = [t for t in touched if not t.startswith(FOLDER)]
    print(f"# files outside {FOLDER}: {', '.join(outside)}", flush=True)
    ok(len(outside) <= 8, "it touches at most 8 files outside its folder",
       outside)
    eq([t for t in outside if t.startswith(("src/server/", "src/api/"))],
       [], "none of the HTTP server's (src/server/) or the other "
       "endpoints' (src/api/)")
    d = tempfile.mkdtemp(prefix="pp-newkind-")
    state["dir"] = d
    copy_tree(d)
    p = subprocess.run(["patch", "-p1", "-s", "--no-backup-if-mismatch",
                        "-d", d, "-i", PATCH], capture_output=True, text=True)
    ok(p.returncode == 0, "it applies to this tree (adding a kind needs no "
       "other edit)", p.stdout + p.stderr)


def test_build():
    d = state.get("dir")
    if not d:
        return ok(False, "the copy is there to build")
    t0 = time.time()
    steps = [["autoreconf", "-fi"], ["./configure", "--quiet"],
             ["make", f"-j{os.cpu_count() or 2}", "libpullprof.la",
              "libpullprof-agent.la", "tests/settings_dump"]]
    for argv in steps:
        p = subprocess.run(argv, cwd=d, capture_output=True, text=True,
                           timeout=2400)
        if p.returncode != 0:
            return ok(False, f"the copy builds: {' '.join(argv)}",
                      (p.stdout + p.stderr)[-3000:])
    print(f"# the copy built in {time.time() - t0:.0f} s", flush=True)
    lib = os.path.join(d, ".libs", "libpullprof.so")
    ok(os.path.exists(lib), "the copy builds libpullprof.so", lib)
    state["lib"] = lib


class FdHost(Served):
    """python3 (Debian's, unmodified) with the copy's agent preloaded: it
    opens PIPES pipes and SOCKS sockets, says "ready", and on a line
    "more" opens MORE more pipes; any other line ends it."""
    PIPES, SOCKS, MORE = 5, 3, 7
    CODE = f"""
import os, socket, sys
pipes = [os.pipe() for _ in range({PIPES})]
socks = [socket.socket() for _ in range({SOCKS})]
print("ready", flush=True)
more = []
for line in sys.stdin:
    if line.strip() != "more":
        break
    more += [os.pipe() for _ in range({MORE})]
    print("opened", flush=True)
"""

    def __init__(self, lib):
        env = preload_env(lib, PULLPROF_LISTEN="127.0.0.1:0")
        pptest.Proc.__init__(self, ["python3", "-c", self.CODE], env=env,
                             stdout_lines=True)
        self.served()

    def say(self, line, want):
        self.p.stdin.write((line + "\n").encode())
        self.p.stdin.flush()
        return self.wait_line(self.out_lines, want, timeout=60)


def fd_counts(prof):
    """{"[fd: pipe]": n, ...} of a decoded profile."""
    out = {}
    for s in prof.samples:
        names = [f[0][0] for f in prof.stack(s) if f]
        out[names[0] if names else "?"] = out.get(
            names[0] if names else "?", 0) + s["value"][0]
    return out


def test_endpoint():
    lib = state.get("lib")
    if not lib:
        return ok(False, "the copy's library is there to preload")
    h = FdHost(lib)
    ok(h.port, "the copy's agent serves in python3", h.stderr_text())
    if not h.port:
        h.stop()
        return
    ok(h.wait_line(h.out_lines, "^ready$", timeout=60), "the host is ready")
    r = h.get("fd")
    eq(r.status, 200, "/debug/pprof/fd: 200")
    eq(r.headers.get("content-type"), "application/octet-stream",
       "a pprof profile")
    prof = Profile(r.body)
    eq(prof.sample_types(), [("descriptors", "count")],
       "its sample type: descriptors/count")
    before = fd_counts(prof)
    pipes = len([t for t in pptest.fd_targets(h.pid).values()
                 if t.startswith("pipe:")])
    # Each pipe is two descriptors; the agent's own pipes count too, and
    # /proc/PID/fd read now is what the profile read then.
    ok(before.get("[fd: pipe]") == pipes, "[fd: pipe] counts the host's "
       f"pipe descriptors ({pipes} in /proc/PID/fd)", before)
    ok(before.get("[fd: pipe]", 0) >= 2 * FdHost.PIPES,
       "the python3 host's own pipes are among them", before)
    ok(before.get("[fd: socket]", 0) >= FdHost.SOCKS + 1,
       "[fd: socket]: its sockets and the agent's listening one", before)
    rc, out, err = go_pprof("-top", h.url("fd"))
    ok(rc == 0 and "[fd: pipe]" in out, "go tool pprof reads it from the "
       "agent", out + err)

    # The change over a window: seconds=N, and the host opens more pipes
    # inside it. The window's start is counted when its job opens, before
    # the connection waits: the host is told once /status shows it waiting
    # (a 20 s window, long past that on a loaded machine).
    res = {}
    t = threading.Thread(target=lambda: res.setdefault(
        "r", curl(h.url("fd?seconds=20"), timeout=180)), daemon=True)
    t.start()
    ok(pptest.until(lambda: h.get("status").json()["connections"][
        "waiting"] >= 1, timeout=60), "the window is open (its connection "
       "waits)")
    ok(h.say("more", "^opened$"), f"the host opens {FdHost.MORE} more pipes")
    t.join(120)
    r = res.get("r")
    eq(r and r.status, 200, "/fd?seconds=20: 200")
    if r and r.status == 200:
        delta = fd_counts(Profile(r.body))
        # (Sockets come and go with the connections to the agent; the
        # host's pipes are its own.)
        ok(delta.get("[fd: pipe]") == 2 * FdHost.MORE,
           f"the window's change: the {2 * FdHost.MORE} pipe descriptors "
           "opened inside it", delta)

    # Bad input: 400 with a sentence, the agent serving on.
    for q, want in (("seconds=x", "seconds"), ("last=5", "does not apply"),
                    ("debug=1", "debug"), ("sample_index=nope",
                                           "sample_index")):
        r = h.get(f"fd?{q}")
        eq(r.status, 400, f"/fd?{q}: 400")
        ok(want in r.text, f"/fd?{q}: says what is wrong", r.text)

    st = h.get("status").json()
    kinds = {k["name"]: k["profiles"] for k in st.get("kinds", [])}
    ok(kinds.get("fd") == ["fd"], "/status lists the kind and its profile "
       "(the viewer's list of kinds)", kinds)
    by = st.get("requests", {}).get("by_endpoint", {})
    ok(by.get("fd", {}).get("2xx", 0) >= 2 and by["fd"].get("4xx", 0) >= 4,
       "its requests are counted under its name", by.get("fd"))
    idx = h.get("")
    ok('href="fd"' in idx.text and "open descriptors" in idx.text,
       "the index page lists it with its help")
    r = h.get("fd?id=1")
    ok(r.status in (200, 404), "?id= is answered (kept or not)", r.status)
    h.p.stdin.write(b"end\n")
    h.p.stdin.flush()
    eq(h.p.wait(60), 0, "the host exits 0")
    h.drain()


def test_docs_of_copy():
    """The copy's own docs checks, whose endpoint list is its new table:
    the README's endpoint table, docs/endpoints.md and pullprof(7) each
    name /fd (the patch's three doc edits)."""
    d = state.get("dir")
    if not state.get("lib"):
        return ok(False, "the copy is built")
    p = subprocess.run(
        ["python3", os.path.join(d, "tests", "integration", "test_docs.py")],
        cwd=d, capture_output=True, text=True, timeout=600,
        env=dict(os.environ, PP_SRCDIR=d, PP_BUILDDIR=d,
                 PP_ONLY="test_endpoints"))
    bad = [line for line in p.stdout.splitlines() if line.startswith("not ok")]
    eq(bad, [], "the copy's docs checks pass for every endpoint")
    ok("/fd: a row in the README's endpoint table" in p.stdout,
       "they checked /fd", p.stdout[-2000:])
    shutil.rmtree(d, ignore_errors=True)


run([test_patch, test_build, test_endpoint, test_docs_of_copy])

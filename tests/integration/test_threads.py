"""Where threads wait: the thread dump (/goroutine) and the wall-clock
profile (/wall, /debug/fgprof), read from real processes
(tests/threads/waiters) over real HTTP, decoded with protoc and go tool
pprof. Threads blocked in seven known calls are found there with the
function and line they block at; threads looping on the calls signal(7)
says a handler interrupts see no EINTR and no early return through a 10 s
wall profile at the highest rate and 100 thread dumps (and do see them when
signalled: the control); the wall profile splits a thread's time between a
sleep and a burn as it is spent."""
import ctypes
import os
import re
import threading
import time
from collections import Counter

import pptest
from pptest import (BUILD, SRC, Proc, Profile, curl, eq, free_port, go_pprof,
                    ok, preload_env, run, sanitized, skip)

WAITERS = os.path.join(BUILD, "tests", "threads", "waiters")
WAITERS_C = os.path.join(SRC, "tests", "threads", "waiters.c")
KINDS = ["wait_condvar", "wait_epoll", "wait_pipe", "wait_nanosleep",
         "wait_sem", "wait_join", "wait_mutex"]


def start(args, env=None):
    p = Proc([WAITERS] + [str(a) for a in args],
             env={"PULLPROF_LISTEN": "127.0.0.1:0", **(env or {})},
             stdout_lines=True)
    port = int(p.wait_line(p.out_lines, r"^port (\d+)", timeout=120).group(1))
    return p, port


def url(port, path):
    return f"http://127.0.0.1:{port}/debug/pprof/{path}"


def status(port):
    return curl(url(port, "status")).json()


def tids(pid):
    return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))


HEAD = re.compile(r'^thread (\d+) "(.*)" \[([^\],]+)(?:, in ([^\]]*))?\]'
                  r"( \(pullprof's own\))?:$")


def parse_dump(text):
    """debug=2 blocks: [{tid, name, state, call, agent, wchan, stack:
    [(function, file, line)]}] in order."""
    out = []
    for block in text.strip("\n").split("\n\n"):
        lines = block.split("\n")
        m = HEAD.match(lines[0])
        if not m:
            raise ValueError(f"not a thread header: {lines[0]!r}")
        t = {"tid": int(m.group(1)), "name": m.group(2),
             "state": m.group(3), "call": m.group(4) or "",
             "agent": bool(m.group(5)), "wchan": "", "stack": []}
        fn = None
        for ln in lines[1:]:
            if ln.startswith("    wchan: "):
                t["wchan"] = ln[11:]
            elif ln.startswith("    "):
                continue
            elif ln.startswith("\t"):
                fm = re.match(r"\t(?:(.*):(\d+) )?\((0x[0-9a-f]+)", ln)
                if fm and fn is not None:
                    t["stack"].append((fn, fm.group(1) or "",
                                       int(fm.group(2) or 0)))
                fn = None
            elif ln.endswith("()"):
                fn = ln[:-2]
            else:
                t["stack"].append((ln, "", 0))  # a synthetic frame
        out.append(t)
    return out


def expected_counts(n):
    c = Counter(KINDS[i % 7] for i in range(n))
    c["wait_condvar"] += c["wait_join"]  # each joined thread waits there
    return c


def test_dump_every_thread():
    n = 200
    p, port = start(["dump", n])
    lines = {}
    # The host starts 200 threads first: under TSan beside the other
    # builds' suites that took over a minute (a wait, not a measure).
    for k in KINDS:
        m = p.wait_line(p.out_lines, rf"^line {k} (\d+)", timeout=300)
        if not m:
            ok(False, "the dump host says where its threads wait",
               p.out_lines[-5:])
            p.stop()
            return
        lines[k] = int(m.group(1))
    m = p.wait_line(p.out_lines, r"^line in_handler (\d+)", timeout=300)
    handler_line = int(m.group(1))
    p.wait_line(p.out_lines, r"^ready", timeout=300)
    # A CPU window runs meanwhile: the dump does not wait for it.
    cpu = {}
    bg = threading.Thread(target=lambda: cpu.setdefault(
        "r", curl(url(port, "profile?seconds=3&hz=200"), timeout=60)))
    bg.start()
    deadline = time.time() + 30
    while status(port)["cpu"]["windows_open"] < 1 and time.time() < deadline:
        time.sleep(0.05)
    # A running thread is read from a one-shot sample taken when it is
    # next on a CPU; on a machine whose cores are busy with other work it
    # may not get one before the dump's deadline, and the dump says so
    # (a synthetic frame) rather than wait. The state needed here is a
    # dump that caught the spinner on a CPU: asked again until it does.
    for attempt in range(8):
        r = curl(url(port, "goroutine?debug=2"), timeout=60)
        dump = parse_dump(r.body.decode()) if r.status == 200 else []
        if not any(f[0].startswith("[pullprof: running; not on a CPU")
                   for t in dump for f in t["stack"]):
            break
    eq(r.status, 200, "debug=2: 200")
    eq(r.headers.get("content-type", "").split(";")[0], "text/plain",
       "debug=2 is text")
    live = tids(p.pid)
    eq(sorted(t["tid"] for t in dump), live,
       f"debug=2: one block per thread of the process ({len(live)})")
    found = Counter()
    wrong = []
    for t in dump:
        for k in KINDS:
            at = [f for f in t["stack"] if f[0] == k]
            if not at:
                continue
            if k == "wait_condvar" or not any(f[0] == "wait_condvar"
                                              for f in t["stack"]):
                found[k] += 1
                f = at[0]
                if not f[1].endswith("waiters.c") or f[2] != lines[k]:
                    wrong.append((t["tid"], k, f))
                if t["state"] != "sleeping":
                    wrong.append((t["tid"], k, t["state"]))
            break
    want = expected_counts(n)
    eq(dict(found), dict(want), "every blocked thread found in its "
       "function (condvar wait, epoll_wait, pipe read, nanosleep, "
       "sem_wait, pthread_join, a held mutex)")
    eq(wrong, [], "each at its blocking line of waiters.c, state sleeping")
    calls = Counter(t["call"].split("(")[0] for t in dump
                    if any(f[0] == "wait_epoll" for f in t["stack"]))
    eq(list(calls), ["epoll_wait"], "debug=2 names the system call each "
       "waits in")
    spin = [t for t in dump if any(f[0] == "spin_forever"
                                   for f in t["stack"])]
    ok(len(spin) == 1 and spin[0]["state"] == "running",
       "the spinning thread: running, in spin_forever (sampled, not "
       "signalled)", [(t["state"], t["stack"][:3]) for t in spin])
    # Through the kernel's signal frame: the handler's caller is the code
    # the signal interrupted, and the walk goes on to the thread's start.
    inh = [t for t in dump if any(f[0] == "in_handler" for f in t["stack"])]
    names = [f[0] for f in inh[0]["stack"]] if len(inh) == 1 else []
    at = [f for f in inh[0]["stack"] if f[0] == "in_handler"] if inh else []
    ok(len(inh) == 1 and inh[0]["state"] == "sleeping" and
       at[0][1].endswith("waiters.c") and at[0][2] == handler_line and
       "interrupted" in names and
       names.index("interrupted") > names.index("in_handler") and
       names[-1] in ("__clone3", "_start"),
       "a thread blocked in a signal handler: the handler at its line, "
       "then through the signal frame to the interrupted function and the "
       "thread's start", [(t["state"], t["stack"]) for t in inh])
    agents = sorted(t["name"] for t in dump if t["agent"])
    ok("pullprof-http" in agents and "pullprof-jobs" in agents,
       "the agent's threads are marked", agents)
    # Under ThreadSanitizer the signal that takes a stack is handled at
    # TSan's own safe points: a thread caught inside TSan's runtime (a
    # __tsan_ leaf) hands over a context whose walk may stop short.
    short = [(t["tid"], t["name"], t["state"], t["stack"][:4]) for t in dump
             if not t["stack"] or
             (t["stack"][-1][0] not in ("__clone3", "_start") and
              not (pptest.SANITIZER == "tsan" and
                   t["stack"][0][0].startswith("__tsan_")))]
    eq(short, [], "every stack reaches its thread's outermost frame")
    bg.join()
    eq(cpu["r"].status, 200, "a CPU window alongside: 200")

    # pprof: one sample per (stack, labels), counted.
    r = curl(url(port, "goroutine"), timeout=60)
    eq(r.status, 200, "pprof: 200")
    prof = Profile(r.body)
    eq(prof.sample_types(), [("goroutine", "count")],
       "pprof: Go's goroutine sample type")
    pptest.check_mapped(prof, "thread dump")
    total = sum(int(s["value"][0]) for s in prof.samples)
    eq(total, len(tids(p.pid)), "pprof: the counts add up to the threads")
    per = Counter()
    for s in prof.samples:
        names = [f[0] for fs in prof.stack(s) for f in fs]
        lab = prof.labels(s)
        for k in KINDS:
            if k in names and (k == "wait_condvar"
                               or "wait_condvar" not in names):
                per[k] += int(s["value"][0])
                ok(lab.get("state") == "sleeping" and
                   lab.get("thread_name") == "waiters",
                   f"pprof: {k} labelled state and thread_name", lab)
                break
    eq(dict(per), dict(want), "pprof: the same counts per function")

    # debug=1: Go's grouped text.
    r = curl(url(port, "goroutine?debug=1"), timeout=60)
    text = r.body.decode()
    ok(text.startswith(f"goroutine profile: total {len(tids(p.pid))}\n"),
       "debug=1: Go's header with the total", text[:80])
    groups = re.findall(r"\n(\d+) @ [0-9a-fx ]+\n# labels: .*\n((?:#\t.*\n)+)",
                        text)
    epoll = [int(c) for c, body in groups if "\twait_epoll\t" in body]
    eq(epoll, [want["wait_epoll"]], "debug=1: the epoll waiters in one "
       "group with their count")
    ok(f"waiters.c:{lines['wait_epoll']}" in text,
       "debug=1: file:line of each frame")

    # go tool pprof, no binaries at hand.
    with open("/tmp/pp_goroutine.pb", "wb") as f:
        f.write(curl(url(port, "goroutine"), timeout=60).body)
    rc, out, err = go_pprof("-top", "-tagfocus=state=sleeping",
                            "/tmp/pp_goroutine.pb")
    ok(rc == 0 and "wait_epoll" not in out.split("flat%")[0] and
       "epoll_wait" in out, "go tool pprof -top -tagfocus reads it",
       out[-800:] + err[-400:])
    rc, out, err = go_pprof("-traces", "/tmp/pp_goroutine.pb")
    ok(rc == 0 and "wait_sem" in out and "state:sleeping" in
       out.replace(" ", "").replace("[", "").replace("]", ""),
       "go tool pprof -traces shows the stacks and labels", err[-400:])
    os.unlink("/tmp/pp_goroutine.pb")

    # seconds=N: the change, as Go's delta profiles.
    res = {}
    bg = threading.Thread(target=lambda: res.setdefault(
        "r", curl(url(port, "goroutine?seconds=3"), timeout=60)))
    bg.start()
    deadline = time.time() + 30
    while status(port)["threads"]["dumps_open"] < 1 and \
            time.time() < deadline:
        time.sleep(0.05)
    p.p.stdin.write(b"more 5\n")
    p.p.stdin.flush()
    p.wait_line(p.out_lines, r"^more ready", timeout=30)
    bg.join()
    eq(res["r"].status, 200, "seconds=3: 200")
    prof = Profile(res["r"].body)
    delta = Counter()
    for s in prof.samples:
        names = [f[0] for fs in prof.stack(s) for f in fs]
        delta["wait_nanosleep" if "wait_nanosleep" in names else
              "other"] += int(s["value"][0])
    eq(delta["wait_nanosleep"], 5, "seconds=3: five more threads in "
       "wait_nanosleep than at the start")

    st = status(port)["threads"]
    ok(st["looks"]["blocked"] >= n and st["looks"]["running"] >= 1 and
       st["dumps"] >= 4, "status counts the dumps and how threads were "
       "read", st)
    ok(st["perf_event"].startswith("ok"), "status: perf_event sampling "
       "works here", st["perf_event"])
    p.stop()


def tgkill_all(pid, rounds, sig=12):
    libc = ctypes.CDLL(None, use_errno=True)
    sent = 0
    for _ in range(rounds):
        for t in tids(pid):
            if libc.syscall(234, pid, t, sig) == 0:
                sent += 1
        time.sleep(0.005)
    return sent


def eintr_result(p):
    p.p.stdin.write(b"stop\n")
    p.p.stdin.flush()
    m = p.wait_line(p.out_lines, r"^calls (\d+) bad (\d+) timer_early "
                    r"(\d+)", timeout=60)
    p.wait_line(p.out_lines, r"^done", timeout=30)
    if int(m.group(3)):
        # Socket timeouts the kernel's tick count ended early (waiters.c
        # says why that is not a signal's doing): shown, not counted.
        print(f"# {m.group(3)} socket timeouts ended early by the tick "
              "count, with EAGAIN (not a signal's EINTR)")
    bad = [ln for ln in p.out_lines if ln.startswith("bad:")]
    return int(m.group(1)), int(m.group(2)), bad


def test_never_interrupts():
    p, port = start(["eintr"])
    p.wait_line(p.out_lines, r"^ready", timeout=30)
    res = {}
    wall = threading.Thread(target=lambda: res.setdefault(
        "r", curl(url(port, "wall?seconds=10&hz=1000"), timeout=90)))
    wall.start()
    codes = Counter()
    for _ in range(100):
        codes[curl(url(port, "goroutine?debug=2"), timeout=60).status] += 1
    wall.join()
    eq(dict(codes), {200: 100}, "100 back-to-back thread dumps: 200")
    eq(res["r"].status, 200, "the 10 s wall profile at 1000 Hz: 200")
    st = status(port)["threads"]
    calls, bad, lines = eintr_result(p)
    ok(calls > 2000, f"the threads made their calls ({calls})")
    eq(bad, 0, "no call returned EINTR or early: nanosleep, "
       "clock_nanosleep, usleep, poll, ppoll, select, pselect, epoll_wait, "
       "epoll_pwait, recv, recvfrom, recvmsg and accept with SO_RCVTIMEO, "
       "sem_timedwait, semtimedop, msgrcv, sigtimedwait, io_getevents, "
       "pthread_cond_timedwait")
    ok(not lines, "no bad return reported", lines[:10])
    ok(st["looks"]["blocked"] > 1000 and st["wall"]["ticks"] > 100,
       "they were looked at meanwhile (blocked ones read from outside)", st)
    p.stop()

    # The control: the same checks see what a signal does.
    p, port = start(["eintr"])
    p.wait_line(p.out_lines, r"^ready", timeout=30)
    sent = tgkill_all(p.pid, 100)
    calls, bad, lines = eintr_result(p)
    ok(sent > 1000 and bad > 0, f"control: {sent} SIGUSR2 with an "
       f"SA_RESTART handler make {bad} of {calls} calls fail or return "
       "early", lines[:5])
    p.stop()


def shares(prof, index, thread_fn):
    """Wall time under each of the functions in thread_fn, and by state."""
    by_fn, by_state = Counter(), Counter()
    for s in prof.samples:
        names = [f[0] for fs in prof.stack(s) for f in fs]
        v = int(s["value"][index])
        for fn in thread_fn:
            if fn in names:
                by_fn[fn] += v
                by_state[(fn, prof.labels(s).get("state"))] += v
    return by_fn, by_state


def nap_times(p):
    """The wall time the host measured in nap() and burn() so far, and of
    nap()'s, how long its thread was runnable, waiting for a CPU."""
    n = len([ln for ln in p.out_lines if ln.startswith("times ")])
    p.p.stdin.write(b"times\n")
    p.p.stdin.flush()
    deadline = time.time() + 30
    while time.time() < deadline:
        got = [ln for ln in p.out_lines if ln.startswith("times ")]
        if len(got) > n:
            _, a, b, c = got[n].split()
            return int(a), int(b), int(c)
        time.sleep(0.02)
    raise TimeoutError("no times line")


def test_wall_accuracy():
    p, port = start(["nap", 10])
    p.wait_line(p.out_lines, r"^ready", timeout=30)
    seconds = 6
    # The host's clock is read once the window ticks (/status) and once it
    # has answered: on a loaded machine the request's setup alone took
    # seconds, when nap() and burn() shared the CPU otherwise than inside
    # the window (28.7% against 23.1% over the whole round trip at load 8).
    res = {}
    t = threading.Thread(target=lambda: res.setdefault("r", curl(
        url(port, f"wall?seconds={seconds}&hz=200"), timeout=90)),
        daemon=True)
    t.start()
    ok(pptest.until(lambda: status(port)["threads"]["wall"]["ticks"] > 0,
                    timeout=60), "the window ticks")
    n0, b0, w0 = nap_times(p)
    t.join(120)
    n1, b1, w1 = nap_times(p)
    r = res.get("r")
    eq(r and r.status, 200, "wall: 200")
    if not r or r.status != 200:
        p.stop()
        return
    prof = Profile(r.body)
    eq(prof.sample_types(), [("samples", "count"), ("wall", "nanoseconds")],
       "wall: samples and wall nanoseconds")
    pptest.check_mapped(prof, "wall")
    by_fn, by_state = shares(prof, 1, ["nap", "burn"])
    tot = by_fn["nap"] + by_fn["burn"]
    nap = 100.0 * by_fn["nap"] / tot if tot else 0
    truth = 100.0 * (n1 - n0) / ((n1 - n0) + (b1 - b0))
    # A sanitizer build on a busy machine delays the sampler's ticks and
    # the host's own clock reads unevenly (ThreadSanitizer beside two busy
    # loops: 26.2% against 19.5%), and so does a plain build on a machine
    # loaded past its cores (load 10 on 2: 23.7% against 18.6%): 10 points
    # there, 5 otherwise.
    load = os.getloadavg()[0]
    tol = 5 if not sanitized() and load <= (os.cpu_count() or 1) else 10
    ok(abs(nap - truth) <= tol, f"nap() has {nap:.1f}% of the thread's wall "
       f"time in the profile, {truth:.1f}% by the host's clock (+- {tol}; 50 "
       f"on an idle machine; load {load:.1f})", by_fn)
    # A nap's end waits for a CPU on a busy machine: runnable, still in
    # nap(), and shown so. How long is the host's to say: its thread's
    # run_delay in nap() (a machine at load 15 had nap() 59% runnable,
    # and a fixed bound of "mostly sleeping" failed where the profile
    # told the truth). The share shown running is that, within 15 points.
    waiting = 100.0 * (w1 - w0) / (n1 - n0) if n1 > n0 else 0
    running = (100.0 * by_state[("nap", "running")] / by_fn["nap"]
               if by_fn["nap"] else 100)
    ok(abs(running - waiting) <= 15 and
       by_state[("burn", "running")] >= 0.95 * by_fn["burn"],
       f"state labels split them: nap running {running:.0f}% of its time, "
       f"while its wake-up waits for a CPU ({waiting:.0f}% by the "
       "thread's run_delay, +- 15), sleeping the rest; burn running",
       by_state)
    total = sum(int(s["value"][1]) for s in prof.samples)
    # Every thread but the window's sampler (gone now) was looked at.
    threads = len(tids(p.pid))
    ok(abs(total - seconds * 1e9 * threads) < 0.1 * seconds * 1e9 * threads,
       f"the wall time adds up to {seconds} s per thread "
       f"({total / 1e9:.1f} s for {threads} threads)")
    with open("/tmp/pp_wall.pb", "wb") as f:
        f.write(r.body)
    rc, out, err = go_pprof("-top", "-tagfocus=state=sleeping",
                            "/tmp/pp_wall.pb")
    ok(rc == 0 and " nap" in out and " burn" not in out,
       "go tool pprof -tagfocus=state=sleeping: the sleep, not the burn",
       out[-600:] + err[-300:])
    rc, out, err = go_pprof("-top", "-tagfocus=state=running",
                            "/tmp/pp_wall.pb")
    ok(rc == 0 and " burn" in out, "-tagfocus=state=running: the burn",
       out[-600:])
    os.unlink("/tmp/pp_wall.pb")

    # fgprof's path and sample types, where its scrapers ask.
    r = curl(f"http://127.0.0.1:{port}/debug/fgprof?seconds=2", timeout=60)
    eq(r.status, 200, "/debug/fgprof: 200")
    prof = Profile(r.body)
    eq(prof.sample_types(), [("samples", "count"), ("time", "nanoseconds")],
       "fgprof: its sample types")
    pt = prof.raw.get("period_type", [{}])[0]
    eq(prof.s(prof.field(pt, "type")), "wallclock",
       "fgprof: its period type")
    by_fn, _ = shares(prof, 1, ["nap", "burn"])
    ok(by_fn["nap"] > 0 and by_fn["burn"] > 0, "fgprof: both halves seen",
       by_fn)
    st = status(port)["threads"]["wall"]
    eq(st["threads_per_tick"], 16, "status says the per-tick bound")
    p.stop()


def test_formats():
    p, port = start(["nap", 10])
    p.wait_line(p.out_lines, r"^ready", timeout=30)
    r = curl(url(port, "wall?seconds=1&format=folded"), timeout=60)
    eq(r.status, 200, "wall folded: 200")
    ok(re.search(r";nap;?.* \d+$", r.body.decode(), re.M) or
       re.search(r";nap \d+$", r.body.decode(), re.M),
       "folded stacks hold nap", r.body[:300])
    r = curl(url(port, "wall?seconds=1&format=json"), timeout=60)
    eq(r.status, 200, "wall json: 200")
    j = r.json()
    ok("state" in str(j.get("samples", ""))[:20000] or "labels" in r.body.decode(),
       "json carries the state labels", str(j)[:300])
    r = curl(url(port, "wall?seconds=1&debug=1"), timeout=60)
    ok(r.status == 200 and b"burn" in r.body, "wall debug=1: the text "
       "table", r.body[:200])
    r = curl(url(port, "goroutine?format=folded"), timeout=60)
    ok(r.status == 200 and b"nap" in r.body or b"burn" in r.body
       or b"__clone3" in r.body, "goroutine folded", r.body[:200])
    # ?id= renders a kept one again.
    r = curl(url(port, "goroutine?debug=2"), timeout=60)
    kept = r.headers.get("x-pullprof-profile-id")
    if kept:
        r2 = curl(url(port, f"goroutine?id={kept}&debug=2"), timeout=60)
        eq(r2.body, r.body, "?id= renders the kept dump again")
    p.stop()


def test_bad_input():
    p, port = start(["nap", 5], {"PULLPROF_MAX_WALL_PROFILES": "1",
                                 "PULLPROF_MAX_SECONDS": "60"})
    p.wait_line(p.out_lines, r"^ready", timeout=30)
    cases = [
        ("goroutine?debug=3", "debug"),
        ("goroutine?debug=x", "debug"),
        ("goroutine?seconds=-1", "seconds"),
        ("goroutine?seconds=61", "seconds"),
        ("goroutine?seconds=2&debug=1", "seconds and debug"),
        ("goroutine?format=legacy", "legacy"),
        ("goroutine?debug=2&top=5", "top"),
        ("goroutine?id=99999", None),
        ("wall?hz=0", "hz"),
        ("wall?hz=1001", "hz"),
        ("wall?seconds=0", "seconds"),
        ("wall?seconds=61", "seconds"),
        ("wall?format=legacy", "legacy"),
        ("wall?sample_index=cpu", "sample_index"),
        ("fgprof?hz=abc", "hz"),
        ("wall?seconds=1&seconds=2", "seconds"),
    ]
    for path, word in cases:
        r = curl(url(port, path), timeout=30)
        if word is None:
            eq(r.status, 404, f"{path}: 404")
            continue
        eq(r.status, 400, f"{path}: 400")
        ok(word in r.body.decode(), f"{path}: the reason names {word}",
           r.body[:200])
        eq(r.headers.get("x-go-pprof"), "1", f"{path}: X-Go-Pprof")
    # The limit: one wall window at a time here.
    res = {}
    bg = threading.Thread(target=lambda: res.setdefault(
        "r", curl(url(port, "wall?seconds=3"), timeout=60)))
    bg.start()
    deadline = time.time() + 30
    while status(port)["threads"]["wall"]["open"] < 1 and \
            time.time() < deadline:
        time.sleep(0.05)
    r = curl(url(port, "wall?seconds=1"), timeout=30)
    eq(r.status, 429, "a second wall window past the limit: 429")
    ok(r.headers.get("retry-after", "").isdigit() and
       "PULLPROF_MAX_WALL_PROFILES" in r.body.decode(),
       "429 says when and which setting", r.body[:200])
    bg.join()
    eq(res["r"].status, 200, "the first one completes")
    eq(p.p.poll(), None, "the host runs on")
    p.stop()


def test_redis():
    """Debian's redis-server, preloaded, under redis-benchmark: dumps and a
    wall-clock window while it serves; every request answered, its threads
    found where they wait."""
    import shutil
    import subprocess
    rs, rb = shutil.which("redis-server"), shutil.which("redis-benchmark")
    if sanitized():
        skip("redis-server preloaded", "a sanitizer build: the sanitizer's "
             "runtime would have to come first in an uninstrumented program")
        return
    if not ok(rs and rb, "redis-server and redis-benchmark are installed "
              "(scripts/deps.sh --test installs them)"):
        return
    port, rport = free_port(), free_port()
    p = Proc([rs, "--port", str(rport), "--bind", "127.0.0.1", "--save", "",
              "--appendonly", "no"],
             env=preload_env(PULLPROF_LISTEN=f"127.0.0.1:{port}"),
             stdin=False)
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            if curl(url(port, "healthz")).status == 200:
                break
            time.sleep(0.1)
        bench = subprocess.Popen(
            [rb, "-p", str(rport), "-n", "200000", "-c", "20", "-q",
             "-t", "set,get"], stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT)
        res = {}
        wall = threading.Thread(target=lambda: res.setdefault(
            "r", curl(url(port, "wall?seconds=3&hz=250"), timeout=60)))
        wall.start()
        dumps = [curl(url(port, "goroutine?debug=2"), timeout=60)
                 for _ in range(20)]
        wall.join()
        out, _ = bench.communicate(timeout=300)
        text = out.decode(errors="replace")
        eq(bench.returncode, 0, "redis-benchmark ran to the end")
        ok(text.count("requests per second") == 2,
           "redis-benchmark: SET and GET completed", text[-300:])
        eq([r.status for r in dumps], [200] * 20, "20 dumps while it serves")
        dump = parse_dump(dumps[-1].body.decode())
        main = [t for t in dump if t["tid"] == p.pid]
        ok(main and any(f[0] == "aeMain" for f in main[0]["stack"]),
           "redis's main thread is in its event loop (aeMain)",
           main and main[0]["stack"][:8])
        bio = [t for t in dump if t["name"].startswith("bio_")]
        ok(len(bio) >= 2 and all(
            t["state"] == "sleeping" and
            any("pthread_cond_wait" in f[0] for f in t["stack"])
            for t in bio),
           f"its {len(bio)} background threads wait on their condition "
           "variables", [(t["name"], t["state"], t["stack"][:3]) for t in bio])
        eq(res["r"].status, 200, "a wall-clock window meanwhile: 200")
        prof = Profile(res["r"].body)
        names = {f[0] for s in prof.samples for fs in prof.stack(s) for f in fs}
        ok("aeMain" in names, "the wall profile has the event loop")
        r = subprocess.run(["redis-cli", "-p", str(rport), "ping"],
                           capture_output=True, text=True, timeout=30)
        eq(r.stdout.strip(), "PONG", "redis answers afterwards")
    finally:
        p.stop()


def spawn(p, line):
    n = len([ln for ln in p.out_lines if ln == "spawned"])
    p.p.stdin.write(line.encode() + b"\n")
    p.p.stdin.flush()
    deadline = time.time() + 30
    while len([ln for ln in p.out_lines if ln == "spawned"]) <= n:
        if time.time() > deadline:
            raise TimeoutError("no spawned line")
        time.sleep(0.02)


def creators(prof):
    c = Counter()
    for s in prof.samples:
        names = [f[0] for fs in prof.stack(s) for f in fs]
        key = "spawn_a" if "spawn_a" in names else \
            "spawn_b" if "spawn_b" in names else "other"
        c[key] += int(s["value"][0])
    return c


def test_threadcreate():
    p, port = start(["spawn"])
    p.wait_line(p.out_lines, r"^ready", timeout=30)
    spawn(p, "A 7")
    spawn(p, "B 3")
    # An agent thread made meanwhile (a wall window's sampler) is not the
    # host's and is not counted.
    eq(curl(url(port, "wall?seconds=1"), timeout=60).status, 200,
       "a wall window (an agent thread) meanwhile")
    r = curl(url(port, "threadcreate"), timeout=60)
    eq(r.status, 200, "threadcreate: 200")
    prof = Profile(r.body)
    eq(prof.sample_types(), [("threadcreate", "count")],
       "threadcreate: Go's sample type")
    eq(dict(creators(prof)), {"spawn_a": 7, "spawn_b": 3},
       "each creating stack counted: spawn_a 7, spawn_b 3, nothing else")
    r = curl(url(port, "threadcreate?debug=1"), timeout=60)
    text = r.body.decode()
    ok(text.startswith("threadcreate profile: total 10\n") and
       re.search(r"^7 @ .*\n(#\t.*\n)*#\t0x[0-9a-f]+\tspawn_a\t", text, re.M),
       "debug=1: Go's text, 7 threads from spawn_a", text[:600])
    with open("/tmp/pp_threadcreate.pb", "wb") as f:
        f.write(curl(url(port, "threadcreate"), timeout=60).body)
    rc, out, err = go_pprof("-top", "/tmp/pp_threadcreate.pb")
    ok(rc == 0 and "spawn_a" in out and "spawn_b" in out,
       "go tool pprof -top reads it", out[-500:] + err[-300:])
    os.unlink("/tmp/pp_threadcreate.pb")
    res = {}
    bg = threading.Thread(target=lambda: res.setdefault(
        "r", curl(url(port, "threadcreate?seconds=2"), timeout=60)))
    bg.start()
    deadline = time.time() + 30
    while status(port)["threads"]["threadcreate"]["open"] < 1 and \
            time.time() < deadline:
        time.sleep(0.05)
    spawn(p, "A 4")
    bg.join()
    eq(res["r"].status, 200, "seconds=2: 200")
    eq(dict(creators(Profile(res["r"].body))), {"spawn_a": 4},
       "seconds=2: the four threads spawn_a made meanwhile, nothing else")
    st = status(port)["threads"]["threadcreate"]
    eq((st["stacks"], st["past_table"]), (2, 0),
       "status: two creating stacks recorded")
    for path in ("threadcreate?debug=2", "threadcreate?seconds=1&debug=1"):
        eq(curl(url(port, path), timeout=30).status, 400, f"{path}: 400")
    p.stop()


def test_go_only_404():
    p, port = start(["nap", 5])
    for path, status_ in (("goroutine", 200), ("threadcreate", 200),
                          ("mutex", 200), ("block", 200), ("trace", 200),
                          ("delta_mutex", 404)):
        r = curl(url(port, path), timeout=60)
        eq(r.status, status_, f"/{path}: {status_}")
    p.stop()
    # With a rate of 0 the profile is off: a 404 that says how to turn it
    # on (or the scraper's job off).
    p, port = start(["nap", 5], {"PULLPROF_MUTEX_RATE": "0",
                                 "PULLPROF_BLOCK_RATE": "0"})
    for path, setting in (("mutex", "PULLPROF_MUTEX_RATE"),
                          ("block", "PULLPROF_BLOCK_RATE")):
        r = curl(url(port, path), timeout=60)
        eq(r.status, 404, f"/{path} off: 404")
        ok(setting.encode() in r.body and b"scraper" in r.body,
           f"/{path} off: names {setting} and the scraper's job", r.body)
    p.stop()


if __name__ == "__main__":
    run([test_dump_every_thread, test_never_interrupts, test_wall_accuracy,
         test_formats, test_bad_input, test_redis, test_threadcreate,
         test_go_only_404])

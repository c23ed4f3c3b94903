#!/usr/bin/env python3
"""The record (PULLPROF_RECORD): a look-back of every thread's CPU samples,
read at once for a past range. tests/record/phases runs phase_alpha() for a
few seconds and then phase_beta(); ranges given as ?start=&end= (Unix
seconds and RFC 3339) and ?last= must each show their phase's function as
nearly all of the range's CPU, the range's CPU as the host measured it on
its own clock, and be answered without waiting for a window. Savings (the
C API and POST /record/save) outlive the ring; the memory bound holds
under many threads with deep, varied stacks; bad ranges and ids get a 4xx
that says why."""
import datetime
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pptest import (BUILD, NO_CPU_TRUTH_WHY, NO_HEAP_WHY,  # noqa: E402,E501
                    SANITIZER, Host, Proc, Profile, by_function, curl, eq,
                    go_pprof, ok, preload_env, run, skip, until)

# What a CPU sample says about where the time went, and what the lock
# profiles see, do not hold under ThreadSanitizer (pptest, test_locks).
CPU_TRUTH = SANITIZER != "tsan"
LOCKS_WHY = ("under ThreadSanitizer the lock wrappers go straight to the C "
             "library (its interceptors come first): the lock profiles are "
             "served empty")

PHASES = os.path.join(BUILD, "tests", "record", "phases")
HZ = 97


class Phases(Host):
    def __init__(self, **env):
        e = {"PULLPROF_LISTEN": "127.0.0.1:0", "PULLPROF_RECORD": "2m",
             "PULLPROF_RECORD_HZ": str(HZ), **env}
        super().__init__(env=e, exe=PHASES)
        self.port = int(self.ready.split()[1]) if self.ready.startswith(
            "port ") else None

    def warm(self):
        """The collector arms the timers on its own thread, a moment after
        the start (longer on a busy machine): a short phase until the
        record holds samples, so that the phases measured are sampled from
        their first moment."""
        return until(lambda: self.phase("beta", 0.2) and
                     self.record().get("samples", {}).get("kept", 0) > 0,
                     60)

    def url(self, path):
        return f"http://127.0.0.1:{self.port}/debug/pprof/{path}"

    def get(self, path, *args, timeout=60):
        return curl(self.url(path), *args, timeout=timeout)

    def record(self):
        r = self.get("record")
        return r.json() if r.status == 200 else {}

    def phase(self, name, seconds):
        line = self.cmd(f"phase {name} {seconds}", timeout=seconds + 60)
        _, t0, t1, cpu = line.split()
        return float(t0), float(t1), float(cpu)


def cpu_share(prof, fn):
    """(fn's CPU, the profile's CPU) in seconds."""
    idx = [t for t, _ in prof.sample_types()].index("cpu")
    total = sum(s["value"][idx] for s in prof.samples)
    return by_function(prof, "cpu").get(fn, 0) / 1e9, total / 1e9


def rfc3339(t):
    """RFC 3339 in UTC, "Z" (a "+00:00" would need escaping in a URL)."""
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def caught_up(h, t):
    """The record holds the host's samples up to Unix time t (the
    collector drains the ring every 10 ms), or, on a busy machine where the
    host's last moments were not on a CPU, all it will get: the count stays
    still while the host is idle."""
    seen = []

    def done():
        rec = h.record()
        seen.append(rec.get("samples", {}).get("added"))
        return ((rec.get("coverage", {}).get("newest") or 0) >= t - 0.05
                or len(seen) >= 3 and seen[-1] == seen[-2] == seen[-3])
    return until(done, 20)


def check_range(h, query, fn, other, cpu, what):
    t = time.monotonic()
    r = h.get(f"profile?{query}")
    took = time.monotonic() - t
    eq(r.status, 200, f"{what}: 200")
    if r.status != 200:
        print(f"# {r.body[:300]!r}")
        return None
    p = Profile(r.body)
    mine, total = cpu_share(p, fn)
    theirs, _ = cpu_share(p, other)
    ok(took < 2.5, f"{what}: answered at once ({took:.2f} s, no window "
       "waited for)", took)
    if not CPU_TRUTH:
        skip(f"{what}: {fn}'s share and the range's CPU", NO_CPU_TRUTH_WHY)
        return r
    ok(total > 0 and mine / total >= 0.9,
       f"{what}: {fn} is {mine / total if total else 0:.1%} of the "
       f"range's CPU ({other}: {theirs:.3f} s)", (mine, total))
    ok(abs(total - cpu) <= 0.1 * cpu,
       f"{what}: the range's CPU {total:.3f} s is the host's own "
       f"{cpu:.3f} s within 10%", (total, cpu))
    return r


def test_phases():
    h = Phases()
    try:
        ok(h.port, "the host serves", h.ready)
        ok(h.warm(), "the record samples", h.record())
        a0, a1, acpu = h.phase("alpha", 3)
        b0, b1, bcpu = h.phase("beta", 3)
        ok(caught_up(h, b1), "the record caught up with the host",
           h.record())
        rec = h.record()
        eq((rec.get("on"), rec.get("hz"), rec.get("sampling")),
           (True, HZ, "on"), "/record: on, at the rate asked, sampling")
        ok(rec["coverage"]["oldest"] <= a0 + 2.0 / HZ and
           rec["coverage"]["newest"] >= b1 - 0.1,
           "/record: its coverage holds both phases", rec["coverage"])
        ok(0 < rec["memory"]["bytes_per_sample"] < 24,
           f"a sample takes {rec['memory']['bytes_per_sample']:.1f} bytes "
           "coded (its stack kept once)", rec["memory"])
        ok(rec["samples"]["kept"] >= 0.8 * (acpu + bcpu) * HZ,
           "the samples of both phases are kept", rec["samples"])
        # Unix seconds, with the fraction.
        r = check_range(h, f"start={a0:.3f}&end={a1:.3f}", "phase_alpha",
                        "phase_beta", acpu, "alpha by Unix times")
        if r:
            p = Profile(r.body)
            ok(abs(p.field(p.raw, "time_nanos") / 1e9 - a0) < 0.01,
               "time_nanos is the range's start",
               (p.field(p.raw, "time_nanos"), a0))
            ok(abs(p.field(p.raw, "duration_nanos") / 1e9 - (a1 - a0)) <
               0.01, "duration_nanos is the range's length",
               p.field(p.raw, "duration_nanos"))
            rid = r.headers.get("x-pullprof-profile-id")
            ok(rid, "the answer is kept under an id", r.headers)
            if rid:
                t = h.get(f"profile?id={rid}&debug=1")
                ok(t.status == 200 and b"phase_alpha" in t.body,
                   "?id= renders it again, as text", t.body[:200])
        # RFC 3339.
        check_range(h, f"start={rfc3339(b0)}&end={rfc3339(b1)}",
                    "phase_beta", "phase_alpha", bcpu, "beta by RFC 3339")
        # ?last=: the beta phase just ended.
        now = float(h.cmd("now").split()[1])
        last = now - b0 - 0.5
        r = h.get(f"profile?last={last:.3f}")
        eq(r.status, 200, "?last=: 200")
        if r.status == 200 and CPU_TRUTH:
            mine, total = cpu_share(Profile(r.body), "phase_beta")
            ok(mine / total >= 0.9, f"?last={last:.1f}: phase_beta is "
               f"{mine / total:.1%} of it", (mine, total))
        # Formats and clients.
        for fmt, want in (("debug=1", b"phase_alpha"),
                          ("format=folded", b"phase_alpha"),
                          ("format=json", b"phase_alpha")):
            r = h.get(f"profile?start={a0}&end={a1}&{fmt}")
            ok(r.status == 200 and want in r.body,
               f"{fmt} of a range", (r.status, r.body[:200]))
        out = go_pprof("-top", h.url(f"profile?start={a0}&end={a1}"))[1]
        ok("phase_alpha" in out, "go tool pprof reads a range", out[:500])
        r = h.get(f"trace?start={b0}&end={b1}")
        ok(r.status == 200 and b"phase_beta" in r.body,
           "/trace of a range: a Perfetto trace with beta's frames",
           (r.status, len(r.body)))
        # Both at once, on two threads: the timeline shows two busy ones.
        line = h.cmd("both 2", timeout=60)
        c0, c1, ca, cb = (float(x) for x in line.split()[1:])
        ok(caught_up(h, c1), "caught up again")
        tl = h.get(f"record/timeline?start={c0}&end={c1}&step=0.5")
        eq(tl.status, 200, "/record/timeline: 200")
        if tl.status == 200:
            threads = tl.json()["threads"]
            busy = sorted(t["cpu_seconds"] for t in threads[:2])
            own = sorted((ca, cb))
            ok(not CPU_TRUTH or len(threads) >= 2 and
               all(abs(b - o) <= 0.15 * o + 2.0 / HZ
                   for b, o in zip(busy, own)),
               f"the timeline's two busiest threads used {busy} s, the "
               f"host's own clocks say {own}", threads[:3])
            ok(all(len(t["cpu"]) in (4, 5) for t in threads),
               "in half-second steps over the 2 s",
               [len(t["cpu"]) for t in threads])
            ok(all(abs(sum(t["cpu"]) - t["cpu_seconds"]) < 0.001 and
                   max(t["cpu"]) <= 0.5 + 2.0 / HZ for t in threads),
               "each step at most half a second of one thread's CPU, "
               "adding up to its total", [t["cpu"] for t in threads[:2]])
    finally:
        h.quit()


def test_errors():
    h = Phases(PULLPROF_RECORD="30s")
    try:
        ok(h.warm(), "the record holds samples", h.record())
        cases = [
            ("profile?start=100&end=200", 416, "the record holds"),
            ("profile?last=abc", 400, "not a duration"),
            ("profile?last=5&seconds=3", 400, "seconds does not apply"),
            ("profile?last=5&start=100", 400, "one or the other"),
            ("profile?start=200&end=100", 400, "must come after"),
            ("profile?start=yesterday", 400, "RFC 3339"),
            ("profile?recording=77", 404, "no such saved recording"),
            ("profile?recording=x", 400, "id of a saved recording"),
            ("profile?last=5&id=1", 400, "id does not apply"),
            ("trace?last=5&wall=1", 400, "wall does not apply"),
            ("record/timeline?last=60&step=0.00001", 400, "at most 3600"),
        ]
        for path, status, words in cases:
            r = h.get(path)
            ok(r.status == status and words.encode() in r.body,
               f"{path}: {status} saying {words!r}",
               (r.status, r.body[:300]))
        r = h.get("record/save")
        eq(r.status, 405, "record/save: GET is 405")
        r = h.get("record/save?reason=" + "x" * 200, "-X", "POST")
        ok(r.status == 400 and b"127" in r.body, "a reason over 127 bytes: "
           "400", (r.status, r.body[:200]))
    finally:
        h.quit()
    off = Phases(PULLPROF_RECORD="off")
    try:
        for path in ("profile?last=10", "trace?last=10",
                     "record/timeline"):
            r = off.get(path)
            ok(r.status == 404 and b"PULLPROF_RECORD" in r.body,
               f"record off: {path} is 404 naming PULLPROF_RECORD",
               (r.status, r.body[:200]))
        r = off.get("record/save", "-X", "POST")
        ok(r.status == 404 and b"PULLPROF_RECORD" in r.body,
           "record off: POST record/save is 404", (r.status, r.body[:200]))
        eq(off.record(), {"on": False}, "record off: /record says so")
        eq(off.cmd("save anything"), "saved -95",
           "record off: pullprof_record_save() is -ENOTSUP")
        r = off.get("profile?seconds=1")
        eq(r.status, 200, "record off: windows work as ever")
    finally:
        off.quit()


# Times and durations past what 64-bit nanoseconds hold (to 2262-04-11):
# each is a 400 naming its parameter, never a wrapped value served (before:
# start=9999-… read the whole record, last=307445735m read 26 s).
OVERFLOWS = [
    ("profile?start=9999-12-31T23:59:59Z", "start="),
    ("profile?start=2262-04-12T00:00:00Z", "start="),
    ("profile?end=999999999999", "end="),
    ("profile?start=0000-01-01T00:00:00Z", "start="),
    ("profile?start=1&end=9999-12-31T23:59:59.999999999Z", "end="),
    ("profile?last=307445735m", "last="),
    ("profile?last=999999999h", "last="),
    ("trace?last=5124096h", "last="),
    ("heap?last=307445735m", "last="),
    ("record/timeline?last=60&step=307445735m", "step="),
    ("record/timeline?start=9999-12-31T23:59:59Z", "start="),
]


def test_overflow():
    h = Phases(PULLPROF_RECORD="30s")
    try:
        ok(h.warm(), "the record holds samples", h.record())
        def said(r):
            """The error's sentence: the body (profiles) or its JSON."""
            if r.headers.get("content-type", "").startswith("application/json"):
                return json.loads(r.body).get("error", "")
            return r.body.decode("utf-8", "replace")

        for path, name in OVERFLOWS:
            r = h.get(path)
            ok(r.status == 400 and said(r).startswith(name),
               f"{path}: 400 naming {name}", (r.status, r.body[:300]))
        r = h.get("record/save?last=307445735m", "-X", "POST")
        ok(r.status == 400 and said(r).startswith("last="),
           "POST record/save?last=307445735m: 400 naming last=",
           (r.status, r.body[:300]))
        r = h.get("profile?start=2262-04-11T00:00:00Z")
        ok(r.status == 416, "a time in 2262 that fits: past the record, 416",
           (r.status, r.body[:300]))
    finally:
        h.quit()
    for value in ("307445736m", "5124096h", "999999999h", "999999999"):
        bad = Phases(PULLPROF_RECORD=value)
        bad.quit()
        bad.drain()
        err = bad.stderr_text()
        ok(bad.ready.startswith("err ") and
           f"PULLPROF_RECORD: \"{value}\"" in err and "86400 s" in err,
           f"PULLPROF_RECORD={value}: the start is refused, stderr names "
           "the setting and its bound", (bad.ready, err[-400:]))


def test_save():
    # A short span: the ring moves on past what was saved.
    h = Phases(PULLPROF_RECORD="4s")
    try:
        ok(h.warm(), "the record samples", h.record())
        a0, a1, acpu = h.phase("alpha", 2)
        line = h.cmd("save slow request in alpha")
        ok(line.startswith("saved ") and int(line.split()[1]) > 0,
           "pullprof_record_save() from a host thread: an id", line)
        api_id = int(line.split()[1]) if line.startswith("saved ") else 0
        r = h.get("record/save?reason=from%20http&last=3", "-X", "POST")
        eq(r.status, 200, "POST record/save: 200")
        http_id = r.json()["id"] if r.status == 200 else 0
        ok(http_id > api_id > 0, "ids grow", (api_id, http_id))
        ok(until(lambda: len(h.record()["savings"]["list"]) == 2, 10),
           "/record lists both savings", h.record().get("savings"))
        lst = {s["id"]: s for s in h.record()["savings"]["list"]}
        eq(lst.get(api_id, {}).get("reason"), "slow request in alpha",
           "the API's reason is kept")
        eq(lst.get(http_id, {}).get("reason"), "from http",
           "the HTTP reason is kept")
        # The ring moves on: 6 s of beta with a 4 s span.
        h.phase("beta", 6)
        rec = h.record()
        ok(rec["coverage"]["oldest"] > a1, "the ring no longer holds "
           "alpha", rec["coverage"])
        r = h.get(f"profile?start={a0}&end={a1}")
        eq(r.status, 416, "alpha from the ring: 416 now")
        r = h.get(f"profile?recording={api_id}")
        eq(r.status, 200, "the API's saving: 200 after the ring moved on")
        # Its last 60 s hold the warm-up too: alpha's range within it.
        r = h.get(f"profile?recording={api_id}&start={a0}&end={a1}")
        eq(r.status, 200, "alpha's range within the saving: 200")
        if r.status == 200 and CPU_TRUTH:
            mine, total = cpu_share(Profile(r.body), "phase_alpha")
            ok(abs(total - acpu) <= 0.1 * acpu and mine / total >= 0.9,
               "it holds the alpha phase", (mine, total, acpu))
        r = h.get(f"profile?recording={http_id}&debug=1")
        ok(r.status == 200 and b"phase_alpha" in r.body,
           "the HTTP saving too, as text", (r.status, r.body[:200]))
        eq(h.get(f"trace?recording={api_id}").status, 200,
           "a saving as a trace")
        # Its heap, mutex and block snapshots were kept with it, though
        # the record's own have moved on past them (a 4 s span).
        snaps = h.record()["snapshots"]
        ok(snaps["mutex"]["oldest"] > lst[api_id]["saved"],
           "the record's snapshots are all newer than the saving",
           (snaps["mutex"], lst[api_id]["saved"]))
        kinds = ["mutex", "block"]
        if snaps["heap"]["not_recorded"] or SANITIZER != "none":
            skip("/heap?recording=", NO_HEAP_WHY)
        else:
            kinds += ["heap", "allocs"]
        for kind in kinds:
            r = h.get(f"{kind}?recording={api_id}")
            ok(r.status == 200 and b"from the record" in
               h.get(f"{kind}?recording={api_id}&debug=1"
                     if kind in ("heap", "allocs")
                     else f"{kind}?recording={api_id}&format=text").body,
               f"/{kind}?recording=: 200, from the saving's snapshots",
               (r.status, r.body[:200]))
        eq(h.get(f"record/timeline?recording={api_id}").status, 200,
           "a saving's timeline")
        # The bound: 16 kept; the anonymous (HTTP without a token) go
        # first, the fetched of them before the others.
        for i in range(18):
            h.get(f"record/save?reason=n{i}&last=1", "-X", "POST")
        ok(until(lambda: h.record()["savings"]["dropped"] >= 2, 10),
           "18 more savings: 2 or more pushed out",
           h.record()["savings"])
        sv = h.record()["savings"]
        eq(sv["kept"], 16, "16 kept")
        ids = {s["id"] for s in sv["list"]}
        ok(api_id in ids and http_id not in ids,
           "the host's saving (ranked) stays; of the anonymous, the "
           "fetched one went first", sorted(ids))
        # Too many at once: 16 wait to be made (the collector applies
        # them every 10 ms); past them, -EBUSY, never a wait.
        # A host preempted inside its loop (a loaded machine) lets the
        # collector drain the queue meanwhile, and all 64 may be taken:
        # the rounds go on until one filled the queue (at most ten).
        refused0 = h.record()["savings"]["refused"]
        rounds, busy_all, shapes = 0, 0, []
        while rounds < 10:
            _, good, busy, other = h.cmd("saves 64").split()
            good, busy, other = int(good), int(busy), int(other)
            rounds += 1
            busy_all += busy
            shapes.append((good, busy, other))
            if busy or good + busy != 64 or other or good < 16:
                break
        good, busy, other = shapes[-1]
        ok(busy > 0 and good >= 16 and other == 0 and good + busy == 64,
           f"64 saves in a row: {good} ids, {busy} -EBUSY (16 wait at "
           f"most), nothing else (round {rounds}; the rounds: {shapes})",
           shapes)
        ok(until(lambda: h.record()["savings"]["refused"] - refused0 ==
                 busy_all, 10),
           f"/record counts the refused ones ({busy_all})",
           h.record()["savings"])
    finally:
        h.quit()


def test_save_ranked():
    """Savings the host made (pullprof_record_save: its triggers) or a
    request that carried the token outrank those of anonymous requests: 20
    anonymous POSTs (a flood; before, the host's saving was the first out)
    push out only anonymous ones, and one made when every place is ranked
    is refused, not kept at a ranked one's cost."""
    h = Phases(PULLPROF_RECORD="1m")
    try:
        ok(h.warm(), "the record holds samples", h.record())
        line = h.cmd("save operator's moment")
        ok(line.startswith("saved ") and int(line.split()[1]) > 0,
           "the host saves a moment", line)
        mine = int(line.split()[1])
        ok(until(lambda: mine in {s["id"] for s in
                                  h.record()["savings"]["list"]}, 10),
           "it is kept", h.record()["savings"])
        eq(h.get(f"profile?recording={mine}").status, 200, "and fetched")
        for i in range(20):
            h.get(f"record/save?reason=flood{i}&last=5", "-X", "POST")
        ok(until(lambda: h.record()["savings"]["dropped"] >= 5, 10),
           "20 anonymous savings: 5 pushed out", h.record()["savings"])
        sv = h.record()["savings"]
        ids = {s["id"]: s for s in sv["list"]}
        ok(mine in ids, "the host's saving is still kept", sorted(ids))
        eq(ids.get(mine, {}).get("made_by"), "host",
           "/record says who made it")
        eq(sum(1 for s in sv["list"] if s["made_by"] == "anonymous"), 15,
           "15 anonymous ones beside it")
    finally:
        h.quit()
    tok = "t0ken-for-the-record-42"
    h = Phases(PULLPROF_RECORD="1m", PULLPROF_TOKEN=tok)
    try:
        auth = ("-H", f"Authorization: Bearer {tok}")
        r = h.get("record/save?reason=with%20token&last=5", "-X", "POST",
                  *auth)
        eq(r.status, 200, "a saving with the token")
        rec = json.loads(h.get("record", *auth).body)
        ok(until(lambda: any(s["made_by"] == "token" for s in json.loads(
            h.get("record", *auth).body)["savings"]["list"]), 10),
           "/record: made_by token", rec["savings"])
        r = h.get("record/save?reason=no%20token", "-X", "POST")
        eq(r.status, 401, "without it: 401, no saving at all")
    finally:
        h.quit()


def test_bound():
    """1 MiB for 16 threads with deep, varied stacks at 997 Hz: the bound
    holds, drops are counted, coverage shrinks, the host and the agent go
    on."""
    h = Phases(PULLPROF_RECORD="5m", PULLPROF_RECORD_MB="1",
               PULLPROF_RECORD_HZ="997")
    try:
        t_start = time.time()
        eq(h.cmd("deep 16 120"), "deep started", "16 threads run")
        worst = [0]

        def past_the_bound():
            """Until the record has let samples go (the bound reached),
            noting the most memory it held meanwhile."""
            rec = h.record()
            if rec:
                worst[0] = max(worst[0], rec["memory"]["bytes"])
            return rec and rec["samples"]["dropped"] > 0 and \
                rec["stacks"]["freed"] > 0
        ok(until(past_the_bound, 110), "the bound was reached",
           h.record())
        eq(h.cmd("deepstop", timeout=60), "deep done",
           "the host's threads stop")
        worst = worst[0]
        rec = h.record()
        print(f"# 1 MiB bound: at most {worst} bytes seen; "
              f"{json.dumps(rec['memory'])}; {json.dumps(rec['samples'])}")
        ok(worst <= 1 << 20, f"the bound held: at most {worst} bytes",
           worst)
        ok(rec["samples"]["dropped"] > 0, "drops are counted",
           rec["samples"])
        ok(rec["coverage"]["seconds"] < time.time() - t_start,
           "coverage shrank to what fits", rec["coverage"])
        ok(rec["stacks"]["freed"] > 0, "stacks no sample needs are freed",
           rec["stacks"])
        r = h.get("profile?last=1")
        ok(r.status in (200, 416), "a read still answers", r.status)
        eq(h.cmd("now").split()[0], "now", "the host goes on")
    finally:
        h.quit()


def test_windows_beside():
    """Windows at their own rates while the record samples at 97 Hz: a
    10 Hz window and a 500 Hz window each measure the phase's CPU as the
    host's clock does, and so does the record over the same range (the
    faster samples weighted by their period)."""
    import threading
    h = Phases()
    try:
        ok(h.warm(), "the record samples", h.record())
        for hz in (10, 500):
            box = {}
            t = threading.Thread(target=lambda: box.setdefault(
                "r", h.get(f"profile?seconds=3&hz={hz}", timeout=60)))
            t.start()
            ok(until(lambda: h.get("status").json()["cpu"]["windows_open"]
                     >= 1, 20), f"the {hz} Hz window is open")
            a0, a1, acpu = h.phase("alpha", 2)
            t.join()
            r = box.get("r")
            eq(r.status if r else 0, 200, f"the {hz} Hz window: 200")
            if not CPU_TRUTH:
                skip(f"the {hz} Hz window's CPU", NO_CPU_TRUTH_WHY)
                continue
            if r and r.status == 200:
                mine, total = cpu_share(Profile(r.body), "phase_alpha")
                ok(abs(mine - acpu) <= 0.1 * acpu + 0.1,
                   f"the {hz} Hz window: phase_alpha {mine:.3f} s, the "
                   f"host's clock {acpu:.3f} s", (mine, acpu))
            ok(caught_up(h, a1), "caught up")
            r = h.get(f"profile?start={a0}&end={a1}")
            if r.status == 200:
                mine, total = cpu_share(Profile(r.body), "phase_alpha")
                ok(abs(mine - acpu) <= 0.1 * acpu + 0.05,
                   f"the record beside the {hz} Hz window: {mine:.3f} s, "
                   f"the host's clock {acpu:.3f} s", (mine, acpu))
    finally:
        h.quit()


def snapped_after(h, kind, t):
    """The record has a snapshot of kind taken after Unix time t."""
    return until(lambda: (h.record().get("snapshots", {}).get(kind, {})
                          .get("newest") or 0) > t, 20)


def values(prof, type_name, fn):
    """fn's cumulative value of type_name, and the profile's total."""
    idx = [t for t, _ in prof.sample_types()].index(type_name)
    total = sum(s["value"][idx] for s in prof.samples)
    return by_function(prof, type_name).get(fn, 0), total


def test_heap_mutex_block():
    """Heap growth over a range names the growing site; what was freed
    is a negative change; state=1 is the heap as of the range's end;
    mutex and block over a range show the contention of that range only."""
    h = Phases(PULLPROF_HEAP_RATE="65536")
    try:
        ok(h.warm(), "the record samples", h.record())
        if SANITIZER != "none":
            # ASan's allocator replaces malloc, and the record says so;
            # under TSan the sampler is served but sees no allocation.
            skip("heap ranges", NO_HEAP_WHY)
            if h.record()["snapshots"]["heap"]["not_recorded"]:
                r = h.get("heap?last=5")
                ok(r.status == 404 and b"does not keep heap" in r.body,
                   "/heap?last=: 404 saying why the heap is not recorded",
                   (r.status, r.body[:200]))
            contention(h)
            return
        snaps = h.record().get("snapshots", {})
        ok(snaps.get("interval_seconds") == 1.0 and
           snaps["heap"]["not_recorded"] is None,
           "/record: snapshots every second, heap recorded", snaps)
        t = float(h.cmd("now").split()[1])
        ok(snapped_after(h, "heap", t), "a heap snapshot came",
           h.record().get("snapshots"))
        g0, g1 = (float(x) for x in
                  h.cmd("grow 16 2", timeout=60).split()[1:])
        ok(snapped_after(h, "heap", g1), "a snapshot after the growth")
        r = h.get(f"heap?start={g0 - 0.05:.3f}&end={g1 + 1.2:.3f}")
        eq(r.status, 200, "/heap over the growth: 200")
        if r.status == 200:
            p = Profile(r.body)
            grew, total = values(p, "inuse_space", "grow_site")
            mib = 1 << 20
            ok(abs(grew - 16 * mib) <= 0.25 * 16 * mib,
               f"grow_site's in-use change: {grew / mib:.1f} MiB of the "
               "16 allocated", grew)
            ok(grew >= 0.8 * total,
               f"it is most of the range's growth ({total / mib:.1f} MiB)",
               (grew, total))
        r = h.get(f"heap?end={g1 + 1.2:.3f}&state=1")
        eq(r.status, 200, "state=1: 200")
        if r.status == 200:
            held, _ = values(Profile(r.body), "inuse_space", "grow_site")
            ok(held >= 0.75 * 16 * (1 << 20), "state=1: grow_site holds "
               f"{held / (1 << 20):.1f} MiB as of the end", held)
        r = h.get(f"allocs?start={g0 - 0.05:.3f}&end={g1 + 1.2:.3f}"
                  "&debug=1")
        ok(r.status == 200 and b"grow_site" in r.body,
           "/allocs over the growth, as text", (r.status, r.body[:200]))
        released = float(h.cmd("release").split()[1])
        ok(snapped_after(h, "heap", released), "a snapshot after the free")
        r = h.get(f"heap?start={released - 0.5:.3f}&end={released + 1.2:.3f}"
                  "&format=json")
        eq(r.status, 200, "/heap over the release: 200")
        r = h.get(f"heap?start={released - 0.5:.3f}&end={released + 1.2:.3f}")
        if r.status == 200:
            freed, _ = values(Profile(r.body), "inuse_space", "grow_site")
            ok(freed <= -0.75 * 16 * (1 << 20), "what was freed is a "
               f"negative change: {freed / (1 << 20):.1f} MiB", freed)
        contention(h)
    finally:
        h.quit()


def contention(h):
    """mutex and block over a range: contend_site's waits, none before."""
    if SANITIZER == "tsan":
        skip("mutex and block ranges", LOCKS_WHY)
        return
    quiet = float(h.cmd("now").split()[1])
    c0, c1 = (float(x) for x in
              h.cmd("contend 2", timeout=60).split()[1:])
    ok(snapped_after(h, "mutex", c1), "a mutex snapshot after")
    # The block profile also has the main thread's pthread_join,
    # waiting for the four threads meanwhile: at least half.
    for kind, fn, share in (("mutex", "contend_site", 0.8),
                            ("block", "contend_site", 0.5)):
        r = h.get(f"{kind}?start={c0 - 0.05:.3f}&end={c1 + 1.2:.3f}")
        eq(r.status, 200, f"/{kind} over the contention: 200")
        if r.status == 200:
            d, total = values(Profile(r.body), "delay", fn)
            ok(d > 0 and d >= share * total,
               f"/{kind}: {fn} holds {d / 1e9:.3f} s of the range's "
               f"{total / 1e9:.3f} s of waiting", (d, total))
        r = h.get(f"{kind}?start={quiet - 2:.3f}&end={quiet:.3f}")
        if r.status == 200:
            d, _ = values(Profile(r.body), "delay", fn)
            eq(d, 0, f"/{kind} over a range before it: none of it")
        else:
            ok(r.status == 416, f"/{kind} before: 416 or empty",
               r.status)
    r = h.get("mutex?last=5&debug=1")
    eq(r.status, 400, "debug=1 with a range: 400")
    r = h.get("goroutine?last=5")
    ok(r.status == 400 and b"this one is of now" in r.body,
       "/goroutine?last=: 400, not recorded", r.body[:200])
    r = h.get("wall?last=5")
    ok(r.status == 400 and b"of the next" in r.body,
       "/wall?last=: 400, not recorded", r.body[:200])


FORKER = r"""
import os, sys, time
def burn(n):
    t = time.time()
    while time.time() - t < n:
        pass
kids = []
for i in range(2):
    pid = os.fork()
    if pid == 0:
        # Each member burns until told to stop (its stdin closes).
        while not os.path.exists(sys.argv[1]):
            burn(0.05)
        os._exit(0)
    kids.append(pid)
print("forked", *kids, flush=True)
while not os.path.exists(sys.argv[1]):
    burn(0.05)
for pid in kids:
    os.waitpid(pid, 0)
sys.stdin.readline()
"""


def test_fork_follow():
    """PULLPROF_FORK=follow: every member records, and a look-back on the
    master's address merges them with the pid label."""
    import tempfile
    if SANITIZER == "tsan":
        skip("a forked tree's record", "tsan build: ThreadSanitizer wraps "
             "fork() and runs it with its own state locked, so "
             "libpullprof's fork wrappers are built out")
        return
    d = tempfile.mkdtemp()
    stop = os.path.join(d, "stop")
    p = Proc(["/usr/bin/python3", "-c", FORKER, stop],
             env=preload_env(PULLPROF_LISTEN="127.0.0.1:0",
                             PULLPROF_RECORD="1m", PULLPROF_RECORD_HZ="97",
                             PULLPROF_FORK="follow"), stdout_lines=True)
    try:
        m = p.wait_line(p.err_lines, r"serving (http://\S+)", timeout=30)
        f = p.wait_line(p.out_lines, r"^forked (\d+) (\d+)", timeout=30)
        ok(m and f, "the master serves and forked two members",
           p.stderr_text())
        if not (m and f):
            return
        base = m.group(1)
        pids = {p.pid, int(f.group(1)), int(f.group(2))}
        # Each member's agent starts as it is forked: read the last 2 s
        # through the master until all three have recorded some.
        got = {}

        def read():
            r = curl(base + "profile?last=2", timeout=60)
            if r.status != 200:
                return False
            prof = Profile(r.body)
            idx = [t for t, _ in prof.sample_types()].index("cpu")
            got.clear()
            for s in prof.samples:
                pid = prof.labels(s).get("pid")
                pid = pid[0] if isinstance(pid, tuple) else pid
                got[int(pid)] = got.get(int(pid), 0) + s["value"][idx]
            return set(got) >= pids and all(got[x] > 0 for x in pids)
        ok(until(read, 30), "?last=2 on the master: CPU of all three "
           "processes, each labelled with its pid",
           {k: v / 1e9 for k, v in got.items()})
    finally:
        open(stop, "w").close()
        try:
            p.p.stdin.write(b"\n")
            p.p.stdin.close()
        except OSError:
            pass
        eq(p.p.wait(timeout=30), 0, "the master exits 0")


def test_one_timer_a_thread():
    """64 threads started at once while the record samples: each has one
    timer. (A scan that met a thread as pthread_create still blocked its
    signals marked it blocking; the timer the thread then armed itself was
    taken without clearing that, and the next scan armed a second one: the
    thread was sampled twice, its CPU doubled. Seen in 2 of 6 runs before
    the fix, 0 of 7 after.)"""
    import collections
    h = Phases(PULLPROF_RECORD_HZ="19")
    try:
        eq(h.cmd("deep 64 30"), "deep started", "64 threads start at once")
        worst, seen, last = {}, {}, {}
        watching = False

        def timers_settled():
            with open(f"/proc/{h.pid}/timers") as f:
                tids = collections.Counter(
                    ln.split()[-1] for ln in f if ln.startswith("notify:"))
            two = {t for t, c in tids.items() if c > 1}
            # Two looks in a row: a thread's own timer and a scan's
            # side by side until the collector's next adopt() (a race
            # the scans now avoid) would be gone by the next look; the
            # bug this test is for kept both for good.
            if watching:
                worst.update({t: tids[t] for t in two if t in last})
            for t in two:
                seen[t] = tids[t]
            last.clear()
            last.update({t: 1 for t in two})
            return len(tids) >= 64
        ok(until(timers_settled, 30), "every thread has a timer")
        # Scans come every 100 ms to 1 s: watch a few seconds more.
        watching = True
        t0 = time.monotonic()
        while time.monotonic() - t0 < 3:
            timers_settled()
            time.sleep(0.25)
        eq(worst, {}, "no thread has two timers for longer than a look "
           f"(0.25 s; seen in one look: {seen or 'none'})")
        eq(h.cmd("deepstop", timeout=60), "deep done", "they stop")
    finally:
        h.quit()


def test_stop():
    """The agent stops with the record on and a read in flight: no crash,
    exit 0."""
    h = Phases()
    h.phase("alpha", 1)
    rc = h.quit()
    eq(rc, 0, "exit 0 after pullprof_stop with the record on")


run([test_phases, test_windows_beside, test_errors, test_overflow, test_save,
     test_save_ranked, test_bound,
     test_heap_mutex_block, test_fork_follow, test_one_timer_a_thread,
     test_stop])

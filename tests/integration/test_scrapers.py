"""Continuous profilers as clients: the request shapes of Grafana Alloy's
pyroscope.scrape and of the Parca server's scraper, replayed with curl
against a running process (tests/labels/labelwork serving labelled requests,
PULLPROF_TOKEN set), on a shortened schedule so the windows overlap the way
they do in production, while a person fetches a 30 s profile with
`go tool pprof` at the same time. Every answer is judged by the rules those
scrapers apply (from their public source; see docs/integrations.md "Continuous
profiling"):

Alloy (internal/component/pyroscope/scrape): any 2xx; a non-empty body;
Content-Type starting with application/octet-stream; not HTML/JSON-looking;
gzip magic (or a plausible protobuf first byte); memory profiles are parsed
by its delta computer, which wants the Go sample type names, at most 4
values per sample and a distinct non-zero address on every location.

Parca (pkg/scrape, pkg/normalizer/validate.go, google/pprof ParseData):
status exactly 200 within the scrape timeout (interval + 3 s); a valid
profile: string_table[0] == "", every string index in range, values per
sample == sample types, mapping/function/location IDs equal to their index
+ 1, sample location IDs non-zero and in range, label keys non-zero.

Both: the CPU window lasts what `seconds` asked; goroutine (on by default in
both: the thread dump), mutex and block (on by default in both, cumulative
since the agent started: Alloy subtracts consecutive ones) are accepted like
the rest. Alloy's fgprof job, which a user turns on
(/debug/fgprof?seconds=interval-1), gets the wall-clock profile.

Real timing matters here only as the scrapers' own acceptance rule (an
answer after the scrape timeout is a failed scrape)."""
import gzip
import os
import subprocess
import tempfile
import threading
import time

from pptest import GO, Labelwork, Profile, curl, eq, ok, run

TOKEN = "scrape-token-0123456789"
PREFIX = "/debug/pprof"
ALLOY_UA = "Alloy/v1.5.1 (linux; binary)"
PARCA_UA = "conprof/"

# Shortened schedules (production: Alloy every 15 s with seconds=14 and a
# 10 s timeout stretched by interval-1 for CPU; Parca every 10 s with
# seconds=10 and a 13 s timeout).
ALLOY_INTERVAL = 5
PARCA_INTERVAL = 4
ROUNDS_S = 30        # how long the scrapers run
PERSON_SECONDS = 30  # the person's profile, fetched meanwhile


def fetch(url, ua, timeout):
    """One scrape: curl with only the headers the scrapers send (their Go
    clients set User-Agent and Authorization; no Accept, no
    Accept-Encoding). Returns (response, seconds taken)."""
    t0 = time.time()
    r = curl(url, "-A", ua, "-H", "Accept:", "-H",
             f"Authorization: Bearer {TOKEN}", timeout=timeout)
    return r, time.time() - t0


# --- the scrapers' acceptance rules ------------------------------------------

def alloy_accepts(r, kind):
    """Alloy's fetchProfile + validateProfileData (+ the delta computer's
    needs for memory). Returns a list of reasons it would refuse."""
    why = []
    if r.status // 100 != 2:
        return [f"server returned HTTP status ({r.status})"]
    b = r.body
    if not b:
        return [f"empty {kind} profile"]
    ct = r.headers.get("content-type", "")
    if not ct:
        why.append("missing Content-Type header")
    elif not ct.startswith("application/octet-stream"):
        why.append(f"unexpected Content-Type {ct}")
    head = b.lstrip()
    if len(b) >= 10 and head[:2] in (b"<!", b"<h", b"<b", b"<t"):
        why.append("text response instead of pprof (HTML)")
    if len(b) > 20 and head[:1] in (b"{", b"["):
        why.append("text response instead of pprof (JSON)")
    if len(b) <= 2:
        why.append("data too short for pprof format")
    elif b[:2] != b"\x1f\x8b" and (b[0] & 7) >= 6:
        why.append(f"invalid protobuf data: illegal wireType {b[0] & 7}")
    if kind == "memory" and not why:
        p = Profile(b)
        types = [t for t, _ in p.sample_types()]
        if not {"alloc_objects", "alloc_space"} <= set(types):
            why.append(f"memory sample types {types}: no alloc_objects/"
                       "alloc_space to subtract")
        if any(len(s.get("value", [])) > 4 for s in p.samples):
            why.append("a sample with more than 4 values")
        addrs = [p.field(l, "address") for l in p.locations]
        if any(a == 0 for a in addrs):
            why.append("a location without an address")
        if len(set(addrs)) != len(addrs):
            why.append("two locations with the same address")
    return why


def parca_accepts(r, kind, took, timeout):
    """Parca's scrape + google/pprof ParseData/CheckValid + Parca's
    ValidatePprofProfile. Returns a list of reasons it would refuse."""
    if took > timeout:
        return [f"answer after the scrape timeout ({took:.1f} s > {timeout} s)"]
    if r.status != 200:
        return [f"server returned HTTP status {r.status}"]
    if not r.body:
        return [f"empty {kind} profile"]
    why = []
    data = r.body
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    p = Profile(data)
    raw, strings = p.raw, p.strings
    n = len(strings)
    if not strings or strings[0] != "":
        why.append("first item in string table is expected to be empty")

    def idx(msg, name):
        v = p.field(msg, name)
        if v < 0 or v >= n:
            why.append(f"string index {name}={v} out of range ({n})")
    for t in raw.get("sample_type", []) + raw.get("period_type", []):
        idx(t, "type")
        idx(t, "unit")
    ntypes = len(raw.get("sample_type", []))
    if p.samples and not ntypes:
        why.append("missing sample type information")
    for what, items in (("mapping", p.mappings), ("function", p.functions),
                        ("location", p.locations)):
        for i, m in enumerate(items):
            if p.field(m, "id") != i + 1:
                why.append(f"{what} id is not sequential ({i}: "
                           f"{p.field(m, 'id')})")
                break
    for m in p.mappings:
        idx(m, "filename")
        idx(m, "build_id")
    for f in p.functions:
        for k in ("name", "system_name", "filename"):
            idx(f, k)
    for l in p.locations:
        mid = p.field(l, "mapping_id")
        if mid > len(p.mappings):
            why.append(f"location mapping_id {mid} out of range")
        for ln in l.get("line", []):
            if p.field(ln, "function_id") > len(p.functions):
                why.append("line function_id out of range")
    for i, s in enumerate(p.samples):
        if len(s.get("value", [])) != ntypes:
            why.append(f"mismatch: sample has {len(s.get('value', []))} "
                       f"values vs. {ntypes} types")
        for lid in s.get("location_id", []):
            if lid == 0 or lid > len(p.locations):
                why.append(f"sample {i} location id {lid} out of range")
        for lb in s.get("label", []):
            if p.field(lb, "key") == 0:
                why.append(f"sample {i} label has no key")
            idx(lb, "key")
            idx(lb, "str")
    return why[:5]


# --- the schedule ------------------------------------------------------------

class Scraper:
    """One scrape loop per (target, profile type), as both scrapers run
    them: its own ticker, spread over the interval."""

    def __init__(self, name, port, interval, ua, cpu_seconds, timeouts):
        self.name, self.port, self.interval, self.ua = name, port, interval, ua
        self.kinds = list(timeouts)
        self.cpu_seconds, self.timeouts = cpu_seconds, timeouts
        self.results = []  # (kind, response, seconds taken, planned start)
        self.lock = threading.Lock()

    def path(self, kind):
        if kind == "fgprof":
            return f"/debug/fgprof?seconds={self.cpu_seconds}"
        return PREFIX + {"process_cpu": f"/profile?seconds={self.cpu_seconds}",
                         "memory": "/allocs", "goroutine": "/goroutine",
                         "mutex": "/mutex", "block": "/block"}[kind]

    def loop(self, kind, offset, until):
        t = time.time() + offset
        while t < until:
            time.sleep(max(0, t - time.time()))
            url = f"http://127.0.0.1:{self.port}{self.path(kind)}"
            r, took = fetch(url, self.ua, self.timeouts[kind] + 5)
            with self.lock:
                self.results.append((kind, r, took))
            t += self.interval

    def start(self, until):
        threads = []
        for i, kind in enumerate(self.kinds):
            th = threading.Thread(target=self.loop, daemon=True, args=(
                kind, (i * 0.37) % self.interval, until))
            th.start()
            threads.append(th)
        return threads


def watch_windows(port, until, seen):
    while time.time() < until:
        r = curl(f"http://127.0.0.1:{port}{PREFIX}/status", "-H",
                 f"Authorization: Bearer {TOKEN}")
        if r.status == 200:
            seen.append(r.json()["cpu"]["windows_open"])
        time.sleep(0.25)


def test_scrapers():
    h = Labelwork({"PULLPROF_TOKEN": TOKEN, "PULLPROF_HEAP_RATE": "65536"})
    ok(h.port, "labelwork started the agent", h.ready)
    port = h.port
    serve_s = max(ROUNDS_S, PERSON_SECONDS) + 3
    work = threading.Thread(target=lambda: h.cmd(f"serve 2 {serve_s}",
                                                 timeout=serve_s + 120),
                            daemon=True)
    work.start()
    time.sleep(1)  # the workers are busy before the first scrape

    until = time.time() + ROUNDS_S
    alloy = Scraper("alloy", port, ALLOY_INTERVAL, ALLOY_UA,
                    ALLOY_INTERVAL - 1,
                    {"process_cpu": 10 + ALLOY_INTERVAL - 1, "memory": 10,
                     "goroutine": 10, "mutex": 10, "block": 10,
                     "fgprof": 10 + ALLOY_INTERVAL - 1})
    parca = Scraper("parca", port, PARCA_INTERVAL, PARCA_UA, PARCA_INTERVAL,
                    {k: PARCA_INTERVAL + 3 for k in
                     ("process_cpu", "memory", "goroutine", "mutex", "block")})
    threads = alloy.start(until) + parca.start(until)

    # A person fetches a longer profile meanwhile, with the pprof tool and
    # the token in the URL.
    person = {}
    out = tempfile.NamedTemporaryFile(suffix=".pb.gz", delete=False).name

    def fetch_person():
        with tempfile.TemporaryDirectory() as home:
            env = dict(os.environ, HOME=home, PPROF_TMPDIR=home)
            p = subprocess.run(
                [GO, "tool", "pprof", "-proto", "-output", out,
                 f"http://pullprof:{TOKEN}@127.0.0.1:{port}{PREFIX}/profile"
                 f"?seconds={PERSON_SECONDS}"],
                capture_output=True, timeout=PERSON_SECONDS + 60, env=env)
            person["rc"], person["err"] = p.returncode, p.stderr.decode()
    pt = threading.Thread(target=fetch_person, daemon=True)
    pt.start()
    windows = []
    watch_windows(port, until, windows)
    for th in threads:
        th.join(60)
    pt.join(PERSON_SECONDS + 60)
    work.join(180)

    ok(max(windows or [0]) >= 2,
       f"windows overlapped (most open at once: {max(windows or [0])})",
       windows)

    for sc in (alloy, parca):
        kinds = {}
        for kind, r, took in sc.results:
            kinds.setdefault(kind, []).append((r, took))
        for kind in ("process_cpu", "memory", "goroutine", "mutex", "block",
                     "fgprof"):
            if kind not in sc.kinds:
                continue
            got = kinds.get(kind, [])
            ok(len(got) >= 2, f"{sc.name}: {len(got)} {kind} scrapes made")
            for i, (r, took) in enumerate(got):
                if sc.name == "alloy":
                    why = alloy_accepts(r, kind)
                    if not why and took > sc.timeouts[kind]:
                        why = [f"after the timeout ({took:.1f} s)"]
                else:
                    why = parca_accepts(r, kind, took, sc.timeouts[kind])
                eq(why, [], f"{sc.name} accepts {kind} scrape {i + 1} "
                   f"({r.status}, {len(r.body)} bytes, {took:.1f} s)")
                if kind in ("process_cpu", "fgprof") and r.status == 200:
                    d = Profile(r.body).field(Profile(r.body).raw,
                                              "duration_nanos") / 1e9
                    ok(abs(d - sc.cpu_seconds) <= 0.5,
                       f"{sc.name}: {kind} scrape {i + 1} covers "
                       f"{sc.cpu_seconds} s (duration {d:.2f} s)")
        # Alloy subtracts consecutive allocation profiles: they must be
        # cumulative (non-decreasing totals).
        if sc.name == "alloy":
            for kind, vtype in (("memory", "alloc_space"), ("mutex", "delay"),
                                ("block", "delay")):
                totals = []
                for r, _ in kinds.get(kind, []):
                    if r.status == 200:
                        p = Profile(r.body)
                        vi = [t for t, _ in p.sample_types()].index(vtype)
                        totals.append(sum(s["value"][vi] for s in p.samples))
                ok(len(totals) >= 2 and all(b >= a for a, b in
                                            zip(totals, totals[1:])),
                   f"alloy: consecutive {kind} profiles are cumulative "
                   "(what its delta computer subtracts)", totals)
        for kind in ("mutex", "block"):
            got = [r for r, _ in kinds.get(kind, []) if r.status == 200]
            ok(got and Profile(got[-1].body).sample_types() ==
               [("contentions", "count"), ("delay", "nanoseconds")],
               f"{sc.name}: {kind} has Go's sample types (what Alloy's "
               "delta computer and Pyroscope expect)",
               got and Profile(got[-1].body).sample_types())

    eq(person.get("rc"), 0, f"the person's go tool pprof over "
       f"{PERSON_SECONDS} s succeeded meanwhile", )
    if person.get("rc") == 0:
        with open(out, "rb") as f:
            prof = Profile(f.read())
        d = prof.field(prof.raw, "duration_nanos") / 1e9
        ok(abs(d - PERSON_SECONDS) <= 0.5,
           f"the person's profile covers {PERSON_SECONDS} s ({d:.2f} s)")
        ok(any(prof.labels(s).get("endpoint") == "/api/users"
               for s in prof.samples),
           "it carries the endpoint labels")
    os.unlink(out)

    # Both scrapers' User-Agents are in the agent's request counts: every
    # ask above was answered (none refused at the connection).
    st = curl(f"http://127.0.0.1:{port}{PREFIX}/status", "-H",
              f"Authorization: Bearer {TOKEN}").json()
    ok(st["connections"]["refused"] == 0, "no connection was refused",
       st["connections"])
    eq(h.quit(), 0, "host exits 0")


run([test_scrapers])

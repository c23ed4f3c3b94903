"""Every format of one profile agrees with the others: ?format=json,
folded, text (debug=1), legacy (gperftools) and pprof of the same data (the
same window, fetched again with ?id=), read by real tools — protoc,
google-pprof, go tool pprof. And bad format parameters get a 400 that says
what is accepted. Real processes: tests/cpu/burn and tests/heap/heapwork."""
import gzip
import os
import re
import struct
import subprocess
import tempfile
import time

from pptest import (BUILD, NO_HEAP_WHY, Proc, Profile, Work, curl, eq, go_pprof,
                    ok, run, sanitized, skip)

BURN = os.path.join(BUILD, "tests", "cpu", "burn")
GOOGLE_PPROF = "/usr/bin/google-pprof"


class Burn:
    def __init__(self):
        self.p = Proc([BURN, "2", "600"],
                      env={"PULLPROF_LISTEN": "127.0.0.1:0"}, stdin=False)
        m = self.p.wait_line(self.p.out_lines, r"^port (\d+)", timeout=10)
        self.port = int(m.group(1))

    def get(self, query, timeout=60):
        return curl(f"http://127.0.0.1:{self.port}/debug/pprof/{query}",
                    timeout=timeout)


def totals(prof):
    n = len(prof.sample_types())
    t = [0] * n
    for s in prof.samples:
        for i, v in enumerate(s.get("value", [])):
            t[i] += v
    return t


def leaf_function_values(prof, idx):
    """Flat value by the leaf's innermost function name."""
    out = {}
    for s in prof.samples:
        st = prof.stack(s)
        name = st[0][0][0] if st and st[0] else None
        out[name] = out.get(name, 0) + s["value"][idx]
    return out


def folded_lines(text):
    rows = []
    for line in text.splitlines():
        m = re.match(r"^(.+) (-?\d+)$", line)
        if not m:
            return None
        rows.append((m.group(1).split(";"), int(m.group(2))))
    return rows


def parse_legacy(data):
    """The gperftools CPU profile: header, records, trailer, maps text."""
    words = lambda at, n: struct.unpack_from(f"={n}Q", data, at)
    hdr = words(0, 5)
    at, records = 40, []
    while True:
        count, n = words(at, 2)
        pcs = words(at + 16, n)
        at += 16 + 8 * n
        if count == 0 and n == 1 and pcs == (0,):
            break
        records.append((count, pcs))
    return hdr, records, data[at:].decode("utf-8", "replace")


def test_cpu_formats():
    b = Burn()
    r = b.get("profile?seconds=3&format=json", timeout=60)
    eq(r.status, 200, "format=json: 200")
    eq(r.header("content-type"), "application/json", "JSON content type")
    ok(r.header("content-disposition") is None, "JSON is shown, not attached")
    pid = r.header("x-pullprof-profile-id")
    ok(pid and pid.isdigit(), "the answer names its profile id", r.headers)
    j = r.json()
    eq(j["sample_types"], [{"type": "samples", "unit": "count"},
                           {"type": "cpu", "unit": "nanoseconds"}],
       "JSON sample types")
    eq(j["default_sample_type"], 1, "JSON default: cpu (the last, as pprof)")
    eq(j["period_type"], {"type": "cpu", "unit": "nanoseconds"}, "JSON period type")
    sums = [sum(s["values"][i] for s in j["samples"]) for i in range(2)]
    eq(j["totals"], sums, "JSON totals are the sums of its samples")
    nloc, nfn = len(j["locations"]), len(j["functions"])
    ok(all(0 <= i < nloc for s in j["samples"] for i in s["locations"]),
       "every sample's location index is in range")
    ok(all(0 <= ln["function"] < nfn for l in j["locations"] for ln in l["lines"]),
       "every line's function index is in range")
    ok(all(-1 <= l["mapping"] < len(j["mappings"]) for l in j["locations"]),
       "every location's mapping index is in range")
    names = {f["name"] for f in j["functions"]}
    ok({"burn_heavy", "burn_light", "burner"} <= names, "JSON names the burner's functions",
       sorted(names)[:30])
    leaf = {}
    for s in j["samples"]:
        lines = j["locations"][s["locations"][0]]["lines"]
        n = j["functions"][lines[0]["function"]]["name"] if lines else "?"
        leaf[n] = leaf.get(n, 0) + s["values"][0]

    # The same window as pprof: exactly the same numbers.
    r = b.get(f"profile?id={pid}")
    eq(r.status, 200, "?id= as pprof: 200")
    eq(r.header("content-disposition"), 'attachment; filename="profile"',
       "pprof attached as Go names it")
    eq(r.header("x-pullprof-profile-id"), pid, "the same id")
    prof = Profile(r.body)
    eq(totals(prof), j["totals"], "pprof totals = JSON totals (same window)")
    pleaf = leaf_function_values(prof, 0)
    eq(pleaf.get("burn_heavy"), leaf.get("burn_heavy"),
       "burn_heavy's flat samples: pprof = JSON")

    # Folded: root first, totals equal, one line per distinct stack.
    for idx, name in ((None, "cpu"), ("samples", "samples"), ("1", "cpu")):
        q = f"profile?id={pid}&format=folded" + (f"&sample_index={idx}" if idx else "")
        r = b.get(q)
        eq(r.status, 200, f"folded ({name}): 200")
        eq(r.header("content-type"), "text/plain; charset=utf-8", "folded is text")
        rows = folded_lines(r.text)
        ok(rows, f"folded ({name}): every line is 'frames value'", r.text[:500])
        if not rows:
            continue
        i = 0 if name == "samples" else 1
        eq(sum(v for _, v in rows), totals(prof)[i],
           f"folded total ({name}) = pprof total")
        stacks = [";".join(f) for f, _ in rows]
        eq(len(stacks), len(set(stacks)), f"folded ({name}): one line per stack")
        heavy = [(f, v) for f, v in rows if f[-1] == "burn_heavy"]
        ok(heavy and all("burner" in f and f.index("burner") < len(f) - 1
                         for f, _ in heavy),
           "folded stacks are root first: burner calls burn_heavy", heavy[:3])
        if name == "samples":
            eq(sum(v for _, v in heavy), pleaf.get("burn_heavy"),
               "folded burn_heavy samples = pprof flat")

    # Text formats are gzipped for clients that take it (browsers do).
    plain = b.get(f"profile?id={pid}&format=json").body
    for accept, gz in (("gzip", True), ("br, gzip;q=0.5", True), ("*", True),
                       ("gzip;q=0", False), ("identity", False), ("br", False)):
        r = curl(f"http://127.0.0.1:{b.port}/debug/pprof/profile?id={pid}&format=json",
                 "-H", f"Accept-Encoding: {accept}")
        body = gzip.decompress(r.body) if gz and r.body[:2] == b"\x1f\x8b" else r.body
        ok(r.status == 200 and (r.header("content-encoding") == "gzip") == gz and
           r.header("vary") == "Accept-Encoding" and body == plain,
           f"Accept-Encoding: {accept}: {'gzip' if gz else 'identity'}, same JSON", r)
    r = curl(f"http://127.0.0.1:{b.port}/debug/pprof/profile?id={pid}",
             "-H", "Accept-Encoding: gzip")
    ok(r.header("content-encoding") is None and r.body[:2] == b"\x1f\x8b",
       "pprof is a gzipped file, never a Content-Encoding", r.headers)

    # Text, as people read it.
    r = b.get(f"profile?id={pid}&debug=1")
    eq(r.status, 200, "debug=1: 200")
    eq(r.header("content-type"), "text/plain; charset=utf-8", "debug=1 is text")
    t = r.text
    ok(t.startswith("Type: cpu (nanoseconds)\n"), "text header: type", t[:200])
    ok(re.search(r"^Duration: 3\.\d\ds, Total cpu = ", t, re.M), "text: duration and total",
       t[:400])
    ok(re.search(r"^Period: 10\.00ms of cpu$", t, re.M), "text: period", t[:400])
    m = re.search(r"^ +\S+ +([\d.]+)% +[\d.]+% +\S+ +[\d.]+%  burn_heavy (\S+)$", t, re.M)
    ok(m, "text: a burn_heavy row with flat%, cum% and file:line", t)
    if m:
        want = 100.0 * pleaf["burn_heavy"] / totals(prof)[0]
        ok(abs(float(m.group(1)) - want) < 0.01, "text: burn_heavy flat% = pprof's",
           f"{m.group(1)} vs {want:.2f}")
        ok(re.match(r".*tests/cpu/burn\.c:\d+$", m.group(2)), "text: file:line of burn.c",
           m.group(2))
    first = t.split("by flat cpu:\n", 1)[1].splitlines()[1]
    ok("burn_heavy" in first, "text: burn_heavy tops the flat table", first)
    r = b.get(f"profile?id={pid}&debug=1&top=1")
    ok(r.status == 200 and len(re.findall(r"  burn_heavy ", r.text)) == 1 and
       "Showing 1 of" in r.text, "top=1 shows one row per table", r.text)

    # Legacy: the gperftools format, read by its own tool and by go's.
    r = b.get(f"profile?id={pid}&format=legacy")
    eq(r.status, 200, "legacy: 200")
    eq(r.header("content-disposition"), 'attachment; filename="profile.prof"',
       "legacy attached as profile.prof")
    hdr, records, maps = parse_legacy(r.body)
    eq(hdr, (0, 3, 0, 10000, 0), "legacy header: 0 3 0 period(us) 0")
    eq(sum(c for c, _ in records), totals(prof)[0],
       "legacy record counts = pprof samples")
    ok(BURN in maps and "r-xp" in maps, "legacy ends with the maps text", maps[:300])
    with tempfile.NamedTemporaryFile(suffix=".prof") as f:
        f.write(r.body)
        f.flush()
        g = subprocess.run([GOOGLE_PPROF, "--text", BURN, f.name],
                           capture_output=True, text=True, timeout=120)
        m = re.search(r"Total: (\d+) samples", g.stdout)
        ok(m and int(m.group(1)) == totals(prof)[0],
           "google-pprof --text: same total samples", g.stdout + g.stderr)
        m = re.search(r"^\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+\d+\s+[\d.]+% burn_heavy$",
                      g.stdout, re.M)
        ok(m and int(m.group(1)) == pleaf["burn_heavy"],
           "google-pprof --text: burn_heavy's flat samples = pprof's", g.stdout)
        code, out, err = go_pprof("-top", "-unit=ms", BURN, f.name)
        eq(code, 0, "go tool pprof reads the legacy profile")
        m = re.search(r"^\s*(\d+)ms\s+[\d.]+%\s+[\d.]+%\s+\d+ms\s+[\d.]+%\s+burn_heavy$",
                      out, re.M)
        ok(m and int(m.group(1)) * 1000000 == pleaf["burn_heavy"] * 10000000,
           "go tool pprof -top: burn_heavy's flat time = pprof's", out + err)
    b.p.stop()


def test_heap_formats():
    w = Work({"PULLPROF_HEAP_RATE": "4096"})
    ok(w.port, "heapwork started", w.ready)
    w.cmd("accuracy", timeout=120)
    r = w.get("heap?format=json")
    eq(r.status, 200, "heap JSON: 200")
    j = r.json()
    pid = r.header("x-pullprof-profile-id")
    eq([t["type"] for t in j["sample_types"]],
       ["alloc_objects", "alloc_space", "inuse_objects", "inuse_space"],
       "heap JSON sample types")
    eq(j["default_sample_type"], 3, "heap JSON default: inuse_space")
    prof = Profile(w.get(f"heap?id={pid}").body)
    eq(totals(prof), j["totals"], "heap pprof totals = JSON totals (same snapshot)")
    for i, name in enumerate(["alloc_objects", "alloc_space", "inuse_objects",
                              "inuse_space"]):
        r = w.get(f"heap?id={pid}&format=folded&sample_index={name}")
        rows = folded_lines(r.text)
        ok(r.status == 200 and rows is not None, f"heap folded {name}: 200", r)
        eq(sum(v for _, v in rows or []), totals(prof)[i],
           f"heap folded {name} total = pprof total")
    r = w.get(f"heap?id={pid}&debug=1&sample_index=alloc_space")
    ok(r.status == 200 and r.text.startswith("Type: alloc_space (bytes)"),
       "heap text: the asked sample type", r.text[:200])
    if sanitized():
        skip("heap text: hw_large_blocks in MB with file:line", NO_HEAP_WHY)
    else:
        ok(re.search(r"MB .* hw_large_blocks \S+heapwork\.c:\d+$", r.text,
                     re.M),
           "heap text: hw_large_blocks in MB with file:line", r.text)
    r = w.get(f"heap?id={pid}&sample_index=alloc_space")
    p2 = Profile(r.body)
    eq(p2.s(p2.field(p2.raw, "default_sample_type")), "alloc_space",
       "sample_index sets the pprof default sample type")
    r = w.get("allocs?format=json")
    eq(r.json()["default_sample_type"], 1, "/allocs JSON default: alloc_space")
    w.quit()


def test_bad_input():
    b = Burn()
    cases = [
        ("profile?format=xml", 400, "pprof|text|folded|json|legacy"),
        ("profile?format=", 400, "pprof|text|folded|json|legacy"),
        ("profile?debug=2", 400, "debug"),
        ("profile?debug=1&format=json", 400, "debug=1"),
        ("profile?sample_index=alloc_space", 400, "samples|cpu"),
        ("profile?sample_index=2", 400, "0..1"),
        ("profile?format=legacy&sample_index=cpu", 400, "legacy"),
        ("profile?top=5", 400, "top"),
        ("profile?debug=1&top=-1", 400, "top"),
        ("profile?id=0", 400, "id"),
        ("profile?id=x", 400, "id"),
        ("profile?id=99999", 404, "no CPU profile 99999"),
        ("profile?id=1&seconds=1", 400, "seconds does not apply"),
        ("heap?id=1&peak=1", 400, "peak does not apply"),
        ("heap?id=424242", 404, "no heap profile 424242"),
        ("profile?format=json&format=folded", 400, "twice"),
        ("heap?format=legacy", 400, "CPU profile format"),
        # Names are matched exactly: these are ignored (and crashed the
        # host once).
        ("profile?sample_Index=1&seconds=x", 400, "seconds"),
        ("heap?Format=xml&seconds=x", 400, "seconds"),
    ]
    for q, status, words in cases:
        r = b.get(q)
        ok(r.status == status and words in r.text and r.header("x-go-pprof") == "1",
           f"{q}: {status} naming {words!r}", r)
    b.p.stop()


def thread_cpu(pid, tid):
    """user + system seconds of one thread, as /proc counts them."""
    with open(f"/proc/{pid}/task/{tid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_threads():
    b = Burn()
    time.sleep(1.0)
    pid = b.p.p.pid
    tids = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    before = {t: thread_cpu(pid, t) for t in tids}
    r = b.get("threads")
    after = {t: thread_cpu(pid, t) for t in tids}
    eq(r.status, 200, "/threads: 200")
    eq(r.header("content-type"), "application/json", "/threads is JSON")
    j = r.json()
    eq(j["pid"], pid, "/threads: pid")
    eq(sorted(t["tid"] for t in j["threads"]), tids,
       "/threads lists the process's threads (as /proc/PID/task)")
    eq(j["count"], len(j["threads"]), "/threads: count")
    by_name = {t["name"]: t for t in j["threads"]}
    ok({"burn-0", "burn-1", "pullprof-http"} <= set(by_name),
       "the burners and the agent's HTTP thread are named", sorted(by_name))
    main = [t for t in j["threads"] if t["main"]]
    ok(len(main) == 1 and main[0]["tid"] == pid, "one main thread, tid = pid", main)
    ok(by_name["pullprof-http"]["agent"] and not by_name["burn-0"]["agent"],
       "agent threads are marked", by_name)
    cpu = {t["tid"]: t["user_seconds"] + t["system_seconds"] for t in j["threads"]}
    ok(all(before[t] - 0.002 <= cpu[t] <= after[t] + 0.002 for t in tids),
       "each thread's CPU time is what /proc counted around the request",
       [(t, before[t], cpu[t], after[t]) for t in tids])
    ok(all(t["state"] in "RSDTtZXI" and t["state_name"] for t in j["threads"]),
       "every thread has a state", j["threads"])
    time.sleep(1.0)
    again = {t["name"]: t for t in b.get("threads").json()["threads"]}
    ok(again["burn-0"]["user_seconds"] + again["burn-0"]["system_seconds"] >
       by_name["burn-0"]["user_seconds"] + by_name["burn-0"]["system_seconds"],
       "a burner's CPU time grows between two reads", (by_name["burn-0"], again["burn-0"]))
    r = curl(f"http://127.0.0.1:{b.port}/debug/pprof/threads", "-X", "POST")
    ok(r.status == 405 and r.json()["status"] == 405, "POST /threads: 405 in JSON", r)
    b.p.stop()


run([test_cpu_formats, test_heap_formats, test_bad_input, test_threads])

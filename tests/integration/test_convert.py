"""pullprof-convert: legacy (gperftools) CPU profiles to pprof, with the real
tool on hand-built files (valid, and each kind of malformed one), on files
written by gperftools' own profiler (compared with google-pprof's reading of
the same file), and under valgrind; and --merge, on the CPU and heap
profiles of two preloaded python3 processes, read back with protoc and
go tool pprof."""
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time

import pptest
from legacyfile import MAPS, build, words
from pptest import (BUILD, MEMCHECK, NO_HEAP_WHY, NO_VALGRIND_WHY, Proc,
                    Profile, curl, eq, go_pprof, ok, sanitized, run, skip)

CONVERT = os.path.join(BUILD, "pullprof-convert")
SPIN = os.path.join(BUILD, "tests", "convert", "spin")
BURN = os.path.join(BUILD, "tests", "cpu", "burn")
LIBPROFILER = "/usr/lib/x86_64-linux-gnu/libprofiler.so"
tmp = tempfile.mkdtemp(prefix="pp-convert-")


def write(name, data):
    path = os.path.join(tmp, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def convert(*args, stdin=None, prefix=()):
    p = subprocess.run([*prefix, CONVERT, *args], input=stdin,
                       capture_output=True, timeout=600)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def convert_file(data, name="in.prof"):
    """Convert bytes; returns (exit code, Profile or None, stderr)."""
    src = write(name, data)
    out = os.path.join(tmp, name + ".pb.gz")
    if os.path.exists(out):
        os.unlink(out)
    code, _, err = convert("-o", out, src)
    prof = None
    if code == 0 and os.path.exists(out):
        with open(out, "rb") as f:
            prof = Profile(f.read())
    return code, prof, err


def summary(p):
    """What a profile says, independent of IDs and order: sample types,
    period type and period, and {stack of addresses: values}."""
    addrs = {l["id"][0]: p.field(l, "address") for l in p.locations}
    samples = {}
    for s in p.samples:
        key = tuple(addrs[i] for i in s.get("location_id", []))
        samples[key] = s.get("value", [])
    pt = p.raw.get("period_type", [{}])[0]
    return (p.sample_types(), (p.s(p.field(pt, "type")), p.s(p.field(pt, "unit"))),
            p.field(p.raw, "period"), samples)


def test_usage():
    code, out, _ = convert("--help")
    eq(code, 0, "--help exits 0")
    text = out.decode()
    for part in ("SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS", "-o, --output"):
        ok(part in text, f"--help has {part}")
    code, _, err = convert()
    eq(code, 2, "no input: exit 2")
    ok("Usage:" in err, "no input: usage on stderr", err)
    code, _, err = convert("--frobnicate", "x")
    eq(code, 2, "unknown option: exit 2")
    code, _, err = convert("a", "b")
    eq(code, 2, "two inputs: exit 2")
    code, _, err = convert("-o", os.path.join(tmp, "none.pb.gz"),
                           os.path.join(tmp, "does-not-exist.prof"))
    eq(code, 1, "missing input file: exit 1")
    ok("does-not-exist.prof: No such file" in err, "names the missing file", err)


def test_valid():
    code, p, err = convert_file(build())
    eq(code, 0, "hand-built profile converts")
    eq(err, "", "no warning: /bin/true exists")
    types, ptype, period, samples = summary(p)
    eq(types, [("samples", "count"), ("cpu", "nanoseconds")], "sample types")
    eq(ptype, ("cpu", "nanoseconds"), "period type")
    eq(period, 10000 * 1000, "period: 10000 us in ns")
    eq(samples, {(0x401000, 0x402000): [5, 5 * 10000 * 1000],
                 (0x401010,): [1, 10000 * 1000]}, "samples: counts and cpu")
    m = [x for x in p.mappings if p.s(p.field(x, "filename")) == "/bin/true"]
    eq(len(m), 1, "the executable mapping of /bin/true is in the profile")
    if m:
        eq(p.field(m[0], "id"), 1, "and is mapping 1 (the main one)")
        eq(p.s(p.field(m[0], "build_id")),
           __import__("pptest").elf_build_id("/bin/true"),
           "with the build ID of the file")
    # Records with the same stack are summed.
    code, p2, _ = convert_file(build(records=[(2, [0x401000]), (3, [0x401000])]))
    eq(summary(p2)[3], {(0x401000,): [5, 5 * 10000 * 1000]},
       "equal stacks are summed")
    # Every word size and byte order says the same.
    for ws, endian, what in ((4, "<", "32-bit"), (8, ">", "big-endian 64-bit"),
                             (4, ">", "big-endian 32-bit")):
        code, q, err = convert_file(build(ws=ws, endian=endian), f"{ws}{endian}.prof")
        eq(code, 0, f"{what} profile converts")
        ok(q and summary(q) == summary(p), f"{what}: the same profile", err)
    # Extra header slots are allowed (the format says >= 3).
    code, q, _ = convert_file(build(header=(0, 5, 0, 10000, 0, 7, 7)))
    ok(code == 0 and summary(q) == summary(p), "a longer header is read")


def test_stdio():
    data = build()
    code, out, err = convert("-", stdin=data)
    eq(code, 0, "stdin to stdout")
    ok(out[:2] == b"\x1f\x8b", "gzip on stdout")
    code, _, err = convert("-", stdin=data[:50])
    eq(code, 1, "bad stdin: exit 1")
    ok(err.startswith("pullprof-convert: <stdin>: offset "), "names <stdin>", err)


def test_missing_binaries():
    maps = ("00400000-00452000 r-xp 00000000 08:02 1 /nonexistent/app\n"
            "00500000-00600000 r-xp 00000000 08:02 1 /bin/true (deleted)\n")
    code, p, err = convert_file(build(records=[(1, [0x401000, 0x500100]),
                                               (1, [0x700000, 0x401000])],
                                      maps=maps))
    eq(code, 0, "binaries gone: still converts")
    # 0x700000 is in no mapping: it still gets one, "[unmapped]".
    pptest.check_mapped(p, "addresses outside every mapping")
    homes = {p.field(l, "address"): p.s(p.field(
        p.map_by_id[p.field(l, "mapping_id")], "filename"))
        for l in p.locations}
    eq(homes, {0x401000: "/nonexistent/app", 0x500100: "/bin/true",
               0x700000: "[unmapped]"},
       "each address in its mapping, the one in none in [unmapped]")
    ok("/nonexistent/app: No such file or directory: its addresses stay "
       "unsymbolized" in err, "warns about the missing binary", err)
    ok("/bin/true was deleted or replaced" in err, "warns about the deleted one", err)
    ok(p and all(not l.get("line") for l in p.locations),
       "addresses only", p and p.locations)
    code, _, err = convert_file(build(maps=""))
    eq(code, 0, "no maps text: converts")
    ok("no executable mappings" in err, "and says it has addresses only", err)
    code, _, err = convert("-q", "-o", os.path.join(tmp, "q.pb.gz"),
                           write("q.prof", build(maps="")))
    eq((code, err), (0, ""), "-q: no warnings")


# Each malformed file: (name, bytes, the message expected after
# "offset N: ", N).
W = 8
BAD = [
    ("empty", b"", r"offset 0: the file has 0 bytes", None),
    ("header count", words(8, "<", 1, 3, 0, 100, 0) + words(8, "<", 0, 1, 0),
     r"offset 0: not a gperftools CPU profile: header count 0x1, must be 0", None),
    ("header words", words(8, "<", 0, 2, 0, 100, 0) + words(8, "<", 0, 1, 0),
     r"offset 8: not a gperftools CPU profile: 2 header slots", None),
    ("version", build(header=(0, 3, 1, 100, 0)),
     r"offset 16: format version 1, only version 0 is known", None),
    ("period", build(header=(0, 3, 0, 0, 0)),
     r"offset 24: sampling period 0", None),
    ("huge period", build(header=(0, 3, 0, 2**62, 0)),
     r"offset 24: sampling period \d+ microseconds is too long", None),
    ("padding", build(header=(0, 3, 0, 100, 9)),
     r"offset 32: header padding 0x9, must be 0", None),
    ("header past the end", words(8, "<", 0, 1000, 0, 100, 0),
     r"offset 8: the header has 1002 slots but the file ends at byte 40", None),
    ("depth 0", build(records=[(1, [])]),
     r"offset 48: record with depth 0", None),
    ("depth too large", words(8, "<", 0, 3, 0, 100, 0, 1, 1000000),
     r"offset 48: record depth 1000000 exceeds the remaining 0 words", None),
    ("deep record", build(records=[(1, list(range(1, 5000)))]),
     r"offset 48: record depth 4999 is over the limit of 4096", None),
    ("count overflow", build(records=[(2**62, [0x401000])]),
     r"offset 40: sample count \d+ makes the total CPU time overflow", None),
    ("no trailer", build(trailer=None, maps=""),
     r"offset 96: the file ends before the trailer \(0 1 0\) after 2 records",
     None),
    ("truncated record", build()[:70],
     r"offset 48: record depth 2 exceeds the remaining 1 words", None),
    ("truncated trailer", build(maps="")[:-8],
     r"offset 96: the file ends inside the trailer", None),
    ("bad trailer", build(trailer=(0, 2, 0, 0)),
     r"offset 96: record with sample count 0 \(only the trailer 0 1 0", None),
    ("bad trailer pc", build(trailer=(0, 1, 5)),
     r"offset 96: record with sample count 0", None),
    ("maps: reversed range", build(maps=MAPS + "00400000-00300000 r-xp 00000000 08:02 1 /x\n"),
     r"offset \d+: maps text line 4: the mapping ends before it starts", None),
    ("maps: permissions", build(maps="00400000-00500000 rzxp 00000000 08:02 1 /x\n"),
     r"offset 120: maps text line 1: bad permission letters", None),
    ("maps: device", build(maps="00400000-00500000 r-xp 00000000 0802 1 /x\n"),
     r"offset 120: maps text line 1: expected the device", None),
    ("maps: NUL", build(maps=b"00400000-00500000 r-xp 00000000 08:02 1 /x\0y\n"),
     r"offset 120: maps text line 1: NUL byte", None),
    ("maps: overlap", build(maps="00400000-00500000 r-xp 00000000 08:02 1 /a\n"
                            "00450000-00600000 r-xp 00000000 08:02 1 /b\n"),
     r"offset 120: maps text: executable mappings 400000-500000 and "
     r"450000-600000 overlap", None),
    ("maps: 17 hex digits", build(maps="10000000000000000-2 r-xp 00000000 08:02 1 /a\n"),
     r"offset 120: maps text line 1: expected start-limit in hex", None),
]


def test_malformed():
    for name, data, want, _ in BAD:
        fname = "bad-" + re.sub(r"\W+", "-", name) + ".prof"
        path = write(fname, data)
        out = os.path.join(tmp, fname + ".pb.gz")
        code, _, err = convert("-o", out, path)
        eq(code, 1, f"{name}: exit 1 (not a crash)")
        ok(re.match(rf"pullprof-convert: {re.escape(path)}: {want}", err),
           f"{name}: the message names the file and the offset", err)
        ok(not os.path.exists(out), f"{name}: no output written")
    # Lines that are not mappings are ignored, as the format says.
    code, _, err = convert_file(build(maps="build=/x\n\n" + MAPS + "garbage\n"))
    eq(code, 0, "lines that are no mappings are ignored")


def gperftools_profile(seconds=2.0):
    out = os.path.join(tmp, "spin.prof")
    # (in a sanitizer build, with the sanitizer's runtime ahead of it)
    env = dict(os.environ, CPUPROFILE=out, CPUPROFILE_FREQUENCY="250",
               **pptest.preload_env(LIBPROFILER))
    subprocess.run([SPIN, str(seconds)], env=env, check=True,
                   capture_output=True, timeout=60)
    return out


def google_pprof_text(binary, prof):
    """google-pprof's flat/cum sample counts by function, and the total."""
    p = subprocess.run(["google-pprof", "--text", "--nodecount=1000",
                        "--nodefraction=0", "--edgefraction=0", binary, prof],
                       capture_output=True, text=True, timeout=300)
    total = int(re.search(r"Total: (\d+) samples", p.stdout).group(1))
    rows = {}
    for line in p.stdout.splitlines():
        m = re.match(r"\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+(\d+)\s+[\d.]+%\s+(\S+)", line)
        if m:
            rows[m.group(3)] = (int(m.group(1)), int(m.group(2)))
    return total, rows, p.stdout


def go_pprof_top(path):
    code, out, err = go_pprof("-top", "-sample_index=samples", "-nodecount=1000",
                              "-nodefraction=0", "-edgefraction=0", path)
    rows = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+(\d+)\s+[\d.]+%\s+(\S+)", line)
        if m:
            rows[m.group(3)] = (int(m.group(1)), int(m.group(2)))
    total = re.search(r"of (\d+) total", out)
    return int(total.group(1)) if total else None, rows, out + err


def test_gperftools():
    if pptest.SANITIZER == "tsan":
        # libprofiler's SIGPROF is deferred by TSan like ours; its stacks
        # then start in TSan's signal machinery, where google-pprof and
        # pullprof-convert attribute `main` differently.
        skip("gperftools' own profile", pptest.NO_CPU_TRUTH_WHY)
        return
    if not os.path.exists(LIBPROFILER) or not shutil.which("google-pprof"):
        skip("gperftools' own profile", "no libprofiler.so or google-pprof")
        return
    prof = gperftools_profile()
    out = prof + ".pb.gz"
    code, _, err = convert("-o", out, prof)
    eq(code, 0, "gperftools' own file converts")
    ok("warning" not in err, "no warning: every binary is here", err)
    gtotal, grows, gtext = google_pprof_text(SPIN, prof)
    total, rows, text = go_pprof_top(out)
    ok(gtotal > 250, f"google-pprof counts {gtotal} samples", gtext)
    eq(total, gtotal, "go tool pprof counts the same total samples")
    for fn in ("spin_heavy", "spin_light", "spin_both", "main"):
        eq(rows.get(fn), grows.get(fn),
           f"{fn}: same flat and cumulative samples as google-pprof")
    hot = max(rows, key=lambda k: rows[k][0]) if rows else None
    eq(hot, "spin_heavy", "the hottest function is spin_heavy", )
    p = Profile(open(out, "rb").read())
    pt = p.raw.get("period_type", [{}])[0]
    eq(p.field(p.raw, "period"), 4000 * 1000, "period: 4 ms (250 Hz) in ns")
    eq(p.s(p.field(pt, "unit")), "nanoseconds", "period unit")
    heavy = [f for st in (p.stack(s) for s in p.samples) for fr in st
             for f in fr if f[0] == "spin_heavy"]
    ok(heavy and heavy[0][2].endswith("tests/convert/spin.c") and heavy[0][3] > 0,
       "spin_heavy has file:line from DWARF", heavy[:1])
    # The same file through valgrind: no error, no leak.
    if sanitized():
        skip("the converter under valgrind", NO_VALGRIND_WHY)
        return
    code, _, err = convert("-o", out + ".vg", prof, prefix=MEMCHECK)
    eq(code, 0, "valgrind: exit 0 (9 would mean errors or leaks)")
    m = re.search(r"ERROR SUMMARY: (\d+) errors", err)
    ok(m and m.group(1) == "0", "valgrind: 0 errors", err[-3000:])
    # A malformed file under valgrind too.
    code, _, err = convert("-o", out + ".vg2", write("vg-bad.prof", BAD[12][1]),
                           prefix=MEMCHECK)
    eq(code, 1, "valgrind, malformed input: exit 1, no error or leak")


def symbolic(p, drop_zero_counts=False):
    """The samples of a profile by what they mean: {stack: values}, each
    frame (function, file, line) innermost first, each location a tuple of
    them (bare addresses as "0x..."); plus types, period type, period."""
    out = {}
    for smp in p.samples:
        vals = smp.get("value", [])
        if drop_zero_counts and vals and vals[0] == 0:
            continue
        stack = []
        for i in smp.get("location_id", []):
            loc = p.loc_by_id[i]
            fr = tuple((f[0], f[2], f[3]) for f in p.frames(loc))
            stack.append(fr or (hex(p.field(loc, "address")),))
        key = tuple(stack)
        old = out.get(key, [0] * len(vals))
        out[key] = [a + b for a, b in zip(old, vals)]
    pt = p.raw.get("period_type", [{}])[0]
    return (p.sample_types(), (p.s(p.field(pt, "type")), p.s(p.field(pt, "unit"))),
            p.field(p.raw, "period"), out)


def top_lines(path):
    """go tool pprof -top -lines (flat and cumulative by function and
    file:line; thread labels do not matter) without its header: time and
    duration are not in a legacy file."""
    code, out, err = go_pprof("-top", "-lines", "-nodecount=100000",
                              "-nodefraction=0", "-edgefraction=0", path)
    i = out.find("      flat  flat%")
    return code, out[i:] if i >= 0 else out + err


# A C++ name is demangled with the process's own __cxa_demangle: a C host
# (burn) has none, the converter has. A sample that lands in C++ code
# inlined into the host (the ThreadSanitizer runtime's __tsan::cur_thread()
# in a TSan build) is then named "cur_thread" by the agent (DWARF's plain
# name) and "__tsan::cur_thread()" by the converter. Both name the same
# function at the same file and line: compared without qualifiers and
# parameters.
def plain_name(name):
    return re.sub(r"\(.*\)$", "", name).split("::")[-1]


def plain_names(sym):
    *head, stacks = sym
    out = {}
    for k, v in stacks.items():
        key = tuple(tuple(f if isinstance(f, str) else (plain_name(f[0]), *f[1:])
                          for f in loc) for loc in k)
        old = out.get(key, [0] * len(v))
        out[key] = [a + b for a, b in zip(old, v)]
    return (*head, out)


def plain_text(text):
    return re.sub(r"(?:[\w~]+::)+([\w~]+)\([^)]*\)", r"\1", text)


def test_agent_legacy():
    """The agent's own ?format=legacy, converted, equals the agent's pprof
    of the same window (?id=)."""
    burn = Proc([BURN, "2", "600"], env={"PULLPROF_LISTEN": "127.0.0.1:0"},
                stdin=False)
    try:
        m = burn.wait_line(burn.out_lines, r"^port (\d+)", timeout=10)
        base = f"http://127.0.0.1:{int(m.group(1))}/debug/pprof/profile"
        # The burners' CPU by the scheduler's count, every 20 ms while the
        # window runs (see the samples' check below).
        marks, done = [], threading.Event()

        def burners():
            return pptest.threads_cpu(burn.pid,
                                      lambda tid, n: n.startswith("burn-"))

        def watch():
            while not done.is_set():
                marks.append((time.time(), burners()))
                time.sleep(0.02)
        w = threading.Thread(target=watch)
        w.start()
        try:
            r = curl(base + "?seconds=3&hz=200&format=legacy", timeout=60)
        finally:
            done.set()
            w.join()
        marks.append((time.time(), burners()))
        eq(r.status, 200, "agent: format=legacy 200")
        pid = r.header("x-pullprof-profile-id")
        ok(pid and pid.isdigit(), "agent: the answer has a profile id", r.headers)
        legacy = write("agent.prof", r.body)
        r2 = curl(f"{base}?id={pid}&format=pprof", timeout=60)
        eq(r2.status, 200, "agent: the same profile again as pprof (?id=)")
        agent_pb = write("agent.pb.gz", r2.body)
    finally:
        burn.stop()
    out = os.path.join(tmp, "agent-converted.pb.gz")
    code, _, err = convert("-o", out, legacy)
    eq(code, 0, "the agent's legacy profile converts")
    ok("warning" not in err, "no warning", err)
    mine = plain_names(symbolic(Profile(open(out, "rb").read())))
    theirs = plain_names(symbolic(Profile(r2.body), drop_zero_counts=True))
    eq(mine[:3], theirs[:3], "same sample types, period type and period")
    # The check asked for more than 100 samples: half a second of the
    # burners' CPU at 200 Hz, which a CI run under load (four busy loops,
    # the sanitizer suites beside) did not give them in the 3 s window (58
    # samples, the agent right). What it needs is samples, and as many as
    # the CPU the burners got over the window's span (its time_nanos and
    # duration_nanos, on the line between two reads): each sample stands
    # for a 5 ms period of their CPU, give or take the count's spread
    # (a period times its square root) and a period per thread at the
    # window's ends. The conversion is compared with the agent's below.
    span = Profile(r2.body)
    t0 = span.field(span.raw, "time_nanos") / 1e9
    t1 = t0 + span.field(span.raw, "duration_nanos") / 1e9

    def cpu_at(t):
        for (a, ca), (b, cb) in zip(marks, marks[1:]):
            if a <= t <= b:
                return ca + (cb - ca) * ((t - a) / (b - a) if b > a else 0)
        return None
    real = (cpu_at(t1) - cpu_at(t0)
            if cpu_at(t0) is not None and cpu_at(t1) is not None else None)
    n = sum(v[0] for v in theirs[3].values())
    sampled = sum(v[1] for v in theirs[3].values()) / 1e9
    slack = (4 * 0.005 * (real * 200) ** 0.5 + 0.2 * real + 2 * 0.005
             if real is not None else 0)
    ok(n > 0 and real is not None and abs(sampled - real) <= slack,
       f"the agent's profile has samples: {n}, {sampled:.2f} s of the "
       f"{real or 0:.2f} s CPU the burners used in its span (within "
       f"{slack:.2f} s)", (theirs[3], marks[:2], marks[-2:], t0, t1))
    only_mine = {k: v for k, v in mine[3].items() if theirs[3].get(k) != v}
    only_theirs = {k: v for k, v in theirs[3].items() if mine[3].get(k) != v}
    ok(not only_mine and not only_theirs,
       f"the same {len(theirs[3])} stacks (function, file:line, inline "
       f"frames) with the same values",
       f"converted only: {list(only_mine.items())[:3]}\n"
       f"agent only: {list(only_theirs.items())[:3]}")
    hot = [k for k in mine[3] if k and k[0] and k[0][0][0] == "burn_heavy"]
    ok(hot and hot[0][0][0][1].endswith("tests/cpu/burn.c"),
       "burn_heavy is named with its file", hot[:1])
    c1, t1 = top_lines(out)
    c2, t2 = top_lines(agent_pb)
    t1, t2 = plain_text(t1), plain_text(t2)
    # The same rows; rows that tie (no flat time, one name inlined) may
    # come in another order (seen under TSan, whose runtime frames a
    # sample can land in).
    ok(c1 == 0 and c2 == 0 and
       sorted(t1.splitlines()) == sorted(t2.splitlines()) and
       "burn_heavy" in t1,
       "go tool pprof -top -lines reads the same from both", t1[:1500] + "\n---\n" + t2[:1500])


# A python3 worker, preloaded: N KiB-pages kept live (the heap profile's
# truth), then CPU burnt in burn_merge until killed.
WORKER = ("import sys, time\n"
          "keep = [bytearray(4096) for _ in range(int(sys.argv[1]))]\n"
          "print('ready', flush=True)\n"
          "def burn_merge(n):\n"
          "    x = 0\n"
          "    for i in range(n):\n"
          "        x += i * i\n"
          "    return x\n"
          "end = time.time() + 300\n"
          "while time.time() < end:\n"
          "    burn_merge(100000)\n")


def start_worker(pages):
    p = Proc(["/usr/bin/python3", "-c", WORKER, str(pages)],
             env=pptest.preload_env(PULLPROF_LISTEN="127.0.0.1:0"), stdin=False)
    m = p.wait_line(p.err_lines, rf"pullprof\[{p.pid}\]: serving "
                    r"http://127\.0\.0\.1:(\d+)/", timeout=30)
    ready = p.wait_line(p.out_lines, "^ready", timeout=60)
    ok(m and ready, f"preloaded python3 {p.pid} serves and allocated",
       p.stderr_text()[-2000:])
    return p, int(m.group(1)) if m else None


def fetch_all(urls, timeout=60):
    """GET each URL at the same time; the bodies, in order."""
    out = [None] * len(urls)

    def get(i):
        r = curl(urls[i], timeout=timeout)
        out[i] = r.body if r.status == 200 else None
    threads = [threading.Thread(target=get, args=(i,)) for i in range(len(urls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def by_pid(p):
    """{pid: (sample count, summed values, {function names})}; samples
    with no pid label or more than one are under None."""
    out = {}
    for smp in p.samples:
        keys = [p.s(p.field(l, "key")) for l in smp.get("label", [])]
        pid = p.labels(smp).get("pid") if keys.count("pid") == 1 else None
        n, vals, names = out.get(pid, (0, None, set()))
        v = smp.get("value", [])
        vals = [a + b for a, b in zip(vals, v)] if vals else list(v)
        names |= {f[0] for loc in p.stack(smp) for f in loc}
        out[pid] = (n + 1, vals, names)
    return out


def own(p):
    """The same for a single process's profile (no pid label needed)."""
    n, vals, names = 0, None, set()
    for smp in p.samples:
        v = smp.get("value", [])
        vals = [a + b for a, b in zip(vals, v)] if vals else list(v)
        names |= {f[0] for loc in p.stack(smp) for f in loc}
        n += 1
    return n, vals or [0] * len(p.sample_types()), names


def accounted(args, path):
    """go tool pprof -top: the value the shown nodes account for, and the
    whole output."""
    code, out, err = go_pprof("-top", "-nodecount=1000000", "-nodefraction=0",
                              "-edgefraction=0", *args, path)
    m = re.search(r"Showing nodes accounting for ([^,]+),", out)
    return (m.group(1) if m else None), out + err


def check_merged(what, files, pids, index):
    """Merge files (one per pid) with the CLI; check it with protoc and
    go tool pprof against the inputs. index: a count sample index."""
    out = os.path.join(tmp, f"merged-{what}.pb.gz")
    code, _, err = convert("--merge", "-o", out,
                           *[f"{pid}={f}" for pid, f in zip(pids, files)])
    eq((code, err), (0, ""), f"{what}: --merge exits 0, says nothing")
    if code:
        return None
    data = open(out, "rb").read()
    m = Profile(data)
    inputs = [Profile(open(f, "rb").read()) for f in files]
    got = by_pid(m)
    ok(None not in got, f"{what}: every sample has exactly one pid label",
       got.get(None))
    eq(m.sample_types(), inputs[0].sample_types(), f"{what}: sample types")
    for pid, p in zip(pids, inputs):
        n, vals, names = own(p)
        gn, gvals, gnames = got.get(str(pid), (0, [], set()))
        ok(n > 0, f"{what}: pid {pid}'s profile has samples")
        eq((gn, gvals), (n, vals),
           f"{what}: pid {pid}: its {n} samples, values summed the same")
        eq(gnames, names, f"{what}: pid {pid}: the same {len(names)} "
           "function names")
    eq(len(m.locations), sum(len(p.locations) for p in inputs),
       f"{what}: locations stay per process")
    keys = {tuple(p.s(p.field(f, k)) for k in ("name", "system_name",
                                               "filename")) +
            (p.field(f, "start_line"),) for p in inputs for f in p.functions}
    eq(len(m.functions), len(keys),
       f"{what}: functions shared by name, system name, file, start line "
       f"({sum(len(p.functions) for p in inputs)} in, {len(keys)} out)")
    pptest.check_mapped(m, f"{what} merged")
    eq(m.field(m.raw, "time_nanos"),
       min(p.field(p.raw, "time_nanos") for p in inputs),
       f"{what}: time_nanos is the earliest")
    # go tool pprof: -raw shows every sample's pid, -tags splits by it,
    # -tagfocus picks each process with exactly its own values.
    code, raw, rerr = go_pprof("-raw", out)
    ok(code == 0 and all(f"pid:[{pid}]" in raw for pid in pids),
       f"{what}: go tool pprof -raw shows both pids", (raw + rerr)[:2000])
    code, tags, terr = go_pprof("-tags", f"-sample_index={index}", out)
    ok(code == 0 and re.search(r"pid: Total", tags) and
       all(re.search(rf"\): {pid}$", tags, re.M) for pid in pids),
       f"{what}: go tool pprof -tags splits by pid", tags + terr)
    for pid, f in zip(pids, files):
        # A value that looks like a number is taken as a numeric range
        # by -tagfocus: anchored, it is a regexp on the string label.
        mine, text = accounted([f"-tagfocus=pid=^{pid}$",
                                f"-sample_index={index}"], out)
        theirs, text2 = accounted([f"-sample_index={index}"], f)
        ok(mine is not None and mine == theirs,
           f"{what}: -tagfocus=pid=^{pid}$ accounts for {theirs} "
           f"{index}, as pid {pid}'s own profile", text + text2)
    return out


def test_merge_real():
    if sanitized():
        skip("--merge of two preloaded python3", "python3 preloaded with a "
             "sanitizer runtime hangs at its start (HACKING.md)")
        return
    workers = [start_worker(10000), start_worker(5000)]
    try:
        pids = [w.pid for w, _ in workers]
        ports = [port for _, port in workers]
        cpu = fetch_all([f"http://127.0.0.1:{p}/debug/pprof/profile?seconds=3"
                         for p in ports])
        heap = fetch_all([f"http://127.0.0.1:{p}/debug/pprof/heap"
                          for p in ports])
    finally:
        for w, _ in workers:
            w.stop()
    ok(all(cpu) and all(heap), "both processes answered /profile and /heap")
    if not (all(cpu) and all(heap)):
        return
    cfiles = [write(f"cpu-{pid}.pb.gz", b) for pid, b in zip(pids, cpu)]
    hfiles = [write(f"heap-{pid}.pb.gz", b) for pid, b in zip(pids, heap)]
    merged = check_merged("cpu", cfiles, pids, "samples")
    if merged:
        m = Profile(open(merged, "rb").read())
        hot = [n for n in by_pid(m).get(str(pids[1]), (0, 0, set()))[2]
               if "EvalFrame" in n]
        ok(hot, "cpu: the second process's samples are in python's "
           "interpreter", hot)
    check_merged("heap", hfiles, pids, "inuse_objects")
    # Types that differ: the heap part is left out, and the profile says so.
    out = os.path.join(tmp, "mixed.pb.gz")
    code, _, err = convert("--merge", "-o", out, f"{pids[0]}={cfiles[0]}",
                           f"{pids[1]}={hfiles[1]}")
    eq(code, 0, "cpu + heap: exits 0")
    ok("1 of 2 profiles left out" in err, "and warns", err)
    m = Profile(open(out, "rb").read())
    eq(set(by_pid(m)), {str(pids[0])}, "only the cpu profile's samples")
    said = [c for c in (m.s(i) for i in m.raw.get("comment", []))
            if c.startswith(f"pid {pids[1]} left out of the merge")]
    ok(said and "inuse_space/bytes" in said[0],
       "a comment says which pid was left out and its types", said)
    if pptest.SANITIZER != "none":
        return
    code, _, err = convert("--merge", "-o", out + ".vg",
                           *[f"{pid}={f}" for pid, f in zip(pids, hfiles)],
                           prefix=MEMCHECK)
    eq(code, 0, "--merge under valgrind: exit 0 (9 would mean errors or "
       "leaks)")
    m = re.search(r"ERROR SUMMARY: (\d+) errors", err)
    ok(m and m.group(1) == "0", "valgrind: 0 errors", err[-3000:])


def test_merge_usage():
    good = write("one.pb.gz", gzip_profile())
    for args, want in (
            (["--merge"], "missing PID=FILE"),
            (["--merge", good], "PID=FILE expected"),
            (["--merge", f"0={good}"], "PID=FILE expected"),
            (["--merge", f"12x={good}"], "PID=FILE expected"),
            (["--merge", "5="], "PID=FILE expected"),
            (["--merge", "1=-", "2=-"], "standard input ('-') can be read once"),
            (["--max-mb=4", good], "--max-mb and --note go with --merge"),
            (["--merge", "--max-mb=0", f"1={good}"], "--max-mb=0:")):
        code, _, err = convert(*args)
        eq(code, 2, f"{' '.join(args)[:40]}: exit 2")
        ok(want in err and "Usage:" in err, f"... says {want}", err)
    bad = write("bad.pb", b"\x0a\x05\x08")
    code, _, err = convert("--merge", "-o", os.path.join(tmp, "x.pb.gz"),
                           f"7={good}", f"8={bad}")
    eq(code, 1, "a file that is no profile: exit 1")
    eq(err.strip(), f"pullprof-convert: {bad} (pid 8): byte 0: Profile: "
       "field 1: length 5 runs past the end (1 bytes left)",
       "the message names the file, its pid and what is wrong")
    ok(not os.path.exists(os.path.join(tmp, "x.pb.gz")), "no output written")
    code, out, err = convert("--merge", "--note=pid 9: no answer",
                             f"7={good}", f"8={good}")
    eq(code, 0, "the same profile twice, to stdout: exit 0")
    p = Profile(out)
    eq(sorted(p.labels(s)["pid"] for s in p.samples), ["7", "8"],
       "two samples, one per pid")
    ok("pid 9: no answer" in [p.s(i) for i in p.raw.get("comment", [])],
       "--note is a comment", p.raw.get("comment"))


def gzip_profile():
    """A one-sample pprof profile, as protoc encodes it from text."""
    import gzip
    text = ('sample_type { type: 1 unit: 2 } '
            'sample { location_id: 1 value: 3 } '
            'location { id: 1 mapping_id: 1 address: 4096 line { function_id: 1 } } '
            'mapping { id: 1 memory_start: 4096 memory_limit: 8192 filename: 4 } '
            'function { id: 1 name: 3 } '
            'string_table: "" string_table: "samples" string_table: "count" '
            'string_table: "hello" string_table: "/bin/hello"')
    p = subprocess.run(["protoc", f"-I{pptest.PROFILE_PROTO_DIR}",
                        "--encode=perftools.profiles.Profile", "profile.proto"],
                       input=text.encode(), capture_output=True, check=True)
    return gzip.compress(p.stdout)


try:
    run([test_usage, test_valid, test_stdio, test_missing_binaries,
         test_malformed, test_gperftools, test_agent_legacy, test_merge_usage,
         test_merge_real])
finally:
    shutil.rmtree(tmp, ignore_errors=True)

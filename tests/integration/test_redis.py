"""A real server no one here wrote: Debian's redis-server, preloaded with
the agent, under its own load generator (redis-benchmark).

It runs as it does without the agent (every benchmark request answered, the
data intact, INFO and PING afterwards, SHUTDOWN NOSAVE and SIGTERM exit 0,
nothing on stderr but the agent's startup line); a 1000 Hz CPU window taken
under load and the heap profile carry redis's own function names; the heap
profile accounts for the values redis keeps; and /status, /cmdline and the
Perfetto trace show the process title redis writes over its argv as ps
shows it.

Debian's redis-server is stripped, but it is linked with -rdynamic (for its
own crash reports), so its global functions are in .dynsym: the names
checked here are the ones `nm -D` lists (test_exported_names says so first).
Its static functions (the socket event handlers between aeMain and
readQueryFromClient, among others) have no symbol at all, and show as
[redis-check-rdb] frames (redis-server is a symlink to it).

Redis is linked with Debian's libjemalloc, which exports the plain malloc
family (no je_ prefix), and redis calls malloc, calloc, realloc, free and
malloc_usable_size by those names: the preloaded libpullprof comes first in
the lookup order, so its wrappers see every allocation and hand it on to
jemalloc (RTLD_NEXT). INFO's mem_allocator still says jemalloc, and its
own statistics hold the data.
"""
import gzip
import os
import re
import shutil
import subprocess
import time
from collections import Counter

import pptest
from pptest import (Proc, Profile, _parse_text_format, curl, elf_build_id,
                    eq, find_protos, free_port, go_pprof, ok, run, sanitized,
                    skip)

REDIS = shutil.which("redis-server")
BENCH = shutil.which("redis-benchmark")
CLI = shutil.which("redis-cli")
BINARY = os.path.realpath(REDIS) if REDIS else None

# A request's path through redis, outermost first, as its CPU samples must
# show it; and the commands the benchmark runs (a 3 s window sees some).
CPU_PATH = ["main", "aeMain", "readQueryFromClient", "processInputBuffer",
            "processCommand", "call"]
COMMANDS = ["setCommand", "getCommand", "lpushCommand", "incrCommand"]
# What each command runs. getCommand, lpushCommand and incrCommand are tail
# calls in redis's build (`jmp getGenericCommand`): a stack taken in the
# command's work holds the function it jumped to, and the command's own
# name only when a sample lands on its one or two instructions. Only
# setCommand keeps a frame, and only while the benchmark runs its SET test
# (the first of four). On a busy machine the window opened after SET had
# passed and the few samples missed those instructions: the profile held
# `call` and none of the four names. A window over any part of the
# benchmark holds what one of them runs.
CALL_SAMPLES = 100  # samples under call() the command check reads
COMMAND_WORK = ["setGenericCommand", "getGenericCommand",
                "pushGenericCommand", "incrDecrCommand"]
# Where a value sent with SET is allocated (kept by the key afterwards).
HEAP_PATH = ["readQueryFromClient", "processMultibulkBuffer",
             "createStringObject"]

# Values loaded before the benchmark: KEYS strings of SIZE bytes. Redis keeps
# each in an sds of SIZE + 4 bytes (a 3-byte sdshdr16 header and a NUL),
# allocated under HEAP_PATH. At one sample per RATE bytes a block of that
# size is sampled with probability p = 1 - exp(-4100/16384) = 0.22, so the
# estimate rests on about 1,800 samples: a relative standard deviation of
# sqrt((1 - p) / (KEYS p)) = 2.1%, and 10% is more than 4 of them.
KEYS, SIZE, RATE = 8192, 4096, 16384
SDS = SIZE + 4
# Keys the benchmark's tests write: key:__rand_int__ (set, get),
# counter:__rand_int__ (incr), mylist (lpush); without -r they are literal.
BENCH_KEYS = 3
CHECK_KEYS = {f"pp:check:{i}": f"value {i} \u00e9" for i in range(5)}
BENCH_ARGS = ["-n", "200000", "-c", "20", "-t", "set,get,lpush,incr", "-q"]


def exported():
    """The functions redis-server's .dynsym defines."""
    p = subprocess.run(["nm", "-D", "--defined-only", BINARY],
                       capture_output=True, text=True, timeout=60)
    return {ln.split()[-1] for ln in p.stdout.splitlines()
            if len(ln.split()) == 3 and ln.split()[1] in "TtWw"}


def imported():
    p = subprocess.run(["nm", "-D", "--undefined-only", BINARY],
                       capture_output=True, text=True, timeout=60)
    return {ln.split()[-1].split("@")[0] for ln in p.stdout.splitlines()}


def value(i):
    """The SIZE-byte value of pp:big:i, different for every key."""
    return (b"%06d" % i) * (SIZE // 6) + b"x" * (SIZE % 6)


def resp(*args):
    """One command in redis's protocol (what redis-cli --pipe sends)."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Redis(Proc):
    """redis-server with libpullprof preloaded, serving on a free port."""

    def __init__(self, **env):
        self.port = free_port()
        super().__init__(
            [REDIS, "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--daemonize", "no"],
            env=pptest.preload_env(PULLPROF_LISTEN="127.0.0.1:0", **env),
            stdin=False)
        m = self.wait_line(self.err_lines, r"serving http://127\.0\.0\.1:"
                           r"(\d+)/debug/pprof/", timeout=30)
        self.agent = int(m.group(1)) if m else None
        deadline = time.time() + 30
        while time.time() < deadline and self.p.poll() is None:
            if self.text("ping") == "PONG":
                break
            time.sleep(0.1)

    def cli(self, *args, data=None, timeout=60):
        return subprocess.run([CLI, "-p", str(self.port), *args], input=data,
                              capture_output=True, timeout=timeout)

    def text(self, *args):
        return self.cli(*args).stdout.decode("utf-8", "replace").strip()

    def info(self, section):
        out = {}
        for ln in self.text("info", section).splitlines():
            k, _, v = ln.partition(":")
            out[k] = v.strip()
        return out

    def url(self, path):
        return f"http://127.0.0.1:{self.agent}/debug/pprof/{path}"


def available():
    if sanitized():
        skip("redis-server preloaded", "a sanitizer build: the sanitizer's "
             "runtime would have to come first in an uninstrumented program")
        return False
    return ok(REDIS and BENCH and CLI,
              "redis-server, redis-benchmark and redis-cli are installed "
              "(scripts/deps.sh --test installs them)")


def below_call(prof):
    """What call() called in the profile's samples (the frame above it;
    itself when it is the leaf), counted by samples."""
    called = Counter()
    for s in prof.samples:
        names = [f[0] for loc in prof.stack(s) for f in loc]
        if "call" in names:
            i = names.index("call")
            called[names[i - 1] if i else "call"] += s["value"][0]
    return called


def names_in(prof, sample):
    return {f[0] for loc in prof.stack(sample) for f in loc}


def only_startup_line(r, what):
    lines = [ln for ln in r.err_lines if ln.strip()]
    ok(len(lines) == 1 and re.fullmatch(
        rf"pullprof\[{r.pid}\]: serving http://127\.0\.0\.1:{r.agent}"
        r"/debug/pprof/", lines[0]),
       f"{what}: nothing on stderr but the agent's startup line", lines)


def test_exported_names():
    """What the profile checks below rest on: redis exports these names,
    and reaches the allocator through the plain malloc family."""
    if not available():
        return
    have = exported()
    want = CPU_PATH + COMMANDS + COMMAND_WORK + HEAP_PATH
    eq(sorted(n for n in want if n not in have), [],
       "redis-server is stripped but .dynsym defines every function checked")
    ok({"malloc", "calloc", "realloc", "free", "malloc_usable_size"}
       <= imported(), "redis calls the plain malloc family (no je_ prefix)")


def test_under_load():
    if not available():
        return
    r = Redis(PULLPROF_HEAP_RATE=str(RATE))
    try:
        under_load(r)
    finally:
        if r.p.poll() is None:
            r.p.kill()
        r.p.wait()


def under_load(r):
    ok(r.agent, "the preloaded agent says where it serves", r.stderr_text())
    eq(r.text("ping"), "PONG", "redis answers PING")
    for k, v in CHECK_KEYS.items():
        eq(r.text("set", k, v), "OK", f"SET {k}")
    # The values the heap check counts, sent as one pipeline.
    load = b"".join(resp(b"SET", b"pp:big:%06d" % i, value(i))
                    for i in range(KEYS))
    p = r.cli("--pipe", data=load, timeout=300)
    ok(p.returncode == 0 and f"errors: 0, replies: {KEYS}".encode()
       in p.stdout, f"{KEYS} values of {SIZE} bytes loaded",
       p.stdout[-300:] + p.stderr[-300:])

    # The benchmark; the CPU window opens once its requests are arriving.
    before = int(r.info("stats").get("total_commands_processed", 0))
    bench = subprocess.Popen([BENCH, "-p", str(r.port), *BENCH_ARGS],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while time.time() < deadline and bench.poll() is None:
        done = int(r.info("stats").get("total_commands_processed", 0))
        if done > before + 1000:
            break
        time.sleep(0.05)
    # A CPU window counts CPU time: whatever part of it the benchmark
    # covers (all of it on this machine: the benchmark runs for 10 s and
    # more) is where its samples come from, and an idle redis adds none.
    cpu = curl(r.url("profile?seconds=3&hz=1000"), timeout=120)
    # Which command a sample under `call` shows is the luck of few
    # samples when redis gets little CPU (a busy machine: its window
    # held `call` and no command at all; call() also times the command
    # and feeds its latency histogram). More windows, while the benchmark
    # runs, until `call` has CALL_SAMPLES samples under it: the command
    # check below reads them all.
    more = []
    while (cpu.status == 200 and bench.poll() is None and len(more) < 10
           and sum(sum(below_call(Profile(b.body)).values())
                   for b in [cpu] + more) < CALL_SAMPLES):
        more.append(curl(r.url("profile?seconds=3&hz=1000"), timeout=120))
    out, _ = bench.communicate(timeout=600)
    text = out.decode("utf-8", "replace")
    eq(bench.returncode, 0, "redis-benchmark exits 0")
    # -q prints each test's final line after its progress lines (\r).
    finals = [ln.rsplit("\r", 1)[-1].strip() for ln in text.splitlines()]
    done = [ln for ln in finals if "requests per second" in ln]
    eq(sorted(ln.split(":")[0] for ln in done),
       ["GET", "INCR", "LPUSH", "SET"],
       "redis-benchmark: SET, GET, LPUSH and INCR completed")
    ok(not re.search(r"error|ERR", text, re.I),
       "redis-benchmark saw no error", text[-500:])

    # The CPU window.
    eq(cpu.status, 200, "profile?seconds=3&hz=1000 under load: 200")
    prof = Profile(cpu.body)
    eq(prof.s(prof.field(prof.raw["period_type"][0], "type")), "cpu",
       "a CPU profile")
    total = sum(s["value"][0] for s in prof.samples)
    ok(total >= 100, "the window has samples", total)
    seen = set()
    for s in prof.samples:
        seen |= names_in(prof, s)
    eq([n for n in CPU_PATH if n not in seen], [],
       "the window shows a request's path through redis by name: "
       + " > ".join(CPU_PATH))
    called = below_call(prof)
    for m in more:
        if m.status == 200:
            called.update(below_call(Profile(m.body)))
    print(f"# under call, {1 + len(more)} window(s): "
          f"{called.most_common(8)}", flush=True)
    ok(set(called) & set(COMMANDS + COMMAND_WORK),
       "and the benchmark's commands "
       "(setCommand, getCommand, lpushCommand, incrCommand, or what they "
       "tail-call)", called.most_common(12))
    under = sum(s["value"][0] for s in prof.samples
                if "readQueryFromClient" in names_in(prof, s))
    ok(under >= total * 0.1, "readQueryFromClient holds a real share of the "
       "samples", f"{under} of {total}")
    mine = [m for m in prof.mappings
            if prof.s(prof.field(m, "filename")) == BINARY]
    ok(mine and prof.s(prof.field(mine[0], "build_id")) ==
       elf_build_id(BINARY),
       "the profile maps redis's binary with its build ID",
       [(prof.s(prof.field(m, "filename")), prof.s(prof.field(m, "build_id")))
        for m in prof.mappings][:8])
    path = "/tmp/pp-redis-cpu.pb.gz"
    with open(path, "wb") as f:
        f.write(cpu.body)
    code, top, err = go_pprof("-top", path)
    os.unlink(path)
    ok(code == 0 and "readQueryFromClient" in top,
       "go tool pprof -top reads it, readQueryFromClient included",
       err[-500:] + top[-1500:])

    # The heap profile: the values redis keeps, by name.
    h = curl(r.url("heap"), timeout=120)
    eq(h.status, 200, "/heap: 200")
    heap = Profile(h.body)
    idx = [t for t, _ in heap.sample_types()].index("inuse_space")
    kept, leaves = 0, set()
    for s in heap.samples:
        stack = heap.stack(s)
        names = names_in(heap, s)
        if all(n in names for n in HEAP_PATH):
            kept += s["value"][idx]
            leaves |= {f[0] for f in stack[0]} if stack else {None}
    want = KEYS * SDS
    ok(abs(kept - want) <= want * 0.10,
       f"the heap profile holds the {KEYS} values (within 10%) under "
       + " > ".join(HEAP_PATH),
       f"{kept} vs {want} ({(kept - want) * 100 / want:+.1f}%)")
    ok(leaves and all(n and re.fullmatch(r"z\w*alloc\w*", n) for n in leaves),
       "allocated by redis's zmalloc functions", leaves)
    mem = r.info("memory")
    ok(mem.get("mem_allocator", "").startswith("jemalloc"),
       "redis still allocates with jemalloc underneath the wrappers",
       mem.get("mem_allocator"))
    ok(int(mem.get("allocator_allocated", 0)) >= KEYS * SIZE,
       "jemalloc's own statistics hold the values",
       mem.get("allocator_allocated"))

    # Redis after all that.
    eq(r.p.poll(), None, "redis-server is still running")
    ok(r.info("server").get("redis_version"), "INFO answers")
    eq(r.text("ping"), "PONG", "PING answers")
    eq({k: r.text("get", k) for k in CHECK_KEYS}, CHECK_KEYS,
       "the keys set before the load read back")
    eq(r.cli("get", "pp:big:000777").stdout, value(777) + b"\n",
       "a loaded value reads back byte for byte")
    eq(r.text("dbsize"), str(len(CHECK_KEYS) + KEYS + BENCH_KEYS),
       "DBSIZE: the keys set, loaded and benchmarked")
    st = curl(r.url("status")).json()["heap"]
    eq((st["enabled"], st["rate"], st["dropped"]), (True, RATE, 0),
       "/status: heap sampling on at the rate asked, no sample dropped")
    r.cli("shutdown", "nosave")
    try:
        code = r.p.wait(60)
    except subprocess.TimeoutExpired:
        code = None
    r.drain()
    eq(code, 0, "SHUTDOWN NOSAVE: redis exits 0")
    only_startup_line(r, "SHUTDOWN NOSAVE")


def trace_cmdlines(data):
    """The cmdline of every process descriptor in a Perfetto trace."""
    protos = find_protos()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    p = subprocess.run(
        ["protoc", f"--proto_path={protos}", "--decode=perfetto.protos.Trace",
         "protos/perfetto/trace/trace.proto"], input=data,
        capture_output=True, timeout=300)
    if p.returncode != 0:
        raise ValueError("protoc could not decode: " + p.stderr.decode())
    out = []
    for pk in _parse_text_format(p.stdout.decode("utf-8", "replace")).get(
            "packet", []):
        for td in pk.get("track_descriptor", []):
            for pd in td.get("process", []):
                out.append(pd.get("cmdline", []))
    return out


def test_cmdline():
    """Redis writes its title ("ARGV0 127.0.0.1:PORT") over argv[0]
    and clears the rest of its argv area: /proc/PID/cmdline is then the
    title and a run of NULs. The agent shows the title as ps does, not the
    empty strings between the NULs."""
    if not available():
        return
    r = Redis()
    try:
        ok(r.agent, "the preloaded agent says where it serves",
           r.stderr_text())
        with open(f"/proc/{r.pid}/cmdline", "rb") as f:
            raw = f.read()
        ps = subprocess.run(["ps", "-o", "args=", "-p", str(r.pid)],
                            capture_output=True, text=True).stdout.strip()
        # {title} in redis's proc-title-template is argv[0].
        title = f"{REDIS} 127.0.0.1:{r.port}"
        eq(ps, title, "ps shows redis's title")
        ok(raw.startswith(title.encode() + b"\0\0"),
           "/proc/PID/cmdline is the title and NUL padding", raw)
        st = curl(r.url("status")).json()
        eq(st["cmdline"], [title], "/status cmdline: the title, as ps shows")
        eq(curl(r.url("cmdline")).body, title.encode(),
           "/cmdline: the title, no NULs after it")
        if os.path.exists(os.path.join(find_protos(), "protos", "perfetto",
                                       "trace", "trace.proto")):
            t = curl(r.url("trace?seconds=1"), timeout=60)
            eq(t.status, 200, "/trace: 200")
            eq(trace_cmdlines(t.body), [[title]],
               "the trace's process descriptor: the title")
        else:
            skip("the trace's process descriptor", "Perfetto's protos are "
                 "not here (PP_PERFETTO_PROTOS): the trace is not decoded")
        eq(r.stop(), 0, "SIGTERM: redis exits 0")
        only_startup_line(r, "SIGTERM")
    finally:
        if r.p.poll() is None:
            r.p.kill()
            r.p.wait()


run([test_exported_names, test_under_load, test_cmdline])

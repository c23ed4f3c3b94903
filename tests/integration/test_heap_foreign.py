"""Heap profiles of hosts whose allocations pullprof's malloc wrappers do
not see: tests/heap/jehost linked with Debian's static libjemalloc.a, with a
copy of it whose functions are renamed je_* (a prefixed jemalloc, as Redis
bundles), with the shared libjemalloc ahead of pullprof and behind it, and
with glibc alone. Each answer is either true (pullprof's sampler, or
jemalloc's own profiler read through its prof.dump) or a 404 whose
sentence names the allocator and what to do: never an empty profile.

Accuracy: jemalloc samples every 2^14 bytes here (lg_prof_sample:14): site
a's 64 KiB blocks are sampled with probability 0.98, site b's 4 KiB ones
0.22 (3,600 of 16,384: 1.5% relative standard deviation), site c's 32 KiB
0.86; +-10% is then more than 6 standard deviations. jeprof --text on a
dump taken at the same moment must agree with pullprof's numbers to
rounding: both unsample the same samples."""
import os
import re
import shutil
import subprocess
import tempfile
import threading

import pptest
from pptest import (LIBSO, SRC, Profile, Proc, by_function, curl, eq,
                    go_pprof, ok, preload_env, run, sanitized, skip)

JE_A = "/usr/lib/x86_64-linux-gnu/libjemalloc.a"
JE_SO = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
HOST_C = os.path.join(SRC, "tests", "heap", "jehost.c")
JEPROF = shutil.which("jeprof")
CONF = "prof:true,lg_prof_sample:14"
MiB = 1 << 20

_tmp = tempfile.mkdtemp(prefix="pp-jehost-")
_built = {}


def build(kind):
    """jehost linked four ways; the path, or None with why printed."""
    if kind in _built:
        return _built[kind]
    out = os.path.join(_tmp, f"jehost-{kind}")
    cmd = ["gcc", "-g", "-O1", "-o", out, HOST_C]
    if kind == "static":
        cmd += ["-DWITH_JEMALLOC", JE_A, "-lpthread", "-lm", "-ldl"]
    elif kind == "prefixed":
        # Debian's archive with every public function renamed je_<name>
        # (its internals are je_ already): the system's malloc stays
        # glibc's, the host calls je_malloc for sites a and c.
        syms = subprocess.run(["nm", "--defined-only", JE_A],
                              capture_output=True, text=True).stdout
        names = sorted({ln.split()[2] for ln in syms.splitlines()
                        if len(ln.split()) == 3 and ln.split()[1] in "TW"
                        and not ln.split()[2].startswith(("je_", "_Z"))})
        ren = os.path.join(_tmp, "rename.txt")
        with open(ren, "w") as f:
            f.writelines(f"{n} je_{n}\n" for n in names)
        lib = os.path.join(_tmp, "libjeprefixed.a")
        subprocess.run(["objcopy", f"--redefine-syms={ren}", JE_A, lib],
                       check=True)
        cmd += ["-DPREFIXED", lib, "-lpthread", "-lm", "-ldl"]
    elif kind == "shared":
        cmd += ["-DWITH_JEMALLOC", "-ljemalloc"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    _built[kind] = out if p.returncode == 0 else None
    if p.returncode:
        print(f"# build {kind}: {p.stderr[-800:]}")
    return _built[kind]


class JeHost(Proc):
    def __init__(self, kind, env=None, preload=None):
        self.exe = build(kind)
        e = preload_env(preload or LIBSO, PULLPROF_LISTEN="127.0.0.1:0",
                        **(env or {}))
        super().__init__([self.exe], env=e)
        self.truth = self._truth(self.p.stdout.readline().decode())
        m = self.wait_line(self.err_lines,
                           r"serving http://127\.0\.0\.1:(\d+)/", 30)
        self.port = int(m.group(1)) if m else None

    @staticmethod
    def _truth(line):
        f = line.split()
        return {f[i]: int(f[i + 1]) for i in range(1, len(f) - 1, 2)}

    def cmd(self, line):
        self.p.stdin.write((line + "\n").encode())
        self.p.stdin.flush()
        return self.p.stdout.readline().decode().strip()

    def get(self, path, timeout=60):
        return curl(f"http://127.0.0.1:{self.port}/debug/pprof/{path}",
                    timeout=timeout)

    def status(self):
        r = self.get("status")
        return r.json() if r.status == 200 else {}

    def close(self):
        try:
            self.cmd("quit")
        except (BrokenPipeError, OSError):
            pass
        return self.stop()



def leaves(prof, type_name):
    """Value by leaf function."""
    idx = [t for t, _ in prof.sample_types()].index(type_name)
    out = {}
    for s in prof.samples:
        st = prof.stack(s)
        name = st[0][0][0] if st and st[0] else "?"
        out[name] = out.get(name, 0) + s["value"][idx]
    return out


def near(got, want, pct):
    return want > 0 and abs(got - want) <= want * pct / 100


def check_site(prof, typ, site, want, what):
    got = by_function(prof, typ).get(site, 0)
    print(f"# {what}: {site} {typ} {got} of {want} "
          f"({(got - want) * 100 / want:+.1f}%)")
    ok(near(got, want, 10), f"{what}: {site} {typ} within 10% of the truth",
       f"got {got} want {want} ({(got - want) * 100 / want:+.1f}%)")


def go_on(body, *args):
    """go tool pprof ARGS on a profile's bytes (a file of its own)."""
    with tempfile.NamedTemporaryFile(suffix=".pb.gz") as f:
        f.write(body)
        f.flush()
        return go_pprof(*args, f.name)


def available():
    if sanitized():
        return False
    for what, path in (("libjemalloc.a", JE_A), ("libjemalloc.so.2", JE_SO)):
        if not os.path.exists(path):
            skip("jemalloc hosts", f"{what} is not installed "
                 "(scripts/deps.sh --test installs libjemalloc-dev)")
            return False
    return True


def test_static_with_profiling():
    """Static jemalloc, MALLOC_CONF=prof:true: jemalloc's own profile."""
    if not available():
        return
    h = JeHost("static", {"MALLOC_CONF": CONF})
    try:
        ok(h.port, "static jemalloc host: the agent serves",
           h.stderr_text()[-2000:])
        eq(sorted(h.truth), ["jh_site_a", "jh_site_b"], "the host's truth")
        st = h.status().get("heap", {}).get("allocator", {})
        eq((st.get("interposed"), st.get("name"), st.get("linkage"),
            st.get("source")), (False, "jemalloc", "static", "jemalloc"),
           "/status heap.allocator: not interposed, jemalloc linked "
           "statically, /heap from jemalloc")
        eq(st.get("path"), os.path.realpath(h.exe),
           "/status heap.allocator.path: the executable")
        je = st.get("jemalloc", {})
        eq((je.get("symbol"), je.get("profiling"), je.get("active"),
            je.get("accum"), je.get("sample_interval_bytes")),
           ("mallctl", True, True, False, 16384),
           "/status heap.allocator.jemalloc: mallctl found in the "
           "executable's symbol table, profiling on, 2^14 bytes")
        ok(re.match(r"5\.\d+\.\d+", je.get("version") or ""),
           "jemalloc's version", je)
        ok(je.get("allocated_bytes", 0) > 190 * MiB,
           "jemalloc's stats.allocated: what the host holds", je)
        ok(re.search(r"heap: the executable \(.*\) defines malloc itself "
                     r"\(jemalloc linked statically\).*serve jemalloc's "
                     r"own profile", h.stderr_text()),
           "stderr says the allocations are not interposed and where "
           "/heap comes from", h.stderr_text()[-1500:])
        m = h.get("metrics").text
        ok(re.search(r"^pullprof_heap_interposed 0$", m, re.M),
           "/metrics pullprof_heap_interposed 0")
        ok(re.search(r'^pullprof_heap_allocator_info\{allocator="jemalloc",'
                     r'linkage="static",version="5[^"]*",'
                     r'source="jemalloc"\} 1$', m, re.M),
           "/metrics pullprof_heap_allocator_info",
           [ln for ln in m.splitlines() if "allocator" in ln])

        r = h.get("heap")
        eq(r.status, 200, "/heap: 200")
        prof = Profile(r.body)
        eq([t for t, _ in prof.sample_types()],
           ["inuse_objects", "inuse_space"],
           "sample types: in use only (no prof_accum: jemalloc keeps no "
           "cumulative counts)")
        for site in ("jh_site_a", "jh_site_b"):
            check_site(prof, "inuse_space", site, h.truth[site], "/heap")
        lv = leaves(prof, "inuse_space")
        top = sorted(lv.items(), key=lambda kv: -kv[1])[:2]
        ok(sorted(n for n, _ in top) == ["jh_site_a", "jh_site_b"],
           "the leaves are the host's allocating functions: jemalloc's "
           "own frames (prof_backtrace, malloc_default) trimmed", top)
        ok(not [n for n in lv if "prof_backtrace" in n or n.startswith("je_")],
           "no jemalloc frame left in any stack", sorted(lv)[:20])
        code, txt, err = go_on(r.body, "-top")
        ok(code == 0 and "jh_site_a" in txt and "jh_site_b" in txt,
           "go tool pprof -top decodes it and names both sites",
           err[-600:] + txt[-1200:])
        code, raw, err = go_on(r.body, "-raw")
        ok(code == 0 and "jemalloc" in raw and "lg_prof_sample 14" in raw,
           "the profile's comment says it is jemalloc's own, and its "
           "sampling interval", raw[:800] + err[-300:])
        ok("PeriodType: space bytes" in raw and "Period: 16384" in raw,
           "period: space/bytes, 16384", raw[:600])

        # jeprof on a dump of the same moment: the same numbers.
        if JEPROF:
            dump = os.path.join(_tmp, "static.heap")
            eq(h.cmd(f"dump {dump}"), "dumped 0", "the host's own prof.dump")
            prof = Profile(h.get("heap").body)
            mine = by_function(prof, "inuse_space")
            p = subprocess.run([JEPROF, "--text", "--cum", h.exe, dump],
                               capture_output=True, text=True, timeout=300)
            theirs = {}
            for ln in p.stdout.splitlines():
                f = ln.split()
                if len(f) >= 6 and f[0].replace(".", "").isdigit():
                    theirs[f[5]] = float(f[3])
            for site in ("jh_site_a", "jh_site_b"):
                got = mine.get(site, 0) / MiB
                want = theirs.get(site)
                ok(want is not None and abs(got - want) <= 0.1 + want * 0.01,
                   f"jeprof --text on the same moment's dump: {site} "
                   f"{want} MB, pullprof {got:.1f} MB",
                   p.stdout[:1500] + p.stderr[-500:])
        else:
            skip("jeprof comparison", "jeprof is not installed")

        # A delta: what grew over the window.
        res = {}

        def fetch():
            res["r"] = h.get("heap?seconds=3", timeout=60)
        t = threading.Thread(target=fetch)
        t.start()
        # The window is open once the agent counts it pending.
        pptest.until(lambda: h.status().get("heap", {}).get(
            "pending_requests", 0) >= 1, 20)
        line = h.cmd("grow")
        t.join(60)
        grown = JeHost._truth(line)
        r = res.get("r")
        eq(r.status if r else None, 200, "/heap?seconds=3: 200")
        if r and r.status == 200:
            d = Profile(r.body)
            check_site(d, "inuse_space", "jh_site_c", grown["jh_site_c"],
                       "/heap?seconds=3 (grow in the window)")
            f = by_function(d, "inuse_space")
            ok(abs(f.get("jh_site_a", 0)) < MiB,
               "the delta leaves out what did not change (site a)", f)
        eq(h.cmd("free_a"), "freed jh_site_a", "the host frees site a")
        f = by_function(Profile(h.get("heap").body), "inuse_space")
        ok(f.get("jh_site_a", 0) < MiB, "after the frees, site a holds "
           "nothing in use", f.get("jh_site_a"))
        check_site(Profile(h.get("heap").body), "inuse_space", "jh_site_c",
                   grown["jh_site_c"], "/heap after growth")

        r = h.get("allocs")
        eq(r.status, 404, "/allocs without prof_accum: 404")
        ok("prof_accum:true" in r.text, "... saying to set prof_accum",
           r.text)
        r = h.get("heap?peak=1")
        eq(r.status, 400, "/heap?peak=1: 400 (jemalloc keeps no peak)")
        ok("jemalloc" in r.text and "peak" in r.text, "... saying why",
           r.text)
        r = h.get("heap?source=interposed")
        eq(r.status, 200, "?source=interposed: served when asked for")
        code, raw, err = go_on(r.body, "-raw")
        ok("do not reach pullprof's wrappers here" in raw,
           "... with a comment saying the wrappers see nothing here",
           raw[:600] + err[-300:])
        ok(by_function(Profile(r.body), "inuse_space").get("jh_site_a", 0)
           == 0, "... and nothing of the host's in it")
        r = h.get("trace?seconds=1&heap=1")
        eq(r.status, 404, "/trace?heap=1: 404")
        ok("jemalloc's own" in r.text, "... saying the heap is jemalloc's "
           "own profile, which has no timeline", r.text)
        r = h.get("heap?source=bogus")
        eq(r.status, 400, "?source=bogus: 400")
    finally:
        eq(h.close(), 0, "the host exits 0")


def test_static_with_accum():
    """prof_accum:true: /allocs from jemalloc's cumulative counts."""
    if not available():
        return
    h = JeHost("static", {"MALLOC_CONF": CONF + ",prof_accum:true"})
    try:
        eq(h.cmd("free_a"), "freed jh_site_a", "the host frees site a")
        r = h.get("allocs")
        eq(r.status, 200, "/allocs: 200")
        prof = Profile(r.body)
        eq([t for t, _ in prof.sample_types()],
           ["alloc_objects", "alloc_space", "inuse_objects", "inuse_space"],
           "the four sample types")
        check_site(prof, "alloc_space", "jh_site_a", h.truth["jh_site_a"],
                   "/allocs after the frees")
        f = by_function(prof, "inuse_space")
        ok(f.get("jh_site_a", 0) < MiB, "in use: site a freed", f)
        check_site(prof, "inuse_space", "jh_site_b", h.truth["jh_site_b"],
                   "/allocs")
        code, txt, err = go_on(r.body, "-top")
        ok(code == 0 and "alloc_space" in txt and "jh_site_a" in txt,
           "go tool pprof shows alloc_space by default for /allocs",
           err[-400:] + txt[:800])
    finally:
        eq(h.close(), 0, "the host exits 0")


def test_static_without_profiling():
    """Static jemalloc, its profiler off: a sentence, not an empty
    profile."""
    if not available():
        return
    h = JeHost("static")
    try:
        for path in ("heap", "allocs", "heap?seconds=1", "heap?debug=1"):
            r = h.get(path)
            eq(r.status, 404, f"/{path}: 404")
            ok("jemalloc 5." in r.text and "linked statically" in r.text
               and "MALLOC_CONF=prof:true" in r.text,
               f"/{path}: names jemalloc, its linkage and the setting "
               "to turn its profiler on", r.text)
        st = h.status().get("heap", {}).get("allocator", {})
        eq((st.get("interposed"), st.get("source")), (False, "none"),
           "/status: not interposed, no source")
        ok("MALLOC_CONF=prof:true" in (st.get("unavailable") or ""),
           "/status heap.allocator.unavailable: the sentence", st)
        ok(re.search(r"heap: /heap and /allocs have no profile to serve: "
                     r".*jemalloc", h.stderr_text()),
           "stderr says so at start", h.stderr_text()[-1500:])
        m = h.get("metrics").text
        ok(re.search(r'source="none"\} 1$', m, re.M),
           "/metrics: source none")
    finally:
        eq(h.close(), 0, "the host exits 0")


def test_prefixed():
    """A jemalloc whose functions are je_malloc etc. beside glibc's
    malloc: with its profiler on, /heap is its profile (the host's je_
    allocations); ?source=interposed is what reaches pullprof."""
    if not available():
        return
    h = JeHost("prefixed", {"MALLOC_CONF": CONF,
                            "PULLPROF_HEAP_RATE": "16384"})
    try:
        ok(h.port, "prefixed jemalloc host: the agent serves",
           h.stderr_text()[-1500:])
        st = h.status().get("heap", {}).get("allocator", {})
        eq((st.get("interposed"), st.get("name"), st.get("linkage"),
            st.get("source"), st.get("jemalloc", {}).get("symbol")),
           (True, "jemalloc", "prefixed", "jemalloc", "je_mallctl"),
           "/status: the system malloc is interposed; a prefixed jemalloc "
           "(je_mallctl) is the source")
        prof = Profile(h.get("heap").body)
        check_site(prof, "inuse_space", "jh_site_a", h.truth["jh_site_a"],
                   "/heap (jemalloc's)")
        f = by_function(prof, "inuse_space")
        ok(f.get("jh_site_b", 0) < MiB,
           "jemalloc's profile has no glibc allocation (site b)", f)
        r = h.get("heap?source=interposed")
        eq(r.status, 200, "?source=interposed: 200")
        prof = Profile(r.body)
        check_site(prof, "inuse_space", "jh_site_b", h.truth["jh_site_b"],
                   "?source=interposed")
        f = by_function(prof, "inuse_space")
        ok(f.get("jh_site_a", 0) == 0,
           "pullprof's own sampler never saw je_malloc (site a)", f)
    finally:
        eq(h.close(), 0, "the host exits 0")
    h = JeHost("prefixed")
    try:
        r = h.get("heap")
        eq(r.status, 404, "prefixed, profiler off: /heap 404")
        ok("JE_MALLOC_CONF=prof:true" in r.text and
           "?source=interposed" in r.text,
           "... naming the je_ prefix's setting and ?source=interposed",
           r.text)
        eq(h.get("heap?source=interposed").status, 200,
           "?source=interposed: 200")
    finally:
        eq(h.close(), 0, "the host exits 0")


def test_shared_behind():
    """libjemalloc.so linked by the host, pullprof preloaded first: both
    see the allocations; /heap is pullprof's, ?source=jemalloc
    jemalloc's, and they agree."""
    if not available():
        return
    h = JeHost("shared", {"MALLOC_CONF": CONF,
                          "PULLPROF_HEAP_RATE": "16384"})
    try:
        st = h.status().get("heap", {}).get("allocator", {})
        eq((st.get("interposed"), st.get("name"), st.get("linkage"),
            st.get("source")), (True, "jemalloc", "shared", "interposed"),
           "/status: interposed, jemalloc (shared) behind the wrappers")
        for q, word in (("heap", "heap sampled every 16384"),
                        ("heap?source=jemalloc", "jemalloc")):
            r = h.get(q)
            eq(r.status, 200, f"/{q}: 200")
            prof = Profile(r.body)
            for site in ("jh_site_a", "jh_site_b"):
                check_site(prof, "inuse_space", site, h.truth[site],
                           f"/{q}")
    finally:
        eq(h.close(), 0, "the host exits 0")


def test_shared_ahead():
    """LD_PRELOAD=libjemalloc.so:pullprof: jemalloc comes first, the
    wrappers are never called; its stripped frames trimmed by object."""
    if not available():
        return
    h = JeHost("shared", {"MALLOC_CONF": CONF},
               preload=f"{JE_SO}:{LIBSO}")
    try:
        st = h.status().get("heap", {}).get("allocator", {})
        eq((st.get("interposed"), st.get("name"), st.get("source")),
           (False, "jemalloc", "jemalloc"),
           "/status: not interposed, jemalloc's own profile")
        ok("comes before pullprof" in (st.get("reason") or ""),
           "reason: it comes before pullprof in the search order", st)
        prof = Profile(h.get("heap").body)
        for site in ("jh_site_a", "jh_site_b"):
            check_site(prof, "inuse_space", site, h.truth[site], "/heap")
        lv = leaves(prof, "inuse_space")
        top = sorted(lv.items(), key=lambda kv: -kv[1])[:2]
        ok(sorted(n for n, _ in top) == ["jh_site_a", "jh_site_b"],
           "the leaves are the host's functions: the stripped library's "
           "frames trimmed", top)
    finally:
        eq(h.close(), 0, "the host exits 0")


def test_glibc():
    """The plain case: glibc behind the wrappers."""
    h = JeHost("glibc", {"PULLPROF_HEAP_RATE": "16384"})
    try:
        st = h.status().get("heap", {}).get("allocator", {})
        if sanitized():
            # A test build: the wrappers are left out on purpose, /heap
            # still runs pullprof's sampler and renderers (empty), and
            # its comment says why.
            eq((st.get("interposed"), st.get("name"), st.get("source")),
               (False, "sanitizer", "interposed"),
               "sanitizer build: the sanitizer's runtime owns malloc; "
               "/heap is pullprof's own all the same")
            r = h.get("heap")
            eq(r.status, 200, "/heap: 200")
            code, raw, err = go_on(r.body, "-raw")
            ok("sanitizer runtime" in raw, "... its comment naming the "
               "sanitizer's runtime", raw[:800] + err[-300:])
            ok(not re.search(r"heap: ", h.stderr_text()),
               "nothing said on stderr about the heap", h.stderr_text())
            return
        eq((st.get("interposed"), st.get("name"), st.get("linkage"),
            st.get("source")), (True, "glibc", "shared", "interposed"),
           "/status: interposed, glibc behind")
        ok(re.match(r"2\.\d+", st.get("version") or ""), "glibc's version",
           st)
        ok("jemalloc" not in st, "no jemalloc object in /status", st)
        prof = Profile(h.get("heap").body)
        for site in ("jh_site_a", "jh_site_b"):
            check_site(prof, "inuse_space", site, h.truth[site], "/heap")
        eq(h.get("heap?source=jemalloc").status, 404,
           "?source=jemalloc without a jemalloc: 404")
        ok(not re.search(r"heap: ", h.stderr_text()),
           "nothing said on stderr about the heap", h.stderr_text())
    finally:
        eq(h.close(), 0, "the host exits 0")


MMAP_HOST = r"""
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
/* Its memory is its own mapping: no malloc at all (an allocator the
 * wrappers cannot see, with nothing in a symbol table to find). */
int main(void)
{
	size_t n = 256u << 20;
	char *p = mmap(NULL, n, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memset(p, 1, n);
	printf("truth mapped %zu\n", n);
	fflush(stdout);
	char line[64];
	while (fgets(line, sizeof line, stdin) && strncmp(line, "quit", 4))
		;
	return 0;
}
"""


def test_unseen():
    """Interposed, yet the memory is elsewhere: 256 MB mapped by the host
    itself, glibc holding next to nothing, no sample: /heap says so."""
    if sanitized():
        return
    src = os.path.join(_tmp, "mmaphost.c")
    with open(src, "w") as f:
        f.write(MMAP_HOST)
    _built["mmap"] = os.path.join(_tmp, "jehost-mmap")
    subprocess.run(["gcc", "-O1", "-o", _built["mmap"], src], check=True)
    h = JeHost("mmap")
    try:
        r = h.get("heap")
        eq(r.status, 404, "/heap: 404")
        ok("no allocation was sampled although the process holds" in r.text
           and "do not reach pullprof's wrappers" in r.text,
           "... saying nothing was seen while the memory is elsewhere",
           r.text)
        eq(h.get("heap?source=interposed").status, 200,
           "?source=interposed: the (empty) profile, asked for")
    finally:
        eq(h.close(), 0, "the host exits 0")


try:
    run([test_static_with_profiling, test_static_with_accum,
         test_static_without_profiling, test_prefixed, test_shared_behind,
         test_shared_ahead, test_glibc, test_unseen])
finally:
    shutil.rmtree(_tmp, ignore_errors=True)

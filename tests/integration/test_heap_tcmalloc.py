"""Heap profiles of hosts whose allocator is gperftools' tcmalloc
(tests/heap/tcmallocwork: 32 MiB kept by each of tc_big, tc_mid and
tc_small, in 1 MiB, 256 KiB and 1 KiB blocks), with pullprof preloaded:

* linked statically (libtcmalloc.a): the executable defines malloc, so
  pullprof's wrappers never see an allocation. With
  TCMALLOC_SAMPLE_PARAMETER set, /heap is tcmalloc's own sample
  (src/heap/tcmalloc.c), scaled and symbolized by pullprof: a pprof
  profile whose top functions are the three sites, each within 10% of
  what it holds, read by protoc and go tool pprof; freed blocks leave it.
  Without it, /heap refuses with a sentence that names tcmalloc and what
  to do; so it does for a stripped copy (tcmalloc found by its strings,
  nothing of it callable). /status's heap.allocator says what was found.
* linked with libtcmalloc.so and preloaded behind it
  (LD_PRELOAD=libtcmalloc.so:libpullprof.so): not interposed, served from
  tcmalloc's sample as above.
* libtcmalloc.so behind pullprof (LD_PRELOAD=libpullprof.so): malloc is
  interposed, the profile is pullprof's own.

The period is 8192: 32 MiB in 1 KiB blocks is sampled about 3,900 times
(1.5% standard deviation: +-10% is over 6 of them; at 65536, 500 times and
4.4%, a site was once off by 11.6%), 256 KiB and 1 MiB blocks always.
tcmalloc 2.10 leaves the main thread's first 16 MiB unsampled (its sampler
picks its first interval before it reads the variable): the host allocates
past them before the sites (tcmallocwork.c)."""
import os
import re
import shutil
import subprocess
import tempfile

from pptest import (BUILD, LIBSO, NO_HEAP_WHY, Host, Profile, by_function,
                    check_near, curl, eq, go_pprof, ok, preload_env, run,
                    sanitized, skip)

MiB = 1 << 20
PERIOD = 8192
SITES = ("tc_big", "tc_mid", "tc_small")
STATIC = os.path.join(BUILD, "tests", "heap", "tcmallocwork")
SHARED = os.path.join(BUILD, "tests", "heap", "tcmallocwork_shared")
LIBTCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4"
MISSING = ("tests/heap/tcmallocwork not built (configure found no "
           "libtcmalloc.a, or a sanitizer build)")


class TcWork(Host):
    """tcmallocwork preloaded with pullprof; its first line is the truth,
    the agent's port is in its "serving" line on stderr."""

    def __init__(self, exe, env, preload=None):
        e = preload_env(preload or LIBSO, PULLPROF_LISTEN="127.0.0.1:0",
                        **env)
        super().__init__(env=e, exe=exe)
        f = self.ready.split()
        self.truth = {f[i]: int(f[i + 1]) for i in range(1, len(f) - 1, 2)}
        m = self.wait_line(self.err_lines, r"serving http://127\.0\.0\.1:(\d+)/",
                           timeout=30)
        self.port = int(m.group(1)) if m else None

    def get(self, path, timeout=60):
        return curl(f"http://127.0.0.1:{self.port}/debug/pprof/{path}",
                    timeout=timeout)




def allocator(w, what):
    """/status's heap.allocator (wired by the lead: src/heap/tcmalloc.c's
    pp_tcmalloc_find)."""
    r = w.get("status")
    eq(r.status, 200, f"{what}: /status 200")
    a = (r.json().get("heap") or {}).get("allocator")
    ok(isinstance(a, dict), f"{what}: /status has heap.allocator", r.text[:600])
    return a if isinstance(a, dict) else {}


def top_functions(path, n):
    """The first n function names of `go tool pprof -top` (flat order)."""
    code, out, err = go_pprof("-sample_index=inuse_space", "-top",
                              "-nodecount=20", path)
    ok(code == 0, "go tool pprof -top reads /heap", err)
    rows = []
    for line in out.splitlines():
        m = re.match(r"\s*\S+\s+\S+%\s+\S+%\s+\S+\s+\S+%\s+(.+)$", line)
        if m:
            rows.append(m.group(1).strip())
    return rows[:n], out


def check_sample_profile(w, what):
    """/heap is tcmalloc's sample: the sites on top, each within 10%."""
    eq(sorted(w.truth), sorted(SITES), f"{what}: the host printed its truth")
    r = w.get("heap")
    eq(r.status, 200, f"{what}: /heap 200")
    if r.status != 200:
        ok(False, f"{what}: /heap's answer", r.text[:600])
        return
    p = Profile(r.body)
    types = p.sample_types()
    ok(("inuse_space", "bytes") in types, f"{what}: /heap has inuse_space",
       types)
    eq(p.field(p.raw, "period"), PERIOD,
       f"{what}: period = tcmalloc's sampling period")
    inuse = by_function(p, "inuse_space")
    for fn in SITES:
        check_near(inuse.get(fn, 0), w.truth[fn], 10,
                   f"{what}: {fn} inuse_space within 10% of what it holds")
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"),
                        f"pp-tcmalloc-{os.getpid()}.pb.gz")
    with open(path, "wb") as fh:
        fh.write(r.body)
    try:
        top, out = top_functions(path, 3)
    finally:
        os.unlink(path)
    eq(sorted(top), sorted(SITES), f"{what}: go tool pprof -top's first "
       "three functions are the allocating sites (not tcmalloc's own)")

    before = inuse.get("tc_small", 0)
    eq(w.cmd("free-small"), f"freed {w.truth['tc_small']}",
       f"{what}: the host freed tc_small's blocks")
    r = w.get("heap")
    eq(r.status, 200, f"{what}: /heap 200 after the free")
    if r.status == 200:
        inuse = by_function(Profile(r.body), "inuse_space")
        after = inuse.get("tc_small", 0)
        ok(before > w.truth["tc_small"] / 2 and
           after < w.truth["tc_small"] / 10,
           f"{what}: freed blocks left the profile",
           f"tc_small before {before}, after {after}")
        check_near(inuse.get("tc_big", 0), w.truth["tc_big"], 10,
                   f"{what}: tc_big still there")
    r = w.get("heap?debug=1")
    ok(r.status == 200 and "tc_big" in r.text,
       f"{what}: /heap?debug=1 names tc_big", r.text[:400])


def test_static_sampled():
    if sanitized() or not os.path.exists(STATIC):
        skip("static tcmalloc, sampled", NO_HEAP_WHY if sanitized()
             else MISSING)
        return
    w = TcWork(STATIC, {"TCMALLOC_SAMPLE_PARAMETER": str(PERIOD)})
    ok(w.port, "static tcmalloc: the agent serves", w.stderr_text())
    if not w.port:
        w.quit()
        return
    a = allocator(w, "static tcmalloc")
    eq(a.get("name"), "tcmalloc", "static: heap.allocator.name")
    eq(a.get("linkage"), "static", "static: heap.allocator.linkage")
    eq(a.get("path"), os.path.realpath(STATIC),
       "static: heap.allocator.path is the executable")
    ok(str(a.get("version", "")).startswith("gperftools 2."),
       "static: heap.allocator.version is tc_version()'s", a)
    eq(a.get("interposed"), False,
       "static: heap.allocator.interposed is false")
    eq((a.get("tcmalloc") or {}).get("sample_period"), PERIOD,
       "static: heap.allocator.tcmalloc.sample_period")
    check_sample_profile(w, "static tcmalloc")
    eq(w.quit(timeout=30), 0, "static tcmalloc: the host exits 0")


def test_static_unsampled():
    if sanitized() or not os.path.exists(STATIC):
        skip("static tcmalloc, not sampled", NO_HEAP_WHY if sanitized()
             else MISSING)
        return
    w = TcWork(STATIC, {})
    ok(w.port, "static tcmalloc, no sampling: the agent serves",
       w.stderr_text())
    if not w.port:
        w.quit()
        return
    for path in ("heap", "heap?debug=1"):
        r = w.get(path)
        ok(400 <= r.status < 600, f"no sampling: /{path} refuses (4xx/5xx), "
           "never an empty profile", f"{r.status} {r.text[:300]}")
        ok("tcmalloc" in r.text and "TCMALLOC_SAMPLE_PARAMETER" in r.text,
           f"no sampling: /{path}'s sentence names tcmalloc and "
           "TCMALLOC_SAMPLE_PARAMETER", r.text[:600])
    a = allocator(w, "no sampling")
    eq((a.get("name"), a.get("linkage"),
        (a.get("tcmalloc") or {}).get("sample_period")),
       ("tcmalloc", "static", 0),
       "no sampling: heap.allocator says tcmalloc, static, period 0")
    eq(w.quit(timeout=30), 0, "no sampling: the host exits 0")


def test_static_stripped():
    """A stripped executable: tcmalloc is found by its strings, but nothing
    of it can be called; the sentence says so and what to do."""
    if sanitized() or not os.path.exists(STATIC) or not shutil.which("strip"):
        skip("static tcmalloc, stripped", NO_HEAP_WHY if sanitized()
             else MISSING)
        return
    with tempfile.TemporaryDirectory() as d:
        exe = os.path.join(d, "tcmallocwork-stripped")
        subprocess.run(["strip", "-o", exe, STATIC], check=True)
        w = TcWork(exe, {"TCMALLOC_SAMPLE_PARAMETER": str(PERIOD)})
        ok(w.port, "stripped: the agent serves", w.stderr_text())
        if not w.port:
            w.quit()
            return
        r = w.get("heap")
        ok(400 <= r.status < 600, "stripped: /heap refuses (4xx/5xx), never "
           "an empty profile", f"{r.status} {r.text[:300]}")
        ok("tcmalloc" in r.text and "stripped" in r.text and
           "strip --strip-debug" in r.text,
           "stripped: the sentence names tcmalloc, the stripped symbol "
           "table and what to do", r.text[:600])
        a = allocator(w, "stripped")
        eq((a.get("name"), a.get("linkage"), a.get("path")),
           ("tcmalloc", "static", exe),
           "stripped: heap.allocator says tcmalloc, static, the executable")
        eq(w.quit(timeout=30), 0, "stripped: the host exits 0")


def test_shared_behind():
    """libtcmalloc.so ahead of pullprof: not interposed."""
    if sanitized() or not os.path.exists(SHARED) or \
            not os.path.exists(LIBTCMALLOC):
        skip("libtcmalloc.so ahead of pullprof", NO_HEAP_WHY if sanitized()
             else MISSING)
        return
    w = TcWork(SHARED, {"TCMALLOC_SAMPLE_PARAMETER": str(PERIOD)},
               preload=f"{LIBTCMALLOC}:{LIBSO}")
    ok(w.port, "libtcmalloc.so first: the agent serves", w.stderr_text())
    if not w.port:
        w.quit()
        return
    a = allocator(w, "libtcmalloc.so first")
    eq((a.get("name"), a.get("linkage"), a.get("interposed")),
       ("tcmalloc", "shared", False),
       "libtcmalloc.so first: heap.allocator says tcmalloc, shared, "
       "not interposed")
    eq(os.path.realpath(str(a.get("path"))), os.path.realpath(LIBTCMALLOC),
       "libtcmalloc.so first: heap.allocator.path is the library")
    check_sample_profile(w, "libtcmalloc.so first")
    eq(w.quit(timeout=30), 0, "libtcmalloc.so first: the host exits 0")


def test_shared_interposed():
    """pullprof ahead of libtcmalloc.so: malloc reaches the wrappers, and
    the profile is correct without tcmalloc's sampling."""
    if sanitized() or not os.path.exists(SHARED):
        skip("pullprof ahead of libtcmalloc.so", NO_HEAP_WHY if sanitized()
             else MISSING)
        return
    w = TcWork(SHARED, {"PULLPROF_HEAP_RATE": "4096"})
    ok(w.port, "pullprof first: the agent serves", w.stderr_text())
    if not w.port:
        w.quit()
        return
    r = w.get("heap")
    eq(r.status, 200, "pullprof first: /heap 200")
    if r.status == 200:
        inuse = by_function(Profile(r.body), "inuse_space")
        for fn in SITES:
            check_near(inuse.get(fn, 0), w.truth[fn], 10,
                       f"pullprof first: {fn} within 10% (interposed)")
    a = allocator(w, "pullprof first")
    eq((a.get("name"), a.get("linkage"), a.get("interposed")),
       ("tcmalloc", "shared", True),
       "pullprof first: heap.allocator says tcmalloc, shared, interposed")
    eq(w.quit(timeout=30), 0, "pullprof first: the host exits 0")


if __name__ == "__main__":
    run([test_static_sampled, test_static_unsampled, test_static_stripped,
         test_shared_behind, test_shared_interposed])

"""The pool API (pullprof_heap_alloc/free/release) over real HTTP, from the
example host examples/pool: a server-shaped program whose requests allocate
from arenas of its own and which prints what it allocated and keeps at
each site. The heap profile must name the sites that used the pool memory
(not the arena's growth function), within 10% of the host's counts, with
each block's pool as a label; frees and a pool's release must take the
memory out of inuse and leave it in alloc; bad calls must leave the host
running and the tables as they were; go tool pprof must read it all.

Statistics: at PULLPROF_HEAP_RATE=4096 a block of s bytes is sampled with
probability 1 - exp(-s/4096). run 32768 hands out about 34 MB at
parse_request (blocks of 64..191 bytes: about 8,600 samples), 67 MB at
build_reply (1..3 KiB: about 16,000) and 17 MB at save_session (256..767
bytes: about 4,100, half of them still live after expire 16384): the
relative standard deviation of each estimate is 1.1% to 2.2%, so +-10% is
more than 4.5 of them."""
import json
import os
import re

import pptest
from pptest import (BUILD, Host, Profile, by_function, check_near, curl, eq,
                    go_pprof, ok, run, sanitized, skip)

POOL = os.path.join(BUILD, "examples", "pool")
RATE = 4096
SITES = ("parse_request", "build_reply", "save_session")
POOL_OF = {"parse_request": "request", "build_reply": "request",
           "save_session": "sessions"}



def names_of(prof, s):
    return {f[0] for loc in prof.stack(s) for f in loc}



class PoolHost(Host):
    def __init__(self, env, args=()):
        e = {"PULLPROF_LISTEN": "127.0.0.1:0"}
        e.update(env)
        super().__init__(env=e, args=args, exe=POOL)
        m = re.match(r"ready (\d+)$", self.ready or "")
        self.port = int(m.group(1)) if m else None

    def url(self, path):
        return f"http://127.0.0.1:{self.port}/debug/pprof/{path}"

    def get(self, path):
        return curl(self.url(path), timeout=60)

    def truth(self):
        f = self.cmd("truth").split()
        return {f[i]: (int(f[i + 1]), int(f[i + 2]))
                for i in range(1, len(f), 3)}

    def status(self):
        import json
        return json.loads(self.get("status").body)["heap"]


def test_pool_profile():
    h = PoolHost({"PULLPROF_HEAP_RATE": str(RATE)})
    ok(h.port, "examples/pool started its agent", h.ready)
    if not h.port:
        h.quit()
        return
    st0 = h.status()
    eq((st0["enabled"], st0["rate"]), (True, RATE), "heap sampling is on")
    eq(h.cmd("run 32768", timeout=120), "ok 32768", "32768 requests handled")
    eq(h.cmd("expire 16384"), "ok 16384", "half the sessions expired")
    truth = h.truth()
    eq(sorted(truth), sorted(SITES), "the host printed its truth")

    r = h.get("heap")
    eq(r.status, 200, "/heap: 200")
    p = Profile(r.body)
    pptest.check_mapped(p, "/heap")
    eq(p.field(p.raw, "period"), RATE, "period = the sampling rate")
    # The pools' blocks: the chunks the arenas took from malloc are in
    # the profile too (they are malloc's), under the site whose request
    # made the arena grow; the pool label tells the two apart.
    pooled = lambda s: p.labels(s).get("pool")  # noqa: E731
    inuse = by_function(p, "inuse_space", pooled)
    alloc = by_function(p, "alloc_space", pooled)
    for fn in SITES:
        a, i = truth[fn]
        check_near(alloc.get(fn, 0), a, 10, f"{fn}: alloc_space within 10% of "
             f"the host's {a}")
        if i:
            check_near(inuse.get(fn, 0), i, 10, f"{fn}: inuse_space within 10% "
                 f"of the host's {i}")
        else:
            ok(inuse.get(fn, 0) <= a * 0.005, f"{fn}: no inuse_space (its "
               "request pools were released)", inuse.get(fn, 0))

    # Each pool block (its stack starts in arena_alloc) carries its pool;
    # none is under the growth function or in the profiler; the chunks
    # (under arena_grow) carry none.
    wrong, unlabelled, growth, profiler = [], 0, 0, set()
    for s in p.samples:
        names = names_of(p, s)
        pool = p.labels(s).get("pool")
        site = [fn for fn in SITES if fn in names]
        leaf = p.stack(s)[0][0][0] if p.stack(s) else None
        if leaf == "arena_alloc" and (not site or
                                      pool != POOL_OF[site[0]]):
            wrong.append((site, pool))
        if pool and "arena_grow" in names:
            growth += 1
        if pool and (not site or leaf != "arena_alloc"):
            unlabelled += 1
        profiler |= {n for n in names if n.startswith(("pullprof_heap",
                                                       "pp_heap"))}
    eq(wrong[:5], [], "every site's samples carry its pool's label "
       "(sessions, request)")
    eq(unlabelled, 0, "no pool label on a sample that is not a pool "
       "block's")
    eq(growth, 0, "no pool block is charged to the growth function")
    eq(sorted(profiler), [], "no stack holds the API or the profiler")
    leaves = {p.stack(s)[0][0][0] for s in p.samples
              if p.labels(s).get("pool") and p.stack(s)}
    eq(leaves, {"arena_alloc"}, "pool samples start at the pool's "
       "allocation function, the caller of pullprof_heap_alloc")
    if sanitized():
        skip("the chunks are malloc's, under arena_grow", pptest.NO_HEAP_WHY)
    else:
        grow = by_function(p, "inuse_space",
                           lambda s: not p.labels(s).get("pool"))
        ok(grow.get("arena_grow", 0) >= 16 << 20, "the arenas' chunks are "
           "in the profile too, as malloc's, under arena_grow",
           grow.get("arena_grow"))

    r = h.get("allocs")
    eq(r.status, 200, "/allocs: 200")
    pa = Profile(r.body)
    eq(pa.s(pa.field(pa.raw, "default_sample_type")), "alloc_space",
       "/allocs: default sample type alloc_space")
    alloc = by_function(pa, "alloc_space", lambda s: pa.labels(s).get("pool"))
    check_near(alloc.get("save_session", 0), truth["save_session"][0], 10,
         "/allocs: save_session's alloc_space within 10%")

    # The real client.
    code, out, err = go_pprof("-top", "-cum", "-sample_index=alloc_space",
                              "-nodecount=40", h.url("allocs"))
    ok(code == 0 and all(fn in out for fn in SITES),
       "go tool pprof -top -cum decodes /allocs and names the three sites",
       err + out[-2000:])
    code, out, err = go_pprof("-tags", h.url("heap"))
    ok(code == 0 and re.search(r"pool:.*\n(?:.*\n)*?.*sessions", out) and
       "request" in out, "go tool pprof -tags lists the pool label's "
       "values", err + out[-2000:])
    code, out, err = go_pprof("-top", "-sample_index=inuse_space",
                              "-tagfocus=pool=sessions", h.url("heap"))
    ok(code == 0 and "save_session" in out and "parse_request" not in out,
       "-tagfocus=pool=sessions keeps the sessions' blocks alone",
       err + out[-2000:])

    # A release: the sessions' blocks leave inuse all at once.
    eq(h.cmd("reset"), "ok", "the sessions arena reset")
    p = Profile(h.get("heap").body)
    pooled = lambda s: p.labels(s).get("pool")  # noqa: E731
    inuse = by_function(p, "inuse_space", pooled)
    alloc = by_function(p, "alloc_space", pooled)
    ok(inuse.get("save_session", 0) == 0, "after the release: no "
       "inuse_space at save_session", inuse.get("save_session"))
    check_near(alloc.get("save_session", 0), truth["save_session"][0], 10,
         "after the release: save_session's alloc_space unchanged")

    # Bad calls: the host lives on, the tables keep nothing of them.
    st1 = h.status()
    eq(h.cmd("bad", timeout=60), "ok", "the bad calls return")
    eq(h.get("heap").status, 200, "/heap answers after them")
    st2 = h.status()
    eq(st2["live_sampled"], st1["live_sampled"], "heap.live_sampled is "
       "back where it was before them (no record left)")
    ok(st2["sampled"] > st1["sampled"], "their blocks were sampled",
       (st1["sampled"], st2["sampled"]))
    ok(abs(st2["inuse_bytes_estimate"] - st1["inuse_bytes_estimate"]) <
       64 << 10, "the in-use estimate is back too",
       (st1["inuse_bytes_estimate"], st2["inuse_bytes_estimate"]))
    eq(st2["dropped"], 0, "no sample dropped")
    # Many threads at once, each with arenas of its own whose blocks are
    # freed one by one or released: nothing of them is left either.
    eq(h.cmd("threads 4 20000", timeout=120), "ok 4",
       "4 threads of 20000 requests each")
    st3 = h.status()
    # Not heap.live_sampled: glibc keeps a new thread's own blocks (its
    # TLS vector) with the thread's cached stack after the join, and one
    # of them may have been sampled. The pools' blocks are the ones with
    # the label, and none may be left.
    p = Profile(h.get("heap").body)
    left = [(p.labels(s).get("pool"), s["value"][2]) for s in p.samples
            if p.labels(s).get("pool") and s["value"][2]]
    eq(left, [], "no pool block is left in use after the threads (every "
       "one freed or released)")
    ok(st3["sampled"] - st2["sampled"] > 10000, "their blocks were "
       "sampled", st3["sampled"] - st2["sampled"])
    eq(st3["dropped"], 0, "no sample dropped")
    eq(h.cmd("truth").split()[0], "truth", "the host still answers")
    eq(h.quit(timeout=30), 0, "examples/pool exits 0")


def test_without_the_api():
    """The same host without its pullprof_heap_* calls: all the pool memory
    is under arena_grow, none under the sites. What the API changes."""
    if sanitized():
        skip("without the API, the chunks under arena_grow",
             pptest.NO_HEAP_WHY)
        return
    h = PoolHost({"PULLPROF_HEAP_RATE": str(RATE)}, args=["--no-report"])
    ok(h.port, "examples/pool --no-report started", h.ready)
    eq(h.cmd("run 4096", timeout=120), "ok 4096", "4096 requests")
    p = Profile(h.get("heap").body)
    leaves = {}
    for s in p.samples:
        if p.stack(s):
            leaf = p.stack(s)[0][0][0]
            leaves[leaf] = leaves.get(leaf, 0) + s["value"][3]
    ok(leaves.get("arena_grow", 0) >= 2 << 20 and
       "arena_alloc" not in leaves and
       not any(leaves.get(fn) for fn in SITES),
       "without the API, all the arenas' memory is arena_grow's (the "
       "sites only above it)", leaves)
    ok(not any(p.labels(s).get("pool") for s in p.samples),
       "and no sample has a pool label")
    eq(h.quit(timeout=30), 0, "exits 0")


def test_rate_zero():
    """Heap sampling off: every call is a no-op, the host runs."""
    h = PoolHost({"PULLPROF_HEAP_RATE": "0"})
    ok(h.port, "examples/pool started with PULLPROF_HEAP_RATE=0", h.ready)
    eq(h.cmd("run 2000", timeout=60), "ok 2000", "requests run")
    eq(h.cmd("expire 500"), "ok 500", "frees run")
    eq(h.cmd("bad", timeout=60), "ok", "bad calls run")
    eq(h.cmd("reset"), "ok", "a release runs")
    r = h.get("heap")
    eq(r.status, 404, "/heap: 404, heap profiling is off")
    ok(b"PULLPROF_HEAP_RATE" in r.body, "naming the setting", r.body[:200])
    st = h.status()
    eq((st["enabled"], st["sampled"]), (False, 0), "nothing sampled")
    eq(h.quit(timeout=30), 0, "exits 0")


def test_static_allocator():
    """The pool example linked with a static jemalloc (its profiler off):
    the wrappers see none of its mallocs, yet the blocks it reports are
    in /heap, and the profile's comment says which they are."""
    je = "/usr/lib/x86_64-linux-gnu/libjemalloc.a"
    if pptest.sanitized() or not os.path.exists(je):
        skip("pool host with a static jemalloc",
             "sanitizer build" if pptest.sanitized() else f"no {je}")
        return
    import shutil
    import subprocess
    import tempfile
    d = tempfile.mkdtemp(prefix="pp-poolje-")
    try:
        exe = os.path.join(d, "pool-jemalloc")
        b = subprocess.run(
            ["gcc", "-g", "-O2", "-o", exe,
             os.path.join(pptest.SRC, "examples", "pool.c"),
             "-I", os.path.join(pptest.SRC, "include"), je,
             "-L", os.path.join(BUILD, ".libs"), "-lpullprof",
             f"-Wl,-rpath,{os.path.join(BUILD, '.libs')}",
             "-lpthread", "-lm", "-ldl"], capture_output=True, text=True)
        eq(b.returncode, 0, "examples/pool links with libjemalloc.a")
        if b.returncode:
            print("# " + b.stderr[-800:])
            return
        e = {"PULLPROF_LISTEN": "127.0.0.1:0",
             "PULLPROF_HEAP_RATE": str(RATE)}
        h = Host(env=e, exe=exe)
        m = re.match(r"ready (\d+)$", h.ready or "")
        port = m and int(m.group(1))
        ok(port, "it started its agent", h.ready)
        if not port:
            h.quit()
            return
        url = f"http://127.0.0.1:{port}/debug/pprof/"
        eq(h.cmd("run 8192", timeout=120), "ok 8192", "requests handled")
        f = h.cmd("truth").split()
        truth = {f[i]: int(f[i + 1]) for i in range(1, len(f), 3)}
        st = json.loads(curl(url + "status").body)["heap"]
        eq((st["allocator"]["interposed"], st["allocator"]["name"]),
           (False, "jemalloc"), "/status: the wrappers see no malloc")
        ok(st["pool"]["sampled"] > 0, "/status heap.pool: blocks sampled",
           st["pool"])
        r = curl(url + "heap")
        eq(r.status, 200, "/heap: 200 (the pools' blocks)")
        if r.status == 200:
            p = Profile(r.body)
            alloc = by_function(p, "alloc_space",
                                lambda s: p.labels(s).get("pool"))
            for fn in SITES:
                check_near(alloc.get(fn, 0), truth[fn], 10,
                     f"static jemalloc: {fn} alloc_space within 10%")
            code, raw, err = pptest.go_pprof("-raw", url + "heap")
            ok("holds the blocks the host reports with pullprof_heap_alloc"
               in raw, "its comment says which blocks these are",
               raw[:800] + err[-300:])
        eq(h.quit(timeout=30), 0, "exits 0")
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    run([test_pool_profile, test_without_the_api, test_rate_zero,
         test_static_allocator])

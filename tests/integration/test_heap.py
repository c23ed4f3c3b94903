"""Heap profiles over real HTTP, from a real process allocating known amounts
(tests/heap/heapwork): accuracy against the truth it prints, every function
of the malloc family, C++ new/delete, realloc chains, delta and peak
profiles, fork, threads under load, jemalloc underneath, bad input, the real
clients (protoc, go tool pprof) and valgrind."""
import os
import re
import shutil
import threading
import time

import pptest
from pptest import (NO_HEAP_WHY, NO_VALGRIND_WHY, by_function, check_near,
                    sanitized)
from pptest import (BUILD, LIBSO, MEMCHECK, Profile,
                    Work, curl, eq, go_pprof, memcheck_quit, ok, run, skip)

MiB = 1 << 20
DLLIB = os.path.join(BUILD, "tests", "profile", ".libs", "libsymtest_dl.so")
JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"

# Statistics of the accuracy bounds. An allocation of s bytes is sampled with
# probability p = 1 - exp(-s/R); the estimate of a function's bytes is the
# sampled count divided by p, whose relative standard deviation for N
# allocations of one size is sqrt((1 - p) / (N p)). With R = 4096 (the
# accuracy host's rate): 250,000 objects of 64 B give N p = 3,877 samples,
# 1.6% (the 125,000 still live: 2.3%); the mixed sizes are sampled 2,000+
# times per size; 1 MiB blocks are sampled with certainty. +-10% is then at
# least 4 standard deviations: a fair bound that a wrong estimator (say,
# unsampling on a bucket's average size, or counting a block twice) fails.
RATE = 4096



def within(got, want, pct):
    return want and abs(got - want) <= want * pct / 100



def test_accuracy_and_format():
    if sanitized():
        # What the sampler sees needs the wrappers; the endpoints and their
        # errors run all the same.
        skip("heap accuracy, format, family, chain, C++, peak, delta",
             NO_HEAP_WHY)
        w = Work({"PULLPROF_HEAP_RATE": str(RATE)})
        ok(w.port, "heapwork started", w.ready)
        ok(w.cmd("family", timeout=120), "the malloc family runs")
        eq(w.get("heap").status, 200, "/heap: 200")
        test_bad_input(w)
        eq(w.quit(timeout=30), 0, "heapwork exits 0")
        return
    w = Work({"PULLPROF_HEAP_RATE": str(RATE)})
    ok(w.port, "heapwork started", w.ready)
    line = w.cmd("accuracy", timeout=120)
    f = line.split()
    truth = {f[i]: (int(f[i + 1]), int(f[i + 2])) for i in range(1, len(f), 3)}
    eq(sorted(truth), ["hw_large_blocks", "hw_mixed_sizes", "hw_small_objects"],
       "the host printed its truth")

    r = w.get("heap")
    eq(r.status, 200, "/heap: 200")
    eq(r.header("content-type"), "application/octet-stream",
       "/heap: application/octet-stream")
    ok(r.body[:2] == b"\x1f\x8b", "/heap: gzipped")
    p = Profile(r.body)
    eq(p.sample_types(), [("alloc_objects", "count"), ("alloc_space", "bytes"),
                          ("inuse_objects", "count"), ("inuse_space", "bytes")],
       "sample types in Go's order")
    pt = p.raw.get("period_type", [{}])[0]
    eq((p.s(p.field(pt, "type")), p.s(p.field(pt, "unit"))), ("space", "bytes"),
       "period type space/bytes")
    eq(p.field(p.raw, "period"), RATE, "period = the sampling rate")
    eq(p.field(p.raw, "default_sample_type"), 0,
       "/heap: no default sample type (tools pick inuse_space)")

    pptest.check_mapped(p, "/heap")
    inuse = by_function(p, "inuse_space")
    alloc = by_function(p, "alloc_space")
    for fn, (a, i) in sorted(truth.items()):
        check_near(inuse.get(fn, 0), i, 10, f"{fn}: inuse_space within 10%")
        check_near(alloc.get(fn, 0), a, 10, f"{fn}: alloc_space within 10%")
    objs = by_function(p, "inuse_objects")
    check_near(objs.get("hw_small_objects", 0), 125000, 10,
               "hw_small_objects: inuse_objects within 10% of 125,000")

    # Every sample carries its allocation size as the label bytes.
    sizes = set()
    for s in p.samples:
        names = {fr[0] for loc in p.stack(s) for fr in loc}
        if "hw_large_blocks" in names:
            sizes.add(p.labels(s).get("bytes"))
    eq(sizes, {(MiB, "bytes")}, "label bytes = the allocation size")
    leafs = {p.stack(s)[0][0][0] for s in p.samples if p.stack(s)}
    ok("malloc" not in leafs and "pp_heap_sampled" not in leafs,
       "stacks start at the allocating function, not in the profiler",
       sorted(leafs)[:10])

    r = w.get("allocs")
    eq(r.status, 200, "/allocs: 200")
    pa = Profile(r.body)
    eq(pa.s(pa.field(pa.raw, "default_sample_type")), "alloc_space",
       "/allocs: default sample type alloc_space")

    with open(os.path.join(os.environ.get("TMPDIR", "/tmp"),
                           f"pp-heap-{os.getpid()}.pb.gz"), "wb") as fh:
        fh.write(r.body)
        path = fh.name
    code, out, err = go_pprof("-sample_index=inuse_space", "-top", path)
    os.unlink(path)
    ok(code == 0, "go tool pprof -sample_index=inuse_space -top reads it", err)
    ok("hw_large_blocks" in out and "hw_mixed_sizes" in out,
       "go tool pprof shows the allocating functions", out[:1500])
    code, out, err = go_pprof("-sample_index=inuse_space", "-top",
                              w.url("heap"))
    ok(code == 0, "go tool pprof fetches /heap over HTTP", err)

    st = w.get("status").json()["heap"]
    eq((st["enabled"], st["rate"]), (True, RATE), "status.heap: enabled, rate")
    eq(st["live_sampled"], st["sampled"] - st["sampled_freed"],
       "status.heap: live = sampled - freed")
    total = sum(s["value"][3] for s in Profile(w.get("heap").body).samples)
    check_near(st["inuse_bytes_estimate"], total, 2,
               "status.heap: in-use estimate agrees with the profile")
    ok(st["dropped"] == 0 and st["unwind"]["failed"] == 0,
       "status.heap: nothing dropped, no unwind failure", st)

    test_family(w)
    test_after_dlclose(w)
    test_chain(w)
    test_cxx(w)
    eq(w.cmd("badalloc"), "badalloc caught",
       "std::bad_alloc passes through pullprof's operator new (libstdc++'s "
       "behind it)")
    test_peak(w)
    test_delta(w)
    test_bad_input(w)
    eq(w.quit(timeout=30), 0, "heapwork exits 0")


def test_family(w):
    line = w.cmd("family", timeout=60)
    eq(line, "family ok 64 65536",
       "every malloc-family function works (alignment, zeroing, usable size)")
    inuse = by_function(w.profile(), "inuse_space")
    want = 64 * 65536
    for fn in ("malloc", "calloc", "realloc", "reallocarray", "posix_memalign",
               "aligned_alloc", "memalign", "valloc", "pvalloc"):
        # 64 KiB blocks at a 4 KiB rate: sampled with certainty (1 - e^-16).
        got = inuse.get(f"hw_fam_{fn}", 0)
        check_near(got, want - (64 * 100 if fn == "pvalloc" else 0), 1,
                   f"{fn}: its 4 MiB in use")
    eq(w.cmd("family-free"), "freed", "all freed with free()")
    inuse = by_function(w.profile(), "inuse_space")
    eq({k: v for k, v in inuse.items() if k.startswith("hw_fam_") and v},
       {}, "after free(), nothing of the family is in use (memalign'd too)")


def test_after_dlclose(w):
    """Captures walk the compact frame tables (libunwind only for a frame
    they cannot describe: none here); a dlclose rebuilds the tables, and
    libunwind's trace cache, which cannot be flushed, serves no capture
    after it."""
    u = w.get("status").json()["heap"]["unwind"]
    ok(u["compact"] > 0 and u["fallbacks"] == 0,
       "captures walk the compact frame tables, none handed to libunwind", u)
    eq(w.cmd(f"dlcycle {DLLIB}"), "dlcycle ok", "dlopen + dlclose a library")
    u = w.get("status").json()["heap"]["unwind"]
    eq(w.cmd("family", timeout=60), "family ok 64 65536", "family again")
    st = w.get("status").json()["heap"]
    ok(st["unwind"]["compact"] > u["compact"],
       "after a dlclose captures still walk the tables", st["unwind"])
    eq(st["unwind"]["fast"], u["fast"],
       "after a dlclose no capture uses libunwind's trace cache")
    inuse = by_function(w.profile(), "inuse_space")
    check_near(inuse.get("hw_fam_calloc", 0), 64 * 65536, 1,
               "after a dlclose: the allocating function is still right")
    eq(w.cmd("family-free"), "freed", "family freed again")


def test_chain(w):
    line = w.cmd(f"chain {8 * MiB}")
    ok(line.startswith("chain "), "realloc chain up to 8 MiB", line)
    p = w.profile()
    inuse = by_function(p, "inuse_space")
    alloc = by_function(p, "alloc_space")
    check_near(inuse.get("hw_grow_chain", 0), 8 * MiB, 10,
               "realloc chain: the final block is what is in use")
    # 1 + 2 + ... + 8 MiB, then 4 MiB and 8 MiB again: ~28 MiB allocated.
    check_near(alloc.get("hw_grow_chain", 0), 28 * MiB, 10,
               "realloc chain: every step counted as allocated")
    eq(w.cmd("chain-free"), "freed", "chain freed")
    inuse = by_function(w.profile(), "inuse_space")
    eq(inuse.get("hw_grow_chain", 0), 0, "realloc chain: nothing left in use")


def test_cxx(w):
    f = w.cmd("cxx", timeout=60).split()
    eq(f[:2], ["truth", "hw_cxx_widgets"], "C++ new/delete ran")
    p = w.profile()
    inuse = by_function(p, "inuse_space")
    alloc = by_function(p, "alloc_space")
    check_near(inuse.get("hw_cxx_widgets", 0), int(f[3]), 10,
               "C++: new/delete in use within 10%")
    if not inuse.get("hw_cxx_widgets"):
        print("# " + "\n# ".join(
            " <- ".join(fr[0] for loc in p.stack(s) for fr in loc)
            for s in p.samples if s["value"][1] > 1000000)[:3000])
    check_near(alloc.get("hw_cxx_widgets", 0), int(f[2]), 10,
               "C++: allocated within 10%")
    u = w.get("status").json()["heap"]["unwind"]
    eq(u["fallbacks"], 0, "C++: captures through libstdc++ walk the compact "
       "tables too (no fallback to libunwind)")
    # pullprof's operator new takes the memory from malloc itself: the
    # stacks start at the function that called new, as a C program's at
    # the one that called malloc.
    leaves = {}
    for s in p.samples:
        st = p.stack(s)
        if st and st[0]:
            leaves[st[0][0][0]] = leaves.get(st[0][0][0], 0) + s["value"][3]
    ours = [n for n in leaves if n.startswith(("cxx_", "pp_"))]
    ok(leaves.get("hw_cxx_widgets", 0) >= inuse.get("hw_cxx_widgets", 0) * 0.7
       and not ours,
       "C++: the stacks start at the caller of new (an aligned new at its "
       "operator new), never in pullprof's own code",
       sorted(leaves.items(), key=lambda kv: -kv[1])[:8])


def test_peak(w):
    eq(w.cmd(f"peak {256 * MiB}", timeout=60), "peaked",
       "256 MiB allocated and freed")
    inuse = by_function(w.profile(), "inuse_space")
    eq(inuse.get("hw_peak_builder", 0), 0, "/heap: the freed memory is gone")
    p = w.profile("heap?peak=1")
    peak = by_function(p, "inuse_space")
    check_near(peak.get("hw_peak_builder", 0), 256 * MiB, 10,
               "/heap?peak=1: what was live at the peak")
    ok(any("peak" in p.s(c) for c in p.raw.get("comment", [])),
       "peak profile says when and how high")
    st = w.get("status").json()["heap"]
    ok(st["peak_bytes_estimate"] >= 256 * MiB * 0.9 and st["peak_time"],
       "status.heap.peak_bytes_estimate", st)
    eq(w.get("heap?peak=reset").status, 200, "peak=reset answers")
    peak = by_function(w.profile("heap?peak=1"), "inuse_space")
    eq(peak.get("hw_peak_builder", 0), 0,
       "after peak=reset the old peak is forgotten")
    check_near(peak.get("hw_large_blocks", 0), 30 * MiB, 10,
               "after peak=reset the peak is what is live now")


def test_delta(w):
    result = {}

    def fetch():
        result["r"] = w.get("heap?seconds=3", timeout=30)
    t = threading.Thread(target=fetch)
    t0 = time.time()
    t.start()
    time.sleep(1)
    eq(w.cmd(f"delta {16 * MiB}"), "allocated", "16 MiB allocated in the window")
    t.join()
    r = result["r"]
    eq(r.status, 200, "/heap?seconds=3: 200")
    ok(time.time() - t0 >= 2.9, "/heap?seconds=3 answers after the window")
    p = Profile(r.body)
    inuse = by_function(p, "inuse_space")
    alloc = by_function(p, "alloc_space")
    check_near(inuse.get("hw_delta_work", 0), 16 * MiB, 10,
               "delta: what was allocated in the window")
    check_near(alloc.get("hw_delta_work", 0), 16 * MiB, 10,
               "delta: allocated in the window")
    eq(alloc.get("hw_large_blocks", 0), 0,
       "delta: allocations before the window are not in it")
    d = p.field(p.raw, "duration_nanos")
    ok(2.9e9 <= d <= 4e9, "delta: duration is the window", d)


def test_bad_input(w):
    for q, what in (("seconds=abc", "seconds"), ("seconds=-1", "seconds"),
                    ("seconds=99999999", "seconds"), ("peak=2", "peak"),
                    ("gc=x", "gc"), ("seconds=1&peak=1", "peak"),
                    ("seconds=1&seconds=2", "seconds")):
        r = w.get(f"heap?{q}")
        eq(r.status, 400, f"/heap?{q}: 400")
        ok(what in r.text and r.header("x-go-pprof") == "1",
           f"/heap?{q}: the reason, for pprof to show", r.text)
    eq(w.get("allocs?gc=1").status, 200, "gc=1 is accepted (Go clients send it)")
    eq(w.get("heap?debug=0&gc=1").status, 200, "unknown parameters are ignored")
    r = curl(w.url("heap"), "-X", "POST")
    eq(r.status, 405, "POST /heap: 405")


def test_default_rate():
    """At the default rate (512 KiB) a churn of 2 GiB in 256-byte blocks is
    about 4,100 samples: 1.6% standard deviation, so +-10% is fair."""
    if sanitized():
        skip("default rate accuracy", NO_HEAP_WHY)
        return
    w = Work()
    eq(w.get("status").json()["heap"]["rate"], 524288, "default rate 524288")
    eq(w.cmd(f"churn {2048 * MiB} 256", timeout=120), "churned",
       "2 GiB allocated and freed")
    p = w.profile("allocs")
    alloc = by_function(p, "alloc_space")
    check_near(alloc.get("hw_churn", 0), 2048 * MiB, 10,
               "default rate: churned bytes within 10%")
    inuse = by_function(p, "inuse_space")
    eq(inuse.get("hw_churn", 0), 0, "default rate: nothing left in use")
    eq(w.quit(timeout=30), 0, "exits 0")


def test_rate_zero():
    w = Work({"PULLPROF_HEAP_RATE": "0"})
    w.cmd("family", timeout=60)
    r = w.get("heap")
    eq(r.status, 404, "PULLPROF_HEAP_RATE=0: /heap is 404")
    ok("PULLPROF_HEAP_RATE" in r.text, "... saying how to turn it on", r.text)
    st = w.get("status").json()["heap"]
    eq((st["enabled"], st["sampled"]), (False, 0), "status.heap: off, no sample")
    eq(w.quit(timeout=30), 0, "exits 0")


def test_stress_and_fork():
    # Under ASan the children also used to take long recycling a full
    # quarantine inherited from the parent; fork_safe_env turns it off.
    w = Work(pptest.fork_safe_env({"PULLPROF_HEAP_RATE": "65536"}))
    stop = threading.Event()
    codes = {}
    profiles = []

    def fetch_loop():
        i = 0
        while not stop.is_set():
            path = ("heap", "allocs", "heap?seconds=1")[i % 3]
            r = w.get(path, timeout=30)
            codes[r.status] = codes.get(r.status, 0) + 1
            if r.status == 200 and len(profiles) < 3:
                profiles.append(r.body)
            i += 1
    fetchers = [threading.Thread(target=fetch_loop) for _ in range(2)]
    for t in fetchers:
        t.start()
    line = w.cmd("stress 8 20", timeout=120)
    stop.set()
    for t in fetchers:
        t.join()
    ok(line.startswith("stress ops ") and int(line.split()[2]) > 0,
       "8 threads x 20 s of malloc/free/realloc/calloc/memalign", line)
    ok(set(codes) == {200} and sum(codes.values()) > 10,
       "every /heap and /allocs fetched meanwhile answered 200", codes)
    for i, body in enumerate(profiles):
        try:
            Profile(body)
            ok(True, f"profile {i} fetched under load decodes")
        except ValueError as e:
            ok(False, f"profile {i} fetched under load decodes", str(e))
    p = w.profile()
    inuse = by_function(p, "inuse_space")
    objs = by_function(p, "inuse_objects")
    eq((inuse.get("hw_stress_thread", 0), objs.get("hw_stress_thread", 0)),
       (0, 0), "after the threads freed everything, nothing of theirs in use")
    alloc = by_function(p, "alloc_objects")
    if sanitized():
        skip("their allocations were sampled", NO_HEAP_WHY)
    else:
        ok(alloc.get("hw_stress_thread", 0) > 0,
           "their allocations were sampled")
    st = w.get("status").json()["heap"]
    eq(st["live_sampled"], st["sampled"] - st["sampled_freed"],
       "counts consistent: live = sampled - freed")
    eq(st["dropped"], 0, "no sample dropped")

    line = w.cmd("fork", timeout=120)
    eq(line, "fork 20 of 20 children exited 0",
       "fork while 3 threads allocate: every child allocates and exits")
    eq(w.get("heap").status, 200, "the parent still serves /heap after forks")
    eq(w.quit(timeout=30), 0, "exits 0")


def test_jemalloc_underneath():
    if sanitized():
        skip("jemalloc underneath", NO_HEAP_WHY)
        return
    if not os.path.exists(JEMALLOC):
        skip("jemalloc underneath", f"{JEMALLOC} not installed")
        return
    w = Work({"PULLPROF_HEAP_RATE": str(RATE)},
             preload=f"{LIBSO} {JEMALLOC}")
    line = w.cmd("jemalloc")
    m = re.match(r"jemalloc served (\d+)", line)
    ok(m and int(m.group(1)) >= MiB,
       "jemalloc preloaded under pullprof serves the allocations", line)
    eq(w.cmd("family", timeout=60), "family ok 64 65536",
       "the malloc family works over jemalloc")
    inuse = by_function(w.profile(), "inuse_space")
    check_near(inuse.get("hw_fam_malloc", 0), 64 * 65536, 1,
               "jemalloc: the heap profile sees the allocations")
    check_near(inuse.get("hw_fam_pvalloc", 0), 64 * 65436, 1,
               "jemalloc: pvalloc (emulated when jemalloc lacks it)")
    eq(w.cmd("family-free"), "freed", "freed through jemalloc")
    # jemalloc defines operator new and delete itself (they do not call
    # malloc): pullprof's own operators sample them.
    f = w.cmd("cxx", timeout=60).split()
    inuse = by_function(w.profile(), "inuse_space")
    check_near(inuse.get("hw_cxx_widgets", 0), int(f[3]), 10,
               "jemalloc: C++ new/delete in use within 10%")
    eq(w.cmd("badalloc"), "badalloc caught",
       "jemalloc: std::bad_alloc passes through pullprof's operator new")
    st = w.get("status").json()["heap"]["allocator"]
    eq((st["interposed"], st["name"], st["source"]),
       (True, "jemalloc", "interposed"),
       "/status: interposed, jemalloc behind, C++'s new included")
    ok("operator new" not in st["reason"], "no word of new bypassing",
       st["reason"])
    eq(w.cmd("chain 1048576"), "chain 1048576",
       "realloc chain over jemalloc")
    eq(w.quit(timeout=30), 0, "exits 0")


def test_tcmalloc_underneath():
    """libtcmalloc.so behind pullprof: its operator new (which does not
    call malloc) is sampled by pullprof's own."""
    lib = "/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4"
    if sanitized():
        skip("tcmalloc underneath", NO_HEAP_WHY)
        return
    if not os.path.exists(lib):
        skip("tcmalloc underneath", f"{lib} not installed")
        return
    w = Work({"PULLPROF_HEAP_RATE": str(RATE)}, preload=f"{LIBSO} {lib}")
    f = w.cmd("cxx", timeout=60).split()
    eq(f[:2], ["truth", "hw_cxx_widgets"], "tcmalloc: C++ new/delete ran")
    p = w.profile()
    check_near(by_function(p, "inuse_space").get("hw_cxx_widgets", 0),
               int(f[3]), 10, "tcmalloc: C++ new/delete in use within 10%")
    check_near(by_function(p, "alloc_space").get("hw_cxx_widgets", 0),
               int(f[2]), 10, "tcmalloc: C++ allocated within 10%")
    eq(w.cmd("badalloc"), "badalloc caught",
       "tcmalloc: std::bad_alloc passes through pullprof's operator new")
    eq(w.cmd("family", timeout=60), "family ok 64 65536",
       "the malloc family works over tcmalloc")
    eq(w.quit(timeout=30), 0, "exits 0")


def test_valgrind():
    """A shorter stress under memcheck: no invalid access, no leak."""
    if sanitized():
        skip("heap under valgrind", NO_VALGRIND_WHY)
        return
    if not shutil.which("valgrind"):
        skip("heap under valgrind", "valgrind not installed")
        return
    w = Work({"PULLPROF_HEAP_RATE": "16384"},
             prefix=MEMCHECK)
    ok(w.port, "heapwork under valgrind", w.ready)
    line = w.cmd("stress 4 3", timeout=300)
    ok(line.startswith("stress ops"), "4 threads x 3 s under valgrind", line)
    # (not the family: valgrind's own allocator aborts on pvalloc)
    ok(w.cmd(f"chain {MiB}", timeout=120).startswith("chain"),
       "realloc chain under valgrind")
    ok(w.cmd("cxx", timeout=300).startswith("truth"), "C++ under valgrind")
    # valgrind redirects every malloc to its own: the wrappers see
    # nothing, /heap says so; asked for, pullprof's (empty) profile is
    # still built, under memcheck.
    r = w.get("heap", timeout=120)
    eq(r.status, 404, "/heap under valgrind: 404")
    ok("valgrind replaces malloc" in r.text and "massif" in r.text,
       "... saying valgrind's malloc replaces pullprof's wrappers", r.text)
    eq(w.get("heap?source=interposed", timeout=120).status, 200,
       "/heap?source=interposed under valgrind")
    eq(w.get("allocs?seconds=1&source=interposed", timeout=120).status, 200,
       "/allocs?seconds=1 under valgrind")
    eq(w.cmd("chain-free", timeout=120), "freed", "chain freed")
    memcheck_quit(w, "heapwork")


# pullprof's own functions that host threads run: what they allocate is the
# agent's, not the host's.
AGENT_LEAVES = ("on_image", "refresh_locked", "intern", "created",
                "thread_begins", "start_locked", "stop_locked", "capture")


def agent_samples(p):
    """Samples charged to pullprof's own code: the allocating function (the
    leaf) is in libpullprof, or is one of its functions by name."""
    bad = []
    for s in p.samples:
        ids = s.get("location_id", [])
        if not ids:
            continue
        leaf = p.loc_by_id[ids[0]]
        m = p.map_by_id.get(p.field(leaf, "mapping_id"))
        path = p.s(p.field(m, "filename")) if m else ""
        names = [f[0] for f in p.frames(leaf)]
        if "libpullprof" in os.path.basename(path or "") or any(
                n.startswith("pp_") or n in AGENT_LEAVES for n in names):
            bad.append((names, os.path.basename(path or ""), len(ids),
                        s["value"]))
    return bad


def test_agent_allocations_hidden():
    """Agent code that runs on a host thread (the dlclose wrapper's unwind
    registry refresh, pthread_create's wrapper and the threadcreate record,
    pullprof_start) allocates through the interposed malloc: none of it is
    charged to the host, while the host's own allocations in between (the
    loader's, inside the real dlopen and dlclose) still are."""
    if sanitized():
        skip("agent allocations hidden", NO_HEAP_WHY)
        return
    w = Work({"PULLPROF_HEAP_RATE": "1"})
    ok(w.port, "heapwork started, every allocation sampled", w.ready)
    eq(w.cmd(f"dlcycle {DLLIB} 300", timeout=120), "dlcycle ok",
       "300 dlopen + dlclose of a library")
    # Threads made while a CPU window samples go through the start
    # prologue (a block the wrapper allocates for each).
    got = {}
    t = threading.Thread(
        target=lambda: got.update(r=w.get("profile?seconds=2&hz=100")))
    t.start()
    deadline = time.time() + 30
    while time.time() < deadline and \
            w.get("status").json()["cpu"]["timer_mode"] == "off":
        time.sleep(0.05)
    line = w.cmd("stress 4 1", timeout=120)
    ok(line.startswith("stress ops"), "4 threads made during a CPU window",
       line)
    t.join(60)
    eq(got.get("r") and got["r"].status, 200, "the CPU window answered")
    ok(w.get("status").json()["cpu"]["thread_starts"]["armed"] >= 4,
       "the threads went through the start prologue")
    p = w.profile("allocs")
    bad = agent_samples(p)
    eq(bad, [], "no allocation charged to pullprof's own code")
    names = {f[0] for s in p.samples for loc in p.stack(s) for f in loc}
    ok("dlcycle" in names and "hw_stress_thread" in names,
       "the host's allocations under dlopen/dlclose and its threads are "
       "still there", sorted(n for n in names if n.startswith(("hw_", "dl")))[:20])
    st = w.get("status").json()["heap"]
    ok(st["dropped"] == 0, "nothing dropped", st)
    eq(w.quit(timeout=30), 0, "heapwork exits 0")


LIMIT_FRAME = ("[pullprof: profile size limit reached, "
               "see PULLPROF_MAX_PROFILE_MB]")


def top_row(out, name):
    """Is name a row of `go tool pprof -top` (not only in a comment)?"""
    return any(re.search(r"%\s+" + re.escape(name) + r"$", l)
               for l in out.splitlines())


def test_size_limit():
    """Past PULLPROF_MAX_PROFILE_MB the new stacks go to one synthetic
    frame, which like every location has a mapping (its own, [pullprof]),
    and whose name pprof shows whole, the setting included."""
    if sanitized():
        skip("heap profile size limit", NO_HEAP_WHY)
        return
    w = Work({"PULLPROF_HEAP_RATE": "1", "PULLPROF_MAX_PROFILE_MB": "1"})
    ok(w.port, "heapwork started: every allocation sampled, 1 MiB profiles",
       w.ready)
    eq(w.cmd("stacks 16384", timeout=120), "stacks 16384",
       "64 bytes allocated from each of 16384 stacks")
    r = w.get("allocs")
    eq(r.status, 200, "/allocs: 200")
    p = Profile(r.body)
    names = pptest.check_mapped(p, "/allocs past the size limit")
    ok(LIMIT_FRAME in names, "the stacks past the limit are under "
       "the size-limit frame", sorted(names))
    over = sum(s["value"][0] for s in p.samples
               if p.stack(s) and p.stack(s)[0][0][0] == LIMIT_FRAME)
    ok(over > 1000, "thousands of allocations charged to it", over)
    comments = [p.s(i) for i in p.raw.get("comment", [])]
    ok(any(LIMIT_FRAME in c for c in comments),
       "a comment names the frame", comments)
    with open(os.path.join(os.environ.get("TMPDIR", "/tmp"),
                           f"pp-limit-{os.getpid()}.pb.gz"), "wb") as fh:
        fh.write(r.body)
        path = fh.name
    code, out, err = go_pprof("-top", "-nodecount=1000", path)
    os.unlink(path)
    ok(code == 0, "go tool pprof -top reads it", err)
    ok(top_row(out, LIMIT_FRAME), "go tool pprof -top shows the frame's "
       "whole name, PULLPROF_MAX_PROFILE_MB included",
       [l for l in out.splitlines() if "pullprof" in l])
    ok("symbolization failed" not in err.lower() and
       "[pullprof]" not in err, "pprof does not try to symbolize it", err)
    # Over HTTP with -symbolize=remote: pprof asks /symbol for what it
    # may symbolize, and skips the synthetic mapping.
    code, out, err = go_pprof("-symbolize=remote", "-top", "-nodecount=1000",
                              w.url("allocs"))
    ok(code == 0 and top_row(out, LIMIT_FRAME),
       "go tool pprof -symbolize=remote over HTTP: the same whole name",
       err + out[-1500:])
    ok("[pullprof]" not in err, "and no complaint about the mapping", err)
    eq(w.quit(timeout=30), 0, "heapwork exits 0")


if __name__ == "__main__":
    run([test_accuracy_and_format, test_default_rate, test_rate_zero,
         test_stress_and_fork, test_jemalloc_underneath,
         test_tcmalloc_underneath,
         test_agent_allocations_hidden, test_size_limit, test_valgrind])

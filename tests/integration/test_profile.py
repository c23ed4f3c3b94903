"""The profile core on its own: profiles made by tests/profile/symtest (the
real model, symbolizer and encoder, stacks captured with libunwind) decoded
by protoc and read by go tool pprof, field by field."""
import gzip
import os
import subprocess
import tempfile

from pptest import (BUILD, SRC, Profile, elf_build_id, eq, go_pprof, ok, run,
                    source_line)

SYMTEST = os.path.join(BUILD, "tests", "profile", "symtest")
DLLIB = os.path.join(BUILD, "tests", "profile", ".libs", "libsymtest_dl.so")
NODEBUG = os.path.join(BUILD, "tests", "profile", ".libs", "libsymtest_nodebug.so")
C_SRC = os.path.join(SRC, "tests", "profile", "symtest.c")
CXX_SRC = os.path.join(SRC, "tests", "profile", "symtest_cxx.cc")
DL_SRC = os.path.join(SRC, "tests", "profile", "symtest_dl.c")

tmp = tempfile.mkdtemp()
GZ, RAW = os.path.join(tmp, "s.pb.gz"), os.path.join(tmp, "s.pb")
prof = None


def test_generate():
    global prof
    p = subprocess.run([SYMTEST, "symbols", DLLIB, NODEBUG, GZ, RAW], capture_output=True,
                       text=True, timeout=60)
    eq(p.returncode, 0, "symtest writes the profiles " + p.stderr)
    gz = open(GZ, "rb").read()
    raw = open(RAW, "rb").read()
    eq(gz[:2], b"\x1f\x8b", "the served form is gzip")
    eq(gzip.decompress(gz), raw, "gzip wraps exactly the raw protobuf")
    prof = Profile(gz)
    ok(prof.samples, "protoc decodes it", prof.raw.keys())


def test_structure():
    eq(prof.strings[0], "", "string_table[0] is empty")
    eq(len(set(prof.strings)), len(prof.strings), "no string is stored twice")
    for kind, items in (("mapping", prof.mappings), ("location", prof.locations),
                        ("function", prof.functions)):
        ids = [x["id"][0] for x in items]
        eq(ids, list(range(1, len(ids) + 1)), f"{kind} IDs are 1..N in order")
    eq(prof.sample_types(), [("samples", "count"), ("cpu", "nanoseconds")],
       "sample types")
    pt = prof.raw["period_type"][0]
    eq((prof.s(pt["type"][0]), prof.s(pt["unit"][0])), ("cpu", "nanoseconds"),
       "period type")
    eq(prof.raw["period"], [10000000], "period")
    eq(prof.raw["time_nanos"], [1700000000123456789], "time_nanos")
    eq(prof.raw["duration_nanos"], [2500000000], "duration_nanos")
    eq([prof.s(i) for i in prof.raw["comment"]],
       ["symtest: made by tests/profile/symtest.c"], "comment")
    eq(prof.s(prof.raw["default_sample_type"][0]), "cpu", "default sample type")
    bad = [s for s in prof.samples if len(s.get("value", [])) != 2]
    eq(bad, [], "every sample has one value per sample type")
    addrs = [l["address"][0] for l in prof.locations]
    eq(len(addrs), len(set(addrs)), "one Location per distinct PC")
    keys = [(f.get("name"), f.get("system_name"), f.get("filename"),
             f.get("start_line")) for f in prof.functions]
    eq(len(keys), len(set(map(repr, keys))),
       "one Function per (name, system name, file, start line)")
    for l in prof.locations:
        m = l.get("mapping_id", [0])[0]
        mp = prof.map_by_id.get(m)
        if not ok(mp is not None, f"location {l['id'][0]} has a mapping"):
            continue
        ok(mp["memory_start"][0] <= l["address"][0] < mp["memory_limit"][0],
           f"location {l['id'][0]} lies in its mapping")


def mapping_named(suffix):
    for m in prof.mappings:
        if prof.s(m.get("filename", [0])[0]).endswith(suffix):
            return m
    return None


def test_mappings():
    main = prof.mappings[0]
    eq(prof.s(main["filename"][0]), os.path.realpath(SYMTEST),
       "mapping[0] is the main executable")
    eq(prof.s(main["build_id"][0]), elf_build_id(SYMTEST),
       "main executable build ID as readelf reads it")
    dl = mapping_named("libsymtest_dl.so")
    ok(dl, "the dlopen'ed library has a mapping")
    eq(prof.s(dl["build_id"][0]), elf_build_id(DLLIB), "its build ID")
    for flag in ("has_functions", "has_filenames", "has_line_numbers",
                 "has_inline_frames"):
        eq(dl.get(flag), [True], f"dlopen'ed library: {flag}")
    eq(main.get("has_functions"), [True],
       "main executable: has_functions (every location named)")
    vdso = [m for m in prof.mappings if prof.s(m["filename"][0]) == "[vdso]"]
    ok(len(vdso) == 1 and len(prof.s(vdso[0]["build_id"][0])) == 40,
       "[vdso] is kept, with the build ID of its in-memory image",
       vdso and prof.s(vdso[0]["build_id"][0]))
    loaded = [prof.s(m["filename"][0]) for m in prof.mappings]
    bad = [p for p in loaded if "debuginfod" in p or "libcurl" in p]
    eq(bad, [], "symbolizing loads no debuginfod client (no network, no libcurl)")
    libc = mapping_named("libc.so.6")
    ok(libc and len(prof.s(libc["build_id"][0])) == 40, "libc has a build ID")
    unused = [m for m in prof.mappings
              if m["id"][0] not in {l.get("mapping_id", [0])[0]
                                    for l in prof.locations}]
    bad = [prof.s(m["filename"][0]) for m in unused
           if any(m.get(f) for f in ("has_functions", "has_filenames",
                                     "has_line_numbers", "has_inline_frames"))]
    eq(bad, [], "mappings without locations claim no symbols")


def by_scenario():
    return {prof.labels(s)["scenario"]: s for s in prof.samples}


def test_values_and_labels():
    s = by_scenario()
    eq(sorted(s), ["cxx", "dlopen", "inline", "nodebug", "static"],
       "one sample per scenario")
    for name, count in (("static", 3), ("inline", 5), ("dlopen", 7), ("cxx", 11),
                        ("nodebug", 13)):
        eq(s[name]["value"], [count, count * 10000000],
           f"{name}: the two adds aggregated (values summed)")
    eq(prof.labels(s["static"]), {"scenario": "static", "bytes": (4096, "bytes")},
       "string and numeric labels with a unit")


def test_static_function():
    st = prof.stack(by_scenario()["static"])
    leaf = st[0]
    eq(len(leaf), 1, "static function: one line")
    name, sysname, path, line, start = leaf[0]
    eq(name, "static_leaf", "static function named from DWARF")
    ok(path.endswith("tests/profile/symtest.c"), "static function file", path)
    eq(line, source_line(C_SRC, "MARK:static_call"), "static function line")
    eq(start, source_line(C_SRC, "static __attribute__((noinline)) void static_leaf"),
       "static function start line")
    caller = st[1][0]
    eq(caller[0], "symbols", "caller of the static function")
    eq(caller[3], source_line(C_SRC, "case 0: static_leaf(&c)"),
       "a return address is symbolized as its call site (pc - 1)")


def test_inline_chain():
    st = prof.stack(by_scenario()["inline"])
    leaf = st[0]
    eq([f[0] for f in leaf], ["inlined_helper", "caller_of_inline"],
       "inlined function: two Lines on one Location, innermost first")
    eq(leaf[0][3], source_line(C_SRC, "MARK:inline_call"),
       "inlined function's own line")
    eq(leaf[1][3], source_line(C_SRC, "MARK:inline_site"),
       "line in the function it was inlined into (its call site)")
    eq(leaf[0][4], source_line(C_SRC, "inlined_helper(struct capture *c)"),
       "inlined function start line")
    eq(st[1][0][0], "symbols", "then the caller of the outer function")


def test_dlopen_function():
    st = prof.stack(by_scenario()["dlopen"])
    name, sysname, path, line, start = st[0][0]
    eq(name, "symtest_dl_function", "function of a dlopen'ed library")
    ok(path.endswith("tests/profile/symtest_dl.c"), "its file", path)
    eq(line, source_line(DL_SRC, "MARK:dl_call"), "its line")
    loc = prof.loc_by_id[by_scenario()["dlopen"]["location_id"][0]]
    eq(prof.s(prof.map_by_id[loc["mapping_id"][0]]["filename"][0]),
       os.path.realpath(DLLIB), "its location is in the library's mapping")


def test_cxx_function():
    st = prof.stack(by_scenario()["cxx"])
    name, sysname, path, line, start = st[0][0]
    eq(name, "symtest::compute(void*, int)", "C++ name demangled")
    eq(sysname, "_ZN7symtest7computeEPvi", "mangled name as system_name")
    ok(path.endswith("tests/profile/symtest_cxx.cc"), "C++ file", path)
    eq(line, source_line(CXX_SRC, "MARK:cxx_call"), "C++ line")
    eq(st[1][0][0], "symtest_cxx_entry", "its caller")


def test_no_debug_info():
    st = prof.stack(by_scenario()["nodebug"])
    eq(st[0], [("symtest_nodebug_function", "symtest_nodebug_function", "", 0, 0)],
       "without DWARF: the name from the ELF symbol table, no file or line")
    eq(st[1][0][0], "symbols", "its caller still has full information")
    m = mapping_named("libsymtest_nodebug.so")
    eq(m.get("has_functions"), [True], "no-DWARF library: has_functions")
    for flag in ("has_filenames", "has_line_numbers", "has_inline_frames"):
        eq(m.get(flag), None, f"no-DWARF library: no {flag} claimed")
    eq(prof.s(m["build_id"][0]), elf_build_id(NODEBUG), "its build ID")


def test_go_pprof():
    rc, out, err = go_pprof("-raw", GZ)
    eq(rc, 0, "go tool pprof -raw reads it " + err[-300:])
    ok("PeriodType: cpu nanoseconds" in out, "-raw shows the period type", out[:300])
    ok(elf_build_id(SYMTEST) in out, "-raw lists the main mapping's build ID")
    rc, out, err = go_pprof("-traces", GZ)
    eq(rc, 0, "go tool pprof -traces reads it")
    ok("inlined_helper (inline)\n             caller_of_inline" in out,
       "-traces shows the inline chain", out)
    rc, out, err = go_pprof("-top", "-nodecount=20", GZ)
    eq(rc, 0, "go tool pprof -top reads it")
    for fn in ("symtest::compute(void*, int)", "symtest_dl_function", "static_leaf",
               "inlined_helper", "caller_of_inline"):
        ok(fn in out, f"-top names {fn} without the binaries at hand", out)
    ok("Local symbolization failed" not in err and "unknown" not in out,
       "pprof does not try to symbolize what is done", err)


def test_empty():
    path = os.path.join(tmp, "empty.pb.gz")
    p = subprocess.run([SYMTEST, "empty", path], capture_output=True, timeout=60)
    eq(p.returncode, 0, "an empty profile renders")
    e = Profile(open(path, "rb").read())
    eq(e.samples, [], "no samples")
    eq(e.strings[0], "", "empty profile: string_table[0] is empty")
    ok(e.mappings and not e.locations and not e.functions,
       "empty profile: mappings, no locations or functions")
    rc, out, err = go_pprof("-raw", path)
    eq(rc, 0, "go tool pprof reads the empty profile " + err[-200:])


def test_100k():
    path = os.path.join(tmp, "big.pb.gz")
    p = subprocess.run([SYMTEST, "synthetic", "100000", "30", path],
                       capture_output=True, text=True, timeout=300)
    eq(p.returncode, 0, "100k unique stacks of depth 30 render")
    eq(p.stdout.strip(), "samples=100000", "the model keeps 100k unique stacks")
    b = Profile(open(path, "rb").read())
    eq(len(b.samples), 100000, "100k samples decoded")
    eq(sum(s["value"][0] for s in b.samples), 2 * sum(range(100000)),
       "values survive aggregation and encoding")
    eq(max(len(s["location_id"]) for s in b.samples), 30, "depth 30")
    eq(len(b.locations), 100000 + 997, "one location per distinct PC")
    workers = {b.labels(s)["worker"] for s in b.samples}
    eq(workers, {f"w{i}" for i in range(7)}, "labels survive")
    rc, out, err = go_pprof("-top", "-nodecount=3", path)
    eq(rc, 0, "go tool pprof reads the 100k profile " + err[-200:])


run([test_generate, test_structure, test_mappings, test_values_and_labels,
     test_static_function, test_inline_chain, test_dlopen_function,
     test_cxx_function, test_no_debug_info, test_go_pprof, test_empty, test_100k])

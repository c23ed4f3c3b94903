"""/maps: the executable mappings of a real host as JSON, checked against the
kernel's /proc/PID/maps and readelf: build IDs, what symbols were found, and
files deleted or replaced after they were loaded."""
import os
import shutil
import tempfile

from pptest import BUILD, HOST, LIBSO, Host, curl, elf_build_id, eq, ok, run

LIBDIR = os.path.join(BUILD, "tests", "profile", ".libs")
DLLIB = os.path.join(LIBDIR, "libsymtest_dl.so")
NODEBUG = os.path.join(LIBDIR, "libsymtest_nodebug.so")
tmp = tempfile.mkdtemp(prefix="pp-maps-")

h = Host()
port = h.start()
URL = f"http://127.0.0.1:{port}/debug/pprof/maps"


def maps():
    r = curl(URL)
    eq(r.status, 200, "GET /maps: 200")
    return r.json()


def by_path(doc, path):
    real = os.path.realpath(path)
    return [m for m in doc["mappings"] if m["path"] == real]


def kernel_exec_maps():
    out = []
    with open(f"/proc/{h.pid}/maps") as f:
        for line in f:
            parts = line.split(maxsplit=5)
            if parts[1][2] == "x":
                lo, hi = parts[0].split("-")
                out.append((int(lo, 16), int(hi, 16), int(parts[2], 16)))
    return out


def test_shape():
    r = curl(URL)
    eq(r.header("content-type").split(";")[0], "application/json",
       "JSON content type")
    doc = r.json()
    eq(doc["count"], len(doc["mappings"]), "count matches the list")
    ranges = [(int(m["start"], 16), int(m["limit"], 16), int(m["offset"], 16))
              for m in doc["mappings"]]
    ok(all(m["start"].startswith("0x") and m["limit"].startswith("0x")
           for m in doc["mappings"]), "addresses are 0x hex strings")
    kernel = kernel_exec_maps()
    eq(sorted(set(ranges) - set(kernel)), [],
       "every mapping listed is an executable mapping of /proc/PID/maps")
    eq(sorted(set(kernel) - set(ranges)), [],
       "and every executable mapping is listed")
    eq(sorted(m["id"] for m in doc["mappings"]),
       list(range(1, len(doc["mappings"]) + 1)), "IDs 1..n")
    keys = {"id", "start", "limit", "offset", "path", "build_id", "main",
            "file", "deleted", "replaced", "file_changed", "symbols", "elf_file",
            "debug_file"}
    ok(all(set(m) == keys for m in doc["mappings"]), "every mapping has every key",
       [sorted(m) for m in doc["mappings"][:1]])
    ok(all(m["symbols"] in ("dwarf", "symtab", "none") for m in doc["mappings"]),
       "symbols is dwarf, symtab or none")
    r = curl(URL, "-X", "POST", "--data", "x")
    eq(r.status, 405, "POST: 405")
    r = curl(URL, "-X", "DELETE")
    eq(r.status, 405, "DELETE: 405")
    ok(r.json().get("status") == 405, "with a JSON error", r.body)


def test_host_and_library():
    doc = maps()
    host = by_path(doc, HOST)
    eq(len(host), 1, "the host executable is listed once")
    if host:
        m = host[0]
        eq(m["main"], True, "as the main executable")
        eq(m["id"], 1, "with ID 1")
        eq(m["build_id"], elf_build_id(HOST), "its build ID is readelf's")
        eq(m["symbols"], "dwarf", "DWARF found for it")
        eq(m["elf_file"], os.path.realpath(HOST), "read from its own file")
        eq((m["deleted"], m["replaced"]), (False, False), "not deleted or replaced")
    lib = by_path(doc, LIBSO)
    eq(len(lib), 1, "libpullprof is listed once")
    if lib:
        eq(lib[0]["build_id"], elf_build_id(LIBSO), "its build ID is readelf's")
        eq(lib[0]["symbols"], "dwarf", "DWARF found for libpullprof")
        eq(lib[0]["main"], False, "not the main executable")
    vdso = [m for m in doc["mappings"] if m["path"] == "[vdso]"]
    ok(len(vdso) == 1 and not vdso[0]["file"], "[vdso] is listed, not as a file")
    ok(vdso and len(vdso[0]["build_id"]) >= 16, "[vdso] has a build ID", vdso)


def test_no_debug_info():
    h.cmd(f"dlopen {NODEBUG} symtest_nodebug_function")
    m = by_path(maps(), NODEBUG)
    eq(len(m), 1, "a library without debug info is listed")
    if m:
        eq(m[0]["symbols"], "symtab", "its symbols come from the ELF symbol table")
        eq(m[0]["debug_file"], None, "no debug file")
    h.cmd("dlclose")
    eq(by_path(maps(), NODEBUG), [], "gone after dlclose")


def test_replaced():
    path = os.path.join(tmp, "libreplaced.so")
    shutil.copy(DLLIB, path)
    h.cmd(f"dlopen {path} symtest_dl_function")
    before = by_path(maps(), path)
    ok(before and not before[0]["deleted"] and not before[0]["replaced"],
       "a copied library: not deleted, not replaced", before)
    # Rename another file over it, as a package upgrade does.
    other = path + ".new"
    shutil.copy(NODEBUG, other)
    os.replace(other, path)
    doc = maps()
    after = [m for m in doc["mappings"] if m["path"] == os.path.realpath(path)]
    ok(after and after[0]["deleted"] and after[0]["replaced"],
       "replaced on disk: deleted and replaced", after)
    ok(after and after[0]["build_id"] == elf_build_id(DLLIB),
       "the build ID is still the loaded one", after)
    h.cmd("dlclose")


try:
    run([test_shape, test_host_and_library, test_no_debug_info, test_replaced])
finally:
    h.quit()
    shutil.rmtree(tmp, ignore_errors=True)

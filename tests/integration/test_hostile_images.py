#!/usr/bin/env python3
"""A loaded plugin replaced on disk (issue 27, item 3).

A host (tests/symbols/pluginhost, preloaded) dlopens a plugin from a
temporary folder, calls it (it keeps 16 MiB it allocated, and parks a
thread with its frame on the stack), and then the plugin's file is
truncated, or written over with other bytes of the same size (what `cp`
over a loaded library does: it truncates, then writes). The pages of the
old mapping past the new end raise SIGBUS when read; pages written over
show the new bytes. The agent read the images' program headers and notes
straight from those pages: the next /heap, /goroutine, /maps or /profile,
or the host's next dlclose of anything, killed the host.

Each case asks every endpoint that reads the images, makes the host dlopen
and dlclose another library, and checks that the host is alive and
answering, that /maps says the file changed (and keeps the build ID that
was loaded), that no symbols are read from the changed file, and that
/status counts it.

The plugin is built without a DT_SONAME (Makefile.am says why: glibc's own
dlopen reads the SONAME of every loaded object, and would die on the
truncated file, agent or not).
"""
import os
import shutil
import tempfile

import pptest
from pptest import (NO_HEAP_WHY, Host, Profile, curl, elf_build_id, eq, ok,
                    run, sanitized, skip)

PLUGINHOST = os.path.join(pptest.BUILD, "tests", "symbols", "pluginhost")
PLUGIN1 = os.path.join(pptest.BUILD, "tests", "symbols", "plugin1.so")
PLUGIN2 = os.path.join(pptest.BUILD, "tests", "symbols", "plugin2.so")
OTHER = os.path.join(pptest.BUILD, "tests", "profile", ".libs",
                     "libsymtest_dl.so")
# For showing the test fail against another build: PP_PRELOAD_LIB=/path.
LIB = os.environ.get("PP_PRELOAD_LIB") or pptest.LIBSO


class PluginHost(pptest.Served):
    def __init__(self):
        super().__init__(env=pptest.preload_env(
            lib=LIB, PULLPROF_LISTEN="127.0.0.1:0",
            PULLPROF_HEAP_SAMPLE_RATE="65536"), exe=PLUGINHOST)
        self.served()


def plugin_mapping(maps, path):
    return [m for m in maps["mappings"] if m["path"] == path]


def function_names(data):
    prof = Profile(data)
    return {prof.s(prof.field(f, "name")) for f in prof.functions}


def check_case(name, change, seen_before):
    """Load a copy of plugin1, let the agent see it (or not), change the
    file with change(path), then ask everything."""
    d = tempfile.mkdtemp(prefix="pp-images-")
    path = os.path.join(d, "plugin.so")
    shutil.copyfile(PLUGIN1, path)
    loaded_id = elf_build_id(PLUGIN1)
    h = PluginHost()
    try:
        ok(h.port, f"{name}: the agent serves", h.stderr_text())
        line = h.cmd("load " + path)
        ok(line.startswith("loaded 1 "), f"{name}: the plugin is loaded",
           line)
        addr = line.split()[-1] if line.startswith("loaded") else "0x0"
        if seen_before:
            r = h.get("maps")
            mp = plugin_mapping(r.json(), path) if r.status == 200 else []
            ok(mp and all(m["build_id"] == loaded_id and
                          m.get("file_changed") is None for m in mp),
               f"{name}: before the change /maps shows the plugin as loaded",
               r)
            if not sanitized():
                r = h.get("heap")
                ok(r.status == 200 and
                   "plugin_work" in function_names(r.body),
                   f"{name}: before the change /heap names plugin_work "
                   "(the control: its allocations are sampled)", r)
        change(path)
        # Everything that reads the images.
        for what in ("heap", "goroutine", "goroutine?debug=2", "maps",
                     "profile?seconds=1", "wall?seconds=1", "symbol"):
            r = h.get(what)
            eq(r.status, 200, f"{name}: /{what} is answered after the change")
        r = h.get("symbol", "--data-binary", addr)
        eq(r.status, 200, f"{name}: POST /symbol of plugin_work's address")
        ok("plugin_work" not in r.text,
           f"{name}: plugin_work's address is not named from the changed "
           "file", r.text)
        if pptest.SANITIZER == "tsan" and change is truncate:
            skip(f"{name}: the host dlopens and dlcloses another library",
                 "tsan build: TSan's own dlopen interceptor reads every "
                 "loaded image's headers and dies on the truncated one "
                 "(SIGBUS with the TSan runtime alone, no pullprof)")
        else:
            eq(h.cmd("cycle " + OTHER), "cycled",
               f"{name}: the host dlopens and dlcloses another library")
        r = h.get("maps")
        mp = plugin_mapping(r.json(), path) if r.status == 200 else []
        ok(mp and all(m.get("file_changed") and m["replaced"] and
                      m["symbols"] == "none" for m in mp),
           f"{name}: /maps says the plugin's file changed, replaced, no "
           "symbols", mp or r)
        if seen_before:
            ok(mp and all(m["build_id"] == loaded_id for m in mp),
               f"{name}: /maps keeps the build ID that was loaded", mp)
        # The plugin's allocations put its addresses in /heap.
        if sanitized():
            skip(f"{name}: /heap's comment names the changed file",
                 NO_HEAP_WHY)
        else:
            r = h.get("heap")
            comments = []
            if r.status == 200:
                prof = Profile(r.body)
                comments = [prof.s(c) for c in prof.raw.get("comment", [])]
            ok(any(path in c and "unsymbolized" in c for c in comments),
               f"{name}: /heap's comment names the changed file and says "
               "why its addresses have no names", comments)
            r = h.get("heap?format=text")
            ok(r.status == 200 and
               any(l.startswith("Comment: pullprof: " + path) and
                   "unsymbolized" in l for l in r.text.splitlines()),
               f"{name}: ... and so does its text form", r.text[:1500])
        r = h.get("status")
        ok(r.status == 200 and
           r.json()["symbols"].get("files_changed", 0) >= 1,
           f"{name}: /status counts the changed file (symbols."
           "files_changed)", r.text[-2000:])
        if sanitized():
            skip(f"{name}: /heap after the change names no plugin function",
                 NO_HEAP_WHY)
        else:
            r = h.get("heap")
            ok(r.status == 200 and
               "plugin_work" not in function_names(r.body),
               f"{name}: /heap after the change names no function from "
               "the changed file", r)
        ok(h.alive(), f"{name}: the host's own thread still runs")
    finally:
        code = h.quit()
        eq(code, 0, f"{name}: the host exits 0 (it was not killed)")
        if code != 0:
            print("# " + h.stderr_text()[-3000:].replace("\n", "\n# "))
        shutil.rmtree(d, ignore_errors=True)


def truncate(path):
    os.truncate(path, 0)


def cp_over(path):
    # What cp does: open with O_TRUNC, then write.
    shutil.copyfile(PLUGIN2, path)


def write_over(path):
    # Other bytes of the same size, written in place without truncating.
    with open(PLUGIN2, "rb") as f:
        data = f.read()
    with open(path, "r+b") as f:
        f.write(data[:os.path.getsize(path)])


def test_truncated():
    check_case("truncated", truncate, seen_before=False)


def test_truncated_after_seen():
    check_case("truncated after /maps", truncate, seen_before=True)


def test_cp_over():
    eq(os.path.getsize(PLUGIN1), os.path.getsize(PLUGIN2),
       "the two plugin builds have the same size")
    check_case("cp over", cp_over, seen_before=True)


def test_written_over():
    check_case("written over", write_over, seen_before=True)


def test_reloaded():
    """The control: a plugin unloaded, upgraded on disk and loaded again is
    another image, not one changed under its mapping."""
    d = tempfile.mkdtemp(prefix="pp-images-")
    path = os.path.join(d, "plugin.so")
    shutil.copyfile(PLUGIN1, path)
    h = PluginHost()
    try:
        ok(h.cmd("reload " + path).startswith("loaded 1 "),
           "reloaded: plugin 1 is loaded")
        r = h.get("maps")
        ok(r.status == 200 and plugin_mapping(r.json(), path),
           "reloaded: /maps lists it", r)
        eq(h.cmd("unload"), "unloaded 0", "reloaded: it is unloaded")
        shutil.copyfile(PLUGIN2, path)  # an upgrade, while not loaded
        ok(h.cmd("reload " + path).startswith("loaded 2 "),
           "reloaded: plugin 2 is loaded from the same path")
        r = h.get("maps")
        mp = plugin_mapping(r.json(), path) if r.status == 200 else []
        ok(mp and all(m.get("file_changed") is None and
                      not m["replaced"] and
                      m["build_id"] == elf_build_id(PLUGIN2) and
                      m["symbols"] != "none" for m in mp),
           "reloaded: /maps shows plugin 2 as loaded, unchanged, with "
           "symbols", mp or r)
    finally:
        eq(h.quit(), 0, "reloaded: the host exits 0")
        shutil.rmtree(d, ignore_errors=True)


run([test_truncated, test_truncated_after_seen, test_cp_over,
     test_written_over, test_reloaded])

"""Descriptors are the host's: a host under `ulimit -n 64` that loads 100
libraries and keeps 40 files open (closing and opening them again all along)
never gets EMFILE while /maps, /symbol, a CPU profile and /heap run; the
symbols are right; the agent holds no descriptor of a symbol file afterwards
(the process's count is back where it was) and says what it holds in
/status. When the process has no descriptor left for a file the symbolizer
needs, the request answers 503 naming EMFILE, and the next one, with
descriptors free again, has every symbol (the failure was not cached)."""
import concurrent.futures
import os
import shutil
import subprocess
import tempfile
import time

from pptest import Host, curl, eq, ok, preload_env, run, sanitized, skip

LIMIT = 64
NLIBS = 100
HELD_BY_HOST = 40  # files the host keeps open while the requests run
CC = os.environ.get("CC") or "cc"
tmp = tempfile.mkdtemp(prefix="pp-fds-")


def build_libs():
    """100 libraries, each with its own function fdlib_fn_N: the even ones
    with DWARF, the odd ones with an ELF symbol table only; library 7 has
    its DWARF and full symbol table in a separate file found by its
    .gnu_debuglink (and a static function only that file names)."""
    libs = []
    procs = []
    for i in range(NLIBS):
        src = os.path.join(tmp, f"fdlib{i}.c")
        with open(src, "w") as f:
            f.write(f"__attribute__((noinline)) static int fdlib_static_{i}"
                    f"(int x) {{ return x * {i + 3} + 1; }}\n"
                    f"__attribute__((noinline)) int fdlib_fn_{i}(int x) "
                    f"{{ return fdlib_static_{i}(x) + {i}; }}\n")
        so = os.path.join(tmp, f"libfd{i}.so")
        flags = ["-g"] if i % 2 == 0 or i == 7 else []
        procs.append(subprocess.Popen(
            [CC, "-shared", "-fPIC", "-O1", *flags, "-o", so, src]))
        libs.append(so)
        if len(procs) >= 4:
            for p in procs:
                p.wait()
            procs = []
    for p in procs:
        p.wait()
    seven = libs[7]
    subprocess.run(["objcopy", "--only-keep-debug", seven, seven + ".debug"],
                   check=True)
    subprocess.run(["objcopy", "--strip-debug", "--strip-unneeded",
                    f"--add-gnu-debuglink={seven}.debug", seven], check=True,
                   cwd=tmp)
    return libs


def symbol_value(path, name):
    out = subprocess.run(["nm", path], capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == name:
            return int(parts[0], 16)
    return None


def fds(pid):
    return sorted(int(x) for x in os.listdir(f"/proc/{pid}/fd"))


def symbolize(port, addrs):
    r = curl(f"http://127.0.0.1:{port}/debug/pprof/symbol", "--data-binary",
             "+".join(hex(a) for a in addrs), timeout=60)
    names = {}
    for line in r.text.splitlines()[1:] if r.status == 200 else []:
        a, _, name = line.partition(" ")
        names[int(a, 16)] = name
    return r, names


def status(port):
    return curl(f"http://127.0.0.1:{port}/debug/pprof/status", timeout=10)


def settle(pid, want, timeout=15):
    """The process's descriptors once the connections just closed are
    gone from it (libmicrohttpd closes them on its next turn)."""
    deadline = time.time() + timeout
    while True:
        now = fds(pid)
        if now == want or time.time() > deadline:
            return now
        time.sleep(0.1)


# open() failing with EMFILE for one file, on demand: what the symbolizer
# meets when the host takes the last descriptor between two of its opens.
SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>
static int refuse(const char *p)
{
	return strstr(p, "libfdunopened") && access(TRIGGER, F_OK) == 0;
}
#define WRAP(name)                                                          \
	int name(const char *p, int flags, ...)                             \
	{                                                                   \
		static int (*real)(const char *, int, ...);                 \
		va_list ap;                                                 \
		va_start(ap, flags);                                        \
		int mode = va_arg(ap, int);                                 \
		va_end(ap);                                                 \
		if (refuse(p)) {                                            \
			errno = EMFILE;                                     \
			return -1;                                          \
		}                                                           \
		if (!real)                                                  \
			real = (int (*)(const char *, int, ...))dlsym(      \
			    RTLD_NEXT, #name);                              \
		return real(p, flags, mode);                                \
	}
WRAP(open)
WRAP(open64)
"""
TRIGGER = os.path.join(tmp, "refuse")


def build_shim():
    src = os.path.join(tmp, "shim.c")
    with open(src, "w") as f:
        f.write(f'#define TRIGGER "{TRIGGER}"\n' + SHIM)
    so = os.path.join(tmp, "libshim.so")
    subprocess.run([CC, "-shared", "-fPIC", "-O1", "-o", so, src, "-ldl"],
                   check=True)
    return so


libs = build_libs()
# Sanitizer builds: their runtime must come first, and is left alone.
env = None if sanitized() else preload_env(build_shim())
# Under the limit from its first instruction, as `ulimit -n 64` would.
h = Host(env=env, prefix=["prlimit", f"--nofile={LIMIT}:{LIMIT}", "--"])
port = h.start()
addrs = {}
for i, so in enumerate(libs):
    line = h.cmd(f"dlopen {so} fdlib_fn_{i}")
    if line.startswith("addr "):
        addrs[int(line.split()[1], 16)] = f"fdlib_fn_{i}"
# fdlib_static_7 is named by the debug file only.
static7 = None
fn7 = next(a for a, n in addrs.items() if n == "fdlib_fn_7")
v_fn, v_static = (symbol_value(libs[7] + ".debug", "fdlib_fn_7"),
                  symbol_value(libs[7] + ".debug", "fdlib_static_7"))
if v_fn is not None and v_static is not None:
    static7 = fn7 - v_fn + v_static


def test_host_keeps_its_descriptors():
    eq(len(addrs), NLIBS, f"the host loaded {NLIBS} libraries under "
       f"ulimit -n {LIMIT}")
    before = fds(h.pid)
    eq(h.cmd(f"churn /dev/null {HELD_BY_HOST}"), "ok",
       f"the host keeps {HELD_BY_HOST} files open, again and again")
    statuses = []

    def poll_status(stop):
        while not stop():
            r = status(port)
            statuses.append(r.status)
            time.sleep(0.05)

    done = [False]
    with concurrent.futures.ThreadPoolExecutor(6) as ex:
        poller = ex.submit(poll_status, lambda: done[0])
        maps = ex.submit(curl, f"http://127.0.0.1:{port}/debug/pprof/maps",
                         timeout=60)
        sym = ex.submit(symbolize, port,
                        list(addrs) + ([static7] if static7 else []))
        prof = ex.submit(curl, f"http://127.0.0.1:{port}/debug/pprof/"
                         "profile?seconds=2", timeout=60)
        heap = ex.submit(curl, f"http://127.0.0.1:{port}/debug/pprof/heap",
                         timeout=60)
        maps, (sym, names), prof, heap = (maps.result(), sym.result(),
                                          prof.result(), heap.result())
        # A second round: the symbolizer's cache, no file opened again.
        maps2 = curl(f"http://127.0.0.1:{port}/debug/pprof/maps", timeout=60)
        done[0] = True
        poller.result()
    line = h.cmd("churned")
    opens, fails = (int(x) for x in line.split()[1:3])
    ok(opens > HELD_BY_HOST, f"the host opened files all along ({opens})",
       line)
    eq(fails, 0, "and none of its opens failed (no EMFILE)")
    eq(maps.status, 200, "/maps: 200")
    eq(maps2.status, 200, "/maps again: 200")
    eq(sym.status, 200, "/symbol: 200")
    eq(prof.status, 200, "/profile?seconds=2: 200")
    eq(heap.status, 200, "/heap: 200")
    ok(statuses and all(s == 200 for s in statuses),
       f"/status answered all along ({len(statuses)} times)", statuses)
    wrong = {hex(a): (n, names.get(a)) for a, n in addrs.items()
             if names.get(a) != n}
    eq(wrong, {}, f"the {NLIBS} functions are named right")
    if static7:
        eq(names.get(static7), "fdlib_static_7",
           "a static function named by the separate debug file")
    doc = maps.json() if maps.status == 200 else {"mappings": []}
    seen = {m["path"]: m for m in doc["mappings"]}
    kinds = [seen.get(os.path.realpath(so), {}).get("symbols")
             for so in libs]
    eq(kinds, ["dwarf" if i % 2 == 0 or i == 7 else "symtab"
               for i in range(NLIBS)],
       "/maps: DWARF for the -g libraries, the symbol table for the others")
    m7 = seen.get(os.path.realpath(libs[7]), {})
    eq((m7.get("elf_file"), m7.get("debug_file")),
       (os.path.realpath(libs[7]), os.path.realpath(libs[7]) + ".debug"),
       "/maps: library 7's DWARF from its debug file")
    after = settle(h.pid, before)
    eq(after, before, "the process holds the descriptors it held before "
       "(none kept for the files read)")
    st = status(port).json()["descriptors"]
    eq(st["limit"], LIMIT, "/status descriptors.limit: the soft limit")
    eq(st["share"], 16, "descriptors.share: 16 at 64")
    # The server's 4, libunwind's pipe, this request's connection.
    ok(st["held"] <= 8, f"descriptors.held: {st['held']}", st)


def test_no_descriptor_left():
    """The host holds all its descriptors but one: that one goes to the
    connection, the symbolizer can open nothing."""
    # A new library: the symbolizer reads the mappings afresh.
    extra = os.path.join(tmp, "libfdextra.so")
    shutil.copy(libs[0], extra)
    line = h.cmd(f"dlopen {extra} fdlib_fn_0")
    ok(line.startswith("addr "), "one more library", line)
    extra_addr = int(line.split()[1], 16)
    before = fds(h.pid)
    free = LIMIT - len(before)
    line = h.cmd(f"hold /dev/null {free - 1}")
    eq(line, f"holding {free - 1}", "the host holds all its descriptors "
       "but one")
    try:
        r = curl(f"http://127.0.0.1:{port}/debug/pprof/maps", timeout=30)
        s = symbolize(port, [extra_addr])[0]
        st = status(port)
    finally:
        h.cmd("unhold")
    eq(r.status, 503, "/maps with no descriptor to spare: 503")
    ok("EMFILE" in r.text, "naming EMFILE", r.text)
    eq(s.status, 503, "/symbol likewise: 503")
    ok("EMFILE" in s.text, "naming EMFILE", s.text)
    eq(st.status, 200, "/status answers")
    r = curl(f"http://127.0.0.1:{port}/debug/pprof/maps", timeout=60)
    eq(r.status, 200, "descriptors free again: /maps 200")
    doc = r.json() if r.status == 200 else {"mappings": []}
    kinds = {m["path"]: m["symbols"] for m in doc["mappings"]}
    eq(kinds.get(os.path.realpath(extra)), "dwarf",
       "the file that could not be opened is read now (not remembered as "
       "one without symbols)")
    _, names = symbolize(port, [extra_addr])
    eq(names.get(extra_addr), "fdlib_fn_0", "and its symbol found")
    eq(settle(h.pid, before), before, "no descriptor kept")
    ok(status(port).json()["descriptors"]["refused"] > 0,
       "descriptors.refused counts the opens that failed")


def test_symbol_file_unopenable():
    """/proc/self/maps was read, the library's file cannot be opened
    (EMFILE): 503 naming it, and the next request has the symbols."""
    if env is None:
        skip("a file the symbolizer cannot open", "sanitizer build: "
             "no open() shim in front of its runtime")
        return
    lib = os.path.join(tmp, "libfdunopened.so")
    shutil.copy(libs[2], lib)
    line = h.cmd(f"dlopen {lib} fdlib_fn_2")
    ok(line.startswith("addr "), "a library", line)
    addr = int(line.split()[1], 16)
    open(TRIGGER, "w").close()
    try:
        r = curl(f"http://127.0.0.1:{port}/debug/pprof/maps", timeout=30)
        s = symbolize(port, [addr])[0]
    finally:
        os.unlink(TRIGGER)
    eq(r.status, 503, "/maps when a symbol file cannot be opened: 503")
    ok("symbol files could not be read" in r.text and "EMFILE" in r.text,
       "naming EMFILE", r.text)
    eq(s.status, 503, "/symbol likewise: 503")
    ok("EMFILE" in s.text, "naming EMFILE", s.text)
    r = curl(f"http://127.0.0.1:{port}/debug/pprof/maps", timeout=60)
    doc = r.json() if r.status == 200 else {"mappings": []}
    kinds = {m["path"]: m["symbols"] for m in doc["mappings"]}
    eq(kinds.get(os.path.realpath(lib)), "dwarf",
       "once it can be opened: its DWARF (the failure was not remembered)")
    _, names = symbolize(port, [addr])
    eq(names.get(addr), "fdlib_fn_2", "and its symbol")


try:
    run([test_host_keeps_its_descriptors, test_no_descriptor_left,
         test_symbol_file_unopenable])
finally:
    h.quit()
    shutil.rmtree(tmp, ignore_errors=True)

#!/usr/bin/env python3
"""Strings that are not UTF-8 (issue 27, item 9), read by strict parsers.

tests/strings/badnames names its threads with bytes of its choosing (the
kernel keeps 15 of them: a name cut in the middle of a 2-, 3- and 4-byte
character, and \\xff\\xfe\\x80\\xc3( itself), pushes a profile label whose key
and value are not UTF-8, loads a library from a path that is not and whose
function's name (in its ELF symbol table, renamed with objcopy) is not
either, and runs with an argument that is not. Every endpoint and format
that carries those strings is fetched and read the strict way: protoc
--decode (which refuses a pprof string table with invalid UTF-8, and logs
it for a Perfetto trace), go tool pprof, Python's json.loads on bytes
decoded with errors="strict", bytes.decode("utf-8") for the texts, promtool
check metrics. Each bad sequence must show as U+FFFD (one per maximal
ill-formed subsequence, as Python's errors="replace" makes it), with the
valid part of each name kept, and a valid name (naïve-名前, a label café)
unchanged everywhere. /cmdline is the exception by design: the argument
bytes exactly, NUL-separated, as Go serves them (/status has them as
text).
"""
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pptest import (BUILD, NO_CPU_TRUTH_WHY, NO_HEAP_WHY, PROFILE_PROTO_DIR,  # noqa: E402
                    SANITIZER, Host, curl, eq, find_protos, go_pprof, ok, run,
                    sanitized, skip)

BADNAMES = os.path.join(BUILD, "tests", "strings", "badnames")
BADLIB = os.path.join(BUILD, "tests", "strings", ".libs", "libbadlib.so")
PROMTOOL_PLACES = (os.environ.get("PP_PROMTOOL"), "/opt/pullprof-test/promtool",
                   shutil.which("promtool"))
R = "\ufffd"

# (name the host sets, label (key, value) or None, the 15 bytes or fewer
# the kernel keeps, the text every answer must show)
THREADS = [
    (b"\xff\xfe\x80\xc3(", (b"k\xffey", b"v\xc3al\xe2\x82"),
     b"\xff\xfe\x80\xc3(", R * 4 + "("),
    ("cut2-abcdefghié".encode(), None, b"cut2-abcdefghi\xc3",
     "cut2-abcdefghi" + R),
    ("cut3-abcdefgh€".encode(), None, b"cut3-abcdefgh\xe2\x82",
     "cut3-abcdefgh" + R),
    ("cut4-abcdefg😀".encode(), None, b"cut4-abcdefg\xf0\x9f\x98",
     "cut4-abcdefg" + R),
    ("naïve-名前".encode(), ("tenant".encode(), "café".encode()),
     "naïve-名前".encode(), "naïve-名前"),
]
LABEL_TEXTS = ["k" + R + "ey", "v" + R + "al" + R, "tenant", "café"]
LIB_FILE = b"lib\xff\xfe\x80bad\xc3.so"
LIB_TEXT = "lib" + R * 3 + "bad" + R + ".so"
FUNC = b"bad\xc3(work\xe2\x82"
FUNC_TEXT = "bad" + R + "(work" + R
ARG = b"arg-\xff-x"
ARG_TEXT = "arg-" + R + "-x"

state = {}


def url(path):
    return f"http://127.0.0.1:{state['port']}/debug/pprof/{path}"


def get(path, timeout=60):
    r = curl(url(path), timeout=timeout)
    if r.status != 200:
        raise AssertionError(f"{path}: {r.status} {r.body[:300]!r}")
    return r


def strict_text(body, what):
    """The body as UTF-8, strictly; None (a failed check) when it is not."""
    try:
        return body.decode("utf-8", "strict")
    except UnicodeDecodeError as e:
        ok(False, f"{what}: valid UTF-8", f"{e}: {body[max(0, e.start - 40):e.end + 40]!r}")
        return None


def strict_json(body, what):
    text = strict_text(body, what)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as e:
        ok(False, f"{what}: JSON", e)
        return None


def strings_of(obj):
    """Every string in a JSON value, keys too."""
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from strings_of(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from strings_of(v)


def protoc(data, proto_path, message, proto):
    """protoc --decode; (exit code, stdout text, stderr text). protoc's
    text format escapes every byte that is not printable ASCII, so the
    strings are unescaped and then decoded strictly."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    p = subprocess.run(["protoc", f"-I{proto_path}", f"--decode={message}",
                        proto], input=data, capture_output=True, timeout=300)
    return p.returncode, p.stdout.decode("ascii", "replace"), \
        p.stderr.decode("utf-8", "replace")


def protoc_strings(text, what):
    """The string fields of protoc's text output, decoded strictly. Build
    IDs are bytes fields (Perfetto's InternedString in build_ids): those
    blocks are left out."""
    out, blocks = [], []
    for line in text.splitlines():
        line = line.strip()
        if line.endswith("{"):
            blocks.append(line[:-1].strip())
            continue
        if line == "}":
            blocks.pop()
            continue
        m = re.match(r'[\w.\[\]]+: "((?:[^"\\]|\\.)*)"$', line)
        if not m or "build_ids" in blocks:
            continue
        b = bytes(m.group(1).encode("latin-1").decode("unicode_escape"),
                  "latin-1")
        try:
            out.append(b.decode("utf-8", "strict"))
        except UnicodeDecodeError as e:
            ok(False, f"{what}: every string is UTF-8", f"{e}: {b!r}")
    return out


def check_pprof(data, what, want=(), go=True):
    """protoc (strict, as Go's protobuf library is) and go tool pprof;
    the texts of want in the string table."""
    rc, out, err = protoc(data, PROFILE_PROTO_DIR,
                          "perftools.profiles.Profile", "profile.proto")
    if not ok(rc == 0 and "invalid UTF-8" not in err,
              f"{what}: protoc --decode=perftools.profiles.Profile reads it",
              err[-2000:]):
        return None
    strings = protoc_strings(out, what)
    for w in want:
        ok(w in strings, f"{what}: the string table holds {w!r}",
           [s for s in strings if R in s or "cut" in s][:40])
    if go:
        with tempfile.NamedTemporaryFile(suffix=".pb.gz") as f:
            f.write(data)
            f.flush()
            for mode in ("-raw", "-traces"):
                rc, gout, gerr = go_pprof(mode, f.name)
                ok(rc == 0, f"{what}: go tool pprof {mode} reads it",
                   gerr[-2000:])
    return strings


def thread_texts():
    return [t[3] for t in THREADS]


# --- the host ----------------------------------------------------------------

def test_host():
    """The host, its library and its threads, each name as the kernel
    keeps it."""
    d = tempfile.mkdtemp(prefix="pp-utf8-")
    state["dir"] = d
    lib = os.path.join(d.encode(), LIB_FILE)
    shutil.copy(BADLIB, lib)
    # The function's name in .symtab (the symbolizer's source for a
    # library without DWARF); dlsym finds it by .dynsym's, unchanged.
    subprocess.run([b"objcopy", b"--redefine-sym", b"badlib_work=" + FUNC,
                    lib], check=True)
    state["lib"] = lib
    h = Host(env={"PULLPROF_LISTEN": "127.0.0.1:0",
                  "PULLPROF_HEAP_RATE": "1"},
             exe=BADNAMES, args=(ARG,))
    state["host"] = h
    m = re.match(r"port (\d+)", h.ready)
    if not ok(m, "the host serves", h.ready + h.stderr_text()):
        raise RuntimeError("no host")
    state["port"] = int(m.group(1))
    line = h.cmd(f"dlopen {lib.hex()} {b'badlib_work'.hex()}")
    if not ok(line.startswith("ok 0x"), "the library loads from a path that "
              "is not UTF-8", line):
        raise RuntimeError("no library")
    state["func_addr"] = int(line.split()[1], 16)
    state["tids"] = {}
    for name, label, comm, text in THREADS:
        words = ["thread", name.hex()]
        if label:
            words += [label[0].hex(), label[1].hex()]
        line = h.cmd(" ".join(words))
        m = re.match(r"tid (\d+) ([0-9a-f]*)$", line)
        ok(m and bytes.fromhex(m.group(2)) == comm,
           f"thread {text!r}: the kernel keeps {comm!r}", line)
        if m:
            state["tids"][int(m.group(1))] = text


# --- thread dumps ------------------------------------------------------------

def test_goroutine():
    r = get("goroutine")
    check_pprof(r.body, "/goroutine", thread_texts())
    for q in ("debug=1", "debug=2"):
        text = strict_text(get(f"goroutine?{q}").body, f"/goroutine?{q}")
        if text is None:
            continue
        ok(True, f"/goroutine?{q}: valid UTF-8")
        for tid, name in state["tids"].items():
            if q == "debug=2":
                ok(f'thread {tid} "{name}"' in text,
                   f"/goroutine?debug=2: thread {tid} is \"{name}\"",
                   text[:3000])
            else:
                ok(name in text, f"/goroutine?debug=1 names {name!r}")
    js = strict_json(get("goroutine?format=json").body,
                     "/goroutine?format=json")
    if js is not None:
        ok(True, "/goroutine?format=json: strict JSON")
        strs = set(strings_of(js))
        for name in thread_texts():
            ok(name in strs, f"/goroutine?format=json holds {name!r}")


# --- CPU, in every format ----------------------------------------------------

def test_profile():
    r = get("profile?seconds=2", timeout=90)
    pid = r.header("x-pullprof-profile-id")
    want = thread_texts() + LABEL_TEXTS
    if SANITIZER != "tsan":
        want += [FUNC_TEXT]
    strings = check_pprof(r.body, "/profile", want)
    if strings is not None:
        lib_text = os.path.join(state["dir"], LIB_TEXT)
        ok(lib_text in strings, "/profile: the library's mapping is "
           f"{lib_text!r}", [s for s in strings if "lib" in s])
    if SANITIZER == "tsan":
        skip("/profile: the function's name", NO_CPU_TRUTH_WHY)

    text = strict_text(get(f"profile?id={pid}&debug=1").body,
                       "/profile?debug=1")
    if text is not None:
        ok(True, "/profile?debug=1: valid UTF-8")
        if SANITIZER != "tsan":
            ok(FUNC_TEXT in text, f"/profile?debug=1 names {FUNC_TEXT!r}",
               text[:3000])
    text = strict_text(get(f"profile?id={pid}&format=folded").body,
                       "/profile?format=folded")
    if text is not None:
        ok(True, "/profile?format=folded: valid UTF-8")
        if SANITIZER != "tsan":
            ok(FUNC_TEXT in text,
               f"/profile?format=folded names {FUNC_TEXT!r}", text[:3000])
    js = strict_json(get(f"profile?id={pid}&format=json").body,
                     "/profile?format=json")
    if js is not None:
        ok(True, "/profile?format=json: strict JSON (the viewer's data)")
        strs = set(strings_of(js))
        for w in want:
            ok(w in strs, f"/profile?format=json holds {w!r}")
        paths = [m.get("path", "") for m in js.get("mappings", [])]
        ok(os.path.join(state["dir"], LIB_TEXT) in paths,
           "/profile?format=json: the library's mapping path", paths)
    # Mapping paths are interned by component there.
    trace(get(f"profile?id={pid}&format=perfetto").body,
          "/profile?format=perfetto", thread_texts() + [ARG_TEXT, LIB_TEXT] +
          ([FUNC_TEXT] if SANITIZER != "tsan" else []))


def trace(data, what, want):
    protos = find_protos()
    if not os.path.exists(os.path.join(protos, "protos", "perfetto", "trace",
                                       "trace.proto")):
        skip(f"{what}: decoded", f"Perfetto's protos are not here ({protos})")
        return
    rc, out, err = protoc(data, protos, "perfetto.protos.Trace",
                          "protos/perfetto/trace/trace.proto")
    ok(rc == 0 and "invalid UTF-8" not in err,
       f"{what}: protoc --decode=perfetto.protos.Trace reads it, no string "
       "with invalid UTF-8", err[-2000:])
    strings = protoc_strings(out, what)
    for w in want:
        ok(w in strings, f"{what} holds {w!r}",
           [s for s in strings if R in s][:40])


# --- wall clock, heap ---------------------------------------------------------

def test_wall():
    r = get("wall?seconds=1", timeout=90)
    pid = r.header("x-pullprof-profile-id")
    check_pprof(r.body, "/wall", thread_texts())
    js = strict_json(get(f"wall?id={pid}&format=json").body,
                     "/wall?format=json")
    if js is not None:
        ok(True, "/wall?format=json: strict JSON")
        strs = set(strings_of(js))
        for name in thread_texts():
            ok(name in strs, f"/wall?format=json holds {name!r}")
    if strict_text(get(f"wall?id={pid}&debug=1").body,
                   "/wall?debug=1") is not None:
        ok(True, "/wall?debug=1: valid UTF-8")
    trace(get(f"wall?id={pid}&format=perfetto").body,
          "/wall?format=perfetto", thread_texts())


def test_heap():
    r = get("heap")
    want = [] if sanitized() else \
        [FUNC_TEXT, os.path.join(state["dir"], LIB_TEXT)] + LABEL_TEXTS
    check_pprof(r.body, "/heap", want)
    if sanitized():
        skip("/heap: the function, the path, the labels", NO_HEAP_WHY)
    text = strict_text(get("heap?debug=1").body, "/heap?debug=1")
    if text is not None:
        ok(True, "/heap?debug=1: valid UTF-8")
        if not sanitized():
            ok(FUNC_TEXT in text, f"/heap?debug=1 names {FUNC_TEXT!r}",
               text[:3000])
    if strict_json(get("heap?format=json").body,
                   "/heap?format=json") is not None:
        ok(True, "/heap?format=json: strict JSON")
    if strict_text(get("heap?format=folded").body,
                   "/heap?format=folded") is not None:
        ok(True, "/heap?format=folded: valid UTF-8")


# --- the JSON endpoints, /symbol, /metrics, /cmdline ----------------------------

def test_json_endpoints():
    js = strict_json(get("threads").body, "/threads")
    if js is not None:
        names = {t["tid"]: t["name"] for t in js["threads"]}
        for tid, name in state["tids"].items():
            eq(names.get(tid), name, f"/threads: thread {tid}'s name")
    js = strict_json(get("status").body, "/status")
    if js is not None:
        ok(ARG_TEXT in js.get("cmdline", []),
           f"/status: cmdline holds {ARG_TEXT!r}", js.get("cmdline"))
    r = curl(url("maps"), timeout=120)
    js = strict_json(r.body, "/maps")
    if js is not None:
        lib_text = os.path.join(state["dir"], LIB_TEXT)
        found = [m for m in js.get("mappings", js if isinstance(js, list)
                                   else []) if m.get("path") == lib_text]
        ok(found, f"/maps: the library's path is {lib_text!r}",
           str(js)[:2000])


def test_symbol():
    r = curl(url("symbol"), "--data-binary", hex(state["func_addr"]))
    text = strict_text(r.body, "/symbol")
    if text is not None:
        ok(FUNC_TEXT in text, f"/symbol names the function {FUNC_TEXT!r}",
           text)


def test_metrics():
    promtool = next((p for p in PROMTOOL_PLACES if p and os.path.exists(p)),
                    None)
    body = get("metrics").body
    if strict_text(body, "/metrics") is not None:
        ok(True, "/metrics: valid UTF-8")
    if not ok(promtool, "promtool is installed (scripts/deps.sh --test)"):
        return
    p = subprocess.run([promtool, "check", "metrics"], input=body,
                       capture_output=True, timeout=60)
    ok(p.returncode == 0, "/metrics: promtool check metrics",
       (p.stdout + p.stderr).decode("utf-8", "replace")[-2000:])


def test_cmdline():
    """/cmdline stays Go's: the arguments' exact bytes, NUL-separated (the
    one answer not repaired; /status has them as text)."""
    r = get("cmdline")
    ok(ARG in r.body.split(b"\0"), "/cmdline: the argument's bytes exactly "
       "(Go's convention)", r.body)


def test_quit():
    h = state.get("host")
    if h:
        ok(h.p.poll() is None, "the host ran on through all of it")
        eq(h.cmd("quit", timeout=30), "bye", "the host quits")
    shutil.rmtree(state.get("dir", "/nonexistent"), ignore_errors=True)


if __name__ == "__main__":
    run([test_host, test_goroutine, test_profile, test_wall, test_heap,
         test_json_endpoints, test_symbol, test_metrics, test_cmdline,
         test_quit])

"""The documentation stays true to the code: every PULLPROF_* setting with its
default and range (from the settings table itself, through
tests/settings_dump), every endpoint of the routing table, every public
function, in the place its reader looks (README, docs/, the man pages); the
man pages are clean groff; the README stays short and its links lead
somewhere; and nothing documented is unknown to the code."""
import glob
import json
import os
import re
import shutil
import subprocess
import tempfile

from pptest import BUILD, SRC, eq, ok, run, skip, version


def read(*path):
    with open(os.path.join(SRC, *path)) as f:
        return f.read()


readme = read("README.md")
config_md = read("docs", "configuration.md")
endpoints_md = read("docs", "endpoints.md")
man3 = read("man", "pullprof.3")
man7 = read("man", "pullprof.7")
hacking = read("HACKING.md")
docs = {os.path.relpath(p, SRC): open(p).read()
        for p in glob.glob(os.path.join(SRC, "docs", "*.md"))}
code = ""
for path in glob.glob(os.path.join(SRC, "src", "**", "*.[ch]"), recursive=True):
    code += open(path).read()
header = read("include", "pullprof.h")

DUMP = os.path.join(BUILD, "tests", "settings_dump")
settings = json.loads(subprocess.run([DUMP], capture_output=True, text=True,
                                     check=True).stdout)
routes = json.loads(subprocess.run([DUMP, "--routes"], capture_output=True,
                                   text=True, check=True).stdout)


def man_text(source):
    """What a reader of the man page sees, as plain text."""
    r = subprocess.run(["groff", "-man", "-Tutf8", "-P-cbou"], input=source,
                       capture_output=True, text=True)
    return r.stdout


def config_rows():
    """docs/configuration.md's table: variable -> (default, range, meaning)."""
    rows = {}
    for m in re.finditer(r"^\| `(PULLPROF_[A-Z_]+)` \| [^|]* \| ([^|]*) \| ([^|]*) \| (.*)\|$",
                         config_md, re.M):
        rows[m.group(1)] = tuple(c.strip() for c in m.group(2, 3, 4))
    return rows


def test_settings():
    ok(len(settings) >= 20, "tests/settings_dump lists the settings table",
       len(settings))
    rows = config_rows()
    text7 = man_text(man7)
    for s in settings:
        env = s["env"]
        row = rows.get(env)
        ok(row is not None, f"{env} has a row in docs/configuration.md")
        if row is None:
            continue
        default, rng, meaning = row
        if s["type"] == "uint":
            eq(default, f"`{s['default']}`", f"{env}: the documented default is the code's")
            want = f"{s['min']}..{s['max']}" + (f" {s['unit']}" if s["unit"] else "")
            eq(rng, want, f"{env}: the documented range is the code's")
            man_want = f"Default {s['default']}, range {want}."
        else:
            want_default = f"`{s['default']}`" if s["default"] is not None else None
            ok(default == want_default if want_default else default in ("none", "any"),
               f"{env}: the documented default is the code's ({s['default']})", default)
            if s["choices"]:
                eq(rng, " or ".join(f"`{c}`" for c in s["choices"].split("|")),
                   f"{env}: the documented choices are the code's")
            man_want = (f"Default {s['default']}." if s["default"] is not None
                        else "Default: none.")
        # One source for a range: the Range column, not the prose beside it.
        ok(not re.search(r"\b\d+\.\.\d+\b", meaning),
           f"{env}: no second range in the meaning column", meaning)
        block = re.search(rf"^ +{env}\n(.*?)(?=^ +PULLPROF_|^[A-Z])", text7,
                          re.M | re.S)
        ok(block and man_want in " ".join(block.group(1).split()),
           f"pullprof(7) has {env} with its default and range", man_want)


def test_variables():
    in_code = set(re.findall(r'"(PULLPROF_[A-Z_]+)"', code))
    in_table = {s["env"] for s in settings}
    ok(in_table <= in_code, "every setting of the table is read by the code")
    rows = config_rows()
    for var in sorted(in_code):
        ok(var in rows, f"{var} has a row in docs/configuration.md")
        ok(re.search(rf"^\.B {var}$", man7, re.M), f"{var} is in pullprof(7)")
    in_header = set(re.findall(r"\b(PULLPROF_[A-Z_]+)\s*=", header))
    in_header |= set(re.findall(r"#define (PULLPROF_[A-Z_]+)", header))
    known = in_code | in_header
    for name, text in [("README.md", readme), ("HACKING.md", hacking),
                       ("man/pullprof.3", man3), ("man/pullprof.7", man7)] + \
            sorted(docs.items()):
        unknown = sorted(set(re.findall(r"PULLPROF_[A-Z_]+", text)) - known)
        eq(unknown, [], f"{name} names no unknown variable or constant")


def header_fields():
    """struct pullprof_config's fields in order: (name, comment) with the
    comment the field's declaration follows, as plain words."""
    body = re.search(r"^struct pullprof_config \{(.*?)^\};", header,
                     re.M | re.S).group(1)
    fields, comment = [], ""
    for m in re.finditer(r"/\*(.*?)\*/|([^;/]+);", body, re.S):
        if m.group(1) is not None:
            comment = " ".join(re.sub(r"^\s*\*", "", line)
                               for line in m.group(1).splitlines()).split()
            comment = " ".join(comment)
        else:
            fields.append((re.findall(r"\w+", m.group(2))[-1], comment))
    return fields


def test_header_defaults():
    """What the header's comments say of each setting (its default, its
    choices, its range) is the settings table's."""
    fields = header_fields()
    by_env = {s["env"]: s for s in settings}
    seen = set()
    for name, comment in fields:
        for env in re.findall(r"PULLPROF_[A-Z_]+", comment):
            s = by_env.get(env)
            if s is None or env in seen:
                continue
            seen.add(env)
            m = re.search(rf"{env}(?:, PULLPROF_[A-Z_]+)*, default "
                          r'("[^"]*"|\d+|none|any)', comment)
            ok(m, f"the header states {env}'s default beside it "
               f'("{env}, default X")', comment)
            if not m:
                continue
            if s["type"] == "uint":
                eq(m.group(1), str(s["default"]),
                   f"the header's default of {env} ({name}) is the code's")
            elif s["default"] is None:
                ok(m.group(1) in ("none", "any"),
                   f"the header's default of {env} ({name}) is the code's: none",
                   m.group(1))
            else:
                eq(m.group(1), f'"{s["default"]}"',
                   f"the header's default of {env} ({name}) is the code's")
            for c in (s["choices"] or "").split("|") if s["choices"] else []:
                ok(f'"{c}"' in comment,
                   f"the header names {env}'s choice \"{c}\"", comment)
            for lo, hi in re.findall(r"\((\d+)\.\.(\d+)", comment):
                eq((int(lo), int(hi)), (s["min"], s["max"]),
                   f"the header's range of {env} is the code's")
    eq(sorted(set(by_env) - seen), [],
       "every setting of the table is described in the header")


def abi_history():
    """docs/abi.md's history: [(version, (current, revision, age),
    struct_size or None, last field or None)]."""
    abi = docs[os.path.join("docs", "abi.md")]
    return [(m.group(1), tuple(int(x) for x in m.group(2, 3, 4)),
             int(m.group(5)) if m.group(5) != "-" else None, m.group(6))
            for m in re.finditer(r"^\| (\d+\.\d+\.\d+) \| (\d+):(\d+):(\d+) \| "
                                 r"(\d+|-) \| (?:`(\w+)`|-) \|", abi, re.M)]


def vkey(v):
    return tuple(int(x) for x in v.split("."))


def struct_ends(fields):
    """Each field's end (offsetof + sizeof) and the struct's size, from the
    compiler: what a caller's pullprof_config_init() records."""
    prog = ["#include <stddef.h>", "#include <stdio.h>",
            '#include "pullprof.h"', "#define S struct pullprof_config",
            "int main(void) {"]
    for name, _ in fields:
        prog.append(f'printf("{name} %zu\\n", offsetof(S, {name}) + '
                    f"sizeof(((S *)0)->{name}));")
    prog.append('printf("sizeof %zu\\n", sizeof(S)); return 0; }')
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "abi.c"), os.path.join(tmp, "abi")
        with open(src, "w") as f:
            f.write("\n".join(prog) + "\n")
        subprocess.run([os.environ.get("CC") or "cc", "-I",
                        os.path.join(SRC, "include"), "-o", exe, src],
                       check=True)
        out = subprocess.run([exe], capture_output=True, text=True,
                             check=True).stdout
    return {k: int(v) for k, v in (line.split() for line in out.splitlines())}


def test_versions():
    """One version story (docs/abi.md): the package's version is the
    interface's, everywhere it is written; -version-info follows from the
    history by libtool's rules; every "Since" is a version of the history;
    the struct's size in each version is what the header gives."""
    history = abi_history()
    ok(len(history) >= 2, "docs/abi.md has the version history table", history)
    versions = [h[0] for h in history]
    eq(versions, sorted(versions, key=vkey),
       "docs/abi.md's history is in version order")
    package = re.search(r"^AC_INIT\(\[pullprof\], \[([^]]+)\]",
                        read("configure.ac"), re.M).group(1)
    eq(versions[-1], package,
       "the history's last version is configure.ac's (AC_INIT)")
    eq(version(), package, "the build's PACKAGE_VERSION is configure.ac's")
    said = subprocess.run([DUMP, "--version"], capture_output=True, text=True,
                          check=True).stdout.strip()
    eq(said, package, "pullprof_version() returns the package version")
    with open(os.path.join(BUILD, "pullprof.pc")) as f:
        pc = re.search(r"^Version: (\S+)$", f.read(), re.M)
    eq(pc and pc.group(1), package, "pullprof.pc's Version is the package's")
    for page, text in (("pullprof.3", man3), ("pullprof.7", man7)):
        th = re.search(r'^\.TH .*"pullprof ([^"]+)"', text, re.M)
        eq(th and th.group(1), package, f"{page}'s title line has the package version")
    m = re.search(r"Status of this version \(([^)]+)\)", readme)
    eq(m and m.group(1), package, "the README's status names the package version")
    m = re.search(r"`const char \*pullprof_version\(void\)` \| `\"([^\"]+)\"`",
                  docs[os.path.join("docs", "api.md")])
    eq(m and m.group(1), package, "docs/api.md's pullprof_version() row has it")

    am = read("Makefile.am")
    info = re.search(r"-version-info (\d+):(\d+):(\d+)", am)
    eq(info and tuple(int(x) for x in info.groups()), history[-1][1],
       "Makefile.am's -version-info is the history's last")
    for (v0, (c0, r0, a0), size0, _), (v1, vi1, size1, _) in zip(history,
                                                                  history[1:]):
        grew = size0 is None or size1 is None or size1 > size0
        rules = {"a change of code alone": (c0, r0 + 1, a0),
                 "an addition": (c0 + 1, 0, a0 + 1),
                 "a removal or change": (c0 + 1, 0, 0)}
        ok(vi1 in rules.values() and (not grew or vi1 != rules[
            "a change of code alone"]),
           f"{v1}'s -version-info follows from {v0}'s by libtool's rules",
           f"{v1}: {vi1}; from {v0}: {rules}")
        if size0 is not None and size1 is not None and size1 > size0:
            eq(vi1, rules["an addition"], f"{v1}, which appended fields, is an addition")
    c, r, a = history[-1][1]
    so = os.path.join(BUILD, ".libs", f"libpullprof.so.{c - a}.{a}.{r}")
    ok(os.path.exists(so), f"libtool built {os.path.basename(so)} from "
       "-version-info", sorted(glob.glob(os.path.join(BUILD, ".libs",
                                                     "libpullprof.so*"))))
    eq(f"{c - a}.{a}.{r}", package,
       "the library's file name carries the package version (abi.md)")

    fields = header_fields()
    since = {}
    for name, comment in fields:
        m = re.findall(r"\(Since (\d[\d.]*?)\.\)", comment)
        since[name] = m[-1] if m else "1.0.0"
    for v in sorted(set(re.findall(r"\(Since (\d[\d.]*?)\.\)", header))):
        ok(v in versions, f'"Since {v}" in the header is a version of '
           "docs/abi.md's history", versions)
        ok(v in versions and vkey(v) <= vkey(package),
           f'"Since {v}" is not newer than the package ({package})')
    order = [vkey(since[n]) for n, _ in fields]
    eq(order, sorted(order), "fields are only appended: their \"Since\" "
       "never goes back in the struct's order")
    ends = struct_ends(fields)
    for v, _, size, last in history:
        if size is None:
            continue
        have = [n for n, _ in fields if vkey(since[n]) <= vkey(v)]
        eq(last, have[-1], f"{v}'s last field is the header's")
        eq(size, ends[have[-1]], f"{v}'s struct_size in docs/abi.md is the "
           "header's (x86_64)")
    eq(history[-1][2], ends["sizeof"],
       "the last version's struct_size is sizeof(struct pullprof_config)")
    first = next(h for h in history if h[2] is not None)
    m = re.search(r"#define PP_CONFIG_FIRST_SIZE\s*\\?\s*\(offsetof\(struct "
                  r"pullprof_config, (\w+)\)", read("src", "config.h"))
    eq(m and m.group(1), first[3], "the smallest struct_size the library "
       f"accepts (src/config.h) is {first[0]}'s")

    # pullprof(3)'s VERSIONS names each field added after the first with
    # the version that added it.
    sect = re.search(r"^\.SH VERSIONS\n(.*?)^\.SH ", man3, re.M | re.S)
    text = " ".join(re.sub(r"^\.\w+ ?", "", line)
                    for line in (sect.group(1) if sect else "").splitlines())
    for name, _ in fields:
        if since[name] == first[0]:
            continue
        m = re.search(rf"\b{name}\b.*?\bin (\d+\.\d+\.\d+)", text)
        eq(m and m.group(1), since[name],
           f"pullprof(3)'s VERSIONS: {name} since {since[name]}")


# Files git tracks that the tarball leaves out on purpose, each with why.
# Everything else git tracks is something the build, the tests, the
# benchmarks or a reader uses, and ships.
DIST_LEFT_OUT = {
    ".gitignore",  # git's own: nothing builds, tests or reads it from a tarball
}


def test_dist():
    """Every file git tracks is in the tarball `make dist` writes (EXTRA_DIST
    is kept by hand: a file only a benchmark or a test of the whole suite
    reads is missed by distcheck, which runs the short suite), but those
    DIST_LEFT_OUT says why not."""
    top = subprocess.run(["git", "-C", SRC, "rev-parse", "--show-toplevel"],
                         capture_output=True, text=True)
    if (top.returncode != 0 or os.path.realpath(top.stdout.strip())
            != os.path.realpath(SRC)):
        # distcheck's tree is the tarball itself.
        skip("every file git tracks is in make dist's tarball",
             "the source tree is not a git checkout")
        return
    tracked = set(subprocess.run(["git", "-C", SRC, "ls-files", "-z"],
                                 capture_output=True, text=True,
                                 check=True).stdout.split("\0")) - {""}
    name = f"pp-distlist-{os.getpid()}"
    # A make of its own, not the jobserver of a `make check` it may run in.
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    r = subprocess.run(["make", "-s", "-C", BUILD, "dist-gzip",
                        f"distdir={name}"], capture_output=True, text=True,
                       env=env)
    ok(r.returncode == 0, "make dist writes the tarball",
       r.stdout[-2000:] + r.stderr[-2000:])
    tarball = os.path.join(BUILD, name + ".tar.gz")
    if r.returncode != 0:
        return
    try:
        listing = subprocess.run(["tar", "tzf", tarball], capture_output=True,
                                 text=True, check=True).stdout.splitlines()
    finally:
        os.unlink(tarball)
    shipped = {p.split("/", 1)[1] for p in listing
               if "/" in p and not p.endswith("/")}
    eq(sorted(tracked - shipped - DIST_LEFT_OUT), [],
       "every file git tracks is in make dist's tarball (EXTRA_DIST), "
       "but DIST_LEFT_OUT's")
    eq(sorted(DIST_LEFT_OUT - tracked), [],
       "DIST_LEFT_OUT names files git tracks")


def test_endpoints():
    ok(len(routes) >= 10, "tests/settings_dump --routes lists the routing table",
       len(routes))
    table = re.search(r"^## Endpoints.*?(?=^## )", readme, re.M | re.S)
    table = table.group(0) if table else ""
    for r in routes:
        path = r["path"] if r["path"] != "/" else "/"
        full = "/debug/pprof" + (path if path != "/" else "/")
        ok(f"| `{full}" in table, f"{path}: a row in the README's endpoint table")
        ok(f"`{full}" in endpoints_md, f"{path}: in docs/endpoints.md")
        ok(re.search(rf'^\.BR "{re.escape(path.replace("-", chr(92) + "-"))}"',
                     man7, re.M), f"{path}: in pullprof(7)")


def test_functions():
    names = set(re.findall(r"PULLPROF_API[^;(]*?\b(pullprof_\w+)\(", header))
    names |= set(re.findall(r"#define (pullprof_\w+)\(", header))
    ok(len(names) >= 10, "found the public functions", sorted(names))
    text3 = man_text(man3)
    for n in sorted(names):
        ok(re.search(rf"\b{n}\(", text3), f"{n}: in pullprof(3)'s synopsis")
        ok(f"{n}()" in text3, f"{n}: described in pullprof(3)")
    # Each function's errors are listed in the header beside it.
    for code_name in ("EINVAL", "EADDRINUSE", "EDEADLK", "ESRCH", "EBUSY",
                      "ECANCELED", "ENOTSUP", "ENOSPC", "EBADF"):
        ok(f"-{code_name}" in header and f"-{code_name}" in man3,
           f"-{code_name} is documented in the header and pullprof(3)")


def test_man_pages():
    for page in ("pullprof.3", "pullprof.7"):
        path = os.path.join(SRC, "man", page)
        r = subprocess.run(["groff", "-ww", "-man", "-Tutf8", path],
                           capture_output=True, text=True)
        eq(r.returncode, 0, f"{page}: groff renders it")
        eq(r.stderr.strip(), "", f"{page}: groff -ww gives no warning")
        ok(len(r.stdout) > 2000, f"{page}: renders to a page", len(r.stdout))
        if shutil.which("man"):
            r = subprocess.run(["man", "--warnings", "-l", path],
                               capture_output=True, text=True,
                               env=dict(os.environ, MANPAGER="cat",
                                        MANWIDTH="80"))
            eq(r.stderr.strip(), "", f"{page}: man --warnings is clean")
    am = read("Makefile.am")
    ok(re.search(r"^dist_man_MANS = man/pullprof\.3 man/pullprof\.7", am, re.M),
       "make install installs both man pages (dist_man_MANS)")


def test_readme_and_links():
    size = len(readme.encode())
    ok(size <= 16 * 1024, "the README is at most 16 KB (users' page)", size)
    for path in sorted(docs) + ["HACKING.md"]:
        ok(f"]({path})" in readme, f"the README links to {path}")
    for name, text in [("README.md", readme), ("HACKING.md", hacking)] + \
            sorted(docs.items()):
        base = os.path.dirname(os.path.join(SRC, name))
        for target in re.findall(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)", text):
            ok(os.path.exists(os.path.join(base, target)),
               f"{name}: the link to {target} leads to a file")


def test_layout():
    """HACKING.md's layout names the files that exist, and the job
    pipeline's owner."""
    for f in re.findall(r"^(src/[\w/]+\.[ch])\b", hacking, re.M):
        ok(os.path.exists(os.path.join(SRC, f)), f"HACKING.md's layout: {f} exists")
    ok("src/profile/job.c" in hacking, "HACKING.md names the job pipeline's file")


def test_commands():
    for script in ("scripts/demo.sh", "scripts/test.sh"):
        ok(f"./{script}" in readme, f"the README runs {script}")
        ok(os.access(os.path.join(SRC, script), os.X_OK), f"{script} is executable")
    ok("scripts/test.sh" in read(".ci", "run"), ".ci/run runs the README's test command")


def test_arch_layer():
    """Nothing x86-specific outside src/arch/ (src/arch/arch.h): no x86
    register names or macros in code, comments aside; each hit named."""
    x86 = re.compile(r"\b(REG_R[A-Z0-9]+|__x86_64__|__amd64__|__i386__|"
                     r"rsp|rbp|rip|UNW_X86_64_\w*)\b")

    def code_lines(path):
        # Comments blanked (newlines kept, so line numbers hold).
        text = re.sub(r"/\*.*?\*/|//[^\n]*",
                      lambda m: re.sub(r"[^\n]", " ", m.group(0)),
                      open(path).read(), flags=re.S)
        return text.split("\n")

    hits = []
    for path in sorted(glob.glob(os.path.join(SRC, "src", "**", "*.[ch]"),
                                 recursive=True)):
        rel = os.path.relpath(path, SRC)
        if rel.startswith("src/arch/") or rel == "src/web_assets.c":
            continue
        for n, line in enumerate(code_lines(path), 1):
            m = x86.search(line)
            if m:
                hits.append(f"{rel}:{n}: {m.group(0)}")
    eq(hits, [], "no x86 register name or macro outside src/arch/")
    ok(any(x86.search(line) for line in
           code_lines(os.path.join(SRC, "src", "arch", "x86_64.h"))),
       "the check finds x86 names where they are (src/arch/x86_64.h)")


def src_files():
    out = []
    for root, _, names in os.walk(os.path.join(SRC, "src")):
        for n in names:
            if n.endswith((".c", ".h")) and n != "web_assets.c":
                out.append(os.path.relpath(os.path.join(root, n), SRC))
    return sorted(out)


def test_contexts():
    """Every file under src/ says its context in its first comment, in one
    of the three spellings HACKING.md defines."""
    tags = re.findall(r"^\* ` \* Context: (\w+)\.`", hacking, re.M)
    eq(sorted(tags), ["agent", "host", "signal"],
       "HACKING.md defines the three context tags")
    for f in src_files():
        text = read(f)
        m = re.match(r"\s*(/\*.*?\*/)", text, re.S)
        first = m.group(1) if m else ""
        found = re.findall(r"^ \* Context: (signal|host|agent)\.$", first,
                           re.M)
        ok(len(found) == 1, f"{f}: one context tag in its first comment",
           first[:200])


def test_file_sizes():
    """No file under src/ over about 900 lines (the generated web_assets.c
    aside)."""
    for f in src_files():
        n = read(f).count("\n")
        ok(n <= 950, f"{f}: {n} lines, at most ~900")


def test_kinds():
    """The table of kinds is what the lifecycle loops over: every row is
    declared in its folder's kind.c, and agent.c names no producer's start,
    stop or fork function."""
    kinds = read("src", "kinds.c")
    m = re.search(r"#define PP_KINDS\(X\)((?: X\(\w+\))+)", kinds)
    ok(m, "src/kinds.c lists the kinds in PP_KINDS")
    names = re.findall(r"X\((\w+)\)", m.group(1)) if m else []
    for name in names:
        defined = [f for f in src_files() if f.endswith("/kind.c") and
                   re.search(rf"const struct pp_kind pp_kind_{name}\b",
                             read(f))]
        ok(len(defined) == 1, f"the kind {name} is defined in one kind.c",
           defined)
    agent = read("src", "agent.c")
    named = re.findall(r"\bpp_(?:cpu|heap|locks|threads|threadcreate|wall|"
                       r"dump)_(?:start|stop|shutdown|configure|"
                       r"forget_in_child|register_atfork)\b", agent)
    eq(named, [], "agent.c names no producer's start, stop or fork function")
    for phrase in ("src/kinds.c", "PP_KINDS", "kind.c", "PP_COUNTS_PRODUCER"):
        ok(phrase in hacking,
           f"HACKING.md's 'Adding a kind of profile' names {phrase}")


def test_agent_tls():
    """The agent's own TLS block (glibc's small static surplus pays for it
    at dlopen) is the size HACKING.md states: growing it is a decision."""
    m = re.search(r"libpullprof-agent\.so \| grep TLS`\) is (0x[0-9a-f]+) "
                  r"bytes", hacking)
    ok(m, "HACKING.md states the agent's TLS size")
    lib = os.path.join(BUILD, ".libs", "libpullprof-agent.so")
    if not m or not shutil.which("readelf") or not os.path.exists(lib):
        skip("the agent's TLS block against HACKING.md",
             "no readelf or no built agent")
        return
    out = subprocess.run(["readelf", "-lW", lib], capture_output=True,
                         text=True).stdout
    tls = [line.split() for line in out.splitlines()
           if line.split()[:1] == ["TLS"]]
    ok(len(tls) == 1, "the agent has one TLS segment", out)
    if tls:
        eq(int(tls[0][5], 16), int(m.group(1), 16),
           "its memory size (readelf) is the size HACKING.md states")


run([test_settings, test_variables, test_header_defaults, test_versions,
     test_endpoints, test_functions,
     test_man_pages, test_readme_and_links, test_layout, test_commands,
     test_dist, test_arch_layer, test_contexts, test_file_sizes, test_kinds,
     test_agent_tls])

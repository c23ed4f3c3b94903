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

from pptest import BUILD, SRC, eq, ok, run


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


run([test_settings, test_variables, test_endpoints, test_functions,
     test_man_pages, test_readme_and_links, test_layout, test_commands,
     test_arch_layer])

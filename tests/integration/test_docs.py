"""The README stays true: every PULLPROF_* variable the code reads and every
endpoint it routes is documented, and the README names nothing that does not
exist."""
import glob
import os
import re

from pptest import SRC, eq, ok, run

readme = open(os.path.join(SRC, "README.md")).read()
code = ""
for path in glob.glob(os.path.join(SRC, "src", "**", "*.[ch]"), recursive=True):
    code += open(path).read()


def test_variables():
    in_code = set(re.findall(r'"(PULLPROF_[A-Z_]+)"', code))
    ok(len(in_code) >= 6, "found the variables the code reads", in_code)
    for var in sorted(in_code):
        ok(re.search(rf"^\| `{var}` \|", readme, re.M),
           f"{var} has a row in the README's configuration table")
    # Names the public header defines (constants such as
    # PULLPROF_HEAP_INUSE) are not variables but exist all the same.
    with open(os.path.join(SRC, "include", "pullprof.h")) as f:
        in_header = set(re.findall(r"\b(PULLPROF_[A-Z_]+)\s*=", f.read()))
    in_readme = set(re.findall(r"PULLPROF_[A-Z_]+", readme))
    eq(sorted(in_readme - in_code - in_header), [],
       "the README names no unknown variable or constant")


def test_endpoints():
    with open(os.path.join(SRC, "src", "http", "routes.c")) as f:
        routes = re.findall(r'\.path = "(/[^"]*)"', f.read())
    ok(len(routes) >= 3, "found the routing table", routes)
    for r in routes:
        ok(f"`/debug/pprof{r}`" in readme, f"endpoint {r} is documented")


def test_commands():
    for script in ("scripts/demo.sh", "scripts/test.sh"):
        ok(f"./{script}" in readme, f"the README runs {script}")
        ok(os.access(os.path.join(SRC, script), os.X_OK), f"{script} is executable")
    with open(os.path.join(SRC, ".ci", "run")) as f:
        ok("scripts/test.sh" in f.read(), ".ci/run runs the README's test command")


run([test_variables, test_endpoints, test_commands])

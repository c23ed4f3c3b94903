"""The fuzz targets, for a bounded time in the suite: scripts/fuzz.sh builds
them with clang (libFuzzer, ASan, UBSan) and runs each on a scratch copy of
its seed corpus (which holds the regression inputs of earlier findings).
Longer runs: scripts/fuzz.sh 600."""
import os
import re
import subprocess

from pptest import BUILD, SANITIZER, SRC, eq, ok, run, sanitized, skip

RUNS = (("legacy", 30), ("maps", 10), ("query", 15), ("symbol", 10),
        ("merge", 15))
# "Really ran": each target executes at least this many inputs, its seeds
# and mutations of them, whatever the machine's speed. It used to be a
# rate (more than 1000 runs in its seconds), which a niced fuzzer beside
# busy loops does not reach (366 runs of fuzz_maps in 10 s): fuzz.sh now
# goes on by count until it has executed them (FUZZ_MIN_RUNS), so the
# check fails only if a fuzzer stops short or never runs its inputs.
MIN_RUNS = 1000


def fuzz(target, seconds):
    """fuzz.sh: 0 seconds builds them all (the shared sources compiled
    once, side by side, at the suite's own priority: niced, on a loaded
    machine, it took most of this test's 20 minutes); a target's timed
    run is niced, so that the suite's other tests keep their share."""
    out = os.path.join(BUILD, "tests", "fuzz", "out-suite")
    env = dict(os.environ, PP_BUILDDIR=BUILD, FUZZ_OUT=out,
               FUZZ_MIN_RUNS=str(MIN_RUNS))
    script = os.path.join(SRC, "scripts", "fuzz.sh")
    cmd = (["sh", script, "--build"] if not seconds else
           ["nice", "-n", "10", "sh", script, str(seconds), target])
    p = subprocess.run(cmd, env=env, capture_output=True, text=True,
                       timeout=seconds + 900)
    return p.returncode, p.stdout + p.stderr


def test_targets():
    if sanitized():
        # The fuzzers are their own clang ASan+UBSan build (scripts/fuzz.sh);
        # the plain suite runs them.
        skip("fuzz targets", f"{SANITIZER} build: the fuzzers build their "
             "own sanitized binaries with clang; the plain suite runs them")
        return
    code, text = fuzz(None, 0)
    if code == 77:
        skip("fuzz targets", "no clang with libFuzzer here")
        return
    if not ok(code == 0, "the fuzz targets build", text[-3000:]):
        return
    for target, seconds in RUNS:
        code, text = fuzz(target, seconds)
        if code == 77:
            skip(f"fuzz_{target}", "no clang with libFuzzer here")
            continue
        m = re.search(r"executed (\d+) units in all", text)
        runs = int(m.group(1)) if m else 0
        eq(code, 0, f"fuzz_{target}: {runs} runs in {seconds} s or more, "
           "no finding")
        ok(runs >= MIN_RUNS, f"fuzz_{target} really ran ({runs} inputs "
           f"executed, at least {MIN_RUNS})", text[-3000:])


run([test_targets])

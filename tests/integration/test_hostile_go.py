#!/usr/bin/env python3
"""A C program calling a Go c-shared library, preloaded (the hardening
issue, item 8).

The Go runtime runs goroutines on stacks of a few KiB, gives each of its
threads an alternate signal stack, preempts goroutines with SIGURG (its
handler blocks every signal) and requires every other handler in the
process to take SA_ONSTACK. pullprof samples with SIGPROF there (the host
handles SIGURG). Its handler took the interrupted stack: the kernel's
signal frame landed below the goroutine's stack, over another goroutine's,
and the host died within seconds of a /profile ("unexpected return pc",
"unknown caller pc" at the next garbage collection). With SA_ONSTACK alone
it died at the first preemption inside a sample (Go's handler nested at the
top of the signal stack, over pullprof's frames, while pullprof unwound on
a stack of its own: "split stack overflow"). Now the handler takes the
alternate stack and blocks every signal while it runs.

The Go library is built here (Debian's golang-go, scripts/deps.sh --test);
without `go` the test skips.
"""
import os
import shutil
import subprocess
import tempfile

import pptest
from pptest import Profile, Proc, curl, ok, run, skip

LIB = os.environ.get("PP_PRELOAD_LIB") or pptest.LIBSO

GO_SRC = r'''package main

import "C"

var sink []byte

//export Work
func Work(n C.int) C.long {
	var x int64
	for i := 0; i < int(n); i++ {
		x += int64(i) * int64(i) % 7
		if i%64 == 0 {
			sink = make([]byte, 256)
		}
	}
	return C.long(x)
}

func main() {}
'''

C_SRC = r'''#include <stdio.h>
#include <stdlib.h>
#include <time.h>
extern long Work(int n);
int main(int argc, char **argv)
{
	int secs = argc > 1 ? atoi(argv[1]) : 10;
	time_t end = time(NULL) + secs;
	long s = 0;
	while (time(NULL) < end)
		s += Work(200000);
	printf("done %ld\n", s);
	return 0;
}
'''


def build(d):
    with open(os.path.join(d, "work.go"), "w") as f:
        f.write(GO_SRC)
    with open(os.path.join(d, "host.c"), "w") as f:
        f.write(C_SRC)
    env = dict(os.environ, GOCACHE=os.path.join(d, "cache"), GOFLAGS="",
               GO111MODULE="off", CGO_ENABLED="1")
    subprocess.run(["go", "build", "-buildmode=c-shared", "-o",
                    os.path.join(d, "libwork.so"), "work.go"], cwd=d,
                   env=env, check=True, capture_output=True, timeout=600)
    subprocess.run(["cc", "-O2", "-o", os.path.join(d, "host"), "host.c",
                    "-L.", "-lwork", f"-Wl,-rpath,{d}"], cwd=d, check=True,
                   capture_output=True, timeout=120)


def test_go_cshared_profile():
    """Three hosts, each profiled for 3 s: all live, all profiled."""
    if not shutil.which("go"):
        skip("Go c-shared host", "no go (golang-go) installed")
        return
    with tempfile.TemporaryDirectory() as d:
        build(d)
        for i in range(3):
            h = Proc([os.path.join(d, "host"), "20"],
                     env=pptest.preload_env(lib=LIB,
                                            PULLPROF_LISTEN="127.0.0.1:0"),
                     stdin=False)
            m = h.wait_line(h.err_lines, r"serving http://127\.0\.0\.1:"
                            r"(\d+)/debug/pprof/", timeout=30)
            if not ok(m, f"host {i}: serves", h.stderr_text()):
                h.stop()
                continue
            base = f"http://127.0.0.1:{m.group(1)}/debug/pprof/"
            r = curl(base + "profile?seconds=3", timeout=60)
            names = set()
            if r.status == 200:
                prof = Profile(r.body)
                names = {fr[0] for s in prof.samples
                         for loc in prof.stack(s) for fr in loc}
            ok(r.status == 200 and any("Work" in n for n in names),
               f"host {i}: a profile with the Go function in it",
               (r.status, r.body[:200], sorted(names)[:20]))
            try:
                rc = h.p.wait(60)
            except subprocess.TimeoutExpired:
                h.p.kill()
                rc = h.p.wait()
            h.drain()
            ok(rc == 0 and any(x.startswith("done") for x in h.out_lines),
               f"host {i}: ran to its end (exit {rc})",
               h.stderr_text()[-3000:])


if __name__ == "__main__":
    run([test_go_cshared_profile])

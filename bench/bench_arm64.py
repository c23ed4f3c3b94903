#!/usr/bin/env python3
"""The CPU sampler's handler cost on arm64, in the emulated arm64 Debian
(HACKING.md, "arm64: the emulated Debian"): the agent's own
cpu.handler.mean_ns (/status) for one thread spinning at stack depth 3, 30
and 60 under PULLPROF_UNWIND=dwarf, fp and libunwind.

    python3 bench/bench_arm64.py [--runs N] [--seconds S] [--hz HZ]

(PP_BENCH_MODES="dwarf fp" and PP_BENCH_DEPTHS="3 60" narrow the matrix.)

The host is tests/cpu/deep, cross-compiled here as Makefile.am builds it
(-O2 -fomit-frame-pointer, no frame pointers: fp mode's walk stops early,
which is part of what it costs), linked with the cross-built libpullprof.
The whole matrix runs in ONE boot of scripts/arm64-run.sh: a driver script
in the guest starts deep once per (mode, depth, run), takes a profile from
inside the guest (a small HTTP client built here, on the agent's
loopback address) and prints
/status's cpu part on stdout. That is cheaper than driving a host over a
forwarded control port (a boot per unwinder mode, since PULLPROF_UNWIND is
read when the agent starts) and than a boot per configuration (27 boots of
3 to 10 s each for --runs 3).

The guest's processor is emulated (TCG): an instruction costs what qemu's
translation makes it cost, not what silicon does, and the busy x86_64 host
deschedules the vCPUs. Absolute nanoseconds mean nothing; the ratios
between the modes at one depth are what the table is for.

Prints a Markdown table: median (min-max) of the runs per mode and depth,
then the ratios. Exits 77 (skipped) without qemu-system-aarch64 or the
cross compiler."""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, ".."))
MODES = os.environ.get("PP_BENCH_MODES", "dwarf fp libunwind").split()
DEPTHS = [int(d) for d in os.environ.get("PP_BENCH_DEPTHS", "3 30 60").split()]

# The driver the guest runs (busybox sh): for each run, mode and depth,
# deep with PULLPROF_UNWIND=mode, its stdin a FIFO held open here (deep
# runs until its stdin closes), a profile of SECONDS at HZ, then /status.
DRIVER = r"""#!/bin/sh
# bench/bench_arm64.py's driver, in the guest: RUNS SECONDS HZ MODES DEPTHS
runs=$1 secs=$2 hz=$3 modes=$4 depths=$5
cd "$(dirname "$0")" || exit 1
r=1
while [ "$r" -le "$runs" ]; do
	for mode in $modes; do
		for depth in $depths; do
			rm -f in log
			busybox mkfifo in
			PULLPROF_UNWIND=$mode PULLPROF_LISTEN=127.0.0.1:0 \
				./deep depth "$depth" 1 <in >log 2>&1 &
			pid=$!
			exec 3>in
			n=0
			until grep -q '^ready' log; do
				n=$((n + 1))
				if [ "$n" -gt 600 ] || ! kill -0 "$pid" 2>/dev/null; then
					echo "fail $mode $depth $r $(cat log | tr '\n' ' ')"
					break
				fi
				sleep 0.1
			done
			port=$(sed -n 's/^port //p' log)
			if [ -n "$port" ] && ./get "$port" "/debug/pprof/profile?seconds=$secs&hz=$hz" >/dev/null; then
				st=$(./get "$port" /debug/pprof/status 2>&1 | tr -d '\n')
				echo "result $mode $depth $r $st"
			else
				echo "fail $mode $depth $r no profile"
			fi
			exec 3>&-
			wait "$pid"
		done
	done
	r=$((r + 1))
done
echo done
"""


# The guest's HTTP client: busybox's static wget crashes there, and the
# root has no other. get PORT PATH: GET http://127.0.0.1:PORT/PATH, the
# body on stdout; status 0 for a 200.
GET_C = r"""
#define _GNU_SOURCE 1
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
	                        .sin_port = htons(atoi(argv[1])),
	                        .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a))
		return 1;
	char req[1024];
	int n = snprintf(req, sizeof req,
	                 "GET %s HTTP/1.0\r\nHost: 127.0.0.1:%s\r\n\r\n",
	                 argv[2], argv[1]);
	if (write(s, req, n) != n)
		return 1;
	static char buf[1 << 22];
	size_t len = 0;
	ssize_t got;
	while (len < sizeof buf && (got = read(s, buf + len, sizeof buf - len)) > 0)
		len += got;
	char *body = memmem(buf, len, "\r\n\r\n", 4);
	if (!body || len < 12 || strncmp(buf + 9, "200", 3)) {
		fprintf(stderr, "get %s: %.*s\n", argv[2], (int)(len < 200 ? len : 200), buf);
		return 1;
	}
	body += 4;
	fwrite(body, 1, len - (body - buf), stdout);
	return 0;
}
"""


def skip(why):
    print(f"bench_arm64: skipped: {why}")
    sys.exit(77)


def cache_dir():
    return os.environ.get("PP_ARM64_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(
            os.environ.get("HOME") or "/tmp", ".cache"), "pullprof-arm64")


def cross_libdir():
    """The runner's cross build of this checkout (its key: the path's
    cksum, as scripts/arm64-run.sh computes it)."""
    key = subprocess.run(["cksum"], input=TOP.encode(),
                         capture_output=True).stdout.split()[0].decode()
    return os.path.join(cache_dir(), "lib", key, "build", ".libs")


def runner(args, timeout):
    return subprocess.run([os.path.join(TOP, "scripts", "arm64-run.sh"),
                           *args], capture_output=True, text=True,
                          timeout=timeout)


def build(tmp):
    """deep, cross-compiled, in tmp/bin beside the driver; None or why."""
    libdir = cross_libdir()
    if not os.path.exists(os.path.join(libdir, "libpullprof.so")):
        # deep links libpullprof: the runner cross-builds it on its first
        # run. A program that does nothing gets it done (one extra boot,
        # once per checkout).
        print("bench_arm64: no cross build yet: one run of "
              "scripts/arm64-run.sh to make it", file=sys.stderr)
        src = os.path.join(tmp, "nop", "nop.c")
        os.makedirs(os.path.dirname(src))
        with open(src, "w") as f:
            f.write("int main(void) { return 0; }\n")
        subprocess.run(["aarch64-linux-gnu-gcc", "-O2", "-o", src[:-2], src],
                       check=True)
        p = runner(["--", src[:-2]], 1800)
        if p.returncode != 0:
            return f"scripts/arm64-run.sh failed:\n{p.stderr[-2000:]}"
    binp = os.path.join(tmp, "bin")
    os.makedirs(binp)
    # Makefile.am's tests/cpu/deep flags.
    argv = ["aarch64-linux-gnu-gcc", "-Wall", "-Wextra", "-g", "-O2",
            "-fomit-frame-pointer", "-fno-optimize-sibling-calls",
            "-fasynchronous-unwind-tables", "-pthread",
            "-I", os.path.join(TOP, "include"),
            "-o", os.path.join(binp, "deep"),
            os.path.join(TOP, "tests", "cpu", "deep.c"),
            "-L", libdir, "-lpullprof"]
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode:
        return f"{' '.join(argv)}\n{p.stderr}"
    src = os.path.join(tmp, "get.c")
    with open(src, "w") as f:
        f.write(GET_C)
    p = subprocess.run(["aarch64-linux-gnu-gcc", "-O2", "-Wall", "-Wextra",
                        "-Werror", "-o", os.path.join(binp, "get"), src],
                       capture_output=True, text=True)
    if p.returncode:
        return f"get.c: {p.stderr}"
    drv = os.path.join(binp, "drive.sh")
    with open(drv, "w") as f:
        f.write(DRIVER)
    os.chmod(drv, 0o755)
    return None


def fmt_ns(vals):
    return "%d (%d-%d)" % (statistics.median(vals), min(vals), max(vals))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=3,
                    help="profile length per run (default 3)")
    ap.add_argument("--hz", type=int, default=100,
                    help="sampling rate (default 100: the guest kernel "
                    "ticks at 250 Hz)")
    a = ap.parse_args()
    if not shutil.which("qemu-system-aarch64"):
        skip("no qemu-system-aarch64 (Debian: apt-get install qemu-system-arm)")
    if not shutil.which("aarch64-linux-gnu-gcc"):
        skip("no aarch64-linux-gnu-gcc (Debian: apt-get install "
             "gcc-aarch64-linux-gnu)")
    tmp = tempfile.mkdtemp(prefix="pp-arm64bench-")
    try:
        err = build(tmp)
        if err:
            print(f"bench_arm64: build failed: {err}", file=sys.stderr)
            return 1
        t0 = time.time()
        p = runner(["--", os.path.join(tmp, "bin", "drive.sh"),
                    str(a.runs), str(a.seconds), str(a.hz), " ".join(MODES),
                    " ".join(str(d) for d in DEPTHS)],
                   600 + a.runs * len(MODES) * len(DEPTHS) * (a.seconds + 30))
        wall = time.time() - t0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res, fails = {}, []
    for line in p.stdout.splitlines():
        w = line.split(" ", 4)
        if w[0] == "result" and len(w) == 5:
            try:
                cpu = json.loads(w[4])["cpu"]
            except (ValueError, KeyError):
                fails.append(line[:200])
                continue
            if cpu["handler"]["calls"] == 0:
                fails.append(f"{w[1]} depth {w[2]}: no handler calls")
                continue
            res.setdefault((w[1], int(w[2])), []).append(
                (cpu["handler"]["mean_ns"], cpu["handler"]["calls"]))
        elif w[0] == "fail":
            fails.append(line)
    if p.returncode != 0 or not res:
        print(f"bench_arm64: the guest run failed (status {p.returncode}):\n"
              f"{p.stderr[-3000:]}", file=sys.stderr)
    print("### Handler cost per sample on arm64 (emulated), ns\n")
    print("qemu-system-aarch64 (TCG, -cpu max,pauth-impdef=on, 2 vCPUs) "
          "on a shared x86_64 machine: the absolute nanoseconds are "
          "emulation's, not an arm64 processor's, and mean nothing; "
          "compare the modes at one depth (the ratios).\n")
    print(f"tests/cpu/deep (-O2 -fomit-frame-pointer), one thread spinning; "
          f"{a.seconds} s profiles at {a.hz} Hz; cpu.handler.mean_ns from "
          f"/status; median (min-max) of {a.runs} runs; one boot, "
          f"{wall:.0f} s. deep has no frame pointers: fp's walk ends at the "
          f"first frame without a frame record, so its cost does not grow "
          f"with depth.\n")
    print("| depth | " + " | ".join(MODES) + " | " +
          " | ".join(f"{m}/dwarf" for m in MODES if m != "dwarf") +
          " | samples/run |")
    print("|---|" + "---|" * (2 * len(MODES)))
    for d in DEPTHS:
        cells, med = [], {}
        for m in MODES:
            v = [ns for ns, _ in res.get((m, d), [])]
            if v:
                med[m] = statistics.median(v)
            cells.append(fmt_ns(v) if v else "-")
        ratios = [("%.2f" % (med[m] / med["dwarf"]))
                  if m in med and med.get("dwarf") else "-"
                  for m in MODES if m != "dwarf"]
        calls = [c for m in MODES for _, c in res.get((m, d), [])]
        print(f"| {d} | " + " | ".join(cells) + " | " + " | ".join(ratios) +
              f" | {int(statistics.median(calls)) if calls else '-'} |")
    if fails:
        print("\nFailed runs:\n")
        for f in fails:
            print(f"* {f}")
    return 0 if res and not fails else 1


if __name__ == "__main__":
    sys.exit(main())

#!/bin/bash
# The emulated arm64 Debian's smoke check (HACKING.md, "arm64: the emulated
# Debian"), TAP on stdout: one boot of scripts/arm64-run.sh running
# tests/arm64/smoke.c, cross-built here, with a port forwarded to it.
# Without qemu-system-aarch64, the cross compiler or Debian's arm64 package
# lists it prints "1..0 # SKIP why" and succeeds. The first run downloads
# and builds the guest (about 20 s here); later ones boot in seconds.
set -u
cd "$(dirname "$0")/../.." || exit 1
skip() {
	echo "1..0 # SKIP $*"
	exit 0
}
command -v qemu-system-aarch64 >/dev/null ||
	skip "no qemu-system-aarch64 (Debian: apt-get install qemu-system-arm)"
command -v aarch64-linux-gnu-gcc >/dev/null ||
	skip "no aarch64-linux-gnu-gcc (Debian: apt-get install gcc-aarch64-linux-gnu)"
cache=${PP_ARM64_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/pullprof-arm64}
[ -f "$cache/base/recipe" ] || apt-cache show linux-image-cloud-arm64:arm64 >/dev/null 2>&1 ||
	skip "apt knows no arm64 packages to build the guest from (dpkg --add-architecture arm64; apt-get update)"

tmp=$(mktemp -d)
runner=
trap '[ -z "$runner" ] || kill "$runner" 2>/dev/null; rm -rf "$tmp"' EXIT
mkdir "$tmp/bin"
aarch64-linux-gnu-gcc -O2 -Wall -Wextra -pthread -o "$tmp/bin/smoke" tests/arm64/smoke.c ||
	{
		echo "1..1"
		echo "not ok 1 - tests/arm64/smoke.c cross-compiles"
		exit 1
	}
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
word="hello 'arm64' \"world\""
listen="0.0.0.0:6060 it's \$HOME"
t0=$(date +%s)
# --no-build: the check is the guest's and the runner's, not the library's.
PULLPROF_LISTEN=$listen PP_ARM64_TIMES=1 PP_ARM64_TIMEOUT=240 \
	scripts/arm64-run.sh --no-build --port "$port:8080" -- "$tmp/bin/smoke" 8080 "$word" \
	>"$tmp/out" 2>"$tmp/err" &
runner=$!
# The forwarded port accepts before the guest listens (and then resets):
# ask until the answer comes or the runner ends.
body=
while kill -0 "$runner" 2>/dev/null; do
	if grep -q 'smoke: listening' "$tmp/out" 2>/dev/null; then
		body=$(curl -sS --max-time 20 "http://127.0.0.1:$port/" 2>>"$tmp/curl") && break
	fi
	sleep 0.3
done
rc=0
wait "$runner" || rc=$?
runner=
t1=$(date +%s)

n=0
fail=0
check() { # check WHAT CONDITION...
	local what=$1
	shift
	n=$((n + 1))
	if "$@"; then
		echo "ok $n - $what"
	else
		echo "not ok $n - $what"
		fail=1
	fi
}
echo "1..7"
echo "# one boot and run: $((t1 - t0)) s"
sed 's/^/# stdout: /' "$tmp/out"
sed 's/^/# stderr: /' "$tmp/err"
[ ! -s "$tmp/curl" ] || sed 's/^/# curl: /' "$tmp/curl"
check "the guest ran the arm64 program" grep -qx 'smoke: start on aarch64' "$tmp/out"
# 400 ms of each thread's CPU at 100 Hz: 40 signals; a CPU-time timer
# expires on the guest's ticks (250 Hz), so fewer may come (31 to 39 here).
counts() {
	local c k=0
	for c in $(sed -n 's/^thread [01]: \([0-9]*\) signals.*/\1/p' "$tmp/out"); do
		[ "$c" -ge 20 ] && [ "$c" -le 60 ] || return 1
		k=$((k + 1))
	done
	[ "$k" = 2 ]
}
check "SIGPROF from per-thread CPU-time timers reached both threads (20..60 each)" counts
check "pointer authentication is on in the guest (HWCAP_PACA)" grep -qx 'pac: on' "$tmp/out"
check "the caller's PULLPROF_* variables reached the program as they were" \
	grep -qxF "PULLPROF_LISTEN=[$listen]" "$tmp/out"
check "an HTTP request from the x86_64 side came through --port and its answer back" \
	test "$body" = "$word from aarch64"
check "the program's stderr came out on the runner's stderr, not on its stdout" \
	bash -c 'grep -qx "smoke: this line is on stderr" "$1" && ! grep -q "on stderr" "$2"' _ "$tmp/err" "$tmp/out"
check "the runner exits with the program's status (3)" test "$rc" = 3
exit $fail

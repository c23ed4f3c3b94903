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
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
port=$(free_port)
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
echo "1..10"
echo "# one boot and run: $((t1 - t0)) s"
sed 's/^/# stdout: /' "$tmp/out"
sed 's/^/# stderr: /' "$tmp/err"
[ ! -s "$tmp/curl" ] || sed 's/^/# curl: /' "$tmp/curl"
check "the guest ran the arm64 program" grep -qx 'smoke: start on aarch64' "$tmp/out"
# 400 ms of each thread's CPU at 100 Hz: 40 expirations. A CPU-time timer
# expires on the guest's ticks, and a vCPU the busy host descheduled comes
# back with several periods gone: one signal carries them (si_overrun). So
# the expirations are checked (30..48) and the signals only for coming.
counts() {
	local s e k=0
	while read -r s e; do
		[ "$s" -ge 5 ] && [ "$e" -ge 30 ] && [ "$e" -le 48 ] || return 1
		k=$((k + 1))
	done < <(sed -n 's/^thread [01]: \([0-9]*\) signals, \([0-9]*\) expirations.*/\1 \2/p' "$tmp/out")
	[ "$k" = 2 ]
}
check "SIGPROF from per-thread CPU-time timers reached both threads (30..48 expirations of 40 each)" counts
check "pointer authentication is on in the guest (HWCAP_PACA)" grep -qx 'pac: on' "$tmp/out"
check "the caller's PULLPROF_* variables reached the program as they were" \
	grep -qxF "PULLPROF_LISTEN=[$listen]" "$tmp/out"
check "an HTTP request from the x86_64 side came through --port and its answer back" \
	test "$body" = "$word from aarch64"
check "the program's stderr came out on the runner's stderr, not on its stdout" \
	bash -c 'grep -qx "smoke: this line is on stderr" "$1" && ! grep -q "on stderr" "$2"' _ "$tmp/err" "$tmp/out"
check "the runner exits with the program's status (3)" test "$rc" = 3

# --preload: the agent in the guest, asked through --port.
if [ ! -f src/arch/aarch64.c ]; then
	for what in "answers" "serves a heap profile" "leaves the status alone"; do
		n=$((n + 1))
		echo "ok $n - --preload: the agent $what # SKIP no src/arch/aarch64.c: the library has no arm64 port yet"
	done
	exit $fail
fi
agent=$(free_port)
port=$(free_port)
t0=$(date +%s)
PULLPROF_LISTEN=0.0.0.0:6060 PULLPROF_INSECURE=1 PP_ARM64_TIMES=1 PP_ARM64_TIMEOUT=600 \
	scripts/arm64-run.sh --preload --port "$agent:6060" --port "$port:8080" -- \
	"$tmp/bin/smoke" 8080 preloaded >"$tmp/out2" 2>"$tmp/err2" &
runner=$!
index=
code=
while kill -0 "$runner" 2>/dev/null; do
	if grep -q 'smoke: listening' "$tmp/out2" 2>/dev/null; then
		index=$(curl -sS --max-time 30 "http://127.0.0.1:$agent/debug/pprof/" 2>>"$tmp/curl2")
		code=$(curl -sS --max-time 60 -o "$tmp/heap" -w '%{http_code}' \
			"http://127.0.0.1:$agent/debug/pprof/heap" 2>>"$tmp/curl2")
		curl -sS --max-time 20 -o /dev/null "http://127.0.0.1:$port/" 2>>"$tmp/curl2"
		break
	fi
	sleep 0.3
done
rc=0
wait "$runner" || rc=$?
runner=
echo "# --preload: boot, build check and run: $(($(date +%s) - t0)) s"
sed 's/^/# stdout: /' "$tmp/out2"
sed 's/^/# stderr: /' "$tmp/err2"
[ ! -s "$tmp/curl2" ] || sed 's/^/# curl: /' "$tmp/curl2"
check "--preload: the cross-built agent in the guest answers /debug/pprof/ through --port" \
	grep -q '<title>pullprof' <<<"$index"
heap_ok() { # a gzip'd profile with the heap's sample types
	[ "$code" = 200 ] && python3 -c 'import gzip, sys
sys.exit(b"inuse_space" not in gzip.decompress(open(sys.argv[1], "rb").read()))' "$tmp/heap"
}
check "--preload: it serves a heap profile (gzip'd, inuse_space)" heap_ok
check "--preload: the program still exits with its status (3)" test "$rc" = 3
exit $fail

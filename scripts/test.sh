#!/bin/bash
# README command 2: install what the tests need, build, run the whole suite.
# The last line is "N passed, N failed", counting every check of every test
# program (each TAP line), plus the build and distcheck steps. Each step
# says how long it took, and a line before the last sums them up.
set -u
cd "$(dirname "$0")/.."
mkdir -p artifacts
passed=0
failed=0
skipped=0
start=$(date +%s)
times=""

took() { # took NAME SINCE: how long NAME took, in $secs and in $times
	secs=$(($(date +%s) - $2))
	times="$times, $1 $secs s"
}

step() { # step NAME CMD...: run a step, count it, keep its log, time it
	local name=$1 log="artifacts/$1.log" t0
	shift
	t0=$(date +%s)
	if "$@" >"$log" 2>&1; then
		passed=$((passed + 1))
		took "$name" "$t0"
		echo "PASS: $name ($secs s)"
	else
		failed=$((failed + 1))
		took "$name" "$t0"
		echo "FAIL: $name ($secs s; log: $log)"
		# A step may say what matters after a "== details" line.
		if grep -q '^== details' "$log"; then
			sed -n '/^== details/,$p' "$log" | head -150
		else
			tail -n 30 "$log"
		fi
	fi
}

finish() {
	echo "time: $(($(date +%s) - start)) s in all${times}"
	[ "$skipped" -gt 0 ] && echo "($skipped skipped)"
	echo "$passed passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit $?
}

step deps sh scripts/deps.sh --test || true
# configure runs again (with the options it had): what it found when
# README command 1 configured, before the test dependencies were installed
# (cmocka for the unit tests), is not what the tests have now.
step build env PP_RECONFIGURE=1 sh scripts/build.sh
if [ "$failed" -gt 0 ]; then
	finish
fi
if grep -E "(warning|error):" artifacts/build.log >/dev/null; then
	echo "FAIL: the build has warnings:"
	grep -E "(warning|error):" artifacts/build.log | head -20
	failed=$((failed + 1))
else
	passed=$((passed + 1))
	echo "PASS: warning-free build (-Wall -Wextra)"
fi

# The suite under the sanitizers (scripts/test-sanitizers.sh: an
# ASan+UBSan and a TSan build of their own, in build-asan/ and build-tsan/)
# runs side by side with the steps below, which touch neither: most of a
# test's time is spent waiting for windows and processes, not on a core,
# and one after the other they took over 90 minutes on a loaded 2-core
# machine. PP_SANITIZERS=asan, tsan or none narrows that (default: all).
sans=${PP_SANITIZERS:-all}
san_pid=
san_t0=$(date +%s)
if [ "$sans" != none ]; then
	bash scripts/test-sanitizers.sh "$sans" >artifacts/sanitizers.log 2>&1 &
	san_pid=$!
fi

# The results and logs of an earlier run go: a test no longer run (the
# stand-in for the unit tests, say) would be reported again.
rm -f tests/unit/*.trs tests/integration/*.trs tests/unit/*.log tests/integration/*.log
t0=$(date +%s)
# Test programs in parallel (automake's harness), two at least: they spend
# most of their time waiting for windows and processes, not on a core.
jobs=$(nproc)
[ "$jobs" -ge 2 ] || jobs=2
make -j"$jobs" check >artifacts/check.log 2>&1
took check "$t0"
echo "check: $secs s"
sed -n '/^===/,$p' artifacts/check.log | head -20
for log in tests/unit/*.log tests/integration/*.log; do
	[ -f "$log" ] && grep -E "^(not ok|FAIL|ERROR)|^# " "$log" | grep -v "^# SKIP" | head -40 |
		sed "s|^|$log: |" | grep -E "not ok|FAIL|ERROR" -A6 || true
done
for trs in tests/unit/*.trs tests/integration/*.trs; do
	[ -f "$trs" ] || continue
	p=$(grep -c '^:test-result: PASS' "$trs")
	f=$(grep -Ec '^:test-result: (FAIL|XPASS|ERROR)' "$trs")
	s=$(grep -c '^:test-result: SKIP' "$trs")
	passed=$((passed + p))
	failed=$((failed + f))
	skipped=$((skipped + s))
	echo "$(basename "$trs" .trs): $p passed, $f failed, $s skipped"
done
# The slowest test programs (tests/timed.sh ends each log with its time).
echo "slowest: $(grep -H '^# took' tests/integration/*.log 2>/dev/null |
	sed -E 's|^tests/integration/([^.]+)\.log:# took ([0-9]+) s$|\2 \1|' |
	sort -rn | head -8 | awk '{ printf "%s%s %s s", (NR > 1 ? ", " : ""), $2, $1 }')"
if ! ls tests/integration/*.trs >/dev/null 2>&1; then
	echo "FAIL: make check ran no test (see artifacts/check.log)"
	tail -n 30 artifacts/check.log
	failed=$((failed + 1))
fi
# Without cmocka, tests/unit/cmocka-missing.sh fails in their place; this
# catches any other way for them to be left out.
if ! ls tests/unit/test_*.trs >/dev/null 2>&1; then
	echo "FAIL: make check ran no unit test (grep cmocka config.log)"
	failed=$((failed + 1))
fi

# The installed library as a user gets it: header, .so, pullprof.pc and the
# man pages, used through pkg-config by a program built outside the tree.
installed() {
	local dest
	dest=$(mktemp -d)
	make install DESTDIR="$dest" &&
		test -s "$dest/usr/local/share/man/man3/pullprof.3" &&
		test -s "$dest/usr/local/share/man/man7/pullprof.7" &&
		PKG_CONFIG_SYSROOT_DIR="$dest" \
		PKG_CONFIG_PATH="$dest/usr/local/lib/pkgconfig" \
		cc -Wall -Wextra -Werror -o "$dest/demo" examples/demo.c \
		$(PKG_CONFIG_SYSROOT_DIR="$dest" PKG_CONFIG_PATH="$dest/usr/local/lib/pkgconfig" \
			pkg-config --cflags --libs pullprof) -lpthread &&
		LD_LIBRARY_PATH="$dest/usr/local/lib" PULLPROF_LISTEN=127.0.0.1:0 \
		"$dest/demo" --threads 0 --seconds 1 | grep -q "serving on port"
	local rc=$?
	rm -rf "$dest"
	return $rc
}
step install-pkg-config installed

# The code is formatted by .clang-format (the sources we write, not the
# generated ones).
formatted() {
	git ls-files '*.c' '*.h' '*.cc' | xargs clang-format --dry-run --Werror
}
step clang-format formatted

# distcheck builds the tarball and, in a VPATH build of it configured with
# --enable-short-check, runs the unit tests and a few integration tests
# (Makefile.am's SHORT_INTEGRATION_TESTS; the whole suite ran above). When
# a check fails there, its own lines are what tells why (the make output
# ends with the summary only): they are printed from the logs distcheck
# leaves behind on failure.
distchecked() {
	make distcheck && return 0
	local d
	echo "== details: the failing checks of distcheck's run"
	for d in pullprof-*/_build/sub; do
		[ -d "$d/tests" ] || continue
		grep -h -E "^(not ok|ERROR|FAIL)" -A8 "$d"/tests/unit/*.log \
			"$d"/tests/integration/*.log 2>/dev/null | head -120
	done
	return 1
}
step distcheck distchecked

# The arm64 port in an emulated arm64 Debian (HACKING.md, "arm64: the
# emulated Debian"): tests/arm64/run.sh boots it with scripts/arm64-run.sh
# and prints TAP, each line counted; "1..0 # SKIP why" where the machine
# cannot run it (no qemu-system-aarch64, cross compiler or arm64 packages).
t0=$(date +%s)
bash tests/arm64/run.sh >artifacts/arm64.log 2>&1
rc=$?
# The profiles inside it: tests/arm64/test_profiles.py (heap, thread
# dump, mutex and block, a trace, a forking host) and test_cpu.py (CPU:
# the split, deep stacks with and without PAC, leaves, prologues, C++
# inlines, short-lived threads, the vDSO) and test_endpoints.py (every
# endpoint, its type, its errors); same skips.
python3 tests/arm64/test_profiles.py >>artifacts/arm64.log 2>&1 || rc=1
python3 tests/arm64/test_cpu.py >>artifacts/arm64.log 2>&1 || rc=1
python3 tests/arm64/test_endpoints.py >>artifacts/arm64.log 2>&1 || rc=1
took arm64 "$t0"
p=$(grep -E '^ok [0-9]+' artifacts/arm64.log | grep -vc '# SKIP')
f=$(grep -Ec '^not ok [0-9]+' artifacts/arm64.log)
s=$(grep -Ec '^(ok [0-9]+.*|1\.\.0) # SKIP' artifacts/arm64.log)
if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
	f=1 # it ended before saying what failed
fi
passed=$((passed + p))
failed=$((failed + f))
skipped=$((skipped + s))
echo "arm64: $p passed, $f failed, $s skipped ($secs s)"
grep -E '^(not ok|1\.\.0 # SKIP)' -A6 artifacts/arm64.log | head -40
[ "$rc" -eq 0 ] || tail -n 30 artifacts/arm64.log

# The sanitizer runs started after the build: every check counts in the
# last line, and any sanitizer report fails.
if [ -n "$san_pid" ]; then
	wait "$san_pid"
	took sanitizers "$san_t0"
	echo "sanitizers: $secs s (side by side with the steps above)"
	# Each sanitizer's own time ("asan: N passed, N failed (N s)").
	times="$times$(sed -nE 's/^(asan|tsan): [0-9]+ passed, [0-9]+ failed \(([0-9]+) s\)$/, \1 \2 s/p' \
		artifacts/sanitizers.log | tr -d '\n')"
	grep -E "^(PASS|FAIL)|^(asan|tsan):|^== |^not ok|^# " artifacts/sanitizers.log | head -80
	# The reports themselves (test-sanitizers.sh prints the first lines of
	# each after "FAIL: <san>: sanitizer reports:").
	sed -n '/sanitizer reports:$/,/files with reports/p' artifacts/sanitizers.log | head -120
	last=$(tail -n 1 artifacts/sanitizers.log)
	if [[ $last =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
		passed=$((passed + BASH_REMATCH[1]))
		failed=$((failed + BASH_REMATCH[2]))
	else
		echo "FAIL: scripts/test-sanitizers.sh gave no count (artifacts/sanitizers.log)"
		tail -n 30 artifacts/sanitizers.log
		failed=$((failed + 1))
	fi
	s=$(sed -nE 's/^(asan|tsan): \(([0-9]+) skipped\)$/\2/p' artifacts/sanitizers.log |
		awk '{ t += $1 } END { print t + 0 }')
	skipped=$((skipped + ${s:-0}))
fi
finish

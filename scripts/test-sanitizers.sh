#!/bin/bash
# The test suite under the sanitizers: bash scripts/test-sanitizers.sh [asan|tsan|all]
# Each sanitizer gets its own VPATH build directory (build-asan/, build-tsan/),
# configured with --enable-asan (ASan + UBSan, UB fatal) or --enable-tsan,
# built, and `make check` run there. Prints "N passed, N failed" per
# sanitizer (every TAP line, plus the build) and a total last. A sanitizer
# report anywhere fails the run, even one that changed no exit code: the
# tests' logs are searched, and so is tests/sanitizer-logs/, where every
# instrumented process writes its reports (log_path, see Makefile.am).
set -u
cd "$(dirname "$0")/.."
top=$(pwd)
which=${1:-all}
case $which in
asan | tsan) sans=$which ;;
all) sans="asan tsan" ;;
*)
	echo "usage: $0 [asan|tsan|all]" >&2
	exit 2
	;;
esac
mkdir -p artifacts m4
# VPATH builds need a source tree that is not configured itself (automake's
# configure refuses). scripts/test.sh builds in the source tree, so when it
# is configured the sanitizer builds use a copy of it (the files git sees,
# committed or not) in build-san-src/.
src=$top
if [ -f config.status ]; then
	src=$top/build-san-src
	mkdir -p "$src"
	git ls-files -co --exclude-standard | while IFS= read -r f; do
		[ -e "$f" ] && printf '%s\0' "$f"
	done | tar --null -T - -cf - | (cd "$src" && tar -xf -) ||
		{
			echo "could not copy the sources to $src"
			echo "0 passed, 1 failed"
			exit 1
		}
	mkdir -p "$src/m4"
fi
if [ ! -x "$src/configure" ] || [ "$src/configure.ac" -nt "$src/configure" ] ||
	[ "$src/Makefile.am" -nt "$src/Makefile.in" ]; then
	(cd "$src" && autoreconf -fi) >artifacts/autoreconf.log 2>&1 || {
		cat artifacts/autoreconf.log
		echo "0 passed, 1 failed"
		exit 1
	}
fi

# What makes a report an error: ASan's, LSan's, UBSan's and TSan's reports,
# and their runtimes' own failures (a CHECK, LSan unable to stop the world).
# A file in tests/sanitizer-logs/ with none of these holds a warning (ASan's
# about a noreturn call from an unexpected stack, say): it is printed, whole,
# and fails nothing.
REPORT='ERROR: AddressSanitizer|runtime error:|WARNING: ThreadSanitizer|ERROR: LeakSanitizer|ERROR: ThreadSanitizer|SUMMARY: UndefinedBehaviorSanitizer|Sanitizer CHECK failed|LeakSanitizer has encountered a fatal error|ThreadSanitizer: CHECK failed|Sanitizer: nested bug'
tpassed=0
tfailed=0
for san in $sans; do
	start=$(date +%s)
	dir=build-$san
	log=$top/artifacts/$san
	passed=0
	failed=0
	skipped=0
	# A build directory configured from another source tree starts over.
	if [ "$(cat "$dir/.pp-srcdir" 2>/dev/null)" != "$src" ]; then
		rm -rf "$dir"
	fi
	mkdir -p "$dir" "$log"
	echo "$src" >"$dir/.pp-srcdir"
	# A build directory kept from an earlier run is configured again (with
	# its options): what configure found then (cmocka for one) may have
	# changed since.
	if (cd "$dir" && if [ -f Makefile ] && [ -f config.status ]; then
		./config.status --recheck && ./config.status --quiet
	else
		"$src/configure" --quiet --enable-$san
	fi && make -j"$(nproc)") >"$log/build.log" 2>&1; then
		passed=$((passed + 1))
		echo "PASS: $san build"
	else
		failed=$((failed + 1))
		echo "FAIL: $san build (log: $log/build.log)"
		tail -n 30 "$log/build.log"
	fi
	if [ "$failed" -eq 0 ]; then
		rm -rf "$dir/tests/sanitizer-logs"
		rm -f "$dir"/tests/unit/*.trs "$dir"/tests/integration/*.trs \
			"$dir"/tests/unit/*.log "$dir"/tests/integration/*.log
		# What the plain run alone needs to run (scripts/test.sh runs
		# every test there): the docs and the pages, whose code is the
		# same in every build and whose endpoints the other tests
		# exercise, and the new kind, which builds a plain copy; and under TSan, whose runs are the slowest, the soak
		# tests and the real servers under load, which the ASan run
		# keeps. A test named in TESTS runs whatever this says.
		tests=${TESTS:-}
		if [ -z "$tests" ]; then
			leave="test_docs test_viewer test_new_kind"
			[ "$san" = tsan ] && leave="$leave test_stability test_flood test_scrapers test_servers test_redis"
			all=$(cd "$dir" && printf 'pp-print-tests:\n\t@echo $(TESTS)\n' |
				make -s --no-print-directory -f Makefile -f - pp-print-tests)
			for t in $all; do
				case " $leave " in
				*" $(basename "$t" .py) "*) ;;
				*) tests="$tests $t" ;;
				esac
			done
			echo "$san: left to the plain run: $leave"
		fi
		(cd "$dir" && make -j"$(nproc)" check ${tests:+TESTS="$tests"}) >"$log/check.log" 2>&1
		for trs in "$dir"/tests/unit/*.trs "$dir"/tests/integration/*.trs; do
			[ -f "$trs" ] || continue
			p=$(grep -c '^:test-result: PASS' "$trs")
			f=$(grep -Ec '^:test-result: (FAIL|XPASS|ERROR)' "$trs")
			s=$(grep -c '^:test-result: SKIP' "$trs")
			passed=$((passed + p))
			failed=$((failed + f))
			skipped=$((skipped + s))
			echo "$san $(basename "$trs" .trs): $p passed, $f failed, $s skipped"
			[ "$f" -gt 0 ] && grep -E "^not ok" -A8 "${trs%.trs}.log" | head -40
		done
		if ! ls "$dir"/tests/integration/*.trs >/dev/null 2>&1; then
			echo "FAIL: $san: make check ran no test (see $log/check.log)"
			tail -n 30 "$log/check.log"
			failed=$((failed + 1))
		fi
		# Any sanitizer report is a failure, wherever it landed.
		reports=$(grep -lE "$REPORT" "$dir"/tests/unit/*.log "$dir"/tests/integration/*.log 2>/dev/null)
		for r in "$dir"/tests/sanitizer-logs/*; do
			[ -f "$r" ] || continue
			if grep -qE "$REPORT" "$r"; then
				reports="$reports $r"
			else
				cp "$r" "$log/" 2>/dev/null
				echo "$san: a warning, no error report ($r):"
				head -n 20 "$r" | sed 's/^/# /'
			fi
		done
		if [ -n "${reports// /}" ]; then
			failed=$((failed + 1))
			echo "FAIL: $san: sanitizer reports:"
			n=0
			for r in $reports; do
				cp "$r" "$log/" 2>/dev/null
				n=$((n + 1))
				[ "$n" -gt 8 ] && continue # the first few; all are in $log
				# The file from its start: what a runtime said before
				# its error line ("Tracer caught signal 11") matters.
				echo "== $r"
				head -n 60 "$r"
			done
			echo "($n files with reports; copies in $log/)"
		else
			passed=$((passed + 1))
			echo "PASS: $san: no sanitizer report in any log"
		fi
		cp "$dir"/tests/unit/*.log "$dir"/tests/integration/*.log "$log/" 2>/dev/null
	fi
	end=$(date +%s)
	[ "$skipped" -gt 0 ] && echo "$san: ($skipped skipped)"
	echo "$san: $passed passed, $failed failed ($((end - start)) s)"
	tpassed=$((tpassed + passed))
	tfailed=$((tfailed + failed))
done
echo "$tpassed passed, $tfailed failed"
[ "$tfailed" -eq 0 ]

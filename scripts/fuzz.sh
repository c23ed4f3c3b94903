#!/bin/sh
# Build the libFuzzer targets of tests/fuzz with clang (ASan + UBSan) and run
# each for a bounded time on a scratch copy of its seed corpus.
#   scripts/fuzz.sh [SECONDS [TARGET...]]
#   scripts/fuzz.sh --build [TARGET...]   build them only
# SECONDS defaults to 60; TARGETs are legacy, maps, query, symbol and
# merge (default: all). With FUZZ_MIN_RUNS=N, a target that executed fewer
# than N inputs in its SECONDS (a busy machine) goes on, on the corpus it
# grew, until it has executed N: each then runs at least SECONDS and at
# least N inputs, and says "fuzz_T: executed U units in all". The sources every target shares are compiled once,
# side by side, into $FUZZ_OUT/obj, and again only when a source, a header
# or the flags changed (a hash of them all says so).
# Binaries and crash inputs go to $FUZZ_OUT, default
# $PP_BUILDDIR/tests/fuzz/out (the build
# directory: pp-autoconf.h comes from there; default: the source tree).
# A crash input found should be copied into tests/fuzz/corpus/TARGET as a
# regression input. Exit status: 0 no finding, 1 a finding, 77 no clang or
# no libFuzzer here.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
build=${PP_BUILDDIR:-$src}
only_build=0
if [ "${1:-}" = --build ]; then
	only_build=1
	shift
	secs=0
else
	secs=${1:-60}
	[ $# -gt 0 ] && shift
fi
targets=${*:-legacy maps query symbol merge}
CC=${FUZZ_CC:-clang}
out=${FUZZ_OUT:-$build/tests/fuzz/out}
mkdir -p "$out"

if ! command -v "$CC" >/dev/null 2>&1; then
	echo "fuzz.sh: no $CC (apt-get install clang libclang-rt-14-dev)" >&2
	exit 77
fi
if [ ! -f "$build/pp-autoconf.h" ]; then
	echo "fuzz.sh: run ./configure first ($build/pp-autoconf.h)" >&2
	exit 1
fi

# The pure modules the targets reach (no agent, no server): the profile
# core, whose list Makefile.am keeps (libpp_profile_la_SOURCES, what
# pullprof-convert links), and the parsers of the agent the targets call.
profile=$(sed -n '/^libpp_profile_la_SOURCES =/,/[^\\]$/p' "$src/Makefile.am" |
	tr -s ' \t\\' '\n\n\n' | grep '\.c$')
if [ -z "$profile" ]; then
	echo "fuzz.sh: no libpp_profile_la_SOURCES in $src/Makefile.am" >&2
	exit 1
fi
sources="$profile src/util/cidr.c src/config.c src/ask/args.c
  src/api/symbol_body.c"
flags="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
  -include $build/pp-autoconf.h -I$src/src -I$src/include"
libs="$(pkg-config --libs libdw zlib) -ldl"

# The shared objects: compiled again, all of them, when the hash of the
# flags, the compiler, every source and every header differs from the one
# they were made with.
obj=$out/obj
mkdir -p "$obj"
# shellcheck disable=SC2086
hash=$( (echo "$CC $flags $libs"; "$CC" --version 2>&1 | head -1
	cd "$src" && cat $sources tests/fuzz/*.c &&
	find src include -name '*.h' | sort | xargs cat
	cat "$build/pp-autoconf.h") | md5sum | cut -d' ' -f1)
if [ "$(cat "$obj/hash" 2>/dev/null)" != "$hash" ]; then
	rm -f "$obj"/*.o "$obj/hash"
	# shellcheck disable=SC2086
	if ! printf '%s\n' $sources | FUZZ_CFLAGS="$flags $(pkg-config --cflags libdw zlib)" \
		xargs -P "$(nproc)" -I{} sh -c \
		'o="$1/$(echo "$3" | tr / _ | sed "s/\.c\$/.o/")"; \
		 exec '"$CC"' $FUZZ_CFLAGS -c -o "$o" "$2/$3"' \
		sh "$obj" "$src" {}; then
		echo "fuzz.sh: compiling the shared sources failed (libclang-rt-14-dev?)" >&2
		exit 1
	fi
	echo "$hash" >"$obj/hash"
fi

status=0
for t in $targets; do
	bin=$out/fuzz_$t
	# shellcheck disable=SC2086
	if [ ! "$bin" -nt "$obj/hash" ] &&
		! $CC $flags $(pkg-config --cflags libdw zlib) -o "$bin" \
			"$src/tests/fuzz/fuzz_$t.c" "$obj"/*.o $libs; then
		# clang is here (checked above): a target that does not
		# build is a failure, not a reason to skip.
		echo "fuzz.sh: building fuzz_$t failed (libclang-rt-14-dev?)" >&2
		exit 1
	fi
	[ "$only_build" = 1 ] && continue
	work=$(mktemp -d)
	cp "$src/tests/fuzz/corpus/$t/"* "$work/" 2>/dev/null
	chmod -R u+w "$work" # from a read-only tree (distcheck) too
	echo "fuzz.sh: fuzz_$t for ${secs}s"
	# -rss_limit_mb: a 2 GB budget; -max_len: records of a few hundred
	# words, maps texts of some lines, query strings, /symbol bodies and
# small pprof profiles.
	"$bin" -max_total_time="$secs" -max_len=16384 -timeout=10 \
		-rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$out/${t}-" "$work" 2>"$out/fuzz_$t.log"
	rc=$?
	grep -E "^(#[0-9]+ +DONE|Done|stat::number_of_executed_units|stat::peak_rss_mb)" \
		"$out/fuzz_$t.log" | sed "s/^/fuzz_$t: /"
	units=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/fuzz_$t.log")
	units=${units:-0}
	more=$((${FUZZ_MIN_RUNS:-0} - units))
	if [ $rc -eq 0 ] && [ "$units" -gt 0 ] && [ $more -gt 0 ]; then
		# Slower than the count asked for: the rest by count (-runs
		# counts the corpus it runs first too, so at least that many).
		echo "fuzz.sh: fuzz_$t: $units units in ${secs}s, $more more"
		"$bin" -runs="$more" -max_len=16384 -timeout=10 \
			-rss_limit_mb=2048 -print_final_stats=1 \
			-artifact_prefix="$out/${t}-" "$work" \
			2>>"$out/fuzz_$t.log"
		rc=$?
		also=$(sed -n 's/^stat::number_of_executed_units: *//p' \
			"$out/fuzz_$t.log" | sed 1d)
		units=$((units + ${also:-0}))
	fi
	echo "fuzz_$t: executed $units units in all"
	echo "fuzz_$t: corpus grew to $(ls "$work" | wc -l) inputs"
	if [ $rc -ne 0 ]; then
		echo "fuzz.sh: fuzz_$t found a problem (log: $out/fuzz_$t.log):" >&2
		grep -E "ERROR|SUMMARY|runtime error|Test unit written" \
			"$out/fuzz_$t.log" | head -20 >&2
		status=1
	fi
	rm -rf "$work"
done
exit $status

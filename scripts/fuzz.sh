#!/bin/sh
# Build the libFuzzer targets of tests/fuzz with clang (ASan + UBSan) and run
# each for a bounded time on a scratch copy of its seed corpus.
#   scripts/fuzz.sh [SECONDS [TARGET...]]
# SECONDS defaults to 60; TARGETs are legacy, maps, query, symbol and
# merge (default: all).
# Binaries and crash inputs go to $FUZZ_OUT, default
# $PP_BUILDDIR/tests/fuzz/out (the build
# directory: pp-autoconf.h comes from there; default: the source tree).
# A crash input found should be copied into tests/fuzz/corpus/TARGET as a
# regression input. Exit status: 0 no finding, 1 a finding, 77 no clang or
# no libFuzzer here.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
build=${PP_BUILDDIR:-$src}
secs=${1:-60}
[ $# -gt 0 ] && shift
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

# The pure modules the targets reach (no agent, no server).
sources="src/profile/legacy_read.c src/profile/model.c src/profile/pb.c
  src/profile/pprof.c src/profile/merge.c src/profile/view.c src/symbols/maps.c src/symbols/symtab.c
  src/symbols/dwarf.c src/symbols/debuginfo.c src/util/buf.c
  src/util/proc.c src/util/fds.c src/util/hash.c src/util/arena.c src/util/strtab.c src/util/utf8.c
  src/util/u64map.c src/util/cidr.c src/config.c src/http/args.c
  src/http/symbol_body.c"
flags="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
  -include $build/pp-autoconf.h -I$src/src -I$src/include"
libs="$(pkg-config --libs libdw zlib) -ldl"

status=0
for t in $targets; do
	bin=$out/fuzz_$t
	srcs="$src/tests/fuzz/fuzz_$t.c"
	for f in $sources; do srcs="$srcs $src/$f"; done
	# shellcheck disable=SC2086
	if ! $CC $flags $(pkg-config --cflags libdw zlib) -o "$bin" $srcs \
		$libs; then
		# clang is here (checked above): a target that does not
		# build is a failure, not a reason to skip.
		echo "fuzz.sh: building fuzz_$t failed (libclang-rt-14-dev?)" >&2
		exit 1
	fi
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

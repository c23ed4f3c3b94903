#!/bin/sh
# Run pullprof's benchmarks and their peers in one go, printing the tables.
#   sh bench/run.sh            (after sh scripts/build.sh)
set -eu
cd "$(dirname "$0")/.."
make -s tests/cpu/deep bench/bench_profile bench/cpuwork bench/mallocwork bench/floodwork bench/bench_labels \
	bench/threadswork bench/lockswork bench/tracework bench/bench_fork bench/walkwork \
	bench/recordwork
# The peers (root installs them): gperftools' libprofiler (CPU) and tcmalloc,
# jemalloc and heaptrack (heap); valgrind counts instructions; wrk floods;
# gdb dumps threads (stopping them) beside pullprof's thread dumps;
# PostgreSQL forks a backend per connection under pgbench.
lib=/usr/lib/x86_64-linux-gnu
missing=""
[ -e $lib/libprofiler.so.0 ] || missing="$missing google-perftools"
[ -e $lib/libtcmalloc.so.4 ] || missing="$missing libgoogle-perftools4"
[ -e $lib/libjemalloc.so.2 ] || missing="$missing libjemalloc2"
command -v heaptrack >/dev/null || missing="$missing heaptrack"
command -v valgrind >/dev/null || missing="$missing valgrind"
command -v wrk >/dev/null || missing="$missing wrk"
command -v gdb >/dev/null || missing="$missing gdb"
[ -x /usr/lib/postgresql/15/bin/pgbench ] || missing="$missing postgresql"
if [ -n "$missing" ] && [ "$(id -u)" = 0 ]; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2086
	apt-get install -y -qq $missing >/dev/null
fi
sizes="1000 10000 100000"
echo "## Profile build, symbolization and encoding ($(nproc) cores, $(date -u +%Y-%m-%d))"
echo
echo "pullprof (bench/bench_profile):"
echo
./bench/bench_profile $sizes
echo
echo "Peer, the same shape encoded by github.com/google/pprof/profile (bench/peer_pprof_encode.go):"
echo
GO111MODULE=off GOPATH=/usr/share/gocode GOFLAGS= GOCACHE="${TMPDIR:-/tmp}/pullprof-gocache" \
	go run bench/peer_pprof_encode.go $sizes
echo
echo "## CPU profiling overhead and accuracy (bench/bench_cpu.py)"
echo
python3 bench/bench_cpu.py 5
echo
echo "## Heap: malloc/free overhead (bench/bench_malloc.py)"
echo
python3 bench/bench_malloc.py
echo
echo "## Profile labels: a push/pop pair (bench/bench_labels)"
echo
echo "pullprof:"
echo
./bench/bench_labels 5
echo
echo "Peer, Go's runtime/pprof label scopes (bench/peer_labels.go):"
echo
GO111MODULE=off GOFLAGS= GOCACHE="${TMPDIR:-/tmp}/pullprof-gocache" go run bench/peer_labels.go 5
echo
echo "## The host's work under an HTTP flood (bench/bench_flood.py)"
echo
python3 bench/bench_flood.py
echo
echo "## The CPU profiler at real depths and thread lifetimes (bench/bench_unwind.py)"
echo
python3 bench/bench_unwind.py
echo
echo "## One stack capture by depth, beside libunwind (bench/bench_walk.py)"
echo
python3 bench/bench_walk.py
echo
echo "## Thread dumps and wall-clock profiles (bench/bench_threads.py)"
echo
python3 bench/bench_threads.py
echo
echo "## The record (bench/bench_record.py)"
echo
python3 bench/bench_record.py
echo
echo "## Lock contention (bench/bench_locks.py)"
echo
python3 bench/bench_locks.py
echo
echo "## Fork (bench/bench_fork.py, bench/bench_fork_anatomy.py, bench/bench_pgbench.py)"
echo
python3 bench/bench_fork.py
echo
python3 bench/bench_pgbench.py
echo
python3 bench/bench_fork_anatomy.py
echo
python3 bench/bench_fork_modes.py

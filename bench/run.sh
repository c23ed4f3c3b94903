#!/bin/sh
# Run pullprof's benchmarks and their peers in one go, printing the tables.
#   sh bench/run.sh            (after sh scripts/build.sh)
set -eu
cd "$(dirname "$0")/.."
make -s bench/bench_profile bench/cpuwork
# The CPU profiling peer: gperftools' libprofiler (root installs it).
if [ ! -e /usr/lib/x86_64-linux-gnu/libprofiler.so.0 ] && [ "$(id -u)" = 0 ]; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq google-perftools >/dev/null
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

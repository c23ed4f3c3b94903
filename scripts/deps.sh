#!/bin/sh
# Install what pullprof needs on Debian 12 (run as root).
#   scripts/deps.sh          build dependencies
#   scripts/deps.sh --test   build and test dependencies
# Packages already installed are not fetched again; apt is not touched when
# nothing is missing.
#
# The tests also need promtool (Prometheus's linter for /metrics). Debian
# ships it only inside the prometheus server package, whose installation
# would also set up and start a server (a systemd unit, a postinst, a user)
# and recommend node-exporter. So the package is downloaded, not installed,
# and the one static binary taken out of it to $PROMTOOL_DIR/promtool.
#
# nginx-light and postgresql are real forking servers for
# test_servers.py; their packages would start a server (nginx on port 80,
# a PostgreSQL cluster) where services may start: the tests run their own,
# in temporary directories, and need none.
set -eu

build="build-essential autoconf automake libtool pkg-config
  libmicrohttpd-dev libjson-c-dev zlib1g-dev libunwind-dev libdw-dev"
test="libcmocka-dev curl python3 procps valgrind clang-format binutils
  protobuf-compiler golang-go golang-github-google-pprof-dev libjemalloc2
  libjemalloc-dev
  google-perftools openssl libgoogle-perftools-dev clang libclang-rt-14-dev
  chromium python3-websocket wrk python3-prometheus-client groff-base man-db
  redis-server redis-tools nginx-light postgresql"

# The arm64 port's cross build and its emulated arm64 Debian
# (tests/arm64/run.sh): the cross compiler, qemu, and the arm64 builds of
# the libraries (Debian multiarch: the arm64 architecture is added first).
arm64="gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-system-arm
  libmicrohttpd-dev:arm64 libjson-c-dev:arm64 libunwind-dev:arm64
  libdw-dev:arm64 libelf-dev:arm64 zlib1g-dev:arm64"

pkgs=$build
[ "${1:-}" = "--test" ] && pkgs="$build $test $arm64"
if [ "${1:-}" = "--test" ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
	if [ "$(id -u)" != 0 ]; then
		echo "deps.sh: the arm64 architecture is not added; run as root" >&2
		exit 1
	fi
	dpkg --add-architecture arm64
fi

missing=""
for p in $pkgs; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
		missing="$missing $p"
	fi
done
# LLVM's libunwind-14-dev ships its own libunwind.h and conflicts with
# libunwind-dev; some images carry it. apt replaces it in the same step.
conflict=""
if dpkg-query -W -f='${Status}' libunwind-14-dev 2>/dev/null | grep -q "ok installed"; then
	conflict="libunwind-14-dev-"
	missing="$missing libunwind-dev"
fi

if [ -n "$missing" ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "deps.sh: missing packages:$missing; run as root" >&2
		exit 1
	fi
	echo "deps.sh: installing$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $missing $conflict >/dev/null
fi

# promtool (see the top): once, then found in its place.
PROMTOOL_DIR=${PROMTOOL_DIR:-/opt/pullprof-test}
if [ "${1:-}" = "--test" ] && ! "$PROMTOOL_DIR/promtool" --version >/dev/null 2>&1; then
	if [ "$(id -u)" != 0 ]; then
		echo "deps.sh: $PROMTOOL_DIR/promtool is missing; run as root" >&2
		exit 1
	fi
	echo "deps.sh: extracting promtool from Debian's prometheus package"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	# apt-get download needs the package lists; they may be missing or old.
	if ! (cd "$tmp" && apt-get download -qq prometheus >/dev/null 2>&1); then
		apt-get update -qq
		(cd "$tmp" && apt-get download -qq prometheus >/dev/null)
	fi
	dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/root"
	mkdir -p "$PROMTOOL_DIR"
	install -m 755 "$tmp/root/usr/bin/promtool" "$PROMTOOL_DIR/promtool.new"
	mv "$PROMTOOL_DIR/promtool.new" "$PROMTOOL_DIR/promtool"
	"$PROMTOOL_DIR/promtool" --version >/dev/null
fi

#!/bin/sh
# Profile an unmodified program: load libpullprof with LD_PRELOAD and tell it
# where to listen. The program is not rebuilt, not relinked, not restarted
# differently in any other way.
#
#   examples/preload.sh [PROGRAM ARGS...]      (default: sleep 30)
#
# Run from the source tree after building (scripts/build.sh).
set -eu
cd "$(dirname "$0")/.."
lib="$PWD/.libs/libpullprof.so"
[ -f "$lib" ] || { echo "build first: sh scripts/build.sh" >&2; exit 1; }
[ $# -gt 0 ] || set -- sleep 30

export PULLPROF_LISTEN="${PULLPROF_LISTEN:-127.0.0.1:6061}"
LD_PRELOAD="$lib" "$@" &
pid=$!
sleep 1
echo "--- status of pid $pid ($*), from inside the process:"
curl -s "http://$PULLPROF_LISTEN/debug/pprof/status" | head -20
echo "..."
wait "$pid"

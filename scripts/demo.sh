#!/bin/sh
# README command 1: install the build dependencies, build, and run the demo
# with the agent on 127.0.0.1:6060 (PULLPROF_LISTEN overrides). Ctrl-C stops it.
set -eu
cd "$(dirname "$0")/.."
sh scripts/deps.sh
sh scripts/build.sh
exec ./examples/demo "$@"

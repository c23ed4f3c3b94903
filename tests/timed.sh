#!/bin/sh
# The harness's way into a test program (Makefile.am, PY_LOG_COMPILER):
# runs it and ends its TAP with a comment saying how long it took, which
# scripts/test.sh gathers into its list of the slowest tests.
t0=$(date +%s)
"$@"
rc=$?
echo "# took $(($(date +%s) - t0)) s"
exit $rc

#!/bin/sh
# Configure (once) and build pullprof in the source tree.
# configure runs again, with the options it had, when it is newer than
# its last run, when packages were installed or removed since then (what
# it found, cmocka for one, may have changed: README command 1 configures
# before command 2 installs the test dependencies), or when
# PP_RECONFIGURE=1 (scripts/test.sh sets it).
set -eu
cd "$(dirname "$0")/.."
mkdir -p m4 # libtool puts its macros here; git does not keep empty folders
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt Makefile.in ]; then
	autoreconf -fi
fi
if [ ! -f Makefile ] || [ ! -f config.status ]; then
	./configure --quiet
elif [ configure -nt config.status ] || [ "${PP_RECONFIGURE:-}" = 1 ] ||
	{ [ -f /var/lib/dpkg/status ] && [ /var/lib/dpkg/status -nt config.status ]; }; then
	./config.status --recheck
	./config.status --quiet
fi
make -j"$(nproc)" ${1:+"$@"}

#!/bin/sh
# Configure (once) and build pullprof in the source tree.
set -eu
cd "$(dirname "$0")/.."
mkdir -p m4 # libtool puts its macros here; git does not keep empty folders
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt Makefile.in ]; then
	autoreconf -fi
fi
if [ ! -f Makefile ] || [ configure -nt config.status ]; then
	./configure --quiet
fi
make -j"$(nproc)" ${1:+"$@"}

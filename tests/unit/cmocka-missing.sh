#!/bin/sh
# make check runs this in place of the unit tests when configure found no
# cmocka: one failing check, so that the suite cannot pass without them.
echo "1..1"
if ${PKG_CONFIG:-pkg-config} --exists 'cmocka >= 1.1' 2>/dev/null; then
	why="cmocka is installed now but was not when configure ran: configure again (./config.status --recheck && ./config.status keeps its options; scripts/test.sh does it)"
else
	why="cmocka was not found when configure ran: apt-get install libcmocka-dev, then configure again"
fi
echo "not ok 1 - the unit tests were not built: $why"

/* A plugin tests/symbols/pluginhost loads with dlopen, whose file the test
 * then truncates or overwrites (tests/integration/test_hostile_images.py).
 * It keeps allocations made from its own code (so /heap has its frames)
 * and can park a host thread with its own frame on the stack (so
 * /goroutine walks through it). */
#include <stdlib.h>
#include <string.h>

#ifndef PLUGIN_TAG
#define PLUGIN_TAG 1
#endif

typedef void (*plugin_cb)(void);

int plugin_work(void);
int plugin_park(plugin_cb cb);

static void *kept[64];

__attribute__((noinline)) int plugin_work(void)
{
	for (int i = 0; i < 64; i++) {
		if (!kept[i])
			kept[i] = malloc(256 << 10);
		if (kept[i])
			memset(kept[i], PLUGIN_TAG, 256 << 10);
	}
	return PLUGIN_TAG;
}

/* Calls cb, which never returns: the caller's thread keeps this frame (the
 * read of `here` after the call keeps it from being a tail call). */
__attribute__((noinline)) int plugin_park(plugin_cb cb)
{
	volatile int here = PLUGIN_TAG;
	cb();
	return here;
}

/*
 * dlclose, interposed. HOST CONTEXT: called by the application like the
 * real one, which it calls. Before an image can go away it tells the unwind
 * registry, so the SIGPROF handler stops trusting tables until the registry
 * has caught up (at most one collector pass later). Without this, a library
 * unloaded and another loaded at the same place in between two refreshes
 * could make libunwind read the old table's address.
 */
#include <dlfcn.h>
#include <stddef.h>

#include "pullprof.h"
#include "unwind/registry.h"

PULLPROF_API int dlclose(void *handle)
{
	static int (*real)(void *);
	if (!real) {
		real = (int (*)(void *))dlsym(RTLD_NEXT, "dlclose");
		if (!real)
			return -1;
	}
	pp_registry_unloading();
	return real(handle);
}

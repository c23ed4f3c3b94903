/*
 * Functions found by name in the loaded objects' ELF symbol tables, for
 * code that must call into the host (an allocator's control function, such
 * as jemalloc's mallctl linked into a static executable) where dlsym sees
 * only exported symbols: a statically linked allocator's functions are
 * usually in .symtab only. Reads each object's file once per call
 * (symbols/elfsym.h); not for hot paths.
 * Context: agent.
 */
#ifndef PP_SYMBOLS_BYNAME_H
#define PP_SYMBOLS_BYNAME_H

#include <stddef.h>

struct pp_byname {
	void *addr;       /* the function's address in this process */
	char path[256];   /* the object that defines it ("" : the executable
	                     when its path is unknown) */
	int in_main;      /* the executable defines it */
	const char *name; /* which of the names was found (one of names[]) */
};

/*
 * The first of names (NULL-terminated, at most 8, in order of preference)
 * that an
 * object of this process defines as a function, the executable searched
 * first, then each library in load order; only_main: the executable only.
 * 0, -ENOENT when none is defined, or -ENOMEM / a file's open error.
 */
int pp_byname_find(const char *const *names, int only_main,
                   struct pp_byname *out);

#endif

/*
 * Functions found by name in the executable's own symbol table, for code
 * that must call into the host (an allocator's control function, such as
 * jemalloc's mallctl linked into a static executable) where dlsym sees only
 * exported symbols: a statically linked allocator's functions are usually
 * in .symtab only. A shared library that defines them exports them, and
 * dlsym finds those. Reads the executable's file (symbols/elfsym.h) at
 * each call; not for hot paths.
 * Context: agent.
 */
#ifndef PP_SYMBOLS_BYNAME_H
#define PP_SYMBOLS_BYNAME_H

#include <stddef.h>

struct pp_byname {
	void *addr;       /* the function's address in this process */
	char path[256];   /* the executable's file */
	const char *name; /* which of the names was found (one of names[]) */
};

/*
 * The first of names (NULL-terminated, at most 8, in order of preference)
 * that the executable defines. 0, -ENOENT when it defines none, or
 * -ENOMEM / the file's open error.
 */
int pp_byname_exe(const char *const *names, struct pp_byname *out);

#endif

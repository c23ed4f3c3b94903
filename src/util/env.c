/*
 * Writing the process environment with the C library's own setenv (see
 * env.h). Built into the light object, whose start at load time writes
 * the records the programs the host runs read (src/shim/shim.c).
 * Context: host.
 */
#include "util/env.h"

#include <dlfcn.h>
#include <stdlib.h>
#if defined(__GLIBC__)
#include <gnu/lib-names.h>
#endif

typedef int (*setenv_fn)(const char *, const char *, int);

static setenv_fn libc_setenv(void)
{
	static setenv_fn f;
	setenv_fn got = __atomic_load_n(&f, __ATOMIC_ACQUIRE);
	if (got)
		return got;
#ifdef LIBC_SO
	/* The C library is loaded (we are linked against it): this only
	 * finds its handle. Never closed: the C library stays anyway. */
	void *libc = dlopen(LIBC_SO, RTLD_NOLOAD | RTLD_LAZY);
	if (libc)
		got = (setenv_fn)dlsym(libc, "setenv");
#endif
	/* Not glibc: the next definition after this object's place, which
	 * is the C library's unless another preloaded library has one. */
	if (!got)
		got = (setenv_fn)dlsym(RTLD_NEXT, "setenv");
	if (!got)
		got = setenv;
	__atomic_store_n(&f, got, __ATOMIC_RELEASE);
	return got;
}

int pp_env_set(const char *name, const char *value)
{
	return libc_setenv()(name, value, 1);
}

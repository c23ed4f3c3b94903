/*
 * The process environment, read and written as the C library keeps it,
 * whatever the host defines.
 *
 * A host may define getenv, setenv, putenv and unsetenv itself, and every
 * call of ours by name would then reach its versions. bash does: its
 * setenv, called before its main(), creates its table of variables, and
 * from then on its getenv looks only there, so the settings given in the
 * environment were all read as unset. So pullprof never calls them by
 * name: it reads the array the C library's getenv reads (what execve gave,
 * as the C library's setenv and putenv changed it: a linked host that sets
 * PULLPROF_LISTEN with setenv() before pullprof_start() is heard) and
 * writes with the C library's own setenv, found in the C library itself.
 * Like getenv, neither is safe while another thread changes the
 * environment.
 * Context: host.
 */
#ifndef PP_UTIL_ENV_H
#define PP_UTIL_ENV_H

#include <stddef.h>
#include <string.h>

/* glibc's own name for it: a host may define a variable `environ` of its
 * own, which the dynamic linker would give us instead. */
#ifdef __GLIBC__
extern char **__environ;
#define PP_ENVIRON __environ
#else
extern char **environ;
#define PP_ENVIRON environ
#endif

/* name's value in the process environment, or NULL. Async-signal-safe. */
static inline const char *pp_env_get(const char *name)
{
	char **e = PP_ENVIRON;
	size_t n = strlen(name);
	if (!e || !n)
		return NULL;
	for (; *e; e++)
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

/* setenv(name, value, 1) of the C library (env.c, in the light object):
 * 0 or -1 with errno. */
int pp_env_set(const char *name, const char *value);

#endif

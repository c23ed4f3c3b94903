/*
 * jemalloc's own heap profiler, reached through its control function
 * (mallctl, or a prefixed one such as je_mallctl) found in this process:
 * exported (a shared libjemalloc, dlsym) or in the executable's symbol
 * table (statically linked). What it is and how it is set, and its heap
 * dump (prof.dump) into a memory file pullprof owns.
 * Context: agent.
 */
#ifndef PP_HEAP_JEMALLOC_H
#define PP_HEAP_JEMALLOC_H

#include <stddef.h>
#include <stdint.h>

typedef int (*pp_mallctl_fn)(const char *, void *, size_t *, void *, size_t);

struct pp_jemalloc {
	pp_mallctl_fn mallctl; /* NULL: no jemalloc found */
	const char *symbol;    /* the name it was found under */
	char path[256];        /* the object that defines it */
	int in_main;           /* linked into the executable */
	int prefixed;          /* its functions are not named malloc etc. */
	char version[96];
	int config_prof;    /* built with profiling (--enable-prof) */
	int opt_prof;       /* profiling on: MALLOC_CONF=prof:true */
	int prof_active;    /* sampling now (prof.active) */
	int accum;          /* cumulative counts kept (prof_accum:true) */
	unsigned lg_sample; /* sampling interval: 2^lg_sample bytes */
	uint64_t allocated; /* stats.allocated; 0 when unknown */
};

/* Look for jemalloc in this process and read its settings. 0, or -ENOENT
 * (out->mallctl NULL). */
int pp_jemalloc_find(struct pp_jemalloc *out);
/* Read the settings again (prof.active and stats move). */
void pp_jemalloc_refresh(struct pp_jemalloc *j);
/* jemalloc's heap profile now, as its heap_v2 text (malloc'ed into *text).
 * 0, or a negative errno with a sentence. */
int pp_jemalloc_dump(const struct pp_jemalloc *j, char **text, size_t *len,
                     char *err, size_t errlen);

#endif

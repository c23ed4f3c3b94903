/*
 * Does the host's malloc reach pullprof's wrappers, and which allocator
 * does the host use? The answer says where /heap and /allocs come from:
 * pullprof's own sampler (interposed), the allocator's own profiler
 * (jemalloc's prof.dump, gperftools tcmalloc's heap sample), or nothing —
 * and then a sentence that says why and what to do. Found once, on an
 * agent thread (it reads the executable's symbol table); the allocator's
 * settings are read again at each request.
 * Context: agent.
 */
#ifndef PP_HEAP_DETECT_H
#define PP_HEAP_DETECT_H

#include <stdint.h>

#include "heap/jemalloc.h"
#include "heap/tcmalloc.h"

enum pp_heap_source {
	PP_HEAP_SOURCE_NONE,       /* no true heap profile: see why */
	PP_HEAP_SOURCE_INTERPOSED, /* pullprof's wrappers and sampler */
	PP_HEAP_SOURCE_JEMALLOC,   /* jemalloc's prof.dump */
	PP_HEAP_SOURCE_TCMALLOC,   /* gperftools tcmalloc's heap sample */
};

struct pp_heap_allocator {
	int interposed; /* the host's malloc calls reach the wrappers */
	/* The allocator behind the host's malloc (behind the wrappers when
	 * interposed): "glibc", "jemalloc", "tcmalloc", "mimalloc",
	 * "sanitizer", "valgrind" or "unknown". */
	const char *name;
	/* "shared" (a library), "static" (in the executable), "prefixed"
	 * (a jemalloc whose functions are je_malloc etc., beside the
	 * system's malloc) */
	const char *linkage;
	char path[256];        /* the object that defines the host's malloc */
	char version[96];      /* when the allocator says it */
	char reason[1024];     /* why the allocations are (not) interposed */
	struct pp_jemalloc je; /* je.mallctl: a jemalloc was found */
	struct pp_tcmalloc tc; /* tc.linkage: a gperftools tcmalloc */
	/* Interposed, but C++'s operator new and delete resolve to the
	 * allocator behind (a shared jemalloc or tcmalloc defines them):
	 * what C++ code allocates with new is not seen. */
	int new_bypass;
};

/* The allocator, found on the first call (later calls copy it, with
 * jemalloc's settings read again). */
void pp_heap_allocator(struct pp_heap_allocator *out);

/* Where a heap profile comes from when the query does not say
 * (?source=auto), with (NONE) a sentence saying why there is none and
 * what the user can do. view_allocs: /allocs, which needs cumulative
 * counts. */
enum pp_heap_source pp_heap_source_auto(const struct pp_heap_allocator *a,
                                        int sampling_on, int view_allocs,
                                        char *why, size_t whylen);
/* Can source serve this view? 0, or -ENOTSUP with a sentence. */
int pp_heap_source_check(const struct pp_heap_allocator *a,
                         enum pp_heap_source source, int sampling_on,
                         int view_allocs, char *why, size_t whylen);
const char *pp_heap_source_name(enum pp_heap_source s);

/* Interposed, yet nothing seen: 1 with a sentence when not one
 * allocation was sampled while the process holds much anonymous memory
 * that glibc's malloc does not account for (the allocations go elsewhere);
 * else 0. */
int pp_heap_interposed_unseen(const struct pp_heap_allocator *a,
                              uint64_t sampled, uint64_t rate, char *why,
                              size_t whylen);

/* In a forked child (async-signal-safe): the lock starts anew. */
void pp_heap_allocator_forget_in_child(void);

/* The calling agent thread's allocations are left out of the allocator's
 * own profile too (jemalloc's thread.prof.active), once the allocator was
 * found; a no-op before, and for other allocators. */
void pp_heap_allocator_exclude_thread(void);

#endif

/*
 * Heap profiles taken from the host's allocator's own sampling profiler,
 * for hosts whose allocations never reach pullprof's malloc wrappers (a
 * statically linked or prefixed jemalloc or tcmalloc): the allocator's
 * text dump parsed into rows (jemalloc's heap_v2 format, gperftools' heap
 * profile format), and the /heap and /allocs model made from them — the
 * allocator's own frames trimmed, values unsampled per stack as jeprof and
 * pprof do.
 * Context: agent.
 */
#ifndef PP_HEAP_FOREIGN_H
#define PP_HEAP_FOREIGN_H

#include <stddef.h>
#include <stdint.h>

#include "profile/model.h"

struct pp_foreign_row {
	uint64_t inuse_objs, inuse_bytes; /* sampled: not unsampled yet */
	uint64_t alloc_objs, alloc_bytes; /* cumulative, when kept */
	uint32_t depth;
	uint32_t first; /* the row's PCs: pcs[first .. first + depth) */
};

struct pp_foreign_dump {
	/* Mean bytes between two samples; 0: every allocation was recorded
	 * (gperftools' full heap profiler), nothing to unsample. */
	uint64_t period;
	int has_alloc; /* alloc_* are the allocator's (jemalloc: only with
	                  opt.prof_accum; gperftools: always) */
	struct pp_foreign_row *rows;
	size_t n;
	uintptr_t *pcs; /* return addresses, leaf first, the allocator's own
	                   frames included */
	size_t npcs;
};

/* Parse a dump: 0, or -EINVAL with a sentence saying what and where
 * (-ENOMEM). out is freed with pp_foreign_dump_free either way. */
int pp_foreign_parse_jemalloc(const char *text, size_t len,
                              struct pp_foreign_dump *out, char *err,
                              size_t errlen);
int pp_foreign_parse_gperftools(const char *text, size_t len,
                                struct pp_foreign_dump *out, char *err,
                                size_t errlen);
void pp_foreign_dump_free(struct pp_foreign_dump *d);

/* The model of a dump: sample types alloc_objects, alloc_space,
 * inuse_objects, inuse_space (has_alloc), or inuse_objects, inuse_space;
 * each stack's values unsampled by the mean size of its blocks (no
 * "bytes" label: a stack's mean size moves, and a ?seconds delta must
 * match a stack with itself). The
 * allocator's own leaf frames are trimmed by name, and (allocator_lib:
 * an address in the allocator when it is a shared library, else 0) every
 * frame in that library's file: a stripped library's internals have no
 * name. note: the profile's
 * first comment. 0 or -ENOMEM. */
int pp_foreign_model(const struct pp_foreign_dump *d, const char *note,
                     size_t max_bytes, uintptr_t allocator_lib,
                     struct pp_profile **out);

/* Is name (a function's, as symbolized, demangled or not) one of an
 * allocator's entry points or internals, trimmed from the leaf end of a
 * dump's stacks? */
int pp_foreign_is_allocator_frame(const char *name);

#endif

/*
 * What the unwind-table registry's two sides share: the published code
 * ranges (written by registry.c, the agent's side; read by registry_read.c
 * in the signal handler and the heap sampler), the reader count and the
 * unload flags.
 * Context: signal.
 */
#ifndef PP_UNWIND_REGISTRY_INTERNAL_H
#define PP_UNWIND_REGISTRY_INTERNAL_H

#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "unwind/frames.h"

struct range {
	uintptr_t lo, hi;
	const struct pp_frame_table *frames; /* NULL: libunwind only */
};

/* r[0, n): code ranges, sorted; r[n, n + nread): the readable segments
 * of the same images (PT_LOAD with PF_R: .eh_frame, its header, code),
 * sorted, for libunwind's memory reads (read_checked). */
struct range_set {
	size_t n, nread;
	struct range r[];
};

/* The ranges handlers search; replaced whole, freed once no reader is in. */
extern _Atomic(struct range_set *) pp_registry_published;
/* Handlers and samplers inside a search (pp_registry_enter/leave). */
extern atomic_int pp_registry_readers;
/* Set by our dlclose wrapper before an image goes away, cleared once the
 * registry caught up: meanwhile the handler trusts no table. */
extern atomic_int pp_registry_unloads;
/* Set for good by the first dlclose (registry_read.c says why). */
extern atomic_int pp_registry_ever_unloaded;

/* libunwind's own memory reader, and ours that replaces it. */
extern int (*pp_registry_libunwind_read)(unw_addr_space_t, unw_word_t,
                                         unw_word_t *, int, void *);
int pp_registry_read_checked(unw_addr_space_t as, unw_word_t addr,
                             unw_word_t *val, int write, void *arg);

#endif

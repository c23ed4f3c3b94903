/*
 * Images unloaded since (dlclose), kept so that a sample taken while one
 * was mapped is named from it rather than from whatever the loader put at
 * its addresses later, or from nothing ([[unmapped]]).
 *
 * Every dlclose bumps the generation of the loaded images before the real
 * one runs (pp_unloaded_before); each CPU sample carries the generation it
 * was taken in. Once the dlclose returned (pp_unloaded_after), the images
 * it took away are recorded with that generation: their executable
 * segments, file, bias and build ID. A PC taken in an earlier generation
 * that lies in such an image is moved to the image's ghost range, a range
 * of addresses of its own above any user address (PP_GHOST_BASE), where
 * the symbolizer reports the same file again (symtab.c) and the profile
 * shows a mapping with its file name and build ID.
 *
 * The generation is generation.h's (the SIGPROF handler reads it);
 * pp_unloaded_before and _after run in the host's thread that calls
 * dlclose (never waiting for the agent: one short lock, which the agent
 * holds only to copy a few numbers); the rest is the agent's.
 * Context: host.
 */
#ifndef PP_SYMBOLS_UNLOADED_H
#define PP_SYMBOLS_UNLOADED_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "symbols.h"

/* Ghost ranges: image k (from 0) is shown at PP_GHOST_BASE + k *
 * PP_GHOST_SPAN plus its own virtual addresses. Above any user address on
 * x86_64 (47 bits) and arm64 (52 bits at most). */
#define PP_GHOST_BASE 0x4000000000000000ull
#define PP_GHOST_SPAN (1ull << 36)
/* Images recorded at most; past them unloads are counted, not kept (their
 * samples keep the addresses they had). */
#define PP_UNLOADED_MAX 4096u

#include "generation.h"

/* Host context, before the real dlclose: a new generation, and what is
 * loaded now (program headers, names, build IDs), to see what went. */
void pp_unloaded_before(void);
/* Host context, after it returned: record the images that went. */
void pp_unloaded_after(void);

/* How many images were recorded so far (grows only). */
uint64_t pp_unloaded_count(void);

/* Images recorded from index *seen on (each once): their real executable
 * range and the offset that moves a PC of it to its ghost range. At most
 * max; *seen advances past those returned. */
struct pp_unloaded_range {
	uintptr_t lo, hi; /* where its code was: [lo, hi) */
	uintptr_t delta;  /* ghost pc = pc + delta (mod 2^64) */
	uint32_t gen;     /* the generation its dlclose began */
	const char *path; /* its file (lives as long as the process) */
};
size_t pp_unloaded_take(uint64_t *seen, struct pp_unloaded_range *out,
                        size_t max);

/* Does any image recorded unload after generation gen? (A sample of that
 * generation may then need pp_unloaded_ghost.) Lock-free. */
int pp_unloaded_after_gen(uint32_t gen);

/* A PC taken in generation gen: moved to the ghost range of the first
 * image unloaded after gen that held it, or as it was. Locks. */
uintptr_t pp_unloaded_ghost(uint32_t gen, uintptr_t pc);

/* The ghost mappings of the images recorded (for the symbolizer): appended
 * to m (after its own, which stay as they were; their IDs follow m's),
 * each with its file, build ID, unloaded = 1, ghost_bias and the image's
 * whole span (ghost_lo, ghost_hi: what libdwfl is told), file_changed
 * when the file at its path is no longer the one loaded. Their strings live as
 * long as the process. 0 or -ENOMEM. */
int pp_unloaded_append_mappings(struct pp_mappings *m);

/* Unloads not recorded (past PP_UNLOADED_MAX, or out of memory). */
uint64_t pp_unloaded_missed(void);

/* In a forked child: the lock a parent thread may have held. */
void pp_unloaded_forget_in_child(void);

#endif

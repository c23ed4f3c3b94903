/*
 * The generation of the loaded images (symbols/unloaded.h): bumped before
 * every dlclose, read by the sampling signal's handler into each sample
 * (one relaxed load).
 * Context: signal.
 */
#ifndef PP_SYMBOLS_GENERATION_H
#define PP_SYMBOLS_GENERATION_H

#include <stdatomic.h>
#include <stdint.h>

extern _Atomic uint32_t pp_unloaded_gen;

static inline uint32_t pp_unloaded_generation(void)
{
	return atomic_load_explicit(&pp_unloaded_gen, memory_order_relaxed);
}

#endif

/* How the agent's side (heap.c) drives the sampler (sample.c).
 * Context: agent.
 */
#ifndef PP_HEAP_SAMPLE_H
#define PP_HEAP_SAMPLE_H

#include <stdint.h>

/* Start (rate > 0) or stop (0) sampling; threads pick it up within their
 * next RECHECK bytes (sampling off) or next sample. */
void pp_heap_sampling_set(uint64_t rate, unsigned max_depth);
/* Wait until no thread is capturing a stack (after setting rate 0). */
void pp_heap_sampling_quiesce(void);
void pp_heap_sampling_forget_in_child(void);

#endif

/*
 * What the sampling handler (handler.c) keeps per thread, and what the
 * sigaction family's interposers (src/shim/signals.c) read: defined in the
 * light object (shim.c), initial-exec, all zero in a new thread.
 * Context: signal.
 *
 * A handler that is left without returning (a fault inside it that a
 * host's handler siglongjmps from; host signals cannot interrupt it: its
 * sa_mask blocks them, disposition.c) would leave behind what it had taken:
 * the count of handlers inside, a ring slot claimed and never published
 * (the collector would wait at it for ever), a stack of the unwinding
 * pool, the registry's reader count, the thread's capture guard (its
 * dl_iterate_phdr would answer "no images" for good) and its heap
 * sampler's busy flag. The handler writes here what it took; the next
 * handler on the same thread finds in_handler still set (a handler of
 * ours cannot nest on its thread: both signals are in its mask) and gives
 * all of it back (pp_sampler_handler, repair). A thread that is never
 * sampled again leaves its ring slot to the collector (ring.h,
 * pp_ring_reclaim) and its count to the shutdown's bounded wait.
 */
#ifndef PP_CPU_HOT_H
#define PP_CPU_HOT_H

#include <stddef.h>

struct pp_cpu_tls {
	int in_handler; /* a handler of ours runs (or was left) here */
	int claimed;    /* with the ring slot at pos claimed */
	size_t pos;
	/* A stack of the unwinding pool taken (its index + 1; 0: none), the
	 * registry's readers this thread counts in, and what the handler
	 * found of them, of the guard and the busy flag when it began. */
	int stack, registry;
	int entry_stack, entry_registry, entry_guard, entry_busy;
	/* pullprof's own sigaction calls (disposition.c): not the host's. */
	int own_sigaction;
};
extern __thread struct pp_cpu_tls pp_cpu_tls
    __attribute__((tls_model("initial-exec")));

#endif

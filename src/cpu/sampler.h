/* What the SIGPROF handler (handler.c, hot context) shares with the agent
 * side of the CPU profiler (timers.c, collector.c, windows.c). */
#ifndef PP_SAMPLER_H
#define PP_SAMPLER_H

#include <signal.h>
#include <sys/types.h>
#include <stdatomic.h>
#include <stdint.h>

#include "cpu/cpu.h"
#include "cpu/ring.h"
#include "unwind/unwind.h"

struct pp_sampler_shared {
	atomic_int active; /* the handler records only while set */
	atomic_int inside; /* handlers running right now */
	enum pp_unwind_mode unwind;
	_Atomic uint32_t period_ns;
	struct pp_ring ring;
	_Atomic uint64_t samples, weighted;
	_Atomic uint64_t dropped_ring_full;
	_Atomic uint64_t unwind_truncated, unwind_unknown_code, unwind_failed;
	_Atomic uint64_t handler_calls, handler_ns_total, handler_ns_max;
	_Atomic uint64_t handler_buckets[PP_CPU_HANDLER_BUCKETS + 1];
};

extern struct pp_sampler_shared pp_sampler;

void pp_sampler_handler(int sig, siginfo_t *si, void *uc);

/* Hot context: the calling thread's kernel id, cached in TLS. */
pid_t pp_sampler_tid(void);
/* In a forked child, on the thread that forked: its id changed. */
void pp_sampler_forget_tid(void);

#endif

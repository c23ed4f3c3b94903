/* What the SIGPROF handler (handler.c) shares with the agent
 * side of the CPU profiler (timers.c, collector.c, producer.c).
 * Context: signal.
 */
#ifndef PP_SAMPLER_H
#define PP_SAMPLER_H

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "cpu/cpu.h"
#include "cpu/ring.h"
#include "unwind/unwind.h"

struct pp_sampler_shared {
	atomic_int active; /* the handler records only while set */
	atomic_int inside; /* handlers running right now */
	/* The signal the timers raise (SIGURG, or SIGPROF when the host
	 * handles SIGURG itself: disposition.c, choose_signal), and whether the
	 * process-wide ITIMER_PROF is ours (setitimer mode), the only case in
	 * which a kernel-sent SIGPROF is a sample. */
	atomic_int signo, setitimer;
	/* SIGPROF while the collector has taken it beside SIGURG for threads
	 * that block SIGURG only (timers.c, signal_for), else 0: what a
	 * thread starting with SIGURG blocked may use (thread_start). */
	atomic_int alt_signo;
	enum pp_unwind_mode unwind;
	_Atomic uint32_t period_ns;
	struct pp_ring ring;
	_Atomic uint64_t samples, weighted;
	_Atomic uint64_t dropped_ring_full;
	/* Handlers left without returning, found by the next one on their
	 * thread (shim/cpu_hot.h); records whose slot the collector took back
	 * before they were published (pp_ring_reclaim). */
	_Atomic uint64_t handlers_left, dropped_reclaimed;
	/* Signals that reached the handler but were not the agent's timers'
	 * (a host's kill(), its own ITIMER_PROF): never recorded. */
	_Atomic uint64_t foreign;
	/* Periods charged at thread exit (pp_sampler_record_exit). */
	_Atomic uint64_t exit_remainders;
	_Atomic uint64_t unwind_truncated, unwind_unknown_code, unwind_failed;
	_Atomic uint64_t handler_calls, handler_ns_total, handler_ns_max;
	_Atomic uint64_t handler_buckets[PP_CPU_HANDLER_BUCKETS + 1];
};

extern struct pp_sampler_shared pp_sampler;

void pp_sampler_handler(int sig, siginfo_t *si, void *uc);

/* Host context, a thread ending (thread_start.c): record the CPU it used
 * after its last timer tick, `weight` periods of period_ns, at the stack
 * pcs (leaf first). */
void pp_sampler_record_exit(const uintptr_t *pcs, unsigned n, uint32_t weight,
                            uint32_t period_ns);
/* Hot context: a per-thread timer of ours signalled the calling thread
 * (its own start timer or a scan's: thread_start.c counts what came). */
void pp_thread_start_delivered(uint32_t weight);
/* In a forked child, on the thread that forked. */
void pp_thread_start_forget_in_child(void);
/* Host context: the interposed pthread_create (src/shim/thread_create.c)
 * once the agent is loaded; from is its return address. */
int pp_thread_create(pthread_t *t, const pthread_attr_t *attr,
                     void *(*fn)(void *), void *arg, uintptr_t from);

/* Hot context: the calling thread's kernel id, cached in TLS. */
pid_t pp_sampler_tid(void);
/* In a forked child, on the thread that forked: its id changed. */
void pp_sampler_forget_tid(void);

#endif

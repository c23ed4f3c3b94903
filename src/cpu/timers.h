/*
 * Sampling itself: the SIGPROF disposition, one CPU-time timer per host
 * thread (found by scanning /proc/self/task), or one process-wide timer
 * where per-thread ones are refused, and the rate they tick at. Agent
 * context: everything here runs on the CPU collector thread, which owns
 * this state; others read only the published figures (pp_timers_published).
 */
#ifndef PP_TIMERS_H
#define PP_TIMERS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "unwind/unwind.h"

/* Install the handler and arm a timer on every host thread at hz. */
void pp_timers_start(unsigned hz, enum pp_unwind_mode unwind);
/* Re-arm every timer at a new rate. */
void pp_timers_change_rate(unsigned hz);
/* Delete every timer and put SIGPROF's disposition back. */
void pp_timers_stop(void);
/* Timers for threads started since, none for those gone (while sampling).
 * Returns how many threads it armed (none: threads start through
 * pthread_create and arm themselves, and the scan may wait longer). */
int pp_timers_scan(void);
/* The rate in force, 0 when not sampling (the collector's own view). */
unsigned pp_timers_hz(void);
/* The name of a host thread (its comm), "" when unknown. */
const char *pp_timers_thread_name(pid_t tid);

/* What the collector last published, for any thread. */
struct pp_timers_published {
	unsigned hz, threads;
	int setitimer; /* one process-wide timer instead of per-thread ones */
};
void pp_timers_published(struct pp_timers_published *out);

/* Host context, on a thread that starts (thread_start.c): while windows
 * sample per thread, create and arm this thread's timer and hand it to the
 * collector. pp_timers_want_starts: is that wanted now (a hint)? */
struct pp_timers_start {
	unsigned generation; /* pp_timers_generation() when armed */
	unsigned
	    session; /* the sampling session (to pp_timers_thread_exited) */
	uint32_t period_ns;
	uint64_t cpu0_ns;  /* the thread's CPU clock when armed */
	uint64_t first_ns; /* its first expiry, after cpu0_ns */
};
int pp_timers_thread_started(struct pp_timers_start *out);
int pp_timers_want_starts(void);
/* Host context, a thread that armed its timer at its start is ending: the
 * collector may delete the timer now. */
void pp_timers_thread_exited(unsigned session);
/* Changes whenever armed timers change (their rate, or they are gone). */
unsigned pp_timers_generation(void);
/* The sigev_value of a timer a starting thread armed (the handler counts
 * what it delivered, for the thread's exit: thread_start.c). */
#define PP_START_TIMER_MARK 0x70707031
/* Collector: take the timers handed over into the table. */
void pp_timers_adopt(void);
/* Threads armed at their start, and those left to the scan (queue full). */
void pp_timers_start_stats(uint64_t *armed, uint64_t *unarmed);

/* Free the thread table (sampling stopped). */
void pp_timers_free(void);
/* In a forked child (async-signal-safe): the parent's timers are not the
 * child's; put SIGPROF back if sampling ran, forget every thread. */
void pp_timers_forget_in_child(void);

#endif

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
#include <sys/types.h>

#include "unwind/unwind.h"

/* Install the handler and arm a timer on every host thread at hz. */
void pp_timers_start(unsigned hz, enum pp_unwind_mode unwind);
/* Re-arm every timer at a new rate. */
void pp_timers_change_rate(unsigned hz);
/* Delete every timer and put SIGPROF's disposition back. */
void pp_timers_stop(void);
/* Timers for threads started since, none for those gone (while sampling). */
void pp_timers_scan(void);
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

/* Free the thread table (sampling stopped). */
void pp_timers_free(void);
/* In a forked child (async-signal-safe): the parent's timers are not the
 * child's; put SIGPROF back if sampling ran, forget every thread. */
void pp_timers_forget_in_child(void);

#endif

/*
 * Sampling itself: the signal's disposition (disposition.c), one CPU-time
 * timer per host thread (found by scanning /proc/self/task), or one
 * process-wide timer where per-thread ones are refused, and the rate they
 * tick at (timers.c). Everything here runs on the CPU collector thread,
 * which owns this state; others read only the published figures
 * (pp_timers_published). What threads starting meanwhile do is
 * handover.h's (host context).
 * Context: agent.
 */
#ifndef PP_TIMERS_H
#define PP_TIMERS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "unwind/unwind.h"

/* The signal sampling would use now: SIGURG when the host has no handler
 * of its own for it, else SIGPROF when the host neither handles it nor has
 * armed ITIMER_PROF; else -EEXIST with err saying why (any thread). */
int pp_timers_choose_signal(char *err, size_t errlen);
/* Install the handler and arm a timer on every host thread at hz. 0, or
 * -EEXIST with err set when the host uses the signals (nothing changed). */
int pp_timers_start(unsigned hz, enum pp_unwind_mode unwind, char *err,
                    size_t errlen);
/* The host is taking sig (src/shim/signals.c): pp_timers_start does not
 * choose it before until_ns (CLOCK_MONOTONIC), but the other signal when
 * that is free, else fails with -EBUSY. */
void pp_timers_avoid(int sig, uint64_t until_ns);
/* Re-arm every timer at a new rate. */
void pp_timers_change_rate(unsigned hz);
/* Delete every timer and put the signal's disposition back exactly as the
 * host had it. */
void pp_timers_stop(void);
/* While sampling: is the signal still ours? 0, or 1 with why set when the
 * host took it (replaced the handler, or armed ITIMER_PROF while SIGPROF
 * is the signal). */
int pp_timers_check(char *why, size_t len);
/* Stop sampling because the host took the signal: delete every timer and
 * leave the host's new disposition in place. */
void pp_timers_abandon(void);
/* The signal in use, 0 when not sampling (any thread). */
int pp_timers_signal(void);
/* Threads that block the signal are not armed (what they do not receive,
 * a host's signalfd or sigwait would read): the CPU time they used while
 * sampling, in ns, so far (measured now), and how many there are. */
uint64_t pp_timers_blocked_measure(unsigned *nthreads);
/* The collector drained a sample of this thread (to notice a thread that
 * blocks the signal after its timer was armed). */
void pp_timers_count_sample(pid_t tid);
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
	int signo;     /* the signal sampled with, 0 when off */
	unsigned blocked; /* threads not armed: they block the signal */
	/* Threads whose timer raises SIGPROF: they block SIGURG only. */
	unsigned threads_sigprof;
	int mixed; /* SIGURG, and SIGPROF for those (handler on both) */
	/* What the threads not sampled block ("both SIGURG and SIGPROF"),
	 * NULL when none was seen (a static string). */
	const char *blocked_what;
};
void pp_timers_published(struct pp_timers_published *out);

/* The sigev_value of a timer a starting thread armed (the handler counts
 * what it delivered, for the thread's exit: thread_start.c). */
#define PP_START_TIMER_MARK 0x70707031
/* ... and of the timers the collector armed: a signal without either mark
 * is not the agent's and is never recorded (handler.c). */
#define PP_TIMER_MARK 0x70707030
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

/*
 * The queue between threads that start while windows sample per thread and
 * the collector (handover.c): a starting thread creates and arms its own
 * CPU-time timer and hands it over, an ending one says so; the collector
 * (timers.c) takes them into its table. Many producers on the host's
 * threads, one consumer; lock-free on both sides.
 * Context: host.
 */
#ifndef PP_HANDOVER_H
#define PP_HANDOVER_H

#include <stdint.h>
#include <sys/types.h>
#include <time.h>

/* On a thread that starts (thread_start.c): while windows sample per
 * thread, create and arm this thread's timer and hand it to the
 * collector. pp_timers_want_starts: is that wanted now (a hint)? */
struct pp_timers_start {
	unsigned generation; /* pp_timers_generation() when armed */
	unsigned
	    session; /* the sampling session (to pp_timers_thread_exited) */
	uint32_t period_ns;
	int signo;         /* the signal its timer raises */
	uint64_t cpu0_ns;  /* the thread's CPU clock when armed */
	uint64_t first_ns; /* its first expiry, after cpu0_ns */
};
int pp_timers_thread_started(struct pp_timers_start *out);
int pp_timers_want_starts(void);
/* A thread that armed its timer at its start is ending: the
 * collector may delete the timer now. */
void pp_timers_thread_exited(unsigned session);
/* Changes whenever armed timers change (their rate, or they are gone). */
unsigned pp_timers_generation(void);

/* ---- the collector's side (timers.c) ---- */

/* What a slot held. */
struct pp_timers_handed {
	int exit;    /* the thread ends (its timer may go), else it started */
	int current; /* handed over in the sampling session now in force */
	pid_t tid;
	timer_t timer;
	uint32_t period_ns;
	int signo;
};
/* Is anything waiting to be taken? */
int pp_timers_handed_pending(void);
/* The next slot handed over, starts before ends (*cursor starts at 0): 1
 * with *out filled and the slot free again, 0 when none is left. */
int pp_timers_take_handed(unsigned *cursor, struct pp_timers_handed *out);
/* Do starting threads arm their own timers (sampling per thread)? */
void pp_timers_set_want_starts(int on);
/* Armed timers changed (the rate, or they are gone). */
void pp_timers_new_generation(void);
/* Threads between their check of want_starts and their hand-over. */
int pp_timers_arming(void);
/* Is this thread arming its own timer now (it will hand it over)? 1 also
 * when that cannot be told (more threads arming at once than are kept). */
int pp_timers_is_arming(pid_t tid);
/* Sampling stopped: what was handed over before means nothing now. */
void pp_timers_new_session(void);
/* In a forked child: the parent's queue is not the child's. */
void pp_timers_handover_forget_in_child(void);

#endif

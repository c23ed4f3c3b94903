/*
 * The queue through which a thread that starts while windows sample per
 * thread hands its own CPU-time timer to the collector, and says when it
 * ends (handover.h). Apart from timers.c because its producers run on the
 * host's threads inside the interposed pthread_create (thread_start.c):
 * lock-free slots, no allocation, never waiting for the collector. The
 * collector's side (pp_timers_take_handed and the switches below) is
 * lock-free too.
 * Context: host.
 */
#include "cpu/handover.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "cpu/sampler.h"
#include "cpu/timers.h"
#include "util/clock.h"

/* ---- threads started while sampling (thread_start.c) -------------------
 *
 * A starting thread creates its own timer (it cannot wait for the next
 * scan) and hands it over here through a fixed array of slots, a
 * multi-producer queue with one consumer, the collector (timers.c,
 * adopt()). `arming` counts threads between their check of want_starts and
 * their hand-over: pp_timers_stop clears want_starts, waits for it to reach
 * 0 and then deletes whatever was handed over, so no timer outlives the
 * sampling. */
#define ADOPT_SLOTS 1024

enum { SLOT_FREE, SLOT_FILLING, SLOT_FULL };

/* A slot holds a thread's timer (START) or says that a thread which armed
 * one is ending (EXIT: its timer can go at once, no scan needed). */
enum { SLOT_START, SLOT_EXIT };

static struct adopt_slot {
	atomic_int state;
	int kind;
	unsigned session; /* sampling_session when handed over */
	pid_t tid;
	timer_t timer;
	uint32_t period_ns;
	int signo;
} adopt_slots[ADOPT_SLOTS];
/* Set at the first hand-over: until then the slots' pages were never
 * touched, and a forked child need not read them in (fault them in) to
 * find every one free. */
static atomic_int adopt_used;
static atomic_int adopt_pending, arming, want_starts;
static _Atomic uint64_t starts_armed, starts_unarmed;

int pp_timers_want_starts(void)
{
	return atomic_load_explicit(&want_starts, memory_order_relaxed);
}

/* Bumped when sampling stops: what a thread hands over in one session
 * means nothing in the next (its timer is gone, its tid may be another
 * thread's). */
static atomic_uint sampling_session;

static int hand_over(int kind, unsigned session, pid_t tid, timer_t timer,
                     uint32_t period_ns, int signo)
{
	unsigned first = (unsigned)tid % ADOPT_SLOTS;
	for (unsigned k = 0; k < ADOPT_SLOTS; k++) {
		struct adopt_slot *s = &adopt_slots[(first + k) % ADOPT_SLOTS];
		int free_ = SLOT_FREE;
		if (!atomic_compare_exchange_strong(&s->state, &free_,
		                                    SLOT_FILLING))
			continue;
		s->kind = kind;
		s->session = session;
		s->tid = tid;
		s->timer = timer;
		s->period_ns = period_ns;
		s->signo = signo;
		if (!atomic_load_explicit(&adopt_used, memory_order_relaxed))
			atomic_store_explicit(&adopt_used, 1,
			                      memory_order_relaxed);
		atomic_store_explicit(&s->state, SLOT_FULL,
		                      memory_order_release);
		atomic_fetch_add(&adopt_pending, 1);
		return 1;
	}
	return 0;
}

/* Bumped whenever armed timers change (rate, stop): a thread's record of
 * how its timer was armed is good only while this has not moved. */
static atomic_uint arm_generation;

unsigned pp_timers_generation(void)
{
	return atomic_load_explicit(&arm_generation, memory_order_acquire);
}

/*
 * The threads arming their own timer now, by tid: a scan that met one of
 * them between its timer_create and its hand-over armed a second timer
 * for it, and until the next adopt() deleted one (up to 100 ms when only
 * the record samples, longer on a loaded machine) the thread was sampled
 * twice (test_record saw it under load). A scan leaves these threads to
 * their own timer. A thread that finds no free entry counts in
 * `untracked`, and scans then leave every new thread for a moment.
 */
#define ARMING_TIDS 64
static atomic_int arming_tids[ARMING_TIDS];
static atomic_int untracked;

static int arming_enter(pid_t tid)
{
	unsigned first = (unsigned)tid % ARMING_TIDS;
	for (unsigned k = 0; k < ARMING_TIDS; k++) {
		int none = 0;
		if (atomic_compare_exchange_strong(
		        &arming_tids[(first + k) % ARMING_TIDS], &none, tid))
			return (int)((first + k) % ARMING_TIDS);
	}
	atomic_fetch_add(&untracked, 1);
	return -1;
}

static void arming_leave(int slot)
{
	if (slot >= 0)
		atomic_store(&arming_tids[slot], 0);
	else
		atomic_fetch_sub(&untracked, 1);
}

int pp_timers_is_arming(pid_t tid)
{
	if (atomic_load(&untracked) > 0)
		return 1;
	for (unsigned k = 0; k < ARMING_TIDS; k++)
		if (atomic_load_explicit(&arming_tids[k],
		                         memory_order_relaxed) == tid)
			return 1;
	return 0;
}

int pp_timers_thread_started(struct pp_timers_start *out)
{
	int armed = 0;
	/* Said before anything else: a scan that looks for this thread from
	 * now on leaves it to its own timer. */
	int slot = arming_enter(pp_sampler_tid());
	atomic_fetch_add(&arming, 1);
	int signo = atomic_load(&pp_sampler.signo);
	sigset_t mask;
	/* A thread that starts with the signal blocked (its creator blocked
	 * it) raises SIGPROF instead when the collector took SIGPROF for
	 * such threads already (signal_for; alt_signo) and it does not block
	 * that; else it is left to the scan, which takes SIGPROF if free or
	 * measures its CPU instead. */
	if (signo && pthread_sigmask(SIG_BLOCK, NULL, &mask) == 0 &&
	    sigismember(&mask, signo)) {
		int alt = atomic_load(&pp_sampler.alt_signo);
		signo = alt && !sigismember(&mask, alt) ? alt : 0;
	}
	if (atomic_load(&want_starts) && signo) {
		uint32_t period = atomic_load(&pp_sampler.period_ns);
		pid_t tid = pp_sampler_tid();
		struct sigevent sev;
		timer_t timer;
		memset(&sev, 0, sizeof sev);
		sev.sigev_notify = SIGEV_THREAD_ID;
		sev.sigev_signo = signo;
		out->signo = signo;
		sev.sigev_value.sival_int = PP_START_TIMER_MARK;
		sev._sigev_un._tid = tid;
		out->generation = pp_timers_generation();
		out->session = atomic_load(&sampling_session);
		out->period_ns = period;
		if (period &&
		    timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, &timer) == 0) {
			/* A random first expiry in (0, period]: a thread
			 * using less CPU than a period is still sampled,
			 * with the probability its CPU time deserves. */
			uint64_t r = pp_clock_ns(CLOCK_MONOTONIC) ^
			             ((uint64_t)tid << 32) ^ (uintptr_t)&sev;
			r ^= r >> 33;
			r *= 0xff51afd7ed558ccdULL;
			r ^= r >> 33;
			uint64_t first = 1 + r % period;
			struct itimerspec its = {
			    .it_interval = {0, (long)period},
			    .it_value = {0, (long)first},
			};
			out->cpu0_ns = pp_clock_ns(CLOCK_THREAD_CPUTIME_ID);
			out->first_ns = first;
			timer_settime(timer, 0, &its, NULL);
			if (hand_over(SLOT_START, out->session, tid, timer,
			              period, signo)) {
				armed = 1;
				atomic_fetch_add_explicit(&starts_armed, 1,
				                          memory_order_relaxed);
			} else {
				/* Every slot taken: the next scan arms it. */
				timer_delete(timer);
				atomic_fetch_add_explicit(&starts_unarmed, 1,
				                          memory_order_relaxed);
			}
		}
	}
	atomic_fetch_sub(&arming, 1);
	arming_leave(slot);
	return armed;
}

void pp_timers_thread_exited(unsigned session)
{
	timer_t none;
	memset(&none, 0, sizeof none);
	/* Its timer went with the session; no room: the next scan finds the
	 * thread gone. */
	if (session == atomic_load(&sampling_session))
		hand_over(SLOT_EXIT, session, pp_sampler_tid(), none, 0, 0);
}

/* Collector: the slots in order, starts in a first pass and ends in a
 * second (a start and the same thread's end may both be waiting). */
int pp_timers_take_handed(unsigned *cursor, struct pp_timers_handed *out)
{
	for (; *cursor < 2 * ADOPT_SLOTS; ++*cursor) {
		unsigned i = *cursor;
		struct adopt_slot *s = &adopt_slots[i % ADOPT_SLOTS];
		int kind = i < ADOPT_SLOTS ? SLOT_START : SLOT_EXIT;
		if (atomic_load_explicit(&s->state, memory_order_acquire) !=
		        SLOT_FULL ||
		    s->kind != kind)
			continue;
		out->exit = kind == SLOT_EXIT;
		out->tid = s->tid;
		out->current = s->session == atomic_load(&sampling_session);
		out->timer = s->timer;
		out->period_ns = s->period_ns;
		out->signo = s->signo;
		atomic_store_explicit(&s->state, SLOT_FREE,
		                      memory_order_release);
		atomic_fetch_sub(&adopt_pending, 1);
		++*cursor;
		return 1;
	}
	return 0;
}

int pp_timers_handed_pending(void)
{
	return atomic_load(&adopt_pending);
}

void pp_timers_set_want_starts(int on)
{
	atomic_store(&want_starts, on);
}

void pp_timers_new_generation(void)
{
	atomic_fetch_add(&arm_generation, 1);
}

int pp_timers_arming(void)
{
	return atomic_load(&arming);
}

void pp_timers_new_session(void)
{
	atomic_fetch_add(&sampling_session, 1);
}

void pp_timers_start_stats(uint64_t *armed, uint64_t *unarmed)
{
	*armed = atomic_load_explicit(&starts_armed, memory_order_relaxed);
	*unarmed = atomic_load_explicit(&starts_unarmed, memory_order_relaxed);
}

void pp_timers_handover_forget_in_child(void)
{
	atomic_store(&want_starts, 0);
	atomic_fetch_add(&sampling_session, 1);
	atomic_fetch_add(&arm_generation, 1);
	atomic_store(&arming, 0);
	atomic_store(&adopt_pending, 0);
	/* The parent's threads arming then are not the child's (256 bytes
	 * read, written only where not 0). */
	atomic_store(&untracked, 0);
	for (unsigned i = 0; i < ARMING_TIDS; i++)
		if (atomic_load_explicit(&arming_tids[i], memory_order_relaxed))
			atomic_store(&arming_tids[i], 0);
	/* Only the slots in use are written: storing into every one copied
	 * (or, never touched, allocated) the array's 8 pages in each child;
	 * none is read before the first hand-over. */
	if (atomic_load(&adopt_used))
		for (unsigned i = 0; i < ADOPT_SLOTS; i++)
			if (atomic_load_explicit(&adopt_slots[i].state,
			                         memory_order_relaxed) !=
			    SLOT_FREE)
				atomic_store(&adopt_slots[i].state, SLOT_FREE);
}

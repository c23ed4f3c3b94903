/*
 * What the interposed lock calls (interpose.c) share with the contention
 * recorder (record.c). HOST CONTEXT: all of it runs inside the
 * application's own locking, on any thread, holding any of its locks: no
 * malloc, no lock of the profiler's that a waiter could hold for long, no
 * stdio; errno preserved.
 */
#ifndef PP_LOCKS_HOT_H
#define PP_LOCKS_HOT_H

#include <stdatomic.h>
#include <stdint.h>

/* What the wrappers read on their fast paths. `on` is set while the agent
 * runs with either profile on; `waiting` counts the waits registered for
 * the mutex profile right now (an unlock looks further only when some
 * thread of the process waits for a lock). */
struct pp_lk_state {
	_Atomic int on;
	_Atomic unsigned mutex_rate; /* 1 in N contended unlocks; 0: off */
	_Atomic unsigned block_rate; /* ns blocked per sampled event; 0: off */
	_Atomic uint64_t waiting;
};
extern struct pp_lk_state pp_lk;

static inline int pp_lk_on(void)
{
	return atomic_load_explicit(&pp_lk.on, memory_order_relaxed);
}

static inline int pp_lk_anyone_waiting(void)
{
	return atomic_load_explicit(&pp_lk.waiting, memory_order_relaxed) != 0;
}

/* What was waited on: the leaf frame a sample gets (the call itself). */
enum pp_lk_call {
	PP_LK_MUTEX_LOCK,
	PP_LK_MUTEX_TIMEDLOCK,
	PP_LK_MUTEX_CLOCKLOCK,
	PP_LK_MUTEX_UNLOCK,
	PP_LK_RWLOCK_RDLOCK,
	PP_LK_RWLOCK_WRLOCK,
	PP_LK_RWLOCK_TIMEDRDLOCK,
	PP_LK_RWLOCK_TIMEDWRLOCK,
	PP_LK_RWLOCK_CLOCKRDLOCK,
	PP_LK_RWLOCK_CLOCKWRLOCK,
	PP_LK_RWLOCK_UNLOCK,
	PP_LK_COND_WAIT,
	PP_LK_COND_TIMEDWAIT,
	PP_LK_COND_CLOCKWAIT,
	PP_LK_SEM_WAIT,
	PP_LK_SEM_TIMEDWAIT,
	PP_LK_SEM_CLOCKWAIT,
	PP_LK_JOIN,
	PP_LK_TIMEDJOIN,
	PP_LK_CLOCKJOIN,
	PP_LK_NCALLS
};
/* The address of our wrapper of each call (interpose.c): the leaf pc of
 * its samples, symbolized as the call's name. */
extern const uintptr_t pp_lk_call_pc[PP_LK_NCALLS];

/* One wait, from its start to its end, on the waiting thread's stack. */
struct pp_lk_wait {
	const void *addr; /* the lock */
	uint64_t t0;      /* CLOCK_MONOTONIC at its start */
	void *slot;       /* the contention slot it is counted in, or NULL */
};

/* A wait begins (the try failed, or the call always waits). owned: the lock
 * has an owner whose unlock the mutex profile charges (mutexes, rwlocks).
 * 0: pass straight through (the agent's own thread, or already inside the
 * profiler: a lock the profiler's own code takes). */
int pp_lk_wait_begin(struct pp_lk_wait *w, const void *addr, int owned);
/* It ended (whatever the call returned: a timed-out wait was blocked
 * too): the block profile may record it. from: the wrapper's return
 * address. */
void pp_lk_wait_end(struct pp_lk_wait *w, enum pp_lk_call call, uintptr_t from);

/* An unlock, before the real one: the waiting the lock's waiters did since
 * it was last charged, in ns (0: none, or not profiled). After the real
 * unlock succeeded, pp_lk_released records it for the mutex profile. */
uint64_t pp_lk_release(const void *addr);
void pp_lk_released(uint64_t delay_ns, enum pp_lk_call call, uintptr_t from);

#endif

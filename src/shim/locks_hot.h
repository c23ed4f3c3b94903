/*
 * What the interposed lock calls (locks.c) share with the contention
 * recorder (record.c). All of it runs inside the
 * application's own locking, on any thread, holding any of its locks: no
 * malloc, no lock of the profiler's that a waiter could hold for long, no
 * stdio; errno preserved.
 * Context: host.
 */
#ifndef PP_LOCKS_HOT_H
#define PP_LOCKS_HOT_H

#include <stdatomic.h>
#include <stdint.h>

/* What the wrappers read on their fast paths. `on` is set while the agent
 * runs with either profile on; `waiting` counts the waits registered for
 * the mutex profile right now (an unlock looks further only when some
 * thread of the process waits for a lock). */
struct pp_locks_state {
	_Atomic int on;
	_Atomic unsigned mutex_rate; /* 1 in N contended unlocks; 0: off */
	_Atomic unsigned block_rate; /* ns blocked per sampled event; 0: off */
	_Atomic uint64_t waiting;
};
extern struct pp_locks_state pp_locks;

static inline int pp_locks_on(void)
{
	return atomic_load_explicit(&pp_locks.on, memory_order_relaxed);
}

static inline int pp_locks_anyone_waiting(void)
{
	return atomic_load_explicit(&pp_locks.waiting, memory_order_relaxed) !=
	       0;
}

/* A sample's leaf frame is the call that waited or unlocked: an address
 * inside our wrapper of it, taken there (PP_LOCKS_SELF). Its address as the
 * program resolves the name would be a sanitizer's interceptor of the same
 * name when one is loaded. +1: a frame is looked up at pc - 1, as a return
 * address is. */
#define PP_LOCKS_SELF()                                                        \
	__extension__({                                                        \
		__label__ here_;                                               \
	here_:;                                                                \
		(uintptr_t) && here_ + 1;                                      \
	})

/* One wait, from its start to its end, on the waiting thread's stack. */
struct pp_locks_wait {
	const void *addr; /* the lock */
	uint64_t t0;      /* CLOCK_MONOTONIC at its start */
	void *slot;       /* the contention slot it is counted in, or NULL */
};

/* A wait begins (the try failed, or the call always waits). owned: the lock
 * has an owner whose unlock the mutex profile charges (mutexes, rwlocks).
 * 0: pass straight through (the agent's own thread, or already inside the
 * profiler: a lock the profiler's own code takes). */
int pp_locks_wait_begin(struct pp_locks_wait *w, const void *addr, int owned);
/* It ended (whatever the call returned: a timed-out wait was blocked
 * too): the block profile may record it. from: the wrapper's return
 * address; self: PP_LOCKS_SELF() in the wrapper. */
void pp_locks_wait_end(struct pp_locks_wait *w, uintptr_t self, uintptr_t from);

/* An unlock, before the real one: the waiting the lock's waiters did since
 * it was last charged, in ns (0: none, or not profiled). After the real
 * unlock succeeded, pp_locks_released records it for the mutex profile. */
uint64_t pp_locks_release(const void *addr);
void pp_locks_released(uint64_t delay_ns, uintptr_t self, uintptr_t from);

#endif

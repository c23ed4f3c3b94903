/*
 * Lock contention, as the waiting and unlocking threads see it. Every
 * function here but the agent hooks at the end runs inside
 * the application's lock calls, on the thread that waits or unlocks, with
 * any of its locks held. No malloc (the host's allocator may lock the very
 * mutex being recorded), no stdio, no lock that can be held for long: the
 * only lock is a slot's spin flag, held for a few loads and stores. errno
 * is preserved.
 *
 * The block profile (where threads waited) is simple: a wait is timed on
 * the waiting thread, sampled as Go samples blocking events (every wait of
 * at least PULLPROF_BLOCK_RATE ns, a shorter one with probability
 * delay / rate), and its stack captured when it ends.
 *
 * The mutex profile (where waiting was caused) charges the thread that
 * unlocks a lock others wait for, as Go does at unlock, with the time they
 * waited since the lock was last charged. A lock's waiters are counted in a
 * contention slot, keyed by the lock's address (4096 slots; a lock whose
 * slot another contended lock holds is counted as a collision and not
 * charged). A slot keeps how many wait and the sum of the moments from
 * which each has not yet been charged, so an unlock charges
 * nwait * now - sum and moves every waiter's mark to now. The time a woken
 * waiter takes to get a CPU after the unlock is not charged to anyone in
 * the mutex profile (Go's is the same); the block profile has it.
 * Context: host.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "agent_threads.h"
#include "arch/arch.h"
#include "labels/labels.h"
#include "locks/locks.h"
#include "process.h"
#include "shim/heap_hot.h"
#include "shim/locks_hot.h"
#include "unwind/unwind.h"

/* ---- per-thread state ---------------------------------------------------- */

static __thread struct {
	int busy;     /* inside the profiler: nested lock calls pass through */
	uint64_t rng; /* xorshift state; 0: not seeded yet */
} tls __attribute__((tls_model("initial-exec")));

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t rnd(void)
{
	uint64_t x = tls.rng;
	if (!x)
		x = now_ns() ^ ((uintptr_t)&tls * 0x9e3779b97f4a7c15ull) ^ 1;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	tls.rng = x;
	return x;
}

/* ---- contention slots ---------------------------------------------------- */

#define SLOTS 4096u

struct slot {
	_Atomic uintptr_t addr; /* the lock counted here; 0: none yet */
	_Atomic uint32_t nwait; /* threads waiting for it now */
	_Atomic int flag;       /* the spin lock over sum and last */
	uint64_t sum;  /* each waiter's not-yet-charged-from moment, summed
	                * (mod 2^64: only differences are used) */
	uint64_t last; /* when an unlock last charged its waiters */
};

static struct slot slots[SLOTS];
static _Atomic uint64_t collisions;
/* Was any slot ever written? A fork child of a process that never counted
 * a wait leaves the table's pages alone. */
static _Atomic int slots_used;

static struct slot *slot_of(const void *addr)
{
	uint64_t h = ((uintptr_t)addr >> 3) * 0x9e3779b97f4a7c15ull;
	return &slots[h >> 52]; /* 12 bits */
}

static void slot_lock(struct slot *s)
{
	for (unsigned spins = 0;; spins++) {
		if (!atomic_exchange_explicit(&s->flag, 1,
		                              memory_order_acquire))
			return;
		while (atomic_load_explicit(&s->flag, memory_order_relaxed)) {
			if (spins++ > 100)
				sched_yield(); /* the holder was preempted */
			else
				pp_arch_spin_pause();
		}
	}
}

static void slot_unlock(struct slot *s)
{
	atomic_store_explicit(&s->flag, 0, memory_order_release);
}

/* ---- recording ------------------------------------------------------------
 */

/* The event's stack: the call's own frame (our wrapper), then its caller
 * and outwards. Captured before a ring slot is claimed: a claimed slot holds
 * the reader up until it is published. */
static void record(enum pp_locks_kind kind, uintptr_t self, uintptr_t from,
                   uint64_t delay, uint64_t rate)
{
	uintptr_t pcs[PP_LOCKS_MAX_DEPTH + PP_UNWIND_SKIP_ROOM];
	/* A child made without fork(): the unwinder's and the table's locks
	 * may be held for good there. */
	if (pp_process_foreign())
		return;
	unsigned max =
	    atomic_load_explicit(&pp_locks_depth, memory_order_relaxed);
	if (max > PP_LOCKS_MAX_DEPTH)
		max = PP_LOCKS_MAX_DEPTH;
	if (max < 2)
		max = 2;
	pcs[0] = self;
	unsigned n = 1 + pp_unwind_capture_caller(from, pcs + 1, max - 1);
	int truncated = n >= max;
	char name[16] = {0};
	prctl(PR_GET_NAME, name, 0, 0, 0);
	pp_locks_put(kind, pcs, n, truncated, delay, rate, name,
	             pp_labels_current());
}

/* Lock calls made inside pullprof on a host thread pass through unrecorded:
 * the lock recorder's own (busy), and the heap sampler's or other pullprof
 * code's (pp_heap_tls.busy). The heap sampler unwinds with libunwind, which
 * takes a lock of its own: recording a wait for it would unwind again,
 * inside libunwind holding that lock, and the thread would wait for itself
 * (seen: test_cpu's hostile host under load, every thread stuck on
 * libunwind's lock). */
static inline int inside_pullprof(void)
{
	return tls.busy || pp_heap_tls.busy;
}

int pp_locks_wait_begin(struct pp_locks_wait *w, const void *addr, int owned)
{
	if (inside_pullprof() || pp_on_agent_thread())
		return 0;
	w->addr = addr;
	w->slot = NULL;
	w->t0 = now_ns();
	if (!owned ||
	    !atomic_load_explicit(&pp_locks.mutex_rate, memory_order_relaxed))
		return 1;
	struct slot *s = slot_of(addr);
	slot_lock(s);
	uintptr_t held = atomic_load_explicit(&s->addr, memory_order_relaxed);
	if (held != (uintptr_t)addr) {
		if (atomic_load_explicit(&s->nwait, memory_order_relaxed)) {
			slot_unlock(s);
			atomic_fetch_add_explicit(&collisions, 1,
			                          memory_order_relaxed);
			return 1;
		}
		/* Nobody waits for the lock it held: it is this one's now. */
		atomic_store_explicit(&s->addr, (uintptr_t)addr,
		                      memory_order_relaxed);
		s->sum = 0;
		s->last = 0;
	}
	atomic_store_explicit(
	    &s->nwait,
	    atomic_load_explicit(&s->nwait, memory_order_relaxed) + 1,
	    memory_order_relaxed);
	s->sum += w->t0;
	slot_unlock(s);
	if (!atomic_load_explicit(&slots_used, memory_order_relaxed))
		atomic_store_explicit(&slots_used, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&pp_locks.waiting, 1, memory_order_relaxed);
	w->slot = s;
	return 1;
}

void pp_locks_wait_end(struct pp_locks_wait *w, uintptr_t self, uintptr_t from)
{
	int saved = errno;
	uint64_t t1 = now_ns();
	struct slot *s = w->slot;
	if (s) {
		slot_lock(s);
		/* Where this waiter's mark is: its start, or the last charge
		 * after it. */
		s->sum -= s->last > w->t0 ? s->last : w->t0;
		atomic_store_explicit(
		    &s->nwait,
		    atomic_load_explicit(&s->nwait, memory_order_relaxed) - 1,
		    memory_order_relaxed);
		slot_unlock(s);
		atomic_fetch_sub_explicit(&pp_locks.waiting, 1,
		                          memory_order_relaxed);
	}
	uint64_t rate =
	    atomic_load_explicit(&pp_locks.block_rate, memory_order_relaxed);
	if (rate && pp_locks_on()) {
		uint64_t d = t1 > w->t0 ? t1 - w->t0 : 0;
		/* Go's blocking-event sampling: every wait of rate ns or more,
		 * a shorter one with probability d / rate (its values are
		 * scaled back when the profile is made). */
		if (d >= rate || rnd() % rate < d) {
			tls.busy = 1;
			int hidden = pp_heap_hide();
			record(PP_LOCKS_BLOCK, self, from, d, rate);
			pp_heap_unhide(hidden);
			tls.busy = 0;
		}
	}
	errno = saved;
}

uint64_t pp_locks_release(const void *addr)
{
	if (inside_pullprof())
		return 0;
	struct slot *s = slot_of(addr);
	if (atomic_load_explicit(&s->addr, memory_order_relaxed) !=
	        (uintptr_t)addr ||
	    !atomic_load_explicit(&s->nwait, memory_order_relaxed))
		return 0;
	uint64_t charge = 0;
	slot_lock(s);
	uint32_t n = atomic_load_explicit(&s->nwait, memory_order_relaxed);
	if (n && atomic_load_explicit(&s->addr, memory_order_relaxed) ==
	             (uintptr_t)addr) {
		uint64_t t = now_ns();
		charge = (uint64_t)n * t - s->sum;
		s->sum = (uint64_t)n * t;
		s->last = t;
	}
	slot_unlock(s);
	/* A waiter that registered a moment ago, with a clock read a moment
	 * before ours on another CPU, can make it wrap: nothing to charge. */
	return (int64_t)charge > 0 ? charge : 0;
}

void pp_locks_released(uint64_t delay_ns, uintptr_t self, uintptr_t from)
{
	if (inside_pullprof() || pp_on_agent_thread() || !pp_locks_on())
		return;
	unsigned rate =
	    atomic_load_explicit(&pp_locks.mutex_rate, memory_order_relaxed);
	if (!rate || (rate > 1 && rnd() % rate))
		return;
	int saved = errno;
	tls.busy = 1;
	int hidden = pp_heap_hide();
	record(PP_LOCKS_MUTEX, self, from, delay_ns, rate);
	pp_heap_unhide(hidden);
	tls.busy = 0;
	errno = saved;
}

/* ---- agent side ------------------------------------------------------------
 */

uint64_t pp_locks_collisions(void)
{
	return atomic_load_explicit(&collisions, memory_order_relaxed);
}

void pp_locks_slots_forget_in_child(void)
{
	/* Only the forking thread lives on: no wait is in progress, but a
	 * thread that is gone may have held a slot's flag or been counted.
	 * Only such slots are written (the others' pages stay shared). */
	if (atomic_load_explicit(&pp_locks.waiting, memory_order_relaxed))
		atomic_store_explicit(&pp_locks.waiting, 0,
		                      memory_order_relaxed);
	tls.busy = 0;
	if (!atomic_load_explicit(&slots_used, memory_order_relaxed))
		return;
	for (size_t i = 0; i < SLOTS; i++) {
		struct slot *s = &slots[i];
		if (atomic_load_explicit(&s->flag, memory_order_relaxed) ||
		    atomic_load_explicit(&s->nwait, memory_order_relaxed)) {
			atomic_store_explicit(&s->nwait, 0,
			                      memory_order_relaxed);
			s->sum = 0;
			s->last = 0;
			atomic_store_explicit(&s->flag, 0,
			                      memory_order_relaxed);
		}
	}
}

/*
 * The heap sampler's slow path. It runs in the allocating
 * thread, inside malloc. It never allocates (nested allocations of the
 * unwinder pass through, marked busy), keeps errno, and takes only the
 * table lock, never while calling out.
 *
 * Sampling is a Poisson process over allocated bytes: each thread counts
 * down a distance drawn from an exponential distribution of mean `rate`
 * bytes; the allocation that crosses zero is sampled, so an allocation of
 * s bytes is sampled with probability 1 - exp(-s / rate), whatever the
 * sizes around it.
 * Context: host.
 */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <time.h>

#include "bounds.h"
#include "fork/fork.h"
#include "heap/heap.h"
#include "heap/sample.h"
#include "heap/table.h"
#include "labels/labels.h"
#include "process.h"
#include "pullprof.h"
#include "shim/heap_hot.h"
#include "unwind/unwind.h"
#include "util/clock.h"

/* A thread with sampling off looks again after this many bytes, so it
 * joins in soon after sampling starts. */
#define RECHECK_BYTES (64 << 10)

static _Atomic uint64_t rate_now; /* 0: off */
static atomic_uint depth_now;
static atomic_int inside; /* captures in flight */

static uint64_t next_random(struct pp_heap_tls *t)
{
	if (!t->rng) {
		t->rng = ((uint64_t)(uintptr_t)t * 0x9e3779b97f4a7c15ull) ^
		         (pp_clock_ns(CLOCK_MONOTONIC) << 20);
		if (!t->rng)
			t->rng = 1;
	}
	/* xorshift64* */
	t->rng ^= t->rng >> 12;
	t->rng ^= t->rng << 25;
	t->rng ^= t->rng >> 27;
	return t->rng * 0x2545f4914f6cdd1dull;
}

/* Bytes to the next sample: exponential with mean rate (rate 1: every
 * allocation). */
static int64_t draw(struct pp_heap_tls *t, uint64_t rate)
{
	if (rate <= 1)
		return 0;
	/* u in [0, 1): -log(1 - u) is exponential with mean 1. */
	double u = (double)(next_random(t) >> 11) * 0x1p-53;
	return (int64_t)(-log1p(-u) * (double)rate);
}

/* 1 sample in TIME_EVERY measures its own cost. On the monotonic clock,
 * which the vDSO reads without a system call (as the CPU handler does):
 * the thread's CPU clock took two system calls, more than the capture
 * itself (a figure then includes any moment the scheduler took the core
 * away: rare in a microsecond, and visible in the max). */
#define TIME_EVERY 8

/*
 * Whether this memory is still the agent's process's, without a system call
 * per sample: one word on a page of its own, which the kernel gives every
 * copy of the address space (fork, _Fork, clone without CLONE_VM) as zeros
 * (MADV_WIPEONFORK). record() sets it once pp_process_foreign() (a getpid())
 * answered no, and asks again only while it reads zero: always in a copy
 * made without fork(), where the answer stays yes, once in a forked child.
 * A child sharing the memory (vfork) reads the parent's word, as it shares
 * the parent's heap: what it allocates there stays the parent's. NULL
 * (madvise refused: Linux before 4.14): every sample asks.
 */
static _Atomic(atomic_int *) own_word;

static void own_word_init(void)
{
	if (atomic_load(&own_word))
		return;
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return;
#ifdef MADV_WIPEONFORK
	if (madvise(p, 4096, MADV_WIPEONFORK) == 0) {
		/* Never unmapped: a capture may be reading it. */
		atomic_int *none = NULL;
		if (atomic_compare_exchange_strong(&own_word, &none, p))
			return;
	}
#endif
	munmap(p, 4096);
}

/* A child made without fork() records nothing: the table's lock and the
 * unwinder's may be held for good by threads it has not. */
static int foreign(void)
{
	atomic_int *own = atomic_load_explicit(&own_word, memory_order_acquire);
	if (own && atomic_load_explicit(own, memory_order_relaxed))
		return 0;
	if (pp_process_foreign())
		return 1;
	if (own)
		atomic_store_explicit(own, 1, memory_order_relaxed);
	return 0;
}

/* The label set a pool's block is recorded with: the thread's, with
 * pool=NAME innermost. Interned as a label scope is (a set seen before is
 * found without a lock or an allocation; a new one allocates, unsampled:
 * the caller is busy). */
static uint32_t pool_labels(const char *pool)
{
	if (!pool || !*pool)
		return pp_labels_current();
	uint32_t set = pp_labels_current();
	if (pullprof_label_push("pool", pool) == 0)
		set = pp_labels_current();
	pullprof_label_pop();
	return set;
}

/* What a sample is of: a malloc block (pool NULL, kind 0), or a block of
 * the host's own pools (kind 1, pool its name or NULL). */
struct what {
	int kind;
	const char *pool;
};

static void record(struct pp_heap_tls *t, void *p, size_t size, uintptr_t from,
                   const struct what *w)
{
	int saved = errno;

	if (foreign())
		return;
	atomic_fetch_add(&inside, 1);
	/* Checked after counting ourselves in: stop waits for us. */
	if (atomic_load(&rate_now)) {
		unsigned max =
		    atomic_load_explicit(&depth_now, memory_order_relaxed);
		max = max && max < PP_MAX_DEPTH ? max : PP_MAX_DEPTH;
		/* Sized by the depth asked for, not the largest allowed: this
		 * runs on the allocating thread's stack, which may be tiny
		 * (PTHREAD_STACK_MIN); 4 KiB for 512 frames nobody asked for
		 * overflowed such a thread (test_safety.py, test_tiny_stack).
		 */
		uintptr_t pcs[max + PP_UNWIND_SKIP_ROOM];
		int why, timed = t->samples++ % TIME_EVERY == 0;
		uint64_t t0 = timed ? pp_clock_ns(CLOCK_MONOTONIC) : 0;
		unsigned n = pp_unwind_capture_here(from, pcs, max, &why);
		uint64_t ns = timed ? pp_clock_ns(CLOCK_MONOTONIC) - t0 + 1 : 0;
		pp_heap_table_record(p, size, pcs, n, why, ns,
		                     w->kind ? pool_labels(w->pool)
		                             : pp_labels_current(),
		                     w->kind);
	}
	atomic_fetch_sub(&inside, 1);
	errno = saved;
}

static void *sampled(void *p, size_t size, uintptr_t from, const struct what *w)
{
	struct pp_heap_tls *t = &pp_heap_tls;
	if (t->agent) {
		t->countdown = INT64_MAX;
		return p;
	}
	uint64_t rate = atomic_load_explicit(&rate_now, memory_order_relaxed);
	if (rate != t->armed_rate) {
		/* First allocation of this thread, or the rate changed: the
		 * process starts here, this allocation included. */
		t->armed_rate = rate;
		t->countdown = rate ? draw(t, rate) - (int64_t)size : 0;
		if (rate && t->countdown >= 0)
			return p;
	}
	if (!rate) {
		t->countdown = RECHECK_BYTES;
		/* A forked child without an agent may have to take over
		 * (fork.h). */
		if (!t->busy)
			pp_fork_poke();
		return p;
	}
	t->countdown = draw(t, rate);
	/* A zero-byte block has no chance of being sampled: no estimate can
	 * be made from it (rate 1 records everything). */
	if (!p || t->busy || (size == 0 && rate > 1))
		return p;
	t->busy = 1;
	record(t, p, size, from, w);
	t->busy = 0;
	return p;
}

void *pp_heap_sampled(void *p, size_t size, uintptr_t from)
{
	static const struct what w = {0, NULL};
	return sampled(p, size, from, &w);
}

/* The same countdown as malloc's: one Poisson process over every byte a
 * thread allocates, from malloc or from a pool, so that a pool's blocks
 * and malloc's are sampled alike and the pool's chunk (a malloc block) is
 * sampled as any other. */
void pp_heap_pool_sampled(const void *p, size_t size, const char *pool,
                          uintptr_t from)
{
	struct what w = {1, pool};
	sampled((void *)(uintptr_t)p, size, from, &w);
}

void pp_heap_sampling_set(uint64_t rate, unsigned max_depth)
{
	if (rate)
		own_word_init();
	atomic_store(&depth_now, max_depth);
	atomic_store(&rate_now, rate);
}

void pp_heap_sampling_quiesce(void)
{
	struct timespec ms = {0, 100000};
	while (atomic_load(&inside))
		nanosleep(&ms, NULL);
}

void pp_heap_sampling_forget_in_child(void)
{
	/* Captures of threads that do not exist here never finish. */
	atomic_store(&inside, 0);
}

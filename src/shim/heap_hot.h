/*
 * What the malloc wrappers (malloc.c) and the pool API (pool.c) share
 * with the sampler (sample.c).
 * All of it runs inside the application's allocations.
 * Context: host.
 */
#ifndef PP_HEAP_HOT_H
#define PP_HEAP_HOT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Per-thread sampler state, defined in the light object (malloc.c,
 * src/shim/shim.h). Initial-exec TLS: reaching it never calls the
 * TLS resolver, which may itself allocate. All zero in a new thread. */
struct pp_heap_tls {
	int64_t countdown;   /* bytes left before the next sample: the
	                        allocation that takes it below 0 is sampled */
	uint64_t armed_rate; /* the rate countdown was drawn for; 0: none */
	uint64_t rng;
	uint32_t samples; /* taken by this thread (1 in 8 is timed) */
	int busy;  /* inside the sampler, or pullprof code on a host thread
	              (pp_heap_hide): allocations pass through unsampled */
	int agent; /* an agent thread: never sampled */
};
extern __thread struct pp_heap_tls pp_heap_tls
    __attribute__((tls_model("initial-exec")));

/* Hot context safe. The calling thread's allocations are never sampled
 * (the agent's threads: pp_agent_thread_enter). */
static inline void pp_heap_exclude_thread(void)
{
	pp_heap_tls.agent = 1;
	pp_heap_tls.countdown = INT64_MAX;
}

/* Hot context safe. pullprof's own code running on a host thread (the
 * dlclose wrapper's registry refresh, the pthread_create wrapper, a label's
 * first push, pullprof_start and _stop, pullprof_write_*): what it
 * allocates between pp_heap_hide() and pp_heap_unhide(its result) is not
 * sampled, and is not charged to the host. The thread's own allocations
 * before and after are sampled as if these bytes had never been counted
 * (the countdown is memoryless). Nests; keep the scope to agent code (not
 * around a call into the host's, such as the real dlclose and the
 * destructors it runs). */
/* Inline, so the compiler sees the two stores around what they hide; it
 * also knows malloc for a builtin that reads no memory of the program's,
 * and so dropped the store of 1 as dead before the restore (test_heap
 * caught pthread_create's wrapper's block charged to it). The stores are
 * volatile, each behind a compiler barrier: made, and in their place. */
static inline int pp_heap_hide(void)
{
	int prev = pp_heap_tls.busy;
	*(volatile int *)&pp_heap_tls.busy = 1;
	__asm__ __volatile__("" ::: "memory");
	return prev;
}

static inline void pp_heap_unhide(int prev)
{
	__asm__ __volatile__("" ::: "memory");
	*(volatile int *)&pp_heap_tls.busy = prev;
}

/*
 * The free filter: one bit per 64-byte granule of address space, modulo
 * 64 MiB (2^20 bits, 128 KiB). A bit is set while a sampled allocation
 * starts in that granule (and for the bootstrap allocations). A free whose
 * bit is clear — nearly all of them — was not sampled: one load and a
 * branch. A set bit sends the free to the exact table. Defined in the
 * light object (malloc.c); the agent's table sets and clears it.
 *
 * A granule of a cache line: a host's frees read a word of the filter for
 * each 4 KiB of its heap they touch, where 16-byte granules read one for
 * each 1 KiB and took the host's own data out of the first-level cache
 * (bench_malloc: 0.61 more misses a pair, +1 ns, against 0.13). The price
 * is a few frees of blocks that share a granule with a sampled one taking
 * the table's lock for nothing (/status heap.filter_false_hits: 141 in 20
 * million frees of 16..511 bytes at 512 KiB).
 */
#define PP_HEAP_FILTER_BITS (1u << 20)
extern _Atomic uint64_t pp_heap_filter[PP_HEAP_FILTER_BITS / 64];

#define PP_HEAP_GRANULE_SHIFT 6

static inline uint32_t pp_heap_slot(const void *p)
{
	return (uint32_t)((uintptr_t)p >> PP_HEAP_GRANULE_SHIFT) &
	       (PP_HEAP_FILTER_BITS - 1);
}

static inline int pp_heap_filter_hit(const void *p)
{
	uint32_t i = pp_heap_slot(p);
	return (int)(atomic_load_explicit(&pp_heap_filter[i >> 6],
	                                  memory_order_relaxed) >>
	             (i & 63)) &
	       1;
}

/* The slow path of an allocation whose size used up the countdown: draw
 * the next countdown and, when sampling, record p (unless NULL). from is
 * the wrapper's return address. Returns p. */
void *pp_heap_sampled(void *p, size_t size, uintptr_t from);

/* The pool API's slow paths (src/shim/pool.c, the host's own calls): a
 * reported block whose size used up the countdown; a pullprof_heap_free
 * that passed the filter (table.h: pp_heap_pool_free_hit); a release
 * (pp_heap_pool_release). */
void pp_heap_pool_sampled(const void *p, size_t size, const char *pool,
                          uintptr_t from);
void pp_heap_pool_free_hit(const void *p);
/* Every pool block recorded in [lo, hi) is gone. */
void pp_heap_pool_release(uintptr_t lo, uintptr_t hi);

/* A free (or realloc) of p passed the filter: if p was sampled, remove its
 * record now, before the memory can be reused. */
void pp_heap_free_hit(void *p);

/* realloc of a pointer that passed the filter: take its record out before
 * the real realloc, then settle: freed (the old block is gone) or not (the
 * realloc failed: the record goes back). */
struct pp_heap_taken {
	void *ptr;
	uint32_t bucket;
	int found;
};
void pp_heap_take(void *p, struct pp_heap_taken *t);
void pp_heap_settle(const struct pp_heap_taken *t, int freed);

#endif

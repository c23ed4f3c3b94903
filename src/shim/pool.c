/*
 * The pool API (pullprof_heap_alloc, pullprof_heap_free,
 * pullprof_heap_release): a host that hands out memory from its own pools
 * or arenas reports its blocks, and they are sampled as malloc's are. The
 * fast paths are the malloc wrappers' (malloc.c): an allocation spends
 * a subtraction from the thread's countdown and a branch, a free one load
 * of the free filter and a branch, a release a look at the filter's words
 * for its range. What is sampled goes to the agent (sample.c, table.c).
 *
 * In the light object and built in every build, sanitizer builds too (which
 * leave the malloc wrappers out, malloc.c): the countdown and the filter
 * are the light object's state (shim.c), and a pool's reports need no
 * wrapper. Until the agent is loaded there is no sampler: a thread whose
 * countdown runs out looks again RECHECK_BYTES later, frees and releases
 * find nothing marked.
 *
 * Not for signal handlers: a sampled block takes the table's lock and the
 * unwinder, and a new (label set, pool name) pair is interned with malloc.
 * Context: host.
 */
#include <stdatomic.h>
#include <stdint.h>

#include "pullprof.h"
#include "shim/heap_hot.h"
#include "shim/shim.h"

#define RA() ((uintptr_t)__builtin_return_address(0))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* As malloc.c's: a thread whose countdown ran out while no sampler is
 * there looks again after this many bytes. */
#define RECHECK_BYTES (64 << 10)

/* A release of more granules than this goes to the table without looking
 * at the filter: past 64 words the search of the ordered index (under the
 * lock, O(log n)) costs less than the look. */
#define RELEASE_SCAN_GRANULES 4096u

static __attribute__((noinline, cold)) void
alloc_slow(const void *p, size_t size, const char *pool, uintptr_t from)
{
	const struct pp_agent_ops *ops = PP_AGENT_OPS();
	if (!ops) {
		pp_heap_tls.countdown = RECHECK_BYTES;
		return;
	}
	/* A size no block can have is a bad call: the sampler draws the
	 * next countdown and records nothing (NULL). */
	if (size > (size_t)INT64_MAX)
		p = NULL, size = 0;
	ops->heap_pool_sampled(p, size, pool, from);
}

PULLPROF_API void pullprof_heap_alloc(const void *ptr, size_t size,
                                      const char *pool)
{
	/* The store and the test apart, as malloc.c's COUNT_DOWN: one
	 * subtraction from the TLS word and a branch on its sign. */
	pp_heap_tls.countdown -= (int64_t)size;
	if (LIKELY(pp_heap_tls.countdown >= 0))
		return;
	alloc_slow(ptr, size, pool, RA());
}

static __attribute__((noinline, cold)) void free_slow(const void *p)
{
	const struct pp_agent_ops *ops = PP_AGENT_OPS();
	if (p && ops)
		ops->heap_pool_free_hit(p);
}

PULLPROF_API void pullprof_heap_free(const void *ptr)
{
	if (UNLIKELY(pp_heap_filter_hit(ptr)))
		free_slow(ptr);
}

static uint64_t filter_word(uint32_t w)
{
	return atomic_load_explicit(&pp_heap_filter[w], memory_order_relaxed);
}

/* Whether a sampled block (of a pool or of malloc: one filter) may start
 * in [lo, end]: a bit of its granules set, or a range too long to look
 * at, or one that wraps around the filter's 64 MiB (rare: the table
 * decides). */
static int range_marked(uintptr_t lo, uintptr_t end)
{
	uintptr_t g0 = lo >> PP_HEAP_GRANULE_SHIFT;
	uintptr_t g1 = end >> PP_HEAP_GRANULE_SHIFT;
	if (g1 - g0 >= RELEASE_SCAN_GRANULES)
		return 1;
	uint32_t first = (uint32_t)g0 & (PP_HEAP_FILTER_BITS - 1);
	uint32_t last = (uint32_t)g1 & (PP_HEAP_FILTER_BITS - 1);
	if (last < first)
		return 1;
	uint32_t w0 = first >> 6, w1 = last >> 6;
	uint64_t m0 = ~0ull << (first & 63), m1 = ~0ull >> (63 - (last & 63));
	if (w0 == w1)
		return (filter_word(w0) & m0 & m1) != 0;
	if (filter_word(w0) & m0)
		return 1;
	for (uint32_t w = w0 + 1; w < w1; w++)
		if (filter_word(w))
			return 1;
	return (filter_word(w1) & m1) != 0;
}

static __attribute__((noinline, cold)) void release_slow(uintptr_t lo,
                                                         uintptr_t hi)
{
	const struct pp_agent_ops *ops = PP_AGENT_OPS();
	if (ops)
		ops->heap_pool_release(lo, hi);
}

PULLPROF_API void pullprof_heap_release(const void *base, size_t len)
{
	uintptr_t lo = (uintptr_t)base, last = lo + len - 1;
	if (UNLIKELY(last < lo || !base)) {
		if (!base || !len)
			return;
		last = UINTPTR_MAX; /* to the end of the address space */
	}
	/* The common case, a pool of a few KiB: its granules' bits are in
	 * one word of the filter, checked at once. */
	uintptr_t g0 = lo >> PP_HEAP_GRANULE_SHIFT;
	uintptr_t n = (last >> PP_HEAP_GRANULE_SHIFT) - g0;
	uint32_t first = (uint32_t)g0 & (PP_HEAP_FILTER_BITS - 1);
	if (LIKELY((first & 63) + n < 64)) {
		uint64_t mask = (~0ull >> (63 - n)) << (first & 63);
		if (LIKELY(!(filter_word(first >> 6) & mask)))
			return;
	} else if (!range_marked(lo, last)) {
		return;
	}
	release_slow(lo, last == UINTPTR_MAX ? last : last + 1);
}

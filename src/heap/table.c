/*
 * The tables of sampled allocations. Everything the
 * allocating threads call (record, free_hit, take, settle) takes the
 * one table lock but never allocates — the tables live in memory mapped
 * here, so no call can recurse into malloc while the lock is held. The
 * snapshot and stats are the agent's and allocate only outside the lock.
 *
 * Peak: every bucket keeps, lazily, its counters as they were at the latest
 * peak. The peak moves only when a sampled allocation raises the estimated
 * in-use total — on the sampled path, never on the fast path — and a move
 * just bumps a generation number: a bucket touched after the move saves
 * its counters first, one untouched since still holds them.
 * Context: host.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "heap/pool_index.h"
#include "heap/table.h"
#include "process.h"
#include "shim/heap_hot.h"
#include "shim/shim.h"
#include "unwind/unwind.h"
#include "util/clock.h"
#include "util/hash.h"

/* Bounds: past them samples are dropped and counted. */
#define MAX_BUCKETS (1u << 20)
#define MAX_STACKS (1u << 20)
#define MAX_POOL_BYTES ((size_t)128 << 20)
#define POOL_CHUNK ((size_t)1 << 20)
#define SLOT_SATURATED 0xffff

struct bucket {
	uint64_t size;
	uint32_t stack;
	uint32_t labels;
	uint64_t allocs, frees;
	uint64_t peak_allocs, peak_frees, peak_gen;
};

struct stack {
	const uintptr_t *pcs;
	uint32_t depth;
	int truncated;
};

/* A hash index over a table whose entries are numbered 0..n-1 in the order
 * they were added: chains of entry numbers + 1 (0 ends a chain) by hash. */
struct chain {
	uint32_t *heads; /* a power of two of them, at least 2n */
	uint32_t *next;
	uint64_t *hash;
	size_t n, cap_heads, cap_next, cap_hash;
};

struct live {
	uintptr_t ptr; /* 0: empty */
	uint32_t bucket;
};

struct chunk {
	struct chunk *next;
	size_t used, cap; /* in words */
	uintptr_t words[];
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static struct {
	int open;
	uint64_t rate;
	struct bucket *b;
	struct chain bx; /* bx.n buckets */
	size_t cap_b;
	struct stack *s;
	struct chain sx; /* sx.n stacks */
	size_t cap_s;
	struct live *live;
	size_t nlive, cap_live;
	/* The host's own pools' sampled blocks (pullprof_heap_alloc): apart
	 * from malloc's, ordered for pullprof_heap_release. */
	struct pp_pool_index pools;
	struct chunk *pool;
	size_t pool_bytes;
	uint16_t *slots; /* live sampled blocks per filter bit */
	double inuse, peak, peak_time;
	uint64_t gen;
	/* stats */
	uint64_t sampled, freed, dropped, false_hits;
	uint64_t pool_sampled, pool_freed, pool_released, pool_replaced;
	uint64_t sampled_bytes; /* sizes of the sampled allocations */
	double allocated;       /* estimated bytes allocated in all */
	uint64_t truncated, unknown_code, failed;
	uint64_t unwind_timed, unwind_ns_total, unwind_ns_max;
} tables;

static void *map(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static void unmap(void *p, size_t bytes)
{
	if (p)
		munmap(p, bytes);
}

/* Grow an array of elem-sized entries to hold need of them (capacities are
 * powers of two from 4096, so sizes stay page multiples). */
static int grow(void **arr, size_t *cap, size_t elem, size_t need)
{
	if (need <= *cap)
		return 0;
	size_t ncap = *cap ? *cap : 4096;
	while (ncap < need)
		ncap *= 2;
	void *p = *arr ? mremap(*arr, *cap * elem, ncap * elem, MREMAP_MAYMOVE)
	               : map(ncap * elem);
	if (!p || p == MAP_FAILED)
		return -ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

/* A fresh, zeroed head array of cap entries replacing *heads. */
static int new_heads(uint32_t **heads, size_t *cap, size_t ncap)
{
	uint32_t *h = map(ncap * sizeof *h);
	if (!h)
		return -ENOMEM;
	unmap(*heads, *cap * sizeof **heads);
	*heads = h;
	*cap = ncap;
	return 0;
}

/* ---- the filter ---------------------------------------------------------- */

/* The granules of the malloc wrappers' bootstrap arena (in the light
 * object: shim/shim.h) stay marked for good. */
static uint32_t boot_first(void)
{
	return __atomic_load_n(&pp_shim.heap_boot_first, __ATOMIC_RELAXED);
}

static uint32_t boot_count(void)
{
	return __atomic_load_n(&pp_shim.heap_boot_count, __ATOMIC_ACQUIRE);
}

static int protected_slot(uint32_t i)
{
	uint32_t n = boot_count();
	return ((i - boot_first()) & (PP_HEAP_FILTER_BITS - 1)) < n;
}

static void set_bit(uint32_t i)
{
	atomic_fetch_or_explicit(&pp_heap_filter[i >> 6], 1ull << (i & 63),
	                         memory_order_release);
}

static void slot_add(const void *p)
{
	uint32_t i = pp_heap_slot(p);
	if (tables.slots[i] == SLOT_SATURATED)
		return;
	if (tables.slots[i]++ == 0)
		set_bit(i);
}

static void slot_remove(const void *p)
{
	uint32_t i = pp_heap_slot(p);
	if (tables.slots[i] == SLOT_SATURATED || tables.slots[i] == 0)
		return;
	if (--tables.slots[i] == 0 && !protected_slot(i))
		atomic_fetch_and_explicit(&pp_heap_filter[i >> 6],
		                          ~(1ull << (i & 63)),
		                          memory_order_relaxed);
}

/* ---- stacks and buckets -------------------------------------------------- */

static const uintptr_t *pool_copy(const uintptr_t *pcs, unsigned n)
{
	struct chunk *c = tables.pool;
	if (!c || c->cap - c->used < n) {
		if (tables.pool_bytes + POOL_CHUNK > MAX_POOL_BYTES)
			return NULL;
		c = map(POOL_CHUNK);
		if (!c)
			return NULL;
		c->next = tables.pool;
		c->used = 0;
		c->cap = (POOL_CHUNK - sizeof *c) / sizeof(uintptr_t);
		tables.pool = c;
		tables.pool_bytes += POOL_CHUNK;
	}
	uintptr_t *dst = c->words + c->used;
	memcpy(dst, pcs, n * sizeof *pcs);
	c->used += n;
	return dst;
}

static uint32_t chain_first(const struct chain *c, uint64_t h)
{
	return c->cap_heads ? c->heads[h & (c->cap_heads - 1)] : 0;
}

static void chain_link(struct chain *c, size_t i)
{
	size_t slot = c->hash[i] & (c->cap_heads - 1);
	c->next[i] = c->heads[slot];
	c->heads[slot] = (uint32_t)i + 1;
}

/* Number a new entry of hash h: n, or -1 when out of memory. */
static long chain_add(struct chain *c, uint64_t h)
{
	if (grow((void **)&c->next, &c->cap_next, sizeof *c->next, c->n + 1) ||
	    grow((void **)&c->hash, &c->cap_hash, sizeof *c->hash, c->n + 1))
		return -1;
	if (c->n + 1 > c->cap_heads / 2) {
		if (new_heads(&c->heads, &c->cap_heads,
		              c->cap_heads ? c->cap_heads * 2 : 8192))
			return -1;
		for (size_t i = 0; i < c->n; i++)
			chain_link(c, i);
	}
	c->hash[c->n] = h;
	chain_link(c, c->n);
	return (long)c->n++;
}

static size_t chain_bytes(const struct chain *c)
{
	return c->cap_heads * sizeof *c->heads + c->cap_next * sizeof *c->next +
	       c->cap_hash * sizeof *c->hash;
}

static void chain_free(struct chain *c)
{
	unmap(c->heads, c->cap_heads * sizeof *c->heads);
	unmap(c->next, c->cap_next * sizeof *c->next);
	unmap(c->hash, c->cap_hash * sizeof *c->hash);
}

static long stack_id(const uintptr_t *pcs, unsigned depth, int truncated)
{
	uint64_t h =
	    pp_hash_bytes(pcs, depth * sizeof *pcs) ^ (uint64_t)truncated;
	for (uint32_t k = chain_first(&tables.sx, h); k;
	     k = tables.sx.next[k - 1]) {
		const struct stack *s = &tables.s[k - 1];
		if (tables.sx.hash[k - 1] == h && s->depth == depth &&
		    s->truncated == truncated &&
		    memcmp(s->pcs, pcs, depth * sizeof *pcs) == 0)
			return (long)k - 1;
	}
	if (tables.sx.n >= MAX_STACKS ||
	    grow((void **)&tables.s, &tables.cap_s, sizeof *tables.s,
	         tables.sx.n + 1))
		return -1;
	const uintptr_t *copy = pool_copy(pcs, depth);
	long id = copy ? chain_add(&tables.sx, h) : -1;
	if (id >= 0)
		tables.s[id] = (struct stack){copy, depth, truncated};
	return id;
}

static long bucket_id(uint32_t stack, uint64_t size, uint32_t labels)
{
	uint64_t h =
	    pp_hash_u64(((uint64_t)stack * 0x9e3779b97f4a7c15ull ^ size) +
	                (uint64_t)labels * 0xc2b2ae3d27d4eb4full);
	for (uint32_t k = chain_first(&tables.bx, h); k;
	     k = tables.bx.next[k - 1])
		if (tables.b[k - 1].stack == stack &&
		    tables.b[k - 1].size == size &&
		    tables.b[k - 1].labels == labels)
			return (long)k - 1;
	if (tables.bx.n >= MAX_BUCKETS ||
	    grow((void **)&tables.b, &tables.cap_b, sizeof *tables.b,
	         tables.bx.n + 1))
		return -1;
	long id = chain_add(&tables.bx, h);
	if (id >= 0)
		tables.b[id] = (struct bucket){.size = size,
		                               .stack = stack,
		                               .labels = labels,
		                               .peak_gen = tables.gen};
	return id;
}

/* Before changing a bucket: if the peak moved since it last changed, its
 * counters now are its counters at the peak. */
static void before_change(struct bucket *b)
{
	if (b->peak_gen != tables.gen) {
		b->peak_allocs = b->allocs;
		b->peak_frees = b->frees;
		b->peak_gen = tables.gen;
	}
}

double pp_heap_scale(uint64_t size, uint64_t rate)
{
	if (rate <= 1 || size == 0)
		return 1.0;
	return 1.0 / -expm1(-(double)size / (double)rate);
}

/* ---- the live table: open addressing, linear probing --------------------- */

static size_t live_home(uintptr_t p)
{
	return pp_hash_u64(p) & (tables.cap_live - 1);
}

static int live_grow(void)
{
	size_t ncap = tables.cap_live ? tables.cap_live * 2 : 8192;
	struct live *n = map(ncap * sizeof *n), *old = tables.live;
	size_t ocap = tables.cap_live;
	if (!n)
		return -ENOMEM;
	tables.live = n;
	tables.cap_live = ncap;
	for (size_t i = 0; i < ocap; i++) {
		if (!old[i].ptr)
			continue;
		size_t k = live_home(old[i].ptr);
		while (n[k].ptr)
			k = (k + 1) & (ncap - 1);
		n[k] = old[i];
	}
	unmap(old, ocap * sizeof *old);
	return 0;
}

static int live_put(uintptr_t p, uint32_t bucket)
{
	if ((tables.nlive + 1) * 2 > tables.cap_live && live_grow())
		return -ENOMEM;
	size_t k = live_home(p);
	while (tables.live[k].ptr)
		k = (k + 1) & (tables.cap_live - 1);
	tables.live[k] = (struct live){p, bucket};
	tables.nlive++;
	return 0;
}

/* Remove p; its bucket in *bucket. 0, or -ENOENT when p was not sampled.
 * 0 marks an empty entry: it is never "found" (free(NULL) passes the
 * filter whenever a sampled block starts at a multiple of 64 MiB). */
static int live_take(uintptr_t p, uint32_t *bucket)
{
	if (!tables.cap_live || !p)
		return -ENOENT;
	size_t mask = tables.cap_live - 1, k = live_home(p);
	while (tables.live[k].ptr != p) {
		if (!tables.live[k].ptr)
			return -ENOENT;
		k = (k + 1) & mask;
	}
	*bucket = tables.live[k].bucket;
	/* Backward-shift deletion: no tombstones. */
	size_t hole = k;
	for (size_t j = (k + 1) & mask; tables.live[j].ptr;
	     j = (j + 1) & mask) {
		size_t home = live_home(tables.live[j].ptr);
		/* j's entry may move into the hole unless its home lies
		 * cyclically in (hole, j]. */
		if (((j - home) & mask) >= ((j - hole) & mask)) {
			tables.live[hole] = tables.live[j];
			hole = j;
		}
	}
	tables.live[hole].ptr = 0;
	tables.nlive--;
	return 0;
}

/* ---- hot entry points ---------------------------------------------------- */

static void account_free(uint32_t bucket);

/* Read without the lock by pp_heap_pool_release: no pool block sampled, no
 * lock taken (a host that reports pools but has no sampled block in any). */
static atomic_size_t pool_blocks;

/* A sampled block's record: in malloc's hash of live blocks, or (pool) in
 * the pools' ordered index. 0 or -ENOMEM. */
static int put_block(int pool, uintptr_t p, uint32_t bucket)
{
	if (!pool) {
		if (live_put(p, bucket))
			return -ENOMEM;
		slot_add((const void *)p);
		return 0;
	}
	uint32_t old;
	int rc = pp_pool_index_put(&tables.pools, p, bucket, &old);
	if (rc < 0)
		return rc;
	if (rc == 1) {
		/* The pool handed this address out again with neither a
		 * free nor a release of the block that was there: that one
		 * is gone. Its granule's count stands for the new one. */
		account_free(old);
		tables.pool_replaced++;
	} else {
		slot_add((const void *)p);
	}
	tables.pool_sampled++;
	atomic_store_explicit(&pool_blocks, tables.pools.n,
	                      memory_order_relaxed);
	return 0;
}

int pp_heap_table_record(void *p, size_t size, const uintptr_t *pcs,
                         unsigned depth, int why, uint64_t unwind_ns,
                         uint32_t labels, int pool)
{
	int rc = -ENOMEM;
	pthread_mutex_lock(&mu);
	if (!tables.open) {
		pthread_mutex_unlock(&mu);
		return -ESHUTDOWN;
	}
	if (unwind_ns) {
		tables.unwind_timed++;
		tables.unwind_ns_total += unwind_ns;
	}
	if (unwind_ns > tables.unwind_ns_max)
		tables.unwind_ns_max = unwind_ns;
	tables.truncated += why == PP_UNWIND_TRUNCATED;
	tables.unknown_code += why == PP_UNWIND_UNKNOWN_CODE;
	tables.failed += why == PP_UNWIND_FAILED;
	long s = stack_id(pcs, depth, why == PP_UNWIND_TRUNCATED);
	long b = s < 0 ? -1 : bucket_id((uint32_t)s, size, labels);
	if (b >= 0 && put_block(pool, (uintptr_t)p, (uint32_t)b) == 0) {
		struct bucket *bk = &tables.b[b];
		before_change(bk);
		bk->allocs++;
		tables.sampled++;
		tables.sampled_bytes += size;
		double est = (double)size * pp_heap_scale(size, tables.rate);
		tables.allocated += est;
		tables.inuse += est;
		if (tables.inuse > tables.peak) {
			tables.peak = tables.inuse;
			tables.peak_time =
			    pp_ns_to_seconds(pp_clock_ns(CLOCK_REALTIME));
			tables.gen++;
		}
		rc = 0;
	} else {
		tables.dropped++;
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

static void account_free(uint32_t bucket)
{
	struct bucket *b = &tables.b[bucket];
	before_change(b);
	b->frees++;
	tables.freed++;
	tables.inuse -= (double)b->size * pp_heap_scale(b->size, tables.rate);
	if (tables.inuse < 0)
		tables.inuse = 0;
}

/* Take mu, unless this is a child made without fork() (process.h), where it
 * may be held for good by a thread the child has not: 0 then. The check
 * (a system call) only when mu is not free at once. */
static int lock_here(void)
{
	if (pthread_mutex_trylock(&mu) == 0)
		return 1;
	if (pp_process_foreign())
		return 0;
	pthread_mutex_lock(&mu);
	return 1;
}

void pp_heap_free_hit(void *p)
{
	uint32_t bucket;
	if (!lock_here())
		return;
	if (tables.open && live_take((uintptr_t)p, &bucket) == 0) {
		slot_remove(p);
		account_free(bucket);
	} else {
		tables.false_hits++;
	}
	pthread_mutex_unlock(&mu);
}

void pp_heap_pool_free_hit(const void *p)
{
	uint32_t bucket;
	if (!lock_here())
		return;
	if (tables.open &&
	    pp_pool_index_take(&tables.pools, (uintptr_t)p, &bucket) == 0) {
		slot_remove(p);
		account_free(bucket);
		tables.pool_freed++;
		atomic_store_explicit(&pool_blocks, tables.pools.n,
		                      memory_order_relaxed);
	} else {
		tables.false_hits++;
	}
	pthread_mutex_unlock(&mu);
}

static void release_one(uintptr_t p, uint32_t bucket, void *arg)
{
	(void)arg;
	slot_remove((const void *)p);
	account_free(bucket);
}

void pp_heap_pool_release(uintptr_t lo, uintptr_t hi)
{
	if (!atomic_load_explicit(&pool_blocks, memory_order_relaxed) ||
	    !lock_here())
		return;
	if (tables.open) {
		size_t k = pp_pool_index_take_range(&tables.pools, lo, hi,
		                                    release_one, NULL);
		tables.pool_released += k;
		atomic_store_explicit(&pool_blocks, tables.pools.n,
		                      memory_order_relaxed);
	}
	pthread_mutex_unlock(&mu);
}

void pp_heap_take(void *p, struct pp_heap_taken *t)
{
	t->ptr = p;
	t->found = 0;
	if (!lock_here())
		return;
	if (tables.open && live_take((uintptr_t)p, &t->bucket) == 0) {
		slot_remove(p);
		t->found = 1;
	} else {
		tables.false_hits++;
	}
	pthread_mutex_unlock(&mu);
}

void pp_heap_settle(const struct pp_heap_taken *t, int freed)
{
	if (!t->found)
		return;
	pthread_mutex_lock(&mu);
	/* The tables may have been reset in between: then nothing to do. */
	if (tables.open && t->bucket < tables.bx.n) {
		if (freed)
			account_free(t->bucket);
		else if (live_put((uintptr_t)t->ptr, t->bucket) == 0)
			slot_add(t->ptr);
		else {
			/* No room to put it back: count it freed rather
			 * than leave the counters wrong. */
			account_free(t->bucket);
			tables.dropped++;
		}
	}
	pthread_mutex_unlock(&mu);
}

/* ---- agent side ---------------------------------------------------------- */

static void free_tables(void)
{
	unmap(tables.b, tables.cap_b * sizeof *tables.b);
	chain_free(&tables.bx);
	unmap(tables.s, tables.cap_s * sizeof *tables.s);
	chain_free(&tables.sx);
	unmap(tables.live, tables.cap_live * sizeof *tables.live);
	pp_pool_index_free(&tables.pools);
	atomic_store(&pool_blocks, 0);
	unmap(tables.slots, PP_HEAP_FILTER_BITS * sizeof *tables.slots);
	while (tables.pool) {
		struct chunk *c = tables.pool;
		tables.pool = c->next;
		unmap(c, POOL_CHUNK);
	}
	memset(&tables, 0, sizeof tables);
	/* Clear the filter, but for the bootstrap arena's blocks. */
	for (uint32_t i = 0; i < PP_HEAP_FILTER_BITS / 64; i++)
		atomic_store_explicit(&pp_heap_filter[i], 0,
		                      memory_order_relaxed);
	uint32_t n = boot_count(), first = boot_first();
	for (uint32_t k = 0; k < n; k++)
		set_bit((first + k) & (PP_HEAP_FILTER_BITS - 1));
}

int pp_heap_table_open(uint64_t rate)
{
	pthread_mutex_lock(&mu);
	if (tables.open)
		free_tables();
	tables.slots = map(PP_HEAP_FILTER_BITS * sizeof *tables.slots);
	if (!tables.slots) {
		pthread_mutex_unlock(&mu);
		return -ENOMEM;
	}
	tables.rate = rate;
	tables.open = 1;
	pthread_mutex_unlock(&mu);
	return 0;
}

void pp_heap_table_close(void)
{
	pthread_mutex_lock(&mu);
	free_tables();
	pthread_mutex_unlock(&mu);
}

static void atfork_prepare(void)
{
	pthread_mutex_lock(&mu);
}

static void atfork_release(void)
{
	pthread_mutex_unlock(&mu);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void register_atfork_once(void)
{
	/* The child must find the tables consistent and the lock free: no
	 * thread is half-way through a change when fork copies them. */
	pthread_atfork(atfork_prepare, atfork_release, atfork_release);
}

void pp_heap_table_register_atfork(void)
{
	pthread_once(&atfork_once, register_atfork_once);
}

__attribute__((constructor)) static void register_atfork(void)
{
	pp_heap_table_register_atfork();
}

int pp_heap_table_snapshot(int peak, int reset, struct pp_heap_snapshot *out)
{
	size_t cap = 0;
	memset(out, 0, sizeof *out);
	for (;;) {
		pthread_mutex_lock(&mu);
		size_t n = tables.bx.n;
		int open = tables.open;
		if (open && out->rows && n <= cap)
			break; /* still locked */
		pthread_mutex_unlock(&mu);
		/* Never allocate under the lock: a free of ours that hit the
		 * filter would wait for it. */
		free(out->rows);
		out->rows = NULL;
		if (!open)
			return -ESHUTDOWN;
		cap = n + n / 4 + 64;
		out->rows = malloc(cap * sizeof *out->rows);
		if (!out->rows)
			return -ENOMEM;
	}
	for (size_t i = 0; i < tables.bx.n; i++) {
		const struct bucket *b = &tables.b[i];
		const struct stack *s = &tables.s[b->stack];
		struct pp_heap_row *r = &out->rows[i];
		r->pcs = s->pcs;
		r->depth = s->depth;
		r->truncated = s->truncated;
		r->size = b->size;
		r->labels = b->labels;
		if (peak && b->peak_gen == tables.gen) {
			r->allocs = b->peak_allocs;
			r->frees = b->peak_frees;
		} else {
			r->allocs = b->allocs;
			r->frees = b->frees;
		}
	}
	out->n = tables.bx.n;
	out->rate = tables.rate;
	out->peak_bytes = tables.peak;
	out->peak_time = tables.peak_time;
	if (reset) {
		tables.peak = tables.inuse;
		tables.peak_time =
		    pp_ns_to_seconds(pp_clock_ns(CLOCK_REALTIME));
		tables.gen++;
	}
	pthread_mutex_unlock(&mu);
	return 0;
}

void pp_heap_table_stats(struct pp_heap_stats *o)
{
	pthread_mutex_lock(&mu);
	o->rate = tables.rate;
	o->sampled = tables.sampled;
	o->sampled_bytes = tables.sampled_bytes;
	o->allocated_bytes = (uint64_t)tables.allocated;
	o->sampled_freed = tables.freed;
	/* The pools' blocks with malloc's (their own figures: pool_*). */
	o->live_objects = tables.nlive + tables.pools.n;
	o->inuse_bytes = (uint64_t)tables.inuse;
	o->peak_bytes = (uint64_t)tables.peak;
	o->peak_time = tables.peak_time;
	o->stacks = tables.sx.n;
	o->buckets = tables.bx.n;
	o->table_bytes =
	    tables.cap_b * sizeof *tables.b + chain_bytes(&tables.bx) +
	    tables.cap_s * sizeof *tables.s + chain_bytes(&tables.sx) +
	    tables.cap_live * sizeof *tables.live + tables.pool_bytes +
	    pp_pool_index_bytes(&tables.pools) +
	    (tables.slots ? PP_HEAP_FILTER_BITS * sizeof *tables.slots : 0);
	o->dropped = tables.dropped;
	o->unwind_truncated = tables.truncated;
	o->unwind_unknown_code = tables.unknown_code;
	o->unwind_failed = tables.failed;
	o->unwind_timed = tables.unwind_timed;
	o->unwind_ns_total = tables.unwind_ns_total;
	o->unwind_ns_max = tables.unwind_ns_max;
	o->false_hits = tables.false_hits;
	pthread_mutex_unlock(&mu);
}

void pp_heap_table_pool_stats(struct pp_heap_pool_stats *o)
{
	pthread_mutex_lock(&mu);
	o->sampled = tables.pool_sampled;
	o->freed = tables.pool_freed;
	o->released = tables.pool_released;
	o->replaced = tables.pool_replaced;
	o->live = tables.pools.n;
	o->index_bytes = pp_pool_index_bytes(&tables.pools);
	pthread_mutex_unlock(&mu);
}

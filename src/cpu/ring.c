/*
 * The sample ring (Vyukov's bounded queue: every slot carries a sequence
 * number that tells producers and the consumer whose turn it is).
 * pp_ring_claim and pp_ring_publish run in signal handlers: atomics
 * only. init and free (mmap and munmap, async-signal-safe system calls),
 * peek and release are the collector's, and safe there too.
 * Context: signal.
 */
#include "ring.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_WIPEONFORK
#define MADV_WIPEONFORK 18 /* Linux 4.14; older headers lack it */
#endif

struct slot {
	_Atomic size_t seq;
	size_t pad;
	/* struct pp_ring_rec follows */
};

static struct slot *slot_at(const struct pp_ring *r, size_t i)
{
	return (struct slot *)(r->slots + (i & r->mask) * (sizeof(struct slot) +
	                                                   r->rec_size));
}

/* A slot stores its sequence number less its own index, so that a slot of
 * zeroed memory is a slot that was never used (Vyukov's initial sequence
 * is the index): a ring needs no page written before its first record. */
static size_t seq_load(const struct pp_ring *r, size_t i, memory_order mo)
{
	return atomic_load_explicit(&slot_at(r, i)->seq, mo) + (i & r->mask);
}

static void seq_store(struct pp_ring *r, size_t i, size_t seq, memory_order mo)
{
	atomic_store_explicit(&slot_at(r, i)->seq, seq - (i & r->mask), mo);
}

int pp_ring_init(struct pp_ring *r, size_t capacity, unsigned max_depth)
{
	int rc = pp_ring_init_size(
	    r, capacity,
	    sizeof(struct pp_ring_rec) + max_depth * sizeof(uintptr_t), 1);
	r->max_depth = max_depth;
	return rc;
}

int pp_ring_init_size(struct pp_ring *r, size_t capacity, size_t rec_size,
                      int populate)
{
	memset(r, 0, sizeof *r);
	r->mask = capacity - 1;
	r->rec_size = (rec_size + 15) & ~(size_t)15;
	size_t bytes = capacity * (sizeof(struct slot) + r->rec_size);
	/* mmap, not malloc: the pages are ours alone, and touching them in a
	 * handler never enters the allocator. MAP_POPULATE: no page faults
	 * in the handler on first use. */
	r->slots = mmap(
	    NULL, bytes, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS | (populate ? MAP_POPULATE : 0), -1, 0);
	if (r->slots == MAP_FAILED) {
		r->slots = NULL;
		return -ENOMEM;
	}
	/* Zeroed pages: every slot at its first lap (seq_load). A forked
	 * child gets the range as fresh zeroed pages, an empty ring, instead
	 * of a copy of the parent's (fork copies no page of it, and the child
	 * writes none to empty it: pp_ring_reset). Before Linux 4.14 the
	 * child maps new pages over it instead. */
	r->wiped_on_fork = madvise(r->slots, bytes, MADV_WIPEONFORK) == 0;
	r->owner = getpid();
	return 0;
}

static size_t ring_bytes(const struct pp_ring *r)
{
	return (r->mask + 1) * (sizeof(struct slot) + r->rec_size);
}

/* Async-signal-safe (a fork child handler): system calls and stores. */
void pp_ring_reset(struct pp_ring *r)
{
	if (!r->slots)
		return;
	pid_t me = getpid();
	if (!r->wiped_on_fork || me == r->owner) {
		/* The pages may hold records. Fresh zeroed ones in their
		 * place cost no copy of the old (writing a sequence number
		 * into every slot copied every page of a child's ring: 4 MB
		 * and ~20 ms for each fork of a host that had been
		 * profiled). */
		size_t bytes = ring_bytes(r);
		void *p = mmap(r->slots, bytes, PROT_READ | PROT_WRITE,
		               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		if (p == r->slots) {
			r->wiped_on_fork =
			    madvise(r->slots, bytes, MADV_WIPEONFORK) == 0;
		} else {
			/* The slots that were used, and those alone. */
			for (size_t i = 0; i <= r->mask; i++)
				if (atomic_load_explicit(&slot_at(r, i)->seq,
				                         memory_order_relaxed))
					seq_store(r, i, i,
					          memory_order_relaxed);
		}
	}
	r->owner = me;
	atomic_store_explicit(&r->head, 0, memory_order_relaxed);
	r->tail = 0;
	r->stuck_ns = 0;
	atomic_store_explicit(&r->high_water, 0, memory_order_relaxed);
}

void pp_ring_free(struct pp_ring *r)
{
	if (r->slots)
		munmap(r->slots, ring_bytes(r));
	r->slots = NULL;
}

struct pp_ring_rec *pp_ring_claim(struct pp_ring *r, size_t *pos)
{
	size_t p = atomic_load_explicit(&r->head, memory_order_relaxed);

	for (;;) {
		struct slot *s = slot_at(r, p);
		size_t seq = seq_load(r, p, memory_order_acquire);
		intptr_t dif = (intptr_t)seq - (intptr_t)p;
		if (dif == 0) {
			if (atomic_compare_exchange_weak_explicit(
			        &r->head, &p, p + 1, memory_order_relaxed,
			        memory_order_relaxed)) {
				*pos = p;
				return (struct pp_ring_rec *)(s + 1);
			}
		} else if (dif < 0) {
			return NULL; /* full: the consumer is a lap behind */
		} else {
			p = atomic_load_explicit(&r->head,
			                         memory_order_relaxed);
		}
	}
}

struct pp_ring_rec *pp_ring_slot(struct pp_ring *r, size_t pos)
{
	return (struct pp_ring_rec *)(slot_at(r, pos) + 1);
}

int pp_ring_claimed(struct pp_ring *r, size_t pos)
{
	return seq_load(r, pos, memory_order_acquire) == pos;
}

/* A compare-and-swap, not a store: the consumer may have taken the slot
 * back (pp_ring_reclaim), and exactly one of the two must win. */
int pp_ring_publish(struct pp_ring *r, size_t pos)
{
	size_t claimed = pos - (pos & r->mask);
	return atomic_compare_exchange_strong_explicit(
	           &slot_at(r, pos)->seq, &claimed, pos + 1 - (pos & r->mask),
	           memory_order_release, memory_order_relaxed)
	           ? 0
	           : -1;
}

const struct pp_ring_rec *pp_ring_peek(struct pp_ring *r)
{
	struct slot *s = slot_at(r, r->tail);
	if (seq_load(r, r->tail, memory_order_acquire) != r->tail + 1)
		return NULL;
	size_t pending =
	    atomic_load_explicit(&r->head, memory_order_relaxed) - r->tail;
	if (pending >
	    atomic_load_explicit(&r->high_water, memory_order_relaxed))
		atomic_store_explicit(&r->high_water, pending,
		                      memory_order_relaxed);
	return (const struct pp_ring_rec *)(s + 1);
}

void pp_ring_release(struct pp_ring *r)
{
	seq_store(r, r->tail, r->tail + r->mask + 1, memory_order_release);
	r->tail++;
}

int pp_ring_reclaim(struct pp_ring *r, uint64_t now_ns, uint64_t after_ns)
{
	size_t t = r->tail;
	if (atomic_load_explicit(&r->head, memory_order_acquire) == t ||
	    seq_load(r, t, memory_order_acquire) != t) {
		r->stuck_ns = 0; /* empty, or published meanwhile */
		return 0;
	}
	if (!r->stuck_ns || r->stuck_pos != t) {
		r->stuck_pos = t;
		r->stuck_ns = now_ns;
		return 0;
	}
	if (now_ns - r->stuck_ns < after_ns)
		return 0;
	size_t claimed = t - (t & r->mask);
	if (!atomic_compare_exchange_strong_explicit(
	        &slot_at(r, t)->seq, &claimed, t + r->mask + 1 - (t & r->mask),
	        memory_order_acq_rel, memory_order_relaxed))
		return 0; /* published just now: peek takes it */
	r->tail++;
	r->stuck_ns = 0;
	atomic_fetch_add_explicit(&r->reclaimed, 1, memory_order_relaxed);
	return 1;
}

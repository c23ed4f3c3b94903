/*
 * The mutex and block profiles, the agent's part: the event ring the recording
 * threads fill (record.c), drained on the pipeline's tick into one table
 * per profile (stack, labels, thread name -> estimated contentions and
 * delay), and the two producers that turn a table into a profile (a
 * snapshot since the agent started, or its change over ?seconds=N).
 *
 * Values are unsampled estimates, made here from each event's measured
 * delay and the rate it was sampled at: a mutex event sampled 1 in N counts
 * N contentions and N times its delay; a blocking event shorter than the
 * block rate R (sampled with probability delay / R) counts R / delay
 * contentions and R ns. Agent context but for pp_locks_put (host context:
 * atomics and plain stores into a claimed ring slot).
 * Context: agent.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "cpu/ring.h"
#include "labels/labels.h"
#include "locks/locks.h"
#include "profile/counts.h"
#include "shim/locks_hot.h"
#include "threads/internal.h"
#include "util/clock.h"

#define RING_EVENTS 4096u /* a power of two */
#define MAX_STACKS 16384u /* per profile */

_Atomic unsigned pp_locks_depth = PP_LOCKS_MAX_DEPTH;

struct lk_event {
	uint8_t kind;
	uint8_t truncated;
	uint16_t depth;
	uint32_t labels;
	uint64_t delay, rate;
	char name[16];
	uintptr_t pcs[PP_LOCKS_MAX_DEPTH];
};

struct lk_entry {
	uint64_t hash;
	uint32_t depth, labels;
	int truncated;
	char name[16];
	double count, delay;
	uintptr_t pcs[];
};

struct lk_table {
	struct lk_entry **slots; /* open addressing, at most half full */
	size_t cap, n;
	uint64_t events, past; /* events added; those past MAX_STACKS */
	double past_count, past_delay;
};

static struct {
	pthread_mutex_t mu; /* tables and the ring's reading end */
	struct lk_table t[PP_LOCKS_NKINDS];
	struct pp_ring ring;
	int ring_made;
	int ring_stale; /* a forked child's copy: made again before use */
	_Atomic int ring_ready;
	_Atomic uint64_t dropped[PP_LOCKS_NKINDS];
	/* What the lost events stood for, estimated as if kept. */
	_Atomic uint64_t dropped_count[PP_LOCKS_NKINDS];
	_Atomic uint64_t dropped_delay[PP_LOCKS_NKINDS];
	struct pp_locks_settings cfg;
} lk = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void estimate(enum pp_locks_kind kind, uint64_t delay, uint64_t rate,
                     double *count, double *d)
{
	if (kind == PP_LOCKS_MUTEX) {
		*count = (double)rate;
		*d = (double)delay * (double)rate;
	} else if (delay >= rate) {
		*count = 1;
		*d = (double)delay;
	} else {
		*count = (double)rate / (double)(delay ? delay : 1);
		*d = (double)rate;
	}
}

/* ---- host side ------------------------------------------------------------
 */

void pp_locks_put(enum pp_locks_kind kind, const uintptr_t *pcs, unsigned depth,
                  int truncated, uint64_t delay, uint64_t rate,
                  const char name[16], uint32_t labels)
{
	size_t pos;
	struct lk_event *e = NULL;
	if (atomic_load_explicit(&lk.ring_ready, memory_order_acquire))
		e = (struct lk_event *)pp_ring_claim(&lk.ring, &pos);
	if (!e) {
		double c, d;
		estimate(kind, delay, rate, &c, &d);
		atomic_fetch_add_explicit(&lk.dropped[kind], 1,
		                          memory_order_relaxed);
		atomic_fetch_add_explicit(&lk.dropped_count[kind],
		                          (uint64_t)llround(c),
		                          memory_order_relaxed);
		atomic_fetch_add_explicit(&lk.dropped_delay[kind],
		                          (uint64_t)llround(d),
		                          memory_order_relaxed);
		return;
	}
	e->kind = (uint8_t)kind;
	e->truncated = (uint8_t) !!truncated;
	e->depth = (uint16_t)depth;
	e->labels = labels;
	e->delay = delay;
	e->rate = rate;
	memcpy(e->name, name, sizeof e->name);
	e->name[15] = 0;
	memcpy(e->pcs, pcs, depth * sizeof *pcs);
	(void)pp_ring_publish(&lk.ring, pos); /* -1: taken back, lost */
	/* Every half ring, the pipeline's thread drains it now rather than at
	 * its next tick: a burst of contention fills 4096 events fast. */
	if ((pos & (RING_EVENTS / 2 - 1)) == 0 && pos)
		pp_jobs_tick_soon();
}

/* ---- tables (lk.mu held) --------------------------------------------------
 */

static uint64_t event_hash(const struct lk_event *e)
{
	uint64_t h = 1469598103934665603ull;
	for (unsigned i = 0; i < e->depth; i++)
		h = (h ^ e->pcs[i]) * 1099511628211ull;
	h = (h ^ e->labels) * 1099511628211ull;
	h = (h ^ e->truncated) * 1099511628211ull;
	for (unsigned i = 0; i < sizeof e->name && e->name[i]; i++)
		h = (h ^ (unsigned char)e->name[i]) * 1099511628211ull;
	return h ? h : 1;
}

static int same(const struct lk_entry *x, const struct lk_event *e, uint64_t h)
{
	return x->hash == h && x->depth == e->depth && x->labels == e->labels &&
	       x->truncated == e->truncated &&
	       strncmp(x->name, e->name, sizeof x->name) == 0 &&
	       memcmp(x->pcs, e->pcs, e->depth * sizeof *e->pcs) == 0;
}

static int grow(struct lk_table *t)
{
	size_t cap = t->cap ? t->cap * 2 : 256;
	struct lk_entry **s = calloc(cap, sizeof *s);
	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++) {
		struct lk_entry *x = t->slots[i];
		if (!x)
			continue;
		size_t j = x->hash & (cap - 1);
		while (s[j])
			j = (j + 1) & (cap - 1);
		s[j] = x;
	}
	free(t->slots);
	t->slots = s;
	t->cap = cap;
	return 0;
}

static void table_add(struct lk_table *t, const struct lk_event *e)
{
	double c, d;
	estimate((enum pp_locks_kind)e->kind, e->delay, e->rate, &c, &d);
	t->events++;
	uint64_t h = event_hash(e);
	if ((t->n + 1) * 2 > t->cap && t->n < MAX_STACKS && grow(t))
		goto past;
	for (size_t i = h & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
		struct lk_entry *x = t->slots[i];
		if (x && same(x, e, h)) {
			x->count += c;
			x->delay += d;
			return;
		}
		if (x)
			continue;
		if (t->n >= MAX_STACKS)
			goto past;
		x = malloc(sizeof *x + e->depth * sizeof *e->pcs);
		if (!x)
			goto past;
		x->hash = h;
		x->depth = e->depth;
		x->labels = e->labels;
		x->truncated = e->truncated;
		memcpy(x->name, e->name, sizeof x->name);
		memcpy(x->pcs, e->pcs, e->depth * sizeof *e->pcs);
		x->count = c;
		x->delay = d;
		t->slots[i] = x;
		t->n++;
		return;
	}
past:
	t->past++;
	t->past_count += c;
	t->past_delay += d;
}

static void table_free(struct lk_table *t)
{
	for (size_t i = 0; i < t->cap; i++)
		free(t->slots[i]);
	free(t->slots);
	memset(t, 0, sizeof *t);
}

static void drain_locked(void)
{
	if (!lk.ring_made || lk.ring_stale)
		return;
	const struct lk_event *e;
	for (;;) {
		e = (const struct lk_event *)pp_ring_peek(&lk.ring);
		/* A slot claimed and unpublished for a second: the host's
		 * thread left the wrapper between the two (a handler of its
		 * own siglongjmp'd out of it), and would hold every event
		 * behind it for ever: taken back (ring.h). */
		if (!e &&
		    pp_ring_reclaim(&lk.ring, pp_clock_ns(CLOCK_MONOTONIC),
		                    PP_NS_PER_SEC))
			continue;
		if (!e)
			break;
		if (e->kind < PP_LOCKS_NKINDS &&
		    e->depth <= PP_LOCKS_MAX_DEPTH && pp_locks_on())
			table_add(&lk.t[e->kind], e);
		pp_ring_release(&lk.ring);
	}
}

/* ---- lifecycle ----------------------------------------------------------- */

int pp_locks_start(const struct pp_locks_settings *s, char *err, size_t errlen)
{
	lk.cfg = *s;
	pp_mutex_producer.max_open = s->max_open;
	pp_block_producer.max_open = s->max_open;
	if (!s->mutex_rate && !s->block_rate)
		return 0;
	int rc = pp_threads_unwind_ready(err, errlen);
	if (rc)
		return rc;
	pthread_mutex_lock(&lk.mu);
	if (lk.ring_made && lk.ring_stale) {
		/* A forked child's copy of the parent's ring: slots claimed
		 * by threads that are not here would hold the reader up. */
		pp_ring_free(&lk.ring);
		lk.ring_made = 0;
	}
	if (!lk.ring_made) {
		rc = pp_ring_init_size(&lk.ring, RING_EVENTS,
		                       sizeof(struct lk_event), 0);
		lk.ring_made = rc == 0;
		lk.ring_stale = 0;
	}
	if (!rc) {
		/* What a previous agent left (written after its stop). */
		while (pp_ring_peek(&lk.ring))
			pp_ring_release(&lk.ring);
		for (int k = 0; k < PP_LOCKS_NKINDS; k++) {
			table_free(&lk.t[k]);
			atomic_store(&lk.dropped[k], 0);
			atomic_store(&lk.dropped_count[k], 0);
			atomic_store(&lk.dropped_delay[k], 0);
		}
	}
	pthread_mutex_unlock(&lk.mu);
	if (rc) {
		snprintf(err, errlen, "out of memory for the lock events");
		return rc;
	}
	atomic_store(&pp_locks_depth, s->max_depth < PP_LOCKS_MAX_DEPTH
	                                  ? s->max_depth
	                                  : PP_LOCKS_MAX_DEPTH);
	atomic_store(&pp_locks.mutex_rate, s->mutex_rate);
	atomic_store(&pp_locks.block_rate, s->block_rate);
	atomic_store_explicit(&lk.ring_ready, 1, memory_order_release);
	atomic_store(&pp_locks.on, 1);
	pp_jobs_add_ticker(&pp_mutex_producer);
	return 0;
}

void pp_locks_stop(void)
{
	if (!atomic_load(&pp_locks.on))
		return;
	atomic_store(&pp_locks.on, 0);
	/* Waits under way still finish their bookkeeping (record.c reads
	 * the rates); new ones pass straight through. */
	pthread_mutex_lock(&lk.mu);
	for (int k = 0; k < PP_LOCKS_NKINDS; k++)
		table_free(&lk.t[k]);
	pthread_mutex_unlock(&lk.mu);
}

void pp_locks_forget_in_child(void)
{
	atomic_store(&pp_locks.on, 0);
	atomic_store(&lk.ring_ready, 0);
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	memcpy(&lk.mu, &fresh, sizeof fresh);
	lk.ring_stale = lk.ring_made;
	/* The parent's tables are its own: forgotten, not freed (another
	 * thread may have been using the allocator's state at fork). */
	memset(lk.t, 0, sizeof lk.t);
	pp_locks_slots_forget_in_child();
}

/* ---- profiles ----------------------------------------------------------- */

static const struct pp_value_type lk_types[2] = {
    {"contentions", "count"},
    {"delay", "nanoseconds"},
};

static uintptr_t synthetic(struct pp_profile *p, const char *name)
{
	return pp_profile_synthetic_pc(p, name);
}

static int add_entry(struct pp_profile *p, const struct lk_entry *x)
{
	uintptr_t pcs[PP_LOCKS_MAX_DEPTH + 1];
	size_t depth = x->depth;
	memcpy(pcs, x->pcs, depth * sizeof *pcs);
	if (x->truncated &&
	    !(pcs[depth++] = synthetic(p, "[pullprof: stack truncated]")))
		return -ENOMEM;
	int64_t v[2] = {llround(x->count), llround(x->delay)};
	struct pp_label labels[15] = {
	    {"thread_name", x->name[0] ? x->name : "?", 0, NULL},
	};
	size_t n = 1 + pp_labels_to_profile(x->labels, labels + 1, 14);
	return pp_profile_add(p, pcs, depth, v, labels, n);
}

static int add_synthetic(struct pp_profile *p, const char *name, double count,
                         double delay)
{
	uintptr_t pc = synthetic(p, name);
	int64_t v[2] = {llround(count), llround(delay)};
	return pc ? pp_profile_add(p, &pc, 1, v, NULL, 0) : -ENOMEM;
}

static int snapshot(enum pp_locks_kind kind, struct pp_profile **out)
{
	struct pp_profile *p = pp_profile_new(lk_types, 2, &lk_types[0], 1);
	if (!p)
		return -ENOMEM;
	p->leaf_is_return = 1;
	p->max_bytes = lk.cfg.max_profile_bytes;
	p->legacy_title = kind == PP_LOCKS_MUTEX ? "mutex" : "contention";
	int rc = 0;
	pthread_mutex_lock(&lk.mu);
	drain_locked();
	struct lk_table *t = &lk.t[kind];
	for (size_t i = 0; i < t->cap && !rc; i++)
		if (t->slots[i])
			rc = add_entry(p, t->slots[i]);
	if (!rc && t->past)
		rc = add_synthetic(p,
		                   "[pullprof: lock stacks past the table's "
		                   "16384]",
		                   t->past_count, t->past_delay);
	if (!rc && atomic_load(&lk.dropped[kind]))
		rc = add_synthetic(
		    p, "[pullprof: lock events lost, the event ring was full]",
		    (double)atomic_load(&lk.dropped_count[kind]),
		    (double)atomic_load(&lk.dropped_delay[kind]));
	pthread_mutex_unlock(&lk.mu);
	if (rc) {
		pp_profile_free(p);
		return rc;
	}
	pp_profile_set_time(p, (int64_t)pp_clock_ns(CLOCK_REALTIME), 0);
	*out = p;
	return 0;
}

static int kind_on(enum pp_locks_kind kind)
{
	return pp_locks_on() &&
	       (kind == PP_LOCKS_MUTEX ? lk.cfg.mutex_rate : lk.cfg.block_rate);
}

static int lk_check(enum pp_locks_kind kind, char *err, size_t errlen)
{
	if (kind_on(kind))
		return 0;
	snprintf(err, errlen,
	         kind == PP_LOCKS_MUTEX
	             ? "mutex profiling is off in this process "
	               "(PULLPROF_MUTEX_RATE=0): start the program with "
	               "PULLPROF_MUTEX_RATE=N to record 1 in N contended "
	               "unlocks (default %u), or turn the scraper's "
	               "mutex job off"
	             : "block profiling is off in this process "
	               "(PULLPROF_BLOCK_RATE=0): start the program with "
	               "PULLPROF_BLOCK_RATE=NS for one sample per NS "
	               "nanoseconds blocked (default %u), or turn the "
	               "scraper's block job off",
	         kind == PP_LOCKS_MUTEX ? PP_LOCKS_MUTEX_RATE
	                                : PP_LOCKS_BLOCK_RATE);
	return -ENOTSUP;
}

static int mutex_check(const void *query, char *err, size_t errlen)
{
	(void)query;
	return lk_check(PP_LOCKS_MUTEX, err, errlen);
}

static int block_check(const void *query, char *err, size_t errlen)
{
	(void)query;
	return lk_check(PP_LOCKS_BLOCK, err, errlen);
}

static int mutex_snapshot(const void *query, struct pp_profile **out)
{
	(void)query;
	return snapshot(PP_LOCKS_MUTEX, out);
}

static int block_snapshot(const void *query, struct pp_profile **out)
{
	(void)query;
	return snapshot(PP_LOCKS_BLOCK, out);
}

/* The same sentence on counts since the start and on a window's change. */
static void mutex_note(const void *query, int delta, struct pp_profile *p)
{
	char note[200];
	(void)query;
	(void)delta;
	snprintf(note, sizeof note,
	         "pullprof: time others waited for the locks each "
	         "stack unlocked; 1 in %u contended unlocks recorded, "
	         "values scaled",
	         lk.cfg.mutex_rate);
	pp_profile_add_comment(p, note);
}

static void block_note(const void *query, int delta, struct pp_profile *p)
{
	char note[200];
	(void)query;
	(void)delta;
	snprintf(note, sizeof note,
	         "pullprof: time each stack waited; one sample per %u "
	         "ns blocked, values scaled",
	         lk.cfg.block_rate);
	pp_profile_add_comment(p, note);
}

static const struct pp_counts mutex_counts = {
    .query_size = sizeof(struct pp_counts_query),
    .check = mutex_check,
    .snapshot = mutex_snapshot,
    .note = mutex_note,
};

static const struct pp_counts block_counts = {
    .query_size = sizeof(struct pp_counts_query),
    .check = block_check,
    .snapshot = block_snapshot,
    .note = block_note,
};

/* Drain the ring while it has room. (Libraries loaded later get their
 * unwind tables from threadcreate's tick, on the same thread.) */
static void lk_tick(void)
{
	if (!pp_locks_on())
		return;
	pthread_mutex_lock(&lk.mu);
	drain_locked();
	pthread_mutex_unlock(&lk.mu);
}

struct pp_producer pp_mutex_producer = {
    .kind = "mutex",
    .what = "mutex profiles",
    .limit_setting = "PULLPROF_MAX_THREAD_DUMPS",
    .max_open = 4,
    PP_COUNTS_PRODUCER(&mutex_counts),
    .tick = lk_tick,
};

struct pp_producer pp_block_producer = {
    .kind = "block",
    .what = "block profiles",
    .limit_setting = "PULLPROF_MAX_THREAD_DUMPS",
    .max_open = 4,
    PP_COUNTS_PRODUCER(&block_counts),
};

void pp_locks_stats(struct pp_locks_stats *out)
{
	memset(out, 0, sizeof *out);
	int on = pp_locks_on();
	out->mutex_rate = on ? lk.cfg.mutex_rate : 0;
	out->block_rate = on ? lk.cfg.block_rate : 0;
	out->mutex_open = pp_jobs_open(&pp_mutex_producer);
	out->block_open = pp_jobs_open(&pp_block_producer);
	pthread_mutex_lock(&lk.mu);
	for (int k = 0; k < PP_LOCKS_NKINDS; k++) {
		out->events[k] = lk.t[k].events;
		out->stacks[k] = lk.t[k].n;
		out->past_table[k] = lk.t[k].past;
		out->dropped[k] = atomic_load(&lk.dropped[k]);
	}
	pthread_mutex_unlock(&lk.mu);
	out->collisions = pp_locks_collisions();
	out->waiting = atomic_load(&pp_locks.waiting);
}

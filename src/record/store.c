/*
 * The record's memory (record.h): chunks of coded samples, the interned
 * stacks they name, the threads' names, and the savings. One lock guards it
 * all; the collector takes it once per drain, a read for as long as it
 * decodes its range. A saving asked from any thread goes through a small
 * lock-free queue that the collector (or the next read) applies, so that
 * a host thread never waits on a read.
 * pp_record_save() runs on any thread, host threads too.
 * Context: agent.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/sink.h"
#include "record/internal.h"
#include "util/clock.h"
#include "util/hash.h"
#include "util/utf8.h"

struct pp_record_store pp_rec = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* ---- varints ------------------------------------------------------------ */

static size_t put_varint(unsigned char *p, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		p[n++] = (unsigned char)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (unsigned char)v;
	return n;
}

uint64_t pp_record_get_varint(const unsigned char **p, const unsigned char *end)
{
	uint64_t v = 0;
	unsigned shift = 0;
	while (*p < end && shift < 64) {
		unsigned char b = *(*p)++;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			break;
		shift += 7;
	}
	return v;
}

/* ---- stacks ---------------------------------------------------------------
 */

static uint64_t stack_hash(const uintptr_t *pcs, size_t depth)
{
	uint64_t h = pp_hash_u64(depth);
	for (size_t i = 0; i < depth; i++)
		h = pp_hash_mix(h, pcs[i]);
	return h;
}

static size_t stack_size(size_t depth)
{
	return sizeof(struct pp_rstack) + depth * sizeof(uintptr_t);
}

static int index_grow(void)
{
	size_t cap = pp_rec.index_cap ? pp_rec.index_cap * 2 : 1024;
	uint32_t *ix = calloc(cap, sizeof *ix);
	if (!ix)
		return -ENOMEM;
	for (uint32_t id = 1; id < pp_rec.nstacks; id++) {
		struct pp_rstack *s = pp_rec.stacks[id];
		if (!s)
			continue;
		size_t i = s->hash & (cap - 1);
		while (ix[i])
			i = (i + 1) & (cap - 1);
		ix[i] = id;
	}
	pp_rec.bytes -= pp_rec.index_cap * sizeof *ix;
	free(pp_rec.index);
	pp_rec.index = ix;
	pp_rec.index_cap = cap;
	pp_rec.bytes += cap * sizeof *ix;
	return 0;
}

/* The id of this stack (made when new); 0 on ENOMEM. */
static uint32_t intern(const uintptr_t *pcs, size_t depth, uint64_t seq)
{
	uint64_t h = stack_hash(pcs, depth);
	if (pp_rec.index_cap) {
		size_t i = h & (pp_rec.index_cap - 1);
		uint32_t id;
		while ((id = pp_rec.index[i]) != 0) {
			struct pp_rstack *s = pp_rec.stacks[id];
			if (s->hash == h && s->depth == depth &&
			    !memcmp(s->pcs, pcs, depth * sizeof *pcs)) {
				s->last_seq = seq;
				return id;
			}
			i = (i + 1) & (pp_rec.index_cap - 1);
		}
	}
	/* New: the index stays under half full. */
	if ((pp_rec.live_stacks + 1) * 2 > pp_rec.index_cap &&
	    index_grow() != 0)
		return 0;
	uint32_t id;
	if (pp_rec.free_ids) {
		id = pp_rec.free_list[--pp_rec.free_ids];
	} else {
		if (pp_rec.nstacks == pp_rec.stacks_cap) {
			/* The free list has a place for every id. */
			size_t cap =
			    pp_rec.stacks_cap ? pp_rec.stacks_cap * 2 : 1024;
			void *n = realloc(pp_rec.stacks, cap * sizeof(void *));
			if (!n)
				return 0;
			pp_rec.stacks = n;
			n = realloc(pp_rec.free_list, cap * sizeof(uint32_t));
			if (!n)
				return 0;
			pp_rec.free_list = n;
			pp_rec.bytes += (cap - pp_rec.stacks_cap) *
			                (sizeof(void *) + sizeof(uint32_t));
			pp_rec.stacks_cap = cap;
			if (!pp_rec.nstacks)
				pp_rec.stacks[pp_rec.nstacks++] = NULL; /* 0 */
		}
		id = (uint32_t)pp_rec.nstacks++;
	}
	struct pp_rstack *s = malloc(stack_size(depth));
	if (!s) {
		pp_rec.free_list[pp_rec.free_ids++] = id;
		return 0;
	}
	s->hash = h;
	s->last_seq = seq;
	s->depth = (uint32_t)depth;
	memcpy(s->pcs, pcs, depth * sizeof *pcs);
	pp_rec.stacks[id] = s;
	pp_rec.live_stacks++;
	pp_rec.stack_bytes += stack_size(depth);
	pp_rec.bytes += stack_size(depth);
	pp_rec.stats_stacks++;
	size_t i = h & (pp_rec.index_cap - 1);
	while (pp_rec.index[i])
		i = (i + 1) & (pp_rec.index_cap - 1);
	pp_rec.index[i] = id;
	return id;
}

/* The oldest chunk sequence number any chunk still held has: stacks and
 * names last used before it are no one's. */
static uint64_t oldest_live_seq(void)
{
	uint64_t min = pp_rec.newest ? pp_rec.newest->seq + 1 : pp_rec.next_seq;
	if (pp_rec.oldest && pp_rec.oldest->seq < min)
		min = pp_rec.oldest->seq;
	for (unsigned i = 0; i < pp_rec.nsavings; i++) {
		const struct pp_rsaving *sv = &pp_rec.savings[i];
		if (sv->nchunks && sv->chunks[0]->seq < min)
			min = sv->chunks[0]->seq;
	}
	return min;
}

static void note_name(uint32_t tid, const char *name, uint64_t seq);

/* Free the stacks and names no chunk refers to; the index is made again. */
static void compact(void)
{
	uint64_t min = oldest_live_seq();
	size_t before = pp_rec.live_stacks;
	for (uint32_t id = 1; id < pp_rec.nstacks; id++) {
		struct pp_rstack *s = pp_rec.stacks[id];
		if (!s || s->last_seq >= min)
			continue;
		pp_rec.stack_bytes -= stack_size(s->depth);
		pp_rec.bytes -= stack_size(s->depth);
		free(s);
		pp_rec.stacks[id] = NULL;
		pp_rec.live_stacks--;
		pp_rec.stats_stacks_freed++;
		/* free_list has room for every id ever made (below). */
		pp_rec.free_list[pp_rec.free_ids++] = id;
	}
	if (pp_rec.live_stacks != before && pp_rec.index_cap) {
		memset(pp_rec.index, 0,
		       pp_rec.index_cap * sizeof *pp_rec.index);
		for (uint32_t id = 1; id < pp_rec.nstacks; id++) {
			struct pp_rstack *s = pp_rec.stacks[id];
			if (!s)
				continue;
			size_t i = s->hash & (pp_rec.index_cap - 1);
			while (pp_rec.index[i])
				i = (i + 1) & (pp_rec.index_cap - 1);
			pp_rec.index[i] = id;
		}
	}
	/* A name's place is freed only with the whole table's order kept:
	 * open addressing cannot have holes, so names are dropped all at
	 * once when most are stale. */
	size_t stale = 0, used = 0;
	for (size_t i = 0; i < PP_RECORD_NAMES; i++)
		if (pp_rec.names[i].tid) {
			used++;
			stale += pp_rec.names[i].last_seq < min;
		}
	if (used > PP_RECORD_NAMES / 2 && stale * 2 > used) {
		struct pp_rname *keep = pp_rec.names;
		struct pp_rname *fresh = calloc(PP_RECORD_NAMES, sizeof *fresh);
		if (fresh) {
			pp_rec.names = fresh;
			for (size_t i = 0; i < PP_RECORD_NAMES; i++)
				if (keep[i].tid && keep[i].last_seq >= min)
					note_name(keep[i].tid, keep[i].name,
					          keep[i].last_seq);
			free(keep);
		}
	}
	pp_rec.dropped_since_compact = 0;
}

/* ---- thread names ---------------------------------------------------------
 */

static void note_name(uint32_t tid, const char *name, uint64_t seq)
{
	if (!pp_rec.names)
		return;
	size_t i = pp_hash_u64(tid) & (PP_RECORD_NAMES - 1);
	for (size_t n = 0; n < PP_RECORD_NAMES; n++) {
		struct pp_rname *e = &pp_rec.names[i];
		if (e->tid == tid || !e->tid) {
			if (e->tid != tid || strcmp(e->name, name))
				snprintf(e->name, sizeof e->name, "%s", name);
			e->tid = tid;
			e->last_seq = seq;
			return;
		}
		i = (i + 1) & (PP_RECORD_NAMES - 1);
	}
	/* Full (8192 threads within the span): the name is not kept. */
}

const char *pp_record_name_of(uint32_t tid)
{
	if (!pp_rec.names)
		return "";
	size_t i = pp_hash_u64(tid) & (PP_RECORD_NAMES - 1);
	for (size_t n = 0; n < PP_RECORD_NAMES; n++) {
		const struct pp_rname *e = &pp_rec.names[i];
		if (e->tid == tid)
			return e->name;
		if (!e->tid)
			return "";
		i = (i + 1) & (PP_RECORD_NAMES - 1);
	}
	return "";
}

/* ---- chunks ---------------------------------------------------------------
 */

static void chunk_unref(struct pp_rchunk *c)
{
	if (--c->refs)
		return;
	pp_rec.chunk_bytes -= sizeof *c;
	pp_rec.bytes -= sizeof *c;
	pp_rec.dropped_since_compact++;
	free(c);
}

static struct pp_rchunk *new_chunk(uint64_t t)
{
	struct pp_rchunk *c = malloc(sizeof *c);
	if (!c)
		return NULL;
	memset(c, 0, offsetof(struct pp_rchunk, data));
	c->seq = pp_rec.next_seq++;
	c->refs = 1; /* the ring's */
	c->first_ns = c->last_ns = c->prev_ns = c->base_ns = t;
	pp_rec.chunk_bytes += sizeof *c;
	pp_rec.bytes += sizeof *c;
	if (pp_rec.newest)
		pp_rec.newest->next = c;
	else
		pp_rec.oldest = c;
	pp_rec.newest = c;
	return c;
}

/* The ring's oldest chunk goes (its samples counted as aged out or
 * dropped). */
static void drop_oldest(int aged)
{
	struct pp_rchunk *c = pp_rec.oldest;
	pp_rec.oldest = c->next;
	if (!pp_rec.oldest)
		pp_rec.newest = NULL;
	c->next = NULL;
	pp_rec.samples_kept -= c->nsamples;
	if (aged)
		pp_rec.samples_aged += c->nsamples;
	else
		pp_rec.samples_dropped += c->nsamples;
	pp_rec.chunks_dropped++;
	chunk_unref(c);
}

/* ---- adding (the collector) -----------------------------------------------
 */

static uint64_t thread_cpu_ns(void)
{
	return pp_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

void pp_record_begin(pthread_mutex_t *held)
{
	/* A read may hold the record's lock for a while: the caller's lock
	 * (the CPU state's, which a window's open takes on the HTTP thread)
	 * is let go meanwhile. Only the collector takes both, so the order
	 * does not matter. */
	if (pthread_mutex_trylock(&pp_rec.mu) != 0) {
		pthread_mutex_unlock(held);
		pthread_mutex_lock(&pp_rec.mu);
		pthread_mutex_lock(held);
	}
	atomic_store_explicit(&pp_rec.drained_at, pp_clock_ns(CLOCK_MONOTONIC),
	                      memory_order_release);
	pp_rec.batch_cpu = thread_cpu_ns();
}

static void append(const struct pp_ring_rec *rec, uint32_t stack,
                   unsigned flags)
{
	/* A sample is at most 1 + 5 varints of 10 bytes. */
	unsigned char buf[64], *p = buf;
	struct pp_rchunk *c = pp_rec.newest;
	if (!c || c->sealed || c->used + sizeof buf > PP_RECORD_CHUNK_DATA) {
		c = new_chunk(rec->time_ns);
		if (!c) {
			pp_rec.samples_dropped++;
			return;
		}
	}
	if (rec->weight != 1)
		flags |= PP_RS_WEIGHT;
	if (rec->period_ns != c->prev_period)
		flags |= PP_RS_PERIOD;
	*p++ = (unsigned char)flags;
	/* Times in microseconds, zigzag: the ring's order is the order
	 * slots were claimed, a few microseconds off the samples' own. */
	int64_t dt = ((int64_t)rec->time_ns - (int64_t)c->prev_ns) / 1000;
	p += put_varint(p, ((uint64_t)dt << 1) ^ (uint64_t)(dt >> 63));
	c->prev_ns += (uint64_t)(dt * 1000);
	p += put_varint(p, rec->tid);
	p += put_varint(p, stack);
	p += put_varint(p, rec->labels);
	if (flags & PP_RS_WEIGHT)
		p += put_varint(p, rec->weight);
	if (flags & PP_RS_PERIOD) {
		p += put_varint(p, rec->period_ns);
		c->prev_period = rec->period_ns;
	}
	memcpy(c->data + c->used, buf, (size_t)(p - buf));
	c->used += (size_t)(p - buf);
	if (rec->time_ns > c->last_ns)
		c->last_ns = rec->time_ns;
	if (rec->time_ns < c->first_ns)
		c->first_ns = rec->time_ns;
	c->nsamples++;
	pp_rec.samples_kept++;
	pp_rec.samples_added++;
}

void pp_record_add(const struct pp_ring_rec *rec, const char *thread_name)
{
	if (!pp_rec.on)
		return;
	uint64_t seq = pp_rec.newest ? pp_rec.newest->seq : pp_rec.next_seq;
	unsigned flags = 0;
	if (rec->flags & PP_REC_TRUNCATED)
		flags |= PP_RS_TRUNCATED;
	if (rec->flags & PP_REC_EXIT)
		flags |= PP_RS_EXIT;
	/* A chunk about to be made has the next number. */
	if (!pp_rec.newest || pp_rec.newest->sealed ||
	    pp_rec.newest->used + 64 > PP_RECORD_CHUNK_DATA)
		seq = pp_rec.next_seq;
	uint32_t id = rec->depth ? intern(rec->pcs, rec->depth, seq) : 0;
	if (rec->depth && !id) {
		pp_rec.samples_dropped++;
		return;
	}
	note_name(rec->tid, thread_name ? thread_name : "", seq);
	pp_rec.last_period = rec->period_ns;
	append(rec, id, flags);
}

void pp_record_remap(uintptr_t (*fn)(uintptr_t, void *), void *arg)
{
	int changed = 0;
	for (uint32_t id = 1; id < pp_rec.nstacks; id++) {
		struct pp_rstack *s = pp_rec.stacks[id];
		if (!s)
			continue;
		int mine = 0;
		for (uint32_t i = 0; i < s->depth; i++) {
			uintptr_t to = fn(s->pcs[i], arg);
			mine |= to != s->pcs[i];
			s->pcs[i] = to;
		}
		if (mine)
			s->hash = stack_hash(s->pcs, s->depth);
		changed |= mine;
	}
	if (!changed || !pp_rec.index_cap)
		return;
	/* The index again, at its size (two stacks that became the same
	 * stay two ids: the first is found). */
	size_t cap = pp_rec.index_cap;
	memset(pp_rec.index, 0, cap * sizeof *pp_rec.index);
	for (uint32_t id = 1; id < pp_rec.nstacks; id++) {
		struct pp_rstack *s = pp_rec.stacks[id];
		if (!s)
			continue;
		size_t i = s->hash & (cap - 1);
		while (pp_rec.index[i])
			i = (i + 1) & (cap - 1);
		pp_rec.index[i] = id;
	}
}

/* Samples the ring had to drop: one entry charged to a frame of its own,
 * as a window does. */
void pp_record_add_lost(uint64_t n, uint64_t t)
{
	if (!pp_rec.on || !n)
		return;
	struct pp_ring_rec rec = {.time_ns = t,
	                          .weight = (uint32_t)n,
	                          .period_ns = pp_rec.last_period};
	append(&rec, 0, PP_RS_LOST);
}

static void apply_saves(void);
static size_t saved_only_bytes(void);

void pp_record_end(void)
{
	if (pp_rec.on) {
		apply_saves();
		uint64_t newest = pp_rec.newest ? pp_rec.newest->last_ns : 0;
		/* Older than the span, then over the bound: the ring's
		 * oldest chunks go (never the one being filled). */
		while (pp_rec.oldest && pp_rec.oldest != pp_rec.newest &&
		       pp_rec.oldest->last_ns + pp_rec.span_ns < newest)
			drop_oldest(1);
		while (pp_rec.bytes > pp_rec.bound && pp_rec.oldest &&
		       pp_rec.oldest != pp_rec.newest)
			drop_oldest(0);
		if (pp_rec.dropped_since_compact >= 4 ||
		    (pp_rec.dropped_since_compact &&
		     pp_rec.bytes > pp_rec.bound))
			compact();
		/* Still over with one chunk left (its new stacks alone are
		 * past the bound: many threads, deep and varied stacks): it
		 * is closed, so that the next batch's end can let it go. */
		if (pp_rec.bytes > pp_rec.bound && pp_rec.newest)
			pp_rec.newest->sealed = 1;
	}
	pp_rec.add_cpu_ns += thread_cpu_ns() - pp_rec.batch_cpu;
	pthread_mutex_unlock(&pp_rec.mu);
}

/* ---- savings ---------------------------------------------------------------
 */

static void saving_free(struct pp_rsaving *sv)
{
	if (sv->by != PP_RECORD_BY_ANONYMOUS)
		atomic_fetch_sub(&pp_rec.nranked, 1);
	pp_record_snaps_unpin(sv->pins);
	for (size_t i = 0; i < sv->nchunks; i++)
		chunk_unref(sv->chunks[i]);
	free(sv->chunks);
	memset(sv, 0, sizeof *sv);
}

static void saving_drop(unsigned i)
{
	saving_free(&pp_rec.savings[i]);
	memmove(&pp_rec.savings[i], &pp_rec.savings[i + 1],
	        (pp_rec.nsavings - i - 1) * sizeof pp_rec.savings[0]);
	pp_rec.nsavings--;
	memset(&pp_rec.savings[pp_rec.nsavings], 0, sizeof pp_rec.savings[0]);
	pp_rec.savings_dropped++;
}

/* The saving to let go first among those of one rank (anonymous or
 * not): the oldest fetched one, else the oldest; -1 when none is of it. */
static int first_out(int anonymous)
{
	int oldest = -1;
	for (unsigned i = 0; i < pp_rec.nsavings; i++) {
		const struct pp_rsaving *sv = &pp_rec.savings[i];
		if ((sv->by == PP_RECORD_BY_ANONYMOUS) != anonymous)
			continue;
		if (sv->fetched)
			return (int)i;
		if (oldest < 0)
			oldest = (int)i;
	}
	return oldest;
}

/* Room for one more saving asked by `by`: the anonymous go first; an
 * anonymous ask never takes a ranked one's place (0: room made, -1: the
 * ask is refused). */
static int make_room(enum pp_record_by by)
{
	if (pp_rec.nsavings < PP_RECORD_MAX_SAVINGS)
		return 0;
	int victim = first_out(1);
	if (victim < 0 && by != PP_RECORD_BY_ANONYMOUS)
		victim = first_out(0);
	if (victim < 0)
		return -1;
	saving_drop((unsigned)victim);
	return 0;
}

static void apply_one(const struct pp_rsave_ask *a)
{
	if (make_room(a->by)) {
		atomic_fetch_add(&pp_rec.saves_outranked, 1);
		return;
	}
	struct pp_rsaving *sv = &pp_rec.savings[pp_rec.nsavings];
	memset(sv, 0, sizeof *sv);
	sv->id = a->id;
	sv->by = a->by;
	sv->saved_real_ns = a->real_ns;
	sv->end_ns = a->mono_ns;
	sv->start_ns = a->mono_ns > a->last_ns ? a->mono_ns - a->last_ns : 0;
	memcpy(sv->reason, a->reason, sizeof sv->reason);
	size_t n = 0;
	for (struct pp_rchunk *c = pp_rec.oldest; c; c = c->next)
		if (c->last_ns >= sv->start_ns && c->first_ns <= sv->end_ns)
			n++;
	sv->chunks = n ? malloc(n * sizeof *sv->chunks) : NULL;
	if (n && !sv->chunks) {
		pp_rec.savings_failed++;
		memset(sv, 0, sizeof *sv);
		return;
	}
	for (struct pp_rchunk *c = pp_rec.oldest; c; c = c->next)
		if (c->last_ns >= sv->start_ns && c->first_ns <= sv->end_ns) {
			c->refs++;
			sv->chunks[sv->nchunks++] = c;
		}
	sv->pins = pp_record_snaps_pin(sv->start_ns, sv->end_ns);
	/* Where the ring reached less far back, the saving says so. */
	if (sv->nchunks && sv->chunks[0]->first_ns > sv->start_ns)
		sv->start_ns = sv->chunks[0]->first_ns;
	if (sv->by != PP_RECORD_BY_ANONYMOUS)
		atomic_fetch_add(&pp_rec.nranked, 1);
	pp_rec.nsavings++;
}

static void apply_saves(void)
{
	for (unsigned i = 0; i < PP_RECORD_SAVE_QUEUE; i++) {
		struct pp_rsave_ask *a = &pp_rec.asks[i];
		if (atomic_load_explicit(&a->state, memory_order_acquire) != 2)
			continue;
		apply_one(a);
		atomic_store_explicit(&a->state, 0, memory_order_release);
	}
	/* Savings hold at most half the bound beyond the ring: the oldest
	 * anonymous go first, then the oldest. */
	while (pp_rec.nsavings > 1 && saved_only_bytes() > pp_rec.bound / 2) {
		int victim = -1;
		for (unsigned i = 0; i < pp_rec.nsavings && victim < 0; i++)
			if (pp_rec.savings[i].by == PP_RECORD_BY_ANONYMOUS)
				victim = (int)i;
		saving_drop(victim < 0 ? 0 : (unsigned)victim);
	}
}

/* Bytes of chunks only savings hold (the ring dropped them). */
static size_t saved_only_bytes(void)
{
	size_t n = 0;
	uint64_t ring_oldest = pp_rec.oldest ? pp_rec.oldest->seq : UINT64_MAX;
	for (unsigned i = 0; i < pp_rec.nsavings; i++) {
		const struct pp_rsaving *sv = &pp_rec.savings[i];
		for (size_t k = 0; k < sv->nchunks; k++) {
			const struct pp_rchunk *c = sv->chunks[k];
			if (c->seq >= ring_oldest)
				continue;
			/* Counted once: by the first saving that holds it. */
			int first = 1;
			for (unsigned j = 0; j < i && first; j++)
				for (size_t m = 0;
				     m < pp_rec.savings[j].nchunks; m++)
					if (pp_rec.savings[j].chunks[m] == c) {
						first = 0;
						break;
					}
			if (first)
				n += sizeof *c;
		}
	}
	return n;
}

int pp_record_save(const char *reason, uint64_t last_ns, enum pp_record_by by,
                   uint64_t *id)
{
	if (!atomic_load_explicit(&pp_rec.on_atomic, memory_order_acquire))
		return -ENOTSUP;
	if (by == PP_RECORD_BY_ANONYMOUS &&
	    atomic_load(&pp_rec.nranked) >= PP_RECORD_MAX_SAVINGS) {
		atomic_fetch_add(&pp_rec.saves_outranked, 1);
		return -ENOSPC;
	}
	if (!last_ns || last_ns > pp_rec.span_ns)
		last_ns = pp_rec.span_ns;
	for (unsigned i = 0; i < PP_RECORD_SAVE_QUEUE; i++) {
		struct pp_rsave_ask *a = &pp_rec.asks[i];
		int free_state = 0;
		if (!atomic_compare_exchange_strong(&a->state, &free_state, 1))
			continue;
		a->mono_ns = pp_clock_ns(CLOCK_MONOTONIC);
		a->real_ns = (int64_t)pp_clock_ns(CLOCK_REALTIME);
		a->last_ns = last_ns;
		a->by = by;
		a->id = atomic_fetch_add(&pp_rec.next_saving, 1) + 1;
		const char *r = reason ? reason : "";
		size_t len = strnlen(r, sizeof a->reason - 1);
		/* Whole characters only: a cut one would be U+FFFD. */
		len = pp_utf8_valid_prefix(r, len);
		memcpy(a->reason, r, len);
		a->reason[len] = 0;
		if (id)
			*id = a->id;
		atomic_store_explicit(&a->state, 2, memory_order_release);
		return 0;
	}
	atomic_fetch_add(&pp_rec.saves_refused, 1);
	return -EBUSY;
}

/* ---- lifecycle --------------------------------------------------------------
 */

int pp_record_open(const struct pp_record_settings *s)
{
	pthread_mutex_lock(&pp_rec.mu);
	pp_rec.span_ns = s->span_ns;
	pp_rec.hz = s->hz;
	pp_rec.total_bound = s->bound;
	pp_rec.bound = s->bound - s->bound / 4;
	pp_rec.real_offset = (int64_t)pp_clock_ns(CLOCK_REALTIME) -
	                     (int64_t)pp_clock_ns(CLOCK_MONOTONIC);
	pp_rec.started_ns = pp_clock_ns(CLOCK_MONOTONIC);
	pp_rec.stopped[0] = 0;
	pp_rec.ngaps = 0;
	pp_rec.names = calloc(PP_RECORD_NAMES, sizeof *pp_rec.names);
	if (!pp_rec.names) {
		pthread_mutex_unlock(&pp_rec.mu);
		return -ENOMEM;
	}
	pp_rec.bytes += PP_RECORD_NAMES * sizeof *pp_rec.names;
	pp_rec.on = 1;
	atomic_store(&pp_rec.on_atomic, 1);
	pthread_mutex_unlock(&pp_rec.mu);
	return 0;
}

void pp_record_close(void)
{
	pthread_mutex_lock(&pp_rec.mu);
	atomic_store(&pp_rec.on_atomic, 0);
	pp_rec.on = 0;
	for (unsigned i = 0; i < pp_rec.nsavings; i++)
		saving_free(&pp_rec.savings[i]);
	pp_rec.nsavings = 0;
	while (pp_rec.oldest) {
		struct pp_rchunk *c = pp_rec.oldest;
		pp_rec.oldest = c->next;
		chunk_unref(c);
	}
	pp_rec.newest = NULL;
	for (uint32_t id = 1; id < pp_rec.nstacks; id++)
		free(pp_rec.stacks[id]);
	free(pp_rec.stacks);
	free(pp_rec.index);
	free(pp_rec.free_list);
	pp_rec.stacks = NULL;
	pp_rec.index = NULL;
	pp_rec.free_list = NULL;
	pp_rec.nstacks = pp_rec.stacks_cap = pp_rec.index_cap = 0;
	pp_rec.free_ids = pp_rec.live_stacks = 0;
	pp_rec.bytes = pp_rec.stack_bytes = pp_rec.chunk_bytes = 0;
	free(pp_rec.names);
	pp_rec.names = NULL;
	pp_rec.samples_kept = 0;
	pthread_mutex_unlock(&pp_rec.mu);
}

void pp_record_forget_in_child(void)
{
	/* The lock may be held by a parent thread that is not here: a
	 * fresh one, and the memory is left as it is. */
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	memcpy(&pp_rec.mu, &fresh, sizeof fresh);
	atomic_store(&pp_rec.on_atomic, 0);
	pp_rec.on = 0;
	pp_rec.oldest = pp_rec.newest = NULL;
	pp_rec.names = NULL;
	pp_rec.stacks = NULL;
	pp_rec.index = NULL;
	pp_rec.free_list = NULL;
	pp_rec.nstacks = pp_rec.stacks_cap = pp_rec.index_cap = 0;
	pp_rec.free_ids = pp_rec.live_stacks = 0;
	pp_rec.nsavings = 0;
	memset(pp_rec.savings, 0, sizeof pp_rec.savings);
	atomic_store(&pp_rec.nranked, 0);
	pp_rec.bytes = pp_rec.stack_bytes = pp_rec.chunk_bytes = 0;
}

unsigned pp_record_hz(void)
{
	/* Acquire: hz (and the clock offset) were written before on. */
	return atomic_load_explicit(&pp_rec.on_atomic, memory_order_acquire)
	           ? pp_rec.hz
	           : 0;
}

void pp_record_stopped(const char *why)
{
	pthread_mutex_lock(&pp_rec.mu);
	snprintf(pp_rec.stopped, sizeof pp_rec.stopped, "%s", why);
	pthread_mutex_unlock(&pp_rec.mu);
}

void pp_record_gap_open(uint64_t now_ns, const char *why)
{
	pthread_mutex_lock(&pp_rec.mu);
	if (pp_rec.ngaps == PP_RECORD_MAX_GAPS) {
		memmove(pp_rec.gaps, pp_rec.gaps + 1,
		        (PP_RECORD_MAX_GAPS - 1) * sizeof *pp_rec.gaps);
		pp_rec.ngaps--;
	}
	struct pp_record_gap *g = &pp_rec.gaps[pp_rec.ngaps++];
	memset(g, 0, sizeof *g);
	g->start_ns = now_ns;
	snprintf(g->why, sizeof g->why, "%s", why);
	pthread_mutex_unlock(&pp_rec.mu);
}

void pp_record_gap_close(uint64_t now_ns, const char *signal)
{
	pthread_mutex_lock(&pp_rec.mu);
	if (pp_rec.ngaps && !pp_rec.gaps[pp_rec.ngaps - 1].end_ns) {
		struct pp_record_gap *g = &pp_rec.gaps[pp_rec.ngaps - 1];
		g->end_ns = now_ns > g->start_ns ? now_ns : g->start_ns + 1;
		snprintf(g->signal, sizeof g->signal, "%s", signal);
	}
	pthread_mutex_unlock(&pp_rec.mu);
}

void pp_record_gap_notes(struct pp_profile *p, uint64_t start_ns,
                         uint64_t end_ns)
{
	char note[400], a[40], b[40];
	for (unsigned i = 0; i < pp_rec.ngaps; i++) {
		const struct pp_record_gap *g = &pp_rec.gaps[i];
		uint64_t gend = g->end_ns ? g->end_ns : UINT64_MAX;
		if (gend < start_ns || g->start_ns > end_ns)
			continue;
		pp_record_rfc3339(g->start_ns, a, sizeof a);
		if (g->end_ns) {
			pp_record_rfc3339(g->end_ns, b, sizeof b);
			snprintf(note, sizeof note,
			         "no samples from %s to %s (%.3f s): %s; "
			         "sampling went on with %s",
			         a, b, (double)(g->end_ns - g->start_ns) / 1e9,
			         g->why, g->signal);
		} else {
			snprintf(note, sizeof note, "no samples from %s on: %s",
			         a, g->why);
		}
		pp_profile_add_comment(p, note);
	}
}

uint64_t pp_record_visible_oldest(void)
{
	if (!pp_rec.oldest)
		return 0;
	uint64_t now = pp_clock_ns(CLOCK_MONOTONIC);
	uint64_t cut = now > pp_rec.span_ns ? now - pp_rec.span_ns : 0;
	uint64_t first = pp_rec.oldest->first_ns;
	if (first < cut)
		first = cut;
	return first <= pp_rec.newest->last_ns ? first : 0;
}

uint64_t pp_record_visible_newest(void)
{
	return pp_record_visible_oldest() ? pp_rec.newest->last_ns : 0;
}

int64_t pp_record_real_of(uint64_t mono_ns)
{
	return (int64_t)mono_ns + pp_rec.real_offset;
}

void pp_record_stats(struct pp_record_stats *o)
{
	memset(o, 0, sizeof *o);
	pthread_mutex_lock(&pp_rec.mu);
	apply_saves();
	o->on = pp_rec.on;
	o->hz = pp_rec.hz;
	o->span_ns = pp_rec.span_ns;
	o->bound = pp_rec.total_bound;
	o->bytes = pp_rec.bytes;
	o->stack_bytes = pp_rec.stack_bytes;
	o->chunk_bytes = pp_rec.chunk_bytes;
	o->saved_bytes = pp_rec.on ? saved_only_bytes() : 0;
	for (const struct pp_rchunk *c = pp_rec.oldest; c; c = c->next)
		o->coded_bytes += c->used;
	if (pp_record_visible_oldest()) {
		o->oldest_ns = pp_record_visible_oldest();
		o->newest_ns = pp_record_visible_newest();
		o->oldest_real_ns = pp_record_real_of(o->oldest_ns);
		o->newest_real_ns = pp_record_real_of(o->newest_ns);
	}
	o->started_ns = pp_rec.started_ns;
	o->samples_kept = pp_rec.samples_kept;
	o->samples_added = pp_rec.samples_added;
	o->samples_dropped = pp_rec.samples_dropped;
	o->samples_aged = pp_rec.samples_aged;
	o->chunks_dropped = pp_rec.chunks_dropped;
	o->stacks = pp_rec.live_stacks;
	o->stacks_made = pp_rec.stats_stacks;
	o->stacks_freed = pp_rec.stats_stacks_freed;
	o->add_cpu_ns = pp_rec.add_cpu_ns;
	o->read_cpu_ns = pp_rec.read_cpu_ns;
	o->reads = pp_rec.reads;
	o->savings_dropped = pp_rec.savings_dropped;
	o->saves_refused = atomic_load(&pp_rec.saves_refused);
	o->saves_outranked = atomic_load(&pp_rec.saves_outranked);
	snprintf(o->stopped, sizeof o->stopped, "%s", pp_rec.stopped);
	o->ngaps = pp_rec.ngaps;
	memcpy(o->gaps, pp_rec.gaps, pp_rec.ngaps * sizeof *o->gaps);
	o->nsavings = pp_rec.nsavings;
	for (unsigned i = 0; i < pp_rec.nsavings; i++) {
		const struct pp_rsaving *sv = &pp_rec.savings[i];
		struct pp_record_saving_info *si = &o->savings[i];
		si->id = sv->id;
		si->saved_real_ns = sv->saved_real_ns;
		si->start_ns = sv->start_ns;
		si->end_ns = sv->end_ns;
		si->start_real_ns = pp_record_real_of(sv->start_ns);
		si->end_real_ns = pp_record_real_of(sv->end_ns);
		for (size_t k = 0; k < sv->nchunks; k++) {
			si->samples += sv->chunks[k]->nsamples;
			si->bytes += sizeof *sv->chunks[k];
		}
		si->fetched = sv->fetched;
		si->by = sv->by;
		memcpy(si->reason, sv->reason, sizeof si->reason);
	}
	pthread_mutex_unlock(&pp_rec.mu);
}

const struct pp_cpu_sink pp_record_sink = {
    .hz = pp_record_hz,
    .begin = pp_record_begin,
    .add = pp_record_add,
    .remap = pp_record_remap,
    .add_lost = pp_record_add_lost,
    .end = pp_record_end,
    .gap_open = pp_record_gap_open,
    .gap_close = pp_record_gap_close,
    .stopped = pp_record_stopped,
};

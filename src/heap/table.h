/*
 * The tables of sampled allocations, behind one lock. The record/remove
 * side runs in the allocating thread (it never allocates,
 * only maps memory), the snapshot side in the agent.
 *
 * A bucket is one (stack, allocation size, label set): its counters are sampled
 * allocations and sampled frees, so in-use = allocs - frees, and every
 * allocation in it had the same probability of being sampled.
 * Context: host.
 */
#ifndef PP_HEAP_TABLE_H
#define PP_HEAP_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "heap/heap.h"

/* Agent context: set up empty tables for this sampling rate / forget them
 * (no capture may be running: sample.c makes sure). */
int pp_heap_table_open(uint64_t rate);
void pp_heap_table_close(void);

/* Hot context: p (size bytes) was sampled with this stack, whose capture
 * took unwind_ns (0: not timed). pool: a block of the host's own pools
 * (pullprof_heap_alloc), recorded apart from malloc's: only
 * pullprof_heap_free and pullprof_heap_release take it out. Returns 0, or
 * -ENOMEM when the sample was dropped. */
int pp_heap_table_record(void *p, size_t size, const uintptr_t *pcs,
                         unsigned depth, int why, uint64_t unwind_ns,
                         uint32_t labels, int pool);

/* The pool API's part of the counts (also in pp_heap_stats's totals:
 * sampled, sampled_freed, live_objects). */
struct pp_heap_pool_stats {
	uint64_t sampled;  /* pool blocks sampled */
	uint64_t freed;    /* of them, freed one by one */
	uint64_t released; /* of them, gone with a release of their range */
	uint64_t replaced; /* of them, gone as their address was reported
	                      again */
	uint64_t live;     /* still in the index */
	uint64_t index_bytes;
};
void pp_heap_table_pool_stats(struct pp_heap_pool_stats *out);

/* The unsampling factor of an allocation of size bytes: 1 / P(sampled). */
double pp_heap_scale(uint64_t size, uint64_t rate);

struct pp_heap_row {
	const uintptr_t *pcs; /* valid until the tables close */
	uint32_t depth;
	int truncated;
	uint64_t size;
	uint32_t labels;        /* the label set (labels/labels.h) */
	uint64_t allocs, frees; /* sampled counts */
};

struct pp_heap_snapshot {
	struct pp_heap_row *rows; /* malloc'ed; row i is bucket i */
	size_t n;
	uint64_t rate;
	double peak_bytes, peak_time; /* for peak snapshots */
};

/* Agent context. Copy every bucket's counters now, or (peak) as they were
 * when the estimated in-use total was highest; reset then starts a new
 * peak from now. 0 or -ENOMEM / -ESHUTDOWN. */
int pp_heap_table_snapshot(int peak, int reset, struct pp_heap_snapshot *out);

void pp_heap_table_stats(struct pp_heap_stats *out);

/* Registers the table's fork handlers (once). The agent calls it before
 * registering its own: its lifecycle lock is held while the table's lock
 * is taken, so fork() (prepare handlers run in reverse) must take them in
 * that order too. */
void pp_heap_table_register_atfork(void);

#endif

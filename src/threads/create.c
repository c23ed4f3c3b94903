/*
 * The threadcreate profile: the stacks that created threads, a count each,
 * since the agent started (Go's `threadcreate`). pp_threadcreate_record is
 * the interposed pthread_create calls it on the creating
 * thread after a successful creation; it captures the caller's stack and
 * counts it in a table under a lock of its own (never taken while the
 * profiler holds another). The producer (agent context) copies the table
 * into a model; ?seconds=N is the change over a window.
 * Context: host.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bounds.h"
#include "profile/counts.h"
#include "threads/internal.h"
#include "unwind/unwind.h"
#include "util/clock.h"

#define TC_SLOTS 8192u /* open addressing: at most half used */
#define TC_MAX_STACKS 4096u
#define TC_DEPTH 64u

struct tc_entry {
	uint64_t hash, count;
	uint32_t depth;
	uintptr_t pcs[];
};

static struct {
	pthread_mutex_t mu;
	struct tc_entry **slots; /* TC_SLOTS, allocated when recording starts */
	size_t n;
	uint64_t full; /* creations past TC_MAX_STACKS distinct stacks */
	unsigned depth;
	_Atomic int on;
} tc = {.mu = PTHREAD_MUTEX_INITIALIZER};

static uint64_t hash_pcs(const uintptr_t *pcs, unsigned n)
{
	uint64_t h = 1469598103934665603ull;
	for (unsigned i = 0; i < n; i++)
		h = (h ^ pcs[i]) * 1099511628211ull;
	return h ? h : 1;
}

int pp_threadcreate_on(void)
{
	return atomic_load_explicit(&tc.on, memory_order_relaxed);
}

void pp_threadcreate_record(uintptr_t from)
{
	uintptr_t pcs[TC_DEPTH + PP_UNWIND_SKIP_ROOM];
	unsigned n = pp_unwind_capture_caller(from, pcs, tc.depth);
	if (!n)
		return;
	uint64_t h = hash_pcs(pcs, n);
	pthread_mutex_lock(&tc.mu);
	if (!tc.slots) {
		pthread_mutex_unlock(&tc.mu);
		return;
	}
	size_t i = h & (TC_SLOTS - 1);
	for (;; i = (i + 1) & (TC_SLOTS - 1)) {
		struct tc_entry *e = tc.slots[i];
		if (!e) {
			if (tc.n >= TC_MAX_STACKS) {
				tc.full++;
				break;
			}
			e = malloc(sizeof *e + n * sizeof *pcs);
			if (!e)
				break;
			e->hash = h;
			e->count = 1;
			e->depth = n;
			memcpy(e->pcs, pcs, n * sizeof *pcs);
			tc.slots[i] = e;
			tc.n++;
			break;
		}
		if (e->hash == h && e->depth == n &&
		    memcmp(e->pcs, pcs, n * sizeof *pcs) == 0) {
			e->count++;
			break;
		}
	}
	pthread_mutex_unlock(&tc.mu);
}

/* ---- agent side ------------------------------------------------------------
 */

int pp_threadcreate_start(unsigned max_depth, char *err, size_t errlen)
{
	int rc = pp_threads_unwind_ready(err, errlen);
	if (rc)
		return rc;
	pthread_mutex_lock(&tc.mu);
	if (!tc.slots)
		tc.slots = calloc(TC_SLOTS, sizeof *tc.slots);
	tc.depth = max_depth < TC_DEPTH ? max_depth : TC_DEPTH;
	int ok = tc.slots != NULL;
	pthread_mutex_unlock(&tc.mu);
	if (!ok) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	atomic_store(&tc.on, 1);
	pp_jobs_add_ticker(&pp_threadcreate_producer);
	return 0;
}

void pp_threadcreate_stop(void)
{
	atomic_store(&tc.on, 0);
	pthread_mutex_lock(&tc.mu);
	for (size_t i = 0; tc.slots && i < TC_SLOTS; i++)
		free(tc.slots[i]);
	free(tc.slots);
	tc.slots = NULL;
	tc.n = 0;
	tc.full = 0;
	pthread_mutex_unlock(&tc.mu);
}

void pp_threadcreate_forget_in_child(void)
{
	/* The parent's counts are not the child's; the memory is left. */
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	memcpy(&tc.mu, &fresh, sizeof fresh);
	tc.slots = NULL;
	tc.n = 0;
	tc.full = 0;
	atomic_store(&tc.on, 0);
}

void pp_threadcreate_stats(unsigned *open, size_t *stacks, uint64_t *past)
{
	*open = pp_jobs_open(&pp_threadcreate_producer);
	pthread_mutex_lock(&tc.mu);
	*stacks = tc.n;
	*past = tc.full;
	pthread_mutex_unlock(&tc.mu);
}

static const struct pp_value_type tc_type = {"threadcreate", "count"};

static int snapshot(struct pp_profile **out)
{
	struct pp_profile *p = pp_profile_new(&tc_type, 1, &tc_type, 1);
	int rc = p ? 0 : -ENOMEM;
	if (rc)
		return rc;
	p->leaf_is_return = 1;
	p->max_bytes = pp_threads_cfg.max_profile_bytes;
	pthread_mutex_lock(&tc.mu);
	for (size_t i = 0; tc.slots && i < TC_SLOTS && !rc; i++) {
		struct tc_entry *e = tc.slots[i];
		if (!e)
			continue;
		int64_t v = (int64_t)e->count;
		rc = pp_profile_add(p, e->pcs, e->depth, &v, NULL, 0);
	}
	if (!rc && tc.full) {
		uintptr_t pc = pp_profile_synthetic_pc(
		    p, "[pullprof: thread-creation stacks past the table's "
		       "4096]");
		int64_t v = (int64_t)tc.full;
		rc = pc ? pp_profile_add(p, &pc, 1, &v, NULL, 0) : -ENOMEM;
	}
	pthread_mutex_unlock(&tc.mu);
	if (rc) {
		pp_profile_free(p);
		return rc;
	}
	pp_profile_set_time(p, (int64_t)pp_clock_ns(CLOCK_REALTIME), 0);
	*out = p;
	return 0;
}

static int tc_check(const void *query, char *err, size_t errlen)
{
	(void)query;
	if (pp_threadcreate_on())
		return 0;
	snprintf(err, errlen,
	         "thread-creation recording is off in this "
	         "process");
	return -ENOTSUP;
}

static int tc_snapshot(const void *query, struct pp_profile **out)
{
	(void)query;
	return snapshot(out);
}

static void tc_note(const void *query, int delta, struct pp_profile *p)
{
	(void)query;
	pp_profile_add_comment(
	    p, delta ? "pullprof: threads created by each stack over the "
	               "window"
	             : "pullprof: threads created by each stack since the "
	               "agent started");
}

static const struct pp_counts tc_counts = {
    .query_size = sizeof(struct pp_counts_query),
    .check = tc_check,
    .snapshot = tc_snapshot,
    .note = tc_note,
};

/* Libraries loaded later get their unwind tables (cheap when nothing was
 * loaded or unloaded): a thread they create is captured through them. */
static void tc_tick(void)
{
	if (pp_threadcreate_on())
		pp_unwind_refresh();
}

struct pp_producer pp_threadcreate_producer = {
    .kind = "threadcreate",
    .what = "thread-creation profiles",
    .limit_setting = "PULLPROF_MAX_THREAD_DUMPS",
    .max_open = 4,
    PP_COUNTS_PRODUCER(&tc_counts),
    .tick = tc_tick,
};

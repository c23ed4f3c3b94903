/*
 * The heap profile producer: start/stop of heap sampling, and the models of
 * /heap and /allocs made from snapshots of the tables (at once, or the
 * difference over `seconds` for a delta), for the job pipeline
 * (profile/job.h) to render.
 * Context: agent.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "heap/detect.h"
#include "heap/foreign.h"
#include "heap/heap.h"
#include "heap/jemalloc.h"
#include "heap/sample.h"
#include "heap/table.h"
#include "labels/labels.h"
#include "profile/counts.h"
#include "profile/model.h"
#include "symbols/unloaded.h"
#include "unwind/unwind.h"
#include "util/clock.h"
#include "util/seccomp.h"

static struct {
	pthread_mutex_t mu;
	int running, unwind_ready;
	struct pp_heap_settings settings;
} heap = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* ---- models ----------------------------------------------------------------
 */

static const struct pp_value_type heap_types[] = {
    {"alloc_objects", "count"},
    {"alloc_space", "bytes"},
    {"inuse_objects", "count"},
    {"inuse_space", "bytes"},
};
static const struct pp_value_type heap_period = {"space", "bytes"};

/*
 * Images unloaded since the process started (symbols/unloaded.h). A heap
 * bucket does not know when its allocations were made, so its stack is
 * not moved to an unloaded image's ghost range as CPU samples are: a frame
 * where one was is named from what is mapped there now (another library,
 * or nothing). The profile says so.
 */
struct unloaded_set {
	struct pp_unloaded_range *v; /* sorted by lo */
	size_t n;
	uint64_t rows;        /* samples with such a frame */
	const char *paths[3]; /* the first few images met */
	int more;             /* and others */
};

static int by_lo(const void *a, const void *b)
{
	const struct pp_unloaded_range *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void unloaded_load(struct unloaded_set *u)
{
	memset(u, 0, sizeof *u);
	size_t n = (size_t)pp_unloaded_count();
	uint64_t seen = 0;
	if (!n || !(u->v = malloc(n * sizeof *u->v)))
		return;
	u->n = pp_unloaded_take(&seen, u->v, n);
	qsort(u->v, u->n, sizeof *u->v, by_lo);
}

/* The image unloaded that held pc, or NULL. */
static const char *unloaded_at(const struct unloaded_set *u, uintptr_t pc)
{
	size_t lo = 0, hi = u->n;
	while (lo < hi) { /* the first range with lo > pc */
		size_t mid = lo + (hi - lo) / 2;
		if (u->v[mid].lo <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Ranges reused at one base overlap: the few before. */
	for (size_t k = lo, seen = 0; k-- > 0 && seen < 16; seen++)
		if (pc < u->v[k].hi)
			return u->v[k].path;
	return NULL;
}

static void unloaded_note(struct unloaded_set *u, const uintptr_t *pcs,
                          size_t depth)
{
	for (size_t i = 0; i < depth && u->n; i++) {
		const char *path = unloaded_at(u, pcs[i]);
		if (!path)
			continue;
		u->rows++;
		size_t k = 0;
		while (k < 3 && u->paths[k] && u->paths[k] != path)
			k++;
		if (k == 3)
			u->more = 1;
		else
			u->paths[k] = path;
		return;
	}
}

static void unloaded_comment(struct pp_profile *p, struct unloaded_set *u)
{
	if (u->rows) {
		char note[1200];
		snprintf(
		    note, sizeof note,
		    "pullprof: %llu stack(s) of this heap profile have "
		    "frames where a library was unloaded (dlclose) earlier "
		    "in this process: %s%s%s%s%s%s; allocation stacks are "
		    "not moved to the unloaded image as CPU samples are, "
		    "so those frames are named from what is mapped there "
		    "now (another library, or [unmapped])",
		    (unsigned long long)u->rows, u->paths[0],
		    u->paths[1] ? ", " : "", u->paths[1] ? u->paths[1] : "",
		    u->paths[2] ? ", " : "", u->paths[2] ? u->paths[2] : "",
		    u->more ? ", ..." : "");
		pp_profile_add_comment(p, note);
	}
	free(u->v);
}

static int add_rows(struct pp_profile *p, const struct pp_heap_snapshot *end,
                    const struct pp_heap_snapshot *start)
{
	uintptr_t *pcs = NULL;
	size_t cap = 0;
	uintptr_t truncated = 0;
	int rc = 0;
	struct unloaded_set unloaded;
	unloaded_load(&unloaded);

	for (size_t i = 0; i < end->n && !rc; i++) {
		const struct pp_heap_row *r = &end->rows[i];
		int64_t allocs = (int64_t)r->allocs, frees = (int64_t)r->frees;
		if (start && i < start->n) {
			allocs -= (int64_t)start->rows[i].allocs;
			frees -= (int64_t)start->rows[i].frees;
		}
		if (allocs == 0 && frees == 0)
			continue;
		/* Unsampled per bucket: all its blocks had this size, hence
		 * this probability of being sampled. */
		double scale = pp_heap_scale(r->size, end->rate);
		double live = (double)(allocs - frees);
		int64_t v[4] = {
		    llround((double)allocs * scale),
		    llround((double)allocs * scale * (double)r->size),
		    llround(live * scale),
		    llround(live * scale * (double)r->size),
		};
		struct pp_label labels[1 + PP_LABEL_MAX_EXPANDED] = {
		    {"bytes", NULL, (int64_t)r->size, "bytes"}};
		size_t nlabels =
		    1 + pp_labels_to_profile(r->labels, labels + 1,
		                             PP_LABEL_MAX_EXPANDED);
		size_t depth = r->depth;
		if (depth + 1 > cap) {
			cap = depth + 64;
			uintptr_t *n = realloc(pcs, cap * sizeof *n);
			if (!n) {
				rc = -ENOMEM;
				break;
			}
			pcs = n;
		}
		memcpy(pcs, r->pcs, depth * sizeof *pcs);
		unloaded_note(&unloaded, pcs, depth);
		if (r->truncated) {
			if (!truncated)
				truncated = pp_profile_synthetic_pc(
				    p, "[pullprof: stack truncated]");
			if (truncated)
				pcs[depth++] = truncated;
		}
		rc = pp_profile_add(p, pcs, depth, v, labels, nlabels);
	}
	free(pcs);
	unloaded_comment(p, &unloaded);
	return rc;
}

static int make_model(struct pp_job *job, const struct pp_heap_query *q,
                      const struct pp_heap_snapshot *start,
                      struct pp_profile **out);
static int heap_running(void);

int pp_heap_trace_models(struct pp_profile **now, struct pp_profile **peak)
{
	struct pp_heap_query q = {.view = PP_HEAP_INUSE};
	*now = *peak = NULL;
	if (!heap_running())
		return -ENOTSUP;
	int rc = make_model(NULL, &q, NULL, now);
	if (rc)
		return rc;
	q.peak = 1;
	rc = make_model(NULL, &q, NULL, peak);
	if (rc) {
		pp_profile_free(*now);
		*now = NULL;
	}
	return rc;
}

/* The model q asks for: since the start, or (start: the table at the
 * window's open) its change; job (for a delta's times) may be NULL
 * without a start. */
static int make_model(struct pp_job *job, const struct pp_heap_query *q,
                      const struct pp_heap_snapshot *start,
                      struct pp_profile **out)
{
	struct pp_heap_snapshot end;
	char note[400];
	int rc;

	rc = pp_heap_table_snapshot(q->peak, q->peak_reset, &end);
	if (rc)
		return rc;
	struct pp_profile *p =
	    pp_profile_new(heap_types, 4, &heap_period, (int64_t)end.rate);
	if (!p) {
		free(end.rows);
		return -ENOMEM;
	}
	p->leaf_is_return = 1;
	if (q->view == PP_HEAP_ALLOCS)
		pp_profile_set_default_type(p, "alloc_space");
	if (start)
		pp_profile_set_time(p, pp_job_opened_real_ns(job),
		                    (int64_t)(pp_clock_ns(CLOCK_MONOTONIC) -
		                              pp_job_opened_ns(job)));
	else
		pp_profile_set_time(p, (int64_t)pp_clock_ns(CLOCK_REALTIME), 0);
	snprintf(note, sizeof note,
	         "pullprof %s: heap sampled every %llu bytes on average, "
	         "values unsampled per (stack, size)",
	         PACKAGE_VERSION, (unsigned long long)end.rate);
	pp_profile_add_comment(p, note);
	if (pp_seccomp_vm_readv_forbidden()) {
		/* The captures prove the stack readable with process_vm_readv
		 * (unwind/frames.c): without it they end at the first frame
		 * outside what a thread's earlier samples proved. */
		char why[300], sc[600];
		pp_seccomp_reason(PP_SC_PROCESS_VM_READV, why, sizeof why);
		snprintf(sc, sizeof sc,
		         "pullprof: heap samples' stacks may end after their "
		         "first frames: %s",
		         why);
		pp_profile_add_comment(p, sc);
	}
	if (q->peak) {
		time_t t = (time_t)end.peak_time;
		struct tm tm;
		char when[40] = "never";
		if (end.peak_time > 0 && gmtime_r(&t, &tm))
			strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
		snprintf(note, sizeof note,
		         "peak: what was live when the estimated in-use total "
		         "was highest, %.0f bytes at %s",
		         end.peak_bytes, when);
		pp_profile_add_comment(p, note);
	}
	struct pp_heap_allocator a;
	pp_heap_allocator(&a);
	if (!a.interposed) {
		/* Served because it was asked for (?source=interposed), or
		 * for the blocks of the host's pools. */
		struct pp_heap_pool_stats ps;
		pp_heap_table_pool_stats(&ps);
		snprintf(note, sizeof note,
		         "the host's allocations do not reach pullprof's "
		         "wrappers here%s: %.150s",
		         ps.sampled
		             ? " (this profile holds the blocks the host "
		               "reports with pullprof_heap_alloc)"
		             : "",
		         a.reason);
		pp_profile_add_comment(p, note);
	}
	pthread_mutex_lock(&heap.mu);
	p->max_bytes = heap.settings.max_profile_bytes;
	pthread_mutex_unlock(&heap.mu);
	rc = add_rows(p, &end, start);
	free(end.rows);
	if (!rc && p->over_limit) {
		snprintf(note, sizeof note,
		         "%llu stacks past the profile size limit went to %s",
		         (unsigned long long)p->over_limit,
		         PP_PROFILE_LIMIT_FRAME);
		pp_profile_add_comment(p, note);
	}
	if (rc) {
		pp_profile_free(p);
		return rc;
	}
	*out = p;
	return 0;
}

/* ---- the producer ----------------------------------------------------------
 */

static int heap_running(void)
{
	pthread_mutex_lock(&heap.mu);
	int running = heap.running;
	pthread_mutex_unlock(&heap.mu);
	return running;
}

int pp_heap_running(void)
{
	return heap_running();
}

int pp_heap_resolve(struct pp_heap_query *q, int asked, char *err,
                    size_t errlen)
{
	struct pp_heap_allocator a;
	int on = heap_running(), allocs = q->view == PP_HEAP_ALLOCS;

	pp_heap_allocator(&a);
	q->source = asked
	                ? asked
	                : (int)pp_heap_source_auto(&a, on, allocs, err, errlen);
	/* The host reports its own pools (pullprof_heap_alloc): those
	 * blocks are in the tables whatever malloc the host has. */
	struct pp_heap_pool_stats ps;
	pp_heap_table_pool_stats(&ps);
	if (!asked && q->source == PP_HEAP_SOURCE_NONE && on && ps.sampled)
		q->source = PP_HEAP_SOURCE_INTERPOSED;
	if (q->source == PP_HEAP_SOURCE_NONE ||
	    pp_heap_source_check(&a, (enum pp_heap_source)q->source, on, allocs,
	                         err, errlen))
		return -ENOTSUP;
	if (!asked && q->source == PP_HEAP_SOURCE_INTERPOSED && !ps.sampled) {
		struct pp_heap_stats st;
		pp_heap_stats(&st);
		if (pp_heap_interposed_unseen(&a, st.sampled, st.rate, err,
		                              errlen))
			return -ENOTSUP;
	}
	if (q->source != PP_HEAP_SOURCE_INTERPOSED && q->peak) {
		snprintf(err, errlen,
		         "peak: this process's heap profile is %s's own (%s), "
		         "which keeps no peak",
		         pp_heap_source_name((enum pp_heap_source)q->source),
		         q->source == PP_HEAP_SOURCE_JEMALLOC ? a.je.path
		                                              : a.tc.path);
		return -EINVAL;
	}
	return 0;
}

static int heap_check(const void *query, char *err, size_t errlen)
{
	const struct pp_heap_query *q = query;
	if (q->source == PP_HEAP_SOURCE_JEMALLOC ||
	    q->source == PP_HEAP_SOURCE_TCMALLOC || heap_running())
		return 0;
	snprintf(err, errlen,
	         "heap profiling is off in this process: start "
	         "it with PULLPROF_HEAP_RATE greater than 0");
	return -ENOTSUP;
}

/* A window's start: the table's rows, or the allocator's dump, from
 * which the change is made. */
struct heap_start {
	struct pp_heap_snapshot snap;
	char *dump; /* sources jemalloc and tcmalloc: their text */
	size_t len;
};

static int heap_begin(const void *query, void **start, char *err, size_t errlen)
{
	const struct pp_heap_query *q = query;
	struct heap_start *s = calloc(1, sizeof *s);
	int rc;
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (q->source == PP_HEAP_SOURCE_JEMALLOC ||
	    q->source == PP_HEAP_SOURCE_TCMALLOC) {
		rc = pp_heap_own_text(q, &s->dump, &s->len, err, errlen);
		if (rc) {
			free(s);
			return rc;
		}
		*start = s;
		return 0;
	}
	rc = pp_heap_table_snapshot(0, 0, &s->snap);
	if (rc) {
		free(s);
		snprintf(err, errlen, "%s",
		         rc == -ESHUTDOWN ? "heap profiling is off"
		                          : "out of memory");
		return rc == -ESHUTDOWN ? -ENOTSUP : rc;
	}
	*start = s;
	return 0;
}

static int heap_finish(struct pp_job *job, const void *query, const void *start,
                       struct pp_profile **out)
{
	const struct pp_heap_query *q = query;
	const struct heap_start *s = start;
	if (q->source == PP_HEAP_SOURCE_JEMALLOC ||
	    q->source == PP_HEAP_SOURCE_TCMALLOC) {
		pthread_mutex_lock(&heap.mu);
		size_t max = heap.settings.max_profile_bytes;
		pthread_mutex_unlock(&heap.mu);
		return pp_heap_own_model(job, q, s ? s->dump : NULL,
		                         s ? s->len : 0, max, out);
	}
	return make_model(job, query, s ? &s->snap : NULL, out);
}

static void heap_free_start(void *start)
{
	struct heap_start *s = start;
	free(s->snap.rows);
	free(s->dump);
	free(s);
}

static const struct pp_counts heap_counts = {
    .query_size = sizeof(struct pp_heap_query),
    .check = heap_check,
    .begin = heap_begin,
    .finish = heap_finish,
    .free_start = heap_free_start,
};

/* While sampling runs, new libraries get their unwind tables (cheap when
 * nothing was loaded or unloaded). */
static void heap_tick(void)
{
	if (heap_running())
		pp_unwind_refresh();
}

struct pp_producer pp_heap_producer = {
    .kind = "heap",
    .what = "heap profiles",
    .limit_setting = "PULLPROF_MAX_HEAP_PROFILES",
    .max_open = 16,
    PP_COUNTS_PRODUCER(&heap_counts),
    .tick = heap_tick,
};

/* ---- lifecycle ----------------------------------------------------------- */

int pp_heap_start(const struct pp_heap_settings *s, char *err, size_t errlen)
{
	int rc;

	pthread_mutex_lock(&heap.mu);
	if (heap.running) {
		pthread_mutex_unlock(&heap.mu);
		return 0;
	}
	heap.settings = *s;
	pp_heap_producer.max_open = s->max_pending;
	rc = pp_unwind_init();
	if (rc) {
		snprintf(err, errlen, "cannot set up stack unwinding");
		goto fail;
	}
	heap.unwind_ready = 1;
	rc = pp_heap_table_open(s->rate);
	if (rc) {
		snprintf(err, errlen, "cannot map the heap profiler's tables");
		goto fail;
	}
	heap.running = 1;
	pthread_mutex_unlock(&heap.mu);
	pp_jobs_add_ticker(&pp_heap_producer);
	pp_heap_sampling_set(s->rate, s->max_depth);
	return 0;
fail:
	if (heap.unwind_ready) {
		pp_unwind_shutdown();
		heap.unwind_ready = 0;
	}
	pthread_mutex_unlock(&heap.mu);
	return rc;
}

void pp_heap_stop(void)
{
	pthread_mutex_lock(&heap.mu);
	if (!heap.running) {
		pthread_mutex_unlock(&heap.mu);
		return;
	}
	heap.running = 0;
	pthread_mutex_unlock(&heap.mu);

	pp_heap_sampling_set(0, 0);
	pp_heap_sampling_quiesce();
	pp_heap_table_close();
	pthread_mutex_lock(&heap.mu);
	if (heap.unwind_ready) {
		pp_unwind_shutdown();
		heap.unwind_ready = 0;
	}
	pthread_mutex_unlock(&heap.mu);
}

void pp_heap_forget_in_child(void)
{
	pthread_mutex_init(&heap.mu, NULL);
	/* The table keeps the parent's samples (the child's memory too:
	 * frees of them still take them out) and the registry stays
	 * registered. Whether sampling goes on is fork.h's decision
	 * (pp_fork_child): only in a child that will run an agent. */
	heap.running = 0;
	pp_heap_sampling_forget_in_child();
	/* The tables need nothing: their lock is held across fork. */
}

void pp_heap_stats(struct pp_heap_stats *o)
{
	memset(o, 0, sizeof *o);
	pp_heap_table_stats(o);
	pthread_mutex_lock(&heap.mu);
	o->running = heap.running;
	if (!heap.running)
		o->rate = heap.settings.rate;
	pthread_mutex_unlock(&heap.mu);
	o->pending = pp_jobs_open(&pp_heap_producer);
}

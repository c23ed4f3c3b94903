/*
 * The heap profiler's agent side: start/stop, and the worker thread
 * (`pullprof-heap`) that builds /heap and /allocs profiles from snapshots of
 * the tables, waits out delta windows, and keeps the unwind registry fresh
 * while sampling runs. Agent context.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "heap/heap.h"
#include "heap/sample.h"
#include "heap/table.h"
#include "labels/labels.h"
#include "profile/model.h"
#include "profile/recent.h"
#include "profile/render.h"
#include "unwind/unwind.h"
#include "util/clock.h"
#include "util/proc.h"

/* How often the worker looks at the registry and at waiting clients. */
#define TICK_NS 250000000ull

enum { J_WAITING, J_BUILDING, J_DONE, J_CANCELLED };

struct pp_heap_job {
	struct pp_heap_job *next;
	struct pp_heap_query q;
	int refs, state, listed;
	uint64_t due_ns, opened_ns;
	int64_t opened_real_ns;
	int client_fd;
	struct pp_heap_snapshot start;
	char *body;
	size_t len;
	int err;
	struct pp_recent *stored; /* ?id=: the kept profile to render again */
	uint64_t id;              /* of the profile rendered */
	pp_heap_done_fn done;
	void *arg;
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t wake;
	int running, stopping, unwind_ready;
	pthread_t thread;
	struct pp_heap_job *jobs;
	unsigned njobs;
	struct pp_heap_settings settings;
} H = {.mu = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static void unref_locked(struct pp_heap_job *j)
{
	if (--j->refs > 0)
		return;
	free(j->start.rows);
	free(j->body);
	pp_recent_unref(j->stored);
	free(j);
}

static void unlink_locked(struct pp_heap_job *j)
{
	for (struct pp_heap_job **p = &H.jobs; *p; p = &(*p)->next)
		if (*p == j) {
			*p = j->next;
			H.njobs--;
			j->listed = 0;
			return;
		}
}

/* ---- building ------------------------------------------------------------ */

static const struct pp_value_type heap_types[] = {
    {"alloc_objects", "count"},
    {"alloc_space", "bytes"},
    {"inuse_objects", "count"},
    {"inuse_space", "bytes"},
};
static const struct pp_value_type heap_period = {"space", "bytes"};

static int add_rows(struct pp_profile *p, const struct pp_heap_snapshot *end,
                    const struct pp_heap_snapshot *start)
{
	uintptr_t *pcs = NULL;
	size_t cap = 0;
	uintptr_t truncated = 0;
	int rc = 0;

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
	return rc;
}

static void build(struct pp_heap_job *j)
{
	struct pp_heap_snapshot end;
	char note[240];
	int rc;

	if (j->stored) {
		j->err = pp_render_body(pp_recent_profile(j->stored),
		                        &j->q.render, &j->body, &j->len);
		j->id = j->q.id;
		return;
	}
	rc = pp_heap_table_snapshot(j->q.peak, j->q.peak_reset, &end);
	if (rc) {
		j->err = rc;
		return;
	}
	struct pp_profile *p =
	    pp_profile_new(heap_types, 4, &heap_period, (int64_t)end.rate);
	if (!p) {
		free(end.rows);
		j->err = -ENOMEM;
		return;
	}
	p->leaf_is_return = 1;
	if (j->q.view == PP_HEAP_ALLOCS)
		pp_profile_set_default_type(p, "alloc_space");
	int64_t now = (int64_t)pp_clock_ns(CLOCK_REALTIME);
	if (j->q.seconds)
		pp_profile_set_time(
		    p, j->opened_real_ns,
		    (int64_t)(pp_clock_ns(CLOCK_MONOTONIC) - j->opened_ns));
	else
		pp_profile_set_time(p, now, 0);
	snprintf(note, sizeof note,
	         "pullprof %s: heap sampled every %llu bytes on average, "
	         "values unsampled per (stack, size)",
	         PACKAGE_VERSION, (unsigned long long)end.rate);
	pp_profile_add_comment(p, note);
	if (j->q.peak) {
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
	p->max_bytes = H.settings.max_profile_bytes;
	rc = add_rows(p, &end, j->q.seconds ? &j->start : NULL);
	free(end.rows);
	if (!rc && p->over_limit) {
		snprintf(note, sizeof note,
		         "%llu stacks past the profile size limit went to %s",
		         (unsigned long long)p->over_limit,
		         PP_PROFILE_LIMIT_FRAME);
		pp_profile_add_comment(p, note);
	}
	if (!rc)
		rc = pp_render_body(p, &j->q.render, &j->body, &j->len);
	if (rc || !j->q.keep)
		pp_profile_free(p);
	else
		j->id = pp_recent_add("heap", p); /* kept for ?id= */
	j->err = rc;
}

/* ---- the worker ---------------------------------------------------------- */

static void finish(struct pp_heap_job *j, int state)
{
	/* Called locked, returns locked; done runs unlocked. */
	j->state = state;
	unlink_locked(j);
	pp_heap_done_fn done = j->done;
	void *arg = j->arg;
	pthread_mutex_unlock(&H.mu);
	if (done)
		done(arg);
	pthread_mutex_lock(&H.mu);
	unref_locked(j); /* the list's reference */
}

static void *worker(void *unused)
{
	(void)unused;
	pp_heap_agent_thread();
	uint64_t last_tick = 0;
	pthread_mutex_lock(&H.mu);
	while (!H.stopping) {
		uint64_t now = pp_clock_ns(CLOCK_MONOTONIC);
		struct pp_heap_job *due = NULL;
		uint64_t next = now + TICK_NS;
		for (struct pp_heap_job *j = H.jobs; j; j = j->next) {
			if (j->state != J_WAITING)
				continue;
			if (j->due_ns <= now) {
				due = j;
				break;
			}
			if (j->due_ns < next)
				next = j->due_ns;
		}
		if (due) {
			due->state = J_BUILDING;
			pthread_mutex_unlock(&H.mu);
			build(due);
			pthread_mutex_lock(&H.mu);
			finish(due, J_DONE);
			continue;
		}
		if (now - last_tick >= TICK_NS) {
			last_tick = now;
			struct pp_heap_job *gone = NULL;
			for (struct pp_heap_job *j = H.jobs; j; j = j->next)
				if (j->state == J_WAITING &&
				    pp_fd_hung_up(j->client_fd)) {
					gone = j;
					break;
				}
			if (gone) {
				finish(gone, J_CANCELLED);
				continue;
			}
			pthread_mutex_unlock(&H.mu);
			/* New libraries get their unwind tables; cheap when
			 * nothing was loaded or unloaded. */
			pp_unwind_refresh();
			pthread_mutex_lock(&H.mu);
			continue;
		}
		struct timespec until =
		    pp_clock_after(CLOCK_MONOTONIC, next - now);
		pthread_cond_timedwait(&H.wake, &H.mu, &until);
	}
	while (H.jobs)
		finish(H.jobs, J_CANCELLED);
	pthread_mutex_unlock(&H.mu);
	return NULL;
}

/* ---- lifecycle ----------------------------------------------------------- */

int pp_heap_start(const struct pp_heap_settings *s, char *err, size_t errlen)
{
	pthread_condattr_t ca;
	sigset_t all, old;
	int rc;

	pthread_mutex_lock(&H.mu);
	if (H.running) {
		pthread_mutex_unlock(&H.mu);
		return 0;
	}
	H.settings = *s;
	rc = pp_unwind_init();
	if (rc) {
		snprintf(err, errlen, "cannot set up stack unwinding");
		goto fail;
	}
	H.unwind_ready = 1;
	rc = pp_heap_table_open(s->rate);
	if (rc) {
		snprintf(err, errlen, "cannot map the heap profiler's tables");
		goto fail;
	}
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&H.wake, &ca);
	pthread_condattr_destroy(&ca);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = -pthread_create(&H.thread, NULL, worker, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		pp_heap_table_close();
		snprintf(err, errlen,
		         "cannot start the heap profiler's thread");
		goto fail;
	}
	pthread_setname_np(H.thread, "pullprof-heap");
	H.running = 1;
	pthread_mutex_unlock(&H.mu);
	pp_heap_sampling_set(s->rate, s->max_depth);
	return 0;
fail:
	if (H.unwind_ready) {
		pp_unwind_shutdown();
		H.unwind_ready = 0;
	}
	pthread_mutex_unlock(&H.mu);
	return rc;
}

void pp_heap_stop(void)
{
	pthread_mutex_lock(&H.mu);
	if (!H.running) {
		pthread_mutex_unlock(&H.mu);
		return;
	}
	H.stopping = 1;
	pthread_cond_broadcast(&H.wake);
	pthread_mutex_unlock(&H.mu);
	pthread_join(H.thread, NULL); /* it cancels what is pending */

	pp_heap_sampling_set(0, 0);
	pp_heap_sampling_quiesce();
	pp_heap_table_close();
	pthread_mutex_lock(&H.mu);
	if (H.unwind_ready) {
		pp_unwind_shutdown();
		H.unwind_ready = 0;
	}
	H.running = H.stopping = 0;
	pthread_mutex_unlock(&H.mu);
}

void pp_heap_forget_in_child(void)
{
	pthread_mutex_init(&H.mu, NULL);
	pthread_cond_init(&H.wake, NULL);
	H.jobs = NULL; /* left to leak: their requests are the parent's */
	H.njobs = 0;
	H.running = H.stopping = 0;
	/* The registry stays registered: the child's threads sample on. */
	pp_heap_sampling_forget_in_child();
	/* The tables need nothing: their lock is held across fork. */
}

/* ---- requests ------------------------------------------------------------ */

int pp_heap_job_open(const struct pp_heap_query *q, int client_fd,
                     pp_heap_done_fn done, void *arg, struct pp_heap_job **out,
                     char *err, size_t errlen)
{
	struct pp_heap_job *j = calloc(1, sizeof *j);
	if (!j) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	j->q = *q;
	j->refs = 2; /* the request's and the list's */
	j->client_fd = client_fd;
	j->done = done;
	j->arg = arg;
	j->opened_ns = pp_clock_ns(CLOCK_MONOTONIC);
	j->opened_real_ns = (int64_t)pp_clock_ns(CLOCK_REALTIME);
	j->due_ns = j->opened_ns + (uint64_t)q->seconds * 1000000000u;
	if (q->id && !(j->stored = pp_recent_get(q->id, "heap", err, errlen))) {
		free(j);
		return -ENOENT;
	}
	if (q->seconds && !q->id) {
		int rc = pp_heap_table_snapshot(0, 0, &j->start);
		if (rc) {
			free(j);
			snprintf(err, errlen, "%s",
			         rc == -ESHUTDOWN ? "heap profiling is off"
			                          : "out of memory");
			return rc;
		}
	}
	pthread_mutex_lock(&H.mu);
	int rc = 0;
	if (!H.running || H.stopping) {
		rc = -ESHUTDOWN;
		snprintf(err, errlen,
		         "heap profiling is off (PULLPROF_HEAP_RATE=0)");
	} else if (H.njobs >= H.settings.max_pending) {
		rc = -EBUSY;
		snprintf(err, errlen,
		         "%u heap profiles are already waiting or being built "
		         "(PULLPROF_MAX_HEAP_PROFILES); try again later",
		         H.njobs);
	}
	if (rc) {
		pthread_mutex_unlock(&H.mu);
		free(j->start.rows);
		pp_recent_unref(j->stored);
		free(j);
		return rc;
	}
	j->next = H.jobs;
	H.jobs = j;
	j->listed = 1;
	H.njobs++;
	pthread_cond_signal(&H.wake);
	pthread_mutex_unlock(&H.mu);
	*out = j;
	return 0;
}

void pp_heap_job_release(struct pp_heap_job *j)
{
	if (!j)
		return;
	pthread_mutex_lock(&H.mu);
	j->done = NULL; /* nobody to tell any more */
	if (j->listed && j->state == J_WAITING) {
		/* Still waiting: the list lets go of it too. */
		unlink_locked(j);
		j->refs--;
	}
	unref_locked(j);
	pthread_mutex_unlock(&H.mu);
}

int pp_heap_job_take(struct pp_heap_job *j, char **body, size_t *len,
                     uint64_t *id)
{
	pthread_mutex_lock(&H.mu);
	int rc = j->state == J_DONE ? j->err : -ECANCELED;
	if (!rc) {
		*body = j->body;
		*len = j->len;
		*id = j->id;
		j->body = NULL;
	}
	pthread_mutex_unlock(&H.mu);
	return rc;
}

void pp_heap_stats(struct pp_heap_stats *o)
{
	memset(o, 0, sizeof *o);
	pp_heap_table_stats(o);
	pthread_mutex_lock(&H.mu);
	o->running = H.running;
	o->pending = H.njobs;
	if (!H.running)
		o->rate = H.settings.rate;
	pthread_mutex_unlock(&H.mu);
}

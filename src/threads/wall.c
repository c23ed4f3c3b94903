/*
 * The wall-clock profile, /wall and fgprof's /debug/fgprof: every thread,
 * running or blocked, sampled on a wall-clock tick. A delivering producer:
 * each window has a sampler thread ("pullprof-wall") that looks at up to
 * PULLPROF_WALL_THREADS threads per tick, rotating through all of them, and
 * weighs each look by the wall time it stands for (the time since the last
 * tick times threads / looked at), so totals stay right with thousands of
 * threads. Looks never signal a thread (look.h).
 * Context: agent.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent_threads.h"
#include "threads/internal.h"
#include "util/clock.h"
#include "util/seccomp.h"

/* A wall window beside a CPU window (/trace?wall=1): the model goes here,
 * not to a job. Shared by the sampler thread and the CPU window (refs). */
struct pp_wall_companion {
	pthread_mutex_t mu;
	int refs, done, rc;
	_Atomic int stop;
	struct pp_profile *model;
};

struct window {
	struct window *next;
	struct pp_job *job; /* its times; answered unless comp is set */
	struct pp_wall_companion *comp;
	struct pp_wall_query q;
	pthread_t thread;
	_Atomic int stop; /* cancelled, or the agent stops */
	_Atomic int done; /* the thread has ended: join it */
};

#define LOOK_WAIT_MS 20

static struct {
	pthread_mutex_t mu;
	struct window *list;
} wall = {PTHREAD_MUTEX_INITIALIZER, NULL};

static const struct pp_value_type wall_types[] = {{"samples", "count"},
                                                  {"wall", "nanoseconds"}};
static const struct pp_value_type wall_period = {"wall", "nanoseconds"};
/* fgprof's own names, so what reads fgprof's profiles reads these. */
static const struct pp_value_type fgprof_types[] = {{"samples", "count"},
                                                    {"time", "nanoseconds"}};
static const struct pp_value_type fgprof_period = {"wallclock", "nanoseconds"};

/* Sleep until the monotonic time `until`, waking every 50 ms to see if the
 * window was stopped. 1 when stopped. */
static int sleep_until(struct window *w, uint64_t until)
{
	for (;;) {
		if (atomic_load(&w->stop) ||
		    (w->comp && atomic_load(&w->comp->stop)))
			return 1;
		uint64_t now = pp_clock_ns(CLOCK_MONOTONIC);
		if (now >= until)
			return 0;
		uint64_t step = until - now;
		if (step > 50000000u)
			step = 50000000u;
		struct timespec ts = {(time_t)(step / 1000000000u),
		                      (long)(step % 1000000000u)};
		nanosleep(&ts, NULL);
	}
}

/* The threads to look at: all but the samplers themselves. */
static int list_threads(pid_t **tids, size_t *n)
{
	int rc = pp_task_list(tids, n);
	if (rc)
		return rc;
	pid_t self = (pid_t)syscall(SYS_gettid);
	size_t k = 0;
	for (size_t i = 0; i < *n; i++)
		if ((*tids)[i] != self)
			(*tids)[k++] = (*tids)[i];
	*n = k;
	return 0;
}

static int sample(struct window *w, struct pp_profile **out)
{
	unsigned depth = pp_threads_cfg.max_depth;
	unsigned per_tick = pp_threads_cfg.wall_threads;
	uint64_t interval = 1000000000u / w->q.hz;
	struct pp_profile *p = pp_profile_new(
	    w->q.fgprof ? fgprof_types : wall_types, 2,
	    w->q.fgprof ? &fgprof_period : &wall_period, (int64_t)interval);
	/* Events for as many running threads as one tick looks at. */
	struct pp_looker *lk =
	    pp_looker_new(depth, per_tick < 16 ? per_tick : 16);
	struct pp_look *looks = calloc(per_tick, sizeof *looks);
	uintptr_t *pcs = malloc((size_t)per_tick * depth * sizeof *pcs);
	pid_t *tids = NULL;
	size_t n = 0, cursor = 0;
	int rc = 0;

	if (!p || !lk || !looks || !pcs) {
		rc = -ENOMEM;
		goto out;
	}
	p->max_bytes = pp_threads_cfg.max_profile_bytes;
	pp_seccomp_refresh_vm_readv(); /* the walks' checked reads */
	/* The timeline, for traces (/trace?wall=1): as for CPU windows, up
	 * to half as much again as the profile's bound. */
	p->max_events =
	    (p->max_bytes ? p->max_bytes : 64u << 20) / 2 / PP_EVENT_BYTES;
	p->wall_timeline = 1;
	if (!w->q.fgprof)
		pp_profile_set_default_type(p, "wall");
	uint64_t opened = pp_job_opened_ns(w->job);
	uint64_t end = opened + (uint64_t)w->q.seconds * 1000000000u;
	p->mono_start_ns = opened;
	p->mono_end_ns = end;
	uint64_t last = opened, listed = 0, next = opened + interval;
	uint64_t ticks = 0, late = 0, denied = 0, looked = 0, seccomp = 0;
	while (!rc) {
		if (sleep_until(w, next < end ? next : end))
			break;
		uint64_t now = pp_clock_ns(CLOCK_MONOTONIC);
		/* The list of threads: fresh each tick while small, else
		 * every 100 ms (a thread born meanwhile waits for it). */
		if (!tids || n <= 4u * per_tick || now - listed >= 100000000u) {
			free(tids);
			tids = NULL;
			rc = list_threads(&tids, &n);
			if (rc)
				break;
			listed = now;
		}
		size_t k = n < per_tick ? n : per_tick;
		for (size_t i = 0; i < k; i++) {
			looks[i].tid = tids[(cursor + i) % n];
			looks[i].pcs = pcs + i * depth;
		}
		cursor = n ? (cursor + k) % n : 0;
		/* A running thread is waited for until it is on a CPU
		 * (20 ms covers a busy machine's run queue); a tick that
		 * takes longer makes the next one late, and the time between
		 * is weighed in. */
		pp_look_threads(lk, looks, k, LOOK_WAIT_MS);
		int64_t values[2] = {1, 0};
		uint64_t span = now - last;
		last = now;
		for (size_t i = 0; i < k && !rc; i++) {
			values[1] = (int64_t)(span * n / k);
			denied += looks[i].miss == PP_MISS_DENIED;
			seccomp += looks[i].miss == PP_MISS_SECCOMP;
			looked++;
			rc = pp_threads_add(p, &looks[i], values, 0, now);
			atomic_fetch_add(&pp_threads_wall_samples, 1);
		}
		ticks++;
		atomic_fetch_add(&pp_threads_wall_ticks, 1);
		if (now >= end)
			break;
		next += interval;
		uint64_t after = pp_clock_ns(CLOCK_MONOTONIC);
		if (next <= after) {
			/* Looking took longer than a tick: the next one
			 * comes one interval from now, and the time between
			 * is weighed in. */
			late++;
			atomic_fetch_add(&pp_threads_wall_late, 1);
			next = after + interval;
		}
	}
	if (!rc) {
		char note[200];
		pp_profile_set_time(
		    p, pp_job_opened_real_ns(w->job),
		    (int64_t)(pp_clock_ns(CLOCK_MONOTONIC) - opened));
		snprintf(note, sizeof note,
		         "pullprof: wall-clock profile at %u Hz, at most %u "
		         "threads looked at per tick (%llu ticks, %llu late); "
		         "blocked threads read without a signal",
		         w->q.hz, per_tick, (unsigned long long)ticks,
		         (unsigned long long)late);
		pp_profile_add_comment(p, note);
		rc = pp_threads_note_denied(p, denied, looked);
		if (!rc)
			rc = pp_threads_note_seccomp(p, seccomp, looked);
	}
out:
	free(tids);
	free(pcs);
	free(looks);
	pp_looker_free(lk);
	if (rc) {
		pp_profile_free(p);
		return rc;
	}
	*out = p;
	return 0;
}

static void *sampler_main(void *arg)
{
	struct window *w = arg;
	struct pp_profile *p = NULL;

	pp_agent_thread_enter(0);
	int rc = sample(w, &p);
	if (atomic_load(&w->stop)) {
		pp_profile_free(p);
		p = NULL;
		rc = -ECANCELED;
	}
	if (w->comp) {
		struct pp_wall_companion *c = w->comp;
		pthread_mutex_lock(&c->mu);
		c->model = p;
		c->rc = rc;
		c->done = 1;
		pthread_mutex_unlock(&c->mu);
		pp_wall_companion_release(c);
	} else {
		pp_job_deliver(w->job, p, rc);
	}
	pp_job_unref(w->job);
	pp_agent_thread_leave();
	atomic_store(&w->done, 1);
	return NULL;
}

/* Join and free the windows whose thread ended (wall.mu held). */
static void reap_locked(int all)
{
	struct window **at = &wall.list;
	while (*at) {
		struct window *w = *at;
		if (all)
			atomic_store(&w->stop, 1);
		if (all || atomic_load(&w->done)) {
			pthread_join(w->thread, NULL);
			*at = w->next;
			free(w);
		} else {
			at = &w->next;
		}
	}
}

void pp_wall_companion_release(struct pp_wall_companion *c)
{
	pthread_mutex_lock(&c->mu);
	int last = --c->refs == 0;
	pthread_mutex_unlock(&c->mu);
	if (last) {
		pp_profile_free(c->model);
		pthread_mutex_destroy(&c->mu);
		free(c);
	}
}

int pp_wall_companion_take(struct pp_wall_companion *c, struct pp_profile **out,
                           int *rc)
{
	pthread_mutex_lock(&c->mu);
	int done = c->done;
	if (done) {
		*out = c->model;
		*rc = c->rc;
		c->model = NULL;
	}
	pthread_mutex_unlock(&c->mu);
	return done;
}

void pp_wall_companion_cancel(struct pp_wall_companion *c)
{
	atomic_store(&c->stop, 1);
	pp_wall_companion_release(c);
}

static int start_window(struct window *w, char *err, size_t errlen);

int pp_wall_companion_start(struct pp_job *job, unsigned seconds, unsigned hz,
                            struct pp_wall_companion **out, char *err,
                            size_t errlen)
{
	int rc = pp_threads_unwind_ready(err, errlen);
	if (rc)
		return rc;
	struct pp_wall_companion *c = calloc(1, sizeof *c);
	struct window *w = calloc(1, sizeof *w);
	if (!c || !w) {
		free(c);
		free(w);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&c->mu, NULL);
	c->refs = 2; /* the sampler's and the caller's */
	w->q = (struct pp_wall_query){seconds, hz, 0};
	w->job = job;
	w->comp = c;
	pp_job_ref(job);
	rc = start_window(w, err, errlen);
	if (rc) {
		pp_job_unref(job);
		pthread_mutex_destroy(&c->mu);
		free(c);
		free(w);
		return rc;
	}
	*out = c;
	return 0;
}

/* Start w's sampler thread and list it. */
static int start_window(struct window *w, char *err, size_t errlen)
{
	pthread_mutex_lock(&wall.mu);
	reap_locked(0);
	int rc = pp_agent_thread_create(&w->thread, "pullprof-wall",
	                                sampler_main, w);
	if (rc) {
		pthread_mutex_unlock(&wall.mu);
		snprintf(err, errlen, "cannot start the sampler thread: %s",
		         strerror(-rc));
		return rc;
	}
	w->next = wall.list;
	wall.list = w;
	pthread_mutex_unlock(&wall.mu);
	return 0;
}

static int wall_start(struct pp_job *job, const void *query, char *err,
                      size_t errlen)
{
	int rc = pp_threads_unwind_ready(err, errlen);
	if (rc)
		return rc;
	struct window *w = calloc(1, sizeof *w);
	if (!w) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	w->q = *(const struct pp_wall_query *)query;
	w->job = job;
	pp_job_set_data(job, w);
	pp_job_ref(job);
	rc = start_window(w, err, errlen);
	if (rc) {
		pp_job_set_data(job, NULL);
		pp_job_unref(job);
		free(w);
		return rc;
	}
	return 0;
}

/* The job ended first (client gone, agent stopping): the thread stops at
 * its next look and delivers nothing. */
static void wall_cancel(struct pp_job *job)
{
	struct window *w = pp_job_data(job);
	if (w)
		atomic_store(&w->stop, 1);
}

struct pp_producer pp_wall_producer = {
    .kind = "wall",
    .what = "wall-clock profiles",
    .limit_setting = "PULLPROF_MAX_WALL_PROFILES",
    .max_open = 2,
    .start = wall_start,
    .cancel = wall_cancel,
};

void pp_threads_shutdown(void)
{
	pthread_mutex_lock(&wall.mu);
	reap_locked(1);
	pthread_mutex_unlock(&wall.mu);
	pp_threads_unwind_release();
}

void pp_threads_forget_in_child(void)
{
	/* The samplers are the parent's; their memory is left as is. */
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	memcpy(&wall.mu, &fresh, sizeof fresh);
	wall.list = NULL;
	pp_threads_unwind_forget_in_child();
}

void pp_threads_stats(struct pp_threads_stats *o)
{
	struct pp_look_stats l;
	pp_look_stats(&l);
	memset(o, 0, sizeof *o);
	o->dumps_open = pp_jobs_open(&pp_dump_producer);
	o->wall_open = pp_jobs_open(&pp_wall_producer);
	o->dumps = atomic_load(&pp_threads_dumps);
	o->wall_ticks = atomic_load(&pp_threads_wall_ticks);
	o->wall_samples = atomic_load(&pp_threads_wall_samples);
	o->wall_late_ticks = atomic_load(&pp_threads_wall_late);
	o->wall_threads = pp_threads_cfg.wall_threads;
	o->blocked = l.blocked;
	o->running = l.running;
	o->self = l.self;
	o->gone = l.gone;
	o->not_caught = l.not_caught;
	o->moved = l.moved;
	o->no_perf = l.no_perf;
	o->denied = l.denied;
	o->seccomp = l.seccomp;
	o->walk_incomplete = l.walk_incomplete;
	o->perf_errno = l.perf_errno;
	o->perf_kernel = l.perf_kernel;
}

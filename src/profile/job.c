/*
 * The job pipeline (job.h): every profile request's lifecycle, one state
 * machine for every kind.
 * Context: agent.
 */
#include "job.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_threads.h"
#include "profile/recent.h"
#include "util/clock.h"
#include "util/proc.h"

/* How often waiting clients are checked for a hang-up. */
#define HANGUP_CHECK_NS 100000000ull
#define MAX_TICKERS 8

enum job_state {
	JOB_WAITING,   /* for the producer's model */
	JOB_READY,     /* a model (or a kept one) to render */
	JOB_RENDERING, /* on the pipeline's thread */
	JOB_DONE,      /* body or err set */
	JOB_CANCELLED,
};

struct pp_job {
	atomic_int refs;
	enum job_state state; /* under the lock, as every field below */
	int listed;           /* on the pipeline's list */
	struct pp_job *next;
	struct pp_producer *producer;
	void *data; /* the producer's */
	uint64_t opened_ns, due_ns;
	unsigned seconds; /* the request's window (0: now) */
	int64_t opened_real_ns;
	struct pp_render_opts render;
	int keep;
	int client_fd;
	pp_job_done_fn done;
	void *arg;                /* NULL once the requester let go */
	struct pp_profile *model; /* delivered or made, to render */
	struct pp_recent *kept;   /* ?id=: the kept model to render */
	uint64_t id;              /* the id of the model rendered */
	char *body;
	size_t len;
	int err;
	int taken;
	int starting; /* its producer's start runs (pp_job_open) */
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t wake;
	int running, stopping;
	pthread_t thread;
	struct pp_job *jobs; /* not yet done, oldest first */
	struct pp_producer *tickers[MAX_TICKERS];
	size_t ntickers;
} pipeline = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
};

/* ---- references --------------------------------------------------------- */

void pp_job_ref(struct pp_job *j)
{
	atomic_fetch_add(&j->refs, 1);
}

void pp_job_unref(struct pp_job *j)
{
	if (!j || atomic_fetch_sub(&j->refs, 1) != 1)
		return;
	if (j->data && j->producer->free)
		j->producer->free(j->data);
	pp_profile_free(j->model);
	pp_recent_unref(j->kept);
	free(j->body);
	free(j);
}

void *pp_job_data(const struct pp_job *j)
{
	return j->data;
}

void pp_job_set_data(struct pp_job *j, void *data)
{
	j->data = data;
}

const struct pp_producer *pp_job_producer(const struct pp_job *j)
{
	return j->producer;
}

unsigned pp_job_seconds(const struct pp_job *j)
{
	return j->seconds;
}

uint64_t pp_job_opened_ns(const struct pp_job *j)
{
	return j->opened_ns;
}

int64_t pp_job_opened_real_ns(const struct pp_job *j)
{
	return j->opened_real_ns;
}

/* ---- the list (lock held) ------------------------------------------------ */

static void append_locked(struct pp_job *j)
{
	struct pp_job **p = &pipeline.jobs;
	while (*p)
		p = &(*p)->next;
	j->next = NULL;
	*p = j;
	j->listed = 1;
}

static void unlink_locked(struct pp_job *j)
{
	if (!j->listed)
		return;
	for (struct pp_job **p = &pipeline.jobs; *p; p = &(*p)->next)
		if (*p == j) {
			*p = j->next;
			break;
		}
	j->next = NULL;
	j->listed = 0;
}

static unsigned count_locked(const struct pp_producer *p)
{
	unsigned n = 0;
	for (struct pp_job *j = pipeline.jobs; j; j = j->next)
		if (j->producer == p && !j->kept)
			n++;
	return n;
}

/* ---- ending a job ------------------------------------------------------- */

/* Drop the list's reference to j and tell its requester, once (unlocked).
 * The callback is taken under the lock and called last: by then the job
 * may be gone (its requester let go), and the list holds nothing. */
static void finish(struct pp_job *j)
{
	pthread_mutex_lock(&pipeline.mu);
	pp_job_done_fn done = j->done;
	void *arg = j->arg;
	j->done = NULL;
	pthread_mutex_unlock(&pipeline.mu);
	pp_job_unref(j);
	if (done && arg)
		done(arg);
}

/* Cancel j if it has not ended yet. Returns 2 when it was waiting for its
 * producer, 1 when it had a model, 0 when there is nothing to do here (it
 * ended, the renderer ends it, or its opener does); with 1 or 2 the
 * list's reference is the caller's to drop, through cancelled(). Lock
 * held. */
static int cancel_locked(struct pp_job *j)
{
	if (j->state == JOB_DONE || j->state == JOB_CANCELLED ||
	    j->state == JOB_RENDERING)
		return 0;
	int how = j->state == JOB_WAITING ? 2 : 1;
	j->state = JOB_CANCELLED;
	unlink_locked(j);
	return j->starting ? 0 : how;
}

/* After cancel_locked said so (unlocked): the producer undoes what it set
 * up, the requester hears, the list lets go. */
static void cancelled(struct pp_job *j, int how)
{
	if (how == 2 && !j->kept && j->producer->cancel)
		j->producer->cancel(j);
	finish(j);
}

/* ---- the pipeline's thread ---------------------------------------------- */

/* Render j's model (or the kept one), keep it for ?id=, and end the job. */
static void render(struct pp_job *j)
{
	const struct pp_profile *p =
	    j->kept ? pp_recent_profile(j->kept) : j->model;
	char *body = NULL;
	size_t len = 0;
	uint64_t id = j->kept ? j->id : 0;
	int rc = j->err;

	if (!rc)
		rc = pp_render_body(p, &j->render, &body, &len);
	if (!rc && !j->kept && j->keep) {
		/* The store frees it in the end. */
		id = pp_recent_add(j->producer->kind, j->model);
		j->model = NULL;
	}
	pthread_mutex_lock(&pipeline.mu);
	j->body = body;
	j->len = len;
	j->err = rc;
	j->id = id;
	/* A release while rendering left the state alone (cancel_locked):
	 * the answer is kept all the same, and nobody takes it. */
	j->state = JOB_DONE;
	unlink_locked(j);
	pthread_mutex_unlock(&pipeline.mu);
	finish(j);
}

/* Make a due job's model on this thread (a snapshot-shaped producer). A
 * job being rendered is this thread's alone: nobody else touches its
 * model or error until it is done. */
static void make(struct pp_job *j)
{
	j->model = NULL;
	j->err = j->producer->make(j, &j->model);
	render(j);
}

/* pp_jobs_tick_soon was called: the ticks run at the next turn. */
static _Atomic int tick_asked;

static void *pipeline_thread(void *unused)
{
	uint64_t last_hangup = 0, last_tick = 0;
	(void)unused;
	pp_agent_thread_enter(PP_AGENT_UNSAMPLED);
	pthread_mutex_lock(&pipeline.mu);
	while (!pipeline.stopping) {
		uint64_t now = pp_clock_ns(CLOCK_MONOTONIC);
		/* When to look again: the next due job, the next hang-up check
		 * while a client waits, the next tick; none of these, no
		 * timer (an idle agent's thread does not wake up). */
		uint64_t next =
		    pipeline.ntickers ? last_tick + PP_JOB_TICK_NS : UINT64_MAX;
		struct pp_job *todo = NULL;

		for (struct pp_job *j = pipeline.jobs; j; j = j->next) {
			if (j->starting)
				continue; /* its producer is setting it up */
			if (j->state == JOB_READY) {
				todo = j;
				break;
			}
			if (j->state != JOB_WAITING)
				continue;
			if (j->client_fd >= 0 &&
			    last_hangup + HANGUP_CHECK_NS < next)
				next = last_hangup + HANGUP_CHECK_NS;
			if (!j->producer->make)
				continue;
			if (j->due_ns <= now) {
				todo = j;
				break;
			}
			if (j->due_ns < next)
				next = j->due_ns;
		}
		if (todo) {
			int made = todo->state == JOB_WAITING;
			todo->state = JOB_RENDERING;
			pthread_mutex_unlock(&pipeline.mu);
			if (made)
				make(todo);
			else
				render(todo);
			pthread_mutex_lock(&pipeline.mu);
			continue;
		}
		if (now - last_hangup >= HANGUP_CHECK_NS) {
			last_hangup = now;
			struct pp_job *gone = NULL;
			for (struct pp_job *j = pipeline.jobs; j; j = j->next)
				if (j->state == JOB_WAITING &&
				    pp_fd_hung_up(j->client_fd)) {
					gone = j;
					break;
				}
			if (gone) {
				int how = cancel_locked(gone);
				pthread_mutex_unlock(&pipeline.mu);
				if (how)
					cancelled(gone, how);
				pthread_mutex_lock(&pipeline.mu);
				continue;
			}
		}
		if (now - last_tick >= PP_JOB_TICK_NS ||
		    atomic_exchange(&tick_asked, 0)) {
			last_tick = now;
			struct pp_producer *tickers[MAX_TICKERS];
			size_t n = pipeline.ntickers;
			memcpy(tickers, pipeline.tickers, n * sizeof *tickers);
			pthread_mutex_unlock(&pipeline.mu);
			for (size_t i = 0; i < n; i++)
				tickers[i]->tick();
			pthread_mutex_lock(&pipeline.mu);
			continue;
		}
		if (next == UINT64_MAX) {
			pthread_cond_wait(&pipeline.wake, &pipeline.mu);
		} else if (next > now) {
			struct timespec until =
			    pp_clock_after(CLOCK_MONOTONIC, next - now);
			pthread_cond_timedwait(&pipeline.wake, &pipeline.mu,
			                       &until);
		}
	}
	pthread_mutex_unlock(&pipeline.mu);
	pp_agent_thread_leave();
	return NULL;
}

/* ---- requests ------------------------------------------------------------ */

int pp_job_open(const struct pp_job_request *rq, struct pp_job **out,
                unsigned *retry_after, char *err, size_t errlen)
{
	struct pp_producer *pr = rq->producer;
	struct pp_job *j = calloc(1, sizeof *j);
	int rc = 0;

	if (!j) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	atomic_init(&j->refs, 2); /* the requester's and the list's */
	j->producer = pr;
	j->render = rq->render;
	j->keep = rq->keep;
	j->client_fd = rq->client_fd;
	j->done = rq->done;
	j->arg = rq->arg;
	j->opened_ns = pp_clock_ns(CLOCK_MONOTONIC);
	j->opened_real_ns = (int64_t)pp_clock_ns(CLOCK_REALTIME);
	j->seconds = rq->seconds;
	j->due_ns = j->opened_ns + (uint64_t)rq->seconds * PP_NS_PER_SEC;

	if (rq->id) {
		/* Again, from the store: no producer is involved. */
		j->kept = pp_recent_get(rq->id, pr->kind, err, errlen);
		if (!j->kept) {
			free(j);
			return -ENOENT;
		}
		j->id = rq->id;
		j->state = JOB_READY;
		j->client_fd = -1;
	}

	pthread_mutex_lock(&pipeline.mu);
	unsigned open = j->kept ? 0 : count_locked(pr);
	if (!pipeline.running || pipeline.stopping) {
		snprintf(err, errlen, "the agent is stopping");
		rc = -ESHUTDOWN;
	} else if (!j->kept && open >= pr->max_open) {
		uint64_t first = UINT64_MAX;
		for (struct pp_job *o = pipeline.jobs; o; o = o->next)
			if (o->producer == pr && !o->kept && o->due_ns < first)
				first = o->due_ns;
		*retry_after =
		    first > j->opened_ns
		        ? (unsigned)((first - j->opened_ns) / PP_NS_PER_SEC) + 1
		        : 1;
		snprintf(err, errlen,
		         "%u %s are already running or being built (the most "
		         "%s allows); retry in %u s",
		         open, pr->what, pr->limit_setting, *retry_after);
		rc = -EBUSY;
	} else {
		/* Listed before the producer starts, so that the limit counts
		 * it; a stop meanwhile marks it cancelled and leaves the rest
		 * to us (cancel_locked). */
		append_locked(j);
		j->starting = 1;
	}
	pthread_mutex_unlock(&pipeline.mu);
	if (rc) {
		pp_recent_unref(j->kept);
		free(j);
		return rc;
	}

	int undo = 0;
	if (!j->kept)
		rc = pr->start(j, rq->query, err, errlen);
	pthread_mutex_lock(&pipeline.mu);
	j->starting = 0;
	if (j->state == JOB_CANCELLED) {
		/* A stop came while the producer started: it may have been
		 * stopped under it too (the kinds stop right after the jobs),
		 * and then says it is "off"; the answer is that the agent is
		 * stopping either way. */
		undo = !rc && !j->kept;
		snprintf(err, errlen, "the agent is stopping");
		rc = -ESHUTDOWN;
	}
	if (rc)
		unlink_locked(j);
	else /* work, a due time, or a client to watch */
		pthread_cond_signal(&pipeline.wake);
	pthread_mutex_unlock(&pipeline.mu);
	if (rc) {
		if (undo && pr->cancel)
			pr->cancel(j);
		j->done = NULL;
		pp_job_unref(j); /* the list's */
		pp_job_unref(j); /* the requester's */
		return rc;
	}
	*out = j;
	return 0;
}

void pp_job_deliver(struct pp_job *j, struct pp_profile *p, int rc)
{
	pthread_mutex_lock(&pipeline.mu);
	if (j->state != JOB_WAITING) {
		/* Cancelled: nobody wants it. */
		pthread_mutex_unlock(&pipeline.mu);
		pp_profile_free(p);
		return;
	}
	j->model = p;
	j->err = rc;
	j->state = JOB_READY;
	pthread_cond_signal(&pipeline.wake);
	pthread_mutex_unlock(&pipeline.mu);
}

int pp_job_take(struct pp_job *j, char **body, size_t *len, uint64_t *id)
{
	int rc;
	pthread_mutex_lock(&pipeline.mu);
	switch (j->state) {
	case JOB_DONE:
		rc = j->err;
		if (!rc && j->taken)
			rc = -EALREADY;
		if (!rc) {
			*body = j->body;
			*len = j->len;
			*id = j->id;
			j->body = NULL;
			j->taken = 1;
		}
		break;
	case JOB_CANCELLED: rc = -ECANCELED; break;
	default: rc = -EAGAIN; break;
	}
	pthread_mutex_unlock(&pipeline.mu);
	return rc;
}

void pp_job_release(struct pp_job *j)
{
	if (!j)
		return;
	pthread_mutex_lock(&pipeline.mu);
	j->done = NULL;
	j->arg = NULL;
	int how = cancel_locked(j);
	pthread_mutex_unlock(&pipeline.mu);
	if (how)
		cancelled(j, how); /* drops the list's reference */
	pp_job_unref(j);           /* the requester's */
}

unsigned pp_jobs_open(const struct pp_producer *p)
{
	pthread_mutex_lock(&pipeline.mu);
	unsigned n = count_locked(p);
	pthread_mutex_unlock(&pipeline.mu);
	return n;
}

/* ---- lifecycle ----------------------------------------------------------- */

int pp_job_window_delta(const struct pp_job *j, struct pp_profile *end,
                        const struct pp_profile *start, struct pp_profile **out)
{
	int rc = pp_profile_delta(end, start, out);
	pp_profile_free(end);
	if (rc)
		return rc;
	pp_profile_set_time(
	    *out, pp_job_opened_real_ns(j),
	    (int64_t)(pp_clock_ns(CLOCK_MONOTONIC) - pp_job_opened_ns(j)));
	return 0;
}

void pp_jobs_tick_soon(void)
{
	if (!atomic_exchange(&tick_asked, 1))
		pthread_cond_signal(&pipeline.wake);
}

void pp_jobs_add_ticker(struct pp_producer *p)
{
	pthread_mutex_lock(&pipeline.mu);
	size_t i = 0;
	while (i < pipeline.ntickers && pipeline.tickers[i] != p)
		i++;
	if (i == pipeline.ntickers && i < MAX_TICKERS)
		pipeline.tickers[pipeline.ntickers++] = p;
	pthread_mutex_unlock(&pipeline.mu);
}

int pp_jobs_start(char *err, size_t errlen)
{
	pthread_condattr_t ca;
	int rc;

	pthread_mutex_lock(&pipeline.mu);
	if (pipeline.running) {
		pthread_mutex_unlock(&pipeline.mu);
		return 0;
	}
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&pipeline.wake, &ca);
	pthread_condattr_destroy(&ca);
	pipeline.stopping = 0;
	rc = pp_agent_thread_create(&pipeline.thread, "pullprof-jobs",
	                            pipeline_thread, NULL);
	if (rc)
		snprintf(err, errlen, "cannot start the agent's job thread: %s",
		         strerror(-rc));
	else
		pipeline.running = 1;
	pthread_mutex_unlock(&pipeline.mu);
	return rc;
}

int pp_jobs_accepting(void)
{
	pthread_mutex_lock(&pipeline.mu);
	int yes = pipeline.running && !pipeline.stopping;
	pthread_mutex_unlock(&pipeline.mu);
	return yes;
}

void pp_jobs_shutdown(void)
{
	pthread_mutex_lock(&pipeline.mu);
	if (!pipeline.running) {
		pthread_mutex_unlock(&pipeline.mu);
		return;
	}
	pipeline.stopping = 1;
	pthread_cond_broadcast(&pipeline.wake);
	pthread_mutex_unlock(&pipeline.mu);
	/* It finishes what it is rendering and leaves. */
	pthread_join(pipeline.thread, NULL);
	pthread_mutex_lock(&pipeline.mu);
	while (pipeline.jobs) {
		struct pp_job *j = pipeline.jobs;
		int how = cancel_locked(j);
		unlink_locked(j); /* one still starting: its opener ends it */
		pthread_mutex_unlock(&pipeline.mu);
		if (how)
			cancelled(j, how);
		pthread_mutex_lock(&pipeline.mu);
	}
	pipeline.running = 0;
	pipeline.stopping = 0;
	pthread_mutex_unlock(&pipeline.mu);
}

void pp_jobs_forget_in_child(void)
{
	/* The parent's thread may have held these at fork time. */
	pthread_mutex_init(&pipeline.mu, NULL);
	pthread_cond_init(&pipeline.wake, NULL);
	/* Left to leak: their requests are the parent's. */
	pipeline.jobs = NULL;
	pipeline.running = pipeline.stopping = 0;
}

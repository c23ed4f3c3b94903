/*
 * The lookup thread (see lookup.h). A job is held by two owners: the queue
 * (then the thread running it) and the request waiting for it; whichever lets
 * go last frees it. The request's connection is suspended while it waits:
 * libmicrohttpd neither reads nor times it out then, so it cannot end before
 * the thread resumes it, except at the server's stop, which comes after
 * pp_lookups_stop.
 * Context: agent.
 */
#include "lookup.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_threads.h"
#include "request.h"
#include "respond.h"
#include "server.h"
#include "util/proc.h"

enum { L_QUEUED, L_RUNNING, L_DONE, L_CANCELLED };

struct job {
	struct job *next;
	struct pp_lookups *l;
	pp_lookup_fn fn;
	void *arg;
	void (*free_arg)(void *arg);
	struct MHD_Connection *conn; /* NULL once the request let go */
	int client_fd;
	int state, owners;
	atomic_int cancel;
	struct pp_lookup_answer ans;
};

struct pp_lookups;

struct worker {
	struct pp_lookups *l;
	pthread_t thread;
	struct job *current; /* the one it runs */
};

struct pp_lookups {
	pthread_mutex_t mu;
	pthread_cond_t wake;
	struct worker workers[PP_LOOKUP_MAX_THREADS];
	unsigned nworkers;
	struct pp_lookups_spec spec;
	struct pp_server *srv;
	struct job *head, **tail;
	unsigned max, queued, running;
	uint64_t done, cancelled, refused;
	int stopping, stopped;
};

static void let_go_locked(struct job *j)
{
	if (--j->owners > 0)
		return;
	if (j->free_arg)
		j->free_arg(j->arg);
	free(j->ans.body);
	if (j->ans.json)
		json_object_put(j->ans.json);
	free(j);
}

/* Called locked with j off the queue; returns locked. */
static void finish_locked(struct pp_lookups *l, struct job *j, int state)
{
	j->state = state;
	if (state == L_DONE)
		l->done++;
	else
		l->cancelled++;
	struct MHD_Connection *conn = j->conn;
	if (conn) {
		/* The request still waits, suspended: it cannot end (and let
		 * go of j) before it is resumed. */
		pthread_mutex_unlock(&l->mu);
		pp_server_resume(l->srv, conn);
		pthread_mutex_lock(&l->mu);
	}
	let_go_locked(j);
}

static struct job *pop_locked(struct pp_lookups *l)
{
	struct job *j = l->head;
	if (j) {
		l->head = j->next;
		if (!l->head)
			l->tail = &l->head;
		j->next = NULL;
		l->queued--;
	}
	return j;
}

static void *thread_main(void *arg)
{
	struct worker *w = arg;
	struct pp_lookups *l = w->l;

	pp_agent_thread_enter(0);
	pthread_mutex_lock(&l->mu);
	while (!l->stopping) {
		struct job *j = pop_locked(l);
		if (!j) {
			pthread_cond_wait(&l->wake, &l->mu);
			continue;
		}
		if (!j->conn || pp_fd_hung_up(j->client_fd)) {
			finish_locked(l, j, L_CANCELLED);
			continue;
		}
		j->state = L_RUNNING;
		l->running++;
		w->current = j;
		pthread_mutex_unlock(&l->mu);
		j->fn(j->arg, &j->cancel, &j->ans);
		pthread_mutex_lock(&l->mu);
		w->current = NULL;
		l->running--;
		finish_locked(l, j,
		              atomic_load(&j->cancel) ? L_CANCELLED : L_DONE);
	}
	struct job *j;
	while ((j = pop_locked(l)))
		finish_locked(l, j, L_CANCELLED);
	pthread_mutex_unlock(&l->mu);
	pp_agent_thread_leave();
	return NULL;
}

int pp_lookups_start(struct pp_server *srv, const struct pp_lookups_spec *spec,
                     struct pp_lookups **out)
{
	struct pp_lookups *l = calloc(1, sizeof *l);

	if (!l)
		return -ENOMEM;
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->wake, NULL);
	l->srv = srv;
	l->spec = *spec;
	l->max = spec->max ? spec->max : 1;
	l->tail = &l->head;
	unsigned n = spec->threads ? spec->threads : 1;
	if (n > PP_LOOKUP_MAX_THREADS)
		n = PP_LOOKUP_MAX_THREADS;
	for (unsigned i = 0; i < n; i++) {
		struct worker *w = &l->workers[i];
		w->l = l;
		int rc = pp_agent_thread_create(&w->thread, spec->thread_name,
		                                thread_main, w);
		if (rc) {
			l->nworkers = i;
			pp_lookups_stop(l);
			pp_lookups_free(l);
			return rc;
		}
	}
	l->nworkers = n;
	*out = l;
	return 0;
}

void pp_lookups_stop(struct pp_lookups *l)
{
	if (!l || l->stopped)
		return;
	pthread_mutex_lock(&l->mu);
	l->stopping = 1;
	/* The running ones end early; the queued ones are answered 503. */
	for (unsigned i = 0; i < l->nworkers; i++)
		if (l->workers[i].current)
			atomic_store(&l->workers[i].current->cancel, 1);
	pthread_cond_broadcast(&l->wake);
	pthread_mutex_unlock(&l->mu);
	for (unsigned i = 0; i < l->nworkers; i++)
		pthread_join(l->workers[i].thread, NULL);
	l->stopped = 1;
}

void pp_lookups_free(struct pp_lookups *l)
{
	if (!l)
		return;
	pthread_cond_destroy(&l->wake);
	pthread_mutex_destroy(&l->mu);
	free(l);
}

/* ---- the request side (HTTP thread) ------------------------------------ */

static void request_done(struct pp_request *r)
{
	struct job *j = r->state;
	struct pp_lookups *l = j->l;

	r->state = NULL;
	pthread_mutex_lock(&l->mu);
	j->conn = NULL; /* nobody to resume any more */
	if (j->state == L_QUEUED) {
		/* Still queued (the connection ended at the server's stop), or
		 * counted and never linked (the daemon was abandoned in its
		 * suspension, loop.c): the queue lets go of it too. */
		struct job **p = &l->head;
		while (*p && *p != j)
			p = &(*p)->next;
		if (*p) {
			*p = j->next;
			if (!*p)
				l->tail = p;
		}
		l->queued--;
		j->owners--;
		l->cancelled++;
	} else if (j->state == L_RUNNING) {
		atomic_store(&j->cancel, 1);
	}
	let_go_locked(j);
	pthread_mutex_unlock(&l->mu);
}

static enum MHD_Result answer(struct pp_request *r)
{
	struct job *j = r->state;
	struct pp_lookups *l = j->l;

	pthread_mutex_lock(&l->mu);
	int state = j->state;
	struct pp_lookup_answer a = j->ans;
	j->ans.body = NULL;
	j->ans.json = NULL;
	pthread_mutex_unlock(&l->mu);

	if (state != L_DONE || (a.status != MHD_HTTP_OK && !a.verbatim)) {
		/* What a cancelled lookup may have made is not sent. */
		free(a.body);
		if (a.json)
			json_object_put(a.json);
	}
	if (state != L_DONE)
		return pp_respond_error(r, MHD_HTTP_SERVICE_UNAVAILABLE,
		                        "%s cancelled: the agent is stopping",
		                        r->route->name);
	/* Names and values live in j until the answer is made, below. */
	for (size_t i = 0; i < sizeof a.headers / sizeof a.headers[0]; i++)
		if (a.headers[i][0][0])
			pp_respond_header(r, j->ans.headers[i][0],
			                  j->ans.headers[i][1]);
	if (a.verbatim)
		return pp_respond(r, a.status,
		                  a.ctype[0] ? j->ans.ctype : a.content_type,
		                  a.body, a.len, PP_BODY_FREE);
	if (a.status != MHD_HTTP_OK)
		return pp_respond_error(r, a.status, "%s", a.msg);
	if (a.json)
		return pp_respond_json(r, MHD_HTTP_OK, a.json);
	return pp_respond(r, MHD_HTTP_OK, a.content_type, a.body, a.len,
	                  PP_BODY_FREE);
}

enum MHD_Result pp_lookup_answer_later(struct pp_request *r, pp_lookup_fn fn,
                                       void *arg, void (*free_arg)(void *arg))
{
	return pp_lookup_answer_on(r->srv->lookups, r, fn, arg, free_arg);
}

enum MHD_Result pp_lookup_answer_on(struct pp_lookups *l, struct pp_request *r,
                                    pp_lookup_fn fn, void *arg,
                                    void (*free_arg)(void *arg))
{
	pthread_mutex_lock(&l->mu);
	unsigned busy = l->queued + l->running;
	if (l->stopping) {
		pthread_mutex_unlock(&l->mu);
		if (free_arg)
			free_arg(arg);
		return pp_respond_error(r, MHD_HTTP_SERVICE_UNAVAILABLE,
		                        "%s cancelled: the agent is stopping",
		                        r->route->name);
	}
	if (busy >= l->max) {
		l->refused++;
		pthread_mutex_unlock(&l->mu);
		if (free_arg)
			free_arg(arg);
		r->headers[0][0] = "Retry-After";
		r->headers[0][1] = "1";
		return pp_respond_error(
		    r, MHD_HTTP_TOO_MANY_REQUESTS,
		    "%s: %u %s are already queued or running%s%s%s; try "
		    "again later",
		    r->route->name, busy, l->spec.what,
		    l->spec.setting ? " (" : "",
		    l->spec.setting ? l->spec.setting : "",
		    l->spec.setting ? ")" : "");
	}
	struct job *j = calloc(1, sizeof *j);
	if (!j) {
		pthread_mutex_unlock(&l->mu);
		if (free_arg)
			free_arg(arg);
		return pp_respond_error(r, MHD_HTTP_SERVICE_UNAVAILABLE,
		                        "%s: out of memory", r->route->name);
	}
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	j->l = l;
	j->fn = fn;
	j->arg = arg;
	j->free_arg = free_arg;
	j->conn = r->conn;
	j->client_fd = ci ? ci->connect_fd : -1;
	j->state = L_QUEUED;
	j->owners = 2; /* the queue and the request */
	l->queued++;   /* counted now, linked once the request is suspended */
	r->state = j;
	r->cleanup = request_done;
	r->resume = answer;
	pthread_mutex_unlock(&l->mu);
	/* Suspended before the job is linked, so that no lookup thread can
	 * resume the request first; and outside the lock, because
	 * libmicrohttpd may panic in the suspension and the HTTP thread then
	 * leaves it by a jump (loop.c). */
	pp_request_suspend(r);
	pthread_mutex_lock(&l->mu);
	if (l->stopping) {
		/* The threads may be gone: nobody would take it. */
		l->queued--;
		finish_locked(l, j, L_CANCELLED);
	} else {
		*l->tail = j;
		l->tail = &j->next;
		pthread_cond_signal(&l->wake);
	}
	pthread_mutex_unlock(&l->mu);
	return MHD_YES;
}

void pp_lookups_stats(struct pp_lookups *l, struct pp_lookup_stats *o)
{
	memset(o, 0, sizeof *o);
	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	o->max = l->max;
	o->queued = l->queued;
	o->running = l->running;
	o->done = l->done;
	o->cancelled = l->cancelled;
	o->refused = l->refused;
	pthread_mutex_unlock(&l->mu);
}

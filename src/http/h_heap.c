/*
 * /heap and /allocs: sampled heap profiles. The profile is built on the heap
 * worker thread (symbolizing can take a while) while the connection is
 * suspended; with ?seconds=N it is the difference over the next N seconds.
 * Agent context.
 */
#include <errno.h>
#include <stdio.h>

#include "agent.h"
#include "handlers.h"
#include "heap/heap.h"
#include "query.h"
#include "respond.h"

static int take(void *j, char **body, size_t *len, uint64_t *id)
{
	return pp_heap_job_take(j, body, len, id);
}

static void release(void *j)
{
	pp_heap_job_release(j);
}

static const struct pp_deferred job = {take, release};

static enum MHD_Result heap(struct pp_request *r, enum pp_heap_view view)
{
	const struct pp_config *cfg = &pp_agent_get()->cfg;
	struct pp_heap_query q = {.view = view, .keep = 1};
	unsigned gc, peak;
	char err[300];

	/* gc: Go clients ask for a collection first; there is none here, the
	 * value is checked and otherwise ignored. */
	if (pp_query_uint(r, "seconds", 0, 0, cfg->v.max_seconds, &q.seconds,
	                  err, sizeof err) ||
	    pp_query_uint(r, "gc", 0, 0, 1, &gc, err, sizeof err) ||
	    pp_query_choice(r, "peak", "0|1|reset", &peak, err, sizeof err) ||
	    pp_query_render(
	        r, "alloc_objects|alloc_space|inuse_objects|inuse_space", 0,
	        &q.render, err, sizeof err) ||
	    pp_query_id(r, "seconds|peak", &q.id, err, sizeof err))
		return pp_respond_error(r, MHD_HTTP_BAD_REQUEST, "%s", err);
	q.peak = peak != 0;
	q.peak_reset = peak == 2;
	if (q.peak && q.seconds)
		return pp_respond_error(
		    r, MHD_HTTP_BAD_REQUEST,
		    "peak and seconds do not combine: a peak profile is what "
		    "was live at one moment");

	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct pp_heap_job *j;
	int rc = pp_heap_job_open(&q, ci ? ci->connect_fd : -1, pp_request_wake,
	                          r, &j, err, sizeof err);
	if (rc == -ESHUTDOWN && cfg->v.heap_rate)
		/* On, but stopping with the agent (the request came in
		 * between the heap profiler's stop and the server's). */
		return pp_respond_error(r, MHD_HTTP_SERVICE_UNAVAILABLE,
		                        "heap profile cancelled: the agent is "
		                        "stopping");
	if (rc == -ESHUTDOWN)
		return pp_respond_error(
		    r, MHD_HTTP_NOT_FOUND,
		    "heap profiling is off in this process: start it with "
		    "PULLPROF_HEAP_RATE greater than 0");
	if (rc == -ENOENT)
		return pp_respond_error(r, MHD_HTTP_NOT_FOUND, "%s", err);
	if (rc == -EBUSY) {
		r->headers[0][0] = "Retry-After";
		r->headers[0][1] = "1";
		return pp_respond_error(r, MHD_HTTP_TOO_MANY_REQUESTS, "%s",
		                        err);
	}
	if (rc)
		return pp_respond_error(r, MHD_HTTP_SERVICE_UNAVAILABLE, "%s",
		                        err);
	r->render = q.render;
	pp_request_defer(r, j, &job);
	return MHD_YES;
}

enum MHD_Result pp_h_heap(struct pp_request *r)
{
	return heap(r, PP_HEAP_INUSE);
}

enum MHD_Result pp_h_allocs(struct pp_request *r)
{
	return heap(r, PP_HEAP_ALLOCS);
}

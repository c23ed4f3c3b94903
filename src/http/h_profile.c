/*
 * /profile: a CPU profile of the next `seconds`. The request opens a window
 * on the shared sampler and its connection is suspended, so the HTTP thread
 * serves others meanwhile; the builder thread resumes it when the profile
 * is ready (or the window was cancelled). Agent context.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "agent.h"
#include "cpu/cpu.h"
#include "handlers.h"
#include "query.h"
#include "respond.h"
#include "server.h"

static int take(void *w, char **body, size_t *len, uint64_t *id)
{
	return pp_cpu_window_take(w, body, len, id);
}

static void release(void *w)
{
	pp_cpu_window_release(w);
}

static const struct pp_deferred window = {take, release};

enum MHD_Result pp_h_profile(struct pp_request *r)
{
	const struct pp_config *cfg = &pp_agent_get()->cfg;
	struct pp_cpu_query q = {.keep = 1};
	unsigned retry = 0;
	char err[300], retry_text[16];
	struct pp_cpu_window *w;
	int rc;

	if (pp_query_uint(r, "seconds",
	                  cfg->v.max_seconds < 30 ? cfg->v.max_seconds : 30, 1,
	                  cfg->v.max_seconds, &q.seconds, err, sizeof err) ||
	    pp_query_uint(r, "hz", cfg->v.cpu_hz, 1, 1000, &q.hz, err,
	                  sizeof err) ||
	    pp_query_render(r, "samples|cpu", 1, &q.render, err, sizeof err) ||
	    pp_query_id(r, "seconds|hz", &q.id, err, sizeof err))
		return pp_respond_error(r, MHD_HTTP_BAD_REQUEST, "%s", err);

	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	rc = pp_cpu_window_open(&q, ci ? ci->connect_fd : -1, pp_request_wake,
	                        r, &w, &retry, err, sizeof err);
	if (rc == -EBUSY) {
		snprintf(retry_text, sizeof retry_text, "%u", retry);
		r->headers[0][0] = "Retry-After";
		r->headers[0][1] = retry_text;
		return pp_respond_error(r, MHD_HTTP_TOO_MANY_REQUESTS, "%s",
		                        err);
	}
	if (rc == -ENOENT)
		return pp_respond_error(r, MHD_HTTP_NOT_FOUND, "%s", err);
	if (rc == -EEXIST)
		return pp_respond_error(r, MHD_HTTP_CONFLICT, "%s", err);
	if (rc)
		return pp_respond_error(r, MHD_HTTP_SERVICE_UNAVAILABLE, "%s",
		                        err);
	r->render = q.render;
	pp_request_defer(r, w, &window);
	return MHD_YES;
}

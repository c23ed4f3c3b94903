/*
 * /profile: a CPU profile of the next `seconds`, a job of the CPU producer
 * (a window on the shared sampler). The connection waits suspended, so the
 * HTTP thread serves others meanwhile.
 * Context: agent.
 */
#include "config.h"
#include "cpu/cpu.h"
#include "handlers.h"
#include "query.h"
#include "record/record.h"
#include "respond.h"

enum MHD_Result pp_h_profile(struct pp_request *r)
{
	const struct pp_config *cfg = r->cfg;
	struct pp_cpu_query q = {0};
	struct pp_job_request rq = {
	    .producer = &pp_cpu_producer, .query = &q, .keep = 1};
	char err[300];
	struct pp_record_range rr;
	unsigned status;

	int rc =
	    pp_query_record(r, "seconds|hz", &rr, &status, err, sizeof err);
	if (rc < 0)
		return pp_respond_error(r, status, "%s", err);
	if (rc == 0) {
		/* The past, from the record: made at once. */
		if (pp_query_render(r, "samples|cpu",
		                    PP_RENDER_LEGACY | PP_RENDER_TIMELINE,
		                    &rq.render, err, sizeof err))
			return pp_respond_error(r, MHD_HTTP_BAD_REQUEST, "%s",
			                        err);
		rq.producer = &pp_record_producer;
		rq.query = &rr;
		return pp_respond_job(r, &rq);
	}
	if (pp_query_uint(r, "seconds",
	                  cfg->v.max_seconds < r->route->window
	                      ? cfg->v.max_seconds
	                      : r->route->window,
	                  1, cfg->v.max_seconds, &q.seconds, err, sizeof err) ||
	    pp_query_uint(r, "hz", cfg->v.cpu_hz, 1, 1000, &q.hz, err,
	                  sizeof err) ||
	    pp_query_render(r, "samples|cpu",
	                    PP_RENDER_LEGACY | PP_RENDER_TIMELINE, &rq.render,
	                    err, sizeof err) ||
	    pp_query_id(r, "seconds|hz", &rq.id, err, sizeof err))
		return pp_respond_error(r, MHD_HTTP_BAD_REQUEST, "%s", err);
	rq.seconds = q.seconds;
	return pp_respond_job(r, &rq);
}

/* /trace: the CPU window as a Perfetto trace (profile/perfetto.c); kept
 * under the same ids as /profile's, so ?id= renders either way. */
enum MHD_Result pp_h_trace(struct pp_request *r)
{
	const struct pp_config *cfg = r->cfg;
	struct pp_cpu_query q = {0};
	struct pp_job_request rq = {
	    .producer = &pp_cpu_producer, .query = &q, .keep = 1};
	char err[300];
	unsigned format = PP_FORMAT_PERFETTO, wall = 0, heap = 0;
	struct pp_record_range rr;
	unsigned status;

	int rc = pp_query_record(r, "seconds|hz|wall|heap", &rr, &status, err,
	                         sizeof err);
	if (rc < 0)
		return pp_respond_error(r, status, "%s", err);
	if (rc == 0) {
		if (pp_query_refuse(r, "wall|heap",
		                    "the record keeps CPU samples; wall= and "
		                    "heap= come with a new window (seconds=)",
		                    err, sizeof err) ||
		    pp_query_choice(r, "format", "perfetto", &format, err,
		                    sizeof err) ||
		    pp_query_refuse(r, "debug|top|sample_index",
		                    "/trace answers a Perfetto trace; the same "
		                    "range in other formats: /profile with the "
		                    "same last=, start=, end=",
		                    err, sizeof err) ||
		    pp_query_render(r, "samples|cpu", PP_RENDER_TIMELINE,
		                    &rq.render, err, sizeof err))
			return pp_respond_error(r, MHD_HTTP_BAD_REQUEST, "%s",
			                        err);
		rq.render.format = PP_FORMAT_PERFETTO;
		rq.producer = &pp_record_producer;
		rq.query = &rr;
		return pp_respond_job(r, &rq);
	}

	if (pp_query_uint(r, "seconds", r->route->window, 1, cfg->v.max_seconds,
	                  &q.seconds, err, sizeof err) ||
	    pp_query_uint(r, "hz", cfg->v.cpu_hz, 1, 1000, &q.hz, err,
	                  sizeof err) ||
	    pp_query_uint(r, "wall", 0, 0, 1, &wall, err, sizeof err) ||
	    pp_query_uint(r, "heap", 0, 0, 1, &heap, err, sizeof err) ||
	    pp_query_choice(r, "format", "perfetto", &format, err,
	                    sizeof err) ||
	    pp_query_refuse(r, "debug|top|sample_index",
	                    "/trace answers a Perfetto trace; the same window "
	                    "in other formats: /profile?id=N",
	                    err, sizeof err) ||
	    pp_query_render(r, "samples|cpu", PP_RENDER_TIMELINE, &rq.render,
	                    err, sizeof err) ||
	    pp_query_id(r, "seconds|hz|wall|heap", &rq.id, err, sizeof err))
		return pp_respond_error(r, MHD_HTTP_BAD_REQUEST, "%s", err);
	q.wall = (int)wall;
	q.heap = (int)heap;
	rq.render.format = PP_FORMAT_PERFETTO;
	rq.seconds = q.seconds;
	return pp_respond_job(r, &rq);
}

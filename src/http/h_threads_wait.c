/*
 * Where threads wait: /goroutine (the thread dump, Go's path: each
 * "goroutine" is a thread), /wall (the wall-clock profile) and fgprof's
 * /debug/fgprof; where they come from: /threadcreate; and what they wait
 * for: /mutex (who held the locks others waited for) and /block (who
 * waited). Jobs of the threads
 * module's producers; the connection waits suspended.
 * Context: agent.
 */
#include <errno.h>

#include "config.h"
#include "handlers.h"
#include "locks/locks.h"
#include "query.h"
#include "record/record.h"
#include "respond.h"
#include "threads/threads.h"

/* The profiles of counts since the agent started: the thread dump,
 * threadcreate, mutex and block. seconds=N is their change over a window;
 * debug=1 Go's text (and debug=2, the dump's block per thread, up to
 * max_debug). */
static enum MHD_Result since_start(struct pp_request *r,
                                   struct pp_producer *producer,
                                   const char *types, int flags,
                                   unsigned max_debug, int recorded)
{
	const struct pp_config *cfg = r->cfg;
	struct pp_dump_query q = {0};
	struct pp_job_request rq = {
	    .producer = producer, .query = &q, .keep = 1};
	char err[300];

	/* mutex and block: a past range from the record's snapshots. */
	struct pp_record_snap_query sq = {.kind =
	                                      (enum pp_record_kind)recorded};
	unsigned status;
	int rc = recorded >= 0
	             ? pp_query_record_snaps(r, "seconds", &sq.range, &status,
	                                     err, sizeof err)
	             : pp_query_refuse(r, "last|start|end|recording",
	                               "the record keeps CPU samples, heap, "
	                               "mutex and block; this one is of now "
	                               "(or the change over seconds=N)",
	                               err, sizeof err);
	if (recorded < 0 && rc)
		return pp_respond_error(r, MHD_HTTP_BAD_REQUEST, "%s", err);
	if (recorded >= 0 && rc < 0)
		return pp_respond_error(r, status, "%s", err);
	if (recorded >= 0 && rc == 0) {
		if (pp_query_refuse(r, "debug",
		                    "a past range's change is a profile "
		                    "(format=pprof|text|folded|json)",
		                    err, sizeof err) ||
		    pp_query_render(r, types, flags, &rq.render, err,
		                    sizeof err))
			return pp_respond_error(r, MHD_HTTP_BAD_REQUEST, "%s",
			                        err);
		rc = pp_record_snaps_check((enum pp_record_kind)recorded,
		                           &sq.range, err, sizeof err);
		if (rc)
			return pp_respond_error(
			    r,
			    rc == -ENOTSUP ? MHD_HTTP_NOT_FOUND
			                   : MHD_HTTP_RANGE_NOT_SATISFIABLE,
			    "%s", err);
		rq.producer = &pp_record_snap_producers[recorded];
		rq.query = &sq;
		return pp_respond_job(r, &rq);
	}

	if (pp_query_uint(r, "seconds", 0, 0, cfg->v.max_seconds, &q.seconds,
	                  err, sizeof err) ||
	    pp_query_uint(r, "debug", 0, 0, max_debug, &q.debug, err,
	                  sizeof err) ||
	    pp_query_render(r, types, flags, &rq.render, err, sizeof err) ||
	    pp_query_id(r, "seconds", &rq.id, err, sizeof err))
		return pp_respond_error(r, MHD_HTTP_BAD_REQUEST, "%s", err);
	if (q.seconds && q.debug)
		/* As Go's: a delta is a profile, not a dump to read. */
		return pp_respond_error(
		    r, MHD_HTTP_BAD_REQUEST,
		    "seconds and debug do not combine: the change over a "
		    "window "
		    "is a profile (format=pprof|text|folded|json)");
	rq.seconds = q.seconds;
	return pp_respond_job(r, &rq);
}

enum MHD_Result pp_h_goroutine(struct pp_request *r)
{
	return since_start(r, &pp_dump_producer, "goroutine", PP_RENDER_DUMP, 2,
	                   -1);
}

enum MHD_Result pp_h_threadcreate(struct pp_request *r)
{
	return since_start(r, &pp_threadcreate_producer, "threadcreate",
	                   PP_RENDER_DUMP, 1, -1);
}

enum MHD_Result pp_h_mutex(struct pp_request *r)
{
	return since_start(r, &pp_mutex_producer, "contentions|delay",
	                   PP_RENDER_CONTENTION, 1, PP_RK_MUTEX);
}

enum MHD_Result pp_h_block(struct pp_request *r)
{
	return since_start(r, &pp_block_producer, "contentions|delay",
	                   PP_RENDER_CONTENTION, 1, PP_RK_BLOCK);
}

static enum MHD_Result wall(struct pp_request *r, int fgprof)
{
	const struct pp_config *cfg = r->cfg;
	struct pp_wall_query q = {.fgprof = fgprof};
	struct pp_job_request rq = {
	    .producer = &pp_wall_producer, .query = &q, .keep = 1};
	char err[300];

	if (pp_query_uint(r, "seconds",
	                  cfg->v.max_seconds < r->route->window
	                      ? cfg->v.max_seconds
	                      : r->route->window,
	                  1, cfg->v.max_seconds, &q.seconds, err, sizeof err) ||
	    pp_query_uint(r, "hz", PP_WALL_HZ, 1, PP_WALL_MAX_HZ, &q.hz, err,
	                  sizeof err) ||
	    pp_query_render(r, fgprof ? "samples|time" : "samples|wall",
	                    PP_RENDER_TIMELINE, &rq.render, err, sizeof err) ||
	    pp_query_id(r, "seconds|hz", &rq.id, err, sizeof err) ||
	    pp_query_refuse(r, "last|start|end|recording",
	                    "the record keeps CPU samples, heap, mutex and "
	                    "block; a wall-clock profile is of the next "
	                    "seconds (a wall window looks at blocked threads "
	                    "from outside, too costly to do all the time)",
	                    err, sizeof err))
		return pp_respond_error(r, MHD_HTTP_BAD_REQUEST, "%s", err);
	rq.seconds = q.seconds;
	return pp_respond_job(r, &rq);
}

enum MHD_Result pp_h_wall(struct pp_request *r)
{
	return wall(r, 0);
}

enum MHD_Result pp_h_fgprof(struct pp_request *r)
{
	return wall(r, 1);
}

/*
 * /heap and /allocs: sampled heap profiles, jobs of the heap producer. The
 * model is made and rendered on the job pipeline's thread (symbolizing can
 * take a while) while the connection is suspended; with ?seconds=N it is
 * the difference over the next N seconds.
 * Context: agent.
 */
#include <errno.h>

#include "config.h"
#include "handlers.h"
#include "heap/detect.h"
#include "heap/heap.h"
#include "query.h"
#include "record/record.h"
#include "respond.h"

static enum MHD_Result heap(struct pp_request *r, enum pp_heap_view view)
{
	const struct pp_config *cfg = r->cfg;
	struct pp_heap_query q = {.view = view};
	struct pp_job_request rq = {
	    .producer = &pp_heap_producer, .query = &q, .keep = 1};
	unsigned gc, peak, source, state;
	char err[1200];
	struct pp_record_snap_query sq = {.kind = PP_RK_HEAP,
	                                  .allocs = view == PP_HEAP_ALLOCS};
	unsigned status;

	/* A past range, from the record's snapshots: its change, or with
	 * state=1 the heap as of its end. */
	int rc = pp_query_record_snaps(r, "seconds|peak|source", &sq.range,
	                               &status, err, sizeof err);
	if (rc < 0)
		return pp_respond_error(r, status, "%s", err);
	if (rc == 0) {
		if (pp_query_uint(r, "gc", 0, 0, 1, &gc, err, sizeof err) ||
		    pp_query_uint(r, "state", 0, 0, 1, &state, err,
		                  sizeof err) ||
		    pp_query_render(
		        r,
		        "alloc_objects|alloc_space|inuse_objects|inuse_space",
		        0, &rq.render, err, sizeof err))
			return pp_respond_error(r, MHD_HTTP_BAD_REQUEST, "%s",
			                        err);
		sq.state = (int)state;
		rc = pp_record_snaps_check(PP_RK_HEAP, &sq.range, err,
		                           sizeof err);
		if (rc)
			return pp_respond_error(
			    r,
			    rc == -ENOTSUP ? MHD_HTTP_NOT_FOUND
			                   : MHD_HTTP_RANGE_NOT_SATISFIABLE,
			    "%s", err);
		rq.producer = &pp_record_snap_producers[PP_RK_HEAP];
		rq.query = &sq;
		return pp_respond_job(r, &rq);
	}

	/* gc: Go clients ask for a collection first; there is none here, the
	 * value is checked and otherwise ignored. */
	if (pp_query_uint(r, "seconds", 0, 0, cfg->v.max_seconds, &q.seconds,
	                  err, sizeof err) ||
	    pp_query_uint(r, "gc", 0, 0, 1, &gc, err, sizeof err) ||
	    pp_query_choice(r, "peak", "0|1|reset", &peak, err, sizeof err) ||
	    pp_query_choice(r, "source", "auto|interposed|jemalloc|tcmalloc",
	                    &source, err, sizeof err) ||
	    pp_query_render(
	        r, "alloc_objects|alloc_space|inuse_objects|inuse_space", 0,
	        &rq.render, err, sizeof err) ||
	    pp_query_id(r, "seconds|peak|source", &rq.id, err, sizeof err) ||
	    pp_query_refuse(r, "state",
	                    "state=1 is the heap as of a past range's end "
	                    "(with last=, start=, end=)",
	                    err, sizeof err))
		return pp_respond_error(r, MHD_HTTP_BAD_REQUEST, "%s", err);
	q.peak = peak != 0;
	q.peak_reset = peak == 2;
	if (q.peak && q.seconds)
		return pp_respond_error(
		    r, MHD_HTTP_BAD_REQUEST,
		    "peak and seconds do not combine: a peak profile is what "
		    "was live at one moment");
	/* Where the profile comes from: pullprof's sampler when the host's
	 * allocations reach it, else the allocator's own profiler, else a
	 * sentence that says why there is none (never an empty profile). */
	if (!rq.id) {
		static const int asked[] = {0, PP_HEAP_SOURCE_INTERPOSED,
		                            PP_HEAP_SOURCE_JEMALLOC,
		                            PP_HEAP_SOURCE_TCMALLOC};
		rc = pp_heap_resolve(&q, asked[source], err, sizeof err);
		if (rc)
			return pp_respond_error(r,
			                        rc == -EINVAL
			                            ? MHD_HTTP_BAD_REQUEST
			                            : MHD_HTTP_NOT_FOUND,
			                        "%s", err);
	}
	rq.seconds = q.seconds;
	return pp_respond_job(r, &rq);
}

enum MHD_Result pp_h_heap(struct pp_request *r)
{
	return heap(r, PP_HEAP_INUSE);
}

enum MHD_Result pp_h_allocs(struct pp_request *r)
{
	return heap(r, PP_HEAP_ALLOCS);
}

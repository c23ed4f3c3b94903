/*
 * /profile: a CPU profile of the next `seconds`, a job of the CPU producer
 * (a window on the shared sampler). The connection waits suspended, so the
 * HTTP thread serves others meanwhile. Agent context.
 */
#include "agent.h"
#include "cpu/cpu.h"
#include "handlers.h"
#include "query.h"
#include "respond.h"

enum MHD_Result pp_h_profile(struct pp_request *r)
{
	const struct pp_config *cfg = &pp_agent_get()->cfg;
	struct pp_cpu_query q;
	struct pp_job_request rq = {
	    .producer = &pp_cpu_producer, .query = &q, .keep = 1};
	char err[300];

	if (pp_query_uint(r, "seconds",
	                  cfg->v.max_seconds < 30 ? cfg->v.max_seconds : 30, 1,
	                  cfg->v.max_seconds, &q.seconds, err, sizeof err) ||
	    pp_query_uint(r, "hz", cfg->v.cpu_hz, 1, 1000, &q.hz, err,
	                  sizeof err) ||
	    pp_query_render(r, "samples|cpu", 1, &rq.render, err, sizeof err) ||
	    pp_query_id(r, "seconds|hz", &rq.id, err, sizeof err))
		return pp_respond_error(r, MHD_HTTP_BAD_REQUEST, "%s", err);
	rq.seconds = q.seconds;
	return pp_respond_job(r, &rq);
}

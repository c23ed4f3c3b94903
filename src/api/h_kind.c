/*
 * The one handler of every kind's endpoints: the endpoint's ask (ask/ask.h,
 * in the kind's folder) turns the request's arguments into a job, and the
 * job's answer is the response (pp_respond_job: a window's connection
 * waits suspended, so the HTTP thread serves others meanwhile). Nothing
 * here knows one kind from another.
 * Context: agent.
 */
#include "ask/ask.h"
#include "handlers.h"
#include "query.h"
#include "record/record.h"
#include "server/respond.h"

enum MHD_Result pp_h_kind(struct pp_request *r)
{
	const struct pp_endpoint *e = r->route->endpoint;
	struct pp_args a = pp_query_args(r);
	struct pp_ask ask = {.rq = {.keep = 1},
	                     .status = MHD_HTTP_BAD_REQUEST,
	                     .past = &pp_record_past};
	char err[1200];

	if (e->ask(e, &a, r->cfg, &ask, err, sizeof err))
		return pp_respond_error(
		    r, ask.status ? ask.status : MHD_HTTP_BAD_REQUEST, "%s",
		    err);
	return pp_respond_job(r, &ask.rq);
}

/*
 * /record: what the record holds (JSON), and /record/save: keep the last
 * seconds aside under an id (record/record.h). The record's ranges are read
 * on /profile and /trace (h_profile.c).
 * Context: agent.
 */
#include <errno.h>
#include <string.h>

#include "config.h"
#include "handlers.h"
#include "query.h"
#include "record/record.h"
#include "server/respond.h"
#include "util/clock.h"
#include "util/when.h"

enum MHD_Result pp_h_record(struct pp_request *r)
{
	return pp_respond_json(r, MHD_HTTP_OK, pp_record_json(1));
}

enum MHD_Result pp_h_record_save(struct pp_request *r)
{
	const char *reason = MHD_lookup_connection_value(
	    r->conn, MHD_GET_ARGUMENT_KIND, "reason");
	const char *last =
	    MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "last");
	char err[300];
	int64_t ns = 60ll * PP_NS_PER_SEC;

	if (strcmp(r->method, MHD_HTTP_METHOD_POST) != 0)
		return pp_respond_error(
		    r, MHD_HTTP_METHOD_NOT_ALLOWED,
		    "record/save keeps a moment aside: POST it (GET "
		    "/record lists what is kept)");
	if (last && pp_duration_parse(last, 86400ll * PP_NS_PER_SEC, &ns, err,
	                              sizeof err))
		return pp_respond_error(r, MHD_HTTP_BAD_REQUEST, "last=%s",
		                        err);
	if (reason && strlen(reason) > 127)
		return pp_respond_error(
		    r, MHD_HTTP_BAD_REQUEST,
		    "reason= is %zu bytes long; at most 127 are kept",
		    strlen(reason));
	uint64_t id = 0;
	/* Past the token check (auth.c): a request carried it when one is
	 * set; without one, nothing tells an operator's request from any
	 * other local program's. */
	enum pp_record_by by =
	    r->cfg->v.token ? PP_RECORD_BY_TOKEN : PP_RECORD_BY_ANONYMOUS;
	int rc = pp_record_save(reason ? reason : "", (uint64_t)ns, by, &id);
	if (rc == -ENOTSUP)
		return pp_respond_error(
		    r, MHD_HTTP_NOT_FOUND,
		    "the record is off in this process: nothing to save "
		    "(start it with PULLPROF_RECORD, e.g. PULLPROF_RECORD=5m)");
	if (rc == -EBUSY)
		return pp_respond_error(
		    r, MHD_HTTP_TOO_MANY_REQUESTS,
		    "%u savings are waiting to be made already; ask again in a "
		    "moment",
		    16u);
	if (rc == -ENOSPC)
		return pp_respond_error(
		    r, MHD_HTTP_INSUFFICIENT_STORAGE,
		    "all %u places hold savings the host or a request with the "
		    "token made; a request without a token does not push them "
		    "out (set PULLPROF_TOKEN and send it to rank yours)",
		    PP_RECORD_MAX_SAVINGS);
	if (rc)
		return pp_respond_error(r, MHD_HTTP_SERVICE_UNAVAILABLE,
		                        "the saving failed: %s", strerror(-rc));
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "id", json_object_new_int64((int64_t)id));
	json_object_object_add(o, "reason",
	                       json_object_new_string(reason ? reason : ""));
	json_object_object_add(o, "seconds",
	                       json_object_new_double((double)ns / 1e9));
	return pp_respond_json(r, MHD_HTTP_OK, o);
}

enum MHD_Result pp_h_record_timeline(struct pp_request *r)
{
	struct pp_record_range rr;
	unsigned status, threads = 32;
	char err[300];
	int rc = pp_query_record(r, "", &rr, &status, err, sizeof err);
	if (rc == 1) {
		/* The whole record by default. */
		rc = pp_record_range_parse(NULL, "0", NULL, NULL, &rr, err,
		                           sizeof err);
		status = rc == -ENOTSUP  ? MHD_HTTP_NOT_FOUND
		         : rc == -ERANGE ? MHD_HTTP_RANGE_NOT_SATISFIABLE
		                         : MHD_HTTP_BAD_REQUEST;
	}
	if (rc < 0)
		return pp_respond_error(r, status, "%s", err);
	if (pp_query_uint(r, "threads", 32, 1, 1024, &threads, err, sizeof err))
		return pp_respond_error(r, MHD_HTTP_BAD_REQUEST, "%s", err);
	const char *step =
	    MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "step");
	int64_t step_ns = 0;
	if (step && pp_duration_parse(step, 3600ll * PP_NS_PER_SEC, &step_ns,
	                              err, sizeof err))
		return pp_respond_error(r, MHD_HTTP_BAD_REQUEST, "step=%s",
		                        err);
	if (!step) {
		/* About 300 steps, whole tenths of a second. */
		uint64_t span = rr.end_ns - rr.start_ns;
		step_ns =
		    (int64_t)((span / 300 + 99999999) / 100000000 * 100000000);
		if (step_ns < 100000000)
			step_ns = 100000000;
	}
	struct json_object *o = NULL;
	rc = pp_record_timeline(&rr, (uint64_t)step_ns, threads, &o, err,
	                        sizeof err);
	if (rc)
		return pp_respond_error(r,
		                        rc == -ENOENT ? MHD_HTTP_NOT_FOUND
		                        : rc == -EINVAL
		                            ? MHD_HTTP_BAD_REQUEST
		                            : MHD_HTTP_SERVICE_UNAVAILABLE,
		                        "%s", err);
	return pp_respond_json(r, MHD_HTTP_OK, o);
}

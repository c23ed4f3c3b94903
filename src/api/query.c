/*
 * Query-string parameters of a request: libmicrohttpd's parsed arguments
 * handed to the pure rules of args.c.
 * Context: agent.
 */
#include "query.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ask/args.h"
#include "ask/ask.h"
#include "record/record.h"

struct each_ctx {
	pp_args_fn fn;
	void *arg;
};

static enum MHD_Result each(void *cls, enum MHD_ValueKind kind, const char *key,
                            const char *value)
{
	struct each_ctx *e = cls;
	(void)kind;
	e->fn(e->arg, key, value);
	return MHD_YES;
}

static void conn_each(const struct pp_args *a, pp_args_fn fn, void *arg)
{
	struct each_ctx e = {fn, arg};
	MHD_get_connection_values(a->cls, MHD_GET_ARGUMENT_KIND, each, &e);
}

static struct pp_args args_of(struct pp_request *r)
{
	struct pp_args a = {conn_each, NULL, r->conn};
	return a;
}

struct pp_args pp_query_args(struct pp_request *r)
{
	struct pp_args a = args_of(r);
	a.accept_encoding = MHD_lookup_connection_value(
	    r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING);
	return a;
}

int pp_query_uint(struct pp_request *r, const char *name, unsigned def,
                  unsigned min, unsigned max, unsigned *out, char *err,
                  size_t errlen)
{
	struct pp_args a = args_of(r);
	return pp_args_uint(&a, name, def, min, max, out, err, errlen);
}

static const char *arg(struct pp_request *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND,
	                                   name);
}

int pp_query_record(struct pp_request *r, const char *sampling,
                    struct pp_record_range *out, unsigned *status, char *err,
                    size_t errlen)
{
	const char *last = arg(r, "last"), *start = arg(r, "start"),
	           *end = arg(r, "end"), *rec = arg(r, "recording");
	if (!last && !start && !end && !rec)
		return 1;
	*status = MHD_HTTP_BAD_REQUEST;
	struct pp_args a = args_of(r);
	int rc = pp_ask_refuse(
	    &a, sampling,
	    "a read of the record answers for the past at the record's rate "
	    "(last=, start=, end=, recording=); a new window: seconds=",
	    err, errlen);
	if (!rc)
		rc = pp_ask_refuse(&a, "id",
		                   "id= renders a kept profile again; the "
		                   "record's ranges are read with last=, "
		                   "start=, end=, recording=",
		                   err, errlen);
	if (rc)
		return rc;
	rc = pp_record_range_parse(last, start, end, rec, out, err, errlen);
	*status = rc == -ENOTSUP || rc == -ENOENT ? MHD_HTTP_NOT_FOUND
	          : rc == -ERANGE ? MHD_HTTP_RANGE_NOT_SATISFIABLE
	                          : MHD_HTTP_BAD_REQUEST;
	return rc;
}

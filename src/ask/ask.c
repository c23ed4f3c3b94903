/*
 * The rules every profile endpoint shares (ask.h): the record's ranges, a
 * window's seconds, the format, ?id=, on a pp_args.
 * Context: agent.
 */
#include "ask/ask.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "profile/counts.h"

int pp_ask_refuse(const struct pp_args *a, const char *names, const char *why,
                  char *err, size_t errlen)
{
	for (const char *c = names; *c;) {
		size_t n = strcspn(c, "|");
		char name[32];
		snprintf(name, sizeof name, "%.*s", (int)n, c);
		if (pp_args_given(a, name)) {
			snprintf(err, errlen, "%s does not apply here: %s",
			         name, why);
			return -EINVAL;
		}
		c += n;
		c += *c == '|';
	}
	return 0;
}

int pp_ask_begin(const struct pp_endpoint *e, const struct pp_args *a,
                 const char *sampling, struct pp_ask *ask, char *err,
                 size_t errlen)
{
	ask->status = PP_ASK_BAD_REQUEST;
	ask->from_record = 0;
	if (e->record == PP_ASK_NO_RECORD)
		return pp_ask_refuse(
		    a, "last|start|end|recording",
		    e->no_record ? e->no_record
		    : e->window
		        ? "the record keeps CPU samples, heap, mutex and "
		          "block; this profile is of the next seconds"
		        : "the record keeps CPU samples, heap, mutex and "
		          "block; this one is of now (or the change over "
		          "seconds=N)",
		    err, errlen);
	const char *last = pp_args_value(a, "last"),
	           *start = pp_args_value(a, "start"),
	           *end = pp_args_value(a, "end"),
	           *rec = pp_args_value(a, "recording");
	if (!last && !start && !end && !rec)
		return 0;
	int rc = pp_ask_refuse(
	    a, sampling,
	    "a read of the record answers for the past at the record's rate "
	    "(last=, start=, end=, recording=); a new window: seconds=",
	    err, errlen);
	if (!rc)
		rc = pp_ask_refuse(
		    a, "id",
		    "id= renders a kept profile again; the "
		    "record's ranges are read with last=, start=, "
		    "end=, recording=",
		    err, errlen);
	if (rc)
		return rc;
	if (!ask->past) {
		snprintf(err, errlen, "the record is not part of this build");
		ask->status = PP_ASK_NOT_FOUND;
		return -ENOTSUP;
	}
	rc = ask->past->parse(e->record == PP_ASK_RECORD_SNAPS, last, start,
	                      end, rec, ask->range, err, errlen);
	ask->status = rc == -ENOTSUP || rc == -ENOENT ? PP_ASK_NOT_FOUND
	              : rc == -ERANGE                 ? PP_ASK_RANGE
	                                              : PP_ASK_BAD_REQUEST;
	if (rc)
		return rc;
	ask->status = PP_ASK_BAD_REQUEST;
	ask->from_record = 1;
	return 0;
}

void pp_ask_samples(struct pp_ask *ask)
{
	ask->past->samples(ask->range, &ask->rq, ask->query, sizeof ask->query);
}

int pp_ask_snaps(const struct pp_endpoint *e, struct pp_ask *ask, int state,
                 int allocs, char *err, size_t errlen)
{
	int rc = ask->past->snaps(e->snaps, ask->range, state, allocs, &ask->rq,
	                          ask->query, sizeof ask->query, err, errlen);
	if (rc)
		ask->status = rc == -ENOTSUP ? PP_ASK_NOT_FOUND : PP_ASK_RANGE;
	return rc;
}

int pp_ask_window(const struct pp_endpoint *e, const struct pp_args *a,
                  const struct pp_config *cfg, unsigned *seconds, char *err,
                  size_t errlen)
{
	unsigned max = cfg->v.max_seconds;
	if (!e->window)
		return pp_args_uint(a, "seconds", 0, 0, max, seconds, err,
		                    errlen);
	return pp_args_uint(a, "seconds", e->window < max ? e->window : max, 1,
	                    max, seconds, err, errlen);
}

int pp_ask_render(const struct pp_endpoint *e, const struct pp_args *a,
                  struct pp_ask *ask, char *err, size_t errlen)
{
	return pp_args_render(a, e->types, e->render, &ask->rq.render, err,
	                      errlen);
}

int pp_ask_id(const struct pp_args *a, const char *sampling, struct pp_ask *ask,
              char *err, size_t errlen)
{
	return pp_args_id(a, sampling, &ask->rq.id, err, errlen);
}

int pp_ask_counts(const struct pp_endpoint *e, const struct pp_args *a,
                  const struct pp_config *cfg, struct pp_ask *ask, char *err,
                  size_t errlen)
{
	struct pp_counts_query *q = PP_ASK_QUERY(ask, struct pp_counts_query);
	if (pp_ask_begin(e, a, "seconds", ask, err, errlen))
		return -EINVAL;
	if (ask->from_record) {
		if (pp_ask_refuse(a, "debug",
		                  "a past range's change is a profile "
		                  "(format=pprof|text|folded|json)",
		                  err, errlen) ||
		    pp_ask_render(e, a, ask, err, errlen))
			return -EINVAL;
		return pp_ask_snaps(e, ask, 0, 0, err, errlen);
	}
	if (pp_ask_window(e, a, cfg, &q->seconds, err, errlen) ||
	    pp_args_uint(a, "debug", 0, 0, e->max_debug, &q->debug, err,
	                 errlen) ||
	    pp_ask_render(e, a, ask, err, errlen) ||
	    pp_ask_id(a, "seconds", ask, err, errlen))
		return -EINVAL;
	if (q->seconds && q->debug) {
		/* As Go's: a delta is a profile, not a dump to read. */
		snprintf(err, errlen,
		         "seconds and debug do not combine: the change over a "
		         "window is a profile (format=pprof|text|folded|json)");
		return -EINVAL;
	}
	ask->rq.producer = e->producer;
	ask->rq.query = q;
	ask->rq.seconds = q->seconds;
	return 0;
}

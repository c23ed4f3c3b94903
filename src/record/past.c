/*
 * The record's side of an endpoint's read of the past (struct
 * pp_ask_past, ask/ask.h): the ranges of ?last=, ?start=, ?end=,
 * ?recording=, and the producers that answer them. The HTTP handler hands
 * it to the kinds' asks, which name no record function.
 * Context: agent.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ask/ask.h"
#include "record/record.h"

_Static_assert(sizeof(struct pp_record_range) <=
                   sizeof(((struct pp_ask *)0)->range),
               "struct pp_ask's room for a range is too small");
_Static_assert(sizeof(struct pp_record_snap_query) <=
                   sizeof(((struct pp_ask *)0)->query),
               "struct pp_ask's room for a query is too small");

static int parse(int snaps, const char *last, const char *start,
                 const char *end, const char *recording, void *range, char *err,
                 size_t errlen)
{
	return snaps ? pp_record_range_parse_snaps(last, start, end, recording,
	                                           range, err, errlen)
	             : pp_record_range_parse(last, start, end, recording, range,
	                                     err, errlen);
}

static void samples(const void *range, struct pp_job_request *rq, void *q,
                    size_t qlen)
{
	(void)qlen;
	memcpy(q, range, sizeof(struct pp_record_range));
	rq->producer = &pp_record_producer;
	rq->query = q;
}

static int snaps(const char *kind, const void *range, int state, int allocs,
                 struct pp_job_request *rq, void *q, size_t qlen, char *err,
                 size_t errlen)
{
	(void)qlen;
	struct pp_record_snap_query *sq = q;
	memset(sq, 0, sizeof *sq);
	int k = 0;
	while (k < PP_RECORD_KINDS &&
	       strcmp(pp_record_kind_name((enum pp_record_kind)k), kind) != 0)
		k++;
	if (k == PP_RECORD_KINDS) {
		snprintf(err, errlen, "the record keeps no %s", kind);
		return -ENOTSUP;
	}
	memcpy(&sq->range, range, sizeof sq->range);
	sq->kind = (enum pp_record_kind)k;
	sq->state = state;
	sq->allocs = allocs;
	int rc = pp_record_snaps_check(sq->kind, &sq->range, err, errlen);
	if (rc)
		return rc;
	rq->producer = &pp_record_snap_producers[k];
	rq->query = sq;
	return 0;
}

const struct pp_ask_past pp_record_past = {
    .parse = parse,
    .samples = samples,
    .snaps = snaps,
};

/* Query-string parameters, parsed strictly.
 * Context: agent.
 */
#ifndef PP_QUERY_H
#define PP_QUERY_H

#include <stddef.h>
#include <stdint.h>

#include "ask/args.h"
#include "profile/render.h"
#include "server/request.h"

/* The request's query arguments and Accept-Encoding, for the rules of
 * ask/args.h and ask/ask.h. */
struct pp_args pp_query_args(struct pp_request *r);

/* The whole number `name` (def when absent) in min..max. A value that is
 * empty, not a plain decimal number, out of range, or given twice with
 * different values is -EINVAL with a sentence in err. */
int pp_query_uint(struct pp_request *r, const char *name, unsigned def,
                  unsigned min, unsigned max, unsigned *out, char *err,
                  size_t errlen);

/* A read of the record (record/record.h): ?last=N, ?start=T&end=T,
 * ?recording=ID. 1 when none is given (a window of the next seconds);
 * 0 with *out set; else a negative errno with a sentence in err and the
 * HTTP status it answers in *status (400 bad value, 404 record off or no
 * such saving, 416 a range the record does not hold). sampling: the
 * parameters of a new window ('|'-separated), which do not combine. */
struct pp_record_range;
int pp_query_record(struct pp_request *r, const char *sampling,
                    struct pp_record_range *out, unsigned *status, char *err,
                    size_t errlen);

#endif

/*
 * Points in time as a query gives them (the record's ?start= and ?end=):
 * Unix seconds with an optional fraction ("1764230400", "1764230400.25"),
 * or an RFC 3339 date-time ("2026-11-27T08:00:00Z",
 * "2026-11-27T09:00:00.5+01:00"); and durations (?last=, PULLPROF_RECORD):
 * "300", "2.5", "90s", "5m", "1h". Pure: text in, nanoseconds out.
 * Context: agent.
 */
#ifndef PP_UTIL_WHEN_H
#define PP_UTIL_WHEN_H

#include <stddef.h>
#include <stdint.h>

/* s as nanoseconds since the Unix epoch: 0, or -EINVAL with a sentence in
 * err naming what was expected, or -ERANGE for a time before 1970 or past
 * what int64_t nanoseconds hold (2262-04-11T23:47:16.854775807Z). */
int pp_when_parse(const char *s, int64_t *ns, char *err, size_t errlen);

/* s as a duration in nanoseconds (> 0, at most max_ns): 0, or -EINVAL /
 * -ERANGE with a sentence in err (a value whose nanoseconds overflow is
 * -ERANGE, as any other past max_ns). The sentence does not name the
 * parameter: the caller puts "last=" or "PULLPROF_RECORD: " before it. */
int pp_duration_parse(const char *s, int64_t max_ns, int64_t *ns, char *err,
                      size_t errlen);

#endif

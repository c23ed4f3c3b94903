/* Query-string parameters, parsed strictly. Agent context. */
#ifndef PP_QUERY_H
#define PP_QUERY_H

#include <stddef.h>

#include "routes.h"

/* The whole number `name` (def when absent) in min..max. A value that is
 * empty, not a plain decimal number, out of range, or given twice with
 * different values is -EINVAL with a sentence in err. */
int pp_query_uint(struct pp_request *r, const char *name, unsigned def,
                  unsigned min, unsigned max, unsigned *out, char *err,
                  size_t errlen);

#endif

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

/* The word `name` (choice 0 when absent), one of the '|'-separated
 * choices; its index in *out. Anything else is -EINVAL with a sentence in
 * err naming the accepted values. */
int pp_query_choice(struct pp_request *r, const char *name, const char *choices,
                    unsigned *out, char *err, size_t errlen);

#endif

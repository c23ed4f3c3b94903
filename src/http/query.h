/* Query-string parameters, parsed strictly.
 * Context: agent.
 */
#ifndef PP_QUERY_H
#define PP_QUERY_H

#include <stddef.h>
#include <stdint.h>

#include "profile/render.h"
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

/* How a profile endpoint answers: format=pprof|text|folded|json|legacy
 * (legacy only where legacy is set), debug=1 (text), top=N (text rows),
 * sample_index=name|number (types: the profile's sample types,
 * '|'-separated): the value text and folded show, the default of pprof and
 * JSON. A bad or inapplicable parameter is -EINVAL with a sentence in err
 * naming what is accepted. */
int pp_query_render(struct pp_request *r, const char *types, int flags,
                    struct pp_render_opts *o, char *err, size_t errlen);

/* ?id=N: render the kept profile N again (0 when absent). The parameters
 * of taking a new profile ('|'-separated in sampling) do not combine with
 * it: -EINVAL with a sentence in err. */
int pp_query_id(struct pp_request *r, const char *sampling, uint64_t *id,
                char *err, size_t errlen);

/* -EINVAL, with "NAME does not apply here: why" in err, when any of the
 * parameters names ("a|b|c") is given. */
int pp_query_refuse(struct pp_request *r, const char *names, const char *why,
                    char *err, size_t errlen);

#endif

/*
 * The Perfetto trace renderer: a profile's timeline (model.h) as a
 * perfetto.protos.Trace (perfetto.c says what it holds). Agent context.
 */
#ifndef PP_PERFETTO_H
#define PP_PERFETTO_H

#include "util/buf.h"
#include "view.h"

/* The trace of cpu's timeline, with wall's beside it (wall may be NULL),
 * into out; gzip_level 0 for none. 0 or a negative errno (out freed). */
int pp_perfetto_write(const struct pp_view *cpu, const struct pp_view *wall,
                      struct pp_buf *out, int gzip_level);

#endif

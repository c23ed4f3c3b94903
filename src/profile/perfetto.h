/*
 * The Perfetto trace renderer: a profile's timeline (model.h) as a
 * perfetto.protos.Trace (perfetto.c says what it holds).
 * Context: agent.
 */
#ifndef PP_PERFETTO_H
#define PP_PERFETTO_H

#include "util/buf.h"
#include "view.h"

/* The trace of cpu's timeline (NULL for a wall window alone), with wall's
 * beside it, and heap (a heap
 * profile now) with peak (what was in use at the peak) as a heap dump; any
 * of the last three may be NULL. Into out; gzip_level 0 for none. 0 or a
 * negative errno (out freed). */
int pp_perfetto_write(const struct pp_view *cpu, const struct pp_view *wall,
                      const struct pp_view *heap, const struct pp_view *peak,
                      struct pp_buf *out, int gzip_level);

#endif

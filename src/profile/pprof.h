/* The pprof renderer: profile model -> gzipped perftools.profiles.Profile.
 * Agent context. */
#ifndef PP_PPROF_H
#define PP_PPROF_H

#include "model.h"
#include "symbols/symbols.h"
#include "util/buf.h"
#include "view.h"

/* Encode the view into out, gzip_level 1..9, or 0 for a raw protobuf.
 * Returns 0 or a negative errno. */
int pp_pprof_write(const struct pp_view *v, int gzip_level, struct pp_buf *out);

/*
 * Encode p into out. With st (locked by the caller) the profile gets the
 * process's mappings and symbolized locations; with NULL, locations carry
 * addresses only. Returns 0 or a negative errno.
 */
int pp_pprof_render(const struct pp_profile *p, struct pp_symtab *st,
                    int gzip_level, struct pp_buf *out);

#endif

/* The pprof renderer: profile model -> gzipped perftools.profiles.Profile.
 * Agent context. */
#ifndef PP_PPROF_H
#define PP_PPROF_H

#include "model.h"
#include "symbols/symbols.h"
#include "util/buf.h"

/*
 * Encode p into out. With st (locked by the caller) the profile gets the
 * process's mappings and symbolized locations; with NULL, locations carry
 * addresses only. gzip_level 1..9, or 0 for a raw protobuf.
 * Returns 0 or a negative errno.
 */
int pp_pprof_render(const struct pp_profile *p, struct pp_symtab *st,
                    int gzip_level, struct pp_buf *out);

/* Render p symbolized (taking the process's symbol table) at gzip level
 * 1 into a malloc'ed body. 0 or a negative errno. */
int pp_pprof_render_body(const struct pp_profile *p, char **body, size_t *len);

#endif

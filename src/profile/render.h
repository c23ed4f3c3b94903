/*
 * Every output format of a profile model, behind one call: the samplers
 * build a model, the HTTP layer names a format, and nothing else knows how
 * either is done.
 * Context: agent.
 */
#ifndef PP_RENDER_H
#define PP_RENDER_H

#include <stddef.h>

#include "model.h"
#include "util/buf.h"
#include "view.h"

enum pp_format {
	PP_FORMAT_PPROF,    /* gzipped profile.proto */
	PP_FORMAT_TEXT,     /* ?debug=1: header and top functions */
	PP_FORMAT_FOLDED,   /* collapsed stacks: root;...;leaf value */
	PP_FORMAT_JSON,     /* the model as JSON, for the viewer */
	PP_FORMAT_LEGACY,   /* gperftools CPU profile (count profiles only) */
	PP_FORMAT_PERFETTO, /* a Perfetto trace of the timeline (CPU, wall) */
	/* Not names of ?format=: the thread dump's ?debug=1 and ?debug=2. */
	PP_FORMAT_STACKS,  /* stacks grouped with a count, as Go's goroutine
	                    * profile at debug=1 */
	PP_FORMAT_THREADS, /* one block per thread (the dump's labels) */
	/* Not a name of ?format= either: /mutex and /block at ?debug=1, Go's
	 * contention text (which pprof's legacy parser reads). */
	PP_FORMAT_CONTENTION,
};

/* The names ?format= accepts, in enum order. */
#define PP_FORMAT_NAMES "pprof|text|folded|json|legacy|perfetto"

/* What a request may ask of an endpoint's renderers (the flags of
 * pp_args_render): the legacy format; debug=1 and 2 as the thread dump's
 * texts (PP_FORMAT_STACKS, PP_FORMAT_THREADS). */
#define PP_RENDER_LEGACY 1
#define PP_RENDER_DUMP 2
#define PP_RENDER_CONTENTION 4
/* format=perfetto: the profile keeps a timeline (CPU and wall windows). */
#define PP_RENDER_TIMELINE 8

struct pp_render_opts {
	enum pp_format format;
	int sample_index; /* the value text and folded show; -1: default */
	unsigned top;     /* rows of each text table; 0: all */
	int gzip;         /* the client takes gzip: compress text and JSON */
};

/* Content-Type; and the file name suffix when the answer is a file to save
 * (pprof: none, as Go names it "profile" or "heap"), NULL when it is shown
 * inline. */
const char *pp_format_content_type(enum pp_format f);
const char *pp_format_attachment(enum pp_format f);
/* The Content-Encoding of a body rendered with o ("gzip"), or NULL. pprof
 * is gzipped as a file (its format), not as an encoding. */
const char *pp_format_encoding(const struct pp_render_opts *o);

/* Render p as asked, symbolized with the process's symbol table (taken and
 * released here), into a malloc'ed body (text and JSON gzipped when o->gzip:
 * see pp_format_encoding). 0 or a negative errno. */
int pp_render_body(const struct pp_profile *p, const struct pp_render_opts *o,
                   char **body, size_t *len);

/* The renderers of a built view (text.c, json.c) and of a bare model
 * (legacy.c). Each returns 0 or a negative errno. */
int pp_text_write(const struct pp_view *v, const struct pp_render_opts *o,
                  struct pp_buf *out);
int pp_folded_write(const struct pp_view *v, const struct pp_render_opts *o,
                    struct pp_buf *out);
int pp_json_write(const struct pp_view *v, struct pp_buf *out);
int pp_stacks_write(const struct pp_view *v, struct pp_buf *out);
int pp_threads_write(const struct pp_view *v, struct pp_buf *out);
int pp_contention_write(const struct pp_view *v, struct pp_buf *out);
/* -EINVAL when p has no count ("samples") value to write. */
int pp_legacy_write(const struct pp_profile *p, struct pp_buf *out);

#endif

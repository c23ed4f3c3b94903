/* Format dispatch.
 * Context: agent.
 */
#include "render.h"

#include <errno.h>
#include <stdlib.h>

#include "pb.h"
#include "perfetto.h"
#include "pprof.h"
#include "symbols/symbols.h"

const char *pp_format_content_type(enum pp_format f)
{
	switch (f) {
	case PP_FORMAT_TEXT:
	case PP_FORMAT_STACKS:
	case PP_FORMAT_THREADS:
	case PP_FORMAT_CONTENTION:
	case PP_FORMAT_FOLDED: return "text/plain; charset=utf-8";
	case PP_FORMAT_JSON: return "application/json";
	default: return "application/octet-stream";
	}
}

const char *pp_format_attachment(enum pp_format f)
{
	switch (f) {
	case PP_FORMAT_PPROF: return "";
	case PP_FORMAT_LEGACY: return ".prof";
	case PP_FORMAT_PERFETTO: return ".pftrace";
	default: return NULL;
	}
}

const char *pp_format_encoding(const struct pp_render_opts *o)
{
	/* pprof and legacy are files in their own right (pprof gzipped by
	 * its format); text, JSON and traces are compressed in transit. */
	int text =
	    o->format != PP_FORMAT_PPROF && o->format != PP_FORMAT_LEGACY;
	return text && o->gzip ? "gzip" : NULL;
}

/* The trace of v's timeline, with the wall and heap profiles beside it
 * (each its own view). Gzipped (in transit) when the client takes it. */
static int perfetto(const struct pp_view *v, struct pp_symtab *st, int gzip,
                    struct pp_buf *out)
{
	const struct pp_profile *p = v->p;
	const struct pp_profile *side[3] = {p->wall, p->heap,
	                                    p->heap ? p->heap->heap : NULL};
	struct pp_view views[3];
	int built[3] = {0, 0, 0}, rc = 0;
	if (!p->max_events)
		return -ENOTSUP;
	for (int i = 0; i < 3 && !rc; i++)
		if (side[i]) {
			rc = pp_view_build(&views[i], side[i], st);
			built[i] = !rc;
		}
	if (!rc && p->wall_timeline) /* a /wall window */
		rc = pp_perfetto_write(NULL, v, NULL, NULL, out, gzip ? 6 : 0);
	else if (!rc)
		rc = pp_perfetto_write(
		    v, built[0] ? &views[0] : NULL, built[1] ? &views[1] : NULL,
		    built[2] ? &views[2] : NULL, out, gzip ? 6 : 0);
	for (int i = 0; i < 3; i++)
		if (built[i])
			pp_view_free(&views[i]);
	return rc;
}

int pp_render_body(const struct pp_profile *p, const struct pp_render_opts *o,
                   char **body, size_t *len)
{
	struct pp_buf out = {0};
	int rc;

	if (o->format == PP_FORMAT_LEGACY) {
		/* Addresses and the maps text: no symbols needed. */
		rc = pp_legacy_write(p, &out);
	} else {
		struct pp_symtab *st;
		struct pp_view v;
		rc = pp_symtab_acquire(&st);
		if (!rc)
			rc = pp_view_build(&v, p, st);
		if (!rc && (rc = pp_symtab_shortage(st)))
			pp_view_free(&v);
		if (!rc) {
			/* The value the request asked to see first: the
			 * default of the pprof and JSON answers. */
			if (o->sample_index >= 0)
				v.default_type = o->sample_index;
			switch (o->format) {
			case PP_FORMAT_TEXT:
				rc = pp_text_write(&v, o, &out);
				break;
			case PP_FORMAT_FOLDED:
				rc = pp_folded_write(&v, o, &out);
				break;
			case PP_FORMAT_JSON:
				rc = pp_json_write(&v, &out);
				break;
			case PP_FORMAT_STACKS:
				rc = pp_stacks_write(&v, &out);
				break;
			case PP_FORMAT_THREADS:
				rc = pp_threads_write(&v, &out);
				break;
			case PP_FORMAT_CONTENTION:
				rc = pp_contention_write(&v, &out);
				break;
			case PP_FORMAT_PERFETTO:
				rc = perfetto(&v, st, o->gzip, &out);
				break;
			default: rc = pp_pprof_write(&v, 1, &out); break;
			}
			pp_view_free(&v);
		}
		if (st)
			pp_symtab_release(st);
	}
	if (!rc && out.failed)
		rc = -ENOMEM;
	if (!rc && pp_format_encoding(o) && o->format != PP_FORMAT_PERFETTO) {
		/* (A trace is compressed as it is written.) */
		/* Folded stacks and JSON shrink ten-fold or more. */
		struct pp_buf z = {0};
		struct pp_pb pb;
		rc = pp_pb_init(&pb, &z, 1);
		if (!rc) {
			pp_pb_raw(&pb, out.data, out.len);
			rc = pp_pb_finish(&pb);
		}
		pp_buf_free(&out);
		out = z;
	}
	*len = 0;
	*body = rc ? NULL : pp_buf_take(&out, len);
	pp_buf_free(&out);
	return *body ? 0 : rc ? rc : -ENOMEM;
}

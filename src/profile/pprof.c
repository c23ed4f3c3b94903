/*
 * The pprof renderer.
 *
 * Written from the symbolized view (view.h) in one pass, streaming through
 * the encoder: samples, then the Locations (ID = the view's index + 1, in
 * order of first appearance), then Mappings (the main executable first),
 * Functions, scalars, and the string table last, once every string is
 * known. IDs are 1..N in the order the messages appear, string 0 is "", as
 * consumers such as Parca check.
 * Context: agent.
 */
#include "pprof.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/strtab.h"

struct render {
	struct pp_pb pb;
	struct pp_strtab strings;
	const struct pp_view *v;
	/* The IDs of the two mappings of our own (0: not needed), after the
	 * process's: synthetic frames, and addresses in no known mapping. */
	uint64_t synthetic_id, unmapped_id;
	int err;
};

/*
 * Every location has a mapping: Grafana Pyroscope's symbolizer refuses a
 * whole profile when one location has mapping_id 0, and it looks at every
 * location as soon as any mapping asks to be symbolized. Synthetic frames
 * ("[pullprof: stack truncated]", ...: PCs 1..PP_SYNTHETIC_MAX) get a
 * mapping "[pullprof]" over [0, PP_SYNTHETIC_MAX + 1), a range no real
 * mapping can hold (the kernel maps nothing below vm.mmap_min_addr); real
 * addresses outside every known mapping (code unmapped since, JIT code, a
 * garbage return address) get "[unmapped]", an empty range. Both claim
 * every has_* flag: there is nothing more to look up. So no symbolizer
 * works on them: pprof skips a mapping that has functions (unless forced)
 * and any whose name starts with "[" (like "[vdso]"), locally and with
 * -symbolize=remote; Pyroscope skips one that has functions (and, in some
 * versions, file names and line numbers too), and without a build ID it
 * could not look one up anyway.
 */
#define MAPPING_UNMAPPED "[unmapped]"

static uint64_t mapping_id_of(const struct render *r,
                              const struct pp_view_loc *l)
{
	if (l->mapping)
		return r->v->map_id[l->mapping - r->v->maps->v];
	return l->synthetic ? r->synthetic_id : r->unmapped_id;
}

/* The index of s in the profile's string table (added on first use). */
static int64_t str_id(struct render *r, const char *s)
{
	int64_t i = pp_strtab_add(&r->strings, s);
	if (i < 0) {
		r->err = (int)i;
		return 0;
	}
	return i;
}

static void value_type(struct render *r, int tag, const struct pp_value_type *v)
{
	size_t m = pp_pb_start(&r->pb);
	pp_pb_int64_opt(&r->pb, VALUETYPE_TYPE, str_id(r, v->type));
	pp_pb_int64_opt(&r->pb, VALUETYPE_UNIT, str_id(r, v->unit));
	pp_pb_end(&r->pb, tag, m);
}

static void samples(struct render *r, const struct pp_profile *p)
{
	const struct pp_view *v = r->v;
	uint64_t *ids = NULL;
	size_t ids_cap = 0;

	for (size_t i = 0; i < v->nsamples && !r->err; i++) {
		const struct pp_sample *s = v->samples[i];
		const uint32_t *stack = v->stacks + v->stack_at[i];
		if (s->depth > ids_cap) {
			ids_cap = s->depth * 2;
			uint64_t *n = realloc(ids, ids_cap * sizeof *n);
			if (!n) {
				r->err = -ENOMEM;
				break;
			}
			ids = n;
		}
		/* Location IDs are 1 + the view's index. */
		for (uint32_t k = 0; k < s->depth; k++)
			ids[k] = (uint64_t)stack[k] + 1;
		size_t m = pp_pb_start(&r->pb);
		pp_pb_uint64s(&r->pb, SAMPLE_LOCATION_ID, ids, s->depth);
		pp_pb_int64s(&r->pb, SAMPLE_VALUE, s->values, p->ntypes);
		for (uint32_t k = 0; k < s->nlabels; k++) {
			const struct pp_label *l = &s->labels[k];
			size_t lm = pp_pb_start(&r->pb);
			pp_pb_int64_opt(&r->pb, LABEL_KEY, str_id(r, l->key));
			if (l->str) {
				pp_pb_int64_opt(&r->pb, LABEL_STR,
				                str_id(r, l->str));
			} else {
				pp_pb_int64_opt(&r->pb, LABEL_NUM, l->num);
				if (l->unit)
					pp_pb_int64_opt(&r->pb, LABEL_NUM_UNIT,
					                str_id(r, l->unit));
			}
			pp_pb_end(&r->pb, SAMPLE_LABEL, lm);
		}
		pp_pb_end(&r->pb, PROFILE_SAMPLE, m);
		pp_pb_flush(&r->pb);
	}
	free(ids);
}

static void locations(struct render *r)
{
	const struct pp_view *v = r->v;

	for (size_t i = 0; i < v->nlocs && !r->err; i++) {
		const struct pp_view_loc *l = &v->locs[i];
		size_t m = pp_pb_start(&r->pb);
		pp_pb_uint64(&r->pb, LOCATION_ID, i + 1);
		pp_pb_uint64(&r->pb, LOCATION_MAPPING_ID, mapping_id_of(r, l));
		/* Synthetic frames ("[pullprof: stack truncated]", ...) keep
		 * their small made-up PC (1, 2, ...): every location has a
		 * distinct non-zero address, which Grafana Alloy's delta
		 * computation for memory profiles keys samples by. */
		pp_pb_uint64(&r->pb, LOCATION_ADDRESS, l->pc);
		for (uint32_t k = 0; k < l->nframes; k++) {
			size_t lm = pp_pb_start(&r->pb);
			pp_pb_uint64(&r->pb, LINE_FUNCTION_ID,
			             (uint64_t)v->func_of[l->first_func + k] +
			                 1);
			pp_pb_int64_opt(&r->pb, LINE_LINE, l->frames[k].line);
			pp_pb_end(&r->pb, LOCATION_LINE, lm);
		}
		pp_pb_end(&r->pb, PROFILE_LOCATION, m);
		pp_pb_flush(&r->pb);
	}
}

/* One of our own mappings (see above). */
static void own_mapping(struct render *r, uint64_t id, uint64_t limit,
                        const char *name)
{
	pp_pprof_own_mapping(&r->pb, id, limit, str_id(r, name));
}

void pp_pprof_own_mapping(struct pp_pb *pb, uint64_t id, uint64_t limit,
                          int64_t name)
{
	size_t m = pp_pb_start(pb);
	pp_pb_uint64(pb, MAPPING_ID, id);
	pp_pb_uint64_opt(pb, MAPPING_LIMIT, limit);
	pp_pb_int64_opt(pb, MAPPING_FILENAME, name);
	pp_pb_bool(pb, MAPPING_HAS_FUNCTIONS, 1);
	pp_pb_bool(pb, MAPPING_HAS_FILENAMES, 1);
	pp_pb_bool(pb, MAPPING_HAS_LINE_NUMBERS, 1);
	pp_pb_bool(pb, MAPPING_HAS_INLINE_FRAMES, 1);
	pp_pb_end(pb, PROFILE_MAPPING, m);
}

static void mappings(struct render *r)
{
	const struct pp_view *v = r->v;
	const struct pp_mappings *maps = v->maps;
	/* In ID order: IDs were given so that the main executable is 1. */
	for (unsigned id = 1; maps && id <= v->nshown; id++) {
		for (size_t i = 0; i < maps->n; i++) {
			const struct pp_mapping *mp = &maps->v[i];
			if (v->map_id[i] != id)
				continue;
			/* has_* are claims about every location in the
			 * mapping; a mapping with none claims nothing. */
			unsigned f =
			    v->mapping_used[i] ? v->mapping_flags[i] : 0;
			size_t m = pp_pb_start(&r->pb);
			pp_pb_uint64(&r->pb, MAPPING_ID, id);
			pp_pb_uint64_opt(&r->pb, MAPPING_START, mp->start);
			pp_pb_uint64_opt(&r->pb, MAPPING_LIMIT, mp->limit);
			pp_pb_uint64_opt(&r->pb, MAPPING_OFFSET, mp->offset);
			pp_pb_int64_opt(&r->pb, MAPPING_FILENAME,
			                str_id(r, mp->name));
			pp_pb_int64_opt(&r->pb, MAPPING_BUILD_ID,
			                str_id(r, mp->build_id));
			pp_pb_bool(&r->pb, MAPPING_HAS_FUNCTIONS,
			           f & PP_SYM_FUNCTIONS);
			pp_pb_bool(&r->pb, MAPPING_HAS_FILENAMES,
			           f & PP_SYM_FILENAMES);
			pp_pb_bool(&r->pb, MAPPING_HAS_LINE_NUMBERS,
			           f & PP_SYM_LINES);
			pp_pb_bool(&r->pb, MAPPING_HAS_INLINE_FRAMES,
			           f & PP_SYM_INLINES);
			pp_pb_end(&r->pb, PROFILE_MAPPING, m);
			break;
		}
	}
	/* Ours last: IDs follow the order of the messages. */
	if (r->synthetic_id)
		own_mapping(r, r->synthetic_id, PP_SYNTHETIC_MAX + 1,
		            PP_PPROF_MAPPING_SYNTHETIC);
	if (r->unmapped_id)
		own_mapping(r, r->unmapped_id, 0, MAPPING_UNMAPPED);
}

static void functions(struct render *r)
{
	const struct pp_view *v = r->v;
	for (size_t i = 0; i < v->nfuncs; i++) {
		const struct pp_frame *f = v->funcs[i];
		size_t m = pp_pb_start(&r->pb);
		pp_pb_uint64(&r->pb, FUNCTION_ID, i + 1);
		pp_pb_int64_opt(&r->pb, FUNCTION_NAME, str_id(r, f->name));
		pp_pb_int64_opt(&r->pb, FUNCTION_SYSTEM_NAME,
		                str_id(r, f->system_name));
		pp_pb_int64_opt(&r->pb, FUNCTION_FILENAME, str_id(r, f->file));
		pp_pb_int64_opt(&r->pb, FUNCTION_START_LINE, f->start_line);
		pp_pb_end(&r->pb, PROFILE_FUNCTION, m);
		pp_pb_flush(&r->pb);
	}
}

int pp_pprof_write(const struct pp_view *v, int gzip_level, struct pp_buf *out)
{
	const struct pp_profile *p = v->p;
	struct render r;
	int rc;

	memset(&r, 0, sizeof r);
	r.v = v;
	uint64_t next_id = v->nshown + 1;
	if (v->synthetic_used)
		r.synthetic_id = next_id++;
	if (v->unmapped_used)
		r.unmapped_id = next_id;
	rc = pp_strtab_init(&r.strings);
	if (rc)
		return rc;
	rc = pp_pb_init(&r.pb, out, gzip_level);
	if (rc) {
		r.err = rc;
		goto out;
	}
	for (size_t i = 0; i < p->ntypes; i++)
		value_type(&r, PROFILE_SAMPLE_TYPE, &p->types[i]);
	samples(&r, p);
	locations(&r);
	mappings(&r);
	functions(&r);
	pp_pb_int64_opt(&r.pb, PROFILE_TIME_NANOS, p->time_nanos);
	pp_pb_int64_opt(&r.pb, PROFILE_DURATION_NANOS, p->duration_nanos);
	if (p->period_type.type)
		value_type(&r, PROFILE_PERIOD_TYPE, &p->period_type);
	pp_pb_int64_opt(&r.pb, PROFILE_PERIOD, p->period);
	size_t nmaps = v->maps ? v->maps->n : 0;
	if (p->ncomments || nmaps) {
		int64_t *c = malloc((p->ncomments + nmaps + 1) * sizeof *c);
		if (!c) {
			r.err = -ENOMEM;
			goto out;
		}
		size_t nc = 0;
		for (size_t i = 0; i < p->ncomments; i++)
			c[nc++] = str_id(&r, p->comments[i]);
		/* Mappings whose file changed under them: why their
		 * addresses have no names. */
		char note[1200];
		for (size_t i = 0; i < nmaps; i++)
			if (pp_view_mapping_note(v, i, note, sizeof note))
				c[nc++] = str_id(&r, note);
		if (nc)
			pp_pb_int64s(&r.pb, PROFILE_COMMENT, c, nc);
		free(c);
	}
	if (v->default_type >= 0 && (size_t)v->default_type < p->ntypes)
		pp_pb_int64_opt(&r.pb, PROFILE_DEFAULT_SAMPLE_TYPE,
		                str_id(&r, p->types[v->default_type].type));
	/* Last: every string is known now. Index 0 is "". */
	for (size_t i = 0; i < r.strings.len; i++) {
		pp_pb_bytes(&r.pb, PROFILE_STRING_TABLE, r.strings.strs[i],
		            r.strings.lens[i]);
		pp_pb_flush(&r.pb);
	}
	if (!r.err) {
		r.err = pp_pb_finish(&r.pb);
		goto done;
	}
out:
	pp_pb_abort(&r.pb);
done:
	if (r.err)
		pp_buf_free(out);
	pp_strtab_free(&r.strings);
	return r.err;
}

int pp_pprof_render(const struct pp_profile *p, struct pp_symtab *st,
                    int gzip_level, struct pp_buf *out)
{
	struct pp_view v;
	int rc = pp_view_build(&v, p, st);
	if (rc)
		return rc;
	rc = pp_pprof_write(&v, gzip_level, out);
	pp_view_free(&v);
	return rc;
}

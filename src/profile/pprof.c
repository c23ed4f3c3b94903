/*
 * The pprof renderer. Agent context.
 *
 * Written in one pass over the model, streaming through the encoder:
 * samples first (each new PC gets the next Location ID), then the Locations
 * in ID order (symbolized, each new function getting the next Function ID),
 * then Mappings (the main executable first), Functions, scalars, and the
 * string table last, once every string is known. IDs are 1..N in the order
 * the messages appear, string 0 is "", as consumers such as Parca check.
 */
#include "pprof.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pb.h"
#include "util/hash.h"
#include "util/strtab.h"
#include "util/u64map.h"

/* Field numbers of profile.proto. */
enum {
	PROFILE_SAMPLE_TYPE = 1,
	PROFILE_SAMPLE = 2,
	PROFILE_MAPPING = 3,
	PROFILE_LOCATION = 4,
	PROFILE_FUNCTION = 5,
	PROFILE_STRING_TABLE = 6,
	PROFILE_TIME_NANOS = 9,
	PROFILE_DURATION_NANOS = 10,
	PROFILE_PERIOD_TYPE = 11,
	PROFILE_PERIOD = 12,
	PROFILE_COMMENT = 13,
	PROFILE_DEFAULT_SAMPLE_TYPE = 14,
	VALUETYPE_TYPE = 1,
	VALUETYPE_UNIT = 2,
	SAMPLE_LOCATION_ID = 1,
	SAMPLE_VALUE = 2,
	SAMPLE_LABEL = 3,
	LABEL_KEY = 1,
	LABEL_STR = 2,
	LABEL_NUM = 3,
	LABEL_NUM_UNIT = 4,
	MAPPING_ID = 1,
	MAPPING_START = 2,
	MAPPING_LIMIT = 3,
	MAPPING_OFFSET = 4,
	MAPPING_FILENAME = 5,
	MAPPING_BUILD_ID = 6,
	MAPPING_HAS_FUNCTIONS = 7,
	MAPPING_HAS_FILENAMES = 8,
	MAPPING_HAS_LINE_NUMBERS = 9,
	MAPPING_HAS_INLINE_FRAMES = 10,
	LOCATION_ID = 1,
	LOCATION_MAPPING_ID = 2,
	LOCATION_ADDRESS = 3,
	LOCATION_LINE = 4,
	LINE_FUNCTION_ID = 1,
	LINE_LINE = 2,
	FUNCTION_ID = 1,
	FUNCTION_NAME = 2,
	FUNCTION_SYSTEM_NAME = 3,
	FUNCTION_FILENAME = 4,
	FUNCTION_START_LINE = 5,
};

struct loc {
	uintptr_t pc;
	int is_return; /* a caller's frame: symbolize pc - 1 */
};

struct render {
	struct pp_pb pb;
	struct pp_strtab strings;
	struct pp_u64map loc_ids; /* (pc << 1 | is_return) -> id */
	struct loc *locs;         /* by id - 1 */
	size_t nlocs, locs_cap;
	struct pp_u64map func_ids;     /* hash of the frame -> id chain head */
	const struct pp_frame **funcs; /* by id - 1 */
	uint32_t *func_next; /* by id - 1: next id with the same hash */
	size_t nfuncs, funcs_cap;
	struct pp_frame *synthetic; /* frames of the model's synthetic PCs */
	unsigned *mapping_flags;    /* by mapping index: PP_SYM_* all had */
	unsigned char *mapping_used;
	int err;
};

static int64_t S(struct render *r, const char *s)
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
	pp_pb_int64_opt(&r->pb, VALUETYPE_TYPE, S(r, v->type));
	pp_pb_int64_opt(&r->pb, VALUETYPE_UNIT, S(r, v->unit));
	pp_pb_end(&r->pb, tag, m);
}

static uint64_t loc_id(struct render *r, uintptr_t pc, int is_return)
{
	int inserted;
	uint64_t *id = pp_u64map_put(
	    &r->loc_ids, (uint64_t)pc << 1 | (uint64_t)is_return, &inserted);
	if (!id) {
		r->err = -ENOMEM;
		return 0;
	}
	if (inserted) {
		if (r->nlocs == r->locs_cap) {
			size_t cap = r->locs_cap ? r->locs_cap * 2 : 1024;
			struct loc *v = realloc(r->locs, cap * sizeof *v);
			if (!v) {
				r->err = -ENOMEM;
				return 0;
			}
			r->locs = v;
			r->locs_cap = cap;
		}
		r->locs[r->nlocs].pc = pc;
		r->locs[r->nlocs].is_return = is_return;
		*id = ++r->nlocs;
	}
	return *id;
}

static void samples(struct render *r, const struct pp_profile *p)
{
	uint64_t *ids = NULL;
	size_t ids_cap = 0;

	for (const struct pp_sample *s = p->first; s && !r->err; s = s->next) {
		if (s->depth > ids_cap) {
			ids_cap = s->depth * 2;
			uint64_t *v = realloc(ids, ids_cap * sizeof *v);
			if (!v) {
				r->err = -ENOMEM;
				break;
			}
			ids = v;
		}
		for (uint32_t i = 0; i < s->depth; i++)
			ids[i] =
			    loc_id(r, s->pcs[i], i > 0 || p->leaf_is_return);
		size_t m = pp_pb_start(&r->pb);
		pp_pb_uint64s(&r->pb, SAMPLE_LOCATION_ID, ids, s->depth);
		pp_pb_int64s(&r->pb, SAMPLE_VALUE, s->values, p->ntypes);
		for (uint32_t i = 0; i < s->nlabels; i++) {
			const struct pp_label *l = &s->labels[i];
			size_t lm = pp_pb_start(&r->pb);
			pp_pb_int64_opt(&r->pb, LABEL_KEY, S(r, l->key));
			if (l->str) {
				pp_pb_int64_opt(&r->pb, LABEL_STR,
				                S(r, l->str));
			} else {
				pp_pb_int64_opt(&r->pb, LABEL_NUM, l->num);
				if (l->unit)
					pp_pb_int64_opt(&r->pb, LABEL_NUM_UNIT,
					                S(r, l->unit));
			}
			pp_pb_end(&r->pb, SAMPLE_LABEL, lm);
		}
		pp_pb_end(&r->pb, PROFILE_SAMPLE, m);
		pp_pb_flush(&r->pb);
	}
	free(ids);
}

/* Functions are the same when (name, system name, file, start line) are:
 * the symbolizer interns its strings, so pointers compare. */
static uint64_t func_id(struct render *r, const struct pp_frame *f)
{
	uint64_t h = pp_hash_mix(
	    pp_hash_mix((uintptr_t)f->name, (uintptr_t)f->system_name),
	    pp_hash_mix((uintptr_t)f->file, (uint64_t)f->start_line));
	int inserted;
	uint64_t *head = pp_u64map_put(&r->func_ids, h, &inserted);
	if (!head) {
		r->err = -ENOMEM;
		return 0;
	}
	for (uint64_t id = inserted ? 0 : *head; id;
	     id = r->func_next[id - 1]) {
		const struct pp_frame *g = r->funcs[id - 1];
		if (g->name == f->name && g->system_name == f->system_name &&
		    g->file == f->file && g->start_line == f->start_line)
			return id;
	}
	if (r->nfuncs == r->funcs_cap) {
		size_t cap = r->funcs_cap ? r->funcs_cap * 2 : 1024;
		const struct pp_frame **v = realloc(r->funcs, cap * sizeof *v);
		uint32_t *n = v ? realloc(r->func_next, cap * sizeof *n) : NULL;
		if (v)
			r->funcs = v;
		if (!v || !n) {
			r->err = -ENOMEM;
			return 0;
		}
		r->func_next = n;
		r->funcs_cap = cap;
	}
	r->funcs[r->nfuncs] = f;
	r->func_next[r->nfuncs] = inserted ? 0 : (uint32_t)*head;
	*head = ++r->nfuncs;
	return r->nfuncs;
}

static void locations(struct render *r, const struct pp_profile *p,
                      struct pp_symtab *st)
{
	const struct pp_mappings *maps = st ? pp_symtab_mappings(st) : NULL;

	for (size_t i = 0; i < r->nlocs && !r->err; i++) {
		const struct loc *l = &r->locs[i];
		const char *synthetic = pp_profile_synthetic_name(p, l->pc);
		const struct pp_mapping *mp =
		    maps && !synthetic ? pp_mappings_find(maps, l->pc) : NULL;
		struct pp_symbol sym = {0};

		if (synthetic) {
			/* No mapping, no address: a function by that name. */
			sym.frames = &r->synthetic[l->pc - 1];
			sym.nframes = 1;
		} else if (st &&
		           pp_symtab_lookup(st, l->pc - (uintptr_t)l->is_return,
		                            &sym)) {
			r->err = -ENOMEM;
			break;
		}
		size_t m = pp_pb_start(&r->pb);
		pp_pb_uint64(&r->pb, LOCATION_ID, i + 1);
		if (mp) {
			size_t mi = (size_t)(mp - maps->v);
			pp_pb_uint64(&r->pb, LOCATION_MAPPING_ID, mp->id);
			r->mapping_flags[mi] &= sym.flags;
			r->mapping_used[mi] = 1;
		}
		if (!synthetic)
			pp_pb_uint64(&r->pb, LOCATION_ADDRESS, l->pc);
		for (uint32_t k = 0; k < sym.nframes; k++) {
			size_t lm = pp_pb_start(&r->pb);
			pp_pb_uint64(&r->pb, LINE_FUNCTION_ID,
			             func_id(r, &sym.frames[k]));
			pp_pb_int64_opt(&r->pb, LINE_LINE, sym.frames[k].line);
			pp_pb_end(&r->pb, LOCATION_LINE, lm);
		}
		pp_pb_end(&r->pb, PROFILE_LOCATION, m);
		pp_pb_flush(&r->pb);
	}
}

static void mappings(struct render *r, struct pp_symtab *st)
{
	const struct pp_mappings *maps = st ? pp_symtab_mappings(st) : NULL;
	if (!maps)
		return;
	/* In ID order: IDs were given so that the main executable is 1. */
	for (unsigned id = 1; id <= maps->n; id++) {
		for (size_t i = 0; i < maps->n; i++) {
			const struct pp_mapping *mp = &maps->v[i];
			if (mp->id != id)
				continue;
			/* has_* are claims about every location in the
			 * mapping; a mapping with none claims nothing. */
			unsigned f =
			    r->mapping_used[i] ? r->mapping_flags[i] : 0;
			size_t m = pp_pb_start(&r->pb);
			pp_pb_uint64(&r->pb, MAPPING_ID, id);
			pp_pb_uint64_opt(&r->pb, MAPPING_START, mp->start);
			pp_pb_uint64_opt(&r->pb, MAPPING_LIMIT, mp->limit);
			pp_pb_uint64_opt(&r->pb, MAPPING_OFFSET, mp->offset);
			pp_pb_int64_opt(&r->pb, MAPPING_FILENAME,
			                S(r, mp->path));
			pp_pb_int64_opt(&r->pb, MAPPING_BUILD_ID,
			                S(r, mp->build_id));
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
}

static void functions(struct render *r)
{
	for (size_t i = 0; i < r->nfuncs; i++) {
		const struct pp_frame *f = r->funcs[i];
		size_t m = pp_pb_start(&r->pb);
		pp_pb_uint64(&r->pb, FUNCTION_ID, i + 1);
		pp_pb_int64_opt(&r->pb, FUNCTION_NAME, S(r, f->name));
		pp_pb_int64_opt(&r->pb, FUNCTION_SYSTEM_NAME,
		                S(r, f->system_name));
		pp_pb_int64_opt(&r->pb, FUNCTION_FILENAME, S(r, f->file));
		pp_pb_int64_opt(&r->pb, FUNCTION_START_LINE, f->start_line);
		pp_pb_end(&r->pb, PROFILE_FUNCTION, m);
		pp_pb_flush(&r->pb);
	}
}

int pp_pprof_render(const struct pp_profile *p, struct pp_symtab *st,
                    int gzip_level, struct pp_buf *out)
{
	struct render r;
	size_t nmaps = st ? pp_symtab_mappings(st)->n : 0;
	int rc;

	memset(&r, 0, sizeof r);
	rc = pp_strtab_init(&r.strings);
	if (rc)
		return rc;
	rc = pp_pb_init(&r.pb, out, gzip_level);
	r.mapping_flags = malloc((nmaps + 1) * sizeof *r.mapping_flags);
	r.mapping_used = calloc(nmaps + 1, 1);
	r.synthetic = calloc(p->nsynthetic + 1, sizeof *r.synthetic);
	if (rc || !r.mapping_flags || !r.mapping_used || !r.synthetic) {
		r.err = rc ? rc : -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < nmaps; i++)
		r.mapping_flags[i] = ~0u;
	for (size_t i = 0; i < p->nsynthetic; i++)
		r.synthetic[i] = (struct pp_frame){p->synthetic[i],
		                                   p->synthetic[i], "", 0, 0};

	for (size_t i = 0; i < p->ntypes; i++)
		value_type(&r, PROFILE_SAMPLE_TYPE, &p->types[i]);
	samples(&r, p);
	locations(&r, p, st);
	mappings(&r, st);
	functions(&r);
	pp_pb_int64_opt(&r.pb, PROFILE_TIME_NANOS, p->time_nanos);
	pp_pb_int64_opt(&r.pb, PROFILE_DURATION_NANOS, p->duration_nanos);
	if (p->period_type.type)
		value_type(&r, PROFILE_PERIOD_TYPE, &p->period_type);
	pp_pb_int64_opt(&r.pb, PROFILE_PERIOD, p->period);
	if (p->ncomments) {
		int64_t *c = malloc(p->ncomments * sizeof *c);
		if (!c) {
			r.err = -ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < p->ncomments; i++)
			c[i] = S(&r, p->comments[i]);
		pp_pb_int64s(&r.pb, PROFILE_COMMENT, c, p->ncomments);
		free(c);
	}
	if (p->default_type >= 0)
		pp_pb_int64_opt(&r.pb, PROFILE_DEFAULT_SAMPLE_TYPE,
		                S(&r, p->types[p->default_type].type));
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
	pp_u64map_free(&r.loc_ids);
	pp_u64map_free(&r.func_ids);
	free(r.locs);
	free(r.funcs);
	free(r.func_next);
	free(r.mapping_flags);
	free(r.mapping_used);
	free(r.synthetic);
	return r.err;
}

int pp_pprof_render_body(const struct pp_profile *p, char **body, size_t *len)
{
	struct pp_buf out = {0};
	struct pp_symtab *st = pp_symtab_acquire();
	int rc = st ? pp_pprof_render(p, st, 1, &out) : -ENOMEM;
	if (st)
		pp_symtab_release(st);
	*len = 0;
	*body = rc ? NULL : pp_buf_take(&out, len);
	pp_buf_free(&out);
	return *body ? 0 : rc ? rc : -ENOMEM;
}

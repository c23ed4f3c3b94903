/*
 * Merging the pprof profiles of several processes (merge.h).
 * Context: agent.
 *
 * Each part is inflated (when gzipped) and decoded on its own
 * (pprof_read.c: every length, varint, index and ID checked), then its samples
 * are added to the merged tables one by one, and the part is freed before the
 * next. Only what a kept sample needs is copied: its locations (renumbered:
 * addresses of different processes are unrelated), their mapping and their
 * functions (shared by name, system name, file and start line), and the
 * strings those name, interned again. Samples, locations and mappings are
 * encoded as they are added (their IDs and string indices never change),
 * each into a record of an arena; the functions and the string table are
 * written at the end, with the encoder of pb.c, into one gzip stream.
 *
 * The bound: before a sample is added, the memory the tables would hold
 * if everything it names were new (records, strings, functions, and every
 * array that would have to double for it) is compared with max_bytes; past
 * it the sample's values go to one synthetic frame per pid,
 * PP_PROFILE_LIMIT_FRAME, in a "[pullprof]" mapping, as the single-process
 * model does.
 */
#include "merge.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "pb.h"
#include "pprof.h"
#include "util/arena.h"
#include "util/buf.h"
#include "util/hash.h"
#include "util/strtab.h"
#include "util/u64map.h"
#include "util/utf8.h"

static int say(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int say(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (errlen)
		vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return rc;
}

/* An encoded message (a Sample, Location or Mapping field), in order. */
struct rec {
	struct rec *next;
	size_t len;
	unsigned char data[];
};

struct recs {
	struct rec *head, *tail;
};

/* A function of the merged profile: string indices of the merged table. */
struct mfunc {
	uint64_t name, system_name, filename;
	int64_t start_line;
};

struct merge {
	const struct pp_merge_part *parts;
	size_t nparts, max_bytes;
	struct pp_strtab strings;
	struct pp_arena arena; /* the records */
	struct recs samples, locations, mappings;
	uint64_t nlocations, nmappings; /* IDs given */
	struct pp_pb enc;               /* one record at a time, no gzip */
	struct pp_buf enc_out;          /* (unused: records are taken) */
	struct mfunc *funcs;
	size_t nfuncs, funcs_cap;
	uint32_t *fhash; /* index + 1 into funcs; open addressing */
	size_t fhash_cap;
	uint64_t *comments;
	size_t ncomments, comments_cap;
	struct pp_u64map comment_set;
	uint64_t *ids; /* a sample's location IDs */
	size_t ids_cap;
	/* From the first usable part. */
	int have_first, first_pid;
	struct pp_pprof_vt *types, period_type;
	size_t ntypes;
	int64_t period, time_nanos, duration_nanos;
	uint64_t default_type, drop_frames, keep_frames;
	uint64_t pid_key;
	/* Past the bound: per part, the values charged to the limit frame. */
	int64_t *limit;
	unsigned char *limited;
	uint64_t over_limit, kept;
	size_t left_out;
	char *err;
	size_t errlen;
};

/* A part while its samples are added: its IDs in the merged profile by
 * its own indices (0: not added yet). */
struct part {
	const struct pp_pprof_decoded *d;
	size_t index;
	uint64_t *loc_id, *func_id, *map_id;
	uint64_t pid_str;
};

/* Memory the merged tables hold. */
static size_t merged_bytes(const struct merge *m)
{
	return m->arena.reserved + pp_strtab_bytes(&m->strings) +
	       m->funcs_cap * sizeof *m->funcs +
	       m->fhash_cap * sizeof *m->fhash +
	       m->comments_cap * sizeof *m->comments +
	       pp_u64map_bytes(&m->comment_set) + m->ids_cap * sizeof *m->ids +
	       m->enc.data.cap + m->nparts * (m->ntypes * sizeof *m->limit + 1);
}

/* The capacity a doubling array (first capacity `first`) has once it
 * holds n. */
static size_t cap_for(size_t cap, size_t n, size_t first)
{
	size_t c = cap ? cap : first;
	if (n <= cap)
		return cap;
	while (c < n)
		c *= 2;
	return c;
}

/* Upper bounds of encoded sizes: a varint field is at most 11 bytes, a
 * submessage's key and length 6. */
#define VARINT_FIELD 11
#define SUBMSG 6

static size_t rec_bytes(size_t encoded)
{
	return pp_arena_room(sizeof(struct rec) + encoded);
}

struct need {
	size_t strings, string_bytes, funcs, rec_bytes;
};

static void need_string(struct need *n, const struct pp_pprof_decoded *d,
                        uint64_t i)
{
	n->strings++;
	n->string_bytes += pp_strtab_room(d->strs[i].len);
}

static void need_mapping(struct need *n, const struct pp_pprof_decoded *d,
                         const struct pp_pprof_mapping *mp)
{
	need_string(n, d, mp->filename);
	need_string(n, d, mp->build_id);
	n->rec_bytes += rec_bytes(SUBMSG + 10 * VARINT_FIELD);
}

/* The memory the tables would hold with n more (and nlocs IDs). */
static size_t projected(const struct merge *m, const struct need *n,
                        size_t nlocs)
{
	const struct pp_strtab *t = &m->strings;
	size_t b = merged_bytes(m);
	/* An arena may need a new chunk besides the bytes themselves. */
	b += n->rec_bytes + PP_ARENA_CHUNK;
	b += pp_strtab_bytes_with(t, n->strings, n->string_bytes) -
	     pp_strtab_bytes(t);
	b += (cap_for(m->funcs_cap, m->nfuncs + n->funcs, 16) - m->funcs_cap) *
	     sizeof *m->funcs;
	b += (cap_for(m->fhash_cap, 2 * (m->nfuncs + n->funcs), 64) -
	      m->fhash_cap) *
	     sizeof *m->fhash;
	b += (cap_for(m->ids_cap, nlocs, 16) - m->ids_cap) * sizeof *m->ids;
	return b;
}

/* The memory the tables would hold after s, were all it names new. */
static size_t with_sample(const struct merge *m, const struct part *pt,
                          const struct pp_pprof_sample *s)
{
	const struct pp_pprof_decoded *d = pt->d;
	struct need n = {0};
	n.rec_bytes =
	    rec_bytes(SUBMSG + 2 * SUBMSG + (s->nlocs + s->nvals) * 10 +
	              (s->nlabels + 1) * (SUBMSG + 4 * VARINT_FIELD));
	for (uint32_t k = 0; k < s->nlocs; k++) {
		uint64_t li = d->locs[s->locs + k];
		if (pt->loc_id[li])
			continue;
		const struct pp_pprof_location *l = &d->locations[li];
		n.rec_bytes +=
		    rec_bytes(SUBMSG + 4 * VARINT_FIELD +
		              l->nlines * (SUBMSG + 2 * VARINT_FIELD));
		if (l->mapping && !pt->map_id[l->mapping - 1])
			need_mapping(&n, d, &d->mappings[l->mapping - 1]);
		for (uint32_t i = 0; i < l->nlines; i++) {
			uint64_t fi = d->lines[l->lines + i].function;
			if (!fi || pt->func_id[fi - 1])
				continue;
			const struct pp_pprof_function *f =
			    &d->functions[fi - 1];
			n.funcs++;
			need_string(&n, d, f->name);
			need_string(&n, d, f->system_name);
			need_string(&n, d, f->filename);
		}
	}
	for (uint32_t k = 0; k < s->nlabels; k++) {
		const struct pp_pprof_label *l = &d->labels[s->labels + k];
		need_string(&n, d, l->key);
		need_string(&n, d, l->str);
		need_string(&n, d, l->unit);
	}
	return projected(m, &n, s->nlocs);
}

/* A string of a part in the merged table: its index, or -ENOMEM. */
static int64_t intern(struct merge *m, const struct pp_pprof_decoded *d,
                      uint64_t i)
{
	return pp_strtab_intern(&m->strings, (const char *)d->strs[i].p,
	                        d->strs[i].len);
}

/* Take the record just encoded. */
static int keep(struct merge *m, struct recs *list)
{
	struct pp_buf *b = &m->enc.data;
	if (b->failed)
		return -ENOMEM;
	struct rec *r = pp_arena_alloc(&m->arena, sizeof *r + b->len);
	if (!r)
		return -ENOMEM;
	r->next = NULL;
	r->len = b->len;
	memcpy(r->data, b->data, b->len);
	if (list->tail)
		list->tail->next = r;
	else
		list->head = r;
	list->tail = r;
	b->len = 0;
	return 0;
}

static uint64_t func_hash(const struct mfunc *f)
{
	uint64_t h = pp_hash_mix(pp_hash_u64(f->name), f->system_name);
	return pp_hash_mix(pp_hash_mix(h, f->filename),
	                   (uint64_t)f->start_line);
}

/* The ID of the function f (merged strings), added when new. */
static int64_t function_id(struct merge *m, const struct mfunc *f)
{
	if ((m->nfuncs + 1) * 2 > m->fhash_cap) {
		size_t cap = m->fhash_cap ? m->fhash_cap * 2 : 64;
		uint32_t *t = calloc(cap, sizeof *t);
		if (!t)
			return -ENOMEM;
		for (size_t i = 0; i < m->nfuncs; i++) {
			size_t k = (size_t)func_hash(&m->funcs[i]) & (cap - 1);
			while (t[k])
				k = (k + 1) & (cap - 1);
			t[k] = (uint32_t)(i + 1);
		}
		free(m->fhash);
		m->fhash = t;
		m->fhash_cap = cap;
	}
	size_t k = (size_t)func_hash(f) & (m->fhash_cap - 1);
	for (; m->fhash[k]; k = (k + 1) & (m->fhash_cap - 1)) {
		const struct mfunc *g = &m->funcs[m->fhash[k] - 1];
		if (g->name == f->name && g->system_name == f->system_name &&
		    g->filename == f->filename &&
		    g->start_line == f->start_line)
			return m->fhash[k];
	}
	if (m->nfuncs >= UINT32_MAX - 1 ||
	    pp_array_reserve(&m->funcs, &m->funcs_cap, m->nfuncs + 1,
	                     sizeof *m->funcs))
		return -ENOMEM;
	m->funcs[m->nfuncs++] = *f;
	m->fhash[k] = (uint32_t)m->nfuncs;
	return (int64_t)m->nfuncs;
}

static int64_t part_function(struct merge *m, struct part *pt, uint64_t fi)
{
	if (pt->func_id[fi])
		return (int64_t)pt->func_id[fi];
	const struct pp_pprof_function *f = &pt->d->functions[fi];
	int64_t name = intern(m, pt->d, f->name);
	int64_t sys = intern(m, pt->d, f->system_name);
	int64_t file = intern(m, pt->d, f->filename);
	if (name < 0 || sys < 0 || file < 0)
		return -ENOMEM;
	struct mfunc mf = {(uint64_t)name, (uint64_t)sys, (uint64_t)file,
	                   f->start_line};
	int64_t id = function_id(m, &mf);
	if (id > 0)
		pt->func_id[fi] = (uint64_t)id;
	return id;
}

static int64_t part_mapping(struct merge *m, struct part *pt, uint64_t mi)
{
	if (pt->map_id[mi])
		return (int64_t)pt->map_id[mi];
	const struct pp_pprof_mapping *mp = &pt->d->mappings[mi];
	int64_t file = intern(m, pt->d, mp->filename);
	int64_t build_id = intern(m, pt->d, mp->build_id);
	if (file < 0 || build_id < 0)
		return -ENOMEM;
	struct pp_pb *pb = &m->enc;
	uint64_t id = ++m->nmappings;
	size_t mark = pp_pb_start(pb);
	pp_pb_uint64(pb, MAPPING_ID, id);
	pp_pb_uint64_opt(pb, MAPPING_START, mp->start);
	pp_pb_uint64_opt(pb, MAPPING_LIMIT, mp->limit);
	pp_pb_uint64_opt(pb, MAPPING_OFFSET, mp->offset);
	pp_pb_int64_opt(pb, MAPPING_FILENAME, file);
	pp_pb_int64_opt(pb, MAPPING_BUILD_ID, build_id);
	pp_pb_bool(pb, MAPPING_HAS_FUNCTIONS, mp->has_functions);
	pp_pb_bool(pb, MAPPING_HAS_FILENAMES, mp->has_filenames);
	pp_pb_bool(pb, MAPPING_HAS_LINE_NUMBERS, mp->has_line_numbers);
	pp_pb_bool(pb, MAPPING_HAS_INLINE_FRAMES, mp->has_inline_frames);
	pp_pb_end(pb, PROFILE_MAPPING, mark);
	int rc = keep(m, &m->mappings);
	if (rc)
		return rc;
	pt->map_id[mi] = id;
	return (int64_t)id;
}

static int64_t part_location(struct merge *m, struct part *pt, uint64_t li)
{
	if (pt->loc_id[li])
		return (int64_t)pt->loc_id[li];
	const struct pp_pprof_decoded *d = pt->d;
	const struct pp_pprof_location *l = &d->locations[li];
	int64_t mapping = 0;
	if (l->mapping && (mapping = part_mapping(m, pt, l->mapping - 1)) < 0)
		return mapping;
	for (uint32_t k = 0; k < l->nlines; k++) {
		uint64_t fi = d->lines[l->lines + k].function;
		int64_t rc = fi ? part_function(m, pt, fi - 1) : 0;
		if (rc < 0)
			return rc;
	}
	struct pp_pb *pb = &m->enc;
	uint64_t id = ++m->nlocations;
	size_t mark = pp_pb_start(pb);
	pp_pb_uint64(pb, LOCATION_ID, id);
	pp_pb_uint64_opt(pb, LOCATION_MAPPING_ID, (uint64_t)mapping);
	pp_pb_uint64_opt(pb, LOCATION_ADDRESS, l->address);
	for (uint32_t k = 0; k < l->nlines; k++) {
		const struct pp_pprof_line *ln = &d->lines[l->lines + k];
		size_t lm = pp_pb_start(pb);
		pp_pb_uint64_opt(pb, LINE_FUNCTION_ID,
		                 ln->function ? pt->func_id[ln->function - 1]
		                              : 0);
		pp_pb_int64_opt(pb, LINE_LINE, ln->line);
		pp_pb_end(pb, LOCATION_LINE, lm);
	}
	pp_pb_bool(pb, LOCATION_IS_FOLDED, l->is_folded);
	pp_pb_end(pb, PROFILE_LOCATION, mark);
	int rc = keep(m, &m->locations);
	if (rc)
		return rc;
	pt->loc_id[li] = id;
	return (int64_t)id;
}

static int is_pid_key(const struct pp_pprof_decoded *d, uint64_t key)
{
	return d->strs[key].len == 3 && memcmp(d->strs[key].p, "pid", 3) == 0;
}

/* One label: key, then str or num and num_unit, as they came. */
static void label(struct pp_pb *pb, uint64_t key, uint64_t str, int64_t num,
                  uint64_t unit)
{
	size_t mark = pp_pb_start(pb);
	pp_pb_int64_opt(pb, LABEL_KEY, (int64_t)key);
	pp_pb_int64_opt(pb, LABEL_STR, (int64_t)str);
	pp_pb_int64_opt(pb, LABEL_NUM, num);
	pp_pb_int64_opt(pb, LABEL_NUM_UNIT, (int64_t)unit);
	pp_pb_end(pb, SAMPLE_LABEL, mark);
}

static int add_sample(struct merge *m, struct part *pt,
                      const struct pp_pprof_sample *s)
{
	const struct pp_pprof_decoded *d = pt->d;
	if (pp_array_reserve(&m->ids, &m->ids_cap, s->nlocs, sizeof *m->ids))
		return -ENOMEM;
	for (uint32_t k = 0; k < s->nlocs; k++) {
		int64_t id = part_location(m, pt, d->locs[s->locs + k]);
		if (id < 0)
			return (int)id;
		m->ids[k] = (uint64_t)id;
	}
	struct pp_pb *pb = &m->enc;
	size_t mark = pp_pb_start(pb);
	pp_pb_uint64s(pb, SAMPLE_LOCATION_ID, m->ids, s->nlocs);
	/* (no sample types: no values, and vals may be NULL) */
	if (s->nvals)
		pp_pb_int64s(pb, SAMPLE_VALUE, d->vals + s->vals, s->nvals);
	for (uint32_t k = 0; k < s->nlabels; k++) {
		const struct pp_pprof_label *l = &d->labels[s->labels + k];
		if (is_pid_key(d, l->key))
			continue; /* replaced */
		int64_t key = intern(m, d, l->key), str = intern(m, d, l->str),
		        unit = intern(m, d, l->unit);
		if (key < 0 || str < 0 || unit < 0) {
			pp_pb_drop(pb, mark);
			return -ENOMEM;
		}
		label(pb, (uint64_t)key, (uint64_t)str, l->num, (uint64_t)unit);
	}
	label(pb, m->pid_key, pt->pid_str, 0, 0);
	pp_pb_end(pb, PROFILE_SAMPLE, mark);
	return keep(m, &m->samples);
}

/* Past the bound: the sample's values go to the part's limit frame. */
static void charge_limit(struct merge *m, const struct part *pt,
                         const struct pp_pprof_sample *s)
{
	int64_t *to = m->limit + pt->index * m->ntypes;
	for (size_t k = 0; k < m->ntypes; k++)
		to[k] = (int64_t)((uint64_t)to[k] +
		                  (uint64_t)pt->d->vals[s->vals + k]);
	m->limited[pt->index] = 1;
	m->over_limit++;
}

/* Is a part's string the merged table's string mi? The table holds text
 * repaired to UTF-8 (util/strtab.h), so a part's string is compared in
 * that form: two parts that named a sample type with the same ill-formed
 * bytes are the same type. */
static int same_string(const struct merge *m, uint64_t mi,
                       const struct pp_pprof_decoded *d, uint64_t di)
{
	const char *p = (const char *)d->strs[di].p;
	size_t len = d->strs[di].len;
	if (pp_utf8_valid(p, len))
		return pp_strtab_length(&m->strings, mi) == len &&
		       memcmp(pp_strtab_get(&m->strings, mi), p, len) == 0;
	struct pp_buf b = {0};
	pp_utf8_append(&b, p, len);
	int same = !b.failed && pp_strtab_length(&m->strings, mi) == b.len &&
	           memcmp(pp_strtab_get(&m->strings, mi), b.data, b.len) == 0;
	pp_buf_free(&b);
	return same;
}

static int same_type(const struct merge *m, const struct pp_pprof_vt *a,
                     const struct pp_pprof_decoded *d,
                     const struct pp_pprof_vt *b)
{
	return same_string(m, a->type, d, b->type) &&
	       same_string(m, a->unit, d, b->unit);
}

/* "type/unit, ...; period type/unit" of a decoded part (m NULL) or of
 * the merged profile (d NULL). */
static void describe(struct pp_buf *b, const struct merge *m,
                     const struct pp_pprof_decoded *d)
{
	size_t n = d ? d->ntypes : m->ntypes;
	for (size_t i = 0; i <= n; i++) {
		const struct pp_pprof_vt *t =
		    i < n ? (d ? &d->types[i] : &m->types[i])
		          : (d ? &d->period_type : &m->period_type);
		pp_buf_puts(b, i == n ? (n ? "; period " : "period ")
		               : i    ? ", "
		                      : "");
		for (int u = 0; u < 2; u++) {
			uint64_t s = u ? t->unit : t->type;
			if (u)
				pp_buf_puts(b, "/");
			if (d)
				pp_utf8_append(b, (const char *)d->strs[s].p,
				               d->strs[s].len);
			else
				pp_buf_append(b, pp_strtab_get(&m->strings, s),
				              pp_strtab_length(&m->strings, s));
		}
	}
}

static int add_comment(struct merge *m, const char *s, size_t len)
{
	int64_t i = pp_strtab_intern(&m->strings, s, len);
	int inserted;
	if (i < 0)
		return (int)i;
	if (!pp_u64map_put(&m->comment_set, (uint64_t)i, &inserted))
		return -ENOMEM;
	if (!inserted)
		return 0;
	if (pp_array_reserve(&m->comments, &m->comments_cap, m->ncomments + 1,
	                     sizeof *m->comments))
		return -ENOMEM;
	m->comments[m->ncomments++] = (uint64_t)i;
	return 0;
}

/* The first usable part sets the types and the profile's scalars. */
static int take_first(struct merge *m, const struct pp_pprof_decoded *d,
                      int pid)
{
	int64_t s[4];
	m->types = calloc(d->ntypes + 1, sizeof *m->types);
	m->limit = calloc(m->nparts * (d->ntypes + 1), sizeof *m->limit);
	m->limited = calloc(m->nparts, 1);
	if (!m->types || !m->limit || !m->limited)
		return -ENOMEM;
	for (size_t i = 0; i < d->ntypes; i++) {
		s[0] = intern(m, d, d->types[i].type);
		s[1] = intern(m, d, d->types[i].unit);
		if (s[0] < 0 || s[1] < 0)
			return -ENOMEM;
		m->types[i] =
		    (struct pp_pprof_vt){(uint64_t)s[0], (uint64_t)s[1]};
	}
	m->ntypes = d->ntypes;
	s[0] = intern(m, d, d->period_type.type);
	s[1] = intern(m, d, d->period_type.unit);
	s[2] = intern(m, d, d->default_sample_type);
	s[3] = intern(m, d, d->drop_frames);
	if (s[0] < 0 || s[1] < 0 || s[2] < 0 || s[3] < 0)
		return -ENOMEM;
	m->period_type = (struct pp_pprof_vt){(uint64_t)s[0], (uint64_t)s[1]};
	m->default_type = (uint64_t)s[2];
	m->drop_frames = (uint64_t)s[3];
	if ((s[0] = intern(m, d, d->keep_frames)) < 0)
		return -ENOMEM;
	m->keep_frames = (uint64_t)s[0];
	m->period = d->period;
	m->have_first = 1;
	m->first_pid = pid;
	return 0;
}

/* The reason a part cannot join the first, as a comment; 0 when it can. */
static int left_out(struct merge *m, const struct pp_pprof_decoded *d, int pid,
                    int *out)
{
	int same = d->ntypes == m->ntypes &&
	           same_type(m, &m->period_type, d, &d->period_type);
	for (size_t i = 0; i < d->ntypes && same; i++)
		same = same_type(m, &m->types[i], d, &d->types[i]);
	*out = !same;
	if (same)
		return 0;
	m->left_out++;
	struct pp_buf b = {0};
	pp_buf_printf(&b, "pid %d left out of the merge: its sample types (",
	              pid);
	describe(&b, NULL, d);
	pp_buf_printf(&b, ") differ from those of pid %d (", m->first_pid);
	describe(&b, m, NULL);
	pp_buf_puts(&b, ")");
	int rc = b.failed ? -ENOMEM : add_comment(m, b.data, b.len);
	pp_buf_free(&b);
	return rc;
}

static int merge_part(struct merge *m, size_t index)
{
	const struct pp_merge_part *in = &m->parts[index];
	struct pp_pprof_decoded d;
	struct part pt = {&d, index, NULL, NULL, NULL, 0};
	char why[256] = "", pid[24];
	int rc = pp_pprof_read(in->data, in->len, &d, why, sizeof why), out;

	if (rc == -EINVAL)
		say(m->err, m->errlen, rc, "part %zu (pid %d): %s", index + 1,
		    in->pid, why);
	int is_first = !rc && !m->have_first;
	if (is_first)
		rc = take_first(m, &d, in->pid);
	else if (!rc && ((rc = left_out(m, &d, in->pid, &out)) || out))
		goto done;
	if (rc)
		goto done;
	if (d.time_nanos && (!m->time_nanos || d.time_nanos < m->time_nanos))
		m->time_nanos = d.time_nanos;
	if (d.duration_nanos > m->duration_nanos)
		m->duration_nanos = d.duration_nanos;
	for (size_t i = 0; i < d.ncomments && !rc; i++)
		rc = add_comment(m, (const char *)d.strs[d.comments[i]].p,
		                 d.strs[d.comments[i]].len);
	snprintf(pid, sizeof pid, "%d", in->pid);
	int64_t ps = pp_strtab_add(&m->strings, pid);
	pt.pid_str = ps < 0 ? 0 : (uint64_t)ps;
	pt.loc_id = calloc(d.nlocations + 1, sizeof *pt.loc_id);
	pt.func_id = calloc(d.nfunctions + 1, sizeof *pt.func_id);
	pt.map_id = calloc(d.nmappings + 1, sizeof *pt.map_id);
	if (!rc && (ps < 0 || !pt.loc_id || !pt.func_id || !pt.map_id))
		rc = -ENOMEM;
	/* The first process's first mapping (its main executable, as pprof.c
	 * writes it) is the merged profile's first: the pprof tool names the
	 * profile's binary after mapping 1. */
	struct need first = {0};
	if (!rc && is_first && d.nmappings) {
		need_mapping(&first, &d, &d.mappings[0]);
		if (!m->max_bytes || projected(m, &first, 0) <= m->max_bytes)
			rc = part_mapping(m, &pt, 0) < 0 ? -ENOMEM : 0;
	}
	for (size_t i = 0; i < d.nsamples && !rc; i++) {
		const struct pp_pprof_sample *s = &d.samples[i];
		if (m->max_bytes && with_sample(m, &pt, s) > m->max_bytes)
			charge_limit(m, &pt, s);
		else if (!(rc = add_sample(m, &pt, s)))
			m->kept++;
	}
done:
	free(pt.loc_id);
	free(pt.func_id);
	free(pt.map_id);
	pp_pprof_read_free(&d);
	return rc;
}

static void value_type(struct pp_pb *pb, int tag, const struct pp_pprof_vt *v)
{
	size_t mark = pp_pb_start(pb);
	pp_pb_int64_opt(pb, VALUETYPE_TYPE, (int64_t)v->type);
	pp_pb_int64_opt(pb, VALUETYPE_UNIT, (int64_t)v->unit);
	pp_pb_end(pb, tag, mark);
}

static void records(struct pp_pb *pb, const struct recs *list)
{
	for (const struct rec *r = list->head; r; r = r->next)
		pp_pb_raw(pb, r->data, r->len);
}

/* The limit frame's samples (one per pid), location, mapping, function:
 * IDs after every other, strings interned before the table is written. */
static int limit_frame(struct merge *m, struct pp_pb *pb, int stage,
                       uint64_t *ids)
{
	if (!m->over_limit)
		return 0;
	if (stage == 0) {
		int64_t name =
		    pp_strtab_add(&m->strings, PP_PROFILE_LIMIT_FRAME);
		int64_t map =
		    pp_strtab_add(&m->strings, PP_PPROF_MAPPING_SYNTHETIC);
		if (name < 0 || map < 0)
			return -ENOMEM;
		struct mfunc f = {(uint64_t)name, (uint64_t)name, 0, 0};
		int64_t fid = function_id(m, &f);
		if (fid < 0)
			return (int)fid;
		ids[0] = ++m->nlocations;
		ids[1] = ++m->nmappings;
		ids[2] = (uint64_t)fid;
		ids[3] = (uint64_t)map;
		struct pp_buf b = {0};
		pp_buf_printf(&b,
		              "%llu samples past the merged profile's size "
		              "limit (%zu bytes) went to %s, one per pid:",
		              (unsigned long long)m->over_limit, m->max_bytes,
		              PP_PROFILE_LIMIT_FRAME);
		for (size_t i = 0; i < m->nparts; i++)
			if (m->limited[i])
				pp_buf_printf(&b, " %d", m->parts[i].pid);
		int rc = b.failed ? -ENOMEM : add_comment(m, b.data, b.len);
		pp_buf_free(&b);
		for (size_t i = 0; i < m->nparts && !rc; i++) {
			char pid[24];
			snprintf(pid, sizeof pid, "%d", m->parts[i].pid);
			if (m->limited[i] &&
			    pp_strtab_add(&m->strings, pid) < 0)
				rc = -ENOMEM;
		}
		return rc;
	}
	if (stage == PROFILE_SAMPLE) {
		for (size_t i = 0; i < m->nparts; i++) {
			char pid[24];
			if (!m->limited[i])
				continue;
			snprintf(pid, sizeof pid, "%d", m->parts[i].pid);
			size_t mark = pp_pb_start(pb);
			pp_pb_uint64s(pb, SAMPLE_LOCATION_ID, &ids[0], 1);
			pp_pb_int64s(pb, SAMPLE_VALUE, m->limit + i * m->ntypes,
			             m->ntypes);
			/* (interned at stage 0: found, not added) */
			label(pb, m->pid_key,
			      (uint64_t)pp_strtab_add(&m->strings, pid), 0, 0);
			pp_pb_end(pb, PROFILE_SAMPLE, mark);
		}
	} else if (stage == PROFILE_LOCATION) {
		size_t mark = pp_pb_start(pb);
		pp_pb_uint64(pb, LOCATION_ID, ids[0]);
		pp_pb_uint64(pb, LOCATION_MAPPING_ID, ids[1]);
		/* The small made-up address of pprof.c's synthetic frames. */
		pp_pb_uint64(pb, LOCATION_ADDRESS, 1);
		size_t lm = pp_pb_start(pb);
		pp_pb_uint64(pb, LINE_FUNCTION_ID, ids[2]);
		pp_pb_end(pb, LOCATION_LINE, lm);
		pp_pb_end(pb, PROFILE_LOCATION, mark);
	} else if (stage == PROFILE_MAPPING) {
		pp_pprof_own_mapping(pb, ids[1], PP_SYNTHETIC_MAX + 1,
		                     (int64_t)ids[3]);
	}
	return 0;
}

static int write_profile(struct merge *m, const struct pp_merge_opts *o,
                         struct pp_buf *out)
{
	uint64_t limit_ids[4] = {0};
	struct pp_pb pb;
	int rc = limit_frame(m, NULL, 0, limit_ids);
	for (size_t i = 0; i < o->nnotes && !rc; i++)
		if (o->notes[i])
			rc = add_comment(m, o->notes[i], strlen(o->notes[i]));
	if (rc || (rc = pp_pb_init(&pb, out, 1)))
		return rc;
	for (size_t i = 0; i < m->ntypes; i++)
		value_type(&pb, PROFILE_SAMPLE_TYPE, &m->types[i]);
	records(&pb, &m->samples);
	limit_frame(m, &pb, PROFILE_SAMPLE, limit_ids);
	records(&pb, &m->locations);
	limit_frame(m, &pb, PROFILE_LOCATION, limit_ids);
	records(&pb, &m->mappings);
	limit_frame(m, &pb, PROFILE_MAPPING, limit_ids);
	for (size_t i = 0; i < m->nfuncs; i++) {
		const struct mfunc *f = &m->funcs[i];
		size_t mark = pp_pb_start(&pb);
		pp_pb_uint64(&pb, FUNCTION_ID, i + 1);
		pp_pb_int64_opt(&pb, FUNCTION_NAME, (int64_t)f->name);
		pp_pb_int64_opt(&pb, FUNCTION_SYSTEM_NAME,
		                (int64_t)f->system_name);
		pp_pb_int64_opt(&pb, FUNCTION_FILENAME, (int64_t)f->filename);
		pp_pb_int64_opt(&pb, FUNCTION_START_LINE, f->start_line);
		pp_pb_end(&pb, PROFILE_FUNCTION, mark);
		pp_pb_flush(&pb);
	}
	pp_pb_int64_opt(&pb, PROFILE_DROP_FRAMES, (int64_t)m->drop_frames);
	pp_pb_int64_opt(&pb, PROFILE_KEEP_FRAMES, (int64_t)m->keep_frames);
	pp_pb_int64_opt(&pb, PROFILE_TIME_NANOS, m->time_nanos);
	pp_pb_int64_opt(&pb, PROFILE_DURATION_NANOS, m->duration_nanos);
	if (m->period_type.type || m->period_type.unit)
		value_type(&pb, PROFILE_PERIOD_TYPE, &m->period_type);
	pp_pb_int64_opt(&pb, PROFILE_PERIOD, m->period);
	pp_pb_int64s(&pb, PROFILE_COMMENT, (const int64_t *)m->comments,
	             m->ncomments);
	pp_pb_int64_opt(&pb, PROFILE_DEFAULT_SAMPLE_TYPE,
	                (int64_t)m->default_type);
	/* Last: every string is known. Index 0 is "". */
	for (size_t i = 0; i < pp_strtab_count(&m->strings); i++) {
		pp_pb_bytes(&pb, PROFILE_STRING_TABLE,
		            pp_strtab_get(&m->strings, i),
		            pp_strtab_length(&m->strings, i));
		pp_pb_flush(&pb);
	}
	return pp_pb_finish(&pb);
}

int pp_merge_pprof(const struct pp_merge_part *parts, size_t n,
                   const struct pp_merge_opts *o, char **out, size_t *outlen,
                   char *err, size_t errlen)
{
	static const struct pp_merge_opts none;
	struct merge m;
	struct pp_buf b = {0};
	int rc = 0;

	*out = NULL;
	*outlen = 0;
	if (errlen)
		err[0] = 0;
	if (!o)
		o = &none;
	if (n == 0)
		return say(err, errlen, -EINVAL, "no profiles to merge");
	for (size_t i = 0; i < n; i++) {
		if (parts[i].pid <= 0)
			return say(err, errlen, -EINVAL,
			           "part %zu: pid %d is not a process ID",
			           i + 1, parts[i].pid);
		if (!parts[i].data && parts[i].len)
			return say(err, errlen, -EINVAL,
			           "part %zu (pid %d): no data", i + 1,
			           parts[i].pid);
	}
	memset(&m, 0, sizeof m);
	m.parts = parts;
	m.nparts = n;
	m.max_bytes = o->max_bytes;
	m.err = err;
	m.errlen = errlen;
	int64_t key;
	if (pp_strtab_init(&m.strings) ||
	    (key = pp_strtab_add(&m.strings, "pid")) < 0 ||
	    pp_pb_init(&m.enc, &m.enc_out, 0))
		rc = -ENOMEM;
	else
		m.pid_key = (uint64_t)key;
	for (size_t i = 0; i < n && !rc; i++)
		rc = merge_part(&m, i);
	if (o->stats)
		*o->stats = (struct pp_merge_stats){merged_bytes(&m), m.kept,
		                                    m.over_limit, m.left_out};
	if (!rc)
		rc = write_profile(&m, o, &b);
	if (!rc && !(*out = pp_buf_take(&b, outlen)))
		rc = -ENOMEM;
	if (rc == -ENOMEM)
		say(err, errlen, rc, "out of memory while merging");
	pp_buf_free(&b);
	pp_pb_abort(&m.enc);
	pp_buf_free(&m.enc_out);
	pp_strtab_free(&m.strings);
	pp_arena_free(&m.arena);
	pp_u64map_free(&m.comment_set);
	free(m.funcs);
	free(m.fhash);
	free(m.comments);
	free(m.ids);
	free(m.types);
	free(m.limit);
	free(m.limited);
	return rc;
}

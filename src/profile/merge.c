/*
 * Merging the pprof profiles of several processes. Agent context.
 *
 * Each part is inflated (when gzipped) and decoded on its own, every
 * length, varint, index and ID checked, then its samples are added to the
 * merged tables one by one, and the part is freed before the next. Only
 * what a kept sample needs is copied: its locations (renumbered: addresses
 * of different processes are unrelated), their mapping and their
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
#include <zlib.h>

#include "model.h"
#include "pb.h"
#include "pprof.h"
#include "util/arena.h"
#include "util/buf.h"
#include "util/hash.h"
#include "util/strtab.h"
#include "util/u64map.h"
#include "util/utf8.h"

/* ---- decoding ---------------------------------------------------------- */

enum {
	CAP_STRS,
	CAP_TYPES,
	CAP_SAMPLES,
	CAP_LOCS,
	CAP_VALS,
	CAP_LABELS,
	CAP_MAPPINGS,
	CAP_LOCATIONS,
	CAP_LINES,
	CAP_FUNCTIONS,
	CAP_COMMENTS,
};

struct dec {
	const unsigned char *base; /* the protobuf, for offsets in messages */
	struct pp_merge_decoded *d;
	char *err;
	size_t errlen;
};

struct span {
	const unsigned char *p, *end;
};

struct field {
	const unsigned char *at; /* its key */
	uint64_t num, v;         /* v: a varint's value */
	int wire;
	struct span sub; /* a length-delimited field's bytes */
};

static void vsay(char *err, size_t errlen, const char *fmt, va_list ap)
{
	if (errlen)
		vsnprintf(err, errlen, fmt, ap);
}

static int say(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int say(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay(err, errlen, fmt, ap);
	va_end(ap);
	return rc;
}

/* -EINVAL, and why, at a byte of the protobuf. */
static int bad(struct dec *x, const unsigned char *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad(struct dec *x, const unsigned char *at, const char *fmt, ...)
{
	char why[200];
	va_list ap;
	va_start(ap, fmt);
	vsay(why, sizeof why, fmt, ap);
	va_end(ap);
	return say(x->err, x->errlen, -EINVAL, "byte %zu: %s",
	           (size_t)(at - x->base), why);
}

static int varint(struct span *s, uint64_t *v)
{
	uint64_t x = 0;
	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (s->p == s->end)
			return -1;
		unsigned char b = *s->p++;
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return -1; /* more than 10 bytes */
}

/* The next field of a message: 1, 0 at its end, or -EINVAL. */
static int next(struct dec *x, struct span *s, const char *msg, struct field *f)
{
	uint64_t key, len;
	if (s->p == s->end)
		return 0;
	f->at = s->p;
	if (varint(s, &key))
		return bad(x, f->at, "%s: truncated field key", msg);
	f->num = key >> 3;
	f->wire = (int)(key & 7);
	if (f->num == 0 || f->num > 0x1fffffff)
		return bad(x, f->at, "%s: field number %llu is not valid", msg,
		           (unsigned long long)f->num);
	switch (f->wire) {
	case 0:
		if (varint(s, &f->v))
			return bad(x, f->at, "%s: field %llu: truncated varint",
			           msg, (unsigned long long)f->num);
		return 1;
	case 1:
	case 5:
		len = f->wire == 1 ? 8 : 4;
		if ((uint64_t)(s->end - s->p) < len)
			return bad(x, f->at, "%s: field %llu: truncated", msg,
			           (unsigned long long)f->num);
		s->p += len;
		return 1;
	case 2:
		if (varint(s, &len))
			return bad(x, f->at, "%s: field %llu: truncated length",
			           msg, (unsigned long long)f->num);
		if (len > (uint64_t)(s->end - s->p))
			return bad(x, f->at,
			           "%s: field %llu: length %llu runs past the "
			           "end (%zu bytes left)",
			           msg, (unsigned long long)f->num,
			           (unsigned long long)len,
			           (size_t)(s->end - s->p));
		f->sub.p = s->p;
		f->sub.end = s->p + len;
		s->p += len;
		return 1;
	default:
		return bad(x, f->at,
		           "%s: field %llu: wire type %d is not "
		           "supported",
		           msg, (unsigned long long)f->num, f->wire);
	}
}

static int wrong_wire(struct dec *x, const struct field *f, const char *msg)
{
	return bad(x, f->at, "%s: field %llu has wire type %d, which it cannot",
	           msg, (unsigned long long)f->num, f->wire);
}

/* Room for need elements of size elem in *p (capacity *cap, doubling). */
static int reserve(void *pp, size_t *cap, size_t need, size_t elem)
{
	void **p = pp;
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : 16;
	while (c < need) {
		if (c > ((size_t)-1) / 4 / elem)
			return -ENOMEM;
		c *= 2;
	}
	void *q = realloc(*p, c * elem);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = c;
	return 0;
}

/* Append to one of d's arrays (its count is d->n, its capacity caps[c]). */
#define PUSH(d, arr, n, c)                                                     \
	reserve(&(d)->arr, &(d)->caps[c], (d)->n + 1, sizeof *(d)->arr)

typedef int (*sub_fn)(struct dec *x, const struct field *f, const char *msg,
                      void *ctx);

/* A message: varint fields 1..nslots into slots (proto3: the last one
 * wins), other fields to sub first (1: taken, 0: not its, <0: error);
 * the rest skipped. */
static int message(struct dec *x, struct span s, const char *msg,
                   uint64_t *slots, unsigned nslots, sub_fn sub, void *ctx)
{
	struct field f;
	int rc;
	while ((rc = next(x, &s, msg, &f)) > 0) {
		if (sub) {
			int taken = sub(x, &f, msg, ctx);
			if (taken < 0)
				return taken;
			if (taken)
				continue;
		}
		if (f.num <= nslots) {
			if (f.wire != 0)
				return wrong_wire(x, &f, msg);
			slots[f.num - 1] = f.v;
		}
	}
	return rc;
}

/* A repeated varint field, packed or not, appended to d's array arr. */
static int varints(struct dec *x, const struct field *f, const char *msg,
                   uint64_t **arr, size_t *n, int c)
{
	struct span s = f->sub;
	if (f->wire == 0) {
		if (reserve(arr, &x->d->caps[c], *n + 1, sizeof **arr))
			return -ENOMEM;
		(*arr)[(*n)++] = f->v;
		return 0;
	}
	if (f->wire != 2)
		return wrong_wire(x, f, msg);
	while (s.p < s.end) {
		const unsigned char *at = s.p;
		uint64_t v;
		if (varint(&s, &v))
			return bad(x, at,
			           "%s: field %llu: truncated packed "
			           "varint",
			           msg, (unsigned long long)f->num);
		if (reserve(arr, &x->d->caps[c], *n + 1, sizeof **arr))
			return -ENOMEM;
		(*arr)[(*n)++] = v;
	}
	return 0;
}

static int sample_field(struct dec *x, const struct field *f, const char *msg,
                        void *ctx)
{
	struct pp_merge_decoded *d = x->d;
	struct pp_merge_sample *s = ctx;
	int rc;
	switch (f->num) {
	case SAMPLE_LOCATION_ID:
		rc = varints(x, f, msg, &d->locs, &d->nlocs, CAP_LOCS);
		s->nlocs = (uint32_t)(d->nlocs - s->locs);
		return rc ? rc : 1;
	case SAMPLE_VALUE:
		rc = varints(x, f, msg, (uint64_t **)&d->vals, &d->nvals,
		             CAP_VALS);
		s->nvals = (uint32_t)(d->nvals - s->vals);
		return rc ? rc : 1;
	case SAMPLE_LABEL: {
		uint64_t v[4] = {0};
		if (f->wire != 2)
			return wrong_wire(x, f, msg);
		rc = message(x, f->sub, msg, v, 4, NULL, NULL);
		if (rc)
			return rc;
		if (PUSH(d, labels, nlabels, CAP_LABELS))
			return -ENOMEM;
		d->labels[d->nlabels++] =
		    (struct pp_merge_label){v[0], v[1], v[3], (int64_t)v[2]};
		s->nlabels++;
		return 1;
	}
	default: return 0;
	}
}

static int location_field(struct dec *x, const struct field *f, const char *msg,
                          void *ctx)
{
	struct pp_merge_decoded *d = x->d;
	struct pp_merge_location *l = ctx;
	if (f->num != LOCATION_LINE)
		return 0;
	if (f->wire != 2)
		return wrong_wire(x, f, msg);
	uint64_t v[2] = {0};
	int rc = message(x, f->sub, msg, v, 2, NULL, NULL);
	if (rc)
		return rc;
	if (PUSH(d, lines, nlines, CAP_LINES))
		return -ENOMEM;
	/* function: the ID until resolved */
	d->lines[d->nlines++] = (struct pp_merge_line){v[0], (int64_t)v[1]};
	l->nlines++;
	return 1;
}

/* A top-level field of Profile. */
static int profile_field(struct dec *x, const struct field *f, const char *msg,
                         void *ctx)
{
	struct pp_merge_decoded *d = x->d;
	char what[64];
	uint64_t v[10] = {0};
	int rc = 0;
	(void)ctx;
	switch (f->num) {
	case PROFILE_SAMPLE_TYPE:
	case PROFILE_PERIOD_TYPE:
	case PROFILE_SAMPLE:
	case PROFILE_MAPPING:
	case PROFILE_LOCATION:
	case PROFILE_FUNCTION:
	case PROFILE_STRING_TABLE:
		if (f->wire != 2)
			return wrong_wire(x, f, msg);
		break;
	case PROFILE_COMMENT:
		rc = varints(x, f, msg, &d->comments, &d->ncomments,
		             CAP_COMMENTS);
		return rc ? rc : 1;
	case PROFILE_DROP_FRAMES:
	case PROFILE_KEEP_FRAMES:
	case PROFILE_TIME_NANOS:
	case PROFILE_DURATION_NANOS:
	case PROFILE_PERIOD:
	case PROFILE_DEFAULT_SAMPLE_TYPE:
		if (f->wire != 0)
			return wrong_wire(x, f, msg);
		break;
	default: return 0; /* unknown: skipped */
	}
	switch (f->num) {
	case PROFILE_SAMPLE_TYPE:
		snprintf(what, sizeof what, "sample_type %zu", d->ntypes);
		rc = message(x, f->sub, what, v, 2, NULL, NULL);
		if (!rc && !(rc = PUSH(d, types, ntypes, CAP_TYPES)))
			d->types[d->ntypes++] =
			    (struct pp_merge_vt){v[0], v[1]};
		break;
	case PROFILE_PERIOD_TYPE:
		/* A message field seen twice is merged. */
		v[0] = d->period_type.type;
		v[1] = d->period_type.unit;
		rc = message(x, f->sub, "period_type", v, 2, NULL, NULL);
		d->period_type = (struct pp_merge_vt){v[0], v[1]};
		break;
	case PROFILE_SAMPLE: {
		struct pp_merge_sample s = {d->nlocs, d->nvals, d->nlabels,
		                            0,        0,        0};
		snprintf(what, sizeof what, "sample %zu", d->nsamples);
		rc = message(x, f->sub, what, NULL, 0, sample_field, &s);
		if (!rc && !(rc = PUSH(d, samples, nsamples, CAP_SAMPLES)))
			d->samples[d->nsamples++] = s;
		break;
	}
	case PROFILE_MAPPING:
		snprintf(what, sizeof what, "mapping %zu", d->nmappings);
		rc = message(x, f->sub, what, v, 10, NULL, NULL);
		if (!rc && !(rc = PUSH(d, mappings, nmappings, CAP_MAPPINGS)))
			d->mappings[d->nmappings++] = (struct pp_merge_mapping){
			    v[0], v[1],   v[2],   v[3],   v[4],
			    v[5], !!v[6], !!v[7], !!v[8], !!v[9]};
		break;
	case PROFILE_LOCATION: {
		struct pp_merge_location l = {0};
		l.lines = d->nlines;
		snprintf(what, sizeof what, "location %zu", d->nlocations);
		rc = message(x, f->sub, what, v, 5, location_field, &l);
		l.id = v[0];
		l.mapping = v[1];
		l.address = v[2];
		l.is_folded = !!v[4];
		if (!rc &&
		    !(rc = PUSH(d, locations, nlocations, CAP_LOCATIONS)))
			d->locations[d->nlocations++] = l;
		break;
	}
	case PROFILE_FUNCTION:
		snprintf(what, sizeof what, "function %zu", d->nfunctions);
		rc = message(x, f->sub, what, v, 5, NULL, NULL);
		if (!rc &&
		    !(rc = PUSH(d, functions, nfunctions, CAP_FUNCTIONS)))
			d->functions[d->nfunctions++] =
			    (struct pp_merge_function){v[0], v[1], v[2], v[3],
			                               (int64_t)v[4]};
		break;
	case PROFILE_STRING_TABLE:
		if (PUSH(d, strs, nstrs, CAP_STRS))
			return -ENOMEM;
		d->strs[d->nstrs++] = (struct pp_merge_str){
		    f->sub.p, (size_t)(f->sub.end - f->sub.p)};
		break;
	case PROFILE_DROP_FRAMES: d->drop_frames = f->v; break;
	case PROFILE_KEEP_FRAMES: d->keep_frames = f->v; break;
	case PROFILE_TIME_NANOS: d->time_nanos = (int64_t)f->v; break;
	case PROFILE_DURATION_NANOS: d->duration_nanos = (int64_t)f->v; break;
	case PROFILE_PERIOD: d->period = (int64_t)f->v; break;
	case PROFILE_DEFAULT_SAMPLE_TYPE: d->default_sample_type = f->v; break;
	}
	return rc ? rc : 1;
}

/* A string index: in the table. */
static int str_ok(struct dec *x, uint64_t i, const char *what, size_t n)
{
	if (i < x->d->nstrs)
		return 0;
	return say(x->err, x->errlen, -EINVAL,
	           "%s %zu: string index %llu is past the string table's %zu "
	           "entries",
	           what, n, (unsigned long long)i, x->d->nstrs);
}

/* IDs of one kind: non-zero and distinct; map: id -> index + 1. */
static int index_ids(struct dec *x, struct pp_u64map *map, const void *arr,
                     size_t n, size_t stride, const char *what)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t id =
		    *(const uint64_t *)((const char *)arr + i * stride);
		int inserted;
		if (id == 0)
			return say(x->err, x->errlen, -EINVAL,
			           "%s %zu has ID 0", what, i);
		uint64_t *slot = pp_u64map_put(map, id, &inserted);
		if (!slot)
			return -ENOMEM;
		if (!inserted)
			return say(x->err, x->errlen, -EINVAL,
			           "%s %zu has the ID %llu of %s %llu", what, i,
			           (unsigned long long)id, what,
			           (unsigned long long)(*slot - 1));
		*slot = i + 1;
	}
	return 0;
}

/* An ID to its index + 1 (0 stays 0 where allowed). */
static int resolve(struct dec *x, const struct pp_u64map *map, uint64_t *id,
                   int zero_ok, const char *what, size_t n, const char *kind)
{
	if (*id == 0 && zero_ok)
		return 0;
	const uint64_t *i = pp_u64map_get(map, *id);
	if (!i)
		return say(x->err, x->errlen, -EINVAL,
		           "%s %zu names %s ID %llu, which no %s has", what, n,
		           kind, (unsigned long long)*id, kind);
	*id = *i;
	return 0;
}

/* After the fields: every index in range, every reference resolved. */
static int check(struct dec *x)
{
	struct pp_merge_decoded *d = x->d;
	struct pp_u64map maps = {0}, locs = {0}, funcs = {0};
	int rc = 0;

	if (d->nstrs == 0 || d->strs[0].len != 0)
		return say(x->err, x->errlen, -EINVAL,
		           d->nstrs ? "string_table[0] is not empty"
		                    : "no string table");
	for (size_t i = 0; i < d->ntypes && !rc; i++)
		if (!(rc = str_ok(x, d->types[i].type, "sample_type", i)))
			rc = str_ok(x, d->types[i].unit, "sample_type", i);
	if (!rc && !(rc = str_ok(x, d->period_type.type, "period_type", 0)))
		rc = str_ok(x, d->period_type.unit, "period_type", 0);
	for (size_t i = 0; i < d->ncomments && !rc; i++)
		rc = str_ok(x, d->comments[i], "comment", i);
	if (!rc && !(rc = str_ok(x, d->drop_frames, "drop_frames", 0)) &&
	    !(rc = str_ok(x, d->keep_frames, "keep_frames", 0)))
		rc =
		    str_ok(x, d->default_sample_type, "default_sample_type", 0);
	for (size_t i = 0; i < d->nlabels && !rc; i++) {
		const struct pp_merge_label *l = &d->labels[i];
		if (!(rc = str_ok(x, l->key, "label", i)) &&
		    !(rc = str_ok(x, l->str, "label", i)))
			rc = str_ok(x, l->unit, "label", i);
	}
	for (size_t i = 0; i < d->nmappings && !rc; i++)
		if (!(rc = str_ok(x, d->mappings[i].filename, "mapping", i)))
			rc = str_ok(x, d->mappings[i].build_id, "mapping", i);
	for (size_t i = 0; i < d->nfunctions && !rc; i++) {
		const struct pp_merge_function *f = &d->functions[i];
		if (!(rc = str_ok(x, f->name, "function", i)) &&
		    !(rc = str_ok(x, f->system_name, "function", i)))
			rc = str_ok(x, f->filename, "function", i);
	}
	if (!rc)
		rc = index_ids(x, &maps, d->mappings, d->nmappings,
		               sizeof *d->mappings, "mapping");
	if (!rc)
		rc = index_ids(x, &locs, d->locations, d->nlocations,
		               sizeof *d->locations, "location");
	if (!rc)
		rc = index_ids(x, &funcs, d->functions, d->nfunctions,
		               sizeof *d->functions, "function");
	for (size_t i = 0; i < d->nlocations && !rc; i++) {
		struct pp_merge_location *l = &d->locations[i];
		rc =
		    resolve(x, &maps, &l->mapping, 1, "location", i, "mapping");
		for (uint32_t k = 0; k < l->nlines && !rc; k++)
			rc =
			    resolve(x, &funcs, &d->lines[l->lines + k].function,
			            1, "location", i, "function");
	}
	for (size_t i = 0; i < d->nsamples && !rc; i++) {
		const struct pp_merge_sample *s = &d->samples[i];
		if (s->nvals != d->ntypes)
			rc =
			    say(x->err, x->errlen, -EINVAL,
			        "sample %zu has %u values for %zu sample types",
			        i, s->nvals, d->ntypes);
		for (uint32_t k = 0; k < s->nlocs && !rc; k++)
			rc = resolve(x, &locs, &d->locs[s->locs + k], 0,
			             "sample", i, "location");
	}
	/* Indices from here on. */
	for (size_t i = 0; i < d->nlocs && !rc; i++)
		d->locs[i]--;
	pp_u64map_free(&maps);
	pp_u64map_free(&locs);
	pp_u64map_free(&funcs);
	return rc;
}

/* Inflate a gzip stream (several members, as gzip allows). */
static int inflate_all(const unsigned char *p, size_t len, struct pp_buf *out,
                       char *err, size_t errlen)
{
	z_stream z;
	memset(&z, 0, sizeof z);
	if (inflateInit2(&z, 15 + 16) != Z_OK)
		return -ENOMEM;
	z.next_in = (unsigned char *)p;
	z.avail_in = (uInt)(len > UINT32_MAX ? UINT32_MAX : len);
	size_t fed = z.avail_in;
	int rc = 0;
	for (;;) {
		unsigned char chunk[65536];
		z.next_out = chunk;
		z.avail_out = sizeof chunk;
		int zr = inflate(&z, Z_NO_FLUSH);
		pp_buf_append(out, chunk, sizeof chunk - z.avail_out);
		if (out->failed) {
			rc = -ENOMEM;
			break;
		}
		if (out->len > PP_MERGE_MAX_PART) {
			rc = say(err, errlen, -EINVAL,
			         "inflates to more than %zu MiB",
			         PP_MERGE_MAX_PART >> 20);
			break;
		}
		if (z.avail_in == 0 && fed < len) {
			size_t more = len - fed;
			z.avail_in =
			    (uInt)(more > UINT32_MAX ? UINT32_MAX : more);
			fed += z.avail_in;
		}
		if (zr == Z_STREAM_END) {
			size_t left = z.avail_in + (len - fed);
			if (left == 0)
				break;
			if (left < 2 || z.next_in[0] != 0x1f ||
			    z.next_in[1] != 0x8b) {
				rc = say(err, errlen, -EINVAL,
				         "%zu bytes after the end of the gzip "
				         "stream",
				         left);
				break;
			}
			inflateReset(&z);
			continue;
		}
		if (zr == Z_MEM_ERROR) {
			rc = -ENOMEM;
			break;
		}
		if (zr == Z_BUF_ERROR && z.avail_in == 0) {
			rc = say(err, errlen, -EINVAL,
			         "the gzip stream is truncated");
			break;
		}
		if (zr != Z_OK && zr != Z_BUF_ERROR) {
			rc = say(err, errlen, -EINVAL, "gzip: %s",
			         z.msg ? z.msg : "corrupt stream");
			break;
		}
	}
	inflateEnd(&z);
	return rc;
}

void pp_merge_decoded_free(struct pp_merge_decoded *d)
{
	free(d->inflated);
	free(d->strs);
	free(d->types);
	free(d->samples);
	free(d->locs);
	free(d->vals);
	free(d->labels);
	free(d->mappings);
	free(d->locations);
	free(d->lines);
	free(d->functions);
	free(d->comments);
	memset(d, 0, sizeof *d);
}

int pp_merge_decode(const void *data, size_t len, struct pp_merge_decoded *d,
                    char *err, size_t errlen)
{
	const unsigned char *p = data;
	struct dec x = {p, d, err, errlen};
	memset(d, 0, sizeof *d);
	if (len == 0)
		return say(err, errlen, -EINVAL, "empty (0 bytes)");
	if (len >= 2 && p[0] == 0x1f && p[1] == 0x8b) {
		struct pp_buf b = {0};
		int rc = inflate_all(p, len, &b, err, errlen);
		if (rc) {
			pp_buf_free(&b);
			return rc;
		}
		d->inflated = (unsigned char *)pp_buf_take(&b, &len);
		pp_buf_free(&b);
		if (!d->inflated)
			return -ENOMEM;
		if (len == 0)
			return say(err, errlen, -EINVAL,
			           "empty (a gzip stream of 0 bytes)");
		p = x.base = d->inflated;
	}
	int rc = message(&x, (struct span){p, p + len}, "Profile", NULL, 0,
	                 profile_field, NULL);
	return rc ? rc : check(&x);
}

/* ---- merging ----------------------------------------------------------- */

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
	struct pp_merge_vt *types, period_type;
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
	const struct pp_merge_decoded *d;
	size_t index;
	uint64_t *loc_id, *func_id, *map_id;
	uint64_t pid_str;
};

static size_t round16(size_t n)
{
	return (n + 15) & ~(size_t)15;
}

/* Bytes of a string table whose arrays hold cap strings and whose hash
 * map has map_cap slots (strtab.c, u64map.c). */
static size_t strtab_bytes(size_t cap, size_t map_cap)
{
	return cap * (sizeof(char *) + 2 * sizeof(uint32_t)) +
	       map_cap * (2 * sizeof(uint64_t) + 1);
}

/* Memory the merged tables hold. */
static size_t merged_bytes(const struct merge *m)
{
	return m->arena.reserved + m->strings.arena.reserved +
	       strtab_bytes(m->strings.cap, m->strings.by_hash.cap) +
	       m->funcs_cap * sizeof *m->funcs +
	       m->fhash_cap * sizeof *m->fhash +
	       m->comments_cap * sizeof *m->comments +
	       m->comment_set.cap * (2 * sizeof(uint64_t) + 1) +
	       m->ids_cap * sizeof *m->ids + m->enc.data.cap +
	       m->nparts * (m->ntypes * sizeof *m->limit + 1);
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
	return round16(sizeof(struct rec) + encoded);
}

struct need {
	size_t strings, string_bytes, funcs, rec_bytes;
};

static void need_string(struct need *n, const struct pp_merge_decoded *d,
                        uint64_t i)
{
	n->strings++;
	n->string_bytes += round16(d->strs[i].len + 1);
}

static void need_mapping(struct need *n, const struct pp_merge_decoded *d,
                         const struct pp_merge_mapping *mp)
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
	if (n->strings)
		b += n->string_bytes + PP_ARENA_CHUNK;
	b += strtab_bytes(cap_for(t->cap, t->len + n->strings, 256),
	                  cap_for(t->by_hash.cap,
	                          2 * (t->by_hash.len + n->strings), 64)) -
	     strtab_bytes(t->cap, t->by_hash.cap);
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
                          const struct pp_merge_sample *s)
{
	const struct pp_merge_decoded *d = pt->d;
	struct need n = {0};
	n.rec_bytes =
	    rec_bytes(SUBMSG + 2 * SUBMSG + (s->nlocs + s->nvals) * 10 +
	              (s->nlabels + 1) * (SUBMSG + 4 * VARINT_FIELD));
	for (uint32_t k = 0; k < s->nlocs; k++) {
		uint64_t li = d->locs[s->locs + k];
		if (pt->loc_id[li])
			continue;
		const struct pp_merge_location *l = &d->locations[li];
		n.rec_bytes +=
		    rec_bytes(SUBMSG + 4 * VARINT_FIELD +
		              l->nlines * (SUBMSG + 2 * VARINT_FIELD));
		if (l->mapping && !pt->map_id[l->mapping - 1])
			need_mapping(&n, d, &d->mappings[l->mapping - 1]);
		for (uint32_t i = 0; i < l->nlines; i++) {
			uint64_t fi = d->lines[l->lines + i].function;
			if (!fi || pt->func_id[fi - 1])
				continue;
			const struct pp_merge_function *f =
			    &d->functions[fi - 1];
			n.funcs++;
			need_string(&n, d, f->name);
			need_string(&n, d, f->system_name);
			need_string(&n, d, f->filename);
		}
	}
	for (uint32_t k = 0; k < s->nlabels; k++) {
		const struct pp_merge_label *l = &d->labels[s->labels + k];
		need_string(&n, d, l->key);
		need_string(&n, d, l->str);
		need_string(&n, d, l->unit);
	}
	return projected(m, &n, s->nlocs);
}

/* A string of a part in the merged table: its index, or -ENOMEM. */
static int64_t intern(struct merge *m, const struct pp_merge_decoded *d,
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
	    reserve(&m->funcs, &m->funcs_cap, m->nfuncs + 1, sizeof *m->funcs))
		return -ENOMEM;
	m->funcs[m->nfuncs++] = *f;
	m->fhash[k] = (uint32_t)m->nfuncs;
	return (int64_t)m->nfuncs;
}

static int64_t part_function(struct merge *m, struct part *pt, uint64_t fi)
{
	if (pt->func_id[fi])
		return (int64_t)pt->func_id[fi];
	const struct pp_merge_function *f = &pt->d->functions[fi];
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
	const struct pp_merge_mapping *mp = &pt->d->mappings[mi];
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
	const struct pp_merge_decoded *d = pt->d;
	const struct pp_merge_location *l = &d->locations[li];
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
		const struct pp_merge_line *ln = &d->lines[l->lines + k];
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

static int is_pid_key(const struct pp_merge_decoded *d, uint64_t key)
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
                      const struct pp_merge_sample *s)
{
	const struct pp_merge_decoded *d = pt->d;
	if (reserve(&m->ids, &m->ids_cap, s->nlocs, sizeof *m->ids))
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
		const struct pp_merge_label *l = &d->labels[s->labels + k];
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
                         const struct pp_merge_sample *s)
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
                       const struct pp_merge_decoded *d, uint64_t di)
{
	const char *p = (const char *)d->strs[di].p;
	size_t len = d->strs[di].len;
	if (pp_utf8_valid(p, len))
		return m->strings.lens[mi] == len &&
		       memcmp(m->strings.strs[mi], p, len) == 0;
	struct pp_buf b = {0};
	pp_utf8_append(&b, p, len);
	int same = !b.failed && m->strings.lens[mi] == b.len &&
	           memcmp(m->strings.strs[mi], b.data, b.len) == 0;
	pp_buf_free(&b);
	return same;
}

static int same_type(const struct merge *m, const struct pp_merge_vt *a,
                     const struct pp_merge_decoded *d,
                     const struct pp_merge_vt *b)
{
	return same_string(m, a->type, d, b->type) &&
	       same_string(m, a->unit, d, b->unit);
}

/* "type/unit, ...; period type/unit" of a decoded part (m NULL) or of
 * the merged profile (d NULL). */
static void describe(struct pp_buf *b, const struct merge *m,
                     const struct pp_merge_decoded *d)
{
	size_t n = d ? d->ntypes : m->ntypes;
	for (size_t i = 0; i <= n; i++) {
		const struct pp_merge_vt *t =
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
				pp_buf_append(b, m->strings.strs[s],
				              m->strings.lens[s]);
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
	if (reserve(&m->comments, &m->comments_cap, m->ncomments + 1,
	            sizeof *m->comments))
		return -ENOMEM;
	m->comments[m->ncomments++] = (uint64_t)i;
	return 0;
}

/* The first usable part sets the types and the profile's scalars. */
static int take_first(struct merge *m, const struct pp_merge_decoded *d,
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
		    (struct pp_merge_vt){(uint64_t)s[0], (uint64_t)s[1]};
	}
	m->ntypes = d->ntypes;
	s[0] = intern(m, d, d->period_type.type);
	s[1] = intern(m, d, d->period_type.unit);
	s[2] = intern(m, d, d->default_sample_type);
	s[3] = intern(m, d, d->drop_frames);
	if (s[0] < 0 || s[1] < 0 || s[2] < 0 || s[3] < 0)
		return -ENOMEM;
	m->period_type = (struct pp_merge_vt){(uint64_t)s[0], (uint64_t)s[1]};
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
static int left_out(struct merge *m, const struct pp_merge_decoded *d, int pid,
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
	struct pp_merge_decoded d;
	struct part pt = {&d, index, NULL, NULL, NULL, 0};
	char why[256] = "", pid[24];
	int rc = pp_merge_decode(in->data, in->len, &d, why, sizeof why), out;

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
		const struct pp_merge_sample *s = &d.samples[i];
		if (m->max_bytes && with_sample(m, &pt, s) > m->max_bytes)
			charge_limit(m, &pt, s);
		else if (!(rc = add_sample(m, &pt, s)))
			m->kept++;
	}
done:
	free(pt.loc_id);
	free(pt.func_id);
	free(pt.map_id);
	pp_merge_decoded_free(&d);
	return rc;
}

static void value_type(struct pp_pb *pb, int tag, const struct pp_merge_vt *v)
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
	for (size_t i = 0; i < m->strings.len; i++) {
		pp_pb_bytes(&pb, PROFILE_STRING_TABLE, m->strings.strs[i],
		            m->strings.lens[i]);
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

/*
 * The pprof decoder (pprof_read.h).
 * Context: agent.
 *
 * A message is read field by field (next), its varint fields into slots
 * and its submessages by a function per message; repeated fields are
 * appended to growing arrays. After the fields, check() makes every string
 * index and every reference between messages safe to follow.
 */
#include "pprof_read.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "pprof.h"
#include "util/buf.h"
#include "util/u64map.h"

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
	struct pp_pprof_decoded *d;
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

/* Append to one of d's arrays (its count is d->n, its capacity caps[c]). */
#define PUSH(d, arr, n, c)                                                     \
	pp_array_reserve(&(d)->arr, &(d)->caps[c], (d)->n + 1, sizeof *(d)->arr)

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
		if (pp_array_reserve(arr, &x->d->caps[c], *n + 1, sizeof **arr))
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
		if (pp_array_reserve(arr, &x->d->caps[c], *n + 1, sizeof **arr))
			return -ENOMEM;
		(*arr)[(*n)++] = v;
	}
	return 0;
}

static int sample_field(struct dec *x, const struct field *f, const char *msg,
                        void *ctx)
{
	struct pp_pprof_decoded *d = x->d;
	struct pp_pprof_sample *s = ctx;
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
		    (struct pp_pprof_label){v[0], v[1], v[3], (int64_t)v[2]};
		s->nlabels++;
		return 1;
	}
	default: return 0;
	}
}

static int location_field(struct dec *x, const struct field *f, const char *msg,
                          void *ctx)
{
	struct pp_pprof_decoded *d = x->d;
	struct pp_pprof_location *l = ctx;
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
	d->lines[d->nlines++] = (struct pp_pprof_line){v[0], (int64_t)v[1]};
	l->nlines++;
	return 1;
}

/* A top-level field of Profile. */
static int profile_field(struct dec *x, const struct field *f, const char *msg,
                         void *ctx)
{
	struct pp_pprof_decoded *d = x->d;
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
			    (struct pp_pprof_vt){v[0], v[1]};
		break;
	case PROFILE_PERIOD_TYPE:
		/* A message field seen twice is merged. */
		v[0] = d->period_type.type;
		v[1] = d->period_type.unit;
		rc = message(x, f->sub, "period_type", v, 2, NULL, NULL);
		d->period_type = (struct pp_pprof_vt){v[0], v[1]};
		break;
	case PROFILE_SAMPLE: {
		struct pp_pprof_sample s = {d->nlocs, d->nvals, d->nlabels,
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
			d->mappings[d->nmappings++] = (struct pp_pprof_mapping){
			    v[0], v[1],   v[2],   v[3],   v[4],
			    v[5], !!v[6], !!v[7], !!v[8], !!v[9]};
		break;
	case PROFILE_LOCATION: {
		struct pp_pprof_location l = {0};
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
			    (struct pp_pprof_function){v[0], v[1], v[2], v[3],
			                               (int64_t)v[4]};
		break;
	case PROFILE_STRING_TABLE:
		if (PUSH(d, strs, nstrs, CAP_STRS))
			return -ENOMEM;
		d->strs[d->nstrs++] = (struct pp_pprof_str){
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
	struct pp_pprof_decoded *d = x->d;
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
		const struct pp_pprof_label *l = &d->labels[i];
		if (!(rc = str_ok(x, l->key, "label", i)) &&
		    !(rc = str_ok(x, l->str, "label", i)))
			rc = str_ok(x, l->unit, "label", i);
	}
	for (size_t i = 0; i < d->nmappings && !rc; i++)
		if (!(rc = str_ok(x, d->mappings[i].filename, "mapping", i)))
			rc = str_ok(x, d->mappings[i].build_id, "mapping", i);
	for (size_t i = 0; i < d->nfunctions && !rc; i++) {
		const struct pp_pprof_function *f = &d->functions[i];
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
		struct pp_pprof_location *l = &d->locations[i];
		rc =
		    resolve(x, &maps, &l->mapping, 1, "location", i, "mapping");
		for (uint32_t k = 0; k < l->nlines && !rc; k++)
			rc =
			    resolve(x, &funcs, &d->lines[l->lines + k].function,
			            1, "location", i, "function");
	}
	for (size_t i = 0; i < d->nsamples && !rc; i++) {
		const struct pp_pprof_sample *s = &d->samples[i];
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
		if (out->len > PP_PPROF_READ_MAX) {
			rc = say(err, errlen, -EINVAL,
			         "inflates to more than %zu MiB",
			         PP_PPROF_READ_MAX >> 20);
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

void pp_pprof_read_free(struct pp_pprof_decoded *d)
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

int pp_pprof_read(const void *data, size_t len, struct pp_pprof_decoded *d,
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

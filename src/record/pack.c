/*
 * A profile model packed into bytes for the record's snapshots (snaps.c):
 * a model holds its memory in arenas reserved a chunk at a time (over 100
 * KiB for a nearly empty one), which the record cannot afford every few
 * seconds per kind; packed, a snapshot takes about what its samples say
 * (stacks as varint differences of their PCs, strings inline). Unpacked
 * when a range is read. What it keeps: sample types, period and its type,
 * default type, the frames' sense, the legacy title, comments, synthetic
 * frames (in order, so their PCs come back the same), and every sample's
 * stack, labels and values.
 * Context: agent.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "record/internal.h"
#include "util/buf.h"

static void put_u(struct pp_buf *b, uint64_t v)
{
	unsigned char tmp[10];
	size_t n = 0;
	while (v >= 0x80) {
		tmp[n++] = (unsigned char)(v | 0x80);
		v >>= 7;
	}
	tmp[n++] = (unsigned char)v;
	pp_buf_append(b, tmp, n);
}

static void put_s(struct pp_buf *b, int64_t v)
{
	put_u(b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

static void put_str(struct pp_buf *b, const char *s)
{
	if (!s) {
		put_u(b, 0);
		return;
	}
	size_t n = strlen(s);
	put_u(b, n + 1);
	pp_buf_append(b, s, n);
}

int pp_record_pack(const struct pp_profile *p, unsigned char **out, size_t *len)
{
	struct pp_buf b = {0};
	put_u(&b, p->ntypes);
	for (size_t i = 0; i < p->ntypes; i++) {
		put_str(&b, p->types[i].type);
		put_str(&b, p->types[i].unit);
	}
	put_str(&b, p->period_type.type);
	put_str(&b, p->period_type.unit);
	put_s(&b, p->period);
	put_s(&b, p->default_type);
	put_u(&b, (uint64_t)p->leaf_is_return);
	/* A static string: its address is valid for the process's life. */
	put_u(&b, (uint64_t)(uintptr_t)p->legacy_title);
	put_u(&b, p->ncomments);
	for (size_t i = 0; i < p->ncomments; i++)
		put_str(&b, p->comments[i]);
	put_u(&b, p->nsynthetic);
	for (size_t i = 0; i < p->nsynthetic; i++)
		put_str(&b, p->synthetic[i]);
	put_u(&b, p->nsamples);
	for (const struct pp_sample *s = p->first; s; s = s->next) {
		put_u(&b, s->depth);
		uintptr_t prev = 0;
		for (uint32_t i = 0; i < s->depth; i++) {
			put_s(&b, (int64_t)(s->pcs[i] - prev));
			prev = s->pcs[i];
		}
		put_u(&b, s->nlabels);
		for (uint32_t i = 0; i < s->nlabels; i++) {
			const struct pp_label *l = &s->labels[i];
			put_str(&b, l->key);
			put_str(&b, l->str);
			if (!l->str) {
				put_s(&b, l->num);
				put_str(&b, l->unit);
			}
		}
		for (size_t i = 0; i < p->ntypes; i++)
			put_s(&b, s->values[i]);
	}
	if (b.failed) {
		pp_buf_free(&b);
		return -ENOMEM;
	}
	*out = (unsigned char *)pp_buf_take(&b, len);
	return *out ? 0 : -ENOMEM;
}

/* ---- unpacking --------------------------------------------------------------
 */

struct rd {
	const unsigned char *p, *end;
	int bad;
	/* Strings are copied out to be NUL-terminated: a small pool. */
	char *pool;
	size_t used, cap;
};

static uint64_t get_u(struct rd *r)
{
	uint64_t v = pp_record_get_varint(&r->p, r->end);
	if (r->p > r->end)
		r->bad = 1;
	return v;
}

static int64_t get_s(struct rd *r)
{
	uint64_t z = get_u(r);
	return (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
}

/* A string, valid until the next call (NULL for none). */
static const char *get_str(struct rd *r)
{
	uint64_t n = get_u(r);
	if (!n)
		return NULL;
	n--;
	if (n > (uint64_t)(r->end - r->p)) {
		r->bad = 1;
		return NULL;
	}
	if (n + 1 > r->cap) {
		char *np = realloc(r->pool, n + 1);
		if (!np) {
			r->bad = 1;
			return NULL;
		}
		r->pool = np;
		r->cap = n + 1;
	}
	memcpy(r->pool, r->p, n);
	r->pool[n] = 0;
	r->p += n;
	return r->pool;
}

/* get_str into storage of its own (strdup), for what must outlive the
 * next string. */
static char *get_dup(struct rd *r)
{
	const char *s = get_str(r);
	return s ? strdup(s) : NULL;
}

int pp_record_unpack(const unsigned char *data, size_t len,
                     struct pp_profile **out)
{
	struct rd r = {data, data + len, 0, NULL, 0, 0};
	struct pp_profile *p = NULL;
	struct pp_value_type types[16], period_type = {0};
	char *owned[34] = {0};
	size_t nowned = 0;
	uintptr_t *pcs = NULL;
	struct pp_label *labels = NULL;
	char **label_strs = NULL;
	int64_t *values = NULL;
	size_t pcs_cap = 0, labels_cap = 0;
	int rc = -EINVAL;

	size_t ntypes = get_u(&r);
	if (ntypes == 0 || ntypes > 16)
		goto out;
	for (size_t i = 0; i < ntypes; i++) {
		types[i].type = owned[nowned++] = get_dup(&r);
		types[i].unit = owned[nowned++] = get_dup(&r);
	}
	period_type.type = owned[nowned++] = get_dup(&r);
	period_type.unit = owned[nowned++] = get_dup(&r);
	if (r.bad)
		goto out;
	int64_t period = get_s(&r);
	p = pp_profile_new(types, ntypes,
	                   period_type.type ? &period_type : NULL, period);
	if (!p) {
		rc = -ENOMEM;
		goto out;
	}
	int64_t def = get_s(&r);
	if (def >= 0 && (size_t)def < ntypes)
		pp_profile_set_default_type(p, types[def].type);
	p->leaf_is_return = (int)get_u(&r);
	p->legacy_title = (const char *)(uintptr_t)get_u(&r);
	for (uint64_t n = get_u(&r); n-- && !r.bad;) {
		const char *c = get_str(&r);
		if (c)
			pp_profile_add_comment(p, c);
	}
	for (uint64_t n = get_u(&r); n-- && !r.bad;) {
		const char *name = get_str(&r);
		if (name && !pp_profile_synthetic_pc(p, name))
			r.bad = 1;
	}
	uint64_t nsamples = get_u(&r);
	values = calloc(ntypes, sizeof *values);
	if (!values) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint64_t k = 0; k < nsamples && !r.bad; k++) {
		uint64_t depth = get_u(&r);
		if (depth > (uint64_t)(r.end - r.p)) {
			r.bad = 1;
			break;
		}
		if (depth > pcs_cap) {
			uintptr_t *np = realloc(pcs, depth * sizeof *pcs);
			if (!np) {
				rc = -ENOMEM;
				goto out;
			}
			pcs = np;
			pcs_cap = depth;
		}
		uintptr_t prev = 0;
		for (uint64_t i = 0; i < depth; i++)
			pcs[i] = prev = prev + (uintptr_t)get_s(&r);
		uint64_t nl = get_u(&r);
		if (nl > (uint64_t)(r.end - r.p)) {
			r.bad = 1;
			break;
		}
		if (nl > labels_cap) {
			void *nla = realloc(labels, nl * sizeof *labels);
			void *nls =
			    nla ? realloc(label_strs, nl * 3 * sizeof(char *))
			        : NULL;
			if (nla)
				labels = nla;
			if (nls)
				label_strs = nls;
			if (!nla || !nls) {
				rc = -ENOMEM;
				goto out;
			}
			for (uint64_t i = labels_cap * 3; i < nl * 3; i++)
				label_strs[i] = NULL;
			labels_cap = nl;
		}
		for (uint64_t i = 0; i < nl; i++) {
			free(label_strs[3 * i]);
			free(label_strs[3 * i + 1]);
			free(label_strs[3 * i + 2]);
			label_strs[3 * i] = get_dup(&r);
			label_strs[3 * i + 1] = get_dup(&r);
			label_strs[3 * i + 2] = NULL;
			labels[i] = (struct pp_label){
			    label_strs[3 * i], label_strs[3 * i + 1], 0, NULL};
			if (!labels[i].str) {
				labels[i].num = get_s(&r);
				label_strs[3 * i + 2] = get_dup(&r);
				labels[i].unit = label_strs[3 * i + 2];
			}
			if (!labels[i].key)
				r.bad = 1;
		}
		for (size_t i = 0; i < ntypes; i++)
			values[i] = get_s(&r);
		if (!r.bad && pp_profile_add(p, pcs, (size_t)depth, values,
		                             labels, (size_t)nl) != 0) {
			rc = -ENOMEM;
			goto out;
		}
	}
	rc = r.bad ? -EINVAL : 0;
out:
	for (size_t i = 0; i < labels_cap * 3; i++)
		free(label_strs[i]);
	free(label_strs);
	free(labels);
	free(pcs);
	free(values);
	free(r.pool);
	for (size_t i = 0; i < nowned; i++)
		free(owned[i]);
	if (rc) {
		pp_profile_free(p);
		p = NULL;
	}
	*out = p;
	return rc;
}

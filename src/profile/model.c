/* The profile model and its aggregation table.
 * Context: agent.
 */
#include "model.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/hash.h"

static const char *intern(struct pp_profile *p, const char *s)
{
	if (!s)
		return NULL;
	int64_t i = pp_strtab_add(&p->strings, s);
	return i < 0 ? NULL : pp_strtab_get(&p->strings, (size_t)i);
}

struct pp_profile *pp_profile_new(const struct pp_value_type *types,
                                  size_t ntypes,
                                  const struct pp_value_type *period_type,
                                  int64_t period)
{
	struct pp_profile *p = calloc(1, sizeof *p);

	if (!p)
		return NULL;
	p->default_type = -1;
	if (pp_strtab_init(&p->strings))
		goto fail;
	p->types = pp_arena_alloc(&p->arena, sizeof *p->types * (ntypes + 1));
	if (!p->types)
		goto fail;
	for (size_t i = 0; i < ntypes; i++) {
		p->types[i].type = intern(p, types[i].type);
		p->types[i].unit = intern(p, types[i].unit);
		if (!p->types[i].type || !p->types[i].unit)
			goto fail;
	}
	p->ntypes = ntypes;
	if (period_type) {
		p->period_type.type = intern(p, period_type->type);
		p->period_type.unit = intern(p, period_type->unit);
	}
	p->period = period;
	return p;
fail:
	pp_profile_free(p);
	return NULL;
}

void pp_profile_free(struct pp_profile *p)
{
	if (!p)
		return;
	pp_arena_free(&p->arena);
	pp_strtab_free(&p->strings);
	free(p->comments);
	free(p->synthetic);
	free(p->table);
	free(p->events);
	pp_profile_free(p->wall);
	pp_profile_free(p->heap);
	free(p);
}

int pp_profile_set_default_type(struct pp_profile *p, const char *type)
{
	for (size_t i = 0; i < p->ntypes; i++) {
		if (strcmp(p->types[i].type, type) == 0) {
			p->default_type = (int)i;
			return 0;
		}
	}
	return -EINVAL;
}

void pp_profile_set_time(struct pp_profile *p, int64_t time_nanos,
                         int64_t duration_nanos)
{
	p->time_nanos = time_nanos;
	p->duration_nanos = duration_nanos;
}

int pp_profile_add_comment(struct pp_profile *p, const char *text)
{
	if (p->ncomments == p->comments_cap) {
		size_t cap = p->comments_cap ? p->comments_cap * 2 : 4;
		const char **c = realloc(p->comments, cap * sizeof *c);
		if (!c)
			return -ENOMEM;
		p->comments = c;
		p->comments_cap = cap;
	}
	const char *s = intern(p, text);
	if (!s)
		return -ENOMEM;
	p->comments[p->ncomments++] = s;
	return 0;
}

uintptr_t pp_profile_synthetic_pc(struct pp_profile *p, const char *name)
{
	const char *s = intern(p, name);
	if (!s)
		return 0;
	for (size_t i = 0; i < p->nsynthetic; i++)
		if (p->synthetic[i] == s)
			return i + 1;
	if (p->nsynthetic == PP_SYNTHETIC_MAX)
		return 0;
	if (p->nsynthetic == p->synthetic_cap) {
		size_t cap = p->synthetic_cap ? p->synthetic_cap * 2 : 8;
		const char **v = realloc(p->synthetic, cap * sizeof *v);
		if (!v)
			return 0;
		p->synthetic = v;
		p->synthetic_cap = cap;
	}
	p->synthetic[p->nsynthetic++] = s;
	return p->nsynthetic;
}

const char *pp_profile_synthetic_name(const struct pp_profile *p, uintptr_t pc)
{
	return pc >= 1 && pc <= p->nsynthetic ? p->synthetic[pc - 1] : NULL;
}

/* Labels are compared and hashed by their interned pointers. */
static uint64_t hash_sample(const uintptr_t *pcs, size_t depth,
                            const struct pp_label *labels, size_t nlabels)
{
	uint64_t h = pp_hash_bytes(pcs, depth * sizeof *pcs);
	for (size_t i = 0; i < nlabels; i++) {
		h = pp_hash_mix(h, (uintptr_t)labels[i].key);
		h = pp_hash_mix(h, (uintptr_t)labels[i].str);
		h = pp_hash_mix(h, (uint64_t)labels[i].num);
		h = pp_hash_mix(h, (uintptr_t)labels[i].unit);
	}
	return pp_hash_mix(h, nlabels);
}

static int same(const struct pp_sample *s, uint64_t hash, const uintptr_t *pcs,
                size_t depth, const struct pp_label *labels, size_t nlabels)
{
	if (s->hash != hash || s->depth != depth || s->nlabels != nlabels)
		return 0;
	/* depth 0: pcs may be NULL, which memcmp may not be given. */
	if (depth && memcmp(s->pcs, pcs, depth * sizeof *pcs) != 0)
		return 0;
	for (size_t i = 0; i < nlabels; i++) {
		const struct pp_label *a = &s->labels[i], *b = &labels[i];
		if (a->key != b->key || a->str != b->str || a->num != b->num ||
		    a->unit != b->unit)
			return 0;
	}
	return 1;
}

static size_t find_slot(struct pp_sample **table, size_t cap, uint64_t hash,
                        const uintptr_t *pcs, size_t depth,
                        const struct pp_label *labels, size_t nlabels)
{
	size_t mask = cap - 1, i = (size_t)hash & mask;
	while (table[i] && !same(table[i], hash, pcs, depth, labels, nlabels))
		i = (i + 1) & mask;
	return i;
}

static int grow(struct pp_profile *p)
{
	size_t cap = p->table_cap ? p->table_cap * 2 : 1024;
	struct pp_sample **t = calloc(cap, sizeof *t);

	if (!t)
		return -ENOMEM;
	for (struct pp_sample *s = p->first; s; s = s->next) {
		size_t i = (size_t)s->hash & (cap - 1);
		while (t[i])
			i = (i + 1) & (cap - 1);
		t[i] = s;
	}
	free(p->table);
	p->table = t;
	p->table_cap = cap;
	return 0;
}

void pp_profile_remap(struct pp_profile *p, uintptr_t (*fn)(uintptr_t, void *),
                      void *arg)
{
	int changed = 0;
	for (struct pp_sample *s = p->first; s; s = s->next) {
		int mine = 0;
		for (uint32_t i = 0; i < s->depth; i++) {
			uintptr_t pc = s->pcs[i];
			if (pc <= PP_SYNTHETIC_MAX)
				continue;
			uintptr_t to = fn(pc, arg);
			mine |= to != pc;
			s->pcs[i] = to;
		}
		if (mine)
			s->hash = hash_sample(s->pcs, s->depth, s->labels,
			                      s->nlabels);
		changed |= mine;
	}
	if (!changed || !p->table_cap)
		return;
	size_t cap = p->table_cap;
	memset(p->table, 0, cap * sizeof *p->table);
	for (struct pp_sample *s = p->first; s; s = s->next) {
		size_t i = (size_t)s->hash & (cap - 1);
		while (p->table[i])
			i = (i + 1) & (cap - 1);
		p->table[i] = s;
	}
}

size_t pp_profile_bytes(const struct pp_profile *p)
{
	return p->arena.reserved + p->strings.arena.reserved +
	       p->table_cap * sizeof *p->table +
	       p->strings.cap * (sizeof(char *) + sizeof(uint32_t) * 2);
}

/* Past the memory bound no new stack is kept: its values go to one
 * synthetic frame, so the totals stay right and the reader sees why. */
static int add(struct pp_profile *p, const uintptr_t *pcs, size_t depth,
               const int64_t *values, const struct pp_label *labels,
               size_t nlabels, struct pp_sample **out);

static int add_over_limit(struct pp_profile *p, const int64_t *values,
                          struct pp_sample **out)
{
	uintptr_t pc = pp_profile_synthetic_pc(p, PP_PROFILE_LIMIT_FRAME);
	if (!pc)
		return -ENOMEM;
	p->over_limit++;
	p->adding_limit_frame = 1;
	int rc = add(p, &pc, 1, values, NULL, 0, out);
	p->adding_limit_frame = 0;
	return rc;
}

int pp_profile_add(struct pp_profile *p, const uintptr_t *pcs, size_t depth,
                   const int64_t *values, const struct pp_label *labels,
                   size_t nlabels)
{
	struct pp_sample *s;
	return add(p, pcs, depth, values, labels, nlabels, &s);
}

int pp_profile_add_at(struct pp_profile *p, const uintptr_t *pcs, size_t depth,
                      const int64_t *values, const struct pp_label *labels,
                      size_t nlabels, uint64_t time_ns, uint32_t tid)
{
	struct pp_sample *s;
	int rc = add(p, pcs, depth, values, labels, nlabels, &s);
	if (rc || !p->max_events)
		return rc;
	if (p->nevents == p->events_cap) {
		size_t cap = p->events_cap ? p->events_cap * 2 : 1024;
		if (cap > p->max_events)
			cap = p->max_events;
		struct pp_event *e = cap > p->events_cap
		                         ? realloc(p->events, cap * sizeof *e)
		                         : NULL;
		if (!e) {
			/* Full (or no memory): the totals keep it. */
			p->events_over++;
			return 0;
		}
		p->events = e;
		p->events_cap = cap;
	}
	p->events[p->nevents++] =
	    (struct pp_event){time_ns, s, tid, (uint32_t)values[0],
	                      p->ntypes > 1 ? values[1] : 0};
	return 0;
}

static int add(struct pp_profile *p, const uintptr_t *pcs, size_t depth,
               const int64_t *values, const struct pp_label *labels,
               size_t nlabels, struct pp_sample **out)
{
	struct pp_label ilabels[16];

	if (nlabels > sizeof ilabels / sizeof ilabels[0])
		return -E2BIG;
	/* Intern the label strings first: equal labels then have equal
	 * pointers, which is what hashing and comparing use. */
	for (size_t i = 0; i < nlabels; i++) {
		ilabels[i].key = intern(p, labels[i].key);
		ilabels[i].str = intern(p, labels[i].str);
		ilabels[i].unit = intern(p, labels[i].unit);
		ilabels[i].num = labels[i].str ? 0 : labels[i].num;
		if (!ilabels[i].key || (labels[i].str && !ilabels[i].str) ||
		    (labels[i].unit && !ilabels[i].unit))
			return -ENOMEM;
	}
	if ((p->nsamples + 1) * 2 > p->table_cap && grow(p))
		return -ENOMEM;

	uint64_t h = hash_sample(pcs, depth, ilabels, nlabels);
	size_t i =
	    find_slot(p->table, p->table_cap, h, pcs, depth, ilabels, nlabels);
	struct pp_sample *s = p->table[i];
	if (!s && p->max_bytes && !p->adding_limit_frame &&
	    pp_profile_bytes(p) >= p->max_bytes)
		return add_over_limit(p, values, out);
	if (!s) {
		s = pp_arena_alloc(&p->arena,
		                   sizeof *s + p->ntypes * sizeof(int64_t));
		if (!s)
			return -ENOMEM;
		memset(s, 0, sizeof *s + p->ntypes * sizeof(int64_t));
		s->hash = h;
		s->depth = (uint32_t)depth;
		s->nlabels = (uint32_t)nlabels;
		s->pcs = pp_arena_memdup(&p->arena, pcs, depth * sizeof *pcs);
		s->labels = pp_arena_memdup(&p->arena, ilabels,
		                            nlabels * sizeof *ilabels);
		if ((depth && !s->pcs) || (nlabels && !s->labels))
			return -ENOMEM;
		if (p->last)
			p->last->next = s;
		else
			p->first = s;
		p->last = s;
		p->table[i] = s;
		s->index = (uint32_t)p->nsamples++;
	}
	for (size_t k = 0; k < p->ntypes; k++)
		s->values[k] += values[k];
	*out = s;
	return 0;
}

/* Add s of profile `from` to `to`, its values times sign: synthetic frames
 * are numbered per profile, so they are renamed. */
static int copy_sample(struct pp_profile *to, const struct pp_profile *from,
                       const struct pp_sample *s, int sign)
{
	uintptr_t local[64] = {0}, *pcs = s->depth <= 64 ? local : NULL;
	int64_t vlocal[8], *v = to->ntypes <= 8 ? vlocal : NULL;
	if (!pcs && !(pcs = malloc(s->depth * sizeof *pcs)))
		return -ENOMEM;
	if (!v && !(v = malloc(to->ntypes * sizeof *v))) {
		if (pcs != local)
			free(pcs);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < s->depth; i++) {
		const char *name = pp_profile_synthetic_name(from, s->pcs[i]);
		pcs[i] = name ? pp_profile_synthetic_pc(to, name) : s->pcs[i];
	}
	for (size_t i = 0; i < to->ntypes; i++)
		v[i] = sign * s->values[i];
	int rc = pp_profile_add(to, pcs, s->depth, v, s->labels, s->nlabels);
	if (pcs != local)
		free(pcs);
	if (v != vlocal)
		free(v);
	return rc;
}

static int all_zero(const struct pp_profile *p, const struct pp_sample *s)
{
	for (size_t i = 0; i < p->ntypes; i++)
		if (s->values[i])
			return 0;
	return 1;
}

int pp_profile_delta(const struct pp_profile *end,
                     const struct pp_profile *start, struct pp_profile **out)
{
	if (end->ntypes != start->ntypes)
		return -EINVAL;
	struct pp_profile *d = pp_profile_new(end->types, end->ntypes,
	                                      &end->period_type, end->period);
	struct pp_profile *sum = pp_profile_new(end->types, end->ntypes,
	                                        &end->period_type, end->period);
	int rc = d && sum ? 0 : -ENOMEM;
	for (const struct pp_sample *s = end->first; s && !rc; s = s->next)
		rc = copy_sample(sum, end, s, 1);
	for (const struct pp_sample *s = start->first; s && !rc; s = s->next)
		rc = copy_sample(sum, start, s, -1);
	if (!rc) {
		d->default_type = end->default_type;
		d->leaf_is_return = end->leaf_is_return;
		d->max_bytes = end->max_bytes;
		d->legacy_title = end->legacy_title;
	}
	for (const struct pp_sample *s = sum ? sum->first : NULL; s && !rc;
	     s = s->next)
		if (!all_zero(sum, s))
			rc = copy_sample(d, sum, s, 1);
	pp_profile_free(sum);
	if (rc) {
		pp_profile_free(d);
		return rc;
	}
	*out = d;
	return 0;
}

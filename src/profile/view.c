/* The symbolized view of a profile model.
 * Context: agent.
 */
#include "view.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/hash.h"
#include "util/u64map.h"

struct build {
	struct pp_view *v;
	struct pp_u64map loc_ids; /* (pc << 1 | is_return) -> index + 1 */
	struct pp_u64map
	    func_ids;        /* hash of the frame -> index + 1 of a chain */
	uint32_t *func_next; /* by index: index + 1 of the next, same hash */
	size_t locs_cap, funcs_cap, func_of_len, func_of_cap;
};

static int grow(void *pp, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return 0;
	size_t n = *cap ? *cap : 256;
	while (n < need)
		n *= 2;
	void *q = realloc(*(void **)pp, n * size);
	if (!q)
		return -ENOMEM;
	*(void **)pp = q;
	*cap = n;
	return 0;
}

static int64_t loc_index(struct build *b, uintptr_t pc, int is_return)
{
	struct pp_view *v = b->v;
	int inserted;
	uint64_t *id = pp_u64map_put(
	    &b->loc_ids, (uint64_t)pc << 1 | (uint64_t)is_return, &inserted);
	if (!id)
		return -ENOMEM;
	if (inserted) {
		if (grow(&v->locs, &b->locs_cap, v->nlocs + 1, sizeof *v->locs))
			return -ENOMEM;
		memset(&v->locs[v->nlocs], 0, sizeof v->locs[0]);
		v->locs[v->nlocs].pc = pc;
		v->locs[v->nlocs].is_return = is_return;
		*id = ++v->nlocs;
	}
	return (int64_t)*id - 1;
}

/* Functions are the same when (name, system name, file, start line) are:
 * the symbolizer interns its strings, so pointers compare. */
static int64_t func_index(struct build *b, const struct pp_frame *f)
{
	struct pp_view *v = b->v;
	uint64_t h = pp_hash_mix(
	    pp_hash_mix((uintptr_t)f->name, (uintptr_t)f->system_name),
	    pp_hash_mix((uintptr_t)f->file, (uint64_t)f->start_line));
	int inserted;
	uint64_t *head = pp_u64map_put(&b->func_ids, h, &inserted);
	if (!head)
		return -ENOMEM;
	for (uint64_t id = inserted ? 0 : *head; id;
	     id = b->func_next[id - 1]) {
		const struct pp_frame *g = v->funcs[id - 1];
		if (g->name == f->name && g->system_name == f->system_name &&
		    g->file == f->file && g->start_line == f->start_line)
			return (int64_t)id - 1;
	}
	size_t cap = b->funcs_cap;
	if (grow(&v->funcs, &cap, v->nfuncs + 1, sizeof *v->funcs) ||
	    grow(&b->func_next, &b->funcs_cap, v->nfuncs + 1,
	         sizeof *b->func_next))
		return -ENOMEM;
	v->funcs[v->nfuncs] = f;
	b->func_next[v->nfuncs] = inserted ? 0 : (uint32_t)*head;
	*head = ++v->nfuncs;
	return (int64_t)v->nfuncs - 1;
}

static int stacks(struct build *b)
{
	struct pp_view *v = b->v;
	const struct pp_profile *p = v->p;
	size_t total = 0, i = 0;

	for (const struct pp_sample *s = p->first; s; s = s->next)
		total += s->depth;
	v->stacks = malloc((total + 1) * sizeof *v->stacks);
	v->stack_at = malloc((p->nsamples + 1) * sizeof *v->stack_at);
	v->samples = malloc((p->nsamples + 1) * sizeof *v->samples);
	if (!v->stacks || !v->stack_at || !v->samples)
		return -ENOMEM;
	total = 0;
	for (const struct pp_sample *s = p->first; s; s = s->next, i++) {
		v->samples[i] = s;
		v->stack_at[i] = total;
		for (uint32_t k = 0; k < s->depth; k++) {
			int64_t l =
			    loc_index(b, s->pcs[k], k > 0 || p->leaf_is_return);
			if (l < 0)
				return -ENOMEM;
			v->stacks[total++] = (uint32_t)l;
		}
	}
	v->nsamples = i;
	v->stack_at[i] = total;
	return 0;
}

static int symbolize(struct build *b, struct pp_symtab *st)
{
	struct pp_view *v = b->v;

	for (size_t i = 0; i < v->nlocs; i++) {
		struct pp_view_loc *l = &v->locs[i];
		struct pp_symbol sym = {0};

		l->synthetic = pp_profile_synthetic_name(v->p, l->pc);
		if (l->synthetic) {
			/* No mapping, no address: a function by that name. */
			sym.frames = &v->synthetic[l->pc - 1];
			sym.nframes = 1;
			v->synthetic_used = 1;
		} else {
			l->mapping =
			    v->maps ? pp_mappings_find(v->maps, l->pc) : NULL;
			if (st &&
			    pp_symtab_lookup(
			        st, l->pc - (uintptr_t)l->is_return, &sym))
				return -ENOMEM;
			if (l->mapping) {
				size_t mi = (size_t)(l->mapping - v->maps->v);
				v->mapping_flags[mi] &= sym.flags;
				v->mapping_used[mi] = 1;
			} else {
				v->unmapped_used = 1;
			}
		}
		l->frames = sym.frames;
		l->nframes = sym.nframes;
		l->first_func = (uint32_t)b->func_of_len;
		if (grow(&v->func_of, &b->func_of_cap,
		         b->func_of_len + sym.nframes, sizeof *v->func_of))
			return -ENOMEM;
		for (uint32_t k = 0; k < sym.nframes; k++) {
			int64_t f = func_index(b, &sym.frames[k]);
			if (f < 0)
				return -ENOMEM;
			v->func_of[b->func_of_len++] = (uint32_t)f;
		}
	}
	return 0;
}

/* The process's mappings keep their IDs; an image unloaded since is shown
 * only when a location is in it (they may be many: a server that reloads
 * its modules every hour). */
static int number_mappings(struct pp_view *v)
{
	size_t n = v->maps ? v->maps->n : 0;
	v->map_id = calloc(n + 1, sizeof *v->map_id);
	if (!v->map_id)
		return -ENOMEM;
	unsigned next = 0;
	for (size_t i = 0; i < n; i++)
		if (!v->maps->v[i].unloaded)
			next++;
	for (size_t i = 0; i < n; i++) {
		const struct pp_mapping *mp = &v->maps->v[i];
		if (!mp->unloaded)
			v->map_id[i] = mp->id;
		else if (v->mapping_used[i])
			v->map_id[i] = ++next;
	}
	v->nshown = next;
	return 0;
}

long pp_view_mapping_by_id(const struct pp_view *v, size_t id)
{
	for (size_t i = 0; v->maps && v->map_id && i < v->maps->n; i++)
		if (v->map_id[i] == id)
			return (long)i;
	return -1;
}

int pp_view_build(struct pp_view *v, const struct pp_profile *p,
                  struct pp_symtab *st)
{
	struct build b;
	int rc;

	memset(v, 0, sizeof *v);
	memset(&b, 0, sizeof b);
	b.v = v;
	v->p = p;
	v->default_type = p->default_type;
	v->maps = st ? pp_symtab_mappings(st) : NULL;
	size_t nmaps = v->maps ? v->maps->n : 0;
	v->mapping_flags = malloc((nmaps + 1) * sizeof *v->mapping_flags);
	v->mapping_used = calloc(nmaps + 1, 1);
	v->synthetic = calloc(p->nsynthetic + 1, sizeof *v->synthetic);
	rc = v->mapping_flags && v->mapping_used && v->synthetic ? 0 : -ENOMEM;
	if (!rc) {
		for (size_t i = 0; i < nmaps; i++)
			v->mapping_flags[i] = ~0u;
		for (size_t i = 0; i < p->nsynthetic; i++)
			v->synthetic[i] = (struct pp_frame){
			    p->synthetic[i], p->synthetic[i], "", 0, 0};
		rc = stacks(&b);
	}
	if (!rc)
		rc = symbolize(&b, st);
	if (!rc)
		rc = number_mappings(v);
	pp_u64map_free(&b.loc_ids);
	pp_u64map_free(&b.func_ids);
	free(b.func_next);
	if (rc)
		pp_view_free(v);
	return rc;
}

void pp_view_free(struct pp_view *v)
{
	free(v->locs);
	free(v->func_of);
	free(v->funcs);
	free(v->stacks);
	free(v->stack_at);
	free(v->samples);
	free(v->mapping_flags);
	free(v->mapping_used);
	free(v->map_id);
	free(v->synthetic);
	memset(v, 0, sizeof *v);
}

size_t pp_view_sample_index(const struct pp_view *v, int want)
{
	size_t n = v->p->ntypes;
	if (want >= 0 && (size_t)want < n)
		return (size_t)want;
	if (v->default_type >= 0 && (size_t)v->default_type < n)
		return (size_t)v->default_type;
	return n ? n - 1 : 0;
}

/* Samples (their first value) with a location in mapping i. */
static int64_t samples_in(const struct pp_view *v, size_t i)
{
	int64_t n = 0;
	const struct pp_mapping *mp = &v->maps->v[i];
	for (size_t s = 0; s < v->nsamples; s++) {
		for (size_t k = v->stack_at[s]; k < v->stack_at[s + 1]; k++) {
			if (v->locs[v->stacks[k]].mapping == mp) {
				n +=
				    v->p->ntypes ? v->samples[s]->values[0] : 1;
				break;
			}
		}
	}
	return n;
}

int pp_view_mapping_note(const struct pp_view *v, size_t i, char *buf,
                         size_t len)
{
	if (!v->maps || i >= v->maps->n || !v->mapping_used ||
	    !v->mapping_used[i])
		return 0;
	const struct pp_mapping *mp = &v->maps->v[i];
	if (mp->unloaded) {
		/* One note per image: at its first segment used. */
		for (size_t k = 0; k < i; k++)
			if (v->mapping_used[k] && v->maps->v[k].unloaded &&
			    v->maps->v[k].ghost_bias == mp->ghost_bias)
				return 0;
		int64_t n = 0;
		for (size_t k = i; k < v->maps->n; k++)
			if (v->mapping_used[k] &&
			    v->maps->v[k].ghost_bias == mp->ghost_bias)
				n += samples_in(v, k);
		int at = snprintf(
		    buf, len,
		    "pullprof: %lld sample(s) (%s) were taken in code "
		    "unloaded since: %s (build ID %s), dlclosed after they "
		    "were taken; they are named from that image, shown at "
		    "addresses of its own from %#llx, not where it was "
		    "loaded (another image may be there now)",
		    (long long)n, v->p->ntypes ? v->p->types[0].type : "count",
		    mp->path, mp->build_id[0] ? mp->build_id : "unknown",
		    (unsigned long long)mp->ghost_bias);
		if (mp->file_changed && at > 0 && (size_t)at < len)
			snprintf(buf + at, len - (size_t)at,
			         "; %s: its addresses are left unsymbolized",
			         mp->file_changed);
		return 1;
	}
	if (!mp->file_changed)
		return 0;
	snprintf(buf, len,
	         "pullprof: %s: %s; its addresses are left unsymbolized "
	         "(build ID as loaded: %s)",
	         mp->path, mp->file_changed,
	         mp->build_id[0] ? mp->build_id : "unknown");
	return 1;
}

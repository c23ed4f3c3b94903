/*
 * What each sequence of a Perfetto trace has interned (perfetto.c says
 * the rules): event names, function names, source paths, mapping path
 * components, build IDs, mappings, frames, callstacks, each written in
 * the packet that first uses it; the same encoders write a ProfilePacket's
 * own tables (perfetto_heap.c).
 * Context: agent.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "perfetto_internal.h"

static const struct tags INTERNED_TAGS = {
    ID_FUNCTION_NAMES, ID_MAPPING_PATHS, ID_BUILD_IDS, ID_SOURCE_PATHS,
    ID_MAPPINGS,       ID_FRAMES,        ID_CALLSTACKS};

int pp_perfetto_interning_init(struct interning *in, const struct pp_view *v)
{
	size_t nframes = 0;
	memset(in, 0, sizeof *in);
	in->v = v;
	in->tags = &INTERNED_TAGS;
	in->frame_base = malloc((v->nlocs + 1) * sizeof *in->frame_base);
	if (!in->frame_base)
		return -ENOMEM;
	for (size_t i = 0; i < v->nlocs; i++) {
		in->frame_base[i] = (uint32_t)nframes;
		nframes += v->locs[i].nframes ? v->locs[i].nframes : 1;
	}
	in->func_done = calloc(v->nfuncs + 1, 1);
	in->leaf_done = calloc(v->nfuncs + 2, 1);
	in->frame_done = calloc(nframes + 1, 1);
	in->stack_done = calloc(v->nsamples + 1, 1);
	in->map_done = calloc((v->maps ? v->maps->n : 0) + 1, 1);
	if (!in->func_done || !in->frame_done || !in->stack_done ||
	    !in->map_done || !in->leaf_done || pp_strtab_init(&in->sources) ||
	    pp_strtab_init(&in->components) || pp_strtab_init(&in->names))
		return -ENOMEM;
	/* It also holds build IDs as raw bytes: keep them exact (its text,
	 * names and path components, is valid already). */
	in->components.bytes = 1;
	return 0;
}

void pp_perfetto_interning_free(struct interning *in)
{
	free(in->frame_base);
	free(in->func_done);
	free(in->leaf_done);
	free(in->frame_done);
	free(in->stack_done);
	free(in->map_done);
	free(in->source_done);
	free(in->component_done);
	free(in->name_done);
	pp_strtab_free(&in->sources);
	pp_strtab_free(&in->components);
	pp_strtab_free(&in->names);
}

/* The iid of s in t (strings are interned from 1: index 0 is ""), and
 * whether it is new (*fresh). 0 for "" or on error. */
static uint64_t intern_str(struct writer *w, struct pp_strtab *t,
                           unsigned char **done, size_t *cap, const char *s,
                           size_t len, int *fresh)
{
	*fresh = 0;
	if (!s || !len)
		return 0;
	int64_t i = pp_strtab_intern(t, s, len);
	if (i <= 0) {
		if (i < 0)
			pp_perfetto_fail(w, (int)i);
		return 0;
	}
	if ((size_t)i >= *cap) {
		size_t ncap = *cap ? *cap * 2 : 256;
		while (ncap <= (size_t)i)
			ncap *= 2;
		unsigned char *d = realloc(*done, ncap);
		if (!d) {
			pp_perfetto_fail(w, -ENOMEM);
			return 0;
		}
		memset(d + *cap, 0, ncap - *cap);
		*done = d;
		*cap = ncap;
	}
	if (!(*done)[i]) {
		(*done)[i] = 1;
		*fresh = 1;
	}
	return (uint64_t)i;
}

static void interned_string(struct writer *w, int tag, uint64_t iid,
                            const void *s, size_t len)
{
	size_t m = pp_pb_start(&w->pb);
	pp_pb_uint64(&w->pb, IS_IID, iid);
	pp_pb_bytes(&w->pb, IS_STR, s, len);
	pp_pb_end(&w->pb, tag, m);
}

/* An event name's iid, written into the open InternedData when new. */
uint64_t pp_perfetto_event_name(struct writer *w, struct interning *in,
                                const char *name)
{
	int fresh;
	uint64_t iid = intern_str(w, &in->names, &in->name_done, &in->name_cap,
	                          name, name ? strlen(name) : 0, &fresh);
	if (fresh) {
		size_t m = pp_pb_start(&w->pb);
		pp_pb_uint64(&w->pb, EN_IID, iid);
		pp_perfetto_str(&w->pb, EN_NAME, name);
		pp_pb_end(&w->pb, ID_EVENT_NAMES, m);
	}
	return iid;
}

static int hexdigit(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	                              : -1;
}

/* Mapping index mi (its path split in components, its build ID as bytes,
 * as Perfetto's own producers write them), written when new. */
static void mapping(struct writer *w, struct interning *in, size_t mi)
{
	const struct pp_mapping *mp = &in->v->maps->v[mi];
	uint64_t comps[64];
	size_t ncomps = 0;
	int fresh;
	if (in->map_done[mi])
		return;
	in->map_done[mi] = 1;
	for (const char *c = mp->name; *c && ncomps < 64;) {
		while (*c == '/')
			c++;
		size_t len = strcspn(c, "/");
		if (!len)
			break;
		comps[ncomps] =
		    intern_str(w, &in->components, &in->component_done,
		               &in->component_cap, c, len, &fresh);
		if (fresh)
			interned_string(w, in->tags->mapping_paths,
			                comps[ncomps], c, len);
		ncomps++;
		c += len;
	}
	size_t idlen = strlen(mp->build_id) / 2;
	uint64_t id_iid = 0;
	if (idlen && idlen <= 64) {
		unsigned char id[64];
		for (size_t i = 0; i < idlen; i++)
			id[i] =
			    (unsigned char)(hexdigit(mp->build_id[2 * i]) << 4 |
			                    hexdigit(mp->build_id[2 * i + 1]));
		if (in->shared_strings) {
			id_iid = intern_str(
			    w, &in->components, &in->component_done,
			    &in->component_cap, (char *)id, idlen, &fresh);
			if (fresh)
				interned_string(w, in->tags->build_ids, id_iid,
				                id, idlen);
		} else {
			id_iid = mp->id;
			interned_string(w, in->tags->build_ids, id_iid, id,
			                idlen);
		}
	}
	size_t m = pp_pb_start(&w->pb);
	pp_pb_uint64(&w->pb, MAP_IID, mp->id);
	pp_pb_uint64_opt(&w->pb, MAP_BUILD_ID, id_iid);
	pp_pb_uint64(&w->pb, MAP_START_OFFSET, 0);
	pp_pb_uint64(&w->pb, MAP_START, mp->start);
	pp_pb_uint64(&w->pb, MAP_END, mp->limit);
	pp_pb_uint64s(&w->pb, MAP_PATHS, comps, ncomps);
	pp_pb_uint64(&w->pb, MAP_EXACT_OFFSET, mp->offset);
	pp_pb_end(&w->pb, in->tags->mappings, m);
}

/* Location li's frames (one per function, inlined ones too), written when
 * new, with what they refer to. */
static void location(struct writer *w, struct interning *in, uint32_t li)
{
	const struct pp_view *v = in->v;
	const struct pp_view_loc *l = &v->locs[li];
	uint32_t n = l->nframes ? l->nframes : 1;
	uint32_t base = in->frame_base[li];
	if (in->frame_done[base])
		return;
	size_t mi = (size_t)-1;
	if (l->mapping && v->maps) {
		mi = (size_t)(l->mapping - v->maps->v);
		mapping(w, in, mi);
	}
	for (uint32_t k = 0; k < n; k++) {
		const struct pp_frame *f = l->nframes ? &l->frames[k] : NULL;
		uint64_t fn = 0, src = 0;
		int fresh;
		if (f && in->shared_strings) {
			fn = intern_str(w, &in->components, &in->component_done,
			                &in->component_cap, f->name,
			                strlen(f->name), &fresh);
			if (fresh)
				interned_string(w, in->tags->function_names, fn,
				                f->name, strlen(f->name));
		} else if (f) {
			uint32_t fi = v->func_of[l->first_func + k];
			fn = (uint64_t)fi + 1;
			if (!in->func_done[fi]) {
				in->func_done[fi] = 1;
				interned_string(w, in->tags->function_names, fn,
				                f->name, strlen(f->name));
			}
		}
		if (f && in->tags->source_paths) {
			src = intern_str(w, &in->sources, &in->source_done,
			                 &in->source_cap, f->file,
			                 strlen(f->file), &fresh);
			if (fresh)
				interned_string(w, in->tags->source_paths, src,
				                f->file, strlen(f->file));
		}
		size_t m = pp_pb_start(&w->pb);
		pp_pb_uint64(&w->pb, FR_IID, (uint64_t)base + k + 1);
		pp_pb_uint64_opt(&w->pb, FR_FUNCTION, fn);
		if (mi != (size_t)-1) {
			pp_pb_uint64(&w->pb, FR_MAPPING, l->mapping->id);
			pp_pb_uint64(&w->pb, FR_REL_PC,
			             l->pc - l->mapping->start +
			                 l->mapping->offset);
		}
		pp_pb_uint64_opt(&w->pb, FR_SOURCE, src);
		if (f && f->line > 0 && in->tags->source_paths)
			pp_pb_uint64(&w->pb, FR_LINE, (uint64_t)f->line);
		pp_pb_end(&w->pb, in->tags->frames, m);
	}
	in->frame_done[base] = 1;
}

/* Sample si's callstack (its iid is si + 1), written when new. */
uint64_t pp_perfetto_callstack(struct writer *w, struct interning *in,
                               size_t si, uint64_t **frames, size_t *cap)
{
	const struct pp_view *v = in->v;
	const uint32_t *stack = v->stacks + v->stack_at[si];
	size_t depth = v->stack_at[si + 1] - v->stack_at[si];
	if (in->stack_done[si])
		return si + 1;
	size_t n = 0;
	for (size_t k = 0; k < depth; k++) {
		const struct pp_view_loc *l = &v->locs[stack[k]];
		location(w, in, stack[k]);
		n += l->nframes ? l->nframes : 1;
	}
	if (n > *cap) {
		uint64_t *f = realloc(*frames, n * sizeof *f);
		if (!f) {
			pp_perfetto_fail(w, -ENOMEM);
			return 0;
		}
		*frames = f;
		*cap = n;
	}
	/* Root first: the outermost location's outermost function first. */
	size_t at = 0;
	for (size_t k = depth; k-- > 0;) {
		const struct pp_view_loc *l = &v->locs[stack[k]];
		uint32_t nf = l->nframes ? l->nframes : 1;
		for (uint32_t j = nf; j-- > 0;)
			(*frames)[at++] =
			    (uint64_t)in->frame_base[stack[k]] + j + 1;
	}
	size_t m = pp_pb_start(&w->pb);
	pp_pb_uint64(&w->pb, CSK_IID, si + 1);
	pp_pb_uint64s(&w->pb, CSK_FRAMES, *frames, n);
	pp_pb_end(&w->pb, in->tags->callstacks, m);
	in->stack_done[si] = 1;
	return si + 1;
}

static const char *const debug_names[DBG_NAMES] = {NULL, "function", "cpu_ns",
                                                   "samples"};

void pp_perfetto_debug_names(struct writer *w, struct interning *in)
{
	if (in->debug_names)
		return;
	in->debug_names = 1;
	for (int i = 1; i < DBG_NAMES; i++) {
		size_t m = pp_pb_start(&w->pb);
		pp_pb_uint64(&w->pb, DAN_IID, (uint64_t)i);
		pp_perfetto_str(&w->pb, DAN_NAME, debug_names[i]);
		pp_pb_end(&w->pb, ID_DEBUG_NAMES, m);
	}
}

/* The iid of sample si's leaf function name (innermost frame of its
 * innermost location), written when new. */
uint64_t pp_perfetto_leaf_function(struct writer *w, struct interning *in,
                                   size_t si)
{
	const struct pp_view *v = in->v;
	size_t depth = v->stack_at[si + 1] - v->stack_at[si];
	const struct pp_view_loc *l =
	    depth ? &v->locs[v->stacks[v->stack_at[si]]] : NULL;
	uint64_t iid = v->nfuncs + 1; /* an address no symbol covers */
	const char *name = "[unknown]";
	if (l && l->nframes) {
		iid = (uint64_t)v->func_of[l->first_func] + 1;
		name = l->frames[0].name;
	}
	if (!in->leaf_done[iid]) {
		in->leaf_done[iid] = 1;
		interned_string(w, ID_DEBUG_STRINGS, iid, name, strlen(name));
	}
	return iid;
}

/*
 * A Perfetto trace's heap dump, in the shape heapprofd writes.
 * Context: agent.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "perfetto_internal.h"

static const struct tags PROFILE_PACKET_TAGS = {
    PP_STRINGS,  PP_STRINGS, PP_STRINGS,   0,
    PP_MAPPINGS, PP_FRAMES,  PP_CALLSTACKS};

static uint64_t pcs_hash(const struct pp_sample *s)
{
	uint64_t h = 1469598103934665603ull ^ s->depth;
	for (uint32_t i = 0; i < s->depth; i++) {
		h ^= (uint64_t)s->pcs[i];
		h *= 1099511628211ull;
		h ^= h >> 29;
	}
	return h;
}

static int type_index(const struct pp_profile *p, const char *type)
{
	for (size_t i = 0; i < p->ntypes; i++)
		if (strcmp(p->types[i].type, type) == 0)
			return (int)i;
	return -1;
}

struct stack_key {
	uint64_t hash;
	uint32_t sample; /* index in the view */
};

static int by_key(const void *a, const void *b)
{
	const struct stack_key *x = a, *y = b;
	if (x->hash != y->hash)
		return x->hash < y->hash ? -1 : 1;
	return x->sample < y->sample ? -1 : x->sample > y->sample;
}

static int same_pcs(const struct pp_sample *a, const struct pp_sample *b)
{
	return a->depth == b->depth &&
	       memcmp(a->pcs, b->pcs, a->depth * sizeof *a->pcs) == 0;
}

/* Keys of v's samples, sorted: samples with the same stack (other labels)
 * sit together. */
static struct stack_key *stack_keys(const struct pp_view *v)
{
	struct stack_key *k = malloc((v->nsamples + 1) * sizeof *k);
	if (!k)
		return NULL;
	for (size_t i = 0; i < v->nsamples; i++)
		k[i] = (struct stack_key){pcs_hash(v->samples[i]), (uint32_t)i};
	qsort(k, v->nsamples, sizeof *k, by_key);
	return k;
}

/* A ProfilePacket in the shape heapprofd writes: its own strings,
 * mappings, frames and callstacks, then one process dump with a sample per
 * stack: allocated and freed bytes and counts now (self_freed is what was
 * allocated and is no longer in use), and self_max, what the stack held
 * when the process's in-use total was highest. Values are the unsampled
 * estimates pprof shows. */
int pp_perfetto_heap_dump(struct writer *w, const struct pp_view *v,
                          const struct pp_view *peak)
{
	const struct pp_profile *p = v->p;
	int ao = type_index(p, "alloc_objects"),
	    as = type_index(p, "alloc_space"),
	    io = type_index(p, "inuse_objects"),
	    is = type_index(p, "inuse_space");
	if (ao < 0 || as < 0 || io < 0 || is < 0)
		return -EINVAL;
	struct stack_key *keys = stack_keys(v);
	struct stack_key *pkeys = peak ? stack_keys(peak) : NULL;
	struct interning in;
	uint64_t *frames = NULL;
	size_t cap = 0;
	int rc = keys && (!peak || pkeys) ? pp_perfetto_interning_init(&in, v)
	                                  : -ENOMEM;
	if (rc) {
		free(keys);
		free(pkeys);
		return rc;
	}
	int pis = peak ? type_index(peak->p, "inuse_space") : -1;
	int pio = peak ? type_index(peak->p, "inuse_objects") : -1;
	uint64_t ts = pp_perfetto_clock_now(CLOCK_MONOTONIC);

	/* The packet's own interning: the same encoders write into
	 * ProfilePacket's fields (strings 1, frames 2, callstacks 3,
	 * mappings 4) in place of InternedData's. A ProfilePacket names every
	 * string (function names, path components, build IDs) in one
	 * table. */
	size_t m = pp_perfetto_packet(w, SEQ_HEAP, ts, SEQ_CLEARED);
	pp_pb_bool(&w->pb, TP_FIRST_ON_SEQUENCE, 1);
	size_t pkt = pp_pb_start(&w->pb);
	in.shared_strings = 1;
	in.tags = &PROFILE_PACKET_TAGS;
	for (size_t i = 0; i < v->nsamples && !w->err; i++) {
		if (i && same_pcs(v->samples[keys[i].sample],
		                  v->samples[keys[i - 1].sample]))
			continue;
		pp_perfetto_callstack(w, &in, keys[i].sample, &frames, &cap);
	}
	size_t dump = pp_pb_start(&w->pb);
	pp_pb_uint64(&w->pb, PHS_PID, (uint64_t)w->pid);
	pp_pb_uint64(&w->pb, PHS_TIMESTAMP, ts + w->mono_to_boot);
	pp_pb_uint64_opt(&w->pb, PHS_INTERVAL, (uint64_t)p->period);
	size_t pj = 0;
	for (size_t i = 0; i < v->nsamples && !w->err;) {
		const struct pp_sample *first = v->samples[keys[i].sample];
		int64_t sum[4] = {0, 0, 0, 0};
		size_t k = i;
		for (; k < v->nsamples &&
		       same_pcs(v->samples[keys[k].sample], first);
		     k++) {
			const struct pp_sample *s = v->samples[keys[k].sample];
			sum[0] += s->values[ao];
			sum[1] += s->values[as];
			sum[2] += s->values[io];
			sum[3] += s->values[is];
		}
		int64_t max_bytes = 0, max_count = 0;
		while (peak && pj < peak->nsamples &&
		       pkeys[pj].hash < keys[i].hash)
			pj++;
		for (size_t q = pj; peak && q < peak->nsamples &&
		                    pkeys[q].hash == keys[i].hash;
		     q++) {
			const struct pp_sample *s =
			    peak->samples[pkeys[q].sample];
			if (!same_pcs(s, first))
				continue;
			max_bytes += pis >= 0 ? s->values[pis] : 0;
			max_count += pio >= 0 ? s->values[pio] : 0;
		}
		size_t hs = pp_pb_start(&w->pb);
		pp_pb_uint64(&w->pb, HS_CALLSTACK,
		             (uint64_t)keys[i].sample + 1);
		pp_pb_uint64_opt(&w->pb, HS_ALLOCATED, (uint64_t)sum[1]);
		pp_pb_uint64_opt(&w->pb, HS_FREED, (uint64_t)(sum[1] - sum[3]));
		pp_pb_uint64_opt(&w->pb, HS_ALLOC_COUNT, (uint64_t)sum[0]);
		pp_pb_uint64_opt(&w->pb, HS_FREE_COUNT,
		                 (uint64_t)(sum[0] - sum[2]));
		if (peak) {
			pp_pb_uint64_opt(&w->pb, HS_MAX, (uint64_t)max_bytes);
			pp_pb_uint64_opt(&w->pb, HS_MAX_COUNT,
			                 (uint64_t)max_count);
		}
		pp_pb_end(&w->pb, PHS_SAMPLES, hs);
		i = k;
	}
	pp_pb_end(&w->pb, PP_DUMPS, dump);
	pp_pb_end(&w->pb, TP_PROFILE_PACKET, pkt);
	pp_perfetto_packet_end(w, m);
	free(frames);
	free(keys);
	free(pkeys);
	pp_perfetto_interning_free(&in);
	return w->err;
}

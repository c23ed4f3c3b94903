/*
 * The profile model: what every profile type produces and every renderer
 * reads. Samples are stacks of PCs (leaf first) with one value per sample
 * type and optional labels; samples with the same stack and labels are
 * aggregated (values summed) as they are added.
 * Context: agent.
 */
#ifndef PP_MODEL_H
#define PP_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "util/arena.h"
#include "util/strtab.h"

struct pp_value_type {
	const char *type; /* e.g. "cpu", "alloc_space" */
	const char *unit; /* e.g. "nanoseconds", "bytes", "count" */
};

/* A string label (str != NULL) or a numeric one (num, with an optional
 * unit such as "bytes"). */
struct pp_label {
	const char *key;
	const char *str;
	int64_t num;
	const char *unit;
};

struct pp_sample {
	struct pp_sample *next; /* in order of first appearance */
	uint64_t hash;
	uint32_t depth, nlabels;
	uint32_t index;          /* its place in that order, from 0 */
	uintptr_t *pcs;          /* leaf first; pcs[1..] are return addresses */
	struct pp_label *labels; /* strings interned in the profile */
	int64_t values[];        /* one per sample type */
};

/* One sample as it was taken, on a profile's timeline (CPU and wall
 * windows keep one for traces): when, on which thread, and the aggregated
 * sample (stack and labels) it went to, with its two values. */
struct pp_event {
	uint64_t time_ns; /* CLOCK_MONOTONIC */
	const struct pp_sample *sample;
	uint32_t tid;   /* 0: the process (lost samples) */
	uint32_t count; /* its first value (CPU: 1 + timer overruns) */
	int64_t value;  /* its second (nanoseconds of CPU or wall time) */
};

struct pp_profile {
	struct pp_arena arena;
	struct pp_strtab strings;
	struct pp_value_type *types;
	size_t ntypes;
	int default_type; /* index into types, or -1 */
	struct pp_value_type period_type;
	int64_t period;
	/* Every pc of a stack is a return address, the leaf's too (stacks
	 * taken at a call, like an allocation's): symbolize pc - 1. */
	int leaf_is_return;
	int64_t time_nanos, duration_nanos;
	/* A contention profile's word in Go's debug=1 text ("--- mutex:",
	 * "--- contention:"); a static string, or NULL. */
	const char *legacy_title;
	const char **comments;
	size_t ncomments, comments_cap;
	struct pp_sample **table; /* open addressing on hash */
	size_t table_cap;
	struct pp_sample *first, *last;
	size_t nsamples;
	const char **synthetic; /* names of synthetic frames, by pc - 1 */
	size_t nsynthetic, synthetic_cap;
	/* Memory bound (0: none): past it, new stacks are charged to one
	 * synthetic frame (PP_PROFILE_LIMIT_FRAME) and counted here. */
	size_t max_bytes;
	uint64_t over_limit;
	int adding_limit_frame;
	/* The timeline (pp_profile_add_at), kept when max_events > 0; past
	 * max_events samples count in the totals only, and in events_over. */
	struct pp_event *events;
	size_t nevents, events_cap, max_events;
	int wall_timeline; /* its events are wall-clock looks, not CPU samples
	                    */
	uint64_t events_over;
	/* The window on CLOCK_MONOTONIC (the events' clock), when kept. */
	uint64_t mono_start_ns, mono_end_ns;
	/* Profiles shown beside this one in a trace (/trace?wall=1&heap=1):
	 * owned, freed with it. */
	struct pp_profile *wall, *heap;
};

/* Bytes of one event: a timeline may hold max_bytes / 2 of them. */
#define PP_EVENT_BYTES sizeof(struct pp_event)

#define PP_PROFILE_LIMIT_FRAME                                                 \
	"[pullprof: profile size limit reached, see PULLPROF_MAX_PROFILE_MB]"

/* Synthetic frames stand for what has no code address (lost samples, a
 * truncated stack): PCs 1..PP_SYNTHETIC_MAX, below any mappable address. */
#define PP_SYNTHETIC_MAX 4095

/* A new empty profile (NULL on ENOMEM). period_type may be NULL. */
struct pp_profile *pp_profile_new(const struct pp_value_type *types,
                                  size_t ntypes,
                                  const struct pp_value_type *period_type,
                                  int64_t period);
void pp_profile_free(struct pp_profile *p);

/* type must name one of the sample types: -EINVAL otherwise. */
int pp_profile_set_default_type(struct pp_profile *p, const char *type);
void pp_profile_set_time(struct pp_profile *p, int64_t time_nanos,
                         int64_t duration_nanos);
int pp_profile_add_comment(struct pp_profile *p, const char *text);

/* The PC of the synthetic frame called name (created on first use), or 0
 * on ENOMEM or when too many exist. */
uintptr_t pp_profile_synthetic_pc(struct pp_profile *p, const char *name);
/* The name of a synthetic PC, or NULL when pc is a real address. */
const char *pp_profile_synthetic_name(const struct pp_profile *p, uintptr_t pc);

/* Memory the profile holds, in bytes. */
size_t pp_profile_bytes(const struct pp_profile *p);

/* Add values (p->ntypes of them) to the sample of this stack and labels,
 * creating it if new (or charging PP_PROFILE_LIMIT_FRAME past max_bytes).
 * depth may be 0. Returns 0 or -ENOMEM. */
int pp_profile_add(struct pp_profile *p, const uintptr_t *pcs, size_t depth,
                   const int64_t *values, const struct pp_label *labels,
                   size_t nlabels);

/* pp_profile_add, and the sample on the timeline at time_ns (monotonic)
 * on thread tid, when p keeps one. */
int pp_profile_add_at(struct pp_profile *p, const uintptr_t *pcs, size_t depth,
                      const int64_t *values, const struct pp_label *labels,
                      size_t nlabels, uint64_t time_ns, uint32_t tid);

/* Every real PC of every sample (not the synthetic ones) replaced by
 * fn(pc, arg) (an image unloaded since: symbols/unloaded.h), the samples
 * found again by their new stacks. Two samples that become the same stay
 * two (renderers list them both). */
void pp_profile_remap(struct pp_profile *p, uintptr_t (*fn)(uintptr_t, void *),
                      void *arg);

/* end - start, stack by stack (same labels), every value; the stacks whose
 * values did not change are left out. Both must have the same sample
 * types. The kind, period, default type and frames' sense come from end.
 * 0, -EINVAL or -ENOMEM. */
int pp_profile_delta(const struct pp_profile *end,
                     const struct pp_profile *start, struct pp_profile **out);

#endif

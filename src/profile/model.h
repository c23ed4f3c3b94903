/*
 * The profile model: what every profile type produces and every renderer
 * reads. Samples are stacks of PCs (leaf first) with one value per sample
 * type and optional labels; samples with the same stack and labels are
 * aggregated (values summed) as they are added. Agent context.
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
	uintptr_t *pcs;          /* leaf first; pcs[1..] are return addresses */
	struct pp_label *labels; /* strings interned in the profile */
	int64_t values[];        /* one per sample type */
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
};

#define PP_PROFILE_LIMIT_FRAME                                                 \
	"[pullprof: profile size limit reached (PULLPROF_MAX_PROFILE_MB)]"

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

/* end - start, stack by stack (same labels), every value; the stacks whose
 * values did not change are left out. Both must have the same sample
 * types. The kind, period, default type and frames' sense come from end.
 * 0, -EINVAL or -ENOMEM. */
int pp_profile_delta(const struct pp_profile *end,
                     const struct pp_profile *start, struct pp_profile **out);

#endif

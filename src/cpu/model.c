/*
 * A CPU sample into a profile model, and the notes of a CPU profile
 * (model.h).
 * Context: agent.
 */
#include "cpu/model.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bounds.h"
#include "cpu/ring.h"
#include "labels/labels.h"
#include "profile/model.h"
#include "symbols/unloaded.h"

int pp_cpu_model_add(struct pp_profile *p, const uintptr_t *stack, size_t depth,
                     unsigned flags, uint32_t weight, uint32_t period_ns,
                     uint32_t tid, const char *name, uint32_t label_set,
                     uint64_t time_ns)
{
	/* At most PP_MAX_DEPTH frames, plus two synthetic. */
	uintptr_t pcs[PP_MAX_DEPTH + 2];

	if (depth > PP_MAX_DEPTH)
		depth = PP_MAX_DEPTH;
	memcpy(pcs, stack, depth * sizeof *pcs);
	if (depth == 0)
		pcs[depth++] = pp_profile_synthetic_pc(
		    p, "[pullprof: stack not captured]");
	else if (flags & PP_REC_TRUNCATED)
		pcs[depth++] =
		    pp_profile_synthetic_pc(p, "[pullprof: stack truncated]");
	if (flags & PP_REC_EXIT) {
		/* Its own leaf: where in the start routine is not known. */
		memmove(pcs + 1, pcs, depth * sizeof *pcs);
		pcs[0] = pp_profile_synthetic_pc(
		    p, "[pullprof: CPU after the thread's last tick]");
		depth++;
	}
	if (pcs[depth - 1] == 0)
		return -ENOMEM; /* out of memory for the synthetic frame */
	int64_t v[2] = {weight, (int64_t)weight * period_ns};
	struct pp_label labels[2 + PP_LABEL_MAX_EXPANDED] = {
	    {"thread_id", NULL, tid, NULL},
	    {"thread_name", name && name[0] ? name : "?", 0, NULL},
	};
	size_t nlabels = 2 + pp_labels_to_profile(label_set, labels + 2,
	                                          PP_LABEL_MAX_EXPANDED);
	return pp_profile_add_at(p, pcs, depth, v, labels, nlabels, time_ns,
	                         tid);
}

void pp_cpu_model_notes(struct pp_profile *p, uint32_t min_period,
                        uint32_t max_period)
{
	char note[300];
	if (p->over_limit) {
		snprintf(
		    note, sizeof note,
		    "%llu samples of new stacks past the profile size limit "
		    "went to %s",
		    (unsigned long long)p->over_limit, PP_PROFILE_LIMIT_FRAME);
		pp_profile_add_comment(p, note);
	}
	uint64_t missed = pp_unloaded_missed();
	if (missed) {
		/* Past PP_UNLOADED_MAX images, or out of memory: what those
		 * dlcloses took away is not known. */
		snprintf(note, sizeof note,
		         "%llu dlclose(s) in this process could not be "
		         "recorded (over %u images unloaded, or no memory): "
		         "samples in code they unloaded may be named from what "
		         "is mapped there now",
		         (unsigned long long)missed, PP_UNLOADED_MAX);
		pp_profile_add_comment(p, note);
	}
	if (max_period != min_period && min_period) {
		snprintf(note, sizeof note,
		         "the rate changed over this profile (periods %u..%u "
		         "ns, a window asked for more): values are weighted by "
		         "the period in force",
		         min_period, max_period);
		pp_profile_add_comment(p, note);
	}
}

/*
 * The heap kind's endpoints: /heap and /allocs, the sampled heap profile
 * with in-use or allocated space as its default view. Now (a snapshot), its
 * change over seconds=N, its peak, the allocator's own profile (source=),
 * or a past range from the record's snapshots (its change, or with state=1
 * the heap as of its end). Made on the job pipeline's thread.
 * Context: agent.
 */
#include <errno.h>
#include <stdio.h>

#include "ask/ask.h"
#include "config.h"
#include "heap/detect.h"
#include "heap/heap.h"

PP_ASK_FITS(struct pp_heap_query);

#define HEAP_TYPES "alloc_objects|alloc_space|inuse_objects|inuse_space"

static int ask_heap(const struct pp_endpoint *e, const struct pp_args *a,
                    const struct pp_config *cfg, struct pp_ask *ask, char *err,
                    size_t errlen)
{
	struct pp_heap_query *q = PP_ASK_QUERY(ask, struct pp_heap_query);
	unsigned gc, peak, source, state;

	q->view = (enum pp_heap_view)e->variant;
	if (pp_ask_begin(e, a, "seconds|peak|source", ask, err, errlen))
		return -EINVAL;
	if (ask->from_record) {
		/* A past range: its change, or with state=1 the heap as of
		 * its end. */
		if (pp_args_uint(a, "gc", 0, 0, 1, &gc, err, errlen) ||
		    pp_args_uint(a, "state", 0, 0, 1, &state, err, errlen) ||
		    pp_ask_render(e, a, ask, err, errlen))
			return -EINVAL;
		return pp_ask_snaps(e, ask, (int)state,
		                    e->variant == PP_HEAP_ALLOCS, err, errlen);
	}
	/* gc: Go clients ask for a collection first; there is none here, the
	 * value is checked and otherwise ignored. */
	if (pp_ask_window(e, a, cfg, &q->seconds, err, errlen) ||
	    pp_args_uint(a, "gc", 0, 0, 1, &gc, err, errlen) ||
	    pp_args_choice(a, "peak", "0|1|reset", &peak, err, errlen) ||
	    pp_args_choice(a, "source", "auto|interposed|jemalloc|tcmalloc",
	                   &source, err, errlen) ||
	    pp_ask_render(e, a, ask, err, errlen) ||
	    pp_ask_id(a, "seconds|peak|source", ask, err, errlen) ||
	    pp_ask_refuse(a, "state",
	                  "state=1 is the heap as of a past range's end (with "
	                  "last=, start=, end=)",
	                  err, errlen))
		return -EINVAL;
	q->peak = peak != 0;
	q->peak_reset = peak == 2;
	if (q->peak && q->seconds) {
		snprintf(err, errlen,
		         "peak and seconds do not combine: a peak profile is "
		         "what was live at one moment");
		return -EINVAL;
	}
	/* Where the profile comes from: pullprof's sampler when the host's
	 * allocations reach it, else the allocator's own profiler, else a
	 * sentence that says why there is none (never an empty profile). */
	if (!ask->rq.id) {
		static const int asked[] = {0, PP_HEAP_SOURCE_INTERPOSED,
		                            PP_HEAP_SOURCE_JEMALLOC,
		                            PP_HEAP_SOURCE_TCMALLOC};
		int rc = pp_heap_resolve(q, asked[source], err, errlen);
		if (rc) {
			ask->status = rc == -EINVAL ? PP_ASK_BAD_REQUEST
			                            : PP_ASK_NOT_FOUND;
			return rc;
		}
	}
	ask->rq.producer = &pp_heap_producer;
	ask->rq.query = q;
	ask->rq.seconds = q->seconds;
	return 0;
}

const struct pp_endpoint pp_heap_endpoint = {
    .path = "/heap",
    .name = "heap",
    .link = "heap",
    .help = "sampled heap profile: memory in use and allocated so far, by "
            "stack (?seconds=N: the change over N seconds; ?peak=1: what "
            "was live at the highest point)",
    .types = HEAP_TYPES,
    .record = PP_ASK_RECORD_SNAPS,
    .snaps = "heap",
    .merged = 1,
    .variant = PP_HEAP_INUSE,
    .ask = ask_heap,
};

const struct pp_endpoint pp_allocs_endpoint = {
    .path = "/allocs",
    .name = "allocs",
    .link = "allocs",
    .help = "the heap profile with allocated space as its default view "
            "(same parameters as heap)",
    .types = HEAP_TYPES,
    .record = PP_ASK_RECORD_SNAPS,
    .snaps = "heap",
    .merged = 1,
    .variant = PP_HEAP_ALLOCS,
    .ask = ask_heap,
};

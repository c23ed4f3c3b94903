/*
 * The heap profiler: the malloc family interposed (shim/malloc.c), a Poisson
 * sampler with a per-thread byte countdown (sample.c), the tables of sampled
 * allocations (table.c), and the agent side (heap.c) that snapshots them and
 * builds /heap and /allocs profiles. The functions the malloc wrappers call
 * (host context) say so.
 * Context: agent.
 */
#ifndef PP_HEAP_H
#define PP_HEAP_H

#include <stddef.h>
#include <stdint.h>

#include "profile/job.h"

struct pp_heap_settings {
	uint64_t rate; /* mean bytes between samples; 0: sampling off */
	unsigned max_depth;
	size_t max_profile_bytes; /* a profile's model; 0: no bound */
	unsigned max_pending;     /* jobs waiting or building; more: -EBUSY */
};

/* Start sampling (rate > 0). Allocations made before are not known to the
 * profile. 0 or a negative errno, with a sentence in err. */
int pp_heap_start(const struct pp_heap_settings *s, char *err, size_t errlen);
/* Stop sampling and forget every record (the job pipeline cancelled the
 * heap jobs before). */
void pp_heap_stop(void);
/* In a forked child (async-signal-safe): sampling goes on (the child
 * inherited the parent's heap); the child's agent starts anew. */
void pp_heap_forget_in_child(void);

/* pp_heap_hide, pp_heap_unhide and pp_heap_exclude_thread: shim/heap_hot.h. */

enum pp_heap_view {
	PP_HEAP_INUSE,  /* /heap: no default sample type (tools show inuse) */
	PP_HEAP_ALLOCS, /* /allocs: default sample type alloc_space */
};

/* The heap profile producer (profile/job.h): its query is a struct
 * pp_heap_query (the job's seconds the same); the model is made from a
 * snapshot of the tables when the job is due. start fails with -ENOTSUP
 * when heap profiling is off. Its limit is PULLPROF_MAX_HEAP_PROFILES. */
extern struct pp_producer pp_heap_producer;

struct pp_heap_query {
	enum pp_heap_view view;
	/* Where it comes from (heap/detect.h; the handler resolves ?source=
	 * auto): PP_HEAP_SOURCE_INTERPOSED (0 in a zeroed query is NONE:
	 * set it) or PP_HEAP_SOURCE_JEMALLOC. */
	int source;
	unsigned seconds; /* > 0: a delta profile over the next seconds */
	int peak;         /* what was live at the peak */
	int peak_reset;   /* ... and start a new peak from now */
};

/* Set q->source: asked (a PP_HEAP_SOURCE_*, from ?source=), or 0 for
 * where the profile comes from in this process (heap/detect.h). 0, or
 * -ENOTSUP with the sentence saying why there is no such profile and what
 * to do, or -EINVAL (q asks what that source cannot give). */
int pp_heap_resolve(struct pp_heap_query *q, int asked, char *err,
                    size_t errlen);

/* The allocator's own profile (own.c; q->source jemalloc or tcmalloc):
 * its text now (for a window's start), and the model of the text now or
 * (start) of its change since start. 0 or a negative errno (a sentence in
 * err for the text). */
int pp_heap_own_text(const struct pp_heap_query *q, char **text, size_t *len,
                     char *err, size_t errlen);
int pp_heap_own_model(struct pp_job *job, const struct pp_heap_query *q,
                      const char *start, size_t start_len, size_t max_bytes,
                      struct pp_profile **out);

struct pp_heap_stats {
	int running;
	uint64_t rate;
	uint64_t sampled;       /* sampled allocations since start */
	uint64_t sampled_bytes; /* their sizes, added up */
	/* Estimated (unsampled) bytes allocated since start: what the
	 * allocs profile's alloc_space adds up to. */
	uint64_t allocated_bytes;
	uint64_t sampled_freed;
	uint64_t live_objects; /* sampled objects still live */
	uint64_t inuse_bytes;  /* estimated (unsampled) in-use bytes */
	uint64_t peak_bytes;   /* highest inuse_bytes since start or reset */
	double peak_time;      /* when, seconds since the epoch; 0: never */
	uint64_t stacks, buckets;
	uint64_t table_bytes; /* memory the tables hold */
	uint64_t dropped;     /* samples dropped: table full or no memory */
	uint64_t unwind_truncated, unwind_unknown_code, unwind_failed;
	uint64_t unwind_timed; /* samples whose capture was timed */
	uint64_t unwind_ns_total, unwind_ns_max; /* over the timed ones */
	uint64_t
	    false_hits; /* frees that passed the filter but were not sampled */
	unsigned pending; /* heap jobs waiting or being built */
};
void pp_heap_stats(struct pp_heap_stats *out);

/* Agent context: the heap as a trace shows it (/trace?heap=1): what is in
 * use and was allocated now, and what was in use at the peak (two models,
 * both the caller's). -ENOTSUP when heap profiling is off. */
int pp_heap_trace_models(struct pp_profile **now, struct pp_profile **peak);
/* Is heap profiling on? */
int pp_heap_running(void);

#endif

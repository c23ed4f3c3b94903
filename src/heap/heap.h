/*
 * The heap profiler: the malloc family interposed (interpose.c), a Poisson
 * sampler with a per-thread byte countdown (sample.c), the tables of sampled
 * allocations (table.c), and the agent side (heap.c) that snapshots them and
 * builds /heap and /allocs profiles. Agent context except where noted.
 */
#ifndef PP_HEAP_H
#define PP_HEAP_H

#include <stddef.h>
#include <stdint.h>

#include "profile/render.h"

struct pp_heap_settings {
	uint64_t rate; /* mean bytes between samples; 0: sampling off */
	unsigned max_depth;
	size_t max_profile_bytes; /* a profile's model; 0: no bound */
	unsigned max_pending;     /* jobs waiting or building; more: -EBUSY */
};

/* Start sampling (rate > 0) and the heap worker thread. Allocations made
 * before are not known to the profile. 0 or a negative errno, with a
 * sentence in err. */
int pp_heap_start(const struct pp_heap_settings *s, char *err, size_t errlen);
/* Stop sampling, cancel pending requests (their done callbacks run), join
 * the worker and forget every record. */
void pp_heap_stop(void);
/* In a forked child (async-signal-safe): the worker does not exist here;
 * sampling goes on (the child inherited the parent's heap). */
void pp_heap_forget_in_child(void);

/* Hot context safe. The calling thread is one of the agent's: its
 * allocations are never sampled. */
void pp_heap_agent_thread(void);
/* Hot context safe. Non-zero when the calling thread is one of the agent's
 * (it called pp_heap_agent_thread). */
int pp_heap_on_agent_thread(void);

enum pp_heap_view {
	PP_HEAP_INUSE,  /* /heap: no default sample type (tools show inuse) */
	PP_HEAP_ALLOCS, /* /allocs: default sample type alloc_space */
};

struct pp_heap_query {
	uint64_t id; /* > 0: render the kept profile id again */
	enum pp_heap_view view;
	unsigned seconds; /* > 0: a delta profile over the next seconds */
	int peak;         /* what was live at the peak */
	int peak_reset;   /* ... and start a new peak from now */
	struct pp_render_opts render; /* the format of the answer */
	int keep; /* keep the profile for ?id= (profile/recent.h) */
};

struct pp_heap_job;
typedef void (*pp_heap_done_fn)(void *arg);

/* Ask for a heap profile. It is built on the heap worker thread (symbolizing
 * may take a while) and `done` is called there when it is ready; a delta
 * profile is ready `seconds` later. client_fd, when >= 0, is watched while
 * waiting: when the client hangs up the job is cancelled. With q->id, the
 * kept heap profile of that id is rendered again (-ENOENT when there is
 * none). Errors: -EBUSY
 * (too many pending), -ENOMEM, -ESHUTDOWN (not running), with err set. */
int pp_heap_job_open(const struct pp_heap_query *q, int client_fd,
                     pp_heap_done_fn done, void *arg, struct pp_heap_job **out,
                     char *err, size_t errlen);
void pp_heap_job_release(struct pp_heap_job *j);
/* After done: the rendered profile (handed over: free() it) and the id it
 * is kept under (see profile/recent.h), or -ECANCELED,
 * -ENOMEM, ... */
int pp_heap_job_take(struct pp_heap_job *j, char **body, size_t *len,
                     uint64_t *id);

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
	unsigned pending; /* requests being built or waiting */
};
void pp_heap_stats(struct pp_heap_stats *out);

#endif

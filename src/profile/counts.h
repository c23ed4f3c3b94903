/*
 * The shape most snapshot kinds share: counts since the agent started, or
 * with ?seconds=N the change over a window of N seconds (the snapshot at
 * the job's open subtracted from the one when it is due). threadcreate,
 * the thread dump, mutex, block and heap declare what differs (a struct
 * pp_counts) and take the pipeline's hooks from here.
 * Context: agent.
 */
#ifndef PP_COUNTS_H
#define PP_COUNTS_H

#include <stddef.h>

#include "profile/job.h"
#include "profile/model.h"

/* The query of the kinds of counts whose ask is pp_ask_counts (ask.h):
 * the thread dump (debug 0, 1 grouped stacks, 2 a block per thread),
 * threadcreate, mutex and block (debug 0 or 1); seconds > 0: the change
 * over that many seconds. */
struct pp_counts_query {
	unsigned debug;
	unsigned seconds;
};

struct pp_counts {
	/* The producer's query struct, copied for the job. The window is
	 * the job's (pp_job_seconds): 0 for counts since the start. */
	size_t query_size;
	/* At open: is the kind on? 0, or -ENOTSUP (or another error) with a
	 * sentence. NULL: always on. */
	int (*check)(const void *query, char *err, size_t errlen);
	/* Counts now, as a profile (threadcreate, dump, mutex, block): the
	 * helper subtracts the window's start from its end. */
	int (*snapshot)(const void *query, struct pp_profile **out);
	/* Or, for a kind whose change is not a profile's (heap: its table's
	 * rows, unsampled per stack and size), a start state of its own and
	 * the model from it (start NULL: since the agent started). */
	int (*begin)(const void *query, void **start, char *err, size_t errlen);
	int (*finish)(struct pp_job *job, const void *query, const void *start,
	              struct pp_profile **out);
	void (*free_start)(void *start);
	/* The comment on the profile: counts since the start (delta 0), or
	 * the change over the window. NULL: none. */
	void (*note)(const void *query, int delta, struct pp_profile *p);
};

int pp_counts_start(struct pp_job *job, const void *query, char *err,
                    size_t errlen);
int pp_counts_make(struct pp_job *job, struct pp_profile **out);
void pp_counts_free(void *data);

/* A producer of this shape: .counts and the three hooks. */
#define PP_COUNTS_PRODUCER(c)                                                  \
	.counts = (c), .start = pp_counts_start, .make = pp_counts_make,       \
	.free = pp_counts_free

#endif

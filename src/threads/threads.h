/*
 * Where threads are, without stopping them: the thread dump (/goroutine, a
 * `make` producer) and the wall-clock profile (/wall and fgprof's path, a
 * delivering producer with a sampler thread per window). Both look at
 * threads through look.h: never a signal.
 * Context: agent.
 */
#ifndef PP_THREADS_H
#define PP_THREADS_H

#include <stddef.h>
#include <stdint.h>

#include "profile/job.h"

struct pp_threads_settings {
	unsigned max_depth;
	size_t max_profile_bytes;
	unsigned max_dumps;    /* PULLPROF_MAX_THREAD_DUMPS */
	unsigned max_wall;     /* PULLPROF_MAX_WALL_PROFILES */
	unsigned wall_threads; /* PULLPROF_WALL_THREADS: per tick */
};
/* At agent start (before any job). */
void pp_threads_configure(const struct pp_threads_settings *s);
/* At agent stop, after the pipeline's shutdown: joins the wall samplers. */
void pp_threads_shutdown(void);
/* In a forked child (async-signal-safe). */
void pp_threads_forget_in_child(void);

/* /goroutine: a struct pp_counts_query (profile/counts.h). */
extern struct pp_producer pp_dump_producer;

/* /threadcreate (the same query: seconds; debug 0 or 1). */
extern struct pp_producer pp_threadcreate_producer;
/* Recording of the stacks that create threads: started with the agent. */
int pp_threadcreate_start(unsigned max_depth, char *err, size_t errlen);
void pp_threadcreate_stop(void);
void pp_threadcreate_forget_in_child(void);
/* Host context (the interposed pthread_create): is it recording, and
 * count the stack above `from` (the wrapper's return address). */
int pp_threadcreate_on(void);
/* For status: jobs open, distinct stacks recorded, creations past the
 * table's 4096 stacks. */
void pp_threadcreate_stats(unsigned *open, size_t *stacks, uint64_t *past);
void pp_threadcreate_record(uintptr_t from);

/* /wall and /debug/fgprof. */
struct pp_wall_query {
	unsigned seconds;
	unsigned hz;
	int fgprof; /* fgprof's sample types */
};
extern struct pp_producer pp_wall_producer;

/* A wall window beside another job's window (/trace?wall=1): sampled over
 * job's span from its open for `seconds` at hz, its model handed to the
 * caller rather than answered. take: 1 once it ended (*out the model, or
 * NULL with *rc), 0 before. cancel: stop it and let go; release: let go
 * after take. */
struct pp_wall_companion;
int pp_wall_companion_start(struct pp_job *job, unsigned seconds, unsigned hz,
                            struct pp_wall_companion **out, char *err,
                            size_t errlen);
int pp_wall_companion_take(struct pp_wall_companion *c, struct pp_profile **out,
                           int *rc);
void pp_wall_companion_cancel(struct pp_wall_companion *c);
void pp_wall_companion_release(struct pp_wall_companion *c);

/* The default and highest rates of a wall-clock window. */
#define PP_WALL_HZ 99
#define PP_WALL_MAX_HZ 1000

struct pp_threads_stats {
	unsigned dumps_open, wall_open;
	uint64_t dumps, wall_ticks, wall_samples, wall_late_ticks;
	unsigned wall_threads; /* the per-tick bound */
	uint64_t blocked, running, self, gone, not_caught, moved, no_perf,
	    walk_incomplete, denied, seccomp;
	int perf_errno, perf_kernel;
};
void pp_threads_stats(struct pp_threads_stats *out);

#endif

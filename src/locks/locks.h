/*
 * Lock contention profiles: /mutex (where waiting was caused: the unlocking
 * stack, weighted by how long others waited) and /block (where threads
 * waited: the waiting stack, weighted by how long), Go's two profiles, for
 * the pthread calls shim/locks.c wraps. pp_locks_put and pp_locks_depth are
 * called by record.c on host threads; the rest is the agent's.
 * Context: agent.
 */
#ifndef PP_LOCKS_H
#define PP_LOCKS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "profile/job.h"

enum pp_locks_kind { PP_LOCKS_MUTEX, PP_LOCKS_BLOCK, PP_LOCKS_NKINDS };

/* Frames kept per event (the call's own frame included). */
#define PP_LOCKS_MAX_DEPTH 64

struct pp_locks_settings {
	unsigned mutex_rate; /* PULLPROF_MUTEX_RATE: 1 in N; 0: off */
	unsigned block_rate; /* PULLPROF_BLOCK_RATE: ns; 0: off */
	unsigned max_depth;
	size_t max_profile_bytes;
	unsigned max_open; /* jobs of each kind at once */
};

/* At agent start: with either rate on, the ring and tables are set up and
 * the wrappers start recording. 0 or a negative errno with a sentence. */
int pp_locks_start(const struct pp_locks_settings *s, char *err, size_t errlen);
/* At agent stop, after the pipeline's shutdown: the wrappers pass straight
 * through again; what was recorded is dropped. */
void pp_locks_stop(void);
/* In a forked child (async-signal-safe): nothing recorded, nothing
 * counted, until an agent starts there. */
void pp_locks_forget_in_child(void);

/* /mutex and /block: the query is the thread dump's (seconds: a delta;
 * debug 1: Go's contention text). */
extern struct pp_producer pp_mutex_producer, pp_block_producer;

struct pp_locks_stats {
	unsigned mutex_rate, block_rate;
	unsigned mutex_open, block_open;
	uint64_t events[PP_LOCKS_NKINDS];  /* recorded (sampled) */
	uint64_t dropped[PP_LOCKS_NKINDS]; /* lost: the ring was full */
	size_t stacks[PP_LOCKS_NKINDS];    /* distinct stacks kept */
	uint64_t past_table[PP_LOCKS_NKINDS];
	uint64_t collisions; /* waits not counted for the mutex profile */
	uint64_t waiting;    /* waits counted for it right now */
};
void pp_locks_stats(struct pp_locks_stats *out);

/* ---- for record.c (host context) ------------------------------------------
 */
extern _Atomic unsigned pp_locks_depth;
/* Put one sampled event in the ring (or count it lost). */
void pp_locks_put(enum pp_locks_kind kind, const uintptr_t *pcs, unsigned depth,
                  int truncated, uint64_t delay, uint64_t rate,
                  const char name[16], uint32_t labels);
uint64_t pp_locks_collisions(void);
void pp_locks_slots_forget_in_child(void);

#endif

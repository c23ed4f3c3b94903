/* What the thread dump and the wall-clock profile share.
 * Context: agent.
 */
#ifndef PP_THREADS_INTERNAL_H
#define PP_THREADS_INTERNAL_H

#include "profile/model.h"
#include "threads/look.h"
#include "threads/threads.h"

extern struct pp_threads_settings pp_threads_cfg;

/* Stack unwinding set up (once, for both producers); 0 or a negative
 * errno with a sentence in err. */
int pp_threads_unwind_ready(char *err, size_t errlen);

/* At stop, once no look can run: the unwinder's user count goes back. */
void pp_threads_unwind_release(void);
/* In a forked child (async-signal-safe). */
void pp_threads_unwind_forget_in_child(void);

/* Add what l found as a sample of p with these values: its stack (or the
 * synthetic frame that says why there is none), labels thread_name and
 * state (and agent on the agent's threads); with detail, the dump's
 * per-thread labels (tid, call, wchan, cpu_user, cpu_system, stack). A
 * thread gone meanwhile is left out. On p's timeline (when it keeps one)
 * at time_ns. 0 or -ENOMEM. */
int pp_threads_add(struct pp_profile *p, const struct pp_look *l,
                   const int64_t *values, int detail, uint64_t time_ns);

/* When looks were refused (PP_MISS_DENIED): a comment on p that says how
 * many and why. 0 or -ENOMEM. */
int pp_threads_note_denied(struct pp_profile *p, uint64_t denied,
                           uint64_t looks);

/* When running threads were shown without a stack because a seccomp
 * filter kills for perf_event_open (PP_MISS_SECCOMP), or when the stacks of
 * threads off the CPU could not be read past their first frame because it
 * kills for process_vm_readv: a comment on p saying so. 0 or -ENOMEM. */
int pp_threads_note_seccomp(struct pp_profile *p, uint64_t seccomp,
                            uint64_t looks);

/* The state word of what l found. */
const char *pp_threads_state(const struct pp_look *l);

/* Counters. */
extern _Atomic uint64_t pp_threads_dumps, pp_threads_wall_ticks,
    pp_threads_wall_samples, pp_threads_wall_late;

#endif

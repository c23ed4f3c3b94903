/*
 * Looking at a thread without interrupting it.
 *
 * A signal makes many blocking calls return early (EINTR, a short sleep)
 * even with SA_RESTART (signal(7)), so neither the thread dump nor the
 * wall-clock profile ever sends one:
 *  - a thread blocked in a system call (or otherwise off the CPU) is read
 *    from outside: /proc/self/task/TID/syscall gives the user sp and pc the
 *    call left, the stack is in our own address space, and the compact
 *    frame tables walk it (from a copy taken with process_vm_readv, so a
 *    stack freed meanwhile ends the walk instead of faulting). The file is
 *    read again after the walk: a thread that moved is read again, up to
 *    three times, then counted;
 *  - a running thread is sampled by the kernel: a one-shot perf_event
 *    software clock on that thread copies its user registers and the top of
 *    its stack into a ring buffer, from a timer interrupt, with no signal.
 *    Where perf_event_open is not allowed (kernel.perf_event_paranoid,
 *    seccomp), running threads are shown without a stack, under a frame
 *    that says why.
 * Context: agent.
 */
#ifndef PP_LOOK_H
#define PP_LOOK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "threads/task.h"

enum pp_look_how {
	PP_LOOK_NONE = 0, /* no stack: see miss */
	PP_LOOK_BLOCKED,  /* read from outside, blocked (call.nr) */
	PP_LOOK_RUNNING,  /* a perf_event sample of the running thread */
	PP_LOOK_SELF,     /* the looking thread itself */
};

enum pp_look_miss {
	PP_MISS_NONE = 0,
	PP_MISS_GONE,       /* the thread ended */
	PP_MISS_NO_PERF,    /* running, and perf_event_open is not allowed */
	PP_MISS_SECCOMP,    /* running, and a seccomp filter kills the process
	                     * for perf_event_open (util/seccomp.h) */
	PP_MISS_NOT_CAUGHT, /* running, yet not on a CPU long enough to be
	                     * sampled within the wait */
	PP_MISS_MOVED,      /* kept moving between reads */
	PP_MISS_DENIED,     /* its /proc/self/task/TID/syscall could not be
	                     * opened (EACCES): the process is no longer
	                     * dumpable (a uid change, PR_SET_DUMPABLE 0), so
	                     * the file is root's and only root may read it;
	                     * a running thread is still sampled by perf */
};

struct pp_look {
	pid_t tid;      /* in: the thread */
	uintptr_t *pcs; /* in: room for the looker's max_depth */
	struct pp_task_stat st;
	struct pp_task_call call; /* nr PP_TASK_RUNNING when sampled running */
	enum pp_look_how how;
	enum pp_look_miss miss;
	int why; /* the walk's pp_unwind_result */
	unsigned depth;
};

struct pp_looker;

/* A looker keeps up to max_events perf events open (one per running
 * thread seen), reused while it lives: a wall-clock window keeps one for
 * its length. NULL on ENOMEM. */
struct pp_looker *pp_looker_new(unsigned max_depth, unsigned max_events);
void pp_looker_free(struct pp_looker *lk);

/* Look at each thread of looks (tid and pcs set): state, name, the call
 * it is in, its stack. Running threads are sampled together, waiting at
 * most wait_ms for the kernel to catch each on a CPU. */
void pp_look_threads(struct pp_looker *lk, struct pp_look *looks, size_t n,
                     unsigned wait_ms);

/* Process-wide counts, for status. */
struct pp_look_stats {
	uint64_t blocked, running, self; /* stacks read each way */
	uint64_t gone, not_caught, moved, no_perf, walk_incomplete;
	uint64_t denied;  /* PP_MISS_DENIED looks */
	uint64_t seccomp; /* PP_MISS_SECCOMP looks */
	int perf_errno;   /* why perf_event_open failed (0: it works or was
	                   * never tried) */
	int perf_kernel;  /* 1: samples of threads in the kernel too
	                   * (exclude_kernel 0 allowed) */
};
void pp_look_stats(struct pp_look_stats *out);

#endif

/* Seccomp filters that kill (seccomp.c): before the agent makes a system
 * call a filter may kill the process for, it asks here. Without a filter
 * on the calling thread (/proc/thread-self/status `Seccomp: 0`) every call
 * is allowed; under one (`Seccomp: 2`) each call is made once in a child
 * (a clone sharing the memory, nothing else) and the child's end tells:
 * killed by a signal (SIGSYS: SECCOMP_RET_KILL_*, SECCOMP_RET_TRAP) means
 * forbidden; any return, success or error, means the agent may make it
 * (an error such as EPERM from SECCOMP_RET_ERRNO the caller handles as it
 * always did).
 *
 * How fresh: a filter is never removed, only added. A call found forbidden
 * stays forbidden; a call found allowed is trusted while the thread's
 * `Seccomp_filters` count is the one it was probed under (a new filter
 * makes it probed again), and probed on every ask where the kernel shows
 * no count. Every ask reads the calling thread's status (30 to 60 us on
 * a busy machine); a probe takes a clone and a wait (0.4 to 12 ms there,
 * whatever the host's size: the child shares the memory).
 * pp_seccomp_vm_readv_forbidden and pp_seccomp_mode_raw may be called in
 * any context (a signal handler, a child made by a raw clone).
 * Context: agent.
 */
#ifndef PP_SECCOMP_H
#define PP_SECCOMP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* The system calls the agent makes late (on a request) that a filter
 * killing for them would turn into the host's death. */
enum pp_sc {
	PP_SC_PERF_EVENT_OPEN,
	PP_SC_TIMER_CREATE,
	PP_SC_TIMER_SETTIME,
	PP_SC_TIMER_DELETE,
	PP_SC_GETITIMER,
	PP_SC_SETITIMER,
	PP_SC_PROCESS_VM_READV,
	PP_SC_PIDFD_OPEN,
	PP_SC_KCMP,
	PP_SC_MEMFD_CREATE,
	PP_SC_COUNT
};

/* The call's name ("perf_event_open"). */
const char *pp_seccomp_name(enum pp_sc c);

/* May the calling thread make c without being killed? 1 yes, 0 no (a
 * filter kills or traps it, or it could not be probed and a filter is
 * there). Blocks for the probe (a clone and a wait, under a millisecond;
 * at most two seconds for a child a filter's supervisor holds). */
int pp_seccomp_allowed(enum pp_sc c);

/* Was c's last ask refused (forbidden or not probed under a filter)? No
 * probe: for /status. */
int pp_seccomp_refused(enum pp_sc c);

/* Every call of cs[0..n) allowed? When not, *which is the first that is
 * not. */
int pp_seccomp_allowed_all(const enum pp_sc *cs, int n, enum pp_sc *which);

/* A reason for people: "a seccomp filter kills the process for
 * perf_event_open (/proc/self/status: Seccomp: 2); the agent does not make
 * that call". */
void pp_seccomp_reason(enum pp_sc c, char *out, size_t n);

/* process_vm_readv is made by the checked reads of the unwinder and the
 * symbolizer, in the sampling signal's handler too, where no probe can be
 * made: they read this flag and fail the read (as for an unmapped page)
 * while it is set. It is set by pp_seccomp_refresh_vm_readv when the probe
 * forbids the call or when the process's first thread is under a filter
 * the asking thread does not share (its probe would not tell). */
extern _Atomic int pp_seccomp_vm_readv_off;
static inline int pp_seccomp_vm_readv_forbidden(void)
{
	return atomic_load_explicit(&pp_seccomp_vm_readv_off,
	                            memory_order_relaxed);
}

/* Look again (agent start, each request that samples or reads stacks):
 * sets or keeps pp_seccomp_vm_readv_off. Returns 1 when process_vm_readv
 * may be made. */
int pp_seccomp_refresh_vm_readv(void);

/* The calling thread's Seccomp mode read with async-signal-safe calls
 * (open, read, close of /proc/thread-self/status, no allocation; without
 * /proc, prctl(PR_GET_SECCOMP)): 0, 1,
 * 2, or -1 when it cannot be read. For a child made without fork() (a raw
 * clone), which may not probe. */
int pp_seccomp_mode_raw(void);

/* fork()'s child: a parent thread may have held the lock mid-probe. The
 * verdicts stay (the child has the filters the forking thread had). */
void pp_seccomp_forget_in_child(void);

/* For /status. */
struct pp_seccomp_call {
	const char *name;
	int verdict;  /* PP_SCV_* */
	int signo;    /* the signal that ended the probe (forbidden) */
	int err;      /* the errno the probe's call returned (allowed) */
	long filters; /* Seccomp_filters when probed (-1: not shown) */
	int mode;     /* the asking thread's Seccomp field then */
	uint64_t probes;
};
enum {
	PP_SCV_UNASKED,   /* never asked under a filter */
	PP_SCV_ALLOWED,   /* the probe returned */
	PP_SCV_FORBIDDEN, /* the probe was killed */
	PP_SCV_UNPROBED,  /* the probe could not be made (clone failed,
	                   * another thread's filter) */
};
const char *pp_seccomp_verdict_name(int v);
struct pp_seccomp_stats {
	int mode;     /* the asking thread's Seccomp field (-1 unknown) */
	long filters; /* its Seccomp_filters (-1 not shown) */
	int leader_mode;
	long leader_filters;
	uint64_t probes, refusals;
	struct pp_seccomp_call calls[PP_SC_COUNT];
};
void pp_seccomp_stats(struct pp_seccomp_stats *out);

/* The calling thread's Seccomp and Seccomp_filters fields (-1 where not
 * read). */
void pp_seccomp_thread(int *mode, long *filters);

#endif

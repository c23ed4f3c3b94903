/*
 * The CPU profiler: per-thread CPU-time timers raising SIGPROF, the handler
 * that captures stacks into the ring, and the windows — one per /profile
 * request — that share the sampler. Agent context except where noted
 * (the functions a signal handler or a host thread may call say so).
 * Context: agent.
 */
#ifndef PP_CPU_H
#define PP_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "profile/job.h"
#include "unwind/unwind.h"

struct pp_cpu_settings {
	enum pp_unwind_mode unwind;
	unsigned max_depth;
	unsigned max_windows;
	size_t max_profile_bytes; /* a window's model; 0: no bound */
};

/* Set before the first window (pullprof_start). */
void pp_cpu_configure(const struct pp_cpu_settings *s);

/* The CPU profile producer (profile/job.h): a job opens a window on the
 * shared sampler, and the collector delivers the window's model when its
 * time is up. Its query is a struct pp_cpu_query; the job's seconds must be
 * the same. start fails with -EEXIST when the host handles both SIGURG and
 * SIGPROF itself (disposition.c: the signal). Its limit:
 * PULLPROF_MAX_CPU_WINDOWS. */
extern struct pp_producer pp_cpu_producer;

struct pp_cpu_query {
	unsigned seconds; /* the window */
	/* The rate, at least: a faster window running at the same time
	 * raises it for both. */
	unsigned hz;
	/* /trace: a wall window over the same span (at hz, at most
	 * PP_WALL_MAX_HZ), and a heap snapshot at its end, beside the model
	 * (model.h: wall, heap). */
	int wall, heap;
};

/* Stop sampling and join the collector thread (the job pipeline cancelled
 * the windows' jobs before), free the sampler. */
void pp_cpu_shutdown(void);

/* In a forked child (async-signal-safe): the parent's sampler threads do
 * not exist here; stop recording and put SIGPROF back as it was. */
void pp_cpu_forget_in_child(void);

/* The SIGPROF handler's cost per recorded sample, in CPU time, is counted
 * in buckets: bucket i holds the calls that took at most
 * pp_cpu_handler_bounds_ns[i] and more than the bound before it; the last
 * one (index PP_CPU_HANDLER_BUCKETS) those that took longer than all. The
 * bounds run 1-2-5 from 500 ns to 1 ms: the compact tables' usual cost is
 * one or two microseconds, libunwind's tens. */
#define PP_CPU_HANDLER_BUCKETS 11
extern const uint32_t pp_cpu_handler_bounds_ns[PP_CPU_HANDLER_BUCKETS];

struct pp_cpu_stats {
	const char *timer_mode; /* "per-thread", "setitimer" or "off" */
	unsigned windows_open;
	unsigned threads_sampled;
	unsigned hz;               /* current rate, 0 when off */
	const char *signal;        /* "SIGURG", "SIGPROF", or NULL when off */
	unsigned threads_blocking; /* threads not sampled: signal blocked */
	/* Threads sampled with SIGPROF: they block SIGURG (signal "SIGURG+
	 * SIGPROF"). */
	unsigned threads_sigprof;
	uint64_t foreign;  /* signals to the handler not from its timers */
	uint64_t samples;  /* records taken */
	uint64_t weighted; /* samples counting timer overruns */
	uint64_t dropped_ring_full, dropped_no_stack;
	/* Handlers left without returning (a host's handler jumped out of
	 * one: shim/cpu_hot.h), ring slots the collector took back from such a
	 * handler, and records whose slot was taken back before they were
	 * published. */
	uint64_t handlers_left, ring_reclaimed, dropped_reclaimed;
	uint64_t unwind_truncated, unwind_unknown_code, unwind_failed;
	uint64_t handler_calls, handler_ns_total, handler_ns_max;
	uint64_t handler_buckets[PP_CPU_HANDLER_BUCKETS + 1]; /* see above */
	size_t ring_capacity, ring_high_water;
	size_t unwind_images;
	enum pp_unwind_mode unwind_mode;
	uint64_t unwind_compact, unwind_fallbacks, unwind_stack_checks;
	struct pp_unwind_table_stats tables;
	/* Threads that armed their own timer as they started, those left to
	 * the scan (no slot free), and the periods charged at thread exits
	 * (the CPU after a thread's last tick). */
	uint64_t starts_armed, starts_unarmed, exit_periods;
};
void pp_cpu_stats(struct pp_cpu_stats *out);

#endif

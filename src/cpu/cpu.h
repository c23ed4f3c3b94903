/*
 * The CPU profiler: per-thread CPU-time timers raising SIGPROF, the handler
 * that captures stacks into the ring, and the windows — one per /profile
 * request — that share the sampler. Agent context except where noted.
 */
#ifndef PP_CPU_H
#define PP_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "profile/render.h"
#include "unwind/unwind.h"

struct pp_cpu_settings {
	enum pp_unwind_mode unwind;
	unsigned max_depth;
	unsigned max_windows;
	size_t max_profile_bytes; /* a window's model; 0: no bound */
};

struct pp_cpu_window;

/* Called (from an agent thread) when a window's profile is ready, or the
 * window was cancelled. Must not block. */
typedef void (*pp_cpu_done_fn)(void *arg);

void pp_cpu_configure(const struct pp_cpu_settings *s);

struct pp_cpu_query {
	uint64_t id; /* > 0: render kept profile id again, sample nothing */
	unsigned seconds, hz;
	struct pp_render_opts render; /* the format of the answer */
	int keep; /* keep the profile for ?id= (profile/recent.h) */
};

/*
 * Open a window of `seconds` sampling at `hz` (at least: a faster window
 * running at the same time raises the rate for both), answered in the
 * format q->render names. client_fd, when >= 0,
 * is watched: if the client hangs up, the window is cancelled.
 * With q->id, the kept profile of that id is rendered again (-ENOENT when
 * there is none). Errors: -EBUSY (max_windows open; *retry_after says when
 * one ends),
 * -EEXIST (the host has its own SIGPROF handler), -ENOMEM, ... with a
 * sentence in err.
 */
int pp_cpu_window_open(const struct pp_cpu_query *q, int client_fd,
                       pp_cpu_done_fn done, void *arg,
                       struct pp_cpu_window **out, unsigned *retry_after,
                       char *err, size_t errlen);
/* The request is gone: stop caring about this window, drop its reference. */
void pp_cpu_window_release(struct pp_cpu_window *w);
/* After done: the rendered profile (handed over, free() it) and the id it
 * is kept under (0: not kept), or a negative
 * errno: -ECANCELED (client gone or agent stopping), -ENOMEM, ... */
int pp_cpu_window_take(struct pp_cpu_window *w, char **body, size_t *len,
                       uint64_t *id);

/* Stop sampling, cancel every window (their done callbacks run), join the
 * agent's CPU threads, free the sampler. Windows still referenced by
 * requests stay valid until released. */
void pp_cpu_shutdown(void);

/* In a forked child (async-signal-safe): the parent's sampler threads do
 * not exist here; stop recording and put SIGPROF back as it was. */
void pp_cpu_forget_in_child(void);

/* The SIGPROF handler's cost per recorded sample, in CPU time, is counted
 * in buckets: bucket i holds the calls that took at most
 * pp_cpu_handler_bounds_ns[i] and more than the bound before it; the last
 * one (index PP_CPU_HANDLER_BUCKETS) those that took longer than all. The
 * bounds run 1-2-5 from 1 us to 1 ms: libunwind's usual cost is tens of
 * microseconds, a frame-pointer walk a few. */
#define PP_CPU_HANDLER_BUCKETS 10
extern const uint32_t pp_cpu_handler_bounds_ns[PP_CPU_HANDLER_BUCKETS];

struct pp_cpu_stats {
	const char *timer_mode; /* "per-thread", "setitimer" or "off" */
	unsigned windows_open;
	unsigned threads_sampled;
	unsigned hz;       /* current rate, 0 when off */
	uint64_t samples;  /* records taken */
	uint64_t weighted; /* samples counting timer overruns */
	uint64_t dropped_ring_full, dropped_no_stack;
	uint64_t unwind_truncated, unwind_unknown_code, unwind_failed;
	uint64_t handler_calls, handler_ns_total, handler_ns_max;
	uint64_t handler_buckets[PP_CPU_HANDLER_BUCKETS + 1]; /* see above */
	size_t ring_capacity, ring_high_water;
	size_t unwind_images;
};
void pp_cpu_stats(struct pp_cpu_stats *out);

#endif

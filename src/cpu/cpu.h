/*
 * The CPU profiler: per-thread CPU-time timers raising SIGPROF, the handler
 * that captures stacks into the ring, and the windows — one per /profile
 * request — that share the sampler. Agent context except where noted.
 */
#ifndef PP_CPU_H
#define PP_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "unwind/unwind.h"

struct pp_cpu_settings {
	enum pp_unwind_mode unwind;
	unsigned max_depth;
	unsigned max_windows;
};

struct pp_cpu_window;

/* Called (from an agent thread) when a window's profile is ready, or the
 * window was cancelled. Must not block. */
typedef void (*pp_cpu_done_fn)(void *arg);

void pp_cpu_configure(const struct pp_cpu_settings *s);

/*
 * Open a window of `seconds` sampling at `hz` (at least: a faster window
 * running at the same time raises the rate for both). client_fd, when >= 0,
 * is watched: if the client hangs up, the window is cancelled.
 * Errors: -EBUSY (max_windows open; *retry_after says when one ends),
 * -EEXIST (the host has its own SIGPROF handler), -ENOMEM, ... with a
 * sentence in err.
 */
int pp_cpu_window_open(unsigned seconds, unsigned hz, int client_fd,
                       pp_cpu_done_fn done, void *arg,
                       struct pp_cpu_window **out, unsigned *retry_after,
                       char *err, size_t errlen);
/* The request is gone: stop caring about this window, drop its reference. */
void pp_cpu_window_release(struct pp_cpu_window *w);
/* After done: the gzipped profile (handed over, free() it), or a negative
 * errno: -ECANCELED (client gone or agent stopping), -ENOMEM, ... */
int pp_cpu_window_take(struct pp_cpu_window *w, char **body, size_t *len);

/* Stop sampling, cancel every window (their done callbacks run), join the
 * agent's CPU threads, free the sampler. Windows still referenced by
 * requests stay valid until released. */
void pp_cpu_shutdown(void);

/* In a forked child (async-signal-safe): the parent's sampler threads do
 * not exist here; stop recording and put SIGPROF back as it was. */
void pp_cpu_forget_in_child(void);

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
	size_t ring_capacity, ring_high_water;
	size_t unwind_images;
};
void pp_cpu_stats(struct pp_cpu_stats *out);

#endif

/*
 * What samples all the time beside the windows (the look-back record,
 * record/): a sink registers itself, and the collector hands it every
 * sample it drains. The collector names no function of a sink's; a sink
 * names only this header of the collector's.
 * Context: agent.
 */
#ifndef PP_CPU_SINK_H
#define PP_CPU_SINK_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct pp_ring_rec;

struct pp_cpu_sink {
	/* The rate it samples at; 0: off, and nothing below is called. */
	unsigned (*hz)(void);
	/* One batch per drain, on the collector's thread: begin, add each
	 * sample, end. held: the lock the collector holds, which the sink
	 * may let go of while a read holds its own. */
	void (*begin)(pthread_mutex_t *held);
	void (*add)(const struct pp_ring_rec *rec, const char *thread_name);
	/* Between begin and end: every PC kept replaced by fn(pc, arg) (an
	 * image unloaded since: symbols/unloaded.h); n samples the handler
	 * dropped (the ring was full), noticed at now_ns. */
	void (*remap)(uintptr_t (*fn)(uintptr_t, void *), void *arg);
	void (*add_lost)(uint64_t n, uint64_t now_ns);
	void (*end)(void);
	/* Sampling paused at now_ns (the host took the signal: why) and
	 * went on (with signal, "SIGPROF" or "SIGURG"); or it stopped for
	 * good (no signal was free). */
	void (*gap_open)(uint64_t now_ns, const char *why);
	void (*gap_close)(uint64_t now_ns, const char *signal);
	void (*stopped)(const char *why);
};

/* Add s (once; at most 4 sinks) and start the collector, which samples
 * at the fastest rate of the sinks and the windows while the agent runs.
 * 0, or a negative errno and why sampling cannot start (a seccomp filter,
 * no signal free): s is added all the same, and its stopped() was not
 * called. */
int pp_cpu_sink_add(const struct pp_cpu_sink *s, char *why, size_t n);
/* A sink's read wants what the ring holds now: the collector drains at
 * once instead of at its next turn (10 to 100 ms). */
void pp_cpu_sink_wake(void);
/* s gets nothing more once this returns. */
void pp_cpu_sink_remove(const struct pp_cpu_sink *s);

#endif

/*
 * What the CPU producer (producer.c: open, cancel, stop, stats) shares with
 * the collector thread (collector.c: drain the ring into windows, deliver
 * them).
 * Context: agent.
 */
#ifndef PP_CPU_PRODUCER_H
#define PP_CPU_PRODUCER_H

#include <pthread.h>
#include <stdint.h>

#include "cpu/cpu.h"
#include "cpu/model.h"
#include "profile/job.h"
#include "profile/model.h"
#include "threads/threads.h"

/* One per CPU job: the span it samples and the model samples go into. */
struct pp_cpu_window {
	struct pp_job *job; /* referenced while listed */
	int listed;         /* on the collector's list (under the lock) */
	uint64_t start_ns, end_ns; /* CLOCK_MONOTONIC */
	int64_t start_real_ns;
	unsigned hz;
	struct pp_profile *model; /* the collector's while listed */
	uint64_t lost_at_open;
	uint32_t min_period, max_period;
	struct pp_wall_companion *wall; /* /trace?wall=1 */
	int heap;                       /* /trace?heap=1 */
	int finished; /* finish_model done (the collector's) */
	/* The collector's: the CPU time of threads that block the signal
	 * when the window began (pp_timers_blocked_measure), and how many
	 * such threads there were at most. */
	int blocked_base_set;
	uint64_t blocked_base;
	unsigned blocked_threads;
	int signo; /* the signal sampled with (for the note) */
	/* What the threads not sampled block, for the note (timers.h). */
	const char *blocked_what;
	/* Sampling stopped early because the host took the signal: why, and
	 * the span asked (end_ns is then when it stopped). */
	int cut;
	uint64_t asked_ns;
	/* Sampling at its rate has begun (the collector's, under the lock):
	 * the span starts then, not when the request came (collector.c,
	 * begin_windows). */
	int begun;
	char cut_why[160];
	struct pp_cpu_window *next;
};

struct pp_cpu_state {
	pthread_mutex_t mu; /* guards the list and the flags below */
	pthread_cond_t wake;
	int collector_up, stopping;
	pthread_t collector;
	struct pp_cpu_window *windows; /* sampling */
	struct pp_cpu_settings settings;
	int ring_ready, unwind_ready;
	/* The host took the signal while sinks sampled (sink.h): they sample
	 * no more (each was told why); or it paused, a gap open until
	 * sampling starts again on a signal that is free. */
	int sinks_cut, sinks_gap;
	/* A host thread's sigaction is about to take a signal pullprof
	 * samples with (takeover.c): bits 1 SIGURG, 2 SIGPROF; what it
	 * installs for each (PP_TAKE_*); tickets asked and answered. */
	_Atomic unsigned take_req;
	_Atomic int take_what[2];
	_Atomic unsigned take_asked, take_done;
};

/* As src/shim/shim.h's PP_SIGNAL_*. */
enum { PP_TAKE_HANDLER = 1, PP_TAKE_DFL, PP_TAKE_IGN };

/* Collector, at each turn: move off the signals the host is taking (no
 * timer of ours left, what they left pending discarded, the host's former
 * disposition back), cut the windows, pause the record; then answer the
 * waiting host threads. */
void pp_cpu_handle_takes(uint64_t now);
/* Host context (the interposed sigaction family, src/shim/signals.c,
 * before the real call; any thread, a signal handler too): the host is
 * about to set sig's disposition (what: PP_TAKE_*). When pullprof's
 * handler is installed for sig, the collector moves off it first: waited
 * for, a second at most. */
void pp_cpu_host_takes(int sig, int what);
/* Collector: the host took the signal (why): every listed window ends at
 * now with why, the record pauses (a gap, record.h) or, paused already,
 * stops for good. */
void pp_cpu_cut(const char *why, uint64_t now);

extern struct pp_cpu_state pp_cpu;

/* Lock held: set up the ring and the unwinder and start the collector
 * thread, unless they are up. 0 or a negative errno with err set. */
int pp_collector_start(char *err, size_t errlen);

/* May the sampler run here? A seccomp filter that kills for a call it
 * makes (the CPU timers' calls, process_vm_readv of the stack walks)
 * would kill the host at its first timer or sample (util/seccomp.h):
 * -EPERM and err naming the filter and the call; else 0. Asked before
 * each window and before the record starts the sampler. */
int pp_cpu_seccomp_check(char *err, size_t errlen);
/* Lock held on entry and exit: stop the collector and join it. */
void pp_collector_stop(void);

/* Stop the wall window beside w (if any) and let it go. */
void pp_cpu_window_drop_wall(struct pp_cpu_window *w);

/* Samples dropped so far because the ring was full. */
uint64_t pp_cpu_lost_now(void);

#endif

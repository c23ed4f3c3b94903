/*
 * The CPU profile producer: a job's window on the shared sampler (opened
 * here, filled and delivered by the collector), the sampler's settings,
 * stop, fork and statistics.
 * Context: agent.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu/producer.h"
#include "cpu/sampler.h"
#include "cpu/timers.h"
#include "error.h"
#include "heap/detect.h"
#include "heap/heap.h"
#include "util/clock.h"
#include "util/seccomp.h"

struct pp_cpu_state pp_cpu = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .settings = {PP_UNWIND_DWARF, 128, 8, 0},
};

static const struct pp_value_type cpu_types[] = {{"samples", "count"},
                                                 {"cpu", "nanoseconds"}};

void pp_cpu_configure(const struct pp_cpu_settings *s)
{
	pthread_mutex_lock(&pp_cpu.mu);
	pp_cpu.settings = *s;
	pp_cpu_producer.max_open = s->max_windows;
	pthread_mutex_unlock(&pp_cpu.mu);
}

int pp_cpu_seccomp_check(char *err, size_t errlen)
{
	static const enum pp_sc needs[] = {
	    PP_SC_TIMER_CREATE, PP_SC_TIMER_SETTIME, PP_SC_TIMER_DELETE,
	    PP_SC_GETITIMER, PP_SC_SETITIMER};
	enum pp_sc which = PP_SC_PROCESS_VM_READV;
	if (pp_seccomp_refresh_vm_readv() &&
	    pp_seccomp_allowed_all(needs, 5, &which))
		return 0;
	char why[300];
	pp_seccomp_reason(which, why, sizeof why);
	snprintf(err, errlen, "CPU profiling is off in this process: %s (%s)",
	         why,
	         which == PP_SC_PROCESS_VM_READV
	             ? "the stack walks read the stack with it"
	             : "the CPU timers need it");
	return -EPERM;
}

static int window_start(struct pp_job *j, const void *query, char *err,
                        size_t errlen)
{
	const struct pp_cpu_query *q = query;
	struct pp_timers_published now;
	int rc;

	struct pp_cpu_window *w = calloc(1, sizeof *w);
	if (w) /* the period is CPU time, the second value's type */
		w->model = pp_profile_new(cpu_types, 2, &cpu_types[1],
		                          (int64_t)(PP_NS_PER_SEC / q->hz));
	if (!w || !w->model) {
		free(w);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	pp_job_set_data(j, w); /* freed with the job (window_free) */

	/* Asked for each window: a filter may come later. */
	rc = pp_cpu_seccomp_check(err, errlen);
	if (rc)
		return rc;

	pthread_mutex_lock(&pp_cpu.mu);
	pp_timers_published(&now);
	if (pp_cpu.stopping) {
		snprintf(err, errlen, "the agent is stopping");
		rc = -ESHUTDOWN;
		goto out;
	}
	/* Never clobber a signal the host uses itself (another profiler's
	 * SIGPROF, a Go runtime's SIGURG): if neither signal pullprof can
	 * sample with is free, 409 naming why. While sampling, the signal is
	 * chosen already (and checked by the collector). */
	if (!pp_cpu.windows && !now.hz) {
		rc = pp_timers_choose_signal(err, errlen);
		if (rc < 0)
			goto out;
		rc = 0;
	}
	rc = pp_collector_start(err, errlen);
	if (rc)
		goto out;
	if (q->heap && !pp_heap_running()) {
		snprintf(err, errlen,
		         "heap=1: heap profiling is off in this process (start "
		         "it with PULLPROF_HEAP_RATE greater than 0)");
		rc = -ENOTSUP;
		goto out;
	}
	if (q->heap) {
		/* The trace's heap dump is pullprof's own sampler's: where
		 * the wrappers see nothing, say why instead of an empty
		 * dump. */
		struct pp_heap_query hq = {.view = PP_HEAP_INUSE};
		char why[1200];
		int none = pp_heap_resolve(&hq, 0, why, sizeof why);
		if (!none && hq.source != PP_HEAP_SOURCE_INTERPOSED)
			snprintf(why, sizeof why,
			         "this process's heap profile is %s's own "
			         "(/heap), which has no timeline",
			         pp_heap_source_name(
			             (enum pp_heap_source)hq.source));
		if (none || hq.source != PP_HEAP_SOURCE_INTERPOSED) {
			snprintf(err, errlen, "heap=1: %s", why);
			rc = -ENOTSUP;
			goto out;
		}
	}
	if (q->wall) {
		rc = pp_wall_companion_start(
		    j, q->seconds,
		    q->hz < PP_WALL_MAX_HZ ? q->hz : PP_WALL_MAX_HZ, &w->wall,
		    err, errlen);
		if (rc)
			goto out;
	}
	w->heap = q->heap;
	w->model->max_bytes = pp_cpu.settings.max_profile_bytes;
	/* Every window keeps its timeline, so any one (?id=) renders as a
	 * trace: up to half as much again as the profile's bound. */
	w->model->max_events = (pp_cpu.settings.max_profile_bytes
	                            ? pp_cpu.settings.max_profile_bytes
	                            : PP_CPU_TIMELINE_DEFAULT_BYTES) /
	                       2 / PP_EVENT_BYTES;
	w->job = j;
	pp_job_ref(j); /* the list's */
	w->listed = 1;
	w->hz = q->hz;
	w->start_ns = pp_job_opened_ns(j);
	w->asked_ns = (uint64_t)q->seconds * PP_NS_PER_SEC;
	w->end_ns = w->start_ns + w->asked_ns;
	w->model->mono_start_ns = w->start_ns;
	w->model->mono_end_ns = w->end_ns;
	w->start_real_ns = pp_job_opened_real_ns(j);
	w->lost_at_open = pp_cpu_lost_now();
	w->next = pp_cpu.windows;
	pp_cpu.windows = w;
	pthread_cond_signal(&pp_cpu.wake);
out:
	pthread_mutex_unlock(&pp_cpu.mu);
	return rc;
}

/* The wall window beside w, if still there: stopped and let go (by the
 * collector once it took the model, by a cancel, by the job's free). */
void pp_cpu_window_drop_wall(struct pp_cpu_window *w)
{
	struct pp_wall_companion *c =
	    __atomic_exchange_n(&w->wall, NULL, __ATOMIC_ACQ_REL);
	if (c)
		pp_wall_companion_cancel(c);
}

/* Off the list, if still there (lock held); returns whether it was. */
static int unlist(struct pp_cpu_window *w)
{
	if (!w->listed)
		return 0;
	for (struct pp_cpu_window **p = &pp_cpu.windows; *p; p = &(*p)->next)
		if (*p == w) {
			*p = w->next;
			break;
		}
	w->next = NULL;
	w->listed = 0;
	return 1;
}

static void window_cancel(struct pp_job *j)
{
	struct pp_cpu_window *w = pp_job_data(j);
	if (!w)
		return;
	pthread_mutex_lock(&pp_cpu.mu);
	int was = unlist(w);
	if (was)
		pthread_cond_signal(&pp_cpu.wake); /* the rate may drop */
	pthread_mutex_unlock(&pp_cpu.mu);
	if (was) {
		pp_cpu_window_drop_wall(w);
		pp_job_unref(j); /* the list's */
	}
}

static void window_free(void *data)
{
	struct pp_cpu_window *w = data;
	pp_cpu_window_drop_wall(w);
	pp_profile_free(w->model);
	free(w);
}

struct pp_producer pp_cpu_producer = {
    .kind = "profile",
    .what = "CPU profiles",
    .limit_setting = "PULLPROF_MAX_CPU_WINDOWS",
    .max_open = 8,
    .start = window_start,
    .cancel = window_cancel,
    .free = window_free,
};

void pp_cpu_shutdown(void)
{
	pthread_mutex_lock(&pp_cpu.mu);
	pp_collector_stop();
	/* Windows whose jobs the pipeline did not cancel (none, when it
	 * stopped first) are let go. */
	struct pp_cpu_window *left = pp_cpu.windows;
	pp_cpu.windows = NULL;
	for (struct pp_cpu_window *w = left; w; w = w->next)
		w->listed = 0;
	pthread_mutex_unlock(&pp_cpu.mu);
	while (left) {
		struct pp_cpu_window *w = left;
		left = w->next;
		pp_job_unref(w->job);
	}
	/* No timer is left and the handler is no longer installed; one that
	 * started before is waited for before the ring's memory goes: a
	 * second at most. A handler left without returning (shim/cpu_hot.h) on
	 * a thread never sampled again still counts, and one of a thread a
	 * debugger stopped may be running still: the exit of the host must
	 * not wait on either for ever (it did, in pp_cpu_shutdown, for a host
	 * that siglongjmp'd out of its own handler on top of ours). Then the
	 * ring and the unwinder's tables are left as they are (their memory
	 * kept: a handler may still write or read there), and the count
	 * starts again from zero. */
	uint64_t until = pp_clock_ns(CLOCK_MONOTONIC) + PP_NS_PER_SEC;
	while (atomic_load(&pp_sampler.inside) > 0 &&
	       pp_clock_ns(CLOCK_MONOTONIC) < until)
		usleep(100);
	int stuck = atomic_load(&pp_sampler.inside);
	pp_timers_free();
	if (stuck > 0) {
		pp_log("CPU profiler stopped with %d signal handler(s) that "
		       "never returned (a host's handler jumped out of one?): "
		       "its sample ring and unwind tables are left in memory",
		       stuck);
		atomic_store(&pp_sampler.inside, 0);
		pp_sampler.ring.slots = NULL; /* kept mapped */
		pp_cpu.ring_ready = 0;
		return; /* the unwinder stays set up, for the next start */
	}
	if (pp_cpu.ring_ready) {
		pp_ring_free(&pp_sampler.ring);
		pp_cpu.ring_ready = 0;
	}
	if (pp_cpu.unwind_ready) {
		pp_unwind_shutdown();
		pp_cpu.unwind_ready = 0;
	}
}

void pp_cpu_forget_in_child(void)
{
	pp_sampler_forget_tid();
	pp_thread_start_forget_in_child();
	atomic_store(&pp_sampler.active, 0);
	/* A parent thread inside the handler at fork time counted itself in
	 * and never counts out here: pp_cpu_shutdown's wait for handlers to
	 * leave would spin forever, and the child hung in pullprof_stop
	 * (test_safety.py, forks during a 1000 Hz window). */
	atomic_store(&pp_sampler.inside, 0);
	/* Likewise a record it had claimed and not yet published: the child's
	 * collector would wait at that slot for ever, and every CPU profile
	 * of the child came out empty (test_safety.py, 1 run in many). */
	if (pp_cpu.ring_ready)
		pp_ring_reset(&pp_sampler.ring);
	pp_timers_forget_in_child();
	/* The parent's threads may have held these at fork time. */
	pthread_mutex_init(&pp_cpu.mu, NULL);
	pthread_cond_init(&pp_cpu.wake, NULL);
	__atomic_store_n(&pp_cpu.collector_up, 0, __ATOMIC_RELEASE);
	pp_cpu.stopping = 0;
	pp_cpu.take_req = 0;
	pp_cpu.windows = NULL; /* left to leak: their owners are gone */
}

void pp_cpu_stats(struct pp_cpu_stats *o)
{
	struct pp_sampler_shared *s = &pp_sampler;
	struct pp_timers_published t;
	memset(o, 0, sizeof *o);
	pthread_mutex_lock(&pp_cpu.mu);
	pp_timers_published(&t);
	/* Open: sampling for it (or cut, and about to answer). A window
	 * waiting for the sampler to start is not open yet: a client that
	 * waits for it to be open, then starts work, has all of it sampled. */
	for (struct pp_cpu_window *w = pp_cpu.windows; w; w = w->next)
		o->windows_open += w->begun || w->cut;
	o->hz = t.hz;
	o->threads_sampled = t.threads;
	o->signal = t.signo == SIGURG && t.mixed ? "SIGURG+SIGPROF"
	            : t.signo == SIGURG          ? "SIGURG"
	            : t.signo == SIGPROF         ? "SIGPROF"
	                                         : NULL;
	o->threads_sigprof = t.threads_sigprof;
	o->threads_blocking = t.blocked;
	o->foreign = atomic_load(&s->foreign);
	o->timer_mode = !o->hz        ? "off"
	                : t.setitimer ? "setitimer"
	                              : "per-thread";
	o->ring_capacity = pp_cpu.ring_ready ? s->ring.mask + 1 : 0;
	o->ring_high_water =
	    pp_cpu.ring_ready ? atomic_load(&s->ring.high_water) : 0;
	pthread_mutex_unlock(&pp_cpu.mu);
	o->samples = atomic_load(&s->samples);
	o->weighted = atomic_load(&s->weighted);
	o->dropped_ring_full = atomic_load(&s->dropped_ring_full);
	o->handlers_left = atomic_load(&s->handlers_left);
	o->dropped_reclaimed = atomic_load(&s->dropped_reclaimed);
	o->ring_reclaimed =
	    pp_cpu.ring_ready ? atomic_load(&s->ring.reclaimed) : 0;
	o->unwind_truncated = atomic_load(&s->unwind_truncated);
	o->unwind_unknown_code = atomic_load(&s->unwind_unknown_code);
	o->unwind_failed = atomic_load(&s->unwind_failed);
	o->handler_calls = atomic_load(&s->handler_calls);
	o->handler_ns_total = atomic_load(&s->handler_ns_total);
	o->handler_ns_max = atomic_load(&s->handler_ns_max);
	for (size_t i = 0; i <= PP_CPU_HANDLER_BUCKETS; i++)
		o->handler_buckets[i] = atomic_load_explicit(
		    &s->handler_buckets[i], memory_order_relaxed);
	o->unwind_images = pp_unwind_images();
	o->unwind_mode = pp_cpu.settings.unwind;
	o->unwind_compact = pp_unwind_compact();
	o->unwind_fallbacks = pp_unwind_fallbacks();
	o->unwind_stack_checks = pp_unwind_stack_checks();
	pp_unwind_table_stats(&o->tables);
	pp_timers_start_stats(&o->starts_armed, &o->starts_unarmed);
	o->exit_periods = atomic_load(&s->exit_remainders);
}

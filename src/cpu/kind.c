/*
 * The CPU profiler's row in the table of kinds (src/kinds.h): its
 * settings, stop and fork hooks, and its parts of /status and /metrics.
 * /profile and /trace are its routes; a forked tree merges /profile.
 * Context: agent.
 */
#include <string.h>

#include "config.h"
#include "cpu/cpu.h"
#include "kind.h"
#include "unwind/unwind.h"
#include "util/clock.h"
#include "util/prom.h"

static int start(const struct pp_config *c, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	/* Only the settings: the sampler, its ring and the collector start
	 * with the first window. */
	struct pp_cpu_settings s = {
	    .unwind = pp_unwind_mode_parse(c->v.unwind),
	    .max_depth = c->v.max_depth,
	    .max_windows = c->v.max_cpu_windows,
	    .max_profile_bytes = (size_t)c->v.max_profile_mb << 20,
	};
	pp_cpu_configure(&s);
	return 0;
}

static void status(struct json_object *root)
{
	struct pp_cpu_stats c;
	struct json_object *o = json_object_new_object();
	struct json_object *d = json_object_new_object();
	struct json_object *h = json_object_new_object();
	struct json_object *ring = json_object_new_object();

	pp_cpu_stats(&c);
	struct json_object *u = pp_kind_unwind_json(
	    c.unwind_truncated, c.unwind_unknown_code, c.unwind_failed);
	json_object_object_add(o, "timer_mode",
	                       json_object_new_string(c.timer_mode));
	json_object_object_add(o, "hz", PP_JSON_I64(c.hz));
	json_object_object_add(o, "windows_open", PP_JSON_I64(c.windows_open));
	json_object_object_add(o, "threads_sampled",
	                       PP_JSON_I64(c.threads_sampled));
	json_object_object_add(
	    o, "signal", c.signal ? json_object_new_string(c.signal) : NULL);
	json_object_object_add(o, "threads_blocking_signal",
	                       PP_JSON_I64(c.threads_blocking));
	json_object_object_add(o, "threads_sigprof",
	                       PP_JSON_I64(c.threads_sigprof));
	json_object_object_add(o, "foreign_signals", PP_JSON_I64(c.foreign));
	json_object_object_add(o, "samples", PP_JSON_I64(c.samples));
	json_object_object_add(o, "samples_weighted", PP_JSON_I64(c.weighted));
	json_object_object_add(d, "ring_full",
	                       PP_JSON_I64(c.dropped_ring_full));
	json_object_object_add(d, "slot_taken_back",
	                       PP_JSON_I64(c.dropped_reclaimed));
	/* Handlers left without returning (a host's handler jumped out of
	 * one), and their ring slots the collector took back. */
	json_object_object_add(o, "handlers_left",
	                       PP_JSON_I64(c.handlers_left));
	json_object_object_add(o, "ring_slots_taken_back",
	                       PP_JSON_I64(c.ring_reclaimed));
	json_object_object_add(o, "dropped", d);
	json_object_object_add(u, "images", PP_JSON_I64(c.unwind_images));
	json_object_object_add(
	    u, "mode",
	    json_object_new_string(pp_unwind_mode_name(c.unwind_mode)));
	json_object_object_add(u, "compact", PP_JSON_I64(c.unwind_compact));
	json_object_object_add(u, "fallbacks", PP_JSON_I64(c.unwind_fallbacks));
	json_object_object_add(u, "stack_checks",
	                       PP_JSON_I64(c.unwind_stack_checks));
	struct json_object *t = json_object_new_object();
	json_object_object_add(t, "rows", PP_JSON_I64(c.tables.rows));
	json_object_object_add(t, "unsupported_rows",
	                       PP_JSON_I64(c.tables.unsupported_rows));
	json_object_object_add(t, "bytes", PP_JSON_I64(c.tables.bytes));
	json_object_object_add(t, "images_without",
	                       PP_JSON_I64(c.tables.images_without));
	json_object_object_add(u, "tables", t);
	struct json_object *ts = json_object_new_object();
	json_object_object_add(ts, "armed", PP_JSON_I64(c.starts_armed));
	json_object_object_add(ts, "left_to_scan",
	                       PP_JSON_I64(c.starts_unarmed));
	json_object_object_add(ts, "exit_periods", PP_JSON_I64(c.exit_periods));
	json_object_object_add(o, "thread_starts", ts);
	json_object_object_add(o, "unwind", u);
	json_object_object_add(h, "calls", PP_JSON_I64(c.handler_calls));
	pp_kind_add_cost(h, c.handler_calls, c.handler_ns_total,
	                 c.handler_ns_max);
	json_object_object_add(o, "handler", h);
	json_object_object_add(ring, "capacity", PP_JSON_I64(c.ring_capacity));
	json_object_object_add(ring, "high_water",
	                       PP_JSON_I64(c.ring_high_water));
	json_object_object_add(o, "ring", ring);
	json_object_object_add(root, "cpu", o);
}

static void metrics(struct pp_buf *b)
{
	struct pp_cpu_stats c;
	static const char *const modes[] = {"off", "per-thread", "setitimer"};

	pp_cpu_stats(&c);
	pp_prom_gauge(b, "pullprof_cpu_windows_open",
	              "CPU profiles (/profile windows) being sampled now.",
	              c.windows_open);
	pp_prom_gauge(b, "pullprof_cpu_threads_sampled",
	              "Threads with a CPU-time timer armed now.",
	              c.threads_sampled);
	pp_prom_gauge(
	    b, "pullprof_cpu_sampling_frequency_hertz",
	    "Samples per second of CPU time per thread now; 0 when no "
	    "window is open.",
	    c.hz);
	pp_prom_family(b, "pullprof_cpu_timer_mode", "gauge",
	               "1 for the way CPU time is sampled now: per-thread "
	               "timers, the process-wide setitimer fallback, or off "
	               "(no window open).");
	for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
		struct pp_prom_label l = {"mode", modes[i]};
		pp_prom_u64(b, "pullprof_cpu_timer_mode", &l, 1,
		            strcmp(c.timer_mode, modes[i]) == 0);
	}
	/* Like the timer mode: a series per signal, so a dashboard sees
	 * SIGPROF taken (the host handles SIGURG, or threads block it);
	 * all 0 when off. /status says "SIGURG+SIGPROF" when both are. */
	static const char *const sigs[] = {"SIGURG", "SIGPROF"};
	pp_prom_family(b, "pullprof_cpu_timer_signal", "gauge",
	               "1 for each signal the CPU timers raise now: SIGURG, "
	               "and SIGPROF when the host handles SIGURG or for "
	               "threads that block it; all 0 when no window is open.");
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
		struct pp_prom_label l = {"signal", sigs[i]};
		size_t n = strlen(sigs[i]);
		const char *at = c.signal ? strstr(c.signal, sigs[i]) : NULL;
		int in_use = at && (at == c.signal || at[-1] == '+') &&
		             (at[n] == 0 || at[n] == '+');
		pp_prom_u64(b, "pullprof_cpu_timer_signal", &l, 1, in_use);
	}
	pp_prom_gauge(
	    b, "pullprof_cpu_threads_blocking_signal",
	    "Threads not sampled because they block the timers' signal "
	    "(their CPU is charged to a frame of its own).",
	    c.threads_blocking);
	pp_prom_counter(
	    b, "pullprof_cpu_foreign_signals_total",
	    "Signals that reached the CPU sampling handler but were not "
	    "its timers' (a stray kill, a timer of the host's): dropped.",
	    c.foreign);
	pp_prom_counter(
	    b, "pullprof_cpu_samples_total",
	    "CPU samples recorded by the sampling signal's handler.",
	    c.samples);
	pp_prom_counter(
	    b, "pullprof_cpu_sample_periods_total",
	    "Sampling periods the recorded samples stand for: one each, "
	    "plus the timer overruns they carry.",
	    c.weighted);
	{
		const char *why[] = {"ring_full"};
		uint64_t n[] = {c.dropped_ring_full};
		pp_prom_counter_by(
		    b, "pullprof_cpu_samples_dropped_total",
		    "CPU samples not recorded, by reason (ring_full: "
		    "the collector fell behind); profiles charge them "
		    "to a [pullprof: lost samples, the ring was full] "
		    "frame.",
		    "reason", why, n, 1);
	}
	{
		const char *why[] = {"truncated", "unknown_code", "failed"};
		uint64_t n[] = {c.unwind_truncated, c.unwind_unknown_code,
		                c.unwind_failed};
		pp_prom_counter_by(
		    b, "pullprof_cpu_unwind_failures_total",
		    "CPU samples whose stack was not captured whole: "
		    "truncated (deeper than PULLPROF_MAX_DEPTH), unknown_code "
		    "(reached code without registered unwind tables), failed "
		    "(the unwinder gave up).",
		    "reason", why, n, 3);
	}
	double bounds[PP_CPU_HANDLER_BUCKETS];
	for (size_t i = 0; i < PP_CPU_HANDLER_BUCKETS; i++)
		bounds[i] = pp_ns_to_seconds(pp_cpu_handler_bounds_ns[i]);
	pp_prom_histogram(
	    b, "pullprof_cpu_handler_duration_seconds",
	    "Time the sampling signal's handler took per recorded "
	    "sample (stack capture included).",
	    bounds, c.handler_buckets, PP_CPU_HANDLER_BUCKETS,
	    pp_ns_to_seconds(c.handler_ns_total));
	pp_prom_gauge_f(
	    b, "pullprof_cpu_handler_max_duration_seconds",
	    "The longest the sampling signal's handler took for one "
	    "sample.",
	    pp_ns_to_seconds(c.handler_ns_max));
	pp_prom_gauge(
	    b, "pullprof_cpu_ring_capacity",
	    "Samples the ring between the handler and the collector holds.",
	    c.ring_capacity);
	pp_prom_gauge(b, "pullprof_cpu_ring_high_water",
	              "The most samples the ring has held at once.",
	              c.ring_high_water);
	pp_prom_gauge(
	    b, "pullprof_cpu_unwind_images",
	    "Loaded images whose unwind tables are registered for the "
	    "sampling signal's handler.",
	    c.unwind_images);
	pp_prom_counter(
	    b, "pullprof_cpu_unwind_fallbacks_total",
	    "CPU samples the compact frame tables handed to libunwind (a "
	    "frame they cannot describe).",
	    c.unwind_fallbacks);
	pp_prom_gauge(
	    b, "pullprof_cpu_unwind_table_bytes",
	    "Memory the compact frame tables of the loaded images hold.",
	    c.tables.bytes);
	pp_prom_counter(
	    b, "pullprof_cpu_thread_exit_periods_total",
	    "Sampling periods charged at thread exits: CPU a thread used "
	    "after its last scheduler tick, which its timer never "
	    "signalled.",
	    c.exit_periods);
}

extern const struct pp_endpoint pp_cpu_profile_endpoint;
extern const struct pp_endpoint pp_cpu_trace_endpoint;
static const struct pp_endpoint *const endpoints[] = {
    &pp_cpu_profile_endpoint, &pp_cpu_trace_endpoint, NULL};

const struct pp_kind pp_kind_cpu = {
    .name = "cpu",
    .endpoints = endpoints,
    .start = start,
    .stop = pp_cpu_shutdown,
    .forget_in_child = pp_cpu_forget_in_child,
    .status = status,
    .metrics = metrics,
};

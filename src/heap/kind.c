/*
 * The heap profiler's row in the table of kinds (src/kinds.h): sampling
 * starts with the agent when PULLPROF_HEAP_RATE > 0; its parts of /status
 * and /metrics. /heap and /allocs are its routes; a forked tree merges
 * both.
 * Context: agent.
 */
#include "fork/fork.h"
#include "heap/heap.h"
#include "heap/sample.h"
#include "heap/table.h"
#include "http/prom.h"
#include "kinds.h"
#include "unwind/unwind.h"
#include "util/clock.h"

static int start(const struct pp_config *c, char *err, size_t errlen)
{
	if (!c->v.heap_rate)
		return 0;
	struct pp_heap_settings s = {
	    .rate = c->v.heap_rate,
	    .max_depth = c->v.max_depth,
	    .max_profile_bytes = (size_t)c->v.max_profile_mb << 20,
	    .max_pending = c->v.max_heap_profiles,
	};
	return pp_heap_start(&s, err, errlen);
}

static void status(struct json_object *root)
{
	struct pp_heap_stats h;
	struct json_object *o = json_object_new_object();

	pp_heap_stats(&h);
	struct json_object *u = pp_kind_unwind_json(
	    h.unwind_truncated, h.unwind_unknown_code, h.unwind_failed);
	json_object_object_add(o, "enabled",
	                       json_object_new_boolean(h.running));
	json_object_object_add(o, "rate", PP_JSON_I64(h.rate));
	json_object_object_add(o, "sampled", PP_JSON_I64(h.sampled));
	json_object_object_add(o, "sampled_freed",
	                       PP_JSON_I64(h.sampled_freed));
	json_object_object_add(o, "live_sampled", PP_JSON_I64(h.live_objects));
	json_object_object_add(o, "inuse_bytes_estimate",
	                       PP_JSON_I64(h.inuse_bytes));
	json_object_object_add(o, "peak_bytes_estimate",
	                       PP_JSON_I64(h.peak_bytes));
	json_object_object_add(
	    o, "peak_time",
	    h.peak_time > 0 ? json_object_new_double(h.peak_time) : NULL);
	json_object_object_add(o, "stacks", PP_JSON_I64(h.stacks));
	json_object_object_add(o, "buckets", PP_JSON_I64(h.buckets));
	json_object_object_add(o, "table_bytes", PP_JSON_I64(h.table_bytes));
	json_object_object_add(o, "dropped", PP_JSON_I64(h.dropped));
	json_object_object_add(o, "filter_false_hits",
	                       PP_JSON_I64(h.false_hits));
	json_object_object_add(o, "pending_requests", PP_JSON_I64(h.pending));
	json_object_object_add(u, "compact",
	                       PP_JSON_I64(pp_unwind_here_compact()));
	json_object_object_add(u, "fallbacks",
	                       PP_JSON_I64(pp_unwind_here_fallbacks()));
	json_object_object_add(u, "fast", PP_JSON_I64(pp_unwind_fast_traces()));
	json_object_object_add(u, "loader_avoided",
	                       PP_JSON_I64(pp_unwind_loader_avoided()));
	json_object_object_add(u, "timed", PP_JSON_I64(h.unwind_timed));
	pp_kind_add_cost(u, h.unwind_timed, h.unwind_ns_total, h.unwind_ns_max);
	json_object_object_add(o, "unwind", u);
	json_object_object_add(root, "heap", o);
}

static void metrics(struct pp_buf *b)
{
	struct pp_heap_stats h;

	pp_heap_stats(&h);
	pp_prom_gauge(
	    b, "pullprof_heap_sampling_enabled",
	    "1 when allocations are sampled (PULLPROF_HEAP_RATE > 0).",
	    h.running != 0);
	pp_prom_gauge(b, "pullprof_heap_sampling_interval_bytes",
	              "Mean bytes allocated between two sampled allocations "
	              "(PULLPROF_HEAP_RATE).",
	              h.rate);
	pp_prom_counter(b, "pullprof_heap_sampled_allocations_total",
	                "Allocations sampled.", h.sampled);
	pp_prom_counter(b, "pullprof_heap_sampled_bytes_total",
	                "Bytes of the sampled allocations.", h.sampled_bytes);
	pp_prom_counter(b, "pullprof_heap_sampled_frees_total",
	                "Sampled allocations freed.", h.sampled_freed);
	pp_prom_gauge(b, "pullprof_heap_sampled_live_objects",
	              "Sampled allocations not freed yet.", h.live_objects);
	pp_prom_counter(
	    b, "pullprof_heap_estimated_allocated_bytes_total",
	    "Bytes allocated, estimated from the samples (the allocs "
	    "profile's alloc_space).",
	    h.allocated_bytes);
	pp_prom_gauge(
	    b, "pullprof_heap_estimated_inuse_bytes",
	    "Bytes in use, estimated from the sampled allocations not "
	    "freed yet.",
	    h.inuse_bytes);
	pp_prom_gauge(
	    b, "pullprof_heap_estimated_peak_bytes",
	    "The highest estimated in-use bytes since the start (or since "
	    "the last /heap?peak=reset).",
	    h.peak_bytes);
	/* No sample until there is a peak: a made-up time would be a lie a
	 * dashboard shows. */
	pp_prom_family(b, "pullprof_heap_peak_time_seconds", "gauge",
	               "When the estimated in-use bytes peaked, in seconds "
	               "since the Unix epoch (no sample before a peak).");
	if (h.peak_time > 0)
		pp_prom_f64(b, "pullprof_heap_peak_time_seconds", NULL, 0,
		            h.peak_time);
	pp_prom_counter(
	    b, "pullprof_heap_samples_dropped_total",
	    "Sampled allocations not recorded: tables full or out of "
	    "memory.",
	    h.dropped);
	{
		const char *why[] = {"truncated", "unknown_code", "failed"};
		uint64_t n[] = {h.unwind_truncated, h.unwind_unknown_code,
		                h.unwind_failed};
		pp_prom_counter_by(
		    b, "pullprof_heap_unwind_failures_total",
		    "Sampled allocations whose stack was not captured "
		    "whole, by reason (as for CPU samples).",
		    "reason", why, n, 3);
	}
	pp_prom_counter(b, "pullprof_heap_unwind_fallbacks_total",
	                "Sampled allocations whose stack the compact frame "
	                "tables handed to libunwind (a frame they cannot "
	                "describe).",
	                pp_unwind_here_fallbacks());
	pp_prom_family(b, "pullprof_heap_unwind_duration_seconds", "summary",
	               "Time the stack capture of a sampled allocation took "
	               "(of those timed).");
	pp_prom_f64(b, "pullprof_heap_unwind_duration_seconds_sum", NULL, 0,
	            pp_ns_to_seconds(h.unwind_ns_total));
	pp_prom_u64(b, "pullprof_heap_unwind_duration_seconds_count", NULL, 0,
	            h.unwind_timed);
	pp_prom_gauge(b, "pullprof_heap_stacks", "Distinct stacks recorded.",
	              h.stacks);
	pp_prom_gauge(b, "pullprof_heap_buckets",
	              "Distinct (stack, size, labels) buckets recorded.",
	              h.buckets);
	pp_prom_gauge(b, "pullprof_heap_table_bytes",
	              "Memory the heap profiler's tables hold.", h.table_bytes);
	pp_prom_counter(
	    b, "pullprof_heap_filter_false_hits_total",
	    "Frees that passed the sampled-address filter but were not "
	    "sampled.",
	    h.false_hits);
	pp_prom_gauge(b, "pullprof_heap_profiles_pending",
	              "Heap profiles waiting for their window or being built.",
	              h.pending);
}

/* In fork()'s child: heap sampling goes on only in a child that will run
 * an agent of its own (follow mode: what it allocates from its fork on is
 * in its profile); any other has none to show it to, and stops (its own
 * pullprof_start, or a takeover, samples again from then on). */
static void forget_in_child(void)
{
	pp_heap_forget_in_child();
	if (!pp_fork_child_follows())
		pp_heap_sampling_set(0, 0);
}

static const char *const tree_merges[] = {"heap", "allocs", NULL};

const struct pp_kind pp_kind_heap = {
    .name = "heap",
    .tree_merges = tree_merges,
    .start = start,
    .stop = pp_heap_stop,
    .forget_in_child = forget_in_child,
    /* The heap table's lock is taken under the lifecycle's. */
    .register_atfork = pp_heap_table_register_atfork,
    .status = status,
    .metrics = metrics,
};

/*
 * The heap profiler's row in the table of kinds (src/kinds.h): sampling
 * starts with the agent when PULLPROF_HEAP_RATE > 0; its parts of /status
 * and /metrics. /heap and /allocs are its routes; a forked tree merges
 * both.
 * Context: agent.
 */
#include "kind.h"
#include "config.h"
#include "error.h"
#include "fork/fork.h"
#include "heap/detect.h"
#include "heap/heap.h"
#include "heap/sample.h"
#include "heap/table.h"
#include "unwind/unwind.h"
#include "util/clock.h"
#include "util/prom.h"

/* Which allocator the host's allocations reach, found before the agent's
 * threads start (they leave themselves out of its own profiler); said on
 * stderr when /heap cannot come from pullprof's sampler. */
static void find_allocator(const struct pp_config *c)
{
	struct pp_heap_allocator a;
	char why[1200];

	pp_heap_allocator(&a);
	enum pp_heap_source s =
	    pp_heap_source_auto(&a, c->v.heap_rate != 0, 0, why, sizeof why);
	if (s == PP_HEAP_SOURCE_INTERPOSED && !a.interposed)
		return; /* a sanitizer build: its test hosts say nothing */
	if (s == PP_HEAP_SOURCE_NONE && (!a.interposed || a.je.prefixed))
		pp_log("heap: /heap and /allocs have no profile to serve: %s",
		       why);
	else if (s != PP_HEAP_SOURCE_INTERPOSED)
		pp_log("heap: %s; /heap and /allocs serve %s's own profile",
		       a.reason, pp_heap_source_name(s));
}

static int start(const struct pp_config *c, char *err, size_t errlen)
{
	find_allocator(c);
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

/* /status heap.allocator: what the host's malloc reaches, and where
 * /heap comes from. */
static struct json_object *allocator_json(int sampling_on)
{
	struct pp_heap_allocator a;
	struct json_object *o = json_object_new_object();
	char why[1200] = "";

	pp_heap_allocator(&a);
	enum pp_heap_source s =
	    pp_heap_source_auto(&a, sampling_on, 0, why, sizeof why);
	json_object_object_add(o, "interposed",
	                       json_object_new_boolean(a.interposed));
	json_object_object_add(o, "name", json_object_new_string(a.name));
	json_object_object_add(o, "linkage", json_object_new_string(a.linkage));
	json_object_object_add(o, "path", json_object_new_string(a.path));
	json_object_object_add(o, "version",
	                       a.version[0] ? json_object_new_string(a.version)
	                                    : NULL);
	json_object_object_add(o, "reason", json_object_new_string(a.reason));
	json_object_object_add(o, "source",
	                       json_object_new_string(pp_heap_source_name(s)));
	json_object_object_add(
	    o, "unavailable",
	    s == PP_HEAP_SOURCE_NONE ? json_object_new_string(why) : NULL);
	if (a.je.mallctl) {
		struct json_object *j = json_object_new_object();
		json_object_object_add(j, "symbol",
		                       json_object_new_string(a.je.symbol));
		json_object_object_add(j, "path",
		                       json_object_new_string(a.je.path));
		json_object_object_add(j, "version",
		                       json_object_new_string(a.je.version));
		json_object_object_add(
		    j, "profiling_built",
		    json_object_new_boolean(a.je.config_prof));
		json_object_object_add(j, "profiling",
		                       json_object_new_boolean(a.je.opt_prof));
		json_object_object_add(
		    j, "active", json_object_new_boolean(a.je.prof_active));
		json_object_object_add(j, "accum",
		                       json_object_new_boolean(a.je.accum));
		json_object_object_add(
		    j, "sample_interval_bytes",
		    a.je.opt_prof ? PP_JSON_I64(1ull << a.je.lg_sample) : NULL);
		json_object_object_add(j, "allocated_bytes",
		                       PP_JSON_I64(a.je.allocated));
		json_object_object_add(o, "jemalloc", j);
	}
	if (a.tc.linkage != PP_TCMALLOC_NONE) {
		const struct pp_tcmalloc *t = &a.tc;
		struct json_object *j = json_object_new_object();
		json_object_object_add(
		    j, "linkage",
		    json_object_new_string(t->linkage == PP_TCMALLOC_STATIC
		                               ? "static"
		                               : "shared"));
		json_object_object_add(j, "path",
		                       json_object_new_string(t->path));
		json_object_object_add(
		    j, "version",
		    t->version[0] ? json_object_new_string(t->version) : NULL);
		json_object_object_add(j, "minimal",
		                       json_object_new_boolean(t->minimal));
		json_object_object_add(j, "stripped",
		                       json_object_new_boolean(t->stripped));
		json_object_object_add(j, "sample_period",
		                       t->sample_period >= 0
		                           ? PP_JSON_I64(t->sample_period)
		                           : NULL);
		json_object_object_add(
		    j, "period_source",
		    t->period_source && t->period_source[0]
		        ? json_object_new_string(t->period_source)
		        : NULL);
		json_object_object_add(
		    j, "sample_callable",
		    json_object_new_boolean(t->sample_callable));
		json_object_object_add(
		    j, "profiler_running",
		    json_object_new_boolean(t->profiler_running));
		json_object_object_add(
		    j, "new_interposed",
		    json_object_new_boolean(t->new_interposed));
		json_object_object_add(o, "tcmalloc", j);
	}
	return o;
}

/* /status heap.pool: the blocks the host reports (pullprof_heap_alloc). */
static struct json_object *pool_json(void)
{
	struct pp_heap_pool_stats ps;
	struct json_object *o = json_object_new_object();
	pp_heap_table_pool_stats(&ps);
	json_object_object_add(o, "sampled", PP_JSON_I64(ps.sampled));
	json_object_object_add(o, "freed", PP_JSON_I64(ps.freed));
	json_object_object_add(o, "released", PP_JSON_I64(ps.released));
	json_object_object_add(o, "replaced", PP_JSON_I64(ps.replaced));
	json_object_object_add(o, "live", PP_JSON_I64(ps.live));
	json_object_object_add(o, "index_bytes", PP_JSON_I64(ps.index_bytes));
	return o;
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
	json_object_object_add(o, "allocator", allocator_json(h.running));
	json_object_object_add(o, "pool", pool_json());
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
	{
		struct pp_heap_allocator a;
		char why[1200];
		pp_heap_allocator(&a);
		enum pp_heap_source s =
		    pp_heap_source_auto(&a, h.running, 0, why, sizeof why);
		pp_prom_gauge(b, "pullprof_heap_interposed",
		              "1 when the host's malloc calls reach pullprof's "
		              "wrappers.",
		              a.interposed != 0);
		struct pp_prom_label l[] = {
		    {"allocator", a.name},
		    {"linkage", a.linkage},
		    {"version", a.version},
		    {"source", pp_heap_source_name(s)},
		};
		pp_prom_family(b, "pullprof_heap_allocator_info", "gauge",
		               "The allocator behind the host's malloc, and "
		               "where /heap comes from (source: interposed, "
		               "jemalloc, tcmalloc or none).");
		pp_prom_u64(b, "pullprof_heap_allocator_info", l, 4, 1);
	}
	{
		struct pp_heap_pool_stats ps;
		pp_heap_table_pool_stats(&ps);
		pp_prom_counter(b, "pullprof_heap_pool_sampled_total",
		                "Blocks of the host's own pools (reported with "
		                "pullprof_heap_alloc) sampled.",
		                ps.sampled);
		const char *how[] = {"freed", "released", "replaced"};
		uint64_t n[] = {ps.freed, ps.released, ps.replaced};
		pp_prom_counter_by(
		    b, "pullprof_heap_pool_gone_total",
		    "Sampled pool blocks gone, by how: "
		    "pullprof_heap_free, a pullprof_heap_release "
		    "of their range, or their address reported "
		    "again.",
		    "how", how, n, 3);
		pp_prom_gauge(b, "pullprof_heap_pool_live_objects",
		              "Sampled pool blocks not gone yet.", ps.live);
	}
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
	pp_heap_allocator_forget_in_child();
	if (!pp_fork_child_follows())
		pp_heap_sampling_set(0, 0);
}

extern const struct pp_endpoint pp_heap_endpoint;
extern const struct pp_endpoint pp_allocs_endpoint;
static const struct pp_endpoint *const endpoints[] = {
    &pp_heap_endpoint, &pp_allocs_endpoint, NULL};

const struct pp_kind pp_kind_heap = {
    .name = "heap",
    .endpoints = endpoints,
    .start = start,
    .stop = pp_heap_stop,
    .forget_in_child = forget_in_child,
    /* The heap table's lock is taken under the lifecycle's. */
    .register_atfork = pp_heap_table_register_atfork,
    .status = status,
    .metrics = metrics,
};

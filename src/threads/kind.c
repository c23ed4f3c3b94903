/*
 * The thread looks' rows in the table of kinds (src/kinds.h): the thread
 * dump and the wall-clock profile (one module: both look at threads
 * without a signal), and threadcreate (the stacks that made threads);
 * their parts of /status (both under "threads") and /metrics. Routes:
 * /goroutine, /wall and /fgprof; /threadcreate. A forked tree merges all
 * four.
 * Context: agent.
 */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "kind.h"
#include "threads/threads.h"
#include "util/prom.h"
#include "util/seccomp.h"

static int start(const struct pp_config *c, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	/* Only the settings: a wall window starts its own sampler. */
	struct pp_threads_settings s = {
	    .max_depth = c->v.max_depth,
	    .max_profile_bytes = (size_t)c->v.max_profile_mb << 20,
	    .max_dumps = c->v.max_thread_dumps,
	    .max_wall = c->v.max_wall_profiles,
	    .wall_threads = c->v.wall_threads,
	};
	pp_threads_configure(&s);
	return 0;
}

/* The thread dump and the wall-clock profile: how threads were looked at
 * (never with a signal). */
static void status(struct json_object *root)
{
	struct pp_threads_stats t;
	pp_threads_stats(&t);
	struct json_object *o = pp_kind_section(root, "threads");
	struct json_object *w = json_object_new_object();
	struct json_object *l = json_object_new_object();
	json_object_object_add(o, "dumps", PP_JSON_I64(t.dumps));
	json_object_object_add(o, "dumps_open", PP_JSON_I64(t.dumps_open));
	json_object_object_add(w, "open", PP_JSON_I64(t.wall_open));
	json_object_object_add(w, "threads_per_tick",
	                       PP_JSON_I64(t.wall_threads));
	json_object_object_add(w, "ticks", PP_JSON_I64(t.wall_ticks));
	json_object_object_add(w, "late_ticks", PP_JSON_I64(t.wall_late_ticks));
	json_object_object_add(w, "samples", PP_JSON_I64(t.wall_samples));
	json_object_object_add(o, "wall", w);
	json_object_object_add(l, "blocked", PP_JSON_I64(t.blocked));
	json_object_object_add(l, "running", PP_JSON_I64(t.running));
	json_object_object_add(l, "self", PP_JSON_I64(t.self));
	json_object_object_add(l, "gone", PP_JSON_I64(t.gone));
	json_object_object_add(l, "not_caught", PP_JSON_I64(t.not_caught));
	json_object_object_add(l, "moved", PP_JSON_I64(t.moved));
	json_object_object_add(l, "no_perf", PP_JSON_I64(t.no_perf));
	json_object_object_add(l, "denied", PP_JSON_I64(t.denied));
	json_object_object_add(l, "seccomp", PP_JSON_I64(t.seccomp));
	json_object_object_add(l, "walk_incomplete",
	                       PP_JSON_I64(t.walk_incomplete));
	json_object_object_add(o, "looks", l);
	char perf[400];
	if (pp_seccomp_refused(PP_SC_PERF_EVENT_OPEN)) {
		char why[300];
		pp_seccomp_reason(PP_SC_PERF_EVENT_OPEN, why, sizeof why);
		snprintf(perf, sizeof perf,
		         "unavailable: %s (running threads are shown without "
		         "a stack)",
		         why);
	} else if (t.perf_errno)
		snprintf(perf, sizeof perf,
		         "unavailable: perf_event_open: %s (running threads "
		         "are shown without a stack)",
		         strerror(t.perf_errno));
	else
		snprintf(perf, sizeof perf, "%s",
		         t.perf_kernel ? "ok" : "ok (user time only)");
	json_object_object_add(o, "perf_event", json_object_new_string(perf));
}

static void metrics(struct pp_buf *b)
{
	struct pp_threads_stats ts;
	pp_threads_stats(&ts);
	pp_prom_counter(
	    b, "pullprof_thread_looks_denied_total",
	    "Looks at threads off the CPU (thread dumps, wall windows) "
	    "whose stack could not be read because "
	    "/proc/self/task/TID/syscall was refused (the process is not "
	    "dumpable).",
	    ts.denied);
}

extern const struct pp_endpoint pp_goroutine_endpoint, pp_wall_endpoint,
    pp_fgprof_endpoint, pp_threadcreate_endpoint;
static const struct pp_endpoint *const endpoints[] = {
    &pp_goroutine_endpoint, &pp_wall_endpoint, &pp_fgprof_endpoint, NULL};

const struct pp_kind pp_kind_threads = {
    .name = "threads",
    .endpoints = endpoints,
    .start = start,
    .stop = pp_threads_shutdown,
    .forget_in_child = pp_threads_forget_in_child,
    .status = status,
    .metrics = metrics,
};

static int threadcreate_start(const struct pp_config *c, char *err,
                              size_t errlen)
{
	return pp_threadcreate_start(c->v.max_depth, err, errlen);
}

/* Its part of /status, under "threads". */
static void threadcreate_status(struct json_object *root)
{
	struct json_object *tc = json_object_new_object();
	unsigned tc_open;
	size_t tc_stacks;
	uint64_t tc_past;
	pp_threadcreate_stats(&tc_open, &tc_stacks, &tc_past);
	json_object_object_add(tc, "open", PP_JSON_I64(tc_open));
	json_object_object_add(tc, "stacks", PP_JSON_I64(tc_stacks));
	json_object_object_add(tc, "past_table", PP_JSON_I64(tc_past));
	json_object_object_add(pp_kind_section(root, "threads"), "threadcreate",
	                       tc);
}

static const struct pp_endpoint *const threadcreate_endpoints[] = {
    &pp_threadcreate_endpoint, NULL};

const struct pp_kind pp_kind_threadcreate = {
    .name = "threadcreate",
    .endpoints = threadcreate_endpoints,
    .start = threadcreate_start,
    .stop = pp_threadcreate_stop,
    .forget_in_child = pp_threadcreate_forget_in_child,
    .status = threadcreate_status,
};

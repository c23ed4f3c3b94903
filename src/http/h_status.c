/*
 * Process and agent facts: /status and /threads (JSON), /cmdline (as Go
 * serves it).
 * Agent context.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "cpu/cpu.h"
#include "fork.h"
#include "handlers.h"
#include "heap/heap.h"
#include "labels/labels.h"
#include "locks/locks.h"
#include "lookup.h"
#include "respond.h"
#include "server.h"
#include "symbols/symbols.h"
#include "threads/task.h"
#include "threads/threads.h"
#include "unwind/unwind.h"
#include "util/clock.h"
#include "util/fds.h"
#include "util/proc.h"

static struct json_object *time_string(double t)
{
	char buf[40];
	time_t secs = (time_t)t;
	struct tm tm;
	int ms = (int)((t - (double)secs) * 1000.0);

	gmtime_r(&secs, &tm);
	size_t n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, sizeof buf - n, ".%03dZ", ms);
	return json_object_new_string(buf);
}

/* A number printed with millisecond precision, not json-c's 17 digits. */
static struct json_object *seconds(double v)
{
	char buf[40];
	snprintf(buf, sizeof buf, "%.3f", v);
	return json_object_new_double_s(v, buf);
}

static struct json_object *config_json(const struct pp_config *c)
{
	struct json_object *o = json_object_new_object();

	for (size_t i = 0; i < pp_settings_count; i++) {
		const struct pp_setting *s = &pp_settings[i];
		const char *field = (const char *)&c->v + s->offset;
		struct json_object *v;
		if (s->type == PP_SETTING_UINT) {
			v = json_object_new_int64(*(const unsigned *)field);
		} else {
			/* Read as a pointer only where one is: at an unsigned
			 * field's offset the load is misaligned (UBSan). */
			const char *str = *(const char *const *)field;
			if (s->type == PP_SETTING_SECRET)
				/* Never the secret: whether there is one. */
				v = json_object_new_boolean(str != NULL);
			else
				v = str ? json_object_new_string(str) : NULL;
		}
		json_object_object_add(o, s->key, v);
	}
	return o;
}

static struct json_object *requests_json(const struct pp_server_stats *st)
{
	static const char *const classes[PP_STATUS_CLASSES] = {
	    "1xx", "2xx", "3xx", "4xx", "5xx"};
	struct json_object *by = json_object_new_object();
	unsigned long total = 0;

	for (size_t i = 0; i <= pp_routes_count; i++) {
		/* The last row counts requests that matched no route. */
		unsigned row =
		    i < pp_routes_count ? (unsigned)i : PP_MAX_ROUTES;
		const char *name =
		    i < pp_routes_count ? pp_routes[i].name : "other";
		struct json_object *e = json_object_new_object();
		for (int k = 1; k < PP_STATUS_CLASSES; k++) {
			unsigned long n = atomic_load_explicit(
			    &st->requests[row][k], memory_order_relaxed);
			total += n;
			json_object_object_add(
			    e, classes[k], json_object_new_int64((int64_t)n));
		}
		json_object_object_add(by, name, e);
	}
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "total",
	                       json_object_new_int64((int64_t)total));
	json_object_object_add(o, "by_endpoint", by);
	return o;
}

#define I64(v) json_object_new_int64((int64_t)(v))

/* The stack-capture problems every profiler counts, in a new object. */
static struct json_object *unwind_json(uint64_t truncated, uint64_t unknown,
                                       uint64_t failed)
{
	struct json_object *u = json_object_new_object();
	json_object_object_add(u, "truncated", I64(truncated));
	json_object_object_add(u, "unknown_code", I64(unknown));
	json_object_object_add(u, "failed", I64(failed));
	return u;
}

/* The mean and the largest of `n` costs adding up to total_ns. */
static void add_cost(struct json_object *o, uint64_t n, uint64_t total_ns,
                     uint64_t max_ns)
{
	json_object_object_add(o, "mean_ns", I64(n ? total_ns / n : 0));
	json_object_object_add(o, "max_ns", I64(max_ns));
}

static struct json_object *cpu_json(void)
{
	struct pp_cpu_stats c;
	struct json_object *o = json_object_new_object();
	struct json_object *d = json_object_new_object();
	struct json_object *h = json_object_new_object();
	struct json_object *ring = json_object_new_object();

	pp_cpu_stats(&c);
	struct json_object *u = unwind_json(
	    c.unwind_truncated, c.unwind_unknown_code, c.unwind_failed);
	json_object_object_add(o, "timer_mode",
	                       json_object_new_string(c.timer_mode));
	json_object_object_add(o, "hz", I64(c.hz));
	json_object_object_add(o, "windows_open", I64(c.windows_open));
	json_object_object_add(o, "threads_sampled", I64(c.threads_sampled));
	json_object_object_add(
	    o, "signal", c.signal ? json_object_new_string(c.signal) : NULL);
	json_object_object_add(o, "threads_blocking_signal",
	                       I64(c.threads_blocking));
	json_object_object_add(o, "threads_sigprof", I64(c.threads_sigprof));
	json_object_object_add(o, "foreign_signals", I64(c.foreign));
	json_object_object_add(o, "samples", I64(c.samples));
	json_object_object_add(o, "samples_weighted", I64(c.weighted));
	json_object_object_add(d, "ring_full", I64(c.dropped_ring_full));
	json_object_object_add(o, "dropped", d);
	json_object_object_add(u, "images", I64(c.unwind_images));
	json_object_object_add(
	    u, "mode",
	    json_object_new_string(pp_unwind_mode_name(c.unwind_mode)));
	json_object_object_add(u, "compact", I64(c.unwind_compact));
	json_object_object_add(u, "fallbacks", I64(c.unwind_fallbacks));
	json_object_object_add(u, "stack_checks", I64(c.unwind_stack_checks));
	struct json_object *t = json_object_new_object();
	json_object_object_add(t, "rows", I64(c.tables.rows));
	json_object_object_add(t, "unsupported_rows",
	                       I64(c.tables.unsupported_rows));
	json_object_object_add(t, "bytes", I64(c.tables.bytes));
	json_object_object_add(t, "images_without",
	                       I64(c.tables.images_without));
	json_object_object_add(u, "tables", t);
	struct json_object *ts = json_object_new_object();
	json_object_object_add(ts, "armed", I64(c.starts_armed));
	json_object_object_add(ts, "left_to_scan", I64(c.starts_unarmed));
	json_object_object_add(ts, "exit_periods", I64(c.exit_periods));
	json_object_object_add(o, "thread_starts", ts);
	json_object_object_add(o, "unwind", u);
	json_object_object_add(h, "calls", I64(c.handler_calls));
	add_cost(h, c.handler_calls, c.handler_ns_total, c.handler_ns_max);
	json_object_object_add(o, "handler", h);
	json_object_object_add(ring, "capacity", I64(c.ring_capacity));
	json_object_object_add(ring, "high_water", I64(c.ring_high_water));
	json_object_object_add(o, "ring", ring);
	return o;
}

static struct json_object *heap_json(void)
{
	struct pp_heap_stats h;
	struct json_object *o = json_object_new_object();

	pp_heap_stats(&h);
	struct json_object *u = unwind_json(
	    h.unwind_truncated, h.unwind_unknown_code, h.unwind_failed);
	json_object_object_add(o, "enabled",
	                       json_object_new_boolean(h.running));
	json_object_object_add(o, "rate", I64(h.rate));
	json_object_object_add(o, "sampled", I64(h.sampled));
	json_object_object_add(o, "sampled_freed", I64(h.sampled_freed));
	json_object_object_add(o, "live_sampled", I64(h.live_objects));
	json_object_object_add(o, "inuse_bytes_estimate", I64(h.inuse_bytes));
	json_object_object_add(o, "peak_bytes_estimate", I64(h.peak_bytes));
	json_object_object_add(
	    o, "peak_time",
	    h.peak_time > 0 ? json_object_new_double(h.peak_time) : NULL);
	json_object_object_add(o, "stacks", I64(h.stacks));
	json_object_object_add(o, "buckets", I64(h.buckets));
	json_object_object_add(o, "table_bytes", I64(h.table_bytes));
	json_object_object_add(o, "dropped", I64(h.dropped));
	json_object_object_add(o, "filter_false_hits", I64(h.false_hits));
	json_object_object_add(o, "pending_requests", I64(h.pending));
	json_object_object_add(u, "compact", I64(pp_unwind_here_compact()));
	json_object_object_add(u, "fallbacks", I64(pp_unwind_here_fallbacks()));
	json_object_object_add(u, "fast", I64(pp_unwind_fast_traces()));
	json_object_object_add(u, "loader_avoided",
	                       I64(pp_unwind_loader_avoided()));
	json_object_object_add(u, "timed", I64(h.unwind_timed));
	add_cost(u, h.unwind_timed, h.unwind_ns_total, h.unwind_ns_max);
	json_object_object_add(o, "unwind", u);
	return o;
}

/* The thread dump and the wall-clock profile: how threads were looked at
 * (never with a signal). */
static struct json_object *threads_json(void)
{
	struct pp_threads_stats t;
	pp_threads_stats(&t);
	struct json_object *o = json_object_new_object();
	struct json_object *w = json_object_new_object();
	struct json_object *l = json_object_new_object();
	json_object_object_add(o, "dumps", I64(t.dumps));
	json_object_object_add(o, "dumps_open", I64(t.dumps_open));
	json_object_object_add(w, "open", I64(t.wall_open));
	json_object_object_add(w, "threads_per_tick", I64(t.wall_threads));
	json_object_object_add(w, "ticks", I64(t.wall_ticks));
	json_object_object_add(w, "late_ticks", I64(t.wall_late_ticks));
	json_object_object_add(w, "samples", I64(t.wall_samples));
	json_object_object_add(o, "wall", w);
	json_object_object_add(l, "blocked", I64(t.blocked));
	json_object_object_add(l, "running", I64(t.running));
	json_object_object_add(l, "self", I64(t.self));
	json_object_object_add(l, "gone", I64(t.gone));
	json_object_object_add(l, "not_caught", I64(t.not_caught));
	json_object_object_add(l, "moved", I64(t.moved));
	json_object_object_add(l, "no_perf", I64(t.no_perf));
	json_object_object_add(l, "denied", I64(t.denied));
	json_object_object_add(l, "walk_incomplete", I64(t.walk_incomplete));
	json_object_object_add(o, "looks", l);
	struct json_object *tc = json_object_new_object();
	unsigned tc_open;
	size_t tc_stacks;
	uint64_t tc_past;
	pp_threadcreate_stats(&tc_open, &tc_stacks, &tc_past);
	json_object_object_add(tc, "open", I64(tc_open));
	json_object_object_add(tc, "stacks", I64(tc_stacks));
	json_object_object_add(tc, "past_table", I64(tc_past));
	json_object_object_add(o, "threadcreate", tc);
	char perf[160];
	if (t.perf_errno)
		snprintf(perf, sizeof perf,
		         "unavailable: perf_event_open: %s (running threads "
		         "are shown without a stack)",
		         strerror(t.perf_errno));
	else
		snprintf(perf, sizeof perf, "%s",
		         t.perf_kernel ? "ok" : "ok (user time only)");
	json_object_object_add(o, "perf_event", json_object_new_string(perf));
	return o;
}

/* The mutex and block profiles: their rates and what was recorded. */
static struct json_object *locks_json(void)
{
	struct pp_locks_stats s;
	pp_locks_stats(&s);
	struct json_object *o = json_object_new_object();
	static const char *const names[PP_LK_NKINDS] = {"mutex", "block"};
	const unsigned rates[PP_LK_NKINDS] = {s.mutex_rate, s.block_rate};
	const unsigned open[PP_LK_NKINDS] = {s.mutex_open, s.block_open};
	for (int k = 0; k < PP_LK_NKINDS; k++) {
		struct json_object *m = json_object_new_object();
		json_object_object_add(m, "rate", I64(rates[k]));
		json_object_object_add(m, "open", I64(open[k]));
		json_object_object_add(m, "events", I64(s.events[k]));
		json_object_object_add(m, "stacks", I64(s.stacks[k]));
		json_object_object_add(m, "past_table", I64(s.past_table[k]));
		json_object_object_add(m, "dropped", I64(s.dropped[k]));
		json_object_object_add(o, names[k], m);
	}
	json_object_object_add(o, "waiting", I64(s.waiting));
	json_object_object_add(o, "slot_collisions", I64(s.collisions));
	return o;
}

enum MHD_Result pp_h_status(struct pp_request *r)
{
	const struct pp_agent *a = pp_agent_get();
	const struct pp_server_stats *st = &r->srv->stats;
	struct json_object *o = json_object_new_object();
	struct timespec now;
	char *args = NULL, *exe;
	size_t len = 0, argc = 0;

	json_object_object_add(o, "version",
	                       json_object_new_string(PACKAGE_VERSION));
	json_object_object_add(o, "pid", json_object_new_int(getpid()));
	exe = pp_proc_exe();
	json_object_object_add(o, "executable",
	                       exe ? pp_json_text(exe, strlen(exe)) : NULL);
	free(exe);

	struct json_object *argv = json_object_new_array();
	if (pp_proc_cmdline(&args, &len, &argc) == 0) {
		for (size_t k = 0, at = 0; k < argc; k++) {
			size_t n = strnlen(args + at, len - at);
			json_object_array_add(argv, pp_json_text(args + at, n));
			at += n + 1;
		}
		free(args);
	}
	json_object_object_add(o, "cmdline", argv);

	clock_gettime(CLOCK_REALTIME, &now);
	double t_now = pp_timespec_seconds(&now);
	json_object_object_add(o, "start_time", time_string(a->start_time));
	json_object_object_add(o, "uptime_seconds",
	                       seconds(pp_seconds_since(&a->start_mono)));
	double pstart = pp_proc_start_time();
	if (pstart > 0) {
		json_object_object_add(o, "process_start_time",
		                       time_string(pstart));
		json_object_object_add(o, "process_uptime_seconds",
		                       seconds(fmax(0.0, t_now - pstart)));
	}
	json_object_object_add(o, "listen",
	                       json_object_new_string(r->srv->bound));
	json_object_object_add(o, "port", json_object_new_int(r->srv->port));
	json_object_object_add(o, "autostarted",
	                       json_object_new_boolean(a->autostarted));
	json_object_object_add(o, "config", config_json(&a->cfg));
	json_object_object_add(o, "requests", requests_json(st));

	struct json_object *conn = json_object_new_object();
	json_object_object_add(conn, "active",
	                       json_object_new_int64((int64_t)atomic_load(
	                           &st->connections_active)));
	json_object_object_add(conn, "total",
	                       json_object_new_int64((int64_t)atomic_load(
	                           &st->connections_total)));
	json_object_object_add(conn, "refused",
	                       json_object_new_int64((int64_t)atomic_load(
	                           &st->connections_refused)));
	json_object_object_add(conn, "timed_out",
	                       json_object_new_int64((int64_t)atomic_load(
	                           &st->connections_timed_out)));
	json_object_object_add(conn, "evicted",
	                       json_object_new_int64((int64_t)atomic_load(
	                           &st->connections_evicted)));
	json_object_object_add(
	    conn, "waiting",
	    json_object_new_int64((int64_t)pp_server_waiting_count(r->srv)));
	json_object_object_add(conn, "reserved",
	                       json_object_new_int64((int64_t)atomic_load(
	                           &st->connections_reserved)));
	json_object_object_add(
	    conn, "waits_refused",
	    json_object_new_int64((int64_t)atomic_load(&st->windows_refused)));
	json_object_object_add(
	    conn, "server_errors",
	    json_object_new_int64((int64_t)atomic_load(&st->server_errors)));
	json_object_object_add(o, "connections", conn);
	struct json_object *ans = json_object_new_object();
	json_object_object_add(ans, "bytes",
	                       json_object_new_int64((int64_t)atomic_load(
	                           &r->srv->answers_bytes)));
	json_object_object_add(
	    ans, "refused",
	    json_object_new_int64((int64_t)atomic_load(&st->answers_refused)));
	json_object_object_add(o, "answers", ans);

	struct pp_fds_stats fs;
	pp_fds_stats(&fs);
	struct json_object *fds = json_object_new_object();
	json_object_object_add(fds, "held", I64(fs.held));
	json_object_object_add(fds, "share", I64(fs.share));
	json_object_object_add(fds, "limit", I64(fs.limit));
	json_object_object_add(fds, "refused", I64(fs.refused));
	/* The host closed descriptors of the server (server.c): how often
	 * that was found, the last one, how often the server was set up
	 * again. */
	json_object_object_add(fds, "lost",
	                       I64(atomic_load(&r->srv->fds_lost)));
	json_object_object_add(fds, "lost_last",
	                       r->srv->lost_what[0]
	                           ? json_object_new_string(r->srv->lost_what)
	                           : NULL);
	json_object_object_add(fds, "server_restarts",
	                       I64(atomic_load(&r->srv->restarts)));
	json_object_object_add(o, "descriptors", fds);

	/* Across fork (fork.h): the mode, this process's part in a tree. */
	struct pp_fork_stats fk;
	pp_fork_stats(&fk);
	struct json_object *fo = json_object_new_object();
	const struct pp_agent *ag = pp_agent_get();
	json_object_object_add(fo, "mode",
	                       json_object_new_string(ag && ag->cfg.v.fork_mode
	                                                  ? ag->cfg.v.fork_mode
	                                                  : "adopt"));
	if (pp_tree_dir()[0]) {
		pid_t members[1];
		json_object_object_add(fo, "dir",
		                       json_object_new_string(pp_tree_dir()));
		json_object_object_add(fo, "root", I64(pp_tree_root()));
		json_object_object_add(
		    fo, "role",
		    json_object_new_string(
		        pp_tree_root() == getpid() ? "root" : "member"));
		json_object_object_add(fo, "processes",
		                       I64(pp_tree_members(members, 1)));
	}
	json_object_object_add(fo, "takeovers", I64(fk.takeovers));
	json_object_object_add(fo, "watchers", I64(fk.watchers));
	json_object_object_add(o, "fork", fo);

	struct pp_symtab_stats ss;
	pp_symtab_stats(&ss);
	struct json_object *sym = json_object_new_object();
	json_object_object_add(sym, "mappings",
	                       json_object_new_int64((int64_t)ss.mappings));
	json_object_object_add(sym, "cached_addresses",
	                       json_object_new_int64((int64_t)ss.cached));
	json_object_object_add(sym, "lookups",
	                       json_object_new_int64((int64_t)ss.lookups));
	json_object_object_add(sym, "cache_hits",
	                       json_object_new_int64((int64_t)ss.hits));
	json_object_object_add(sym, "refreshes",
	                       json_object_new_int64((int64_t)ss.refreshes));
	json_object_object_add(
	    sym, "files_changed",
	    json_object_new_int64((int64_t)pp_mappings_changed_count()));
	json_object_object_add(o, "symbols", sym);

	struct pp_lookup_stats ls;
	pp_lookups_stats(r->srv->lookups, &ls);
	struct json_object *lk = json_object_new_object();
	json_object_object_add(lk, "max", I64(ls.max));
	json_object_object_add(lk, "queued", I64(ls.queued));
	json_object_object_add(lk, "running", I64(ls.running));
	json_object_object_add(lk, "done", I64(ls.done));
	json_object_object_add(lk, "cancelled", I64(ls.cancelled));
	json_object_object_add(lk, "refused", I64(ls.refused));
	json_object_object_add(o, "lookups", lk);

	struct pp_label_stats lb;
	pp_labels_stats(&lb);
	struct json_object *labels = json_object_new_object();
	json_object_object_add(labels, "sets", I64(lb.sets));
	json_object_object_add(labels, "refused", I64(lb.refused));
	json_object_object_add(o, "labels", labels);
	json_object_object_add(o, "cpu", cpu_json());
	json_object_object_add(o, "heap", heap_json());
	json_object_object_add(o, "threads", threads_json());
	json_object_object_add(o, "locks", locks_json());
	return pp_respond_json(r, MHD_HTTP_OK, o);
}

/* Liveness for load balancers and orchestrators: open without the token,
 * so it says nothing but that the agent answers. */
enum MHD_Result pp_h_healthz(struct pp_request *r)
{
	static const char ok[] = "ok\n";
	return pp_respond(r, MHD_HTTP_OK, "text/plain; charset=utf-8", ok,
	                  sizeof ok - 1, PP_BODY_STATIC);
}

enum MHD_Result pp_h_cmdline(struct pp_request *r)
{
	char *args;
	size_t len, argc;

	if (pp_proc_cmdline(&args, &len, &argc) != 0)
		return pp_respond_error(r, MHD_HTTP_SERVICE_UNAVAILABLE,
		                        "cannot read /proc/self/cmdline");
	/* The arguments' bytes exactly, NUL-separated, with Go's content
	 * type: the one answer that is not repaired into UTF-8 (a client may
	 * need the bytes as they are, to run the command again; NULs make it
	 * no text anyway). /status's "cmdline" has them as text. */
	return pp_respond(r, MHD_HTTP_OK, "text/plain; charset=utf-8", args,
	                  len, PP_BODY_FREE);
}

/* One thread, or NULL when it is gone. */
static struct json_object *thread_json(pid_t tid)
{
	struct pp_task_stat st;
	if (pp_task_stat(tid, &st))
		return NULL;
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "tid", json_object_new_int64(tid));
	json_object_object_add(o, "name",
	                       pp_json_text(st.name, strlen(st.name)));
	json_object_object_add(o, "main",
	                       json_object_new_boolean(tid == getpid()));
	json_object_object_add(
	    o, "agent", json_object_new_boolean(pp_agent_thread_is(tid)));
	char letter[2] = {st.state, 0};
	json_object_object_add(o, "state", json_object_new_string(letter));
	json_object_object_add(
	    o, "state_name",
	    json_object_new_string(pp_task_state_name(st.state)));
	json_object_object_add(o, "user_seconds",
	                       seconds((double)st.utime_ns / 1e9));
	json_object_object_add(o, "system_seconds",
	                       seconds((double)st.stime_ns / 1e9));
	json_object_object_add(o, "nice", json_object_new_int(st.nice));
	json_object_object_add(o, "last_cpu", json_object_new_int(st.last_cpu));
	return o;
}

enum MHD_Result pp_h_threads(struct pp_request *r)
{
	pid_t *tids;
	size_t n;

	if (pp_task_list(&tids, &n)) {
		char why[512];
		if (pp_respond_no_proc(why, sizeof why))
			return pp_respond_error(
			    r, MHD_HTTP_SERVICE_UNAVAILABLE,
			    "cannot read /proc/self/task: %s", why);
		return pp_respond_error(r, MHD_HTTP_SERVICE_UNAVAILABLE,
		                        "cannot read /proc/self/task");
	}
	struct json_object *o = json_object_new_object();
	struct json_object *list = json_object_new_array();
	for (size_t i = 0; i < n; i++) {
		struct json_object *t = thread_json(tids[i]);
		if (t) /* NULL: it ended meanwhile */
			json_object_array_add(list, t);
	}
	free(tids);
	json_object_object_add(o, "pid", json_object_new_int((int)getpid()));
	json_object_object_add(
	    o, "count",
	    json_object_new_int((int)json_object_array_length(list)));
	json_object_object_add(o, "threads", list);
	return pp_respond_json(r, MHD_HTTP_OK, o);
}

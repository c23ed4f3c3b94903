/*
 * Process and agent facts: /status and /threads (JSON), /cmdline (as Go
 * serves it).
 * Context: agent.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "agent_threads.h"
#include "fork/fork.h"
#include "handlers.h"
#include "kinds.h"
#include "labels/labels.h"
#include "server/lookup.h"
#include "server/respond.h"
#include "server/server.h"
#include "shim/agentmem.h"
#include "shim/shim.h"
#include "symbols/symbols.h"
#include "threads/task.h"
#include "util/clock.h"
#include "util/fds.h"
#include "util/proc.h"
#include "util/seccomp.h"

/* What the agent holds of the process's address space (RLIMIT_AS counts
 * it): its threads' stacks, its own heap (shim/agentmem.c), and the
 * process's VmSize beside them. */
static struct json_object *address_space_json(void)
{
	struct json_object *as = json_object_new_object();
	struct pp_agentmem_stats ms = {0};
	if (pp_shim.agentmem_stats)
		pp_shim.agentmem_stats(&ms);
	int64_t threads = pp_agent_threads_running();
	json_object_object_add(as, "threads", PP_JSON_I64(threads));
	json_object_object_add(as, "stack_bytes",
	                       PP_JSON_I64((int64_t)PP_AGENT_STACK));
	json_object_object_add(as, "stacks",
	                       PP_JSON_I64(threads * (int64_t)PP_AGENT_STACK));
	json_object_object_add(as, "own_heap", json_object_new_boolean(ms.on));
	json_object_object_add(as, "heap", PP_JSON_I64(ms.chunks + ms.large));
	json_object_object_add(as, "heap_peak", PP_JSON_I64(ms.peak));
	json_object_object_add(as, "heap_failures", PP_JSON_I64(ms.failures));
	long kb = -1;
	char *text = NULL;
	size_t len = 0;
	if (pp_proc_read_file("/proc/self/status", 1 << 16, &text, &len) == 0) {
		const char *v = strstr(text, "\nVmSize:");
		if (v)
			kb = strtol(v + 8, NULL, 10);
		free(text);
	}
	json_object_object_add(as, "process_vm_size",
	                       kb >= 0 ? PP_JSON_I64((int64_t)kb * 1024)
	                               : NULL);
	struct rlimit rl;
	json_object_object_add(as, "limit",
	                       getrlimit(RLIMIT_AS, &rl) == 0 &&
	                               rl.rlim_cur != RLIM_INFINITY
	                           ? PP_JSON_I64((int64_t)rl.rlim_cur)
	                           : NULL);
	return as;
}

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

static struct json_object *requests_json(const struct pp_server *srv)
{
	const struct pp_server_stats *st = &srv->stats;
	const struct pp_route *routes = srv->facts->routes;
	size_t nroutes = srv->facts->nroutes;
	static const char *const classes[PP_STATUS_CLASSES] = {
	    "1xx", "2xx", "3xx", "4xx", "5xx"};
	struct json_object *by = json_object_new_object();
	unsigned long total = 0;

	for (size_t i = 0; i <= nroutes; i++) {
		/* The last row counts requests that matched no route. */
		unsigned row = i < nroutes ? (unsigned)i : PP_MAX_ROUTES;
		const char *name = i < nroutes ? routes[i].name : "other";
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

enum MHD_Result pp_h_status(struct pp_request *r)
{
	const struct pp_agent_facts *a = r->srv->facts;
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
	json_object_object_add(o, "config", config_json(a->cfg));
	json_object_object_add(o, "requests", requests_json(r->srv));

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
	    conn, "lost",
	    json_object_new_int64((int64_t)atomic_load(&st->connections_lost)));
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
	json_object_object_add(fds, "held", PP_JSON_I64(fs.held));
	json_object_object_add(fds, "share", PP_JSON_I64(fs.share));
	json_object_object_add(fds, "limit", PP_JSON_I64(fs.limit));
	json_object_object_add(fds, "refused", PP_JSON_I64(fs.refused));
	json_object_object_add(fds, "server_keeps", PP_JSON_I64(fs.base));
	json_object_object_add(fds, "share_too_small",
	                       json_object_new_boolean(fs.too_small));
	json_object_object_add(fds, "limit_needed",
	                       fs.too_small ? PP_JSON_I64(fs.needed) : NULL);
	/* The host closed descriptors of the server (server/loop.c): how often
	 * that was found, the last one, how often the server was set up
	 * again. */
	json_object_object_add(fds, "lost",
	                       PP_JSON_I64(atomic_load(&r->srv->fds_lost)));
	json_object_object_add(fds, "lost_last",
	                       r->srv->lost_what[0]
	                           ? json_object_new_string(r->srv->lost_what)
	                           : NULL);
	json_object_object_add(fds, "server_restarts",
	                       PP_JSON_I64(atomic_load(&r->srv->restarts)));
	json_object_object_add(o, "descriptors", fds);

	/* Seccomp (util/seccomp.h): the filter this thread is under and
	 * what each late call's probe found. */
	int sc_mode;
	long sc_filters;
	pp_seccomp_thread(&sc_mode, &sc_filters);
	struct pp_seccomp_stats sc;
	pp_seccomp_stats(&sc);
	struct json_object *sco = json_object_new_object();
	json_object_object_add(sco, "mode", json_object_new_int(sc_mode));
	json_object_object_add(
	    sco, "filters", sc_filters >= 0 ? PP_JSON_I64(sc_filters) : NULL);
	json_object_object_add(sco, "probes", PP_JSON_I64(sc.probes));
	json_object_object_add(sco, "refusals", PP_JSON_I64(sc.refusals));
	struct json_object *calls = json_object_new_object();
	for (int i = 0; i < PP_SC_COUNT; i++) {
		const struct pp_seccomp_call *c = &sc.calls[i];
		struct json_object *co = json_object_new_object();
		json_object_object_add(
		    co, "verdict",
		    json_object_new_string(
		        pp_seccomp_verdict_name(c->verdict)));
		if (c->verdict == PP_SCV_FORBIDDEN)
			json_object_object_add(
			    co, "signal",
			    json_object_new_string(c->signo == SIGSYS ? "SIGSYS"
			                           : c->signo == SIGKILL
			                               ? "SIGKILL"
			                               : strsignal(c->signo)));
		if (c->verdict != PP_SCV_UNASKED) {
			const char *e =
			    !c->err ? NULL
			    : c->verdict == PP_SCV_UNPROBED && c->err == EXDEV
			        ? "the first thread has a filter this one has "
			          "not"
			        : strerror(c->err);
			json_object_object_add(
			    co, "error", e ? json_object_new_string(e) : NULL);
			json_object_object_add(
			    co, "under_filters",
			    c->filters >= 0 ? PP_JSON_I64(c->filters) : NULL);
			json_object_object_add(co, "probes",
			                       PP_JSON_I64(c->probes));
		}
		json_object_object_add(calls, c->name, co);
	}
	json_object_object_add(sco, "calls", calls);
	json_object_object_add(o, "seccomp", sco);
	json_object_object_add(o, "address_space", address_space_json());

	/* Across fork (fork.h): the mode, this process's part in a tree. */
	struct pp_fork_stats fk;
	pp_fork_stats(&fk);
	struct json_object *fo = json_object_new_object();
	json_object_object_add(fo, "mode",
	                       json_object_new_string(r->cfg->v.fork_mode
	                                                  ? r->cfg->v.fork_mode
	                                                  : "adopt"));
	if (pp_tree_dir()[0]) {
		pid_t members[1];
		json_object_object_add(fo, "dir",
		                       json_object_new_string(pp_tree_dir()));
		json_object_object_add(fo, "root", PP_JSON_I64(pp_tree_root()));
		json_object_object_add(
		    fo, "role",
		    json_object_new_string(
		        pp_tree_root() == getpid() ? "root" : "member"));
		json_object_object_add(
		    fo, "processes", PP_JSON_I64(pp_tree_members(members, 1)));
	}
	json_object_object_add(fo, "takeovers", PP_JSON_I64(fk.takeovers));
	json_object_object_add(fo, "watchers", PP_JSON_I64(fk.watchers));
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
	json_object_object_add(lk, "max", PP_JSON_I64(ls.max));
	json_object_object_add(lk, "queued", PP_JSON_I64(ls.queued));
	json_object_object_add(lk, "running", PP_JSON_I64(ls.running));
	json_object_object_add(lk, "done", PP_JSON_I64(ls.done));
	json_object_object_add(lk, "cancelled", PP_JSON_I64(ls.cancelled));
	json_object_object_add(lk, "refused", PP_JSON_I64(ls.refused));
	json_object_object_add(o, "lookups", lk);

	struct pp_label_stats lb;
	pp_labels_stats(&lb);
	struct json_object *labels = json_object_new_object();
	json_object_object_add(labels, "sets", PP_JSON_I64(lb.sets));
	json_object_object_add(labels, "refused", PP_JSON_I64(lb.refused));
	json_object_object_add(o, "labels", labels);
	/* Each kind's section(s): cpu, heap, threads, locks. */
	pp_kinds_status(o);
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

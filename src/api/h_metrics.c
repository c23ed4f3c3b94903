/*
 * <prefix>/metrics (and PULLPROF_METRICS_PATH): the agent's own counters
 * and the process's basics in Prometheus's text format, for a monitoring
 * system to alert on. The same facts /status gives, read the same cheap
 * way (atomics and short locks), written straight into one buffer: every
 * Prometheus scrapes this every 15 seconds or so.
 * Context: agent.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "ask/args.h"
#include "handlers.h"
#include "kinds.h"
#include "labels/labels.h"
#include "profile/pb.h"
#include "server/lookup.h"
#include "server/respond.h"
#include "server/server.h"
#include "symbols/symbols.h"
#include "util/clock.h"
#include "util/fds.h"
#include "util/proc.h"
#include "util/prom.h"

static void agent_metrics(struct pp_buf *b, const struct pp_agent_facts *a)
{
	struct pp_prom_label v = {"version", PACKAGE_VERSION};

	pp_prom_family(b, "pullprof_build_info", "gauge",
	               "Always 1; the label says which pullprof version runs.");
	pp_prom_u64(b, "pullprof_build_info", &v, 1, 1);
	pp_prom_gauge_f(
	    b, "pullprof_start_time_seconds",
	    "When the agent started, in seconds since the Unix epoch.",
	    a->start_time);
}

static void http_metrics(struct pp_buf *b, struct pp_server *srv)
{
	const struct pp_server_stats *st = &srv->stats;
	const struct pp_route *routes = srv->facts->routes;
	size_t nroutes = srv->facts->nroutes;
	static const char *const classes[PP_STATUS_CLASSES] = {
	    "1xx", "2xx", "3xx", "4xx", "5xx"};
	const char *name = "pullprof_http_requests_total";

	pp_prom_family(b, name, "counter",
	               "HTTP requests answered, by endpoint (the route's "
	               "name; other: no route matched) and status class.");
	for (size_t i = 0; i <= nroutes; i++) {
		/* The last row counts requests that matched no route. */
		unsigned row = i < nroutes ? (unsigned)i : PP_MAX_ROUTES;
		struct pp_prom_label l[2] = {
		    {"endpoint", i < nroutes ? routes[i].name : "other"},
		    {"code", NULL}};
		/* 1xx is never answered. */
		for (int k = 1; k < PP_STATUS_CLASSES; k++) {
			l[1].value = classes[k];
			pp_prom_u64(b, name, l, 2,
			            atomic_load_explicit(&st->requests[row][k],
			                                 memory_order_relaxed));
		}
	}
	pp_prom_gauge(b, "pullprof_http_connections_active",
	              "HTTP connections open now.",
	              atomic_load(&st->connections_active));
	pp_prom_counter(b, "pullprof_http_connections_total",
	                "HTTP connections accepted.",
	                atomic_load(&st->connections_total));
	pp_prom_counter(
	    b, "pullprof_http_connections_refused_total",
	    "HTTP connections closed unanswered: over "
	    "PULLPROF_MAX_CONNECTIONS or PULLPROF_MAX_CLIENT_CONNECTIONS.",
	    atomic_load(&st->connections_refused));
	pp_prom_counter(b, "pullprof_http_connections_timed_out_total",
	                "HTTP connections closed because their request did not "
	                "arrive whole within PULLPROF_REQUEST_TIMEOUT.",
	                atomic_load(&st->connections_timed_out));
	pp_prom_counter(
	    b, "pullprof_http_connections_evicted_total",
	    "HTTP connections waiting for a request that were closed to "
	    "make room for a new one at a connection limit.",
	    atomic_load(&st->connections_evicted));
	pp_prom_counter(
	    b, "pullprof_http_connections_lost_total",
	    "HTTP connections the host closed under the agent the moment "
	    "they were accepted, before their descriptor moved above the "
	    "host's numbers.",
	    atomic_load(&st->connections_lost));
	pp_prom_gauge(
	    b, "pullprof_http_connections_waiting",
	    "HTTP connections whose request waits now (a profile window, "
	    "a thread dump, a lookup).",
	    pp_server_waiting_count(srv));
	pp_prom_counter(
	    b, "pullprof_http_connections_reserved_total",
	    "HTTP connections let in past a connection limit on a place "
	    "kept for requests answered at once (healthz, status, "
	    "metrics, the index).",
	    atomic_load(&st->connections_reserved));
	pp_prom_counter(
	    b, "pullprof_http_waits_refused_total",
	    "Requests answered 429 because profile windows held their "
	    "share of a connection limit, or because they would wait on "
	    "a kept place.",
	    atomic_load(&st->windows_refused));
	/* The host closing the server's descriptors (closefrom in a
	 * daemon's start-up) is rare and silent but for one stderr line: a
	 * counter is what an alert can see. */
	pp_prom_counter(
	    b, "pullprof_http_descriptors_lost_total",
	    "Times the agent found a descriptor of its HTTP server closed "
	    "by the host (a listening socket, wake-up pipe, epoll set or "
	    "connection no longer the file it opened).",
	    atomic_load(&srv->fds_lost));
	pp_prom_counter(
	    b, "pullprof_http_server_restarts_total",
	    "Times the HTTP server was set up again on its address after "
	    "the host closed its descriptors.",
	    atomic_load(&srv->restarts));
	pp_prom_gauge(b, "pullprof_http_answers_bytes",
	              "Bytes of answers being sent now (bounded by "
	              "PULLPROF_MAX_ANSWERS_MB).",
	              atomic_load(&srv->answers_bytes));
	pp_prom_counter(b, "pullprof_http_answers_refused_total",
	                "Requests answered 503 because answers in flight held "
	                "PULLPROF_MAX_ANSWERS_MB.",
	                atomic_load(&st->answers_refused));
	pp_prom_counter(
	    b, "pullprof_http_server_errors_total",
	    "Problems the HTTP server (libmicrohttpd) reported, mostly "
	    "clients': resets, malformed requests.",
	    atomic_load(&st->server_errors));
}

static void other_metrics(struct pp_buf *b, struct pp_lookups *lookups)
{
	struct pp_symtab_stats ss;
	struct pp_lookup_stats ls;
	struct pp_label_stats lb;

	pp_symtab_stats(&ss);
	pp_prom_gauge(b, "pullprof_symbols_mappings",
	              "Executable mappings the symbolizer knows.", ss.mappings);
	pp_prom_gauge(b, "pullprof_symbols_cached_addresses",
	              "Addresses whose symbols are cached.", ss.cached);
	pp_prom_counter(b, "pullprof_symbols_lookups_total",
	                "Addresses symbolized (cache hits included).",
	                ss.lookups);
	pp_prom_counter(b, "pullprof_symbols_cache_hits_total",
	                "Addresses symbolized from the cache.", ss.hits);
	pp_prom_counter(
	    b, "pullprof_symbols_refreshes_total",
	    "Times the mappings were read again because they changed.",
	    ss.refreshes);
	pp_prom_counter(
	    b, "pullprof_symbols_files_changed_total",
	    "Loaded files found changed under their mappings (truncated "
	    "or written over in place); their addresses are left "
	    "unsymbolized.",
	    pp_mappings_changed_count());

	pp_lookups_stats(lookups, &ls);
	pp_prom_gauge(
	    b, "pullprof_lookups_queued",
	    "/symbol and /maps requests waiting for the lookup thread.",
	    ls.queued);
	pp_prom_gauge(b, "pullprof_lookups_running",
	              "/symbol and /maps requests being answered.", ls.running);
	pp_prom_counter(b, "pullprof_lookups_completed_total",
	                "/symbol and /maps lookups completed.", ls.done);
	pp_prom_counter(
	    b, "pullprof_lookups_cancelled_total",
	    "/symbol and /maps lookups cancelled (client gone, agent "
	    "stopping).",
	    ls.cancelled);
	pp_prom_counter(b, "pullprof_lookups_refused_total",
	                "/symbol and /maps requests refused with 429 "
	                "(PULLPROF_MAX_LOOKUPS).",
	                ls.refused);

	pp_labels_stats(&lb);
	pp_prom_gauge(b, "pullprof_label_sets",
	              "Distinct profile label sets made by pullprof_label_push "
	              "(each is kept for the life of the process).",
	              lb.sets);
	pp_prom_counter(
	    b, "pullprof_label_pushes_refused_total",
	    "pullprof_label_push calls refused: bad key or value, too "
	    "deep, or the table of label sets full.",
	    lb.refused);
}

/* Open descriptors: the entries of /proc/self/fd, less the one reading it. */
static long open_fds(void)
{
	DIR *d = pp_fds_opendir("/proc/self/fd");
	struct dirent *e;
	long n = 0;

	if (!d)
		return -1;
	int own = dirfd(d);
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.' && atoi(e->d_name) != own)
			n++;
	pp_fds_closedir(d);
	return n;
}

/* When the process started, computed once per process: Prometheus takes a
 * change of process_start_time_seconds for a restart. A forked child
 * starts anew. */
static double start_time(void)
{
	static double cached;
	static pid_t cached_pid;
	pid_t pid = getpid();

	if (cached_pid != pid) {
		double t = pp_proc_start_time();
		if (t <= 0)
			return t;
		cached = t;
		cached_pid = pid;
	}
	return cached;
}

/* The names Prometheus's own client libraries use, so the dashboards
 * and alerts written for them work here. */
static void process_metrics(struct pp_buf *b)
{
	char *stat = NULL;
	size_t len;
	unsigned long long f[24] = {0};
	int n = 0;

	if (pp_proc_read_file("/proc/self/stat", 4096, &stat, &len) == 0) {
		/* "pid (comm) S ppid ...": the name may hold spaces and
		 * parentheses, so the fields start after the last ')'; f[0]
		 * is field 4 (ppid). */
		char *p = strrchr(stat, ')');
		if (p && p[1] == ' ' && p[2] && p[3] == ' ') {
			p += 4;
			while (n < 24 && *p) {
				char *end;
				f[n] = strtoull(p, &end, 10);
				if (end == p)
					break;
				n++;
				p = end;
			}
		}
		free(stat);
	}
	long ticks = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	if (n >= 21 && ticks > 0 && page > 0) {
		/* utime(14) stime(15) num_threads(20) vsize(23) rss(24) */
		pp_prom_family(b, "process_cpu_seconds_total", "counter",
		               "User and system CPU time the process spent, in "
		               "seconds.");
		pp_prom_f64(b, "process_cpu_seconds_total", NULL, 0,
		            (double)(f[10] + f[11]) / (double)ticks);
		pp_prom_gauge(b, "process_resident_memory_bytes",
		              "Resident memory size in bytes.",
		              (uint64_t)f[20] * (uint64_t)page);
		pp_prom_gauge(b, "process_virtual_memory_bytes",
		              "Virtual memory size in bytes.", f[19]);
		pp_prom_gauge(b, "process_threads", "Threads in the process.",
		              f[16]);
	}
	long fds = open_fds();
	if (fds >= 0)
		pp_prom_gauge(b, "process_open_fds", "Open file descriptors.",
		              (uint64_t)fds);
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		pp_prom_gauge(
		    b, "process_max_fds",
		    "Most open file descriptors allowed (the soft limit).",
		    rl.rlim_cur);
	double t = start_time();
	if (t > 0)
		pp_prom_gauge_f(
		    b, "process_start_time_seconds",
		    "When the process started, in seconds since the Unix "
		    "epoch.",
		    t);
}

enum MHD_Result pp_h_metrics(struct pp_request *r)
{
	struct pp_buf b = {0};
	char *body;
	size_t len = 0;

	agent_metrics(&b, r->srv->facts);
	http_metrics(&b, r->srv);
	pp_kinds_metrics(&b); /* each kind's families */
	other_metrics(&b, r->srv->lookups);
	process_metrics(&b);
	if (!b.failed &&
	    pp_args_takes_gzip(MHD_lookup_connection_value(
	        r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING))) {
		/* Prometheus asks for gzip: about 20 KB become 3. */
		struct pp_buf z = {0};
		struct pp_pb pb;
		int rc = pp_pb_init(&pb, &z, 1);
		if (!rc) {
			pp_pb_raw(&pb, b.data, b.len);
			rc = pp_pb_finish(&pb);
		}
		pp_buf_free(&b);
		b = z;
		if (rc)
			b.failed = 1;
		pp_respond_header(r, "Content-Encoding", "gzip");
	}
	pp_respond_header(r, "Vary", "Accept-Encoding");
	body = b.failed ? NULL : pp_buf_take(&b, &len);
	pp_buf_free(&b);
	if (!body) {
		/* The Content-Encoding queued above must not describe the
		 * error's plain text. */
		memset(r->headers, 0, sizeof r->headers);
		return pp_respond_error(r, MHD_HTTP_SERVICE_UNAVAILABLE,
		                        "out of memory while writing the "
		                        "metrics");
	}
	return pp_respond(r, MHD_HTTP_OK, PP_PROM_CONTENT_TYPE, body, len,
	                  PP_BODY_FREE);
}

/*
 * <prefix>/metrics (and PULLPROF_METRICS_PATH): the agent's own counters
 * and the process's basics in Prometheus's text format, for a monitoring
 * system to alert on. The same facts /status gives, read the same cheap
 * way (atomics and short locks), written straight into one buffer: every
 * Prometheus scrapes this every 15 seconds or so.
 * Agent context.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "agent.h"
#include "args.h"
#include "cpu/cpu.h"
#include "handlers.h"
#include "heap/heap.h"
#include "labels/labels.h"
#include "locks/locks.h"
#include "lookup.h"
#include "profile/pb.h"
#include "prom.h"
#include "respond.h"
#include "server.h"
#include "symbols/symbols.h"
#include "threads/threads.h"
#include "util/clock.h"
#include "util/fds.h"
#include "util/proc.h"

static void counter(struct pp_buf *b, const char *name, const char *help,
                    uint64_t v)
{
	pp_prom_family(b, name, "counter", help);
	pp_prom_u64(b, name, NULL, 0, v);
}

static void gauge(struct pp_buf *b, const char *name, const char *help,
                  uint64_t v)
{
	pp_prom_family(b, name, "gauge", help);
	pp_prom_u64(b, name, NULL, 0, v);
}

static void gauge_f(struct pp_buf *b, const char *name, const char *help,
                    double v)
{
	pp_prom_family(b, name, "gauge", help);
	pp_prom_f64(b, name, NULL, 0, v);
}

/* One counter family with one label: names[i] = values[i]. */
static void counter_by(struct pp_buf *b, const char *name, const char *help,
                       const char *label, const char *const *names,
                       const uint64_t *values, size_t n)
{
	pp_prom_family(b, name, "counter", help);
	for (size_t i = 0; i < n; i++) {
		struct pp_prom_label l = {label, names[i]};
		pp_prom_u64(b, name, &l, 1, values[i]);
	}
}

static void agent_metrics(struct pp_buf *b, const struct pp_agent *a)
{
	struct pp_prom_label v = {"version", PACKAGE_VERSION};

	pp_prom_family(b, "pullprof_build_info", "gauge",
	               "Always 1; the label says which pullprof version runs.");
	pp_prom_u64(b, "pullprof_build_info", &v, 1, 1);
	gauge_f(b, "pullprof_start_time_seconds",
	        "When the agent started, in seconds since the Unix epoch.",
	        a->start_time);
}

static void http_metrics(struct pp_buf *b, struct pp_server *srv)
{
	const struct pp_server_stats *st = &srv->stats;
	static const char *const classes[PP_STATUS_CLASSES] = {
	    "1xx", "2xx", "3xx", "4xx", "5xx"};
	const char *name = "pullprof_http_requests_total";

	pp_prom_family(b, name, "counter",
	               "HTTP requests answered, by endpoint (the route's "
	               "name; other: no route matched) and status class.");
	for (size_t i = 0; i <= pp_routes_count; i++) {
		/* The last row counts requests that matched no route. */
		unsigned row =
		    i < pp_routes_count ? (unsigned)i : PP_MAX_ROUTES;
		struct pp_prom_label l[2] = {
		    {"endpoint",
		     i < pp_routes_count ? pp_routes[i].name : "other"},
		    {"code", NULL}};
		/* 1xx is never answered. */
		for (int k = 1; k < PP_STATUS_CLASSES; k++) {
			l[1].value = classes[k];
			pp_prom_u64(b, name, l, 2,
			            atomic_load_explicit(&st->requests[row][k],
			                                 memory_order_relaxed));
		}
	}
	gauge(b, "pullprof_http_connections_active",
	      "HTTP connections open now.",
	      atomic_load(&st->connections_active));
	counter(b, "pullprof_http_connections_total",
	        "HTTP connections accepted.",
	        atomic_load(&st->connections_total));
	counter(b, "pullprof_http_connections_refused_total",
	        "HTTP connections closed unanswered: over "
	        "PULLPROF_MAX_CONNECTIONS or PULLPROF_MAX_CLIENT_CONNECTIONS.",
	        atomic_load(&st->connections_refused));
	counter(b, "pullprof_http_connections_timed_out_total",
	        "HTTP connections closed because their request did not "
	        "arrive whole within PULLPROF_REQUEST_TIMEOUT.",
	        atomic_load(&st->connections_timed_out));
	counter(b, "pullprof_http_connections_evicted_total",
	        "HTTP connections waiting for a request that were closed to "
	        "make room for a new one at a connection limit.",
	        atomic_load(&st->connections_evicted));
	gauge(b, "pullprof_http_connections_waiting",
	      "HTTP connections whose request waits now (a profile window, "
	      "a thread dump, a lookup).",
	      pp_server_waiting_count(srv));
	counter(b, "pullprof_http_connections_reserved_total",
	        "HTTP connections let in past a connection limit on a place "
	        "kept for requests answered at once (healthz, status, "
	        "metrics, the index).",
	        atomic_load(&st->connections_reserved));
	counter(b, "pullprof_http_waits_refused_total",
	        "Requests answered 429 because profile windows held their "
	        "share of a connection limit, or because they would wait on "
	        "a kept place.",
	        atomic_load(&st->windows_refused));
	/* The host closing the server's descriptors (closefrom in a
	 * daemon's start-up) is rare and silent but for one stderr line: a
	 * counter is what an alert can see. */
	counter(b, "pullprof_http_descriptors_lost_total",
	        "Times the agent found a descriptor of its HTTP server closed "
	        "by the host (a listening socket, wake-up pipe, epoll set or "
	        "connection no longer the file it opened).",
	        atomic_load(&srv->fds_lost));
	counter(b, "pullprof_http_server_restarts_total",
	        "Times the HTTP server was set up again on its address after "
	        "the host closed its descriptors.",
	        atomic_load(&srv->restarts));
	gauge(b, "pullprof_http_answers_bytes",
	      "Bytes of answers being sent now (bounded by "
	      "PULLPROF_MAX_ANSWERS_MB).",
	      atomic_load(&srv->answers_bytes));
	counter(b, "pullprof_http_answers_refused_total",
	        "Requests answered 503 because answers in flight held "
	        "PULLPROF_MAX_ANSWERS_MB.",
	        atomic_load(&st->answers_refused));
	counter(b, "pullprof_http_server_errors_total",
	        "Problems the HTTP server (libmicrohttpd) reported, mostly "
	        "clients': resets, malformed requests.",
	        atomic_load(&st->server_errors));
}

static void cpu_metrics(struct pp_buf *b)
{
	struct pp_cpu_stats c;
	static const char *const modes[] = {"off", "per-thread", "setitimer"};

	pp_cpu_stats(&c);
	gauge(b, "pullprof_cpu_windows_open",
	      "CPU profiles (/profile windows) being sampled now.",
	      c.windows_open);
	gauge(b, "pullprof_cpu_threads_sampled",
	      "Threads with a CPU-time timer armed now.", c.threads_sampled);
	gauge(b, "pullprof_cpu_sampling_frequency_hertz",
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
	gauge(b, "pullprof_cpu_threads_blocking_signal",
	      "Threads not sampled because they block the timers' signal "
	      "(their CPU is charged to a frame of its own).",
	      c.threads_blocking);
	counter(b, "pullprof_cpu_foreign_signals_total",
	        "Signals that reached the CPU sampling handler but were not "
	        "its timers' (a stray kill, a timer of the host's): dropped.",
	        c.foreign);
	counter(b, "pullprof_cpu_samples_total",
	        "CPU samples recorded by the sampling signal's handler.",
	        c.samples);
	counter(b, "pullprof_cpu_sample_periods_total",
	        "Sampling periods the recorded samples stand for: one each, "
	        "plus the timer overruns they carry.",
	        c.weighted);
	{
		const char *why[] = {"ring_full"};
		uint64_t n[] = {c.dropped_ring_full};
		counter_by(b, "pullprof_cpu_samples_dropped_total",
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
		counter_by(
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
	gauge_f(b, "pullprof_cpu_handler_max_duration_seconds",
	        "The longest the sampling signal's handler took for one "
	        "sample.",
	        pp_ns_to_seconds(c.handler_ns_max));
	gauge(b, "pullprof_cpu_ring_capacity",
	      "Samples the ring between the handler and the collector holds.",
	      c.ring_capacity);
	gauge(b, "pullprof_cpu_ring_high_water",
	      "The most samples the ring has held at once.", c.ring_high_water);
	gauge(b, "pullprof_cpu_unwind_images",
	      "Loaded images whose unwind tables are registered for the "
	      "sampling signal's handler.",
	      c.unwind_images);
	counter(b, "pullprof_cpu_unwind_fallbacks_total",
	        "CPU samples the compact frame tables handed to libunwind (a "
	        "frame they cannot describe).",
	        c.unwind_fallbacks);
	gauge(b, "pullprof_cpu_unwind_table_bytes",
	      "Memory the compact frame tables of the loaded images hold.",
	      c.tables.bytes);
	counter(b, "pullprof_cpu_thread_exit_periods_total",
	        "Sampling periods charged at thread exits: CPU a thread used "
	        "after its last scheduler tick, which its timer never "
	        "signalled.",
	        c.exit_periods);
}

static void heap_metrics(struct pp_buf *b)
{
	struct pp_heap_stats h;

	pp_heap_stats(&h);
	gauge(b, "pullprof_heap_sampling_enabled",
	      "1 when allocations are sampled (PULLPROF_HEAP_RATE > 0).",
	      h.running != 0);
	gauge(b, "pullprof_heap_sampling_interval_bytes",
	      "Mean bytes allocated between two sampled allocations "
	      "(PULLPROF_HEAP_RATE).",
	      h.rate);
	counter(b, "pullprof_heap_sampled_allocations_total",
	        "Allocations sampled.", h.sampled);
	counter(b, "pullprof_heap_sampled_bytes_total",
	        "Bytes of the sampled allocations.", h.sampled_bytes);
	counter(b, "pullprof_heap_sampled_frees_total",
	        "Sampled allocations freed.", h.sampled_freed);
	gauge(b, "pullprof_heap_sampled_live_objects",
	      "Sampled allocations not freed yet.", h.live_objects);
	counter(b, "pullprof_heap_estimated_allocated_bytes_total",
	        "Bytes allocated, estimated from the samples (the allocs "
	        "profile's alloc_space).",
	        h.allocated_bytes);
	gauge(b, "pullprof_heap_estimated_inuse_bytes",
	      "Bytes in use, estimated from the sampled allocations not "
	      "freed yet.",
	      h.inuse_bytes);
	gauge(b, "pullprof_heap_estimated_peak_bytes",
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
	counter(b, "pullprof_heap_samples_dropped_total",
	        "Sampled allocations not recorded: tables full or out of "
	        "memory.",
	        h.dropped);
	{
		const char *why[] = {"truncated", "unknown_code", "failed"};
		uint64_t n[] = {h.unwind_truncated, h.unwind_unknown_code,
		                h.unwind_failed};
		counter_by(b, "pullprof_heap_unwind_failures_total",
		           "Sampled allocations whose stack was not captured "
		           "whole, by reason (as for CPU samples).",
		           "reason", why, n, 3);
	}
	pp_prom_family(b, "pullprof_heap_unwind_duration_seconds", "summary",
	               "Time the stack capture of a sampled allocation took "
	               "(of those timed).");
	pp_prom_f64(b, "pullprof_heap_unwind_duration_seconds_sum", NULL, 0,
	            pp_ns_to_seconds(h.unwind_ns_total));
	pp_prom_u64(b, "pullprof_heap_unwind_duration_seconds_count", NULL, 0,
	            h.unwind_timed);
	gauge(b, "pullprof_heap_stacks", "Distinct stacks recorded.", h.stacks);
	gauge(b, "pullprof_heap_buckets",
	      "Distinct (stack, size, labels) buckets recorded.", h.buckets);
	gauge(b, "pullprof_heap_table_bytes",
	      "Memory the heap profiler's tables hold.", h.table_bytes);
	counter(b, "pullprof_heap_filter_false_hits_total",
	        "Frees that passed the sampled-address filter but were not "
	        "sampled.",
	        h.false_hits);
	gauge(b, "pullprof_heap_profiles_pending",
	      "Heap profiles waiting for their window or being built.",
	      h.pending);
}

static void lock_metrics(struct pp_buf *b)
{
	struct pp_locks_stats s;
	pp_locks_stats(&s);
	static const char *const names[PP_LK_NKINDS] = {"mutex", "block"};
	uint64_t rates[PP_LK_NKINDS] = {s.mutex_rate, s.block_rate};
	pp_prom_family(b, "pullprof_lock_sampling_rate", "gauge",
	               "The rate each lock profile samples at (mutex: 1 in N "
	               "contended unlocks; block: one sample per N ns "
	               "waited); 0: off.");
	for (int k = 0; k < PP_LK_NKINDS; k++) {
		struct pp_prom_label l = {"profile", names[k]};
		pp_prom_u64(b, "pullprof_lock_sampling_rate", &l, 1, rates[k]);
	}
	counter_by(b, "pullprof_lock_events_total",
	           "Sampled lock events recorded, by profile.", "profile",
	           names, s.events, PP_LK_NKINDS);
	counter_by(b, "pullprof_lock_events_dropped_total",
	           "Sampled lock events lost because the event ring was full, "
	           "by profile.",
	           "profile", names, s.dropped, PP_LK_NKINDS);
	gauge(b, "pullprof_lock_waiting_threads",
	      "Threads waiting for a mutex or rwlock now, as the mutex "
	      "profile counts them.",
	      s.waiting);
}

static void other_metrics(struct pp_buf *b, struct pp_lookups *lookups)
{
	struct pp_symtab_stats ss;
	struct pp_lookup_stats ls;
	struct pp_label_stats lb;

	pp_symtab_stats(&ss);
	gauge(b, "pullprof_symbols_mappings",
	      "Executable mappings the symbolizer knows.", ss.mappings);
	gauge(b, "pullprof_symbols_cached_addresses",
	      "Addresses whose symbols are cached.", ss.cached);
	counter(b, "pullprof_symbols_lookups_total",
	        "Addresses symbolized (cache hits included).", ss.lookups);
	counter(b, "pullprof_symbols_cache_hits_total",
	        "Addresses symbolized from the cache.", ss.hits);
	counter(b, "pullprof_symbols_refreshes_total",
	        "Times the mappings were read again because they changed.",
	        ss.refreshes);
	counter(b, "pullprof_symbols_files_changed_total",
	        "Loaded files found changed under their mappings (truncated "
	        "or written over in place); their addresses are left "
	        "unsymbolized.",
	        pp_mappings_changed_count());

	struct pp_threads_stats ts;
	pp_threads_stats(&ts);
	counter(b, "pullprof_thread_looks_denied_total",
	        "Looks at threads off the CPU (thread dumps, wall windows) "
	        "whose stack could not be read because "
	        "/proc/self/task/TID/syscall was refused (the process is not "
	        "dumpable).",
	        ts.denied);

	pp_lookups_stats(lookups, &ls);
	gauge(b, "pullprof_lookups_queued",
	      "/symbol and /maps requests waiting for the lookup thread.",
	      ls.queued);
	gauge(b, "pullprof_lookups_running",
	      "/symbol and /maps requests being answered.", ls.running);
	counter(b, "pullprof_lookups_completed_total",
	        "/symbol and /maps lookups completed.", ls.done);
	counter(b, "pullprof_lookups_cancelled_total",
	        "/symbol and /maps lookups cancelled (client gone, agent "
	        "stopping).",
	        ls.cancelled);
	counter(b, "pullprof_lookups_refused_total",
	        "/symbol and /maps requests refused with 429 "
	        "(PULLPROF_MAX_LOOKUPS).",
	        ls.refused);

	pp_labels_stats(&lb);
	gauge(b, "pullprof_label_sets",
	      "Distinct profile label sets made by pullprof_label_push "
	      "(each is kept for the life of the process).",
	      lb.sets);
	counter(b, "pullprof_label_pushes_refused_total",
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
		gauge(b, "process_resident_memory_bytes",
		      "Resident memory size in bytes.",
		      (uint64_t)f[20] * (uint64_t)page);
		gauge(b, "process_virtual_memory_bytes",
		      "Virtual memory size in bytes.", f[19]);
		gauge(b, "process_threads", "Threads in the process.", f[16]);
	}
	long fds = open_fds();
	if (fds >= 0)
		gauge(b, "process_open_fds", "Open file descriptors.",
		      (uint64_t)fds);
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		gauge(b, "process_max_fds",
		      "Most open file descriptors allowed (the soft limit).",
		      rl.rlim_cur);
	double t = start_time();
	if (t > 0)
		gauge_f(b, "process_start_time_seconds",
		        "When the process started, in seconds since the Unix "
		        "epoch.",
		        t);
}

enum MHD_Result pp_h_metrics(struct pp_request *r)
{
	struct pp_buf b = {0};
	char *body;
	size_t len = 0;

	agent_metrics(&b, pp_agent_get());
	http_metrics(&b, r->srv);
	cpu_metrics(&b);
	heap_metrics(&b);
	lock_metrics(&b);
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

/*
 * pullprof — profile a running native process over HTTP.
 *
 * This is the only installed header. A host either links libpullprof and
 * calls pullprof_start(), or loads the library with LD_PRELOAD and sets
 * PULLPROF_LISTEN, in which case the agent starts by itself. A program may
 * also write profiles itself, with or without the HTTP server
 * (pullprof_write_cpu_profile, pullprof_write_heap_profile).
 *
 * Every function that can fail returns 0 or a negative errno value, each
 * with one meaning across the API (listed with each function below);
 * pullprof_strerror() turns such a value into a sentence for people. The
 * rules by which this interface changes between versions are in
 * docs/abi.md.
 */
#ifndef PULLPROF_H
#define PULLPROF_H

#ifdef __cplusplus
extern "C" {
#endif

#include <stddef.h>

#if defined(__GNUC__)
#define PULLPROF_API __attribute__((visibility("default")))
#else
#define PULLPROF_API
#endif

/*
 * Agent configuration. Always fill it with pullprof_config_init() first, then
 * change the fields you care about.
 *
 * The struct is the caller's (on its stack, say) and may outlive library
 * versions: pullprof_config_init() records in struct_size how large the
 * caller's header declared it, and the library never reads or writes past
 * that size. Fields are only ever appended, never reordered or removed, so
 * a program built against an older header gets the defaults for every
 * field it does not know, and a newer header's fields are ignored by an
 * older library. A field marked "(Since X.)" was added in pullprof X (the
 * version pullprof_version() returns); the others are there since 1.0.0.
 * (The rules for versions and the struct's size in each: docs/abi.md.)
 *
 * At start, every field is overridden by its PULLPROF_* environment variable
 * when that variable is set (the operator has the last word), unless
 * ignore_env is non-zero. String fields are copied; the caller keeps
 * ownership.
 */
struct pullprof_config {
	/* sizeof(struct pullprof_config) as the caller's header has it; set
	 * by pullprof_config_init(), not by hand. */
	size_t struct_size;
	/* "host:port", "[v6addr]:port", ":port" (all IPv4 interfaces) or
	 * "port" (loopback). Port 0 picks any free port; see pullprof_port().
	 * "none": no HTTP server at all (nothing is bound, no token needed);
	 * the profilers run and the program writes profiles itself with
	 * pullprof_write_cpu_profile() and pullprof_write_heap_profile().
	 * PULLPROF_LISTEN, default "127.0.0.1:6060". */
	const char *listen;
	/* URL path under which every endpoint is served ("" serves at the
	 * root). PULLPROF_PREFIX, default "/debug/pprof". */
	const char *prefix;
	/* Most simultaneous HTTP connections; more are refused at accept.
	 * PULLPROF_MAX_CONNECTIONS, default 32. */
	unsigned max_connections;
	/* Seconds an idle connection may stay open before it is closed.
	 * PULLPROF_IDLE_TIMEOUT, default 30. */
	unsigned idle_timeout;
	/* CPU profiles: default sampling rate (1..1000 Hz) when a request does
	 * not say. PULLPROF_CPU_HZ, default 100. */
	unsigned cpu_hz;
	/* Longest CPU profile a request may ask for, in seconds (1..86400).
	 * PULLPROF_MAX_SECONDS, default 300. */
	unsigned max_seconds;
	/* Most CPU profile windows open at once (1..64); more get 429.
	 * PULLPROF_MAX_CPU_WINDOWS, default 8. */
	unsigned max_cpu_windows;
	/* Deepest stack recorded (8..512 frames). PULLPROF_MAX_DEPTH,
	 * default 128. */
	unsigned max_depth;
	/* How the CPU profiler unwinds stacks: "dwarf" (compact tables made
	 * from the code's DWARF CFI, libunwind where they cannot say: works
	 * without frame pointers), "libunwind" (libunwind for every frame)
	 * or "fp" (frame pointers: cheapest, needs code built with
	 * -fno-omit-frame-pointer). PULLPROF_UNWIND, default "dwarf". */
	const char *unwind;
	/* Heap profiles: mean number of bytes allocated between two sampled
	 * allocations (0 turns heap sampling off: the interposed malloc
	 * family is then a plain pass-through; 1 samples every allocation;
	 * at most 2^30). PULLPROF_HEAP_RATE, default 524288. */
	unsigned heap_rate;
	/* Non-zero: ignore every PULLPROF_* variable for this start. */
	int ignore_env;

	/* Security. */

	/* A secret every request but <prefix>/healthz must carry, as
	 * "Authorization: Bearer TOKEN" or as the password of HTTP Basic
	 * authentication (any user name: http://pullprof:TOKEN@host:port/...).
	 * 8..256 printable ASCII characters; NULL or "" for none. Required to
	 * listen on a non-loopback address unless insecure is set.
	 * PULLPROF_TOKEN, default none. */
	const char *token;
	/* Non-zero: allow a non-loopback listen address without a token.
	 * PULLPROF_INSECURE, default 0. */
	unsigned insecure;
	/* PEM files of the certificate (chain) and its private key: both set,
	 * the agent serves HTTPS only. PULLPROF_TLS_CERT, PULLPROF_TLS_KEY,
	 * default none. */
	const char *tls_cert;
	const char *tls_key;
	/* Client networks allowed to connect, comma-separated CIDRs
	 * ("127.0.0.0/8,10.0.0.0/8,::1/128"); others get 403. NULL or "" for
	 * any. PULLPROF_ALLOW, default any. */
	const char *allow;
	/* Most simultaneous connections from one client address (1..1000).
	 * PULLPROF_MAX_CLIENT_CONNECTIONS, default 16. */
	unsigned max_client_connections;
	/* Memory for one connection's request line and headers, in bytes
	 * (4096..1048576); a request that does not fit is refused (431/414).
	 * PULLPROF_MAX_HEADER_BYTES, default 32768. */
	unsigned max_header_bytes;
	/* Memory one profile may hold while it is built, in MiB (1..4096);
	 * past it new stacks are charged to one "[pullprof: profile size limit
	 * reached]" frame. PULLPROF_MAX_PROFILE_MB, default 64. */
	unsigned max_profile_mb;
	/* Most heap profiles (/heap, /allocs) waiting for their window or
	 * being built at once (1..256); more get 429.
	 * PULLPROF_MAX_HEAP_PROFILES, default 16. */
	unsigned max_heap_profiles;
	/* Most /symbol and /maps requests queued or being answered at once
	 * (1..64): they run one at a time on the agent's lookup thread; more
	 * get 429. PULLPROF_MAX_LOOKUPS, default 4. */
	unsigned max_lookups;
	/* Largest request body read, in bytes (1024..67108864): only POST
	 * /symbol takes one; a larger one gets 413.
	 * PULLPROF_MAX_BODY_BYTES, default 4194304 (4 MiB). */
	unsigned max_body_bytes;
	/* Also serve the Prometheus metrics of <prefix>/metrics at this exact
	 * path outside the prefix, e.g. "/metrics" (Prometheus's default
	 * metrics_path). It starts with '/', holds no query, and is not the
	 * root or any other path under the prefix; NULL or "" for none (the
	 * metrics are always at <prefix>/metrics). The token and the allow
	 * list apply as to every endpoint. PULLPROF_METRICS_PATH, default
	 * none. */
	const char *metrics_path;
	/* Most thread dumps (/goroutine) being taken or waiting for their
	 * ?seconds window at once (1..64); more get 429.
	 * PULLPROF_MAX_THREAD_DUMPS, default 4. (Since 1.1.0.) */
	unsigned max_thread_dumps;
	/* Most wall-clock profiles (/wall, /debug/fgprof) sampling at once
	 * (1..16), each with a sampler thread of its own; more get 429.
	 * PULLPROF_MAX_WALL_PROFILES, default 2. (Since 1.1.0.) */
	unsigned max_wall_profiles;
	/* Threads a wall-clock profile looks at per tick (1..4096), rotating
	 * through all of them; each look is weighed by the threads it stands
	 * for. PULLPROF_WALL_THREADS, default 16. (Since 1.1.0.) */
	unsigned wall_threads;
	/* The mutex profile (/mutex) records 1 in mutex_rate of the unlocks
	 * that had waiters, as Go's SetMutexProfileFraction; 0 turns it off.
	 * PULLPROF_MUTEX_RATE, default 10. (Since 1.1.0.) */
	unsigned mutex_rate;
	/* The block profile (/block) takes one sample per block_rate
	 * nanoseconds threads spend waiting (every wait at least that long),
	 * as Go's SetBlockProfileRate; 0 turns it off. With both rates 0 the
	 * interposed lock calls go straight to the C library.
	 * PULLPROF_BLOCK_RATE, default 10000. (Since 1.1.0.) */
	unsigned block_rate;
	/* Seconds a client has to send a whole request (its line, headers
	 * and body), counted from the connection's opening or from the end
	 * of its previous answer (1..3600); a connection still sending when
	 * it runs out is closed, however steadily its bytes trickle in.
	 * PULLPROF_REQUEST_TIMEOUT, default 10. (Since 1.2.0.) */
	unsigned request_timeout;
	/* Host names a request's Host header may carry, comma-separated,
	 * besides IP addresses, "localhost" and names under ".localhost";
	 * "*" takes any. Other names get 403: that stops a web page from
	 * reaching the agent through a DNS name rebound to this machine.
	 * NULL or "": this machine's own name (gethostname) when no token
	 * is set, any name when one is (the page cannot send it).
	 * PULLPROF_HOSTS, default none. (Since 1.2.0.) */
	const char *hosts;
	/* Memory all answers being built or sent may hold together, in MiB
	 * (1..65536); a request whose answer would take more gets 503 with
	 * Retry-After. PULLPROF_MAX_ANSWERS_MB, default 256. (Since 1.2.0.) */
	unsigned max_answers_mb;
	/* What a forked child of a process serving profiles does:
	 * "adopt" (the default): it has no agent while the process that
	 * forked it serves, and takes the address over, serving from then
	 * on, if that process exits first (a daemon that forks and lets its
	 * parent exit keeps its agent); "follow": every forked child runs
	 * an agent of its own on a private Unix socket, and this address
	 * answers for the whole tree (profiles merged, each sample labelled
	 * with its pid; ?pid=N for one process); "off": forked children
	 * have no agent. PULLPROF_FORK, default "adopt". (Since 1.3.0.) */
	const char *fork_mode;
	/* Keep a look-back of the CPU samples of every thread over this
	 * duration ("300", "90s", "5m", "1h"; at most "24h"), so that
	 * ?last=N and ?start=&end= answer at once for the past: NULL, "" or
	 * "off" = no record. PULLPROF_RECORD, default none (no record).
	 * (Since 1.5.0.) */
	const char *record;
	/* The record's sampling rate, in Hz (1..1000): a window asking for
	 * more raises it for both meanwhile. PULLPROF_RECORD_HZ, default 19.
	 * (Since 1.5.0.) */
	unsigned record_hz;
	/* Memory the record may hold, in MiB (1..65536): past it, the oldest
	 * samples go first. PULLPROF_RECORD_MB, default 32. (Since 1.5.0.) */
	unsigned record_mb;
};

/* Fill *cfg with the built-in defaults (no environment is read here) and
 * set cfg->struct_size: a macro, so that the size is the one the caller's
 * header declares. NULL is ignored. */
#define pullprof_config_init(cfg)                                              \
	pullprof_config_init_size((cfg), sizeof(struct pullprof_config))
/* What the macro calls: fill the first `size` bytes of *cfg (at most; a
 * larger struct from a newer header is zeroed past what this library
 * knows). For callers without the header (other languages' FFI): pass the
 * size of the struct as your binding declares it. */
PULLPROF_API void pullprof_config_init_size(struct pullprof_config *cfg,
                                            size_t size);

/*
 * Start the agent: validate the configuration, bind the listening socket
 * (unless listen is "none") and start the agent's threads. cfg may be NULL
 * for the defaults.
 *
 * Returns 0, or a negative errno:
 *   -EINVAL           a bad setting (in cfg or a PULLPROF_* variable), or
 *                     cfg was not filled by pullprof_config_init();
 *   -EADDRINUSE       the port is taken;
 *   -EADDRNOTAVAIL    the listen address is not one of this host's;
 *   -EACCES           a port below 1024 without privileges, or a TLS file
 *                     that cannot be read;
 *   -ENOENT           a TLS file that does not exist;
 *   -EPROTONOSUPPORT  HTTPS asked of a libmicrohttpd built without TLS;
 *   -ENOSYS           a libmicrohttpd without epoll;
 *   -ENOMEM, -EAGAIN  out of memory or threads;
 *   -ELIBACC          the agent's object, libpullprof-agent.so (installed
 *                     beside libpullprof.so, loaded by the first call that
 *                     needs it), could not be loaded: stderr says why;
 *   -EALREADY         the agent already runs (nothing printed), e.g.
 *                     because it was started at load time
 *                     (PULLPROF_AUTOSTART=1);
 *   -ECHILD           this process was made without fork() (by _Fork()
 *                     or a raw clone) from one that runs the agent: the
 *                     agent's state it copied is not used;
 *   or another errno of socket(2), bind(2) or listen(2).
 * On a failure other than -EALREADY one line explaining why is written to
 * stderr and nothing is left running.
 */
PULLPROF_API int pullprof_start(const struct pullprof_config *cfg);

/*
 * Stop the server and every agent thread and free what the agent holds.
 * Requests in flight are cut off. Returns 0 (also when the agent was not
 * running, and in a process made without fork() from one that runs it,
 * which has none of its threads), or -EDEADLK when called from one of the
 * agent's own threads.
 */
PULLPROF_API int pullprof_stop(void);

/* The TCP port the agent listens on, or 0 when it is not running or runs
 * without a server (listen "none"). Cannot fail. */
PULLPROF_API int pullprof_port(void);

/*
 * Programmatic capture: what /profile and /heap answer, written to a file
 * descriptor by the program itself (a file, a pipe, a socket), with or
 * without the HTTP server. The agent must be running (pullprof_start(),
 * possibly with listen "none"). Same machinery and same bounds as over HTTP:
 * a CPU capture is one of the PULLPROF_MAX_CPU_WINDOWS windows (it shares
 * samples with the HTTP windows open at the same time), a heap capture one
 * of the PULLPROF_MAX_HEAP_PROFILES jobs, and PULLPROF_MAX_PROFILE_MB
 * bounds the profile. Captured profiles are not kept for ?id=.
 *
 * The profile is a gzipped perftools.profiles.Profile, as `go tool pprof`
 * reads it. It is written whole at the descriptor's current position (short
 * writes and EINTR are retried; a non-blocking descriptor is waited for).
 * A broken pipe or socket is returned as -EPIPE and never raises SIGPIPE
 * in the process. The descriptor is neither closed nor synced.
 *
 * Thread-safe: several threads may capture at once. Not from a signal
 * handler. Common errors:
 *   -EINVAL    a bad argument;
 *   -EBADF     fd is not open for writing (checked before anything runs);
 *   -ESRCH     the agent is not running;
 *   -EDEADLK   called from one of the agent's own threads;
 *   -EBUSY     the limit of CPU windows or heap profiles is reached (as
 *              HTTP's 429): try again later;
 *   -ECANCELED pullprof_stop() ran before the profile was ready;
 *   -ENOTSUP   (heap) this process has no heap profile to give: heap
 *              profiling is off, or the host's allocations do not reach
 *              pullprof's wrappers and its allocator's own profiler is
 *              off (/status heap.allocator says which, and why);
 *   -ENOMEM;
 *   or the errno of the failed write (-EPIPE, -ENOSPC, -EIO, ...): part of
 *   the profile may have been written then.
 */

/*
 * Sample the process's CPU for `seconds` (1..PULLPROF_MAX_SECONDS) at `hz`
 * samples per second of CPU time (1..1000; 0: PULLPROF_CPU_HZ), then write
 * the profile to fd: the calling thread blocks for the window and the
 * build, like a /profile?seconds=N&hz=H request. Also -EEXIST when the
 * process handles both signals pullprof can sample with itself (a SIGURG
 * handler, and a SIGPROF handler or ITIMER_PROF of another profiler),
 * which pullprof never replaces.
 */
PULLPROF_API int pullprof_write_cpu_profile(int fd, unsigned seconds,
                                            unsigned hz);

/* What pullprof_write_heap_profile writes. Both hold the four sample types
 * of /heap (alloc_objects, alloc_space, inuse_objects, inuse_space); they
 * differ in the view tools show by default. (A profile from jemalloc's own
 * profiler without prof_accum has the two inuse types only, and then
 * PULLPROF_HEAP_ALLOCS is -ENOTSUP.) */
enum pullprof_heap_kind {
	PULLPROF_HEAP_INUSE = 0,  /* /heap: memory in use (inuse_space) */
	PULLPROF_HEAP_ALLOCS = 1, /* /allocs: everything allocated since
	                           * start (alloc_space) */
};

/*
 * Write the heap profile as it is now (kind: a pullprof_heap_kind) to fd,
 * like /heap or /allocs, from the same source (pullprof's sampler, or the
 * allocator's own profiler where the wrappers see nothing); the calling
 * thread blocks while it is built. Also -ENOTSUP when there is none
 * (PULLPROF_HEAP_RATE=0, or see /status heap.allocator).
 */
PULLPROF_API int pullprof_write_heap_profile(int fd, int kind);

/*
 * Profile labels: what Go's pprof.Do does for a goroutine, for the calling
 * thread. Between pullprof_label_push(key, value) and its
 * pullprof_label_pop(), every CPU sample and sampled allocation taken on
 * this thread carries the label key=value (with those of the scopes around
 * it; an inner scope's value wins for the same key), so
 * `go tool pprof -tagfocus=endpoint=/api/users` splits a profile by request
 * type:
 *
 *     pullprof_label_push("endpoint", "/api/users");
 *     handle(request);
 *     pullprof_label_pop();
 *
 * Works whether or not the agent runs, from any thread; not from a signal
 * handler. Strings are copied (the caller keeps ownership). The key is 1..64
 * bytes, the value 0..256. Returns 0, -EINVAL for a bad key or value,
 * -ENOSPC when 32 scopes are already open on this thread or 65,536
 * distinct label sets exist in the process: the scope then opens without
 * the new label (pop it all the same). A push and pop pair costs tens of
 * nanoseconds once a label set was seen (bench/bench_labels).
 */
PULLPROF_API int pullprof_label_push(const char *key, const char *value);
/* Close the innermost scope this thread opened (nothing when none is).
 * Cannot fail. */
PULLPROF_API void pullprof_label_pop(void);

/*
 * A host's own allocators (Since 1.4.0.). A program that hands out memory
 * from pools or arenas of its own (carved from large blocks it took from
 * malloc) reports each block it hands out and each one it takes back; the
 * blocks are then sampled as the interposed malloc family's are (the same
 * per-thread byte countdown, PULLPROF_HEAP_RATE, stacks, tables and label
 * scopes) and appear in /heap and /allocs, and in pullprof_write_heap_profile,
 * beside malloc's, charged to the code that called pullprof_heap_alloc
 * instead of to the function that grew the pool.
 *
 * A pool's records are kept apart from malloc's: a pool block may start at
 * the address of the malloc block that holds it, and a free() of that
 * block takes no pool record out (release the pool's range first), nor
 * does pullprof_heap_free take a malloc record out.
 *
 * An unsampled call costs what the malloc wrappers' fast paths cost: a
 * subtraction and a branch (alloc), a load and a branch (free), a look at
 * one bit per 64 bytes of the range, up to 256 KiB, and beyond that a
 * search of the sampled pool blocks, O(log n) (release). None of them can
 * fail or returns anything. They work whether or not the agent runs, or
 * samples the heap, and are ignored then (a block reported before the agent
 * started is not in the profile, and its free is ignored). Any thread;
 * blocks reported by the agent's own threads are never sampled. Not from a
 * signal handler: a sampled block takes a lock and may allocate.
 */

/* The pool handed out size bytes at ptr. pool: a name for the pool or
 * arena, NULL or "" for none; a sampled block carries it as the label
 * pool=NAME (the string is copied; 1..256 bytes, a longer one is left
 * out; names from a bounded set, as a label's values). The sampled stack
 * starts at the caller of this function: call it from the pool's
 * allocation function, whose callers are then the code that used the
 * memory (or from the use site itself). NULL and size 0 are never
 * recorded (size 0 with PULLPROF_HEAP_RATE=1). A block reported again at
 * an address that still holds one (the pool reused it without a
 * pullprof_heap_free or a release) replaces it: the older one counts as
 * freed. */
PULLPROF_API void pullprof_heap_alloc(const void *ptr, size_t size,
                                      const char *pool);
/* The pool took back the block at ptr, reported by pullprof_heap_alloc.
 * An unknown pointer, NULL, or a second free of the same block is
 * ignored. */
PULLPROF_API void pullprof_heap_free(const void *ptr);
/* A pool was reset or destroyed: every block reported in [base, base+len)
 * is gone, however many there were (what a pool that never frees blocks
 * one by one, as nginx's and APR's, does instead of pullprof_heap_free).
 * Call it before the memory goes back to malloc or is handed out again.
 * A range with no reported block in it, NULL and len 0 are ignored. */
PULLPROF_API void pullprof_heap_release(const void *base, size_t len);

/*
 * The record (Since 1.5.0.). With PULLPROF_RECORD set (the config's
 * record), the agent keeps a rolling look-back of every thread's CPU
 * samples, read at once with ?last=N or ?start=&end= on /profile and
 * /trace. pullprof_record_save keeps the last 60 seconds of it aside, with
 * reason (up to 127 bytes kept; NULL is ""), until the bound of 16 saved
 * recordings pushes it out (those fetched go first): for a host that has
 * just noticed a slow request or an error. Cheap and safe on any thread:
 * it writes a slot the agent's collector applies within milliseconds,
 * never waits on a lock a reader holds. Returns the recording's id (> 0),
 * read with ?recording=ID and listed in /record; -ENOTSUP when the record
 * is off, -EBUSY when 16 savings are waiting to be made, -ESRCH when the
 * agent is not running.
 */
PULLPROF_API int pullprof_record_save(const char *reason);

/* A readable message for a value returned by a pullprof function (any
 * negative errno reads as the system's description). Never NULL; the
 * string is static. Cannot fail. */
PULLPROF_API const char *pullprof_strerror(int err);

/* The library's version, "MAJOR.MINOR.PATCH": the package's, which is
 * also the version of this interface (the "Since" of the fields above,
 * docs/abi.md). Cannot fail. */
PULLPROF_API const char *pullprof_version(void);

#ifdef __cplusplus
}
#endif

#endif /* PULLPROF_H */

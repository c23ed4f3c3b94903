/*
 * Agent lifecycle: start/stop, the start at load time (which the light
 * object, src/shim/shim.c, decides on), fork. Agent context.
 *
 * One lock serializes start and stop. The agent's threads only ever read the
 * state set up before they started, and stop joins them before freeing it.
 */
#include "agent.h"
#include "threads/threads.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cpu/cpu.h"
#include "error.h"
#include "fork.h"
#include "heap/heap.h"
#include "heap/sample.h"
#include "heap/table.h"
#include "http/server.h"
#include "locks/locks.h"
#include "profile/job.h"
#include "profile/recent.h"
#include "pullprof.h"
#include "symbols/symbols.h"
#include "unwind/registry.h"
#include "util/clock.h"
#include "util/fds.h"

static pthread_mutex_t lifecycle = PTHREAD_MUTEX_INITIALIZER;
static struct pp_agent agent;
/* &agent while started. Set before the server starts (its handlers read
 * it from the first request on) and cleared once the server's thread is
 * gone; written under `lifecycle`, read by the handlers without it, hence
 * the atomic accesses. */
static struct pp_agent *running;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

const struct pp_agent *pp_agent_get(void)
{
	return __atomic_load_n(&running, __ATOMIC_ACQUIRE);
}

/* ---- the agent's threads ------------------------------------------------ */

#define MAX_UNSAMPLED 4

static __thread int on_agent_thread __attribute__((tls_model("initial-exec")));
static __thread int creating_agent_thread
    __attribute__((tls_model("initial-exec")));
static _Atomic pid_t unsampled[MAX_UNSAMPLED];
/* Every agent thread's tid, for the thread dump to mark them. */
#define MAX_AGENT_TIDS 32
static _Atomic pid_t agent_tids[MAX_AGENT_TIDS];

int pp_agent_thread_create(pthread_t *t, const char *name, void *(*fn)(void *),
                           void *arg)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	/* pthread_create as the program sees it: a sanitizer's interceptor
	 * (which must know every thread) comes before ours, which lets an
	 * agent thread through untouched. */
	creating_agent_thread = 1;
	int rc = -pthread_create(t, NULL, fn, arg);
	creating_agent_thread = 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!rc)
		pthread_setname_np(*t, name);
	return rc;
}

static void tid_add(_Atomic pid_t *slots, size_t n, pid_t tid)
{
	for (size_t i = 0; i < n; i++) {
		pid_t free_slot = 0;
		if (atomic_compare_exchange_strong(&slots[i], &free_slot, tid))
			return;
	}
}

void pp_agent_thread_enter(int flags)
{
	on_agent_thread = 1;
	pp_heap_exclude_thread();
	pid_t self = (pid_t)syscall(SYS_gettid);
	tid_add(agent_tids, MAX_AGENT_TIDS, self);
	if (!(flags & PP_AGENT_UNSAMPLED))
		return;
	for (size_t i = 0; i < MAX_UNSAMPLED; i++) {
		pid_t free_slot = 0;
		if (atomic_compare_exchange_strong(&unsampled[i], &free_slot,
		                                   self))
			return;
	}
}

void pp_agent_thread_leave(void)
{
	pid_t self = (pid_t)syscall(SYS_gettid);
	for (size_t i = 0; i < MAX_UNSAMPLED; i++) {
		pid_t mine = self;
		atomic_compare_exchange_strong(&unsampled[i], &mine, 0);
	}
	for (size_t i = 0; i < MAX_AGENT_TIDS; i++) {
		pid_t mine = self;
		atomic_compare_exchange_strong(&agent_tids[i], &mine, 0);
	}
}

int pp_agent_thread_is(pid_t tid)
{
	for (size_t i = 0; i < MAX_AGENT_TIDS; i++)
		if (atomic_load(&agent_tids[i]) == tid)
			return 1;
	return 0;
}

int pp_on_agent_thread(void)
{
	return on_agent_thread;
}

int pp_creating_agent_thread(void)
{
	return creating_agent_thread;
}

int pp_agent_thread_unsampled(pid_t tid)
{
	for (size_t i = 0; i < MAX_UNSAMPLED; i++)
		if (atomic_load(&unsampled[i]) == tid)
			return 1;
	return 0;
}

double pp_seconds_since(const struct timespec *since)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - since->tv_sec) +
	       (double)(now.tv_nsec - since->tv_nsec) / PP_NS_PER_SEC;
}

/*
 * fork(): the child has none of the agent's threads, and its copy of the
 * state may be mid-update. Close the inherited sockets (a daemonizing host
 * must not keep the parent's port, nor hold clients' connections open) and
 * forget the agent; the child may start its own. The memory is left as is:
 * freeing it could touch locks the parent's threads held at fork time.
 */
static void atfork_prepare(void)
{
	pthread_mutex_lock(&lifecycle);
	pp_fork_prepare();
}

static void atfork_parent(void)
{
	pthread_mutex_unlock(&lifecycle);
}

static void atfork_child(void)
{
	for (size_t i = 0; i < MAX_AGENT_TIDS; i++)
		atomic_store(&agent_tids[i], 0);
	for (size_t i = 0; i < MAX_UNSAMPLED; i++)
		atomic_store(&unsampled[i], 0);
	pp_jobs_forget_in_child();
	pp_cpu_forget_in_child();
	pp_heap_forget_in_child();
	pp_threads_forget_in_child();
	pp_threadcreate_forget_in_child();
	pp_locks_forget_in_child();
	pp_symtab_forget_in_child();
	pp_fds_reset();
	/* What the child needs of the parent's agent to follow it or take
	 * its address over (fork.h), noted before it is forgotten. */
	pp_fork_child(running);
	/* Heap sampling goes on only in a child that will run an agent of
	 * its own (follow mode: what it allocates from its fork on is in its
	 * profile); any other has none to show it to, and stops (its own
	 * pullprof_start, or a takeover, samples again from then on). */
	if (!pp_fork_child_follows())
		pp_heap_sampling_set(0, 0);
	if (running) {
		pp_server_forget_in_child(running->srv);
		pp_server_forget_in_child(running->member);
		memset(&agent, 0, sizeof agent);
		__atomic_store_n(&running, NULL, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&lifecycle);
}

static void register_atfork(void)
{
	/* The registry's lock is taken under ours (pp_unwind_init): its
	 * handlers first, so fork()'s prepare handlers, which run in reverse,
	 * take ours first too (ThreadSanitizer found the inversion when the
	 * autostart constructor ran before the registry's). The same for
	 * the heap table's and the profile store's locks. */
	pp_registry_register_atfork();
	pp_heap_table_register_atfork();
	pp_recent_register_atfork();
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/* How an agent starts: as the host asked (or the preload), or in a forked
 * child of follow mode as a member of the parent's tree (no server on the
 * configured address; quiet), or taking the address over from a parent
 * that exited (listen: the address it served). */
struct start_how {
	int autostarted;
	int member;         /* serve the tree's socket only */
	const char *listen; /* instead of the configured address, or NULL */
	int quiet;          /* log nothing when it fails */
};

static int start_agent(const struct pullprof_config *cfg,
                       const struct start_how *how)
{
	char err[400];
	int rc;

	if (running)
		return -EALREADY;
	pthread_once(&atfork_once, register_atfork);

	memset(&agent, 0, sizeof agent);
	err[0] = 0;
	rc = pp_config_resolve(cfg, &agent.cfg, err, sizeof err);
	if (!rc && how->listen && agent.cfg.serve)
		rc =
		    pp_config_parse_listen(how->listen, &agent.cfg.addr,
		                           &agent.cfg.addrlen, err, sizeof err);
	if (rc) {
		if (!how->quiet)
			pp_log("not started: %s",
			       err[0] ? err : pullprof_strerror(rc));
		pp_config_free(&agent.cfg);
		return rc;
	}
	int autostarted = how->autostarted;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	agent.start_time = pp_timespec_seconds(&now);
	clock_gettime(CLOCK_MONOTONIC, &agent.start_mono);
	agent.autostarted = autostarted;

	struct pp_cpu_settings cpu = {
	    .unwind = pp_unwind_mode_parse(agent.cfg.v.unwind),
	    .max_depth = agent.cfg.v.max_depth,
	    .max_windows = agent.cfg.v.max_cpu_windows,
	    .max_profile_bytes = (size_t)agent.cfg.v.max_profile_mb << 20,
	};
	pp_cpu_configure(&cpu);
	/* Profiles kept for ?id= hold, together, what one may hold. */
	pp_recent_set_max_bytes((size_t)agent.cfg.v.max_profile_mb << 20);
	struct pp_threads_settings threads = {
	    .max_depth = agent.cfg.v.max_depth,
	    .max_profile_bytes = (size_t)agent.cfg.v.max_profile_mb << 20,
	    .max_dumps = agent.cfg.v.max_thread_dumps,
	    .max_wall = agent.cfg.v.max_wall_profiles,
	    .wall_threads = agent.cfg.v.wall_threads,
	};
	pp_threads_configure(&threads);
	rc = pp_threadcreate_start(agent.cfg.v.max_depth, err, sizeof err);
	if (rc)
		goto fail;
	struct pp_locks_settings locks = {
	    .mutex_rate = agent.cfg.v.mutex_rate,
	    .block_rate = agent.cfg.v.block_rate,
	    .max_depth = agent.cfg.v.max_depth,
	    .max_profile_bytes = (size_t)agent.cfg.v.max_profile_mb << 20,
	    .max_open = agent.cfg.v.max_thread_dumps,
	};
	rc = pp_locks_start(&locks, err, sizeof err);
	if (rc)
		goto fail;
	if (agent.cfg.v.heap_rate) {
		struct pp_heap_settings heap = {
		    .rate = agent.cfg.v.heap_rate,
		    .max_depth = agent.cfg.v.max_depth,
		    .max_profile_bytes = (size_t)agent.cfg.v.max_profile_mb
		                         << 20,
		    .max_pending = agent.cfg.v.max_heap_profiles,
		};
		rc = pp_heap_start(&heap, err, sizeof err);
		if (rc)
			goto fail;
	}
	rc = pp_jobs_start(err, sizeof err);
	if (rc)
		goto fail;
	/* Published before the server answers: a request may come in as soon
	 * as it listens, and its handler reads the agent's configuration. */
	__atomic_store_n(&running, &agent, __ATOMIC_RELEASE);
	/* PULLPROF_LISTEN=none: the profilers run, nothing listens; the
	 * program writes its profiles itself (capture.c). */
	rc = agent.cfg.serve && !how->member
	         ? pp_server_start(&agent.cfg, &agent.srv, err, sizeof err)
	         : 0;
	if (rc)
		goto fail;
	if (agent.cfg.serve && pp_fork_mode_of(&agent.cfg) == PP_FORK_FOLLOW) {
		char why[300];
		rc = pp_tree_join(&agent, why, sizeof why);
		if (rc && how->member) {
			snprintf(err, sizeof err, "%s", why);
			goto fail;
		}
		if (rc)
			pp_log("forked children will not be followed "
			       "(PULLPROF_FORK=follow): %s",
			       why);
		rc = 0;
	}
	return 0;
fail:
	/* Each stop is a no-op for what did not start. */
	__atomic_store_n(&running, NULL, __ATOMIC_RELEASE);
	if (agent.srv)
		pp_server_stop(agent.srv);
	agent.srv = NULL;
	if (!how->quiet)
		pp_log("not started: %s", err[0] ? err : pullprof_strerror(rc));
	pp_jobs_shutdown();
	pp_locks_stop();
	pp_threadcreate_stop();
	pp_threads_shutdown();
	pp_heap_stop();
	pp_config_free(&agent.cfg);
	return rc;
}

/* pullprof_start and _stop run on the host's thread: what the agent
 * allocates there (its tables, the server) is its own, not the host's. */
static int start_locked(const struct pullprof_config *cfg,
                        const struct start_how *how)
{
	int hidden = pp_heap_hide();
	int rc = start_agent(cfg, how);
	pp_heap_unhide(hidden);
	return rc;
}

PULLPROF_API int pullprof_start(const struct pullprof_config *cfg)
{
	static const struct start_how how = {0};
	pthread_mutex_lock(&lifecycle);
	int rc = start_locked(cfg, &how);
	pthread_mutex_unlock(&lifecycle);
	return rc;
}

int pp_agent_start_member(const struct pullprof_config *cfg, int autostarted)
{
	const struct start_how how = {
	    .autostarted = autostarted, .member = 1, .quiet = 1};
	pthread_mutex_lock(&lifecycle);
	int rc = start_locked(cfg, &how);
	pthread_mutex_unlock(&lifecycle);
	return rc;
}

int pp_agent_take_over(const struct pullprof_config *cfg, const char *listen,
                       int autostarted)
{
	const struct start_how how = {
	    .autostarted = autostarted, .listen = listen, .quiet = 1};
	int rc;
	pthread_mutex_lock(&lifecycle);
	int hidden = pp_heap_hide();
	if (!running) {
		rc = start_agent(cfg, &how);
	} else if (running->srv || !running->cfg.serve) {
		rc = -EALREADY;
	} else {
		/* A member: its server on the address, beside its socket. */
		char err[300];
		rc =
		    pp_config_parse_listen(listen, &agent.cfg.addr,
		                           &agent.cfg.addrlen, err, sizeof err);
		struct pp_server *srv = NULL;
		if (!rc)
			rc = pp_server_start(&agent.cfg, &srv, err, sizeof err);
		if (!rc) {
			__atomic_store_n(&agent.srv, srv, __ATOMIC_RELEASE);
			pp_tree_own(); /* the tree is this process's now */
		}
	}
	pp_heap_unhide(hidden);
	pthread_mutex_unlock(&lifecycle);
	return rc;
}

static int stop_agent(void)
{
	if (!running)
		return 0;
	if (pp_server_is_own_thread(running->srv))
		return -EDEADLK;
	/* Profile jobs end first (their requests are answered 503 as the
	 * server goes), then the samplers, then the server; handlers read
	 * `running`, so it is cleared only once their thread is gone. */
	pp_jobs_shutdown();
	pp_locks_stop();
	pp_threadcreate_stop();
	pp_threads_shutdown();
	pp_cpu_shutdown();
	pp_heap_stop();
	pp_tree_leave(&agent);
	pp_server_stop(running->srv);
	pp_symtab_shutdown(); /* the symbol cache goes with the agent */
	pp_recent_clear();    /* and the profiles kept for ?id= */
	pp_config_free(&agent.cfg);
	memset(&agent, 0, sizeof agent);
	__atomic_store_n(&running, NULL, __ATOMIC_RELEASE);
	return 0;
}

static int stop_locked(void)
{
	int hidden = pp_heap_hide();
	int rc = stop_agent();
	pp_heap_unhide(hidden);
	return rc;
}

PULLPROF_API int pullprof_stop(void)
{
	pthread_mutex_lock(&lifecycle);
	int rc = stop_locked();
	pthread_mutex_unlock(&lifecycle);
	return rc;
}

int pp_agent_locked(int (*fn)(const struct pp_agent *a, void *arg), void *arg)
{
	pthread_mutex_lock(&lifecycle);
	int rc = running ? fn(running, arg) : -ESRCH;
	pthread_mutex_unlock(&lifecycle);
	return rc;
}

PULLPROF_API int pullprof_port(void)
{
	pthread_mutex_lock(&lifecycle);
	int port = running && running->srv ? running->srv->port : 0;
	pthread_mutex_unlock(&lifecycle);
	return port;
}

/* The start at load time, which the light object decides on (src/shim/
 * shim.c: preloaded, PULLPROF_AUTOSTART, exec'd descendants) and reports:
 * the address served goes to *url ("none" without a server). */
int pp_agent_autostart(char *url, size_t n)
{
	pthread_mutex_lock(&lifecycle);
	static const struct start_how how = {.autostarted = 1};
	int rc = start_locked(NULL, &how);
	if (rc == 0 && agent.srv)
		snprintf(url, n, "%s://%s%s/",
		         agent.srv->tls_cert ? "https" : "http",
		         agent.srv->bound, agent.cfg.v.prefix);
	else if (rc == 0)
		snprintf(url, n, "none");
	pthread_mutex_unlock(&lifecycle);
	return rc;
}

__attribute__((destructor)) static void pp_autostop(void)
{
	/* At exit, stop before libmicrohttpd's own destructor runs, so our
	 * thread never uses a library that is being torn down. trylock: exit()
	 * while another thread starts or stops the agent must not hang. */
	if (pthread_mutex_trylock(&lifecycle) != 0)
		return;
	if (running && !pp_server_is_own_thread(running->srv))
		stop_locked();
	pthread_mutex_unlock(&lifecycle);
}

/*
 * Agent lifecycle: start/stop, the start at load time (which the light
 * object, src/shim/shim.c, decides on), fork.
 *
 * One lock serializes start and stop. The agent's threads only ever read the
 * state set up before they started, and stop joins them before freeing it.
 * Context: agent.
 */
#include "agent.h"
#include "agent_threads.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "fork/fork.h"
#include "kinds.h"
#include "process.h"
#include "profile/job.h"
#include "profile/recent.h"
#include "pullprof.h"
#include "routes.h"
#include "server/server.h"
#include "shim/heap_hot.h"
#include "symbols/symbols.h"
#include "tree/tree.h"
#include "unwind/registry.h"
#include "util/clock.h"
#include "util/fds.h"
#include "util/seccomp.h"

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

/* A copy of this process made without fork()'s handlers (process.h) does
 * nothing of the agent's: every path here that stops, starts or serves
 * asks pp_process_foreign() first. */

/* Said once per process, on the paths a program calls. */
static void say_foreign(const char *what)
{
	static _Atomic pid_t said;
	pid_t self = getpid();
	if (atomic_exchange(&said, self) != self)
		pp_log("%s: this process was made without fork() (by _Fork() "
		       "or a raw clone) from one that runs the agent, and "
		       "has none of its threads; the agent's state it "
		       "copied is not used here",
		       what);
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
	/* The handlers made the copy consistent: the child's own now. */
	pp_process_own();
	pp_agent_threads_forget_in_child();
	pp_jobs_forget_in_child();
	pp_symtab_forget_in_child();
	pp_seccomp_forget_in_child();
	pp_fds_reset();
	/* What the child needs of the parent's agent to follow it or take
	 * its address over (fork.h), noted before it is forgotten: the kinds
	 * ask it (pp_fork_child_follows) whether to record on. */
	pp_fork_child(running ? &running->facts : NULL,
	              running && running->srv ? running->srv->bound : NULL);
	pp_kinds_forget_in_child();
	if (running) {
		pp_server_forget_in_child(running->srv);
		pp_server_forget_in_child(running->member);
		memset(&agent, 0, sizeof agent);
		__atomic_store_n(&running, NULL, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&lifecycle);
}

/* The fork watcher's requests (fork.h). */
static int start_member(const struct pullprof_config *cfg, int autostarted);
static int take_over(const struct pullprof_config *cfg, const char *listen,
                     int autostarted);
static const struct pp_fork_agent fork_agent = {start_member, take_over};

static void register_atfork(void)
{
	pp_fork_set_agent(&fork_agent);
	/* The registry's lock is taken under ours (pp_unwind_init): its
	 * handlers first, so fork()'s prepare handlers, which run in reverse,
	 * take ours first too (ThreadSanitizer found the inversion when the
	 * autostart constructor ran before the registry's). The same for
	 * the kinds' own (the heap table's) and the profile store's locks. */
	pp_registry_register_atfork();
	pp_kinds_register_atfork();
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
	/* "host:port" this process served before a wrapper exec'd this
	 * program, or NULL: served again when the configured address is the
	 * same host with port 0 (any free one). When that failed, *again_failed
	 * is set and the reason is in again_why, nothing logged. */
	const char *again;
	int *again_failed;
	char *again_why;
	size_t again_whylen;
};

static uint16_t port_of(const struct sockaddr_storage *a)
{
	if (a->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)a)->sin_port);
	if (a->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)a)->sin6_port);
	return 0;
}

/* Is `again` the configured address with its port 0 made concrete? Then
 * it replaces it in c. */
static int serve_again(struct pp_config *c, const char *again)
{
	struct sockaddr_storage a;
	socklen_t len;
	char why[200];
	if (!again || !c->serve || port_of(&c->addr) != 0 ||
	    pp_config_parse_listen(again, &a, &len, why, sizeof why) != 0 ||
	    a.ss_family != c->addr.ss_family || port_of(&a) == 0)
		return 0;
	if (a.ss_family == AF_INET
	        ? memcmp(&((struct sockaddr_in *)&a)->sin_addr,
	                 &((struct sockaddr_in *)&c->addr)->sin_addr,
	                 sizeof(struct in_addr)) != 0
	        : memcmp(&((struct sockaddr_in6 *)&a)->sin6_addr,
	                 &((struct sockaddr_in6 *)&c->addr)->sin6_addr,
	                 sizeof(struct in6_addr)) != 0)
		return 0;
	c->addr = a;
	c->addrlen = len;
	return 1;
}

static int start_agent(const struct pullprof_config *cfg,
                       const struct start_how *how)
{
	char err[400];
	int rc, kinds_started = 0;

	if (running)
		return -EALREADY;
	pthread_once(&atfork_once, register_atfork);
	pp_process_own();

	memset(&agent, 0, sizeof agent);
	err[0] = 0;
	rc = pp_config_resolve(cfg, &agent.cfg, err, sizeof err);
	if (!rc && how->listen && agent.cfg.serve)
		rc =
		    pp_config_parse_listen(how->listen, &agent.cfg.addr,
		                           &agent.cfg.addrlen, err, sizeof err);
	int again = !rc && serve_again(&agent.cfg, how->again);
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
	agent.facts.cfg = &agent.cfg;
	agent.facts.start_time = pp_timespec_seconds(&now);
	clock_gettime(CLOCK_MONOTONIC, &agent.facts.start_mono);
	agent.facts.autostarted = autostarted;
	rc = pp_routes_build(err, sizeof err);
	if (rc) {
		pp_log("not started: %s", err);
		pp_config_free(&agent.cfg);
		return rc;
	}
	agent.facts.routes = pp_routes;
	agent.facts.nroutes = pp_routes_count;
	agent.facts.intercept = pp_tree_intercept;

	/* Profiles kept for ?id= hold, together, what one may hold. */
	pp_recent_set_max_bytes((size_t)agent.cfg.v.max_profile_mb << 20);
	/* The checked reads' process_vm_readv, made in the sampling
	 * handler and the heap sampler where nothing can be probed: allowed
	 * or off before any of them runs (util/seccomp.h). */
	pp_seccomp_refresh_vm_readv();
	/* Every kind of profile: its settings, and what records from now. */
	rc = pp_kinds_start(&agent.cfg, err, sizeof err);
	if (rc)
		goto fail;
	kinds_started = 1;
	rc = pp_jobs_start(err, sizeof err);
	if (rc)
		goto fail;
	/* Published before the server answers: a request may come in as soon
	 * as it listens, and its handler reads the agent's configuration. */
	__atomic_store_n(&running, &agent, __ATOMIC_RELEASE);
	/* PULLPROF_LISTEN=none: the profilers run, nothing listens; the
	 * program writes its profiles itself (capture.c). */
	rc = agent.cfg.serve && !how->member
	         ? pp_server_start(&agent.cfg, &agent.facts, &agent.srv, err,
	                           sizeof err)
	         : 0;
	if (rc)
		goto fail;
	if (agent.cfg.serve && pp_fork_mode_of(&agent.cfg) == PP_FORK_FOLLOW) {
		char why[300];
		rc = pp_tree_join(&agent.cfg, agent.srv != NULL,
		                  &agent.member_cfg, why, sizeof why);
		if (!rc) {
			rc = pp_server_start(&agent.member_cfg, &agent.facts,
			                     &agent.member, why, sizeof why);
			/* The server closed the early socket, if it took
			 * it. */
			if (rc) {
				pp_config_free(&agent.member_cfg);
				agent.member = NULL;
			}
		}
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
	if (again) {
		/* The caller tries the configured address next. */
		*how->again_failed = 1;
		snprintf(how->again_why, how->again_whylen, "%s",
		         err[0] ? err : pullprof_strerror(rc));
	} else if (!how->quiet) {
		pp_log("not started: %s", err[0] ? err : pullprof_strerror(rc));
	}
	pp_jobs_shutdown();
	if (kinds_started)
		pp_kinds_stop();
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
	if (pp_process_foreign()) {
		/* Its locks may be held for good: not even taken. */
		say_foreign("not started");
		return -ECHILD;
	}
	pthread_mutex_lock(&lifecycle);
	int rc = start_locked(cfg, &how);
	pthread_mutex_unlock(&lifecycle);
	return rc;
}

static int start_member(const struct pullprof_config *cfg, int autostarted)
{
	const struct start_how how = {
	    .autostarted = autostarted, .member = 1, .quiet = 1};
	if (pp_process_foreign())
		return -ECHILD;
	pthread_mutex_lock(&lifecycle);
	int rc = start_locked(cfg, &how);
	pthread_mutex_unlock(&lifecycle);
	return rc;
}

static int take_over(const struct pullprof_config *cfg, const char *listen,
                     int autostarted)
{
	const struct start_how how = {
	    .autostarted = autostarted, .listen = listen, .quiet = 1};
	int rc;
	if (pp_process_foreign())
		return -ECHILD;
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
			rc = pp_server_start(&agent.cfg, &agent.facts, &srv,
			                     err, sizeof err);
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
	pp_kinds_stop();
	if (agent.member) {
		pp_server_stop(agent.member);
		agent.member = NULL;
		pp_config_free(&agent.member_cfg);
		pp_tree_leave();
	}
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
	/* Nothing of the agent runs here to stop (its copy of the sockets
	 * is closed). */
	if (pp_process_foreign())
		return 0;
	pthread_mutex_lock(&lifecycle);
	int rc = stop_locked();
	pthread_mutex_unlock(&lifecycle);
	return rc;
}

int pp_agent_locked(int (*fn)(const struct pp_agent *a, void *arg), void *arg)
{
	/* A job opened here would wait for threads this process has not. */
	if (pp_process_foreign()) {
		say_foreign("no profile");
		return -ESRCH;
	}
	pthread_mutex_lock(&lifecycle);
	int rc = running ? fn(running, arg) : -ESRCH;
	pthread_mutex_unlock(&lifecycle);
	return rc;
}

PULLPROF_API int pullprof_port(void)
{
	if (pp_process_foreign())
		return 0; /* this process serves nothing */
	pthread_mutex_lock(&lifecycle);
	int port = running && running->srv ? running->srv->port : 0;
	pthread_mutex_unlock(&lifecycle);
	return port;
}

/* The start at load time, which the light object decides on (src/shim/
 * shim.c: preloaded, PULLPROF_AUTOSTART, exec'd descendants) and reports:
 * the address served goes to *url ("none" without a server). */
/*
 * A wrapper that exec'd the program (nice, env, sh -c 'exec ...', bash
 * exec'ing bash exec'ing python under a pyenv shim) ran in this same
 * process, with an agent started from the same settings, which served
 * `before`. With a concrete port the program simply serves there again.
 * With port 0 ("any free one") each program of the chain would take a
 * port of its own and print it: lines for addresses that are gone a
 * moment later, and the one really served last. So the port the process
 * served is taken again (the old program's socket was closed by the exec:
 * close-on-exec; SO_REUSEADDR), and the chain prints one line. Should it
 * be taken meanwhile, a new one is, and stderr says why.
 *
 * The wrappers still bind: whether a program will exec another is known
 * only once it does, and a short-lived program that binds nothing until
 * it has run a while cannot be profiled at all. Nothing is bound across
 * an exec either (a socket kept open across it would be left listening,
 * never answered, in any program that does not load pullprof).
 */
static int again_address(const char *before, char *out, size_t n)
{
	if (!before)
		return 0;
	const char *host = NULL;
	if (strncmp(before, "http://", 7) == 0)
		host = before + 7;
	else if (strncmp(before, "https://", 8) == 0)
		host = before + 8;
	if (!host)
		return 0;
	size_t len = strcspn(host, "/");
	if (!len || len >= n)
		return 0;
	memcpy(out, host, len);
	out[len] = 0;
	return 1;
}

int pp_agent_autostart(const char *before, char *url, size_t n)
{
	char again[160], why[400] = "";
	int failed = 0;
	struct start_how how = {.autostarted = 1,
	                        .again_failed = &failed,
	                        .again_why = why,
	                        .again_whylen = sizeof why};
	if (again_address(before, again, sizeof again))
		how.again = again;
	pthread_mutex_lock(&lifecycle);
	int rc = start_locked(NULL, &how);
	if (rc && failed) {
		how.again = NULL;
		rc = start_locked(NULL, &how);
		if (rc == 0)
			pp_log("could not serve %s again, where this process "
			       "served before it exec'd this program (%s): "
			       "serving a new address",
			       again, why);
	}
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
	 * while another thread starts or stops the agent must not hang. A
	 * child made without fork() (_Fork, clone) has nothing to stop: the
	 * threads are its parent's. */
	if (pp_process_foreign())
		return;
	if (pthread_mutex_trylock(&lifecycle) != 0)
		return;
	if (running && !pp_server_is_own_thread(running->srv))
		stop_locked();
	pthread_mutex_unlock(&lifecycle);
}

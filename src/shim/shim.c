/*
 * The light object's own part (see shim.h): the state it keeps for the
 * agent, loading the agent, the public entry points, and the start at load
 * time. It runs on the host's threads, in its constructors.
 *
 * Start at load time. A preloaded library (or PULLPROF_AUTOSTART=1) starts
 * the agent in its constructor, before the host's code runs, and records
 * that in the environment, so that the programs the host runs, which
 * inherit LD_PRELOAD and PULLPROF_LISTEN, know they are not the host:
 *   PULLPROF_AGENT_PID  the pid of the process that started it;
 *   PULLPROF_AGENT_URL  what it printed it serves ("none": no server).
 * A process that finds a pid other than its own is an exec'd descendant:
 * nothing starts, nothing is printed, the agent is not even loaded, unless
 * PULLPROF_EXEC_LISTEN gives descendants an address of their own. Its own
 * pid means a wrapper (nice, env, sh -c 'exec ...', a pyenv shim: bash
 * exec'ing bash exec'ing python) exec'd the program: it starts again, on
 * the very address the process served before the exec when the setting
 * names port 0 (agent.c, pp_agent_autostart), and says so only when it
 * serves elsewhere: a chain of wrappers prints one line, the address the
 * program is served at.
 *
 * setenv is not safe while other threads read the environment: the
 * variables are added before the agent starts its threads. The address is
 * known only once the server listens: its variable is added empty first
 * and its value replaced afterwards (a replacement swaps one pointer in
 * the environment array; glibc never frees the old string).
 * Context: host.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "shim/shim.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "labels/labels.h"
#include "shim/agentmem.h"
#include "shim/cpu_hot.h"
#include "shim/heap_hot.h"
#include "shim/locks_hot.h"
#include "util/env.h"

PP_SHIM_EXPORT struct pp_shim pp_shim = {
    .agentmem_enable = pp_heap_agentmem_enable,
    .agentmem_stats = pp_heap_agentmem_stats,
};

/* The hot state the interposers read and the agent sets, here rather than
 * beside the wrappers: built into one object (libpp-static.la: the unit tests,
 * libpullprof.a), the agent's references to it would otherwise pull the
 * wrappers into every program linked with it, the lock wrappers ahead of
 * a sanitizer's interceptors (ThreadSanitizer then missed the release of
 * a mutex inside pthread_cond_wait). */
PP_SHIM_EXPORT __thread struct pp_heap_tls pp_heap_tls
    __attribute__((tls_model("initial-exec")));
PP_SHIM_EXPORT _Atomic uint64_t pp_heap_filter[PP_HEAP_FILTER_BITS / 64];
PP_SHIM_EXPORT struct pp_locks_state pp_locks;

/* The label scopes of each thread: read by the samplers on any thread, so
 * initial-exec, in the object loaded at start-up. */
PP_SHIM_EXPORT __thread struct pp_label_tls pp_label_tls
    __attribute__((tls_model("initial-exec")));

/* The sampling handler's per-thread state (shim/cpu_hot.h): read in the handler
 * on any thread, so initial-exec, in the object loaded at start-up. */
PP_SHIM_EXPORT __thread struct pp_cpu_tls pp_cpu_tls
    __attribute__((tls_model("initial-exec")));

#define AGENT_FILE "libpullprof-agent.so"

/* ---- loading the agent --------------------------------------------------- */

#ifdef PP_AGENT_LINKED
static const struct pp_agent_ops *agent(void)
{
	return &pp_agent_ops_table;
}
#else
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

/* The agent's file: beside this object's (the build tree's .libs, or the
 * installed libdir). */
static int agent_path(char *out, size_t n)
{
	Dl_info info;
	if (!dladdr((void *)&pp_shim, &info) || !info.dli_fname)
		return -1;
	const char *slash = strrchr(info.dli_fname, '/');
	int dir = slash ? (int)(slash - info.dli_fname) : 1;
	int w = snprintf(out, n, "%.*s/%s", dir, slash ? info.dli_fname : ".",
	                 AGENT_FILE);
	return w < 0 || (size_t)w >= n ? -1 : 0;
}

static void load(void)
{
	char path[PATH_MAX];
	if (agent_path(path, sizeof path)) {
		pp_log("cannot load the agent: this library's own path is "
		       "unknown, so " AGENT_FILE " cannot be found");
		return;
	}
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *why = dlerror();
		pp_log("cannot load the agent: %s (" AGENT_FILE " is installed "
		       "beside libpullprof.so)",
		       why ? why : path);
		return;
	}
	__typeof__(pp_agent_entry) *entry =
	    (__typeof__(pp_agent_entry) *)dlsym(h, "pp_agent_entry");
	const struct pp_agent_ops *ops =
	    entry ? entry(PACKAGE_VERSION, sizeof pp_shim) : NULL;
	if (!ops || ops->size != sizeof *ops ||
	    strcmp(ops->version, PACKAGE_VERSION) != 0) {
		pp_log("cannot load the agent %s: it is not the one built with "
		       "this libpullprof.so (version %s)",
		       path, PACKAGE_VERSION);
		return; /* left loaded: its code may have started nothing */
	}
	__atomic_store_n(&pp_shim.ops, ops, __ATOMIC_RELEASE);
}

static const struct pp_agent_ops *agent(void)
{
	const struct pp_agent_ops *ops = PP_AGENT_OPS();
	if (ops)
		return ops;
	pthread_once(&load_once, load);
	return PP_AGENT_OPS();
}

/* ---- the public API ------------------------------------------------------ */

/* What a call returns when the agent could not be loaded (said once on
 * stderr, with the reason). */
#define NO_AGENT (-ELIBACC)

PULLPROF_API void pullprof_config_init_size(struct pullprof_config *cfg,
                                            size_t size)
{
	const struct pp_agent_ops *ops = agent();
	if (ops) {
		ops->config_init_size(cfg, size);
	} else if (cfg && size >= sizeof cfg->struct_size) {
		memset(cfg, 0, size);
		cfg->struct_size = size;
	}
}

PULLPROF_API int pullprof_start(const struct pullprof_config *cfg)
{
	const struct pp_agent_ops *ops = agent();
	return ops ? ops->start(cfg) : NO_AGENT;
}

/* Stopping, the port and captures need an agent that runs: none is loaded
 * for them. */
PULLPROF_API int pullprof_stop(void)
{
	const struct pp_agent_ops *ops = PP_AGENT_OPS();
	return ops ? ops->stop() : 0;
}

PULLPROF_API int pullprof_port(void)
{
	const struct pp_agent_ops *ops = PP_AGENT_OPS();
	return ops ? ops->port() : 0;
}

PULLPROF_API int pullprof_write_cpu_profile(int fd, unsigned seconds,
                                            unsigned hz)
{
	const struct pp_agent_ops *ops = PP_AGENT_OPS();
	return ops ? ops->write_cpu_profile(fd, seconds, hz) : -ESRCH;
}

PULLPROF_API int pullprof_write_heap_profile(int fd, int kind)
{
	const struct pp_agent_ops *ops = PP_AGENT_OPS();
	return ops ? ops->write_heap_profile(fd, kind) : -ESRCH;
}

PULLPROF_API int pullprof_record_save(const char *reason)
{
	const struct pp_agent_ops *ops = PP_AGENT_OPS();
	return ops ? ops->record_save(reason) : -ESRCH;
}

/* Labels work whether or not the agent runs: a push interns its set in the
 * agent's table (loading the agent); a pop only moves this thread's depth,
 * as the agent's own pop does. */
PULLPROF_API int pullprof_label_push(const char *key, const char *value)
{
	const struct pp_agent_ops *ops = agent();
	if (ops)
		return ops->label_push(key, value);
	pp_label_tls.depth++; /* the scope opens all the same: pops balance */
	return NO_AGENT;
}

PULLPROF_API void pullprof_label_pop(void)
{
	const struct pp_agent_ops *ops = PP_AGENT_OPS();
	if (ops) {
		ops->label_pop();
	} else if (pp_label_tls.depth) {
		pp_label_tls.depth--;
	}
}
#endif /* !PP_AGENT_LINKED */

/* ---- fork ------------------------------------------------------------------
 */

#ifndef PP_AGENT_LINKED
/* The agent's fork handlers, run from here: registered when this object
 * is loaded, they keep the place in fork()'s order that handlers
 * registered at load time have (src/agent_ops.c says why). */
static void fork_prepare(void)
{
	const struct pp_agent_ops *ops = PP_AGENT_OPS();
	if (ops)
		ops->fork(PP_FORK_PREPARE);
}

static void fork_parent(void)
{
	const struct pp_agent_ops *ops = PP_AGENT_OPS();
	if (ops)
		ops->fork(PP_FORK_PARENT);
}

static void fork_child(void)
{
	const struct pp_agent_ops *ops = PP_AGENT_OPS();
	if (ops)
		ops->fork(PP_FORK_CHILD);
}

__attribute__((constructor(103))) static void register_fork(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}
#endif

/* ---- the start at load time ---------------------------------------------- */

/* Is this library named in LD_PRELOAD? Then the host did not choose to link
 * us and the environment is the only way to configure us. */
static int preloaded(void)
{
	const char *list = pp_env_get("LD_PRELOAD");
	Dl_info info;
	char self[PATH_MAX], entry[PATH_MAX], real[PATH_MAX];

	if (!list || !dladdr((void *)&pp_shim, &info) || !info.dli_fname ||
	    !realpath(info.dli_fname, self))
		return 0;
	while (*list) {
		size_t n = strcspn(list, " :");
		if (n > 0 && n < sizeof entry) {
			memcpy(entry, list, n);
			entry[n] = 0;
			if (realpath(entry, real) && strcmp(real, self) == 0)
				return 1;
			/* A bare name is searched for by the loader: match it
			 * on the file name alone. */
			const char *base = strrchr(self, '/');
			if (!strchr(entry, '/') && base &&
			    strcmp(entry, base + 1) == 0)
				return 1;
		}
		list += n;
		list += strspn(list, " :");
	}
	return 0;
}

static int is_one(const char *v)
{
	return v && strcmp(v, "1") == 0;
}

/* Who started an agent before this process image, from PULLPROF_AGENT_PID:
 * 0 nobody, 1 this process (a wrapper exec'd the program), 2 another one
 * (this is an exec'd descendant), -1 a value that is not a pid. */
static int started_before(void)
{
	const char *v = pp_env_get("PULLPROF_AGENT_PID");
	if (!v)
		return 0;
	char *end;
	errno = 0;
	long pid = strtol(v, &end, 10);
	if (errno || end == v || *end || pid <= 0 || pid > INT_MAX)
		return -1;
	return pid == (long)getpid() ? 1 : 2;
}

/* Say what was started, unless PULLPROF_QUIET=1 or this very line was
 * already printed by this process before a wrapper exec'd the program. */
static void say_started(const char *url, const char *printed)
{
	if (is_one(pp_env_get("PULLPROF_QUIET")))
		return;
	if (printed && strcmp(printed, url) == 0)
		return;
	if (strcmp(url, "none") == 0)
		pp_log(
		    "profiling without an HTTP server (PULLPROF_LISTEN=none)");
	else
		pp_log("serving %s%s", url,
		       strncmp(url, "https:", 6) == 0 ? " (TLS 1.2 and 1.3)"
		                                      : "");
}

__attribute__((constructor)) static void pp_autostart(void)
{
	/* Read and written the C library's way (util/env.h): bash, for
	 * one, defines getenv and setenv itself. */
	const char *listen = pp_env_get("PULLPROF_LISTEN");
	const char *autostart = pp_env_get("PULLPROF_AUTOSTART");
	const char *exec_listen = pp_env_get("PULLPROF_EXEC_LISTEN");
	/* Empty is unset, as for PULLPROF_RECORD: an exec'd descendant
	 * starts nothing and says nothing (a spawn storm printed a "not
	 * started" line a child). */
	if (exec_listen && !*exec_listen)
		exec_listen = NULL;

	if (autostart && strcmp(autostart, "0") == 0)
		return;
	if (autostart && strcmp(autostart, "1") != 0) {
		pp_log(
		    "not started: PULLPROF_AUTOSTART: \"%.32s\" is not 0 or 1",
		    autostart);
		return;
	}
	if (!autostart && !listen)
		return;
	/* Checked before anything costlier: in an exec'd descendant this is
	 * all the preload does. */
	int before = started_before();
	if (before == 2 && !exec_listen)
		return;
	/* Linked hosts start the agent themselves, with their own settings,
	 * unless PULLPROF_AUTOSTART=1 asks for it. */
	if (!autostart && !preloaded())
		return;
	if (before < 0) {
		pp_log("not started: PULLPROF_AGENT_PID: \"%.32s\" is not a "
		       "process id (pullprof sets it for the programs a "
		       "profiled process runs; unset it)",
		       pp_env_get("PULLPROF_AGENT_PID"));
		return;
	}
	if (before == 2) {
		/* An exec'd descendant of a profiled process, and descendants
		 * are given an address of their own. */
		if (pp_env_set("PULLPROF_LISTEN", exec_listen))
			return;
	}
	/* What this process printed before a wrapper exec'd the program:
	 * kept before the records below are rewritten. */
	char printed[512] = "";
	const char *was = before == 1 ? pp_env_get("PULLPROF_AGENT_URL") : NULL;
	if (was)
		snprintf(printed, sizeof printed, "%s", was);

	const struct pp_agent_ops *ops = agent();
	if (!ops)
		return;
	/* The records, while this is the only thread (see the top). */
	char pid[24];
	snprintf(pid, sizeof pid, "%d", (int)getpid());
	pp_env_set("PULLPROF_AGENT_PID", pid);
	pp_env_set("PULLPROF_AGENT_URL", "");
	char url[512];
	if (ops->autostart(was ? printed : NULL, url, sizeof url) != 0)
		return; /* the agent said why */
	pp_env_set("PULLPROF_AGENT_URL", url);
	say_started(url, was ? printed : NULL);
}

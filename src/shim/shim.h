/*
 * The split between the light library and the agent.
 *
 * libpullprof.so, the object users preload and link, holds only what every
 * process it is loaded into needs: the interposers (malloc family, pthread
 * locks, pthread_create, dlclose, dl_iterate_phdr), the state their fast
 * paths read, the public entry points (the pool API's fast paths among
 * them, src/shim/pool.c), and the decision whether to start at
 * load time. It depends on the C library alone. The agent (server,
 * samplers, symbolizer, renderers, and the libraries they need) is a
 * second object, libpullprof-agent.so, which the light one dlopen()s
 * (shim.c) the first time it is needed: an autostart, or the first call of
 * the API that needs it. Until then every interposer forwards straight to
 * the next definition and nothing of the agent is mapped.
 *
 * Built into one object (libpp-static.la: the unit tests; libpullprof.a), the
 * same sources are compiled with PP_AGENT_LINKED and reach the agent directly.
 *
 * What the two share:
 *  - struct pp_agent_ops: the agent's entry points, one table the agent
 *    hands over (pp_agent_entry) and the shim publishes in pp_shim.ops;
 *  - struct pp_shim and the hot state the interposers read (pp_heap_tls,
 *    pp_heap_filter, pp_label_tls, pp_locks, pp_unwind_guard): defined in the
 *    light object, which is loaded at start-up, so that their TLS is
 *    initial-exec in the static TLS block and the agent, once loaded,
 *    refers to them by name (it is linked against libpullprof.so).
 * Context: host.
 */
#ifndef PP_SHIM_H
#define PP_SHIM_H

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "pullprof.h"

struct pp_heap_taken;
struct pp_locks_wait;

/* The agent, as the light object calls it. Every pointer is set. */
struct pp_agent_ops {
	size_t size;         /* sizeof(struct pp_agent_ops) of its build */
	const char *version; /* PACKAGE_VERSION of its build */

	/* The public API, for the light object's entry points. */
	void (*config_init_size)(struct pullprof_config *cfg, size_t size);
	int (*start)(const struct pullprof_config *cfg);
	int (*stop)(void);
	int (*port)(void);
	int (*write_cpu_profile)(int fd, unsigned seconds, unsigned hz);
	int (*write_heap_profile)(int fd, int kind);
	int (*label_push)(const char *key, const char *value);
	void (*label_pop)(void);
	int (*record_save)(const char *reason);

	/* Start from the environment at load time. before: what this
	 * process served before a wrapper exec'd this program (its
	 * PULLPROF_AGENT_URL), or NULL. On success, *url (n bytes) is the
	 * address served ("http://127.0.0.1:6060/debug/pprof/") or "none"
	 * (PULLPROF_LISTEN=none). The agent prints nothing when it starts
	 * unless it could not serve where it served before; the caller
	 * decides whether to say it serves. */
	int (*autostart)(const char *before, char *url, size_t n);

	/* The interposers' slow paths (HOT/UNSAFE CONTEXT). */
	void *(*heap_sampled)(void *p, size_t size, uintptr_t from);
	void (*heap_free_hit)(void *p);
	void (*heap_take)(void *p, struct pp_heap_taken *t);
	void (*heap_settle)(const struct pp_heap_taken *t, int freed);
	/* The pool API's (src/shim/pool.c), on the host's threads. */
	void (*heap_pool_sampled)(const void *p, size_t size, const char *pool,
	                          uintptr_t from);
	void (*heap_pool_free_hit)(const void *p);
	void (*heap_pool_release)(uintptr_t lo, uintptr_t hi);
	int (*locks_wait_begin)(struct pp_locks_wait *w, const void *addr,
	                        int owned);
	void (*locks_wait_end)(struct pp_locks_wait *w, uintptr_t self,
	                       uintptr_t from);
	uint64_t (*locks_release)(const void *addr);
	void (*locks_released)(uint64_t delay_ns, uintptr_t self,
	                       uintptr_t from);
	int (*thread_create)(pthread_t *t, const pthread_attr_t *attr,
	                     void *(*fn)(void *), void *arg, uintptr_t from);
	void (*unloading)(void); /* before a dlclose */
	void (*unloaded)(void);  /* after it */
	/* Once fork() or daemon() has returned (fork.h: PP_FORKED_*). */
	void (*fork_returned)(int event);

	/* fork(): the agent's own fork handlers (pp_agent_fork), run from
	 * the ones the light object registered when it was loaded. */
	void (*fork)(int phase);
	/* The host is about to set the disposition of sig (SIGURG or
	 * SIGPROF) to what (PP_SIGNAL_*): the interposed sigaction family
	 * (signals.c), before the real call; it returns once pullprof no
	 * longer samples with sig (cpu/takeover.c). */
	void (*signal_taking)(int sig, int what);
};

/* What a host's disposition is, for pp_agent_ops.signal_taking. */
enum { PP_SIGNAL_HANDLER = 1, PP_SIGNAL_DFL, PP_SIGNAL_IGN };

/* The phases of fork() for pp_agent_ops.fork. */
enum { PP_FORK_PREPARE, PP_FORK_PARENT, PP_FORK_CHILD };

/* The agent object's one exported name: its table, or NULL when the light
 * object calling it is of another build (shim_version: its
 * PACKAGE_VERSION; shim_size: sizeof(struct pp_shim)). */
const struct pp_agent_ops *pp_agent_entry(const char *shim_version,
                                          size_t shim_size);

struct pp_agentmem_stats;
typedef int (*pp_create_fn)(pthread_t *, const pthread_attr_t *,
                            void *(*)(void *), void *);

/* What the light object keeps for the agent besides the hot state. */
struct pp_shim {
	/* The agent's table once it is loaded; never unset (the agent is
	 * never unloaded). */
	const struct pp_agent_ops *ops;
	/* The heap wrappers' bootstrap arena, as a range of the free
	 * filter's granules whose bits must stay set (shim/malloc.c). */
	uint32_t heap_boot_first, heap_boot_count;
	/* dl_iterate_phdr calls answered "no images" inside a capture. */
	uint64_t guard_hits;
	/* The light object's own dl_iterate_phdr, for the agent to check
	 * that libunwind's lookup finds it. */
	void *iterate_self;
	/* The C library's pthread_create (RTLD_NEXT of the interposer). */
	pp_create_fn real_create;
	/* The agent's threads' own allocator (shim/agentmem.h): turned on
	 * by the agent's start, before its first thread; its figures. */
	int (*agentmem_enable)(void);
	void (*agentmem_stats)(struct pp_agentmem_stats *out);
};
extern struct pp_shim pp_shim;

/* Names the light object exports for the agent, beside the public API and
 * the interposed functions (Makefile.am's -export-symbols-regex). */
#define PP_SHIM_EXPORT __attribute__((visibility("default")))

/* The agent's table, or NULL while it is not loaded: one acquire load.
 * Built as one object, the table is always there. */
#ifdef PP_AGENT_LINKED
extern const struct pp_agent_ops pp_agent_ops_table;
#define PP_AGENT_OPS() (&pp_agent_ops_table)
#else
#define PP_AGENT_OPS()                                                         \
	((const struct pp_agent_ops *)__atomic_load_n(&pp_shim.ops,            \
	                                              __ATOMIC_ACQUIRE))
#endif

/* The C library's pthread_create (found by the light object's constructor,
 * before anything can create a thread through the agent). */
static inline int pp_real_pthread_create(pthread_t *t,
                                         const pthread_attr_t *attr,
                                         void *(*fn)(void *), void *arg)
{
	pp_create_fn f =
	    __atomic_load_n(&pp_shim.real_create, __ATOMIC_ACQUIRE);
	return f ? f(t, attr, fn, arg) : EAGAIN;
}

#endif

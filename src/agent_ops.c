/*
 * The agent's side of the split (shim.h): the table of entry points the
 * light object calls, and the agent object's one exported function.
 * Context: agent.
 */
#include <errno.h>
#include <string.h>

#include "agent.h"
#include "cpu/producer.h"
#include "cpu/sampler.h"
#include "fork/fork.h"
#include "heap/heap.h"
#include "process.h"
#include "pullprof.h"
#include "shim/heap_hot.h"
#include "shim/locks_hot.h"
#include "shim/shim.h"
#include "symbols/symbols.h"
#include "symbols/unloaded.h"
#include "unwind/registry.h"

/*
 * Fork handlers. fork() runs the prepare handlers in the reverse order of
 * their registration and the others in order: a handler registered late
 * runs its prepare early. The agent's modules register theirs when the
 * agent is loaded, which may be long after the host registered its own
 * (a linked host that calls pullprof_start() late); their prepare would
 * then take the agent's locks before the host's prepare handlers run,
 * and a host handler that allocates (sampled) would wait for a lock its
 * own thread holds. So, in libpullprof-agent.so, the modules' calls to
 * pthread_atfork land here (the link's --wrap=pthread_atfork) and queue;
 * the light object registered one trio when it was loaded, at the place
 * the single-object library had, and runs the queue from there.
 */
#define MAX_FORK_HANDLERS 16

static struct {
	void (*prepare)(void), (*parent)(void), (*child)(void);
} handlers[MAX_FORK_HANDLERS];
static unsigned nhandlers;

int __wrap_pthread_atfork(void (*prepare)(void), void (*parent)(void),
                          void (*child)(void));
int __wrap_pthread_atfork(void (*prepare)(void), void (*parent)(void),
                          void (*child)(void))
{
	/* Called by the agent's constructors and under its lifecycle lock:
	 * one at a time. */
	unsigned n = __atomic_load_n(&nhandlers, __ATOMIC_RELAXED);
	if (n == MAX_FORK_HANDLERS)
		return ENOMEM;
	handlers[n].prepare = prepare;
	handlers[n].parent = parent;
	handlers[n].child = child;
	__atomic_store_n(&nhandlers, n + 1, __ATOMIC_RELEASE);
	return 0;
}

/* Set by a fork's prepare phase in a process made without fork() from the
 * agent's (_Fork, clone; agent.h): that fork runs none of the handlers,
 * which would take locks perhaps held for good there. Per thread: the
 * thread that forks runs all three phases (the child its copy). */
static __thread int fork_skipped __attribute__((tls_model("initial-exec")));

static void pp_agent_fork(int phase)
{
	unsigned n = __atomic_load_n(&nhandlers, __ATOMIC_ACQUIRE);
	if (phase == PP_FORK_PREPARE)
		fork_skipped = pp_process_foreign();
	if (fork_skipped)
		return;
	if (phase == PP_FORK_PREPARE) {
		for (unsigned i = n; i-- > 0;)
			if (handlers[i].prepare)
				handlers[i].prepare();
		return;
	}
	for (unsigned i = 0; i < n; i++) {
		void (*f)(void) = phase == PP_FORK_PARENT ? handlers[i].parent
		                                          : handlers[i].child;
		if (f)
			f();
	}
}

/* Host context, before a dlclose: the unwind registry stops trusting its
 * tables, and the images loaded now are noted under a new generation, so
 * that samples taken while they were mapped keep naming them
 * (symbols/unloaded.h). */
static void unloading(void)
{
	pp_registry_unloading();
	int hidden = pp_heap_hide();
	pp_unloaded_before();
	pp_heap_unhide(hidden);
}

/* Host context, after a dlclose returned: the unwind registry catches up,
 * the images that went away are recorded, and the images remembered for
 * their build IDs forget them (one loaded at the same place later is
 * another image). */
static void unloaded(void)
{
	pp_unwind_refresh_after_unload();
	/* What it allocates is the agent's, not the host's. */
	int hidden = pp_heap_hide();
	pp_unloaded_after();
	pp_mappings_after_unload();
	pp_heap_unhide(hidden);
}

const struct pp_agent_ops pp_agent_ops_table = {
    .size = sizeof(struct pp_agent_ops),
    .version = PACKAGE_VERSION,
    .config_init_size = pullprof_config_init_size,
    .start = pullprof_start,
    .stop = pullprof_stop,
    .port = pullprof_port,
    .write_cpu_profile = pullprof_write_cpu_profile,
    .write_heap_profile = pullprof_write_heap_profile,
    .label_push = pullprof_label_push,
    .label_pop = pullprof_label_pop,
    .record_save = pullprof_record_save,
    .autostart = pp_agent_autostart,
    .heap_sampled = pp_heap_sampled,
    .heap_free_hit = pp_heap_free_hit,
    .heap_take = pp_heap_take,
    .heap_settle = pp_heap_settle,
    .heap_pool_sampled = pp_heap_pool_sampled,
    .heap_pool_free_hit = pp_heap_pool_free_hit,
    .heap_pool_release = pp_heap_pool_release,
    .locks_wait_begin = pp_locks_wait_begin,
    .locks_wait_end = pp_locks_wait_end,
    .locks_release = pp_locks_release,
    .locks_released = pp_locks_released,
    .thread_create = pp_thread_create,
    .unloading = unloading,
    .unloaded = unloaded,
    .fork_returned = pp_fork_returned,
    .fork = pp_agent_fork,
    .signal_taking = pp_cpu_host_takes,
};

__attribute__((visibility("default"))) const struct pp_agent_ops *
pp_agent_entry(const char *shim_version, size_t shim_size)
{
	if (!shim_version || strcmp(shim_version, PACKAGE_VERSION) != 0 ||
	    shim_size != sizeof(struct pp_shim))
		return NULL;
	return &pp_agent_ops_table;
}

/*
 * The agent's side of the split (shim.h): the table of entry points the
 * light object calls, and the agent object's one exported function.
 */
#include <string.h>

#include "agent.h"
#include "cpu/sampler.h"
#include "fork.h"
#include "heap/hot.h"
#include "locks/hot.h"
#include "pullprof.h"
#include "shim/shim.h"
#include "unwind/registry.h"

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
    .autostart = pp_agent_autostart,
    .heap_sampled = pp_heap_sampled,
    .heap_free_hit = pp_heap_free_hit,
    .heap_take = pp_heap_take,
    .heap_settle = pp_heap_settle,
    .lk_wait_begin = pp_lk_wait_begin,
    .lk_wait_end = pp_lk_wait_end,
    .lk_release = pp_lk_release,
    .lk_released = pp_lk_released,
    .thread_create = pp_thread_create,
    .unloading = pp_registry_unloading,
    .unloaded = pp_unwind_refresh_after_unload,
    .fork_returned = pp_fork_returned,
};

__attribute__((visibility("default"))) const struct pp_agent_ops *
pp_agent_entry(const char *shim_version, size_t shim_size)
{
	if (!shim_version || strcmp(shim_version, PACKAGE_VERSION) != 0 ||
	    shim_size != sizeof(struct pp_shim))
		return NULL;
	return &pp_agent_ops_table;
}

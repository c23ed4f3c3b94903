/*
 * The mutex and block profiles' row in the table of kinds (src/kinds.h):
 * one module records both (the interposed lock calls); its settings, stop
 * and fork hooks, and its parts of /status and /metrics. Routes: /mutex
 * and /block; a forked tree merges both.
 * Context: agent.
 */
#include "kind.h"
#include "config.h"
#include "locks/locks.h"
#include "util/prom.h"

static int start(const struct pp_config *c, char *err, size_t errlen)
{
	struct pp_locks_settings s = {
	    .mutex_rate = c->v.mutex_rate,
	    .block_rate = c->v.block_rate,
	    .max_depth = c->v.max_depth,
	    .max_profile_bytes = (size_t)c->v.max_profile_mb << 20,
	    .max_open = c->v.max_thread_dumps,
	};
	return pp_locks_start(&s, err, errlen);
}

/* The mutex and block profiles: their rates and what was recorded. */
static void status(struct json_object *root)
{
	struct pp_locks_stats s;
	pp_locks_stats(&s);
	struct json_object *o = json_object_new_object();
	static const char *const names[PP_LOCKS_NKINDS] = {"mutex", "block"};
	const unsigned rates[PP_LOCKS_NKINDS] = {s.mutex_rate, s.block_rate};
	const unsigned open[PP_LOCKS_NKINDS] = {s.mutex_open, s.block_open};
	for (int k = 0; k < PP_LOCKS_NKINDS; k++) {
		struct json_object *m = json_object_new_object();
		json_object_object_add(m, "rate", PP_JSON_I64(rates[k]));
		json_object_object_add(m, "open", PP_JSON_I64(open[k]));
		json_object_object_add(m, "events", PP_JSON_I64(s.events[k]));
		json_object_object_add(m, "stacks", PP_JSON_I64(s.stacks[k]));
		json_object_object_add(m, "past_table",
		                       PP_JSON_I64(s.past_table[k]));
		json_object_object_add(m, "dropped", PP_JSON_I64(s.dropped[k]));
		json_object_object_add(o, names[k], m);
	}
	json_object_object_add(o, "waiting", PP_JSON_I64(s.waiting));
	json_object_object_add(o, "slot_collisions", PP_JSON_I64(s.collisions));
	json_object_object_add(root, "locks", o);
}

static void metrics(struct pp_buf *b)
{
	struct pp_locks_stats s;
	pp_locks_stats(&s);
	static const char *const names[PP_LOCKS_NKINDS] = {"mutex", "block"};
	uint64_t rates[PP_LOCKS_NKINDS] = {s.mutex_rate, s.block_rate};
	pp_prom_family(b, "pullprof_lock_sampling_rate", "gauge",
	               "The rate each lock profile samples at (mutex: 1 in N "
	               "contended unlocks; block: one sample per N ns "
	               "waited); 0: off.");
	for (int k = 0; k < PP_LOCKS_NKINDS; k++) {
		struct pp_prom_label l = {"profile", names[k]};
		pp_prom_u64(b, "pullprof_lock_sampling_rate", &l, 1, rates[k]);
	}
	pp_prom_counter_by(b, "pullprof_lock_events_total",
	                   "Sampled lock events recorded, by profile.",
	                   "profile", names, s.events, PP_LOCKS_NKINDS);
	pp_prom_counter_by(
	    b, "pullprof_lock_events_dropped_total",
	    "Sampled lock events lost because the event ring was full, "
	    "by profile.",
	    "profile", names, s.dropped, PP_LOCKS_NKINDS);
	pp_prom_gauge(b, "pullprof_lock_waiting_threads",
	              "Threads waiting for a mutex or rwlock now, as the mutex "
	              "profile counts them.",
	              s.waiting);
}

extern const struct pp_endpoint pp_mutex_endpoint;
extern const struct pp_endpoint pp_block_endpoint;
static const struct pp_endpoint *const endpoints[] = {&pp_mutex_endpoint,
                                                      &pp_block_endpoint, NULL};

const struct pp_kind pp_kind_locks = {
    .name = "mutex and block",
    .endpoints = endpoints,
    .start = start,
    .stop = pp_locks_stop,
    .forget_in_child = pp_locks_forget_in_child,
    .status = status,
    .metrics = metrics,
};

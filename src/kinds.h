/*
 * The table of profile kinds: every profiler the agent runs is one row,
 * declared once in its own folder (src/<module>/kind.c) and listed in
 * src/kinds.c. The agent's lifecycle (start, its failure, stop, fork),
 * /status (and through it the viewer's list of kinds), /metrics and a
 * forked tree's merge loop over the table; nothing else lists the kinds
 * by hand. A kind's endpoints are its row's too (ask/ask.h: path, help,
 * window, sample types, how a request becomes a job): the HTTP server's
 * route table and the index page are made from them.
 * Context: agent.
 */
#ifndef PP_KINDS_H
#define PP_KINDS_H

#include <json-c/json.h>
#include <stddef.h>
#include <stdint.h>

#include "ask/ask.h"
#include "config.h"
#include "util/buf.h"

struct pp_kind {
	/* The module, in messages: "cpu", "heap", "mutex and block". */
	const char *name;
	/* Its endpoints (ask/ask.h), NULL-terminated, or NULL for none: each
	 * becomes a route of the server, answered by the one handler of
	 * every kind. Those marked merged are its pprof profiles: a
	 * follow-mode tree answers them by merging its members' answers,
	 * and /status lists them as the kind's "profiles" (the viewer's
	 * kinds). */
	const struct pp_endpoint *const *endpoints;
	/* At agent start, in table order, on the thread that starts it:
	 * take the settings, set up what must exist before the first
	 * request. 0 or a negative errno with a sentence in err; then the
	 * rows started before are stopped. NULL: nothing to do. */
	int (*start)(const struct pp_config *c, char *err, size_t errlen);
	/* At agent stop (and after a failed start), in reverse table order,
	 * once the job pipeline has shut down: undo start, join the
	 * module's threads. A no-op for what did not start. */
	void (*stop)(void);
	/* In fork()'s child, before the lifecycle forgets the agent: the
	 * parent's threads are not here; reset without touching locks or
	 * memory they may have held. NULL: nothing to do. */
	void (*forget_in_child)(void);
	/* Once per process, before the agent's own pthread_atfork handlers
	 * (so that fork's prepare handlers, run in reverse, take the
	 * agent's lock first): the module's own. NULL: none. */
	void (*register_atfork)(void);
	/* Its part of /status: adds its section(s) to the root object
	 * (pp_kind_section finds or makes a shared one). */
	void (*status)(struct json_object *root);
	/* Its part of /metrics (families named pullprof_<module>_...). */
	void (*metrics)(struct pp_buf *b);
};

/* The rows, in start order (src/kinds.c). */
extern const struct pp_kind *const pp_kinds[];
extern const size_t pp_kinds_count;

/* Start every row in order; on a failure, stop those started and return
 * the error (err holds its sentence). */
int pp_kinds_start(const struct pp_config *c, char *err, size_t errlen);
/* Stop every row, in reverse order. */
void pp_kinds_stop(void);
void pp_kinds_forget_in_child(void);
void pp_kinds_register_atfork(void);
void pp_kinds_status(struct json_object *root);
void pp_kinds_metrics(struct pp_buf *b);
/* Does a follow-mode tree merge the members' answers for this route? */
int pp_kinds_tree_merges(const char *route);
/* Every kind's endpoints, in table order: fn(e, arg) for each. */
void pp_kinds_each_endpoint(void (*fn)(const struct pp_endpoint *e, void *arg),
                            void *arg);

/* For the rows' status parts: root's object under key, made when absent
 * (several rows may write into one section, as threadcreate does into
 * "threads"). */
struct json_object *pp_kind_section(struct json_object *root, const char *key);
/* The stack-capture problems every profiler counts, in a new object. */
struct json_object *pp_kind_unwind_json(uint64_t truncated, uint64_t unknown,
                                        uint64_t failed);
/* "mean_ns" and "max_ns" of n costs adding up to total_ns. */
void pp_kind_add_cost(struct json_object *o, uint64_t n, uint64_t total_ns,
                      uint64_t max_ns);

#define PP_JSON_I64(v) json_object_new_int64((int64_t)(v))

#endif

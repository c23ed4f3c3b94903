/*
 * A kind of profile, as its folder declares it: its row (struct pp_kind:
 * lifecycle hooks, its parts of /status and /metrics) and its endpoints
 * (struct pp_endpoint: path, help, window, sample types, and the ask that
 * turns a request's arguments into a job, ask/ask.h). A leaf: the rows
 * include this and nothing of the table that lists them (kinds.h), nor of
 * the server that answers their endpoints.
 * Context: agent.
 */
#ifndef PP_KIND_H
#define PP_KIND_H

#include <json-c/json.h>
#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

struct pp_config;
struct pp_args;
struct pp_producer;

/* What the record keeps for an endpoint's kind. */
enum pp_ask_record {
	PP_ASK_NO_RECORD = 0,  /* nothing: last= and friends are refused */
	PP_ASK_RECORD_SAMPLES, /* CPU samples: any range */
	PP_ASK_RECORD_SNAPS    /* periodic snapshots (heap, mutex, block) */
};

struct pp_ask;
struct pp_endpoint;

typedef int (*pp_ask_fn)(const struct pp_endpoint *e, const struct pp_args *a,
                         const struct pp_config *cfg, struct pp_ask *ask,
                         char *err, size_t errlen);

/* One profile endpoint of a kind, below the prefix. */
struct pp_endpoint {
	const char *path; /* "/profile" */
	const char *name; /* "profile": counters, /status, ?pid= merges */
	const char *link; /* what the index links to: "profile?seconds=30" */
	const char *help; /* one line for the index */
	/* A window's length when seconds= is not given (and how long a
	 * forked tree waits for its members); 0: a snapshot, where
	 * seconds=N asks for the change over N. */
	unsigned window;
	/* The profile's sample types, '|'-separated (sample_index=). */
	const char *types;
	int render; /* PP_RENDER_* the endpoint allows */
	enum pp_ask_record record;
	/* With PP_ASK_NO_RECORD: why last= and friends do not apply (NULL: a
	 * sentence by the window). */
	const char *no_record;
	/* Its pprof answers are merged over a follow-mode tree's members
	 * (with a pid label), and the viewer offers it as a kind. */
	int merged;
	/* Also answered at <p>/debug/NAME when the prefix is <p>/debug/pprof
	 * (fgprof's path beside Go's, where the scrapers' fgprof job asks). */
	int beside_go;
	/* A variant for a shared ask (heap or allocs, wall or fgprof). */
	int variant;
	/* The producer of a new profile, for the asks that take it from here
	 * (pp_ask_counts), and the highest debug= (Go's text: 1; the thread
	 * dump's block per thread: 2). */
	struct pp_producer *producer;
	unsigned max_debug;
	/* With PP_ASK_RECORD_SNAPS: the record's name of the kind ("heap",
	 * "mutex", "block"). */
	const char *snaps;
	pp_ask_fn ask;
};

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

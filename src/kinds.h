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

#include "kind.h"

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

#endif

/*
 * Follow mode's tree of processes as the HTTP side sees it: answers for
 * the whole tree, gathered from every member and merged, or relayed from
 * one (?pid=N) (tree.c, on gather.c), and /children. Above the server and
 * the fork handling; the server asks it through the agent's hook.
 * Context: agent.
 */
#ifndef PP_TREE_H
#define PP_TREE_H

#include <microhttpd.h>

#include "server/request.h"

/* Before r's handler (the server's hook, struct pp_agent_facts.intercept):
 * -1 when this process answers r itself; else r was answered here, or is
 * being (a profile of the whole tree, another process's answer for ?pid=N,
 * or an error about either), and this is the enum MHD_Result. */
int pp_tree_intercept(struct pp_request *r);
/* GET /children: the tree's members (api/handlers.h's signature). */
enum MHD_Result pp_h_children(struct pp_request *r);

#endif

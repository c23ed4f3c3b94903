/*
 * Follow mode's answers for the whole tree of processes: gathered from
 * every member and merged, or relayed from one (?pid=N); the HTTP side
 * (the gathering is src/fork/gather.h).
 * Context: agent.
 */
#ifndef PP_TREE_H
#define PP_TREE_H

#include <microhttpd.h>

#include "routes.h"

/* Before r's handler: 1 when r was answered here, or is being (the answer
 * in *ret): a profile of the whole tree, or another process's answer
 * (?pid=N), or an error about either; 0 when this process answers it. */
int pp_tree_dispatch(struct pp_request *r, enum MHD_Result *ret);

#endif

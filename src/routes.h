/*
 * The routing table: which paths exist and who answers them, made once from
 * the endpoints of no kind (src/api/, the tree's /children) and every
 * kind's endpoints (kinds.h). The agent hands it to its servers
 * (struct pp_agent_facts); handlers read it from there.
 * Context: agent.
 */
#ifndef PP_ROUTES_H
#define PP_ROUTES_H

#include <stddef.h>

#include "server/request.h"

/* The table, made once by pp_routes_build (the agent calls it before its
 * first server starts). */
extern struct pp_route pp_routes[];
extern size_t pp_routes_count;
/* 0, or -ENOSPC with a sentence when the kinds have more endpoints than
 * the server counts. Any thread; idempotent. */
int pp_routes_build(char *err, size_t errlen);

#endif

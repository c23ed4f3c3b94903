/*
 * The lock kind's endpoints: /mutex (who held the locks others waited
 * for) and /block (who waited), counts since the agent started, their
 * change over seconds=N, or a past range's change from the record's
 * snapshots. Rows only: their ask is the counts' own (ask.h).
 * Context: agent.
 */
#include "ask/ask.h"
#include "locks/locks.h"

const struct pp_endpoint pp_mutex_endpoint = {
    .path = "/mutex",
    .name = "mutex",
    .link = "mutex?debug=1",
    .help = "lock contention by the stacks that held the locks others "
            "waited for, weighted by the wait (Go's mutex profile; "
            "PULLPROF_MUTEX_RATE); seconds=N the change",
    .types = "contentions|delay",
    .render = PP_RENDER_CONTENTION,
    .record = PP_ASK_RECORD_SNAPS,
    .snaps = "mutex",
    .merged = 1,
    .producer = &pp_mutex_producer,
    .max_debug = 1,
    .ask = pp_ask_counts,
};

const struct pp_endpoint pp_block_endpoint = {
    .path = "/block",
    .name = "block",
    .link = "block?debug=1",
    .help = "where threads waited for locks, condition variables, "
            "semaphores and joins, weighted by the wait (Go's block "
            "profile; PULLPROF_BLOCK_RATE); seconds=N the change",
    .types = "contentions|delay",
    .render = PP_RENDER_CONTENTION,
    .record = PP_ASK_RECORD_SNAPS,
    .snaps = "block",
    .merged = 1,
    .producer = &pp_block_producer,
    .max_debug = 1,
    .ask = pp_ask_counts,
};

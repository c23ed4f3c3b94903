/*
 * The thread kinds' endpoints: where threads wait, /goroutine (the thread
 * dump, Go's path: each "goroutine" is a thread) and /wall (the wall-clock
 * profile, also with fgprof's sample types at /fgprof); where they come
 * from, /threadcreate.
 * Context: agent.
 */
#include <errno.h>

#include "ask/ask.h"
#include "config.h"
#include "threads/threads.h"

PP_ASK_FITS(struct pp_wall_query);

static int ask_wall(const struct pp_endpoint *e, const struct pp_args *a,
                    const struct pp_config *cfg, struct pp_ask *ask, char *err,
                    size_t errlen)
{
	struct pp_wall_query *q = PP_ASK_QUERY(ask, struct pp_wall_query);
	q->fgprof = e->variant;
	if (pp_ask_begin(e, a, "seconds|hz", ask, err, errlen) ||
	    pp_ask_window(e, a, cfg, &q->seconds, err, errlen) ||
	    pp_args_uint(a, "hz", PP_WALL_HZ, 1, PP_WALL_MAX_HZ, &q->hz, err,
	                 errlen) ||
	    pp_ask_render(e, a, ask, err, errlen) ||
	    pp_ask_id(a, "seconds|hz", ask, err, errlen))
		return -EINVAL;
	ask->rq.producer = &pp_wall_producer;
	ask->rq.query = q;
	ask->rq.seconds = q->seconds;
	return 0;
}

const struct pp_endpoint pp_goroutine_endpoint = {
    .path = "/goroutine",
    .name = "goroutine",
    .link = "goroutine?debug=2",
    .help = "thread dump: every thread's stack now, read without stopping "
            "or signalling it (Go's path; each goroutine is a thread); "
            "debug=1 grouped, debug=2 a block per thread, seconds=N the "
            "change",
    .types = "goroutine",
    .render = PP_RENDER_DUMP,
    .merged = 1,
    .producer = &pp_dump_producer,
    .max_debug = 2,
    .ask = pp_ask_counts,
};

/* The wall-clock profile: a window of the next seconds only. */
#define WALL_NO_RECORD                                                         \
	"the record keeps CPU samples, heap, mutex and block; a wall-clock "   \
	"profile is of the next seconds (a wall window looks at blocked "      \
	"threads from outside, too costly to do all the time)"

const struct pp_endpoint pp_wall_endpoint = {
    .path = "/wall",
    .name = "wall",
    .link = "wall?seconds=30",
    .help = "wall-clock profile of the next seconds (default 30) at hz "
            "(default 99): every thread, running or blocked, labelled with "
            "its state",
    .window = 30,
    .types = "samples|wall",
    .render = PP_RENDER_TIMELINE,
    .no_record = WALL_NO_RECORD,
    .merged = 1,
    .ask = ask_wall,
};

const struct pp_endpoint pp_fgprof_endpoint = {
    .path = "/fgprof",
    .name = "fgprof",
    .link = "fgprof?seconds=30",
    .help = "the wall-clock profile with fgprof's sample types; also at "
            "/debug/fgprof when the prefix is /debug/pprof",
    .window = 30,
    .types = "samples|time",
    .render = PP_RENDER_TIMELINE,
    .no_record = WALL_NO_RECORD,
    .merged = 1,
    .beside_go = 1,
    .variant = 1,
    .ask = ask_wall,
};

const struct pp_endpoint pp_threadcreate_endpoint = {
    .path = "/threadcreate",
    .name = "threadcreate",
    .link = "threadcreate?debug=1",
    .help = "the stacks that created threads since the agent started, a "
            "count each (Go's threadcreate); seconds=N the change",
    .types = "threadcreate",
    .render = PP_RENDER_DUMP,
    .merged = 1,
    .producer = &pp_threadcreate_producer,
    .max_debug = 1,
    .ask = pp_ask_counts,
};

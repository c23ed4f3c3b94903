/*
 * The CPU kind's endpoints: /profile, a CPU profile of the next seconds (a
 * window on the shared sampler, the CPU producer) or of a past range (the
 * record's producer); /trace, the same window as a Perfetto trace, kept
 * under /profile's ids so that ?id= renders either way.
 * Context: agent.
 */
#include <errno.h>

#include "ask/ask.h"
#include "config.h"
#include "cpu/cpu.h"

PP_ASK_FITS(struct pp_cpu_query);

static int ask_profile(const struct pp_endpoint *e, const struct pp_args *a,
                       const struct pp_config *cfg, struct pp_ask *ask,
                       char *err, size_t errlen)
{
	struct pp_cpu_query *q = PP_ASK_QUERY(ask, struct pp_cpu_query);
	if (pp_ask_begin(e, a, "seconds|hz", ask, err, errlen))
		return -EINVAL;
	if (ask->from_record) {
		/* The past, from the record: made at once. */
		if (pp_ask_render(e, a, ask, err, errlen))
			return -EINVAL;
		pp_ask_samples(ask);
		return 0;
	}
	if (pp_ask_window(e, a, cfg, &q->seconds, err, errlen) ||
	    pp_args_uint(a, "hz", cfg->v.cpu_hz, 1, 1000, &q->hz, err,
	                 errlen) ||
	    pp_ask_render(e, a, ask, err, errlen) ||
	    pp_ask_id(a, "seconds|hz", ask, err, errlen))
		return -EINVAL;
	ask->rq.producer = &pp_cpu_producer;
	ask->rq.query = q;
	ask->rq.seconds = q->seconds;
	return 0;
}

static int ask_trace(const struct pp_endpoint *e, const struct pp_args *a,
                     const struct pp_config *cfg, struct pp_ask *ask, char *err,
                     size_t errlen)
{
	struct pp_cpu_query *q = PP_ASK_QUERY(ask, struct pp_cpu_query);
	unsigned format = 0, wall = 0, heap = 0;
	if (pp_ask_begin(e, a, "seconds|hz|wall|heap", ask, err, errlen))
		return -EINVAL;
	if (ask->from_record) {
		if (pp_ask_refuse(a, "wall|heap",
		                  "the record keeps CPU samples; wall= and "
		                  "heap= come with a new window (seconds=)",
		                  err, errlen) ||
		    pp_args_choice(a, "format", "perfetto", &format, err,
		                   errlen) ||
		    pp_ask_refuse(a, "debug|top|sample_index",
		                  "/trace answers a Perfetto trace; the same "
		                  "range in other formats: /profile with the "
		                  "same last=, start=, end=",
		                  err, errlen) ||
		    pp_ask_render(e, a, ask, err, errlen))
			return -EINVAL;
		ask->rq.render.format = PP_FORMAT_PERFETTO;
		pp_ask_samples(ask);
		return 0;
	}
	if (pp_ask_window(e, a, cfg, &q->seconds, err, errlen) ||
	    pp_args_uint(a, "hz", cfg->v.cpu_hz, 1, 1000, &q->hz, err,
	                 errlen) ||
	    pp_args_uint(a, "wall", 0, 0, 1, &wall, err, errlen) ||
	    pp_args_uint(a, "heap", 0, 0, 1, &heap, err, errlen) ||
	    pp_args_choice(a, "format", "perfetto", &format, err, errlen) ||
	    pp_ask_refuse(a, "debug|top|sample_index",
	                  "/trace answers a Perfetto trace; the same window "
	                  "in other formats: /profile?id=N",
	                  err, errlen) ||
	    pp_ask_render(e, a, ask, err, errlen) ||
	    pp_ask_id(a, "seconds|hz|wall|heap", ask, err, errlen))
		return -EINVAL;
	q->wall = (int)wall;
	q->heap = (int)heap;
	ask->rq.render.format = PP_FORMAT_PERFETTO;
	ask->rq.producer = &pp_cpu_producer;
	ask->rq.query = q;
	ask->rq.seconds = q->seconds;
	return 0;
}

const struct pp_endpoint pp_cpu_profile_endpoint = {
    .path = "/profile",
    .name = "profile",
    .link = "profile?seconds=30",
    .help = "CPU profile of the next seconds (default 30) sampled at hz "
            "(default 100), gzipped pprof: go tool pprof reads it",
    .window = 30,
    .types = "samples|cpu",
    .render = PP_RENDER_LEGACY | PP_RENDER_TIMELINE,
    .record = PP_ASK_RECORD_SAMPLES,
    .merged = 1,
    .ask = ask_profile,
};

const struct pp_endpoint pp_cpu_trace_endpoint = {
    .path = "/trace",
    .name = "trace",
    .link = "trace?seconds=5",
    .help = "a Perfetto trace of the next seconds (default 1, as Go's): "
            "every CPU sample at its time on its thread's track (wall=1 "
            "adds every thread's state, heap=1 a heap snapshot); opens in "
            "ui.perfetto.dev",
    .window = 1,
    .types = "samples|cpu",
    .render = PP_RENDER_TIMELINE,
    .record = PP_ASK_RECORD_SAMPLES,
    .ask = ask_trace,
};

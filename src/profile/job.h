/*
 * The job pipeline: the one lifecycle of every profile request, whatever the
 * kind of profile and whoever asks (an HTTP handler, pullprof_write_*).
 *
 *
 *   open ──► waiting ──► ready ──► rendering ──► done ──► take, release
 *              │  (the producer hands over a model: delivered, or made
 *              │   when due)
 *              └──► cancelled (client hung up, request released, agent
 *                   stopping)
 *
 * The pipeline checks the producer's limit (-EBUSY and when to retry),
 * watches the client's socket for a hang-up, renders the model in the
 * format asked (pp_render_body), keeps it for ?id= (profile/recent.h), and
 * calls the request back once. A ?id= request renders the kept model again
 * and never reaches a producer.
 *
 * A producer makes models and nothing else. It is one of two shapes:
 *  - it delivers (CPU: its collector finishes a window when the window's
 *    time is up and calls pp_job_deliver);
 *  - or it is asked to make the model when the job is due (heap: a snapshot
 *    at once, or `seconds` after the open for a delta), on the pipeline's
 *    thread.
 *
 * One thread, "pullprof-jobs", started with the agent, makes, renders,
 * watches clients and runs the producers' ticks. One lock guards the job list;
 * producer hooks and done callbacks run without it.
 *
 * Errors, here and in every caller (the HTTP status they become):
 *   -EBUSY      the producer's limit is reached; *retry_after says when a
 *               job of that kind ends (429 + Retry-After)
 *   -ENOENT     ?id= names no kept profile of that kind (404)
 *   -ENOTSUP    this kind of profile is off in this process (404)
 *   -EEXIST     the producer will not run beside something of the host's
 *               (CPU: the host's own SIGURG and SIGPROF) (409)
 *   -ESHUTDOWN  the agent is stopping (503)
 *   -ECANCELED  (take) cancelled: client gone or agent stopping (503)
 *   -ENOMEM, or a producer's or renderer's errno (503)
 * Context: agent.
 */
#ifndef PP_JOB_H
#define PP_JOB_H

#include <stddef.h>
#include <stdint.h>

#include "profile/model.h"
#include "profile/render.h"

struct pp_job;
struct pp_counts;

/* A kind of profile. Defined (and its limit set) by the producer's module;
 * the hooks run on agent threads, never with the pipeline's lock held. */
struct pp_producer {
	const char *kind; /* ?id= store kind, e.g. "profile", "heap" */
	const char *what; /* in messages: "CPU profiles", "heap profiles" */
	const char *limit_setting; /* the setting that bounds max_open */
	unsigned max_open;         /* jobs of this kind not yet done */
	/* At open, on the caller's thread: check and set up (CPU: a window
	 * on the sampler; heap: the start snapshot of a delta). `query` is
	 * the producer's own (struct pp_cpu_query, ...). 0 or a negative
	 * errno with a sentence in err. */
	int (*start)(struct pp_job *j, const void *query, char *err,
	             size_t errlen);
	/* NULL for a delivering producer. Else called on the pipeline's
	 * thread once the job is due: the model, handed over. */
	int (*make)(struct pp_job *j, struct pp_profile **out);
	/* The job ended before a model came (cancelled): undo start. May
	 * race with a pp_job_deliver, which then finds the job cancelled. */
	void (*cancel)(struct pp_job *j);
	/* Free the producer's data when the job goes. */
	void (*free)(void *data);
	/* Every PP_JOB_TICK_NS on the pipeline's thread while the agent runs
	 * (housekeeping such as unwind-table refreshes). May be NULL. */
	void (*tick)(void);
	/* The shape "counts since the start, or the change over ?seconds"
	 * (profile/counts.h), whose hooks above come from there. */
	const struct pp_counts *counts;
};

#define PP_JOB_TICK_NS 250000000ull

/* Called once per job when its answer is ready or it was cancelled, on an
 * agent thread: must not block. */
typedef void (*pp_job_done_fn)(void *arg);

struct pp_job_request {
	struct pp_producer *producer;
	const void *query; /* the producer's (start's argument) */
	uint64_t id;       /* > 0: render the kept profile id again */
	/* The producer's window: the job is due (make) or expected (deliver)
	 * this long after the open; 0: now. */
	unsigned seconds;
	struct pp_render_opts render;
	int keep;      /* keep the model for ?id= */
	int client_fd; /* >= 0: cancel when this socket's peer hangs up */
	pp_job_done_fn done;
	void *arg;
};

/* Open a job. On success *out is the caller's reference (pp_job_release
 * it). Errors as above, with a sentence in err; *retry_after (seconds) is
 * set with -EBUSY. */
int pp_job_open(const struct pp_job_request *rq, struct pp_job **out,
                unsigned *retry_after, char *err, size_t errlen);
/* After done: the rendered body (handed over: free() it) and the id the
 * model is kept under (0: not kept); -ECANCELED, -EAGAIN (not done yet),
 * -EALREADY (taken before) or the error that ended it. */
int pp_job_take(struct pp_job *j, char **body, size_t *len, uint64_t *id);
/* The caller lets go: a job still waiting is cancelled. */
void pp_job_release(struct pp_job *j);

/* For producers. */
const struct pp_producer *pp_job_producer(const struct pp_job *j);
/* The window the request asked for (pp_job_request.seconds; 0: now). */
unsigned pp_job_seconds(const struct pp_job *j);
void *pp_job_data(const struct pp_job *j);
void pp_job_set_data(struct pp_job *j, void *data);
/* The moments the job was opened (CLOCK_MONOTONIC and CLOCK_REALTIME). */
uint64_t pp_job_opened_ns(const struct pp_job *j);
int64_t pp_job_opened_real_ns(const struct pp_job *j);
/* A producer's own reference while it holds the job (CPU: while its
 * window is on the collector's list). */
void pp_job_ref(struct pp_job *j);
void pp_job_unref(struct pp_job *j);
/* A delivering producer hands over the model (or fails with rc < 0). A
 * job cancelled meanwhile frees it. Any agent thread; never blocks long. */
void pp_job_deliver(struct pp_job *j, struct pp_profile *p, int rc);

/* For a `make` producer's ?seconds=N: end - start (pp_profile_delta),
 * timed as the job's window (its open to now). end is freed either way.
 * 0 or a negative errno. */
int pp_job_window_delta(const struct pp_job *j, struct pp_profile *end,
                        const struct pp_profile *start,
                        struct pp_profile **out);

/* Jobs of this producer not yet done (for /status). */
unsigned pp_jobs_open(const struct pp_producer *p);

/* A producer with a tick asks for it (any time; once is enough). */
void pp_jobs_add_ticker(struct pp_producer *p);
/* Run the ticks soon, not at the next PP_JOB_TICK_NS (a buffer filling
 * up). Any thread, host context too: an atomic flag and a signal of the
 * pipeline's condition variable, never a wait; a call that comes as the
 * thread goes to sleep is seen at the next tick. */
void pp_jobs_tick_soon(void);

/* The agent starts and stops the pipeline. Start runs the thread; 0 or a
 * negative errno with a sentence in err. Shutdown cancels every job (their
 * done callbacks run), refuses new ones with -ESHUTDOWN and joins the
 * thread; jobs still referenced stay valid until released. */
int pp_jobs_start(char *err, size_t errlen);
void pp_jobs_shutdown(void);
/* Whether new jobs are taken: started and not shut down (or shutting
 * down). A server still answering while the agent stops (its kinds stop
 * before it does) refuses profile requests with 503 on this. */
int pp_jobs_accepting(void);
/* In a forked child (async-signal-safe): the thread does not exist here. */
void pp_jobs_forget_in_child(void);

#endif

/*
 * What a request asks of a kind of profile, without HTTP: the endpoints a
 * kind declares in its row (kinds.h), and the rules every profile endpoint
 * shares (a window's seconds, a read of the record, ?id=, the format), as
 * functions of a pp_args (args.h). The HTTP side has one handler for every
 * endpoint here (src/http/h_kind.c): it hands the request's arguments to the
 * endpoint's ask and the job ask fills to the pipeline.
 *
 * An endpoint's ask:
 *   1. pp_ask_begin: a read of the record (last=, start=, end=,
 *      recording=), refused where the kind keeps none; its own parameters
 *      do not combine with one;
 *   2. its own parameters (hz=, peak=, ...) and their checks;
 *   3. pp_ask_window (seconds=, default e->window), pp_ask_render
 *      (format=, debug=, top=, sample_index= of e->types), pp_ask_id;
 *   4. the producer and its query in ask->rq.
 * On an error it returns a negative errno, err holding the sentence and
 * ask->status the HTTP status (400 unless said otherwise).
 * Context: agent.
 */
#ifndef PP_ASK_H
#define PP_ASK_H

#include <stdalign.h>
#include <stddef.h>

#include "ask/args.h"
#include "profile/job.h"
#include "record/record.h"

struct pp_config;

/* The HTTP statuses an ask answers with (the numbers are the API's). */
#define PP_ASK_BAD_REQUEST 400
#define PP_ASK_NOT_FOUND 404
#define PP_ASK_RANGE 416

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
	/* With PP_ASK_RECORD_SNAPS: the record's kind (PP_RK_*). */
	int snaps;
	pp_ask_fn ask;
};

/* What an ask hands back: the job to open, and room for the producer's
 * query (rq.query points into it). */
struct pp_ask {
	struct pp_job_request rq;
	unsigned status; /* on an error: the HTTP status */
	/* From pp_ask_begin: a read of the record, and its range. */
	int from_record;
	struct pp_record_range range;
	struct pp_record_snap_query snap;
	alignas(max_align_t) unsigned char query[256];
};

/* The producer's query, in ask's room for it (PP_ASK_FITS(type) once in
 * the file that uses it). */
#define PP_ASK_QUERY(ask, type) ((type *)(void *)(ask)->query)
#define PP_ASK_FITS(type)                                                      \
	_Static_assert(sizeof(type) <= sizeof(((struct pp_ask *)0)->query),    \
	               "struct pp_ask's room for a query is too small")

/* Step 1. sampling: the endpoint's own parameters of a new window
 * ("seconds|hz"), which do not combine with a read of the record. Sets
 * ask->from_record and ask->range (and, for snapshots, ask->snap's range
 * and kind, e->snaps). 0, or a negative errno (status 400, 404: the
 * record is off or holds no such saving, 416: a range it does not hold). */
int pp_ask_begin(const struct pp_endpoint *e, const struct pp_args *a,
                 const char *sampling, struct pp_ask *ask, char *err,
                 size_t errlen);
/* After pp_ask_begin found a read of the CPU samples: points ask->rq at
 * the record's producer. */
void pp_ask_samples(struct pp_ask *ask);
/* After pp_ask_begin found a read of the snapshots: checks the range
 * against what the record holds and points ask->rq at the snapshot
 * producer (status 404 or 416 on an error). */
int pp_ask_snaps(const struct pp_endpoint *e, struct pp_ask *ask, char *err,
                 size_t errlen);
/* seconds=: e->window by default (capped at the longest window) from 1 up,
 * or for a snapshot endpoint 0 (now) up to the longest window. */
int pp_ask_window(const struct pp_endpoint *e, const struct pp_args *a,
                  const struct pp_config *cfg, unsigned *seconds, char *err,
                  size_t errlen);
/* format=, debug=, top=, sample_index= of e->types, with e->render. */
int pp_ask_render(const struct pp_endpoint *e, const struct pp_args *a,
                  struct pp_ask *ask, char *err, size_t errlen);
/* id=: render a kept profile again; sampling's parameters do not combine. */
int pp_ask_id(const struct pp_args *a, const char *sampling, struct pp_ask *ask,
              char *err, size_t errlen);
/* The ask of the profiles of counts since the agent started (profile/
 * counts.h: the thread dump, threadcreate, mutex, block): now, the change
 * over seconds=N, debug=1 Go's text (up to e->max_debug), or with
 * e->record a past range's change from the record's snapshots. A row's
 * whole ask: .ask = pp_ask_counts, with .producer and .max_debug. */
int pp_ask_counts(const struct pp_endpoint *e, const struct pp_args *a,
                  const struct pp_config *cfg, struct pp_ask *ask, char *err,
                  size_t errlen);
/* -EINVAL, "NAME does not apply here: why", when any of names ("a|b") is
 * given. */
int pp_ask_refuse(const struct pp_args *a, const char *names, const char *why,
                  char *err, size_t errlen);

#endif

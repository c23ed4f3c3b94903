/*
 * What a request asks of a kind of profile, without HTTP: the endpoints a
 * kind declares in its row (kinds.h), and the rules every profile endpoint
 * shares (a window's seconds, a read of the record, ?id=, the format), as
 * functions of a pp_args (args.h). The HTTP side has one handler for every
 * endpoint here (src/api/h_kind.c): it hands the request's arguments to the
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
#include "kind.h"
#include "profile/job.h"

struct pp_config;

/* The HTTP statuses an ask answers with (the numbers are the API's). */
#define PP_ASK_BAD_REQUEST 400
#define PP_ASK_NOT_FOUND 404
#define PP_ASK_RANGE 416

/* What a read of the past needs of the record: record/past.c provides it
 * and the handler hands it over in the ask, so that no ask names a record
 * function. */
struct pp_ask_past {
	/* last=, start=, end=, recording= (NULL: absent) into range (the
	 * snapshots' rules with snaps). 0, or -EINVAL, -ENOTSUP or -ENOENT
	 * (the record is off, no such saving: 404), -ERANGE (a range it does
	 * not hold: 416), with a sentence in err. */
	int (*parse)(int snaps, const char *last, const char *start,
	             const char *end, const char *recording, void *range,
	             char *err, size_t errlen);
	/* The CPU samples over range: rq's producer and query (in q, qlen
	 * bytes of room). */
	void (*samples)(const void *range, struct pp_job_request *rq, void *q,
	                size_t qlen);
	/* The snapshots of a kind ("heap", "mutex", "block") over range
	 * (state: the kind as of the range's end; allocs: heap's allocated
	 * view): checks what the record holds (-ENOTSUP: 404, else 416, a
	 * sentence in err) and sets rq's producer and query (in q). */
	int (*snaps)(const char *kind, const void *range, int state, int allocs,
	             struct pp_job_request *rq, void *q, size_t qlen, char *err,
	             size_t errlen);
};

/* What an ask hands back: the job to open, and room for the producer's
 * query (rq.query points into it). */
struct pp_ask {
	struct pp_job_request rq;
	unsigned status; /* on an error: the HTTP status */
	/* The record's side of a read of the past (set by the handler). */
	const struct pp_ask_past *past;
	/* From pp_ask_begin: a read of the record, and its range. */
	int from_record;
	alignas(max_align_t) unsigned char range[64];
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
 * ask->from_record and ask->range. 0, or a negative errno (status 400,
 * 404: the record is off or holds no such saving, 416: a range it does not
 * hold). */
int pp_ask_begin(const struct pp_endpoint *e, const struct pp_args *a,
                 const char *sampling, struct pp_ask *ask, char *err,
                 size_t errlen);
/* After pp_ask_begin found a read of the CPU samples: points ask->rq at
 * the record's producer. */
void pp_ask_samples(struct pp_ask *ask);
/* After pp_ask_begin found a read of the snapshots (of e->snaps): checks
 * the range against what the record holds and points ask->rq at the
 * snapshot producer (status 404 or 416 on an error). state: the kind as of
 * the range's end, not its change; allocs: heap's allocated view. */
int pp_ask_snaps(const struct pp_endpoint *e, struct pp_ask *ask, int state,
                 int allocs, char *err, size_t errlen);
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

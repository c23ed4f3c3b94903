/*
 * The record's snapshots (record.h): the heap sampler's in-use and
 * allocated bytes and objects by site, and the mutex and block profiles'
 * counts, taken at regular intervals while the record is on, so that the
 * change over a past range (and the heap in use at its end) is answered at
 * once on /heap, /allocs, /mutex and /block. A snapshot is the kind's
 * model as its endpoint makes it now; a range's answer is the later one
 * less the earlier one (pp_profile_delta). They share the record's memory
 * bound: a quarter of it, past which the oldest go first.
 * Context: agent.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "heap/detect.h"
#include "heap/heap.h"
#include "locks/locks.h"
#include "profile/counts.h"
#include "record/internal.h"
#include "threads/threads.h"
#include "util/clock.h"

struct rsnap {
	struct rsnap *next;  /* newer; NULL once off the list */
	uint64_t t;          /* CLOCK_MONOTONIC when taken */
	unsigned char *data; /* the model, packed (pack.c) */
	size_t len, bytes;   /* of data; of the whole snapshot */
	unsigned refs;       /* the list's, and each saving's pin */
};

/* A saving's snapshots: for each kind, the one at or before its start and
 * the newest at the saving (either may be NULL). */
struct pp_record_pins {
	struct rsnap *s[PP_RECORD_KINDS][2];
};

static struct {
	pthread_mutex_t mu;
	struct rsnap *oldest[PP_RECORD_KINDS], *newest[PP_RECORD_KINDS];
	unsigned n[PP_RECORD_KINDS];
	char why_not[PP_RECORD_KINDS][160]; /* why a kind is not recorded */
	size_t bytes;
	uint64_t last_ns, interval_ns, taken, dropped, cpu_ns;
	int on;
} sn = {.mu = PTHREAD_MUTEX_INITIALIZER};

static const char *const kind_names[PP_RECORD_KINDS] = {"heap", "mutex",
                                                        "block"};

const char *pp_record_kind_name(enum pp_record_kind k)
{
	return kind_names[k];
}

/* ---- taking them -----------------------------------------------------------
 */

/* The kind's model now, or a negative errno with why in the kind's note. */
static int take(enum pp_record_kind k, struct pp_profile **out, char *why,
                size_t len)
{
	*out = NULL;
	if (k == PP_RK_HEAP) {
		/* What /heap would serve now: pullprof's sampler, or why not
		 * (an allocator's own profile has no snapshots here). */
		struct pp_heap_query hq = {.view = PP_HEAP_INUSE};
		int none = pp_heap_resolve(&hq, 0, why, len);
		if (!none && hq.source != PP_HEAP_SOURCE_INTERPOSED)
			snprintf(why, len,
			         "this process's heap profile is %s's own, "
			         "which the record does not keep",
			         pp_heap_source_name(
			             (enum pp_heap_source)hq.source));
		if (none || hq.source != PP_HEAP_SOURCE_INTERPOSED)
			return -ENOTSUP;
		struct pp_profile *peak = NULL;
		int rc = pp_heap_trace_models(out, &peak);
		pp_profile_free(peak);
		return rc;
	}
	struct pp_producer *prod =
	    k == PP_RK_MUTEX ? &pp_mutex_producer : &pp_block_producer;
	struct pp_counts_query q = {0};
	if (prod->counts->check && prod->counts->check(&q, why, len))
		return -ENOTSUP;
	return prod->counts->snapshot(&q, out);
}

static void snap_unref(struct rsnap *s)
{
	if (!s || --s->refs)
		return;
	sn.bytes -= s->bytes;
	free(s->data);
	free(s);
}

static void drop_oldest(enum pp_record_kind k)
{
	struct rsnap *s = sn.oldest[k];
	sn.oldest[k] = s->next;
	if (!sn.oldest[k])
		sn.newest[k] = NULL;
	s->next = NULL;
	sn.n[k]--;
	sn.dropped++;
	snap_unref(s);
}

void pp_record_snaps_tick(void)
{
	uint64_t now = pp_clock_ns(CLOCK_MONOTONIC);
	pthread_mutex_lock(&sn.mu);
	int due = sn.on && now - sn.last_ns >= sn.interval_ns;
	if (due)
		sn.last_ns = now;
	pthread_mutex_unlock(&sn.mu);
	if (!due)
		return;
	uint64_t cpu0 = pp_clock_ns(CLOCK_THREAD_CPUTIME_ID);
	for (int k = 0; k < PP_RECORD_KINDS; k++) {
		struct pp_profile *p;
		char why[160] = "";
		unsigned char *data = NULL;
		size_t len = 0;
		int rc = take((enum pp_record_kind)k, &p, why, sizeof why);
		if (!rc) {
			rc = pp_record_pack(p, &data, &len);
			pp_profile_free(p);
		}
		pthread_mutex_lock(&sn.mu);
		snprintf(sn.why_not[k], sizeof sn.why_not[k], "%s",
		         rc ? (why[0] ? why : strerror(-rc)) : "");
		struct rsnap *s = rc ? NULL : malloc(sizeof *s);
		if (!rc && sn.on && s) {
			*s = (struct rsnap){
			    NULL, now, data, len, sizeof *s + len, 1};
			if (sn.newest[k])
				sn.newest[k]->next = s;
			else
				sn.oldest[k] = s;
			sn.newest[k] = s;
			sn.n[k]++;
			sn.bytes += s->bytes;
			sn.taken++;
			data = NULL;
			s = NULL;
		}
		/* Past the span: each kind keeps one snapshot from before
		 * it, the base of a range that starts at its edge. */
		uint64_t cut = now > pp_rec.span_ns ? now - pp_rec.span_ns : 0;
		while (sn.oldest[k] && sn.oldest[k]->next &&
		       sn.oldest[k]->next->t <= cut)
			drop_oldest((enum pp_record_kind)k);
		/* Over their quarter of the bound: the kind with the most goes
		 * first (each keeps two, a range's ends). */
		while (sn.bytes > pp_rec.total_bound / 4) {
			int most = -1;
			for (int j = 0; j < PP_RECORD_KINDS; j++)
				if (sn.n[j] > 2 &&
				    (most < 0 || sn.n[j] > sn.n[most]))
					most = j;
			if (most < 0)
				break;
			drop_oldest((enum pp_record_kind)most);
		}
		pthread_mutex_unlock(&sn.mu);
		free(s);
		free(data);
	}
	pthread_mutex_lock(&sn.mu);
	sn.cpu_ns += pp_clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
	pthread_mutex_unlock(&sn.mu);
}

void pp_record_snaps_open(uint64_t span_ns)
{
	pthread_mutex_lock(&sn.mu);
	uint64_t iv = span_ns / 120;
	if (iv < PP_NS_PER_SEC)
		iv = PP_NS_PER_SEC;
	if (iv > 60ull * PP_NS_PER_SEC)
		iv = 60ull * PP_NS_PER_SEC;
	sn.interval_ns = iv;
	sn.last_ns = 0;
	sn.on = 1;
	pthread_mutex_unlock(&sn.mu);
}

void pp_record_snaps_close(void)
{
	pthread_mutex_lock(&sn.mu);
	sn.on = 0;
	for (int k = 0; k < PP_RECORD_KINDS; k++)
		while (sn.oldest[k])
			drop_oldest((enum pp_record_kind)k);
	sn.dropped = sn.taken = 0;
	pthread_mutex_unlock(&sn.mu);
}

void pp_record_snaps_forget_in_child(void)
{
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	memcpy(&sn.mu, &fresh, sizeof fresh);
	memset(sn.oldest, 0, sizeof sn.oldest);
	memset(sn.newest, 0, sizeof sn.newest);
	memset(sn.n, 0, sizeof sn.n);
	sn.bytes = 0;
	sn.on = 0;
}

void pp_record_snaps_stats(struct pp_record_snaps_stats *o)
{
	memset(o, 0, sizeof *o);
	pthread_mutex_lock(&sn.mu);
	o->interval_ns = sn.interval_ns;
	o->bytes = sn.bytes;
	o->taken = sn.taken;
	o->dropped = sn.dropped;
	o->cpu_ns = sn.cpu_ns;
	for (int k = 0; k < PP_RECORD_KINDS; k++) {
		o->kind[k].count = sn.n[k];
		o->kind[k].oldest_ns = sn.oldest[k] ? sn.oldest[k]->t : 0;
		o->kind[k].newest_ns = sn.newest[k] ? sn.newest[k]->t : 0;
		snprintf(o->kind[k].why_not, sizeof o->kind[k].why_not, "%s",
		         sn.why_not[k]);
	}
	pthread_mutex_unlock(&sn.mu);
}

/* A saving's pins. */

static const struct rsnap *at_or_before(enum pp_record_kind k, uint64_t t);

struct pp_record_pins *pp_record_snaps_pin(uint64_t start, uint64_t end)
{
	struct pp_record_pins *pins = calloc(1, sizeof *pins);
	if (!pins)
		return NULL;
	pthread_mutex_lock(&sn.mu);
	for (int k = 0; k < PP_RECORD_KINDS; k++) {
		/* None at or before the start: the counts since the agent
		 * started are the base (an empty profile stands for it). */
		struct rsnap *a =
		    (struct rsnap *)at_or_before((enum pp_record_kind)k, start);
		struct rsnap *b =
		    (struct rsnap *)at_or_before((enum pp_record_kind)k, end);
		pins->s[k][0] = a;
		pins->s[k][1] = b;
		if (a)
			a->refs++;
		if (b)
			b->refs++;
	}
	pthread_mutex_unlock(&sn.mu);
	return pins;
}

void pp_record_snaps_unpin(struct pp_record_pins *pins)
{
	if (!pins)
		return;
	pthread_mutex_lock(&sn.mu);
	for (int k = 0; k < PP_RECORD_KINDS; k++) {
		snap_unref(pins->s[k][0]);
		snap_unref(pins->s[k][1]);
	}
	pthread_mutex_unlock(&sn.mu);
	free(pins);
}

/* ---- reading them -----------------------------------------------------------
 */

/* The newest snapshot of k taken at or before t; NULL when none. */
static const struct rsnap *at_or_before(enum pp_record_kind k, uint64_t t)
{
	const struct rsnap *best = NULL;
	for (const struct rsnap *s = sn.oldest[k]; s && s->t <= t; s = s->next)
		best = s;
	return best;
}

int pp_record_snaps_profile(enum pp_record_kind k, uint64_t start, uint64_t end,
                            int state, const struct pp_record_pins *pins,
                            struct pp_profile **out, char *err, size_t errlen)
{
	*out = NULL;
	pthread_mutex_lock(&sn.mu);
	int rc = 0, from_start = 0;
	const struct rsnap *s1 = at_or_before(k, end);
	const struct rsnap *s0 = state ? NULL : at_or_before(k, start);
	if (pins) {
		/* A saving: the two snapshots it kept, whatever the list
		 * holds now. */
		s1 = pins->s[k][1];
		s0 = state ? NULL : pins->s[k][0];
		from_start = !state && !s0;
		if (!s1) {
			snprintf(err, errlen,
			         "this saving holds no %s snapshot (none was "
			         "taken before it was saved%s%s)",
			         kind_names[k], sn.why_not[k][0] ? ": " : "",
			         sn.why_not[k]);
			rc = -ERANGE;
		}
	} else if (!sn.oldest[k]) {
		snprintf(err, errlen, "the record holds no %s snapshot%s%s",
		         kind_names[k], sn.why_not[k][0] ? ": " : " yet",
		         sn.why_not[k]);
		rc = -ERANGE;
	} else if (!s1) {
		char a[40];
		pp_record_rfc3339(sn.oldest[k]->t, a, sizeof a);
		snprintf(err, errlen,
		         "the record's %s snapshots begin at %s, after the end "
		         "asked (one every %.1f s)",
		         kind_names[k], a, (double)sn.interval_ns / 1e9);
		rc = -ERANGE;
	} else if (!state && !s0) {
		/* A range from before the oldest snapshot: from the agent's
		 * start (the counts are since then) when it reaches back
		 * that far, else from the oldest. */
		from_start = start <= pp_rec.started_ns;
		s0 = from_start ? NULL : sn.oldest[k];
	}
	if (!rc && !pins && !state && !from_start && s0 == s1) {
		if (s1->next) {
			s1 = s1->next; /* a range between two snapshots */
		} else if (s0 != sn.oldest[k]) {
			s0 = sn.oldest[k];
			for (const struct rsnap *s = sn.oldest[k];
			     s->next != s1; s = s->next)
				s0 = s->next;
		}
	}
	struct pp_profile *p = NULL;
	if (!rc) {
		struct pp_profile *last = NULL, *base = NULL;
		rc = pp_record_unpack(s1->data, s1->len, &last);
		if (!rc && s0 && s0 != s1)
			rc = pp_record_unpack(s0->data, s0->len, &base);
		else if (!rc)
			base = pp_profile_new(last->types, last->ntypes,
			                      &last->period_type, last->period);
		if (!rc && !base)
			rc = -ENOMEM;
		if (!rc)
			rc = pp_profile_delta(last, base, &p);
		pp_profile_free(last);
		pp_profile_free(base);
		if (rc)
			snprintf(err, errlen, "%s",
			         rc == -ENOMEM
			             ? "out of memory"
			             : "a snapshot could not be read");
	}
	uint64_t t0 = from_start       ? pp_rec.started_ns
	              : s0 && s0 != s1 ? s0->t
	              : s1             ? s1->t
	                               : 0;
	uint64_t t1 = s1 ? s1->t : 0;
	uint64_t iv = sn.interval_ns;
	pthread_mutex_unlock(&sn.mu);
	if (rc)
		return rc;
	char note[400], a[40], b[40];
	pp_record_rfc3339(t0, a, sizeof a);
	pp_record_rfc3339(t1, b, sizeof b);
	if (state) {
		pp_profile_set_time(p, pp_record_real_of(t1), 0);
		snprintf(note, sizeof note,
		         "pullprof %s: from the record, the %s as of its "
		         "snapshot at %s (one every %.1f s)",
		         PACKAGE_VERSION, kind_names[k], b, (double)iv / 1e9);
	} else if (from_start) {
		pp_profile_set_time(p, pp_record_real_of(t0),
		                    (int64_t)(t1 - t0));
		snprintf(note, sizeof note,
		         "pullprof %s: from the record, %s since the agent "
		         "started, as of its snapshot at %s (one every %.1f s)",
		         PACKAGE_VERSION, kind_names[k], b, (double)iv / 1e9);
	} else if (t0 == t1) {
		pp_profile_set_time(p, pp_record_real_of(t1), 0);
		snprintf(note, sizeof note,
		         "pullprof %s: from the record, %s since the agent "
		         "started, as of %s: one snapshot only so far (one "
		         "every %.1f s)",
		         PACKAGE_VERSION, kind_names[k], b, (double)iv / 1e9);
	} else {
		pp_profile_set_time(p, pp_record_real_of(t0),
		                    (int64_t)(t1 - t0));
		snprintf(note, sizeof note,
		         "pullprof %s: from the record, the change of %s "
		         "between its snapshots at %s and %s (one every "
		         "%.1f s; the range asked is rounded to them)",
		         PACKAGE_VERSION, kind_names[k], a, b,
		         (double)iv / 1e9);
	}
	pp_profile_add_comment(p, note);
	*out = p;
	return 0;
}

int pp_record_snaps_check(enum pp_record_kind k,
                          const struct pp_record_range *r, char *err,
                          size_t errlen)
{
	if (r->recording)
		return 0; /* the saving's own snapshots: read by the job */
	pthread_mutex_lock(&sn.mu);
	int rc = 0;
	if (!sn.oldest[k] && sn.why_not[k][0]) {
		snprintf(err, errlen, "the record does not keep %s: %s",
		         kind_names[k], sn.why_not[k]);
		rc = -ENOTSUP;
	} else if (!sn.oldest[k]) {
		snprintf(err, errlen,
		         "the record holds no %s snapshot yet (one every %.1f "
		         "s)",
		         kind_names[k], (double)sn.interval_ns / 1e9);
		rc = -ERANGE;
	} else if (!at_or_before(k, r->end_ns)) {
		char a[40];
		pp_record_rfc3339(sn.oldest[k]->t, a, sizeof a);
		snprintf(err, errlen,
		         "the record's %s snapshots begin at %s, after the end "
		         "asked (one every %.1f s)",
		         kind_names[k], a, (double)sn.interval_ns / 1e9);
		rc = -ERANGE;
	}
	pthread_mutex_unlock(&sn.mu);
	return rc;
}

/* ---- the producers: /heap, /allocs, /mutex and /block of a range
 * -------------- */

static int snap_start(struct pp_job *j, const void *query, char *err,
                      size_t errlen)
{
	struct pp_record_snap_query *q = malloc(sizeof *q);
	if (!q) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	*q = *(const struct pp_record_snap_query *)query;
	pp_job_set_data(j, q);
	return 0;
}

static int snap_make(struct pp_job *j, struct pp_profile **out)
{
	const struct pp_record_snap_query *q = pp_job_data(j);
	char err[300];
	int rc;
	if (q->range.recording) {
		/* The saving's pins, held while they are read (the saving
		 * may go meanwhile: a lock order of record, then snapshots). */
		pthread_mutex_lock(&pp_rec.mu);
		const struct pp_record_pins *pins = NULL;
		for (unsigned i = 0; i < pp_rec.nsavings; i++)
			if (pp_rec.savings[i].id == q->range.recording)
				pins = pp_rec.savings[i].pins;
		rc = pins ? pp_record_snaps_profile(q->kind, q->range.start_ns,
		                                    q->range.end_ns, q->state,
		                                    pins, out, err, sizeof err)
		          : -ENOENT;
		pthread_mutex_unlock(&pp_rec.mu);
	} else {
		rc = pp_record_snaps_profile(q->kind, q->range.start_ns,
		                             q->range.end_ns, q->state, NULL,
		                             out, err, sizeof err);
	}
	if (!rc && q->allocs)
		pp_profile_set_default_type(*out, "alloc_space");
	return rc;
}

static void snap_cancel(struct pp_job *j)
{
	(void)j;
}

#define SNAP_PRODUCER(kind_, what_)                                            \
	{                                                                      \
		.kind = kind_, .what = what_,                                  \
		.limit_setting = "PULLPROF_MAX_HEAP_PROFILES", .max_open = 8,  \
		.start = snap_start, .make = snap_make, .cancel = snap_cancel, \
		.free = free,                                                  \
	}

struct pp_producer pp_record_snap_producers[PP_RECORD_KINDS] = {
    SNAP_PRODUCER("heap", "heap reads of the record"),
    SNAP_PRODUCER("mutex", "mutex reads of the record"),
    SNAP_PRODUCER("block", "block reads of the record"),
};

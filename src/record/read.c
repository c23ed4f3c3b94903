/*
 * Reading the record (record.h): a query's range, and the CPU profile of a
 * range built from the chunks that hold it.
 * Context: agent.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bounds.h"
#include "cpu/model.h"
#include "cpu/sink.h"
#include "record/internal.h"
#include "util/clock.h"
#include "util/when.h"

#include <json-c/json.h>

static const struct pp_value_type cpu_types[] = {{"samples", "count"},
                                                 {"cpu", "nanoseconds"}};

/* A Unix time in ns as RFC 3339 UTC with milliseconds. */
void pp_record_rfc3339(uint64_t mono_ns, char *buf, size_t len)
{
	int64_t real_ns = pp_record_real_of(mono_ns);
	time_t s = (time_t)(real_ns / 1000000000);
	struct tm tm;
	gmtime_r(&s, &tm);
	size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, len - n, ".%03dZ",
	         (int)((real_ns % 1000000000) / 1000000));
}

/* "from ... to ... (N s)", or "nothing yet", for messages. Lock held. */
static void coverage(uint64_t oldest, uint64_t newest, char *buf, size_t len)
{
	if (!oldest) {
		snprintf(buf, len, "nothing yet");
		return;
	}
	char a[40], b[40];
	pp_record_rfc3339(oldest, a, sizeof a);
	pp_record_rfc3339(newest, b, sizeof b);
	snprintf(buf, len, "%s to %s (the last %.1f s)", a, b,
	         (double)(pp_clock_ns(CLOCK_MONOTONIC) - oldest) / 1e9);
}

static const struct pp_rsaving *saving_of(uint64_t id)
{
	for (unsigned i = 0; i < pp_rec.nsavings; i++)
		if (pp_rec.savings[i].id == id)
			return &pp_rec.savings[i];
	return NULL;
}

static int range_parse(const char *last, const char *start, const char *end,
                       const char *recording, int samples,
                       struct pp_record_range *out, char *err, size_t errlen);

int pp_record_range_parse(const char *last, const char *start, const char *end,
                          const char *recording, struct pp_record_range *out,
                          char *err, size_t errlen)
{
	return range_parse(last, start, end, recording, 1, out, err, errlen);
}

int pp_record_range_parse_snaps(const char *last, const char *start,
                                const char *end, const char *recording,
                                struct pp_record_range *out, char *err,
                                size_t errlen)
{
	return range_parse(last, start, end, recording, 0, out, err, errlen);
}

static int range_parse(const char *last, const char *start, const char *end,
                       const char *recording, int samples,
                       struct pp_record_range *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof *out);
	if (!last && !start && !end && !recording)
		return 1;
	if (last && (start || end)) {
		snprintf(err, errlen,
		         "last= and start=/end= name a range each: give one "
		         "or the other");
		return -EINVAL;
	}
	if (!atomic_load(&pp_rec.on_atomic)) {
		snprintf(err, errlen,
		         "the record is off in this process: nothing to look "
		         "back at (start it with PULLPROF_RECORD, e.g. "
		         "PULLPROF_RECORD=5m; profiles of the next seconds: "
		         "?seconds=N)");
		return -ENOTSUP;
	}
	uint64_t now = pp_clock_ns(CLOCK_MONOTONIC);
	int64_t now_real = pp_record_real_of(now);
	int64_t a = 0, b = 0;
	char why[200];
	if (recording) {
		char *e;
		errno = 0;
		unsigned long long id = strtoull(recording, &e, 10);
		if (errno || e == recording || *e || !id) {
			snprintf(err, errlen,
			         "recording=%.40s: expected the id of a saved "
			         "recording (/record lists them)",
			         recording);
			return -EINVAL;
		}
		out->recording = id;
	}
	if (last) {
		int64_t ns;
		if (pp_duration_parse(last, (int64_t)86400 * PP_NS_PER_SEC, &ns,
		                      why, sizeof why)) {
			snprintf(err, errlen, "last=%s", why);
			return -EINVAL;
		}
		a = now_real - ns;
		b = now_real;
	} else {
		if (start && pp_when_parse(start, &a, why, sizeof why)) {
			snprintf(err, errlen, "start=%s", why);
			return -EINVAL;
		}
		if (end && pp_when_parse(end, &b, why, sizeof why)) {
			snprintf(err, errlen, "end=%s", why);
			return -EINVAL;
		}
		if (!end)
			b = now_real;
		if (!start)
			a = 0; /* as far back as it reaches */
		if (start && end && b <= a) {
			snprintf(err, errlen,
			         "end= must come after start= (%.40s is not "
			         "after %.40s)",
			         end, start);
			return -EINVAL;
		}
	}
	/* Unix time -> the record's monotonic clock (clamped at 0; a and b
	 * are 0..INT64_MAX, the offset may be of either sign: a clock set
	 * before the boot). */
	int64_t ma, mb;
	if (__builtin_sub_overflow(a, pp_rec.real_offset, &ma))
		ma = pp_rec.real_offset > 0 ? 0 : INT64_MAX;
	if (__builtin_sub_overflow(b, pp_rec.real_offset, &mb))
		mb = pp_rec.real_offset > 0 ? 0 : INT64_MAX;
	out->start_ns = ma > 0 ? (uint64_t)ma : 0;
	out->end_ns = mb > 0 ? (uint64_t)mb : 0;

	pthread_mutex_lock(&pp_rec.mu);
	uint64_t oldest = pp_record_visible_oldest();
	uint64_t newest = pp_record_visible_newest();
	int rc = 0;
	char cov[160];
	if (out->recording) {
		const struct pp_rsaving *sv = saving_of(out->recording);
		if (!sv) {
			snprintf(err, errlen,
			         "recording=%" PRIu64 ": no such saved "
			         "recording (gone, or never saved: /record "
			         "lists those kept)",
			         out->recording);
			rc = -ENOENT;
		} else {
			oldest = sv->start_ns;
			newest = sv->end_ns;
			if (!last && !start)
				out->start_ns = oldest;
			if (!last && !end)
				out->end_ns = newest;
		}
	}
	if (!rc && !out->recording && !last && !start)
		out->start_ns = samples ? oldest : 0;
	if (!rc && samples &&
	    (!oldest || out->end_ns < oldest || out->start_ns > newest)) {
		if (out->recording) {
			char a1[40], b1[40];
			pp_record_rfc3339(oldest, a1, sizeof a1);
			pp_record_rfc3339(newest, b1, sizeof b1);
			snprintf(err, errlen,
			         "recording %" PRIu64
			         " covers %s to %s: nothing of it in the range "
			         "asked",
			         out->recording, a1, b1);
		} else {
			coverage(oldest, newest, cov, sizeof cov);
			snprintf(err, errlen,
			         "the record holds %s: nothing of it in the "
			         "range asked",
			         cov);
		}
		rc = -ERANGE;
	}
	pthread_mutex_unlock(&pp_rec.mu);
	return rc;
}

/* A read up to t: the collector drains the ring every 10 to 100 ms, so the
 * newest samples may still be there; it is woken and waited for (at most
 * 50 ms). Returns the time up to which the record holds every sample. */
static uint64_t catch_up(uint64_t t)
{
	uint64_t at =
	    atomic_load_explicit(&pp_rec.drained_at, memory_order_acquire);
	if (at >= t)
		return at;
	pp_cpu_sink_wake();
	for (int i = 0; i < 50 && at < t; i++) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
		at = atomic_load_explicit(&pp_rec.drained_at,
		                          memory_order_acquire);
	}
	return at;
}

/* Decode a chunk's samples in [start, end) into p. Lock held. */
static void read_chunk(const struct pp_rchunk *c, uint64_t start, uint64_t end,
                       struct pp_profile *p, uint32_t *min_period,
                       uint32_t *max_period, uint64_t *lost, uint64_t *n)
{
	const unsigned char *q = c->data, *e = c->data + c->used;
	uint64_t t = c->base_ns; /* where the coder's times start */
	uint32_t period = 0;
	while (q < e) {
		unsigned flags = *q++;
		uint64_t zz = pp_record_get_varint(&q, e);
		int64_t dt = (int64_t)(zz >> 1) ^ -(int64_t)(zz & 1);
		t += (uint64_t)(dt * 1000);
		uint32_t tid = (uint32_t)pp_record_get_varint(&q, e);
		uint32_t stack = (uint32_t)pp_record_get_varint(&q, e);
		uint32_t labels = (uint32_t)pp_record_get_varint(&q, e);
		uint32_t weight = flags & PP_RS_WEIGHT
		                      ? (uint32_t)pp_record_get_varint(&q, e)
		                      : 1;
		if (flags & PP_RS_PERIOD)
			period = (uint32_t)pp_record_get_varint(&q, e);
		if (t < start || t >= end)
			continue;
		if (flags & PP_RS_LOST) {
			*lost += weight;
			continue;
		}
		const struct pp_rstack *s = stack && stack < pp_rec.nstacks
		                                ? pp_rec.stacks[stack]
		                                : NULL;
		unsigned rflags =
		    (flags & PP_RS_TRUNCATED ? PP_REC_TRUNCATED : 0) |
		    (flags & PP_RS_EXIT ? PP_REC_EXIT : 0);
		pp_cpu_model_add(p, s ? s->pcs : NULL, s ? s->depth : 0, rflags,
		                 weight, period, tid, pp_record_name_of(tid),
		                 labels, t);
		if (period && (!*min_period || period < *min_period))
			*min_period = period;
		if (period > *max_period)
			*max_period = period;
		(*n)++;
	}
}

int pp_record_cpu_profile(const struct pp_record_range *r, size_t max_bytes,
                          struct pp_profile **out, char *err, size_t errlen)
{
	uint64_t cpu0 = pp_clock_ns(CLOCK_THREAD_CPUTIME_ID);
	struct pp_profile *p = pp_profile_new(
	    cpu_types, 2, &cpu_types[1],
	    (int64_t)(PP_NS_PER_SEC / (pp_rec.hz ? pp_rec.hz : 19)));
	if (!p) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	p->max_bytes = max_bytes;
	p->max_events =
	    (max_bytes ? max_bytes : PP_CPU_TIMELINE_DEFAULT_BYTES) / 2 /
	    PP_EVENT_BYTES;
	uint32_t minp = 0, maxp = 0;
	uint64_t lost = 0, n = 0, first = 0, last = 0;
	int rc = 0;
	uint64_t now = pp_clock_ns(CLOCK_MONOTONIC);
	uint64_t held =
	    r->recording ? now : catch_up(r->end_ns < now ? r->end_ns : now);

	pthread_mutex_lock(&pp_rec.mu);
	if (r->recording) {
		const struct pp_rsaving *sv = saving_of(r->recording);
		if (!sv) {
			snprintf(err, errlen,
			         "recording=%" PRIu64 ": no such saved "
			         "recording (gone meanwhile)",
			         r->recording);
			rc = -ENOENT;
		} else {
			for (size_t i = 0; i < sv->nchunks; i++)
				read_chunk(sv->chunks[i], r->start_ns,
				           r->end_ns, p, &minp, &maxp, &lost,
				           &n);
			/* Fetched: the first to go when room is needed. */
			((struct pp_rsaving *)sv)->fetched++;
			first = sv->start_ns > r->start_ns ? sv->start_ns
			                                   : r->start_ns;
			last = sv->end_ns < r->end_ns ? sv->end_ns : r->end_ns;
		}
	} else {
		/* Nothing past the span, though its chunk is still here. */
		uint64_t oldest = pp_record_visible_oldest();
		first = oldest > r->start_ns ? oldest : r->start_ns;
		for (const struct pp_rchunk *c = pp_rec.oldest; c; c = c->next)
			if (c->last_ns >= first && c->first_ns < r->end_ns)
				read_chunk(c, first, r->end_ns, p, &minp, &maxp,
				           &lost, &n);
		/* Up to what the record holds: a scraper that starts its
		 * next range at this one's end misses nothing. */
		last = r->end_ns < held ? r->end_ns : held;
	}
	pthread_mutex_unlock(&pp_rec.mu);
	if (rc) {
		pp_profile_free(p);
		return rc;
	}
	uint32_t period = minp ? minp : (uint32_t)(PP_NS_PER_SEC / pp_rec.hz);
	if (lost) {
		uintptr_t pc = pp_profile_synthetic_pc(
		    p, "[pullprof: lost samples, the ring was full]");
		int64_t v[2] = {(int64_t)lost, (int64_t)lost * period};
		if (pc)
			pp_profile_add_at(p, &pc, 1, v, NULL, 0, last - 1, 0);
	}
	p->period = period;
	if (last < first)
		last = first;
	pp_profile_set_time(p, pp_record_real_of(first),
	                    (int64_t)(last - first));
	p->mono_start_ns = first;
	p->mono_end_ns = last;
	char note[300], a[40], b[40];
	pp_record_rfc3339(first, a, sizeof a);
	pp_record_rfc3339(last, b, sizeof b);
	snprintf(note, sizeof note,
	         "pullprof %s: from the record, %s to %s, %" PRIu64
	         " samples, sampled every %u ns",
	         PACKAGE_VERSION, a, b, n, period);
	pp_profile_add_comment(p, note);
	if (first > r->start_ns + PP_NS_PER_SEC / 10) {
		snprintf(note, sizeof note,
		         "the record reaches back to %s only: the range asked "
		         "began %.1f s earlier",
		         a, (double)(first - r->start_ns) / 1e9);
		pp_profile_add_comment(p, note);
	}
	pp_cpu_model_notes(p, minp, maxp);
	pthread_mutex_lock(&pp_rec.mu);
	pp_record_gap_notes(p, first, last);
	pp_rec.reads++;
	pp_rec.read_cpu_ns += pp_clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
	pthread_mutex_unlock(&pp_rec.mu);
	*out = p;
	return 0;
}

/* ---- the timeline: CPU by thread over time ----------------------------- */

struct tl_thread {
	uint32_t tid;
	double total;
	double *cpu; /* nbuckets */
};

struct tl {
	uint64_t start, step;
	size_t nbuckets;
	struct tl_thread *t;
	size_t n, cap;
	int oom;
};

static struct tl_thread *tl_thread_of(struct tl *tl, uint32_t tid)
{
	for (size_t i = 0; i < tl->n; i++)
		if (tl->t[i].tid == tid)
			return &tl->t[i];
	if (tl->n == tl->cap) {
		size_t cap = tl->cap ? tl->cap * 2 : 16;
		void *n = realloc(tl->t, cap * sizeof *tl->t);
		if (!n)
			return NULL;
		tl->t = n;
		tl->cap = cap;
	}
	double *cpu = calloc(tl->nbuckets, sizeof *cpu);
	if (!cpu)
		return NULL;
	tl->t[tl->n] = (struct tl_thread){tid, 0, cpu};
	return &tl->t[tl->n++];
}

static void tl_chunk(struct tl *tl, const struct pp_rchunk *c, uint64_t end)
{
	const unsigned char *q = c->data, *e = c->data + c->used;
	uint64_t t = c->base_ns;
	uint32_t period = 0;
	while (q < e) {
		unsigned flags = *q++;
		uint64_t zz = pp_record_get_varint(&q, e);
		int64_t dt = (int64_t)(zz >> 1) ^ -(int64_t)(zz & 1);
		t += (uint64_t)(dt * 1000);
		uint32_t tid = (uint32_t)pp_record_get_varint(&q, e);
		(void)pp_record_get_varint(&q, e); /* stack */
		(void)pp_record_get_varint(&q, e); /* labels */
		uint32_t weight = flags & PP_RS_WEIGHT
		                      ? (uint32_t)pp_record_get_varint(&q, e)
		                      : 1;
		if (flags & PP_RS_PERIOD)
			period = (uint32_t)pp_record_get_varint(&q, e);
		if (t < tl->start || t >= end || (flags & PP_RS_LOST))
			continue;
		struct tl_thread *th = tl_thread_of(tl, tid);
		if (!th) {
			tl->oom = 1;
			return;
		}
		double v = (double)weight * period / 1e9;
		th->cpu[(t - tl->start) / tl->step] += v;
		th->total += v;
	}
}

static int by_total(const void *a, const void *b)
{
	const struct tl_thread *x = a, *y = b;
	return x->total < y->total ? 1 : x->total > y->total ? -1 : 0;
}

/* Seconds rounded to the microsecond: the JSON stays short. */
static struct json_object *us(double v)
{
	char text[32];
	snprintf(text, sizeof text, "%.6f", v);
	/* Trailing zeros off: 0.5, not 0.500000. */
	size_t n = strlen(text);
	while (n > 1 && text[n - 1] == '0' && text[n - 2] != '.')
		text[--n] = 0;
	return json_object_new_double_s(v, text);
}

int pp_record_timeline(const struct pp_record_range *r, uint64_t step_ns,
                       size_t max_threads, struct json_object **out, char *err,
                       size_t errlen)
{
	struct tl tl = {.start = r->start_ns, .step = step_ns};
	uint64_t end = r->end_ns;
	if (!r->recording) {
		uint64_t held = catch_up(end);
		if (end > held)
			end = held;
	}
	pthread_mutex_lock(&pp_rec.mu);
	if (!r->recording && tl.start < pp_record_visible_oldest())
		tl.start = pp_record_visible_oldest();
	uint64_t now = pp_clock_ns(CLOCK_MONOTONIC);
	if (end > now)
		end = now;
	if (end <= tl.start)
		end = tl.start + 1;
	tl.nbuckets = (size_t)((end - tl.start + step_ns - 1) / step_ns);
	if (tl.nbuckets > PP_RECORD_TIMELINE_MAX) {
		pthread_mutex_unlock(&pp_rec.mu);
		snprintf(err, errlen,
		         "step=%.3f s makes %zu steps over this range; at most "
		         "%u: a longer step",
		         (double)step_ns / 1e9, tl.nbuckets,
		         PP_RECORD_TIMELINE_MAX);
		return -EINVAL;
	}
	int rc = 0;
	if (r->recording) {
		const struct pp_rsaving *sv = saving_of(r->recording);
		if (!sv) {
			snprintf(err, errlen,
			         "recording=%" PRIu64
			         ": no such saved recording",
			         r->recording);
			rc = -ENOENT;
		} else {
			for (size_t i = 0; i < sv->nchunks && !tl.oom; i++)
				tl_chunk(&tl, sv->chunks[i], end);
		}
	} else {
		for (const struct pp_rchunk *c = pp_rec.oldest; c && !tl.oom;
		     c = c->next)
			if (c->last_ns >= tl.start && c->first_ns < end)
				tl_chunk(&tl, c, end);
	}
	struct json_object *o = NULL;
	if (!rc && !tl.oom) {
		qsort(tl.t, tl.n, sizeof *tl.t, by_total);
		o = json_object_new_object();
		json_object_object_add(
		    o, "start",
		    json_object_new_double((double)pp_record_real_of(tl.start) /
		                           1e9));
		json_object_object_add(
		    o, "end",
		    json_object_new_double((double)pp_record_real_of(end) /
		                           1e9));
		json_object_object_add(
		    o, "step_seconds",
		    json_object_new_double((double)step_ns / 1e9));
		struct json_object *threads = json_object_new_array();
		double *other = NULL;
		for (size_t i = 0; i < tl.n; i++) {
			if (i >= max_threads) {
				if (!other)
					other =
					    calloc(tl.nbuckets, sizeof *other);
				for (size_t b = 0; other && b < tl.nbuckets;
				     b++)
					other[b] += tl.t[i].cpu[b];
				continue;
			}
			struct json_object *th = json_object_new_object();
			json_object_object_add(
			    th, "tid", json_object_new_int64(tl.t[i].tid));
			const char *name = pp_record_name_of(tl.t[i].tid);
			json_object_object_add(
			    th, "name",
			    json_object_new_string(name[0] ? name : "?"));
			json_object_object_add(th, "cpu_seconds",
			                       us(tl.t[i].total));
			struct json_object *a = json_object_new_array();
			for (size_t b = 0; b < tl.nbuckets; b++)
				json_object_array_add(a, us(tl.t[i].cpu[b]));
			json_object_object_add(th, "cpu", a);
			json_object_array_add(threads, th);
		}
		json_object_object_add(o, "threads", threads);
		if (other) {
			struct json_object *a = json_object_new_array();
			for (size_t b = 0; b < tl.nbuckets; b++)
				json_object_array_add(a, us(other[b]));
			json_object_object_add(o, "other_threads", a);
			free(other);
		}
	}
	pthread_mutex_unlock(&pp_rec.mu);
	for (size_t i = 0; i < tl.n; i++)
		free(tl.t[i].cpu);
	free(tl.t);
	if (!rc && tl.oom) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
	}
	*out = o;
	return rc;
}

/*
 * /heap and /allocs from the allocator's own profiler (heap/detect.h's
 * sources jemalloc and tcmalloc): its text now (jemalloc's prof.dump,
 * tcmalloc's heap sample or its heap profiler's profile), parsed and made
 * into the model (heap/foreign.h), or the change since the text taken at
 * a window's open.
 * Context: agent.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "heap/detect.h"
#include "heap/foreign.h"
#include "heap/heap.h"
#include "heap/jemalloc.h"
#include "heap/tcmalloc.h"
#include "util/clock.h"

static int text_of(const struct pp_heap_query *q,
                   const struct pp_heap_allocator *a, char **text, size_t *len,
                   char *err, size_t errlen)
{
	if (q->source == PP_HEAP_SOURCE_JEMALLOC) {
		if (!a->je.mallctl) {
			snprintf(err, errlen, "no jemalloc in this process");
			return -ENOTSUP;
		}
		return pp_jemalloc_dump(&a->je, text, len, err, errlen);
	}
	/* tcmalloc: /allocs needs cumulative counts, which only its heap
	 * profiler keeps; its sample has the objects in use. */
	if (q->view == PP_HEAP_ALLOCS || !a->tc.sample_period)
		return pp_tcmalloc_heap_profile(text, len, err, errlen);
	return pp_tcmalloc_heap_sample(text, len, err, errlen);
}

int pp_heap_own_text(const struct pp_heap_query *q, char **text, size_t *len,
                     char *err, size_t errlen)
{
	struct pp_heap_allocator a;
	pp_heap_allocator(&a);
	return text_of(q, &a, text, len, err, errlen);
}

static int parse(const struct pp_heap_query *q,
                 const struct pp_heap_allocator *a, const char *text,
                 size_t len, struct pp_foreign_dump *d)
{
	char err[200];
	if (q->source == PP_HEAP_SOURCE_JEMALLOC) {
		int rc =
		    pp_foreign_parse_jemalloc(text, len, d, err, sizeof err);
		/* jemalloc says whether it keeps cumulative counts. */
		d->has_alloc = a->je.accum;
		return rc;
	}
	int rc = pp_foreign_parse_gperftools(text, len, d, err, sizeof err);
	/* The heap sample's bracketed counts are the same live objects;
	 * the heap profiler's (period 0) are cumulative. */
	d->has_alloc = d->period == 0;
	return rc;
}

static void note(const struct pp_heap_query *q,
                 const struct pp_heap_allocator *a,
                 const struct pp_foreign_dump *d, char *buf, size_t len)
{
	if (q->source == PP_HEAP_SOURCE_JEMALLOC) {
		snprintf(buf, len,
		         "pullprof %s: jemalloc %s's own heap profile "
		         "(prof.dump, %s%s), sampled every %llu bytes on "
		         "average (lg_prof_sample %u), values unsampled per "
		         "stack as jeprof does%s",
		         PACKAGE_VERSION, a->je.version,
		         a->je.in_main ? "linked into " : "", a->je.path,
		         (unsigned long long)d->period, a->je.lg_sample,
		         a->je.prof_active
		             ? ""
		             : "; prof.active is false: no new samples");
		return;
	}
	char what[700];
	pp_tcmalloc_describe(&a->tc, what, sizeof what);
	if (d->period)
		snprintf(buf, len,
		         "pullprof %s: tcmalloc's own heap sample (%s), "
		         "sampled every %llu bytes on average "
		         "(TCMALLOC_SAMPLE_PARAMETER), values unsampled per "
		         "stack as pprof does",
		         PACKAGE_VERSION, what, (unsigned long long)d->period);
	else
		snprintf(
		    buf, len,
		    "pullprof %s: gperftools' heap profiler's profile (%s): "
		    "every allocation, not sampled",
		    PACKAGE_VERSION, what);
}

/* An address inside the allocator when it is a shared library (its
 * stripped internals are trimmed by object), else 0. */
static uintptr_t library(const struct pp_heap_query *q,
                         const struct pp_heap_allocator *a)
{
	if (q->source == PP_HEAP_SOURCE_JEMALLOC)
		return a->je.in_main ? 0 : (uintptr_t)a->je.mallctl;
	if (a->tc.linkage != PP_TCMALLOC_SHARED)
		return 0;
	return (uintptr_t)dlsym(RTLD_DEFAULT, "tc_malloc");
}

static int model(const struct pp_heap_query *q,
                 const struct pp_heap_allocator *a, const char *text,
                 size_t len, size_t max_bytes, char *note_buf, size_t note_len,
                 struct pp_profile **out)
{
	struct pp_foreign_dump d;
	int rc = parse(q, a, text, len, &d);
	if (rc)
		return rc;
	if (note_buf)
		note(q, a, &d, note_buf, note_len);
	int has_alloc = d.has_alloc;
	rc = pp_foreign_model(&d, NULL, max_bytes, library(q, a), out);
	pp_foreign_dump_free(&d);
	if (!rc && q->view == PP_HEAP_ALLOCS && has_alloc)
		pp_profile_set_default_type(*out, "alloc_space");
	return rc;
}

int pp_heap_own_model(struct pp_job *job, const struct pp_heap_query *q,
                      const char *start, size_t start_len, size_t max_bytes,
                      struct pp_profile **out)
{
	struct pp_heap_allocator a;
	char *text, err[600], buf[1000];
	size_t len;
	struct pp_profile *end, *begin;

	pp_heap_allocator(&a);
	int rc = text_of(q, &a, &text, &len, err, sizeof err);
	if (rc)
		return rc;
	rc = model(q, &a, text, len, max_bytes, buf, sizeof buf, &end);
	free(text);
	if (rc)
		return rc;
	if (!start) {
		pp_profile_set_time(end, (int64_t)pp_clock_ns(CLOCK_REALTIME),
		                    0);
		*out = end;
		return pp_profile_add_comment(end, buf);
	}
	rc = model(q, &a, start, start_len, max_bytes, NULL, 0, &begin);
	if (rc) {
		pp_profile_free(end);
		return rc;
	}
	rc = pp_job_window_delta(job, end, begin, out);
	pp_profile_free(begin);
	return rc ? rc : pp_profile_add_comment(*out, buf);
}

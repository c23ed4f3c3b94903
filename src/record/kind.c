/*
 * The record's row in the table of kinds (src/kinds.h): it starts the
 * shared sampler at PULLPROF_RECORD_HZ when PULLPROF_RECORD is set, and
 * says what it holds in /status and /metrics; its producer answers
 * /profile and /trace for a past range (?last=, ?start=&end=,
 * ?recording=) at once; pullprof_record_save() keeps a moment aside.
 * pullprof_record_save() runs on any thread, host threads too.
 * Context: agent.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "cpu/sink.h"
#include "error.h"
#include "kind.h"
#include "pullprof.h"
#include "record/record.h"
#include "util/clock.h"
#include "util/prom.h"

/* ---- the producer: a range of the record, made at once --------------------
 */

static int range_start(struct pp_job *j, const void *query, char *err,
                       size_t errlen)
{
	(void)err;
	(void)errlen;
	struct pp_record_range *r = malloc(sizeof *r);
	if (!r) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	*r = *(const struct pp_record_range *)query;
	pp_job_set_data(j, r);
	return 0;
}

/* A read's profile holds at most this much (PULLPROF_MAX_PROFILE_MB). */
static size_t max_profile_bytes;

static int range_make(struct pp_job *j, struct pp_profile **out)
{
	char err[300];
	int rc = pp_record_cpu_profile(pp_job_data(j), max_profile_bytes, out,
	                               err, sizeof err);
	if (rc)
		pp_log("a read of the record failed: %s", err);
	return rc;
}

static void range_cancel(struct pp_job *j)
{
	(void)j;
}

struct pp_producer pp_record_producer = {
    .kind = "profile", /* ?id= as /profile's and /trace's */
    .what = "reads of the record",
    .limit_setting = "PULLPROF_MAX_CPU_WINDOWS",
    .max_open = 8,
    .start = range_start,
    .make = range_make,
    .cancel = range_cancel,
    .free = free,
    .tick = pp_record_snaps_tick,
};

/* ---- the row ----------------------------------------------------------------
 */

static int start(const struct pp_config *c, char *err, size_t errlen)
{
	max_profile_bytes = (size_t)c->v.max_profile_mb << 20;
	pp_record_producer.max_open = c->v.max_cpu_windows;
	if (!c->record_ns)
		return 0;
	struct pp_record_settings s = {
	    .span_ns = c->record_ns,
	    .hz = c->v.record_hz,
	    .bound = (size_t)c->v.record_mb << 20,
	};
	int rc = pp_record_open(&s);
	if (rc) {
		snprintf(err, errlen,
		         "cannot set up the record: out of memory");
		return rc;
	}
	pp_record_snaps_open(s.span_ns);
	pp_jobs_add_ticker(&pp_record_producer);
	/* The sampler starts now and runs while the agent does. A host that
	 * handles both signals itself keeps them, and a seccomp filter that
	 * kills for a call of the sampler's keeps it off: the record says
	 * why it holds nothing, and the agent serves all the same. */
	char why[400];
	if (pp_cpu_sink_add(&pp_record_sink, why, sizeof why) < 0) {
		pp_record_stopped(why);
		pp_log("the record cannot sample: %s", why);
	}
	return 0;
}

static void stop(void)
{
	pp_cpu_sink_remove(&pp_record_sink);
	pp_record_snaps_close();
	pp_record_close();
}

static void forget_in_child(void)
{
	pp_record_snaps_forget_in_child();
	pp_record_forget_in_child();
}

static double secs(uint64_t ns)
{
	return (double)ns / 1e9;
}

static struct json_object *time_json(int64_t real_ns)
{
	return json_object_new_double((double)real_ns / 1e9);
}

/* The record's state as /record and /status show it. */
struct json_object *pp_record_json(int with_savings)
{
	struct pp_record_stats *st = malloc(sizeof *st);
	struct json_object *o = json_object_new_object();
	if (!st)
		return o;
	pp_record_stats(st);
	struct pp_record_snaps_stats ss;
	pp_record_snaps_stats(&ss);
	json_object_object_add(o, "on", json_object_new_boolean(st->on));
	if (!st->on) {
		free(st);
		return o;
	}
	json_object_object_add(o, "hz", PP_JSON_I64(st->hz));
	json_object_object_add(o, "span_seconds",
	                       json_object_new_double(secs(st->span_ns)));
	json_object_object_add(
	    o, "sampling",
	    json_object_new_string(st->stopped[0] ? st->stopped : "on"));
	struct json_object *cov = json_object_new_object();
	uint64_t now = pp_clock_ns(CLOCK_MONOTONIC);
	if (st->oldest_ns) {
		json_object_object_add(cov, "oldest",
		                       time_json(st->oldest_real_ns));
		json_object_object_add(cov, "newest",
		                       time_json(st->newest_real_ns));
		json_object_object_add(
		    cov, "seconds",
		    json_object_new_double(secs(now - st->oldest_ns)));
	} else {
		json_object_object_add(cov, "oldest", NULL);
		json_object_object_add(cov, "newest", NULL);
		json_object_object_add(cov, "seconds",
		                       json_object_new_double(0));
	}
	json_object_object_add(o, "coverage", cov);
	/* Pauses of sampling: the host took the signal and sampling went on
	 * with the other one (end null: it did not). */
	struct json_object *gaps = json_object_new_array();
	for (unsigned i = 0; i < st->ngaps; i++) {
		const struct pp_record_gap *g = &st->gaps[i];
		struct json_object *e = json_object_new_object();
		json_object_object_add(
		    e, "start", time_json(pp_record_real_of(g->start_ns)));
		json_object_object_add(
		    e, "end",
		    g->end_ns ? time_json(pp_record_real_of(g->end_ns)) : NULL);
		json_object_object_add(
		    e, "seconds",
		    json_object_new_double(
		        secs((g->end_ns ? g->end_ns : now) - g->start_ns)));
		json_object_object_add(e, "why",
		                       json_object_new_string(g->why));
		json_object_object_add(
		    e, "then",
		    g->end_ns ? json_object_new_string(g->signal) : NULL);
		json_object_array_add(gaps, e);
	}
	json_object_object_add(o, "gaps", gaps);
	struct json_object *mem = json_object_new_object();
	json_object_object_add(mem, "bytes", PP_JSON_I64(st->bytes + ss.bytes));
	json_object_object_add(mem, "bound", PP_JSON_I64(st->bound));
	json_object_object_add(mem, "samples", PP_JSON_I64(st->chunk_bytes));
	json_object_object_add(mem, "stacks", PP_JSON_I64(st->stack_bytes));
	json_object_object_add(mem, "saved", PP_JSON_I64(st->saved_bytes));
	json_object_object_add(mem, "snapshots", PP_JSON_I64(ss.bytes));
	/* What a sample takes coded (its stack apart, kept once). */
	json_object_object_add(
	    mem, "bytes_per_sample",
	    json_object_new_double(st->samples_kept
	                               ? (double)st->coded_bytes /
	                                     (double)st->samples_kept
	                               : 0));
	json_object_object_add(o, "memory", mem);
	struct json_object *s = json_object_new_object();
	json_object_object_add(s, "kept", PP_JSON_I64(st->samples_kept));
	json_object_object_add(s, "added", PP_JSON_I64(st->samples_added));
	json_object_object_add(s, "aged_out", PP_JSON_I64(st->samples_aged));
	json_object_object_add(s, "dropped", PP_JSON_I64(st->samples_dropped));
	json_object_object_add(o, "samples", s);
	struct json_object *k = json_object_new_object();
	json_object_object_add(k, "live", PP_JSON_I64(st->stacks));
	json_object_object_add(k, "made", PP_JSON_I64(st->stacks_made));
	json_object_object_add(k, "freed", PP_JSON_I64(st->stacks_freed));
	json_object_object_add(o, "stacks", k);
	struct json_object *cost = json_object_new_object();
	json_object_object_add(cost, "add_cpu_seconds",
	                       json_object_new_double(secs(st->add_cpu_ns)));
	json_object_object_add(cost, "read_cpu_seconds",
	                       json_object_new_double(secs(st->read_cpu_ns)));
	json_object_object_add(cost, "reads", PP_JSON_I64(st->reads));
	json_object_object_add(o, "cost", cost);
	struct json_object *sv = json_object_new_object();
	json_object_object_add(sv, "kept", PP_JSON_I64(st->nsavings));
	json_object_object_add(sv, "max", PP_JSON_I64(PP_RECORD_MAX_SAVINGS));
	json_object_object_add(sv, "dropped", PP_JSON_I64(st->savings_dropped));
	json_object_object_add(sv, "refused", PP_JSON_I64(st->saves_refused));
	json_object_object_add(sv, "outranked",
	                       PP_JSON_I64(st->saves_outranked));
	if (with_savings) {
		struct json_object *list = json_object_new_array();
		for (unsigned i = 0; i < st->nsavings; i++) {
			const struct pp_record_saving_info *si =
			    &st->savings[i];
			struct json_object *e = json_object_new_object();
			json_object_object_add(e, "id", PP_JSON_I64(si->id));
			json_object_object_add(
			    e, "reason", json_object_new_string(si->reason));
			json_object_object_add(e, "saved",
			                       time_json(si->saved_real_ns));
			json_object_object_add(e, "start",
			                       time_json(si->start_real_ns));
			json_object_object_add(e, "end",
			                       time_json(si->end_real_ns));
			json_object_object_add(e, "samples",
			                       PP_JSON_I64(si->samples));
			json_object_object_add(e, "bytes",
			                       PP_JSON_I64(si->bytes));
			json_object_object_add(e, "fetched",
			                       PP_JSON_I64(si->fetched));
			static const char *const by[] = {"anonymous", "token",
			                                 "host"};
			json_object_object_add(
			    e, "made_by", json_object_new_string(by[si->by]));
			json_object_array_add(list, e);
		}
		json_object_object_add(sv, "list", list);
	}
	json_object_object_add(o, "savings", sv);
	struct json_object *sn = json_object_new_object();
	json_object_object_add(sn, "interval_seconds",
	                       json_object_new_double(secs(ss.interval_ns)));
	json_object_object_add(sn, "bytes", PP_JSON_I64(ss.bytes));
	json_object_object_add(sn, "taken", PP_JSON_I64(ss.taken));
	json_object_object_add(sn, "dropped", PP_JSON_I64(ss.dropped));
	json_object_object_add(sn, "cpu_seconds",
	                       json_object_new_double(secs(ss.cpu_ns)));
	for (int i = 0; i < PP_RECORD_KINDS; i++) {
		struct json_object *e = json_object_new_object();
		json_object_object_add(e, "count",
		                       PP_JSON_I64(ss.kind[i].count));
		json_object_object_add(
		    e, "oldest",
		    ss.kind[i].oldest_ns
		        ? time_json(pp_record_real_of(ss.kind[i].oldest_ns))
		        : NULL);
		json_object_object_add(
		    e, "newest",
		    ss.kind[i].newest_ns
		        ? time_json(pp_record_real_of(ss.kind[i].newest_ns))
		        : NULL);
		json_object_object_add(
		    e, "not_recorded",
		    ss.kind[i].why_not[0]
		        ? json_object_new_string(ss.kind[i].why_not)
		        : NULL);
		json_object_object_add(
		    sn, pp_record_kind_name((enum pp_record_kind)i), e);
	}
	json_object_object_add(o, "snapshots", sn);
	free(st);
	return o;
}

static void status(struct json_object *root)
{
	json_object_object_add(root, "record", pp_record_json(0));
}

static void metrics(struct pp_buf *b)
{
	struct pp_record_stats *st = malloc(sizeof *st);
	if (!st)
		return;
	pp_record_stats(st);
	pp_prom_gauge(b, "pullprof_record_on",
	              "1 while the record keeps a look-back (PULLPROF_RECORD).",
	              (uint64_t)st->on);
	uint64_t now = pp_clock_ns(CLOCK_MONOTONIC);
	pp_prom_gauge_f(b, "pullprof_record_coverage_seconds",
	                "How far back the record reaches now, in seconds.",
	                st->oldest_ns ? secs(now - st->oldest_ns) : 0);
	struct pp_record_snaps_stats ss;
	pp_record_snaps_stats(&ss);
	pp_prom_gauge(b, "pullprof_record_bytes",
	              "Memory the record holds (samples, stacks, savings, "
	              "snapshots).",
	              st->bytes + ss.bytes);
	pp_prom_gauge(b, "pullprof_record_bound_bytes",
	              "The record's memory bound (PULLPROF_RECORD_MB).",
	              st->bound);
	pp_prom_gauge(b, "pullprof_record_samples",
	              "Samples the record holds now.", st->samples_kept);
	pp_prom_counter(b, "pullprof_record_samples_aged_out_total",
	                "Samples that left the record past its span.",
	                st->samples_aged);
	pp_prom_counter(
	    b, "pullprof_record_samples_dropped_total",
	    "Samples that left the record before its span, pushed out by "
	    "the memory bound, or were never kept (out of memory).",
	    st->samples_dropped);
	pp_prom_gauge(b, "pullprof_record_savings",
	              "Saved recordings kept (pullprof_record_save, POST "
	              "/record/save).",
	              st->nsavings);
	pp_prom_counter_f(b, "pullprof_record_cpu_seconds_total",
	                  "CPU the agent spent keeping and reading the record.",
	                  secs(st->add_cpu_ns + st->read_cpu_ns));
	free(st);
}

const struct pp_kind pp_kind_record = {
    .name = "record",
    .start = start,
    .stop = stop,
    .forget_in_child = forget_in_child,
    .status = status,
    .metrics = metrics,
};

/* ---- the API
 * ------------------------------------------------------------------ */

#define PP_RECORD_SAVE_DEFAULT_NS (60ull * PP_NS_PER_SEC)

PULLPROF_API int pullprof_record_save(const char *reason)
{
	uint64_t id = 0;
	int rc = pp_record_save(reason, PP_RECORD_SAVE_DEFAULT_NS,
	                        PP_RECORD_BY_HOST, &id);
	if (rc)
		return rc;
	return id > 0x7fffffff ? 0x7fffffff : (int)id;
}

/*
 * The record: a rolling look-back of the CPU samples of every thread, kept
 * while PULLPROF_RECORD is set, so that a profile of the last minutes is
 * answered at once (?last=, ?start=&end=) instead of after a window.
 *
 * The collector hands it every sample it drains from the ring (all of
 * them: when a window samples faster than PULLPROF_RECORD_HZ, the record
 * keeps the faster samples too, each weighted by its period). A sample is
 * a few bytes in a chunk (time, thread, stack id, label set, weight and
 * period, varint-coded); each stack is kept once (interned) and freed when
 * no chunk refers to it any more. Chunks come and go oldest first under a
 * memory bound (PULLPROF_RECORD_MB): the record says how far back it
 * reaches. A saving (pullprof_record_save, POST /record/save) holds the
 * chunks of its span aside under an id, so the ring moving on does not
 * take them.
 *
 * Times are CLOCK_MONOTONIC nanoseconds, as the ring's; the record keeps
 * the offset to CLOCK_REALTIME taken when it started, for the query's
 * Unix times and the profiles' time_nanos.
 * The collector adds; the job pipeline reads; any thread asks for a
 * saving.
 * Context: agent.
 */
#ifndef PP_RECORD_H
#define PP_RECORD_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu/ring.h"
#include "profile/job.h"
#include "profile/model.h"

struct pp_record_settings {
	uint64_t span_ns; /* how far back to keep (PULLPROF_RECORD) */
	unsigned hz;      /* PULLPROF_RECORD_HZ */
	size_t bound;     /* bytes (PULLPROF_RECORD_MB) */
};

/* Set up the store (no sampling yet): 0 or -ENOMEM. */
int pp_record_open(const struct pp_record_settings *s);
/* Free everything (the collector no longer adds). */
void pp_record_close(void);
/* In a forked child: the parent's record is not this process's; its
 * memory is left (the lock may have been held at fork). */
void pp_record_forget_in_child(void);
/* The collector feeds the record as a sink of CPU samples (cpu/sink.h):
 * registered by the record's kind once the store is open. Sampling that
 * stopped for good or paused (the host took the signal) is said by
 * /record and the record's reads over a gap (the last
 * PP_RECORD_MAX_GAPS). */
extern const struct pp_cpu_sink pp_record_sink;
/* Sampling cannot start for the record: why, for /record. */
void pp_record_stopped(const char *why);
#define PP_RECORD_MAX_GAPS 16
struct pp_record_gap {
	uint64_t start_ns, end_ns; /* monotonic; end 0: still open */
	char why[160];
	char signal[16]; /* sampled with after it */
};

/* The span a read covers, CLOCK_MONOTONIC. recording > 0: a saving's
 * chunks instead of the ring's. */
struct pp_record_range {
	uint64_t start_ns, end_ns;
	uint64_t recording;
};

/* Parse ?last=, ?start=, ?end= and ?recording= as a query gives them
 * (NULL: absent) into a range. 1: none was given (not a record read);
 * 0: *out set; -EINVAL, -ENOENT (no such saving) or -ERANGE (not covered)
 * with a sentence in err that says what is covered. */
int pp_record_range_parse(const char *last, const char *start, const char *end,
                          const char *recording, struct pp_record_range *out,
                          char *err, size_t errlen);
/* The same for the snapshots (heap, mutex, block): no check against the
 * CPU samples' coverage (a host may sit idle while its heap changes); the
 * snapshot read says what it holds. */
int pp_record_range_parse_snaps(const char *last, const char *start,
                                const char *end, const char *recording,
                                struct pp_record_range *out, char *err,
                                size_t errlen);

/* The CPU profile of the range (sample types samples/count and
 * cpu/nanoseconds, the timeline kept): 0 or a negative errno with a
 * sentence in err. max_bytes bounds the model (0: none). */
int pp_record_cpu_profile(const struct pp_record_range *r, size_t max_bytes,
                          struct pp_profile **out, char *err, size_t errlen);

/* CPU by thread over the range, in steps of step_ns (at most
 * PP_RECORD_TIMELINE_MAX of them): {start, end, step_seconds, threads:
 * [{tid, name, cpu_seconds, cpu: [seconds a step]}], other_threads}, the
 * threads by CPU, max_threads of them and the rest summed. 0 or a negative
 * errno with a sentence in err. */
#define PP_RECORD_TIMELINE_MAX 3600u
struct json_object;
int pp_record_timeline(const struct pp_record_range *r, uint64_t step_ns,
                       size_t max_threads, struct json_object **out, char *err,
                       size_t errlen);

/* Who asked for a saving. The host (pullprof_record_save: its triggers)
 * and a request that carried the token outrank an anonymous request (no
 * token is set): an anonymous saving never pushes a ranked one out, and
 * the anonymous go first when room is made (16 places, the memory bound),
 * so a flood of anonymous POSTs cannot evict what the operator kept. */
enum pp_record_by {
	PP_RECORD_BY_ANONYMOUS,
	PP_RECORD_BY_TOKEN,
	PP_RECORD_BY_HOST,
};

/* Keep the last `last_ns` aside under a new id (*id), with the reason:
 * 0, -ENOTSUP (the record is off), -EBUSY (16 asked, not yet made) or
 * -ENOSPC (an anonymous one while every place holds a ranked saving). Any
 * thread, host threads too: a lock held for a list walk, never a wait on
 * the collector. */
int pp_record_save(const char *reason, uint64_t last_ns, enum pp_record_by by,
                   uint64_t *id);

/* What /record, /status and /metrics say. */
struct pp_record_saving_info {
	uint64_t id;
	int64_t saved_real_ns;
	uint64_t start_ns, end_ns; /* monotonic */
	int64_t start_real_ns, end_real_ns;
	uint64_t samples, bytes;
	unsigned fetched;
	enum pp_record_by by;
	char reason[128];
};
#define PP_RECORD_MAX_SAVINGS 16

struct pp_record_stats {
	int on;
	unsigned hz;
	uint64_t span_ns;
	size_t bound, bytes, stack_bytes, chunk_bytes, saved_bytes;
	size_t coded_bytes;            /* of the samples in the ring's chunks */
	uint64_t oldest_ns, newest_ns; /* monotonic; 0: nothing yet */
	int64_t oldest_real_ns, newest_real_ns;
	uint64_t started_ns;
	/* Samples in the ring now; ever added; gone: past the span (aged)
	 * or pushed out by the bound before it, or never kept (dropped). */
	uint64_t samples_kept, samples_added, samples_aged, samples_dropped;
	uint64_t chunks_dropped, stacks, stacks_made, stacks_freed;
	uint64_t add_cpu_ns, read_cpu_ns, reads;
	uint64_t savings_dropped, saves_refused;
	/* Anonymous asks refused, every place being ranked. */
	uint64_t saves_outranked;
	char stopped[400];
	unsigned ngaps; /* oldest first */
	struct pp_record_gap gaps[PP_RECORD_MAX_GAPS];
	unsigned nsavings;
	struct pp_record_saving_info savings[PP_RECORD_MAX_SAVINGS];
};
void pp_record_stats(struct pp_record_stats *out);

/* The job pipeline's producer of record reads (record/kind.c): its query
 * is a struct pp_record_range; made at once. */
extern struct pp_producer pp_record_producer;
/* The record's state as JSON (/record; with_savings: the list too). */
struct json_object;
struct json_object *pp_record_json(int with_savings);

/* ---- snapshots: heap, mutex and block (snaps.c) ---- */

enum pp_record_kind { PP_RK_HEAP, PP_RK_MUTEX, PP_RK_BLOCK };
#define PP_RECORD_KINDS 3
const char *pp_record_kind_name(enum pp_record_kind k);

/* The record's side of an endpoint's read of the past (ask/ask.h):
 * record/past.c. */
extern const struct pp_ask_past pp_record_past;

/* The query of a snapshot read: the range, the kind, and state (the kind
 * as of the range's end instead of its change over the range); allocs:
 * /allocs's default sample type. */
struct pp_record_snap_query {
	struct pp_record_range range;
	enum pp_record_kind kind;
	int state, allocs;
};
/* Their producers, by kind ("heap", "mutex", "block" for ?id=). */
extern struct pp_producer pp_record_snap_producers[PP_RECORD_KINDS];

void pp_record_snaps_open(uint64_t span_ns);
void pp_record_snaps_close(void);
void pp_record_snaps_forget_in_child(void);
/* On the job pipeline's thread (its tick): a snapshot of each kind when
 * the interval is up. */
void pp_record_snaps_tick(void);
/* The change of kind k between the snapshots at or before start and end
 * (or, with state, the kind as of end): 0 or a negative errno with a
 * sentence (-ERANGE: no snapshot there). */
struct pp_record_pins;
int pp_record_snaps_profile(enum pp_record_kind k, uint64_t start, uint64_t end,
                            int state, const struct pp_record_pins *pins,
                            struct pp_profile **out, char *err, size_t errlen);
/* A saving keeps its span's snapshots (the one at or before start and the
 * one at or before end, of each kind) until it goes: NULL on ENOMEM. */
struct pp_record_pins *pp_record_snaps_pin(uint64_t start, uint64_t end);
void pp_record_snaps_unpin(struct pp_record_pins *pins);

/* Before a job is opened: is there something to answer? 0, -ENOTSUP (the
 * kind is not recorded: why) or -ERANGE (no snapshot at or before the
 * range's end), with a sentence. */
int pp_record_snaps_check(enum pp_record_kind k,
                          const struct pp_record_range *r, char *err,
                          size_t errlen);

struct pp_record_snaps_stats {
	uint64_t interval_ns, taken, dropped, cpu_ns;
	size_t bytes;
	struct {
		unsigned count;
		uint64_t oldest_ns, newest_ns;
		char why_not[160];
	} kind[PP_RECORD_KINDS];
};
void pp_record_snaps_stats(struct pp_record_snaps_stats *out);

/* Monotonic <-> Unix time, with the record's offset. */
int64_t pp_record_real_of(uint64_t mono_ns);

#endif

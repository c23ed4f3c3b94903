/*
 * The record's memory, shared by its files (store.c keeps it, read.c reads
 * it). Everything below is guarded by pp_rec.mu, but for the atomics.
 * Context: agent.
 */
#ifndef PP_RECORD_INTERNAL_H
#define PP_RECORD_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "record/record.h"

/* Bytes of coded samples per chunk: 16 KiB, a second or two of a busy
 * process at the default rate, so the bound is held to a chunk. */
#define PP_RECORD_CHUNK_DATA (16u << 10)
/* Threads whose names are kept (open addressing; a power of two). */
#define PP_RECORD_NAMES 8192u
/* Savings asked and not yet applied. */
#define PP_RECORD_SAVE_QUEUE 16u

/* A sample's first byte. */
#define PP_RS_TRUNCATED 1u /* the stack went deeper than max_depth */
#define PP_RS_EXIT 2u      /* CPU after a thread's last tick */
#define PP_RS_WEIGHT 4u    /* a weight follows (else 1) */
#define PP_RS_PERIOD 8u    /* a period follows (else the chunk's last) */
#define PP_RS_LOST 16u     /* samples the ring dropped (weight) */

struct pp_rstack {
	uint64_t hash;
	uint64_t last_seq; /* the newest chunk that names it */
	uint32_t depth;
	uintptr_t pcs[]; /* leaf first */
};

struct pp_rchunk {
	struct pp_rchunk *next; /* the ring: toward the newest */
	uint64_t seq;
	unsigned refs; /* the ring's, and each saving's */
	int sealed;    /* no more samples go in */
	uint64_t first_ns, last_ns;
	uint64_t nsamples;
	size_t used;
	uint64_t base_ns;     /* the first sample's time: the coder's base */
	uint64_t prev_ns;     /* coding state: the last time, to the us */
	uint32_t prev_period; /* and the last period */
	unsigned char data[PP_RECORD_CHUNK_DATA];
};

struct pp_rname {
	uint32_t tid; /* 0: free */
	uint64_t last_seq;
	char name[16];
};

struct pp_rsaving {
	uint64_t id;
	int64_t saved_real_ns;
	uint64_t start_ns, end_ns;
	char reason[128];
	struct pp_rchunk **chunks; /* oldest first, each referenced */
	size_t nchunks;
	unsigned fetched;
	enum pp_record_by by;
	struct pp_record_pins *pins; /* its heap, mutex, block snapshots */
};

/* A saving asked from any thread: state 0 free, 1 being written, 2 asked. */
struct pp_rsave_ask {
	atomic_int state;
	uint64_t id, mono_ns, last_ns;
	int64_t real_ns;
	enum pp_record_by by;
	char reason[128];
};

struct pp_record_store {
	pthread_mutex_t mu;
	atomic_int on_atomic; /* read without the lock */
	int on;
	uint64_t span_ns;
	unsigned hz;
	/* PULLPROF_RECORD_MB: the samples, stacks, names and savings get
	 * bound, three quarters of it; the snapshots the rest (snaps.c). */
	size_t total_bound, bound;
	int64_t real_offset; /* CLOCK_REALTIME - CLOCK_MONOTONIC at start */
	uint64_t started_ns;
	char stopped[400];
	/* Pauses of sampling (the host took the signal), oldest first. */
	struct pp_record_gap gaps[PP_RECORD_MAX_GAPS];
	unsigned ngaps;

	struct pp_rchunk *oldest, *newest;
	uint64_t next_seq;
	/* When the collector last began a drain (CLOCK_MONOTONIC): the
	 * record holds every sample taken before it. */
	_Atomic uint64_t drained_at;

	struct pp_rstack **stacks; /* by id; 0 is none */
	size_t nstacks, stacks_cap, live_stacks;
	uint32_t *free_list; /* ids freed, stacks_cap places */
	size_t free_ids;
	uint32_t *index; /* open addressing on hash: ids */
	size_t index_cap;

	struct pp_rname *names; /* PP_RECORD_NAMES of them */

	struct pp_rsaving savings[PP_RECORD_MAX_SAVINGS];
	unsigned nsavings;
	struct pp_rsave_ask asks[PP_RECORD_SAVE_QUEUE];
	atomic_ulong next_saving;
	atomic_ulong saves_refused;
	/* Savings kept that are not anonymous (pp_record_save reads it
	 * without the lock), and anonymous asks refused for them. */
	atomic_uint nranked;
	atomic_ulong saves_outranked;

	size_t bytes, stack_bytes, chunk_bytes;
	uint64_t samples_kept, samples_added, samples_aged, samples_dropped;
	uint64_t chunks_dropped, stats_stacks, stats_stacks_freed;
	uint64_t savings_dropped, savings_failed;
	unsigned dropped_since_compact;
	uint32_t last_period;
	uint64_t batch_cpu, add_cpu_ns, read_cpu_ns, reads;
};

extern struct pp_record_store pp_rec;

/* The oldest time the ring answers for: its oldest sample, or the span
 * back from now when that is later (chunks go whole, so the oldest one
 * may hold older samples, which are past the span). 0: nothing. Lock
 * held. */
uint64_t pp_record_visible_oldest(void);
/* Its newest sample (0: nothing within the span). Lock held. */
uint64_t pp_record_visible_newest(void);

uint64_t pp_record_get_varint(const unsigned char **p,
                              const unsigned char *end);
/* A model packed into bytes, and back (pack.c): 0 or a negative errno. */
int pp_record_pack(const struct pp_profile *p, unsigned char **out,
                   size_t *len);
int pp_record_unpack(const unsigned char *data, size_t len,
                     struct pp_profile **out);

/* Notes on p for the gaps of sampling that overlap [start, end]. Lock
 * held. */
void pp_record_gap_notes(struct pp_profile *p, uint64_t start_ns,
                         uint64_t end_ns);

/* A monotonic time as RFC 3339 UTC with milliseconds, for messages. */
void pp_record_rfc3339(uint64_t mono_ns, char *buf, size_t len);

/* A thread's name as last seen ("" when not kept). Lock held. */
const char *pp_record_name_of(uint32_t tid);
/* The sink's side (cpu/sink.h says when the collector calls each). */
unsigned pp_record_hz(void);
void pp_record_begin(pthread_mutex_t *held);
void pp_record_add(const struct pp_ring_rec *rec, const char *thread_name);
void pp_record_remap(uintptr_t (*fn)(uintptr_t, void *), void *arg);
void pp_record_add_lost(uint64_t n, uint64_t t);
void pp_record_end(void);
void pp_record_gap_open(uint64_t now_ns, const char *why);
void pp_record_gap_close(uint64_t now_ns, const char *signal);

#endif

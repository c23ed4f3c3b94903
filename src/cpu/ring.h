/*
 * The sample ring: a bounded lock-free multi-producer queue of fixed-size
 * stack records. Producers are the sampling signal's handlers on any
 * thread (a compare-and-swap to claim a slot, plain stores, a release
 * store to publish; never a lock, never a wait); the one consumer is the
 * collector thread. The memory is allocated once, outside the handler.
 * Context: signal.
 */
#ifndef PP_RING_H
#define PP_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A record's flags: the stack went deeper than max_depth; the record is
 * the CPU a thread used between its last timer tick and its exit (pcs: its
 * start routine and what called it; thread_start.c). */
#define PP_REC_TRUNCATED 1u
#define PP_REC_EXIT 2u
/* A record its handler never finished (the handler was left without
 * returning; shim/cpu_hot.h): published empty by the next handler on that
 * thread, skipped by the consumer. */
#define PP_REC_ABANDONED 4u

struct pp_ring_rec {
	uint64_t time_ns; /* CLOCK_MONOTONIC when taken */
	uint32_t tid;
	uint32_t weight;    /* 1 + timer overruns */
	uint32_t period_ns; /* the timer period when taken */
	uint16_t depth;
	uint16_t flags;  /* PP_REC_* */
	uint32_t labels; /* the thread's label set (labels/labels.h) */
	/* The generation of the loaded images when taken
	 * (symbols/unloaded.h): its PCs are of the images mapped then. */
	uint32_t gen;
	uintptr_t pcs[]; /* leaf first, max_depth of them */
};

struct pp_ring {
	_Atomic size_t head; /* next slot producers claim */
	size_t tail;         /* next slot the consumer reads */
	size_t mask;         /* capacity - 1 */
	size_t rec_size;     /* bytes per record, slot header excluded */
	unsigned max_depth;
	unsigned char *slots;
	_Atomic size_t high_water; /* most records pending at once */
	int wiped_on_fork; /* a child gets the slots zeroed (MADV_WIPEONFORK) */
	pid_t owner;       /* the process whose slots these are */
	/* The consumer's: the slot it has found claimed and not published
	 * since stuck_ns (pp_ring_reclaim), and the slots it took back. */
	size_t stuck_pos;
	uint64_t stuck_ns;
	_Atomic uint64_t reclaimed;
};

/* capacity: a power of two. 0 or -ENOMEM. */
int pp_ring_init(struct pp_ring *r, size_t capacity, unsigned max_depth);
/* A ring of records of another shape, rec_size bytes each (the lock
 * profiler's events): claim and peek hand out 16-byte aligned rec_size
 * bytes, cast by the caller. populate 0: pages come as they are first
 * written (a ring filled from ordinary host code, not a signal handler,
 * takes memory only as it is used). */
int pp_ring_init_size(struct pp_ring *r, size_t capacity, size_t rec_size,
                      int populate);
void pp_ring_free(struct pp_ring *r);
/* Empty the ring (a forked child: a slot a parent thread had claimed but
 * not published at fork time would block the consumer for ever). Nothing
 * may be producing or consuming. Async-signal-safe, and it writes none
 * of the slots' pages: in a forked child the kernel handed them over
 * zeroed (a zeroed ring is an empty one), elsewhere fresh zeroed pages
 * are mapped over them; the ring is then as pp_ring_init left it, its
 * pages to be faulted in as they are written. */
void pp_ring_reset(struct pp_ring *r);

/* Producer side (async-signal-safe): claim a record to fill, or NULL when
 * the ring is full; then publish it: 0, or -1 when the consumer took the
 * slot back meanwhile (pp_ring_reclaim: the record is lost). */
struct pp_ring_rec *pp_ring_claim(struct pp_ring *r, size_t *pos);
/* The record of the slot at pos (claimed earlier by this thread), and
 * whether that slot is still claimed at pos, not published nor taken
 * back. */
struct pp_ring_rec *pp_ring_slot(struct pp_ring *r, size_t pos);
int pp_ring_claimed(struct pp_ring *r, size_t pos);
int pp_ring_publish(struct pp_ring *r, size_t pos);

/* Consumer side: the oldest published record, or NULL; release it after
 * use. */
const struct pp_ring_rec *pp_ring_peek(struct pp_ring *r);
void pp_ring_release(struct pp_ring *r);
/* When peek finds nothing: is the oldest slot claimed and still not
 * published after_ns after the consumer first found it so (at now_ns)?
 * Its producer was left without returning (a host's handler jumped out of
 * a fault inside ours, a thread cancelled in it) and would hold every
 * record behind it for ever: the slot is taken back for the next lap (a
 * publish that comes after all fails) and 1 returned; else 0. */
int pp_ring_reclaim(struct pp_ring *r, uint64_t now_ns, uint64_t after_ns);

#endif

/*
 * Stack capture for the SIGPROF handler, and what keeps it safe.
 *
 * libunwind's local unwinder finds unwind tables with dl_iterate_phdr, whose
 * loader lock the interrupted thread may hold (inside dlopen, dlclose, or a
 * C++ throw walking the same list): a handler that waits on it deadlocks.
 * So the registry (the agent's) snapshots every loaded image's
 * .eh_frame_hdr search table, hands them to libunwind as dynamic unwind info
 * (which it consults first), and publishes the covered code ranges; the
 * capture (in the handler) unwinds only through code in those ranges and stops
 * at anything else, so libunwind never needs dl_iterate_phdr.
 * Context: signal.
 */
#ifndef PP_UNWIND_H
#define PP_UNWIND_H

#include <stddef.h>
#include <stdint.h>

/* DWARF: the compact frame tables (frames.h), libunwind for the frames
 * they cannot describe; LIBUNWIND: libunwind for every frame; FP: the frame
 * pointer chain. */
enum pp_unwind_mode { PP_UNWIND_DWARF, PP_UNWIND_LIBUNWIND, PP_UNWIND_FP };

/* The mode a PULLPROF_UNWIND value names, and back. */
enum pp_unwind_mode pp_unwind_mode_parse(const char *name);
const char *pp_unwind_mode_name(enum pp_unwind_mode mode);

enum pp_unwind_result {
	PP_UNWIND_OK = 0,
	PP_UNWIND_TRUNCATED = 1,    /* deeper than max */
	PP_UNWIND_UNKNOWN_CODE = 2, /* stopped at code not in any image */
	PP_UNWIND_FAILED = 3,       /* the unwinder gave up before the end */
	PP_UNWIND_NO_TABLE = 4, /* a frame the compact tables cannot describe
	                         * (walks from outside, which have no
	                         * libunwind to hand it to) */
};

/* Hot/unsafe context. Capture the interrupted stack from a signal's
 * ucontext into pcs (leaf first); returns the depth (0 when nothing could
 * be read) and why it stopped in *why. */
unsigned pp_unwind_capture(void *ucontext, enum pp_unwind_mode mode,
                           uintptr_t *pcs, unsigned max, int *why);

/* Host context: the calling code's own stack from its pc, sp and rbp,
 * through the compact tables only (no libunwind: 0 frames where they
 * cannot describe one). */
unsigned pp_unwind_capture_regs(uintptr_t pc, uintptr_t sp, uintptr_t bp,
                                uintptr_t *pcs, unsigned max);

/* Frames of the profiler itself a capture may have to skip. */
#define PP_UNWIND_SKIP_ROOM 16

/* Hot context, but not a signal handler: the allocating thread inside a
 * malloc wrapper. Capture the calling thread's own stack, starting at the
 * frame whose pc is `from` (the wrapper's return address: the wrapper and
 * the profiler's frames are left out), leaf first, at most max frames; pcs
 * must have room for max + PP_UNWIND_SKIP_ROOM. When `from` is not met,
 * pcs holds just `from` and *why says why. The compact tables walk it
 * (whatever PULLPROF_UNWIND says: that is the CPU profiler's); libunwind
 * only where they cannot describe a frame. */
unsigned pp_unwind_capture_here(uintptr_t from, uintptr_t *pcs, unsigned max,
                                int *why);
/* Captures of pp_unwind_capture_here made by the compact tables alone, and
 * those handed to libunwind (for status). */
uint64_t pp_unwind_here_compact(void);
uint64_t pp_unwind_here_fallbacks(void);
/* The same from a wrapper that the host called (pthread_create, the lock
 * calls): the compact tables walk from here (about a microsecond), and
 * libunwind only where they cannot (about fifteen). pcs must have room for
 * max + PP_UNWIND_SKIP_ROOM; at most PP_UNWIND_CALLER_MAX frames. */
#define PP_UNWIND_CALLER_MAX 128
unsigned pp_unwind_capture_caller(uintptr_t from, uintptr_t *pcs, unsigned max);
/* Agent context: may captures use libunwind's cached fast trace? */
void pp_unwind_allow_trace(int yes);
/* Captures that took the fast trace, and calls of libunwind's to
 * dl_iterate_phdr inside a capture that were answered "no images" instead
 * of taking the loader lock (for status). */
uint64_t pp_unwind_fast_traces(void);
uint64_t pp_unwind_loader_avoided(void);

/* Agent context, once: the pool of stacks the SIGPROF handler unwinds on,
 * whatever the unwinder (capture.c). 0 or -1. pp_unwind_init does it too. */
int pp_unwind_stacks_init(void);
/* Hot context: the pool's stack (its index + 1, shim/cpu_hot.h) that a handler
 * left without returning held is free again. */
void pp_unwind_stack_release(int stack);

/* Agent context. Set libunwind up for signal-safe use and take the first
 * snapshot. Each profiler that captures stacks calls it once and
 * pp_unwind_shutdown once when it no longer can. 0 or a negative errno. */
int pp_unwind_init(void);
/* Agent context. Bring the snapshot up to date after dlopen/dlclose; cheap
 * when nothing changed. */
void pp_unwind_refresh(void);
/* Agent context, once no capture of this user can run any more; the last
 * user's call frees everything. */
void pp_unwind_shutdown(void);

/* Number of images registered (for status). */
size_t pp_unwind_images(void);

/* The compact frame tables (for status). */
struct pp_unwind_table_stats {
	size_t rows, unsupported_rows, bytes;
	size_t images_without; /* images left to libunwind entirely */
};
void pp_unwind_table_stats(struct pp_unwind_table_stats *out);
/* Hot-context counters: captures walked by the compact tables alone, and
 * those handed to libunwind at a frame the tables cannot describe. */
uint64_t pp_unwind_compact(void);
uint64_t pp_unwind_fallbacks(void);
uint64_t pp_unwind_stack_checks(void);

#endif

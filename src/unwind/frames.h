/*
 * Compact frame tables: each image's DWARF call-frame information (.eh_frame)
 * turned once, in agent context, into a sorted array of rows "from this pc
 * on, the caller's frame is found so": the CFA as rsp or rbp plus an offset,
 * where rbp was saved, and the return address at CFA-8 (x86-64). The SIGPROF
 * handler then unwinds a frame with one binary search and two loads, no
 * DWARF interpretation, no lock and no system call (frames.c: pp_frames_walk).
 *
 * What a row cannot say — a CFA computed by an expression other than the
 * PLT's, a CFA in another register, rbp kept in another register — is a row
 * of kind UNSUPPORTED: the walk then hands the whole capture to libunwind,
 * which reads the DWARF itself, and counts it (status: unwind.fallbacks).
 */
#ifndef PP_FRAMES_H
#define PP_FRAMES_H

#include <stddef.h>
#include <stdint.h>

enum pp_frame_kind {
	PP_FRAME_END = 0,         /* no call-frame information here */
	PP_FRAME_CFA_RSP = 1,     /* CFA = rsp + off */
	PP_FRAME_CFA_RBP = 2,     /* CFA = rbp + off */
	PP_FRAME_PLT = 3,         /* a lazy-binding PLT entry (see frames.c) */
	PP_FRAME_SIGNAL = 4,      /* a signal trampoline: a ucontext at rsp */
	PP_FRAME_UNSUPPORTED = 5, /* libunwind has to do this one */
	PP_FRAME_OUTERMOST = 6,   /* return address undefined: the stack ends */
};

/* A row's rule in 32 bits: kind in bits 0-2; bits 3-10 where rbp was saved
 * (at CFA - 8 * k; 0: rbp unchanged), for PLT the low-nibble threshold;
 * bits 11-31 the CFA offset. */
#define PP_FRAME_KIND(r) ((enum pp_frame_kind)((r)&7u))
#define PP_FRAME_RBP(r) (((r) >> 3) & 0xffu)
#define PP_FRAME_OFF(r) ((r) >> 11)
#define PP_FRAME_RULE(kind, rbp, off)                                          \
	((uint32_t)(kind) | ((uint32_t)(rbp) << 3) | ((uint32_t)(off) << 11))
#define PP_FRAME_MAX_OFF ((1u << 21) - 1)

struct pp_frame_row {
	uint32_t pc; /* offset from the table's base */
	uint32_t rule;
};

/* A page index narrows the search: pages[p] is the first row at or past
 * the page's start (pc offset p << PP_FRAME_PAGE_SHIFT), so a lookup
 * touches a few rows of one page instead of walking the whole array
 * through cache misses. It follows the rows in the same allocation. */
#define PP_FRAME_PAGE_SHIFT 12

struct pp_frame_table {
	uintptr_t base; /* the image's lowest code address */
	size_t n;
	size_t unsupported; /* rows of kind UNSUPPORTED */
	size_t fdes;
	size_t npages;
	const uint32_t *pages;
	void *region; /* where it was allocated (frames.c); NULL: malloc */
	struct pp_frame_row rows[];
};

/* Agent context. Build the table of an image from its .eh_frame_hdr at
 * `hdr` (search table at `table`, `count` entries), code in [lo, hi). The
 * image's memory is read with checked copies: an image unloaded meanwhile
 * gives NULL, never a fault. NULL also when the tables are not understood
 * (the image is then left to libunwind). Free with pp_frames_free(). Both
 * are called with the unwind registry's lock held (which fork takes). */
struct pp_frame_table *pp_frames_build(uintptr_t hdr, uintptr_t table,
                                       size_t count, uintptr_t lo,
                                       uintptr_t hi);
void pp_frames_free(struct pp_frame_table *t);

/* Hot context: the rule for pc (an address inside the table's image). */
uint32_t pp_frames_rule(const struct pp_frame_table *t, uintptr_t pc);

/* Hot/unsafe context: capture the interrupted stack of a signal's ucontext
 * through the compact tables (unwind.h's pp_unwind_capture contract).
 * Returns -1 when a frame needs libunwind (nothing is counted then; the
 * caller captures again with libunwind). With checks 0 the walk never
 * checks stack pages (a system call, and a deeper stack) and returns -2
 * where it would have to: the caller walks again where it may. */
int pp_frames_walk(void *ucontext, uintptr_t *pcs, unsigned max, int *why,
                   int checks);
/* The same from three registers (the walk reads no others). */
int pp_frames_walk_regs(uintptr_t pc, uintptr_t sp, uintptr_t bp,
                        uintptr_t *pcs, unsigned max, int *why, int checks);

/* Hot/unsafe context: the interrupted stack of a signal's ucontext by
 * frame-pointer chain, with the same checked reads (no system call per
 * frame). */
int pp_frames_walk_fp(void *ucontext, uintptr_t *pcs, unsigned max, int *why,
                      int checks);

/* Agent context: a copy of another thread's stack to walk from outside
 * (the thread is not interrupted: it is blocked in a system call, or a
 * perf_event sample copied its stack). buf[0..len) holds the words at
 * base..; the caller's buffer has room for cap bytes. With `live`, loads
 * past len read more of the process's memory (process_vm_readv, which
 * fails rather than faults on a page gone meanwhile) into the rest of buf,
 * and loads outside buf read single words, at most `reads` of them. */
struct pp_frames_mem {
	uintptr_t base;
	unsigned char *buf;
	size_t len, cap;
	int live;
	unsigned reads;
};
int pp_frames_mem_load(struct pp_frames_mem *m, uintptr_t addr, uintptr_t *out);

/* Agent context: walk a thread's stack from pc and sp (and bp when
 * bp_known) through the compact tables, reading it through m. The depth;
 * *why PP_UNWIND_NO_TABLE where a frame the tables cannot describe ended
 * it. */
int pp_frames_walk_mem(struct pp_frames_mem *m, uintptr_t pc, uintptr_t sp,
                       uintptr_t bp, int bp_known, uintptr_t *pcs, unsigned max,
                       int *why);

/* For status: system calls spent checking stack pages (a thread's first
 * samples, or a deeper stack than before). */
uint64_t pp_frames_stack_checks(void);

#endif

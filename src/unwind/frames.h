/*
 * Context: signal.
 *
 * Compact frame tables: each image's DWARF call-frame information (.eh_frame)
 * turned once, in agent context (unwind/cfi.c), into a sorted array of rows
 * "from this pc on, the caller's frame is found so": the CFA as sp or the
 * frame pointer plus an offset, where the frame pointer was saved, where
 * the return address is (the layout of a rule is the architecture's:
 * arch/arch.h). The sampling signal's handler then unwinds a frame with one
 * binary search and two loads, no DWARF interpretation, no lock and no
 * system call (frames.c: pp_frames_walk).
 *
 * What a row cannot say — a CFA computed by an expression other than the
 * PLT's, a CFA in another register, the frame pointer kept in another
 * register — is a row of kind UNSUPPORTED: the walk then hands the whole
 * capture to libunwind, which reads the DWARF itself, and counts it
 * (status: unwind.fallbacks).
 */
#ifndef PP_FRAMES_H
#define PP_FRAMES_H

#include <stddef.h>
#include <stdint.h>

#include "arch/arch.h"
#include "arch/rules.h"

/* A row's rule in 32 bits: the kind in bits 0-2, the rest laid out by
 * the architecture (arch/arch.h: PP_ARCH_RULE). */
#define PP_FRAME_KIND(r) ((enum pp_frame_kind)((r)&7u))
#define PP_FRAME_FP(r) PP_ARCH_RULE_FP(r)
#define PP_FRAME_RA(r) PP_ARCH_RULE_RA(r)
#define PP_FRAME_OFF(r) PP_ARCH_RULE_OFF(r)
#define PP_FRAME_RULE(kind, fp, ra, off) PP_ARCH_RULE(kind, fp, ra, off)
#define PP_FRAME_MAX_FP PP_ARCH_RULE_MAX_FP
#define PP_FRAME_MAX_OFF PP_ARCH_RULE_MAX_OFF

struct pp_frame_row {
	uint32_t pc; /* offset from the table's base */
	uint32_t rule;
};

/* A page index narrows the search: pages[p] is the first row at or past
 * the page's start (pc offset p << PP_FRAME_PAGE_SHIFT), so a lookup
 * touches a few rows of one page instead of walking the whole array
 * through cache misses. It follows the rows in the same allocation.
 * Pages of 256 bytes of code: two or three probes a lookup, for 4 bytes
 * of index per 256 bytes of code (python3's tables: 2.69 MB against
 * 2.51 MB with 4 KiB pages, whose lookups took twice the instructions). */
#define PP_FRAME_PAGE_SHIFT 8

struct pp_frame_table {
	uintptr_t base; /* the image's lowest code address */
	size_t n;
	size_t unsupported; /* rows of kind UNSUPPORTED */
	size_t fdes;
	size_t npages;
	const uint32_t *pages;
	void *region; /* where it was allocated (cfi.c); NULL: malloc */
	struct pp_frame_row rows[];
};

/* The rule for pc (an address inside the table's image). Inline: the
 * walks look one up per frame. */
static inline uint32_t pp_frames_rule(const struct pp_frame_table *t,
                                      uintptr_t pc)
{
	if (pc < t->base || pc - t->base > UINT32_MAX || t->n == 0)
		return PP_FRAME_END;
	uint32_t off = (uint32_t)(pc - t->base);
	size_t lo = 0, hi = t->n;
	size_t page = off >> PP_FRAME_PAGE_SHIFT;
	if (page + 1 < t->npages) {
		/* The answer is the row before the page's first, or one of
		 * the page's own. */
		lo = t->pages[page] ? t->pages[page] - 1 : 0;
		hi = t->pages[page + 1];
	}
	/* The last row at or before off. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->rows[mid].pc <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? t->rows[lo - 1].rule : PP_FRAME_END;
}

/* Capture the interrupted stack of a signal's ucontext
 * through the compact tables (unwind.h's pp_unwind_capture contract).
 * Returns -1 when a frame needs libunwind (nothing is counted then; the
 * caller captures again with libunwind). With checks 0 the walk never
 * checks stack pages (a system call, and a deeper stack) and returns -2
 * where it would have to: the caller walks again where it may. */
int pp_frames_walk(void *ucontext, uintptr_t *pcs, unsigned max, int *why,
                   int checks);
/* The same from registers: pc, sp, the frame pointer, and the link
 * register where the architecture has one (0 when it is not known: a
 * frame whose return address is still there then ends the walk). */
int pp_frames_walk_regs(const struct pp_arch_regs *r, uintptr_t *pcs,
                        unsigned max, int *why, int checks);

/* The interrupted stack of a signal's ucontext by frame-pointer chain, with the
 * same checked reads (no system call per frame). */
int pp_frames_walk_fp(void *ucontext, uintptr_t *pcs, unsigned max, int *why,
                      int checks);

/* For status: system calls spent checking stack pages (a thread's first
 * samples, or a deeper stack than before). */
uint64_t pp_frames_stack_checks(void);

#endif

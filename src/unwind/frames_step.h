/*
 * Context: signal.
 *
 * The walk over the compact frame tables, frame by frame, over any source
 * of stack words: the sampling signal's handler's checked loads of its own
 * thread's stack (frames.c), or a copy of another thread's stack
 * (frames_mem.c, agent context). Inlined into each with constant
 * functions, so the handler's walk makes no indirect call. What a frame
 * means on this processor comes from arch/arch.h.
 */
#ifndef PP_FRAMES_STEP_H
#define PP_FRAMES_STEP_H

#include <stdint.h>

#include "arch/arch.h"
#include "unwind/frames.h"
#include "unwind/registry.h"
#include "unwind/unwind.h"

_Static_assert(PP_ARCH_STACK_GROWS_DOWN,
               "the walks climb the stack to higher addresses");

typedef int (*pp_frames_load_fn)(void *src, uintptr_t addr, uintptr_t *out);
typedef void (*pp_frames_stack_fn)(void *src, uintptr_t sp);
typedef int (*pp_frames_find_fp_fn)(void *src, uintptr_t at, uintptr_t sp,
                                    uintptr_t *fp);

/* Walk from r into pcs. regs_known 0: the walk starts without the frame
 * pointer and link register (a thread read from outside gives only pc and
 * sp). A frame whose CFA is fp-based before any frame restored fp asks
 * find_fp for the frame record (saved fp, return address) above sp, or
 * ends there. ld_code (NULL in the handler, which reads no code) reads a
 * word of code. */
static inline __attribute__((always_inline)) int pp_frames_walk_core(
    const struct pp_arch_regs *r, int regs_known, uintptr_t *pcs, unsigned max,
    int *why, void *src, pp_frames_load_fn ld, pp_frames_load_fn ld_code,
    pp_frames_stack_fn other_stack, pp_frames_find_fp_fn find_fp)
{
	uintptr_t pc = r->pc, sp = r->sp, fp = r->fp, lr = r->lr;
	int fp_known = regs_known;
	int lr_known = regs_known && PP_ARCH_HAS_LINK_REGISTER;
	/* Is pc exact (the interrupted instruction) or a return address? */
	int exact = 1;
	unsigned n = 0;
	struct pp_registry_near near = {0, 0, NULL};

	*why = PP_UNWIND_OK;
	while (pc) {
		if (n == max) {
			*why = PP_UNWIND_TRUNCATED;
			return (int)n;
		}
		pcs[n++] = pc;
		uintptr_t at = pc - !exact;
		int covered;
		const struct pp_frame_table *t =
		    pp_registry_table_near(at, &covered, &near);
		if (!covered) {
			*why = PP_UNWIND_UNKNOWN_CODE;
			return (int)n;
		}
		if (!t) {
			*why = PP_UNWIND_NO_TABLE;
			return (int)n;
		}
		uint32_t rule = pp_frames_rule(t, at);
		if (ld_code && exact && PP_FRAME_KIND(rule) == PP_FRAME_END) {
			/* A thread stopped in a system call stands just past
			 * its syscall instruction, which may end its function's
			 * rows: a signal trampoline (rt_sigreturn), a wrapper
			 * that never returns. The instruction's own row holds.
			 * (The hot walk never stands there: a signal is taken
			 * after the call, and it reads no code.) */
			uintptr_t w;
			if (pc >= 8 && !ld_code(src, pc - 8, &w) &&
			    pp_arch_after_syscall(w))
				rule = pp_frames_rule(t, pc - 1);
		}
		uintptr_t cfa, ra;
		switch (PP_FRAME_KIND(rule)) {
		case PP_FRAME_OUTERMOST: return (int)n;
		case PP_FRAME_CFA_SP: cfa = sp + PP_FRAME_OFF(rule); break;
		case PP_FRAME_CFA_FP:
			if (!fp_known &&
			    (!find_fp ||
			     PP_FRAME_OFF(rule) != PP_ARCH_FRAME_RECORD_SIZE ||
			     find_fp(src, at, sp, &fp))) {
				*why = PP_UNWIND_FAILED;
				return (int)n;
			}
			cfa = fp + PP_FRAME_OFF(rule);
			break;
		case PP_FRAME_PLT: cfa = pp_arch_plt_cfa(rule, pc, sp); break;
		case PP_FRAME_SIGNAL: {
			uintptr_t regs[4] = {0, 0, 0, 0};
			if (ld(src, sp + PP_ARCH_SIGFRAME_PC, &regs[0]) ||
			    ld(src, sp + PP_ARCH_SIGFRAME_SP, &regs[1]) ||
			    ld(src, sp + PP_ARCH_SIGFRAME_FP, &regs[2]) ||
			    (PP_ARCH_HAS_LINK_REGISTER &&
			     ld(src, sp + PP_ARCH_SIGFRAME_LR, &regs[3]))) {
				*why = PP_UNWIND_FAILED;
				return (int)n;
			}
			pc = regs[0];
			sp = regs[1];
			fp = regs[2];
			lr = regs[3];
			fp_known = 1;
			lr_known = PP_ARCH_HAS_LINK_REGISTER;
			exact = 1;
			other_stack(src, sp);
			continue;
		}
		default: /* END, UNSUPPORTED */
			*why = PP_UNWIND_NO_TABLE;
			return (int)n;
		}
		unsigned ra_slot = PP_FRAME_RA(rule);
		/* A caller's CFA is above its callee's sp, or at it where
		 * the return address is still in the link register (a leaf
		 * that never moved sp). */
		if (cfa < sp || (cfa == sp && ra_slot)) {
			*why = PP_UNWIND_FAILED;
			return (int)n;
		}
		if (ra_slot == 0) {
			/* Still in the link register (a leaf, a prologue
			 * before its store): known only in the first frame
			 * or one a signal frame restored. */
			if (!lr_known || !lr) {
				*why = PP_UNWIND_FAILED;
				return (int)n;
			}
			ra = lr;
		} else if (ld(src, cfa - 8 * ra_slot, &ra)) {
			*why = PP_UNWIND_FAILED;
			return (int)n;
		}
		lr_known = 0;
		if (PP_FRAME_FP(rule) && PP_FRAME_KIND(rule) != PP_FRAME_PLT) {
			if (ld(src, cfa - 8 * PP_FRAME_FP(rule), &fp)) {
				*why = PP_UNWIND_FAILED;
				return (int)n;
			}
			fp_known = 1;
		}
		sp = cfa;
		pc = pp_arch_strip_ra(ra);
		exact = 0;
	}
	return (int)n;
}

#endif

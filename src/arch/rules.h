/*
 * Context: signal.
 *
 * The types the unwinder and the architecture share, in a leaf of their
 * own so the architecture layer includes nothing of the unwinder's: the
 * kinds of a compact row's rule (unwind/frames.h) and the state of the
 * registers while a CFA program runs (unwind/cfi.c), from which
 * pp_arch_cfi_rule makes a rule (arch/arch.h).
 */
#ifndef PP_ARCH_RULES_H
#define PP_ARCH_RULES_H

#include <stdint.h>

enum pp_frame_kind {
	PP_FRAME_END = 0,         /* no call-frame information here */
	PP_FRAME_CFA_SP = 1,      /* CFA = sp + off */
	PP_FRAME_CFA_FP = 2,      /* CFA = frame pointer + off */
	PP_FRAME_PLT = 3,         /* a PLT entry (pp_arch_plt_cfa) */
	PP_FRAME_SIGNAL = 4,      /* a signal trampoline (PP_ARCH_SIGFRAME_*) */
	PP_FRAME_UNSUPPORTED = 5, /* libunwind has to do this one */
	PP_FRAME_OUTERMOST = 6,   /* return address undefined: the stack ends */
};

/* The rules of the registers the walk cares about (sp, the frame pointer,
 * the return address) while a CFA program runs. */
enum { PP_CFI_SAME, PP_CFI_OFFSET, PP_CFI_UNDEF, PP_CFI_OTHER };
enum {
	PP_CFI_CFA_REG,  /* CFA = cfa_reg + cfa_off */
	PP_CFI_CFA_PLT,  /* the PLT's expression (pp_arch_cfa_expression) */
	PP_CFI_CFA_EXPR, /* any other expression */
};
struct pp_cfi_state {
	unsigned cfa_reg;
	int64_t cfa_off;
	int cfa_kind;           /* PP_CFI_CFA_* */
	unsigned plt_k;         /* PP_CFI_CFA_PLT: the architecture's datum */
	int fp, ra, sp;         /* PP_CFI_SAME ... */
	int64_t fp_off, ra_off; /* PP_CFI_OFFSET: saved at CFA + off */
};

#endif

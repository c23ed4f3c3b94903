/*
 * Context: signal.
 *
 * AArch64's inline hooks and constants (arch.h says what each must do).
 * Included by arch/arch.h only.
 *
 * The constants and the rule layout come first and need no arm64 header:
 * tests/unit/test_cfi_aarch64.c builds the table builder (unwind/cfi.c and
 * arch/aarch64.c) for AArch64 on another processor, with
 * PP_ARCH_TABLES_AARCH64 defined, to check its rows against readelf's
 * reading of arm64 binaries. The hooks that read this processor's
 * registers follow, on AArch64 only.
 */
#ifndef PP_ARCH_AARCH64_H
#define PP_ARCH_AARCH64_H

#include <stddef.h>
#include <stdint.h>

#define PP_ARCH_NAME "aarch64"
#define PP_ARCH_STACK_GROWS_DOWN 1
#define PP_ARCH_RED_ZONE 0 /* AAPCS64 has none */
#define PP_ARCH_HAS_LINK_REGISTER 1

/* The C library's oldest symbol version on AArch64 (shim/locks.c
 * binds two names of that version). */
#define PP_ARCH_GLIBC_BASE "GLIBC_2.17"

/* DWARF register numbers (the AArch64 DWARF ABI): x29, sp, x30 (which is
 * also the CIEs' return-address column). */
#define PP_ARCH_DW_FP 29
#define PP_ARCH_DW_SP 31
#define PP_ARCH_DW_RA 30

/* stp x29, x30, [sp, #-N]!; mov x29, sp: [x29] the caller's x29, [x29+8]
 * the return address. The caller's sp is x29 + 16 only in a frame with no
 * locals (x29 points at the record, which GCC puts at the frame's bottom),
 * which is all a frame-pointer walk needs of it: a bound. */
#define PP_ARCH_FRAME_RECORD_RA 8
#define PP_ARCH_FRAME_RECORD_SIZE 16

/* perf_event's arm64 register numbers (asm/perf_regs.h): x29 29, lr 30,
 * sp 31, pc 32; a sample holds them in that order. */
#define PP_ARCH_PERF_REGS                                                      \
	((1ull << 29) | (1ull << 30) | (1ull << 31) | (1ull << 32))
#define PP_ARCH_PERF_NREGS 4

/* The rule: kind in bits 0-2; bits 3-9 where x29 was saved (at CFA - 8 *
 * k; 0: unchanged); bits 10-16 where x30 was saved (at CFA - 8 * k; 0:
 * still in x30); bits 17-31 the CFA offset. GCC and clang keep the pair
 * next to each other at the bottom of the register save area, so 127
 * slots (1016 bytes below the CFA) cover all but frames with large
 * arrays, whose rows go to libunwind (counted); so do CFA offsets over
 * 32 KiB. */
#define PP_ARCH_RULE(kind, fp, ra, off)                                        \
	((uint32_t)(kind) | ((uint32_t)(fp) << 3) | ((uint32_t)(ra) << 10) |   \
	 ((uint32_t)(off) << 17))
#define PP_ARCH_RULE_FP(r) (((r) >> 3) & 0x7fu)
#define PP_ARCH_RULE_RA(r) (((r) >> 10) & 0x7fu)
#define PP_ARCH_RULE_OFF(r) ((r) >> 17)
#define PP_ARCH_RULE_MAX_FP 127u
#define PP_ARCH_RULE_MAX_RA 127u
#define PP_ARCH_RULE_MAX_OFF ((1u << 15) - 1)

/* Every instruction is 4 bytes: bl, blr, blraa... (aarch64.c). */
#define PP_ARCH_CALL_BYTES 4

/* DW_CFA_AARCH64_negate_ra_state (the number SPARC's
 * DW_CFA_GNU_window_save has): from here on x30 is signed, or no longer.
 * The walks strip every return address (pp_arch_strip_ra), so the table
 * builder accepts it and changes nothing. */
#define PP_ARCH_CFA_NEGATE_RA_STATE 0x2d

#if defined(__aarch64__)
#include <signal.h>
#include <ucontext.h>

/* The kernel's struct rt_sigframe (arch/arm64/kernel/signal.c): the
 * siginfo, then the ucontext. At __kernel_rt_sigreturn sp points at it
 * (the handler's epilogue restored the sp the kernel set). glibc's
 * ucontext_t has the kernel's layout (uc_sigmask padded to 128 bytes,
 * uc_mcontext aligned to 16). */
struct pp_aarch64_rt_sigframe {
	siginfo_t info;
	ucontext_t uc;
};
#define PP_AARCH64_UC(field)                                                   \
	(offsetof(struct pp_aarch64_rt_sigframe, uc) +                         \
	 offsetof(ucontext_t, uc_mcontext) + offsetof(mcontext_t, field))
#define PP_ARCH_SIGFRAME_PC PP_AARCH64_UC(pc)
#define PP_ARCH_SIGFRAME_SP PP_AARCH64_UC(sp)
#define PP_ARCH_SIGFRAME_FP (PP_AARCH64_UC(regs) + 29 * 8)
#define PP_ARCH_SIGFRAME_LR (PP_AARCH64_UC(regs) + 30 * 8)
/* The kernel's uapi layout, as the assertions' numbers: siginfo 128 bytes,
 * uc_flags, uc_link, uc_stack (24), uc_sigmask (128), then the sigcontext
 * at 176 in the ucontext: fault_address, regs[31], sp, pc. */
_Static_assert(PP_ARCH_SIGFRAME_PC == 128 + 176 + 8 + 31 * 8 + 8 &&
                   PP_ARCH_SIGFRAME_SP == 128 + 176 + 8 + 31 * 8 &&
                   PP_ARCH_SIGFRAME_FP == 128 + 176 + 8 + 29 * 8,
               "the arm64 rt_sigframe layout");

static inline void pp_arch_regs_of_ucontext(const void *ucontext,
                                            struct pp_arch_regs *r)
{
	const ucontext_t *uc = ucontext;
	r->pc = (uintptr_t)uc->uc_mcontext.pc;
	r->sp = (uintptr_t)uc->uc_mcontext.sp;
	r->fp = (uintptr_t)uc->uc_mcontext.regs[29];
	r->lr = (uintptr_t)uc->uc_mcontext.regs[30];
}

static inline void pp_arch_regs_of_perf(const uint64_t *v,
                                        struct pp_arch_regs *r)
{
	r->fp = (uintptr_t)v[0];
	r->lr = (uintptr_t)v[1];
	r->sp = (uintptr_t)v[2];
	r->pc = (uintptr_t)v[3];
}

/* arm64's PLT stubs (adrp, ldr, add, br) move neither sp nor x30 and have
 * no CFA expression: no PLT rows are made. */
static inline uintptr_t pp_arch_plt_cfa(uint32_t rule, uintptr_t pc,
                                        uintptr_t sp)
{
	(void)pc;
	return sp + PP_ARCH_RULE_OFF(rule);
}

/* xpaclri (hint #7) rather than a mask: the signature's bits depend on the
 * kernel's virtual-address size (39, 48 or 52 bits) and on top-byte
 * ignore, which only the processor knows; a mask of 48 bits would leave
 * bits 39-47 of a 39-bit kernel's signatures in place. In the hint space,
 * it is a nop on a core without pointer authentication, where no address
 * is signed. It works on x30 only, hence the register variable. */
static inline uintptr_t pp_arch_strip_ra(uintptr_t ra)
{
	register uintptr_t x30 __asm__("x30") = ra;
	__asm__("hint #7" : "+r"(x30));
	return x30;
}

/* isb rather than yield: yield is a nop on most cores, isb waits for
 * the pipeline to drain, a pause of the length x86's pause gives. */
static inline void pp_arch_spin_pause(void)
{
	__asm__ volatile("isb" ::: "memory");
}

/* svc #0 is d4000001: the upper word of the little-endian pair. */
static inline int pp_arch_after_syscall(uint64_t word_before_pc)
{
	return (word_before_pc >> 32) == 0xd4000001u;
}

/* x30 is the return address only where this point's row says it is still
 * in the link register; read at once, before any call can change it. */
static inline __attribute__((always_inline)) void
pp_arch_here(struct pp_arch_regs *r)
{
	uintptr_t pc, sp, fp, lr;
	__asm__ volatile("adr %0, .\n\t"
	                 "mov %1, sp\n\t"
	                 "mov %2, x29\n\t"
	                 "mov %3, x30"
	                 : "=r"(pc), "=r"(sp), "=r"(fp), "=r"(lr));
	r->pc = pc;
	r->sp = sp;
	r->fp = fp;
	r->lr = lr;
}

/* Call fn(arg) with sp = top (16-byte aligned); x19 (callee-saved, so fn
 * keeps it) holds the old sp. Every register AAPCS64 lets fn change is
 * clobbered: x0-x18, x30, the vector registers but the low halves of
 * v8-v15 (which fn preserves). */
static inline void pp_arch_call_on_stack(void (*fn)(void *), void *arg,
                                         void *top)
{
	register void *x0 __asm__("x0") = arg;
	__asm__ volatile("mov x19, sp\n\t"
	                 "mov sp, %2\n\t"
	                 "blr %1\n\t"
	                 "mov sp, x19"
	                 : "+r"(x0)
	                 : "r"(fn), "r"(top)
	                 : "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9",
	                   "x10", "x11", "x12", "x13", "x14", "x15", "x16",
	                   "x17", "x18", "x19", "x30", "v0", "v1", "v2", "v3",
	                   "v4", "v5", "v6", "v7", "v16", "v17", "v18", "v19",
	                   "v20", "v21", "v22", "v23", "v24", "v25", "v26",
	                   "v27", "v28", "v29", "v30", "v31", "memory", "cc");
}
#endif /* __aarch64__ */

#endif

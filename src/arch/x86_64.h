/*
 * Context: signal.
 *
 * x86_64's inline hooks and constants (arch.h says what each must do).
 * Included by arch/arch.h only.
 */
#ifndef PP_ARCH_X86_64_H
#define PP_ARCH_X86_64_H

#include <stddef.h>
#include <stdint.h>
#include <ucontext.h>

#define PP_ARCH_NAME "x86_64"
#define PP_ARCH_STACK_GROWS_DOWN 1
#define PP_ARCH_RED_ZONE 128
#define PP_ARCH_HAS_LINK_REGISTER 0

/* The C library's oldest symbol version on x86_64 (shim/locks.c
 * binds two names of that version). */
#define PP_ARCH_GLIBC_BASE "GLIBC_2.2.5"

/* DWARF register numbers (the psABI's): rbp, rsp, the return address. */
#define PP_ARCH_DW_FP 6
#define PP_ARCH_DW_SP 7
#define PP_ARCH_DW_RA 16

/* push %rbp; mov %rsp, %rbp: [rbp] the caller's rbp, [rbp+8] the return
 * address the call pushed. */
#define PP_ARCH_FRAME_RECORD_RA 8
#define PP_ARCH_FRAME_RECORD_SIZE 16

/* Indices of rbp, rsp and rip in mcontext_t's gregs: the kernel's struct
 * sigcontext order, an ABI (glibc names them REG_RBP, REG_RSP, REG_RIP
 * under _GNU_SOURCE only, which not every includer defines first). */
enum { PP_X86_64_GREG_FP = 10, PP_X86_64_GREG_SP = 15, PP_X86_64_GREG_PC = 16 };
#ifdef REG_RIP
_Static_assert((int)REG_RIP == PP_X86_64_GREG_PC &&
                   (int)REG_RSP == PP_X86_64_GREG_SP &&
                   (int)REG_RBP == PP_X86_64_GREG_FP,
               "mcontext_t's register order");
#endif

/* At __restore_rt, rsp points at the ucontext_t of the rt_sigframe (its
 * return address, the trampoline's, was popped by the handler's ret). */
#define PP_ARCH_UC_GREG(i)                                                     \
	(offsetof(ucontext_t, uc_mcontext) + offsetof(mcontext_t, gregs) +     \
	 (size_t)(i) * sizeof(greg_t))
#define PP_ARCH_SIGFRAME_PC PP_ARCH_UC_GREG(PP_X86_64_GREG_PC)
#define PP_ARCH_SIGFRAME_SP PP_ARCH_UC_GREG(PP_X86_64_GREG_SP)
#define PP_ARCH_SIGFRAME_FP PP_ARCH_UC_GREG(PP_X86_64_GREG_FP)
#define PP_ARCH_SIGFRAME_LR 0 /* none */

/* perf_event's register numbers (asm/perf_regs.h): bp 6, sp 7, ip 8; a
 * sample holds them in that order. */
#define PP_ARCH_PERF_REGS ((1ull << 6) | (1ull << 7) | (1ull << 8))
#define PP_ARCH_PERF_NREGS 3

/* The rule: kind in bits 0-2; bits 3-10 where rbp was saved (at CFA - 8 *
 * k; 0: rbp unchanged), for PLT the low-nibble threshold; bits 11-31 the
 * CFA offset. The return address is always at CFA - 8: not stored. */
#define PP_ARCH_RULE(kind, fp, ra, off)                                        \
	((uint32_t)(kind) | ((uint32_t)(fp) << 3) | ((uint32_t)(off) << 11))
#define PP_ARCH_RULE_FP(r) (((r) >> 3) & 0xffu)
#define PP_ARCH_RULE_RA(r) ((void)(r), 1u)
#define PP_ARCH_RULE_OFF(r) ((r) >> 11)
#define PP_ARCH_RULE_MAX_FP 255u
#define PP_ARCH_RULE_MAX_RA 1u
#define PP_ARCH_RULE_MAX_OFF ((1u << 21) - 1)

/* call rel32 is 5 bytes, an indirect call up to 7 (x86_64.c). */
#define PP_ARCH_CALL_BYTES 7

static inline void pp_arch_regs_of_ucontext(const void *ucontext,
                                            struct pp_arch_regs *r)
{
	const ucontext_t *uc = ucontext;
	r->pc = (uintptr_t)uc->uc_mcontext.gregs[PP_X86_64_GREG_PC];
	r->sp = (uintptr_t)uc->uc_mcontext.gregs[PP_X86_64_GREG_SP];
	r->fp = (uintptr_t)uc->uc_mcontext.gregs[PP_X86_64_GREG_FP];
	r->lr = 0;
}

static inline void pp_arch_regs_of_perf(const uint64_t *v,
                                        struct pp_arch_regs *r)
{
	r->fp = (uintptr_t)v[0];
	r->sp = (uintptr_t)v[1];
	r->pc = (uintptr_t)v[2];
	r->lr = 0;
}

/* A lazy-binding PLT entry (x86_64.c): until the entry's jump to the
 * resolver pushed two more words, the CFA is rsp + 8; after, rsp + 16. */
static inline uintptr_t pp_arch_plt_cfa(uint32_t rule, uintptr_t pc,
                                        uintptr_t sp)
{
	return sp + PP_ARCH_RULE_OFF(rule) +
	       ((pc & 15) >= PP_ARCH_RULE_FP(rule) ? 8 : 0);
}

static inline uintptr_t pp_arch_strip_ra(uintptr_t ra)
{
	return ra;
}

/* A spin-wait's pause between two looks at a lock word. */
static inline void pp_arch_spin_pause(void)
{
	__builtin_ia32_pause();
}

/* syscall is 0f 05: the top two bytes of the little-endian word. */
static inline int pp_arch_after_syscall(uint64_t word_before_pc)
{
	return (word_before_pc >> 48) == 0x050f;
}

static inline __attribute__((always_inline)) void
pp_arch_here(struct pp_arch_regs *r)
{
	uintptr_t pc, sp, fp;
	__asm__ volatile("lea 0(%%rip), %0\n\t"
	                 "mov %%rsp, %1\n\t"
	                 "mov %%rbp, %2"
	                 : "=r"(pc), "=r"(sp), "=r"(fp));
	r->pc = pc;
	r->sp = sp;
	r->fp = fp;
	r->lr = 0;
}

/* Call fn(arg) with rsp = top (16-byte aligned); rbx keeps the old rsp.
 * The callee follows the ABI, so every caller-saved register is
 * clobbered. */
static inline void pp_arch_call_on_stack(void (*fn)(void *), void *arg,
                                         void *top)
{
	__asm__ volatile("mov %%rsp, %%rbx\n\t"
	                 "mov %2, %%rsp\n\t"
	                 "call *%1\n\t"
	                 "mov %%rbx, %%rsp\n\t"
	                 : "+D"(arg)
	                 : "r"(fn), "r"(top)
	                 : "rbx", "rax", "rcx", "rdx", "rsi", "r8", "r9", "r10",
	                   "r11", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4",
	                   "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
	                   "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",
	                   "memory", "cc");
}

#endif

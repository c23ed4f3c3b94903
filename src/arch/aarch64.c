/*
 * Context: signal.
 *
 * AArch64's architecture layer, out of line (arch/arch.h says what each
 * hook must do; the inline ones are in arch/aarch64.h): the compact rule
 * of a row of CFI, the vDSO's signal trampoline, and the call
 * instructions the walks from outside decode. Pure functions: memory is
 * read only through the checked copy the caller passes.
 */
#if defined(__aarch64__) || defined(PP_ARCH_TABLES_AARCH64)
#define _GNU_SOURCE 1
#include "arch/arch.h"

#include <string.h>
#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

#include "arch/rules.h"

/* The CFA is sp or x29 plus an offset (0 in a leaf that never moves sp);
 * x29 and x30 are each unchanged or saved at a multiple of 8 below the
 * CFA. x30 unchanged means the return address is still in the link
 * register: the walk takes it from there in the first frame (or one a
 * signal frame restored) and stops elsewhere. */
uint32_t pp_arch_cfi_rule(const struct pp_cfi_state *s)
{
	uint32_t unsupported = PP_ARCH_RULE(PP_FRAME_UNSUPPORTED, 0, 0, 0);
	if (s->sp != PP_CFI_SAME || s->cfa_kind != PP_CFI_CFA_REG ||
	    s->cfa_off < 0 || s->cfa_off > PP_ARCH_RULE_MAX_OFF ||
	    (s->cfa_reg != PP_ARCH_DW_SP && s->cfa_reg != PP_ARCH_DW_FP))
		return unsupported;
	unsigned ra = 0, fp = 0;
	if (s->ra == PP_CFI_OFFSET) {
		if (s->ra_off >= 0 || s->ra_off % 8 ||
		    -s->ra_off / 8 > PP_ARCH_RULE_MAX_RA)
			return unsupported;
		ra = (unsigned)(-s->ra_off / 8);
		if (s->cfa_off < 8 * (int64_t)ra)
			return unsupported; /* below the callee's sp */
	} else if (s->ra != PP_CFI_SAME) {
		return unsupported;
	}
	if (s->fp == PP_CFI_OFFSET) {
		if (s->fp_off >= 0 || s->fp_off % 8 ||
		    -s->fp_off / 8 > PP_ARCH_RULE_MAX_FP)
			return unsupported;
		fp = (unsigned)(-s->fp_off / 8);
	} else if (s->fp != PP_CFI_SAME) {
		return unsupported;
	}
	return PP_ARCH_RULE(s->cfa_reg == PP_ARCH_DW_SP ? PP_FRAME_CFA_SP
	                                                : PP_FRAME_CFA_FP,
	                    fp, ra, s->cfa_off);
}

/* No CFA expression is needed: the PLT stubs have no CFI at all. */
int pp_arch_cfa_expression(const unsigned char *e, size_t len,
                           struct pp_cfi_state *s)
{
	(void)e;
	(void)len;
	(void)s;
	return 0;
}

enum {
	A64_NOP = 0xd503201fu,
	A64_BTI_C = 0xd503245fu,
	A64_MOV_X8_139 = 0xd2801168u, /* movz x8, #__NR_rt_sigreturn */
	A64_SVC_0 = 0xd4000001u,
};

/* The vDSO's __kernel_rt_sigreturn (mov x8, #139; svc #0) has no CFI of
 * its own (the kernel's vdso/sigreturn.S: unwinders recognise it by its
 * code), and a handler's x30 points at it: its rows are a signal frame,
 * with the nop before it (a return address is looked up at ra - 1). Only
 * the vDSO is searched, found by the auxiliary vector: glibc on AArch64
 * has no restorer of its own. */
int pp_arch_cfi_trampoline(uintptr_t lo, uintptr_t hi, pp_arch_copy_fn copy,
                           uintptr_t *at, size_t *len)
{
#if defined(__aarch64__)
	uintptr_t vdso = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
	if (!vdso || vdso < lo || vdso >= hi)
		return 0;
	if (hi - lo > (64u << 10))
		hi = lo + (64u << 10); /* a vDSO is a few pages */
	uint32_t w[1025];
	uint32_t prev = 0;
	for (uintptr_t a = lo & ~(uintptr_t)3; a + 8 <= hi; a += 4096) {
		size_t n = hi - a < sizeof w ? (size_t)(hi - a) : sizeof w;
		n = copy(a, w, n) / 4;
		for (size_t i = 0; i + 1 < n; i++) {
			if (w[i] != A64_MOV_X8_139 || w[i + 1] != A64_SVC_0)
				continue;
			uintptr_t start = a + 4 * i;
			int nop = i ? w[i - 1] == A64_NOP : prev == A64_NOP;
			*at = nop ? start - 4 : start;
			*len = (size_t)(start + 8 - *at);
			return 1;
		}
		if (n == 0)
			return 0;
		prev = w[n - 1 < 1024 ? n - 1 : 1023];
	}
	return 0;
#else
	(void)lo;
	(void)hi;
	(void)copy;
	(void)at;
	(void)len;
	return 0;
#endif
}

/* Does instruction w move sp, store x30 or call? What a function that
 * sets up a frame must do; a leaf the compiler left frameless does none. */
static int frame_work(uint32_t w)
{
	/* add/sub (immediate, 64-bit, flags not set) with sp as destination:
	 * a frame's allocation (and mov sp, xN, which is add sp, xN, #0). */
	if ((w & 0xbf000000u) == 0x91000000u && (w & 31u) == 31u)
		return 1;
	/* add/sub (extended register, 64-bit) to sp. */
	if ((w & 0xbfe00000u) == 0x8b200000u && (w & 31u) == 31u)
		return 1;
	/* stp of x30 (64-bit: no-allocate, post-index, offset, pre-index). */
	if ((w & 0xfe400000u) == 0xa8000000u &&
	    ((w & 31u) == 30u || ((w >> 10) & 31u) == 30u))
		return 1;
	/* str x30 (unsigned offset; pre- and post-index). */
	if (((w & 0xffc00000u) == 0xf9000000u ||
	     (w & 0xffe00400u) == 0xf8000400u) &&
	    (w & 31u) == 30u)
		return 1;
	/* bl; blr and its authenticated forms. */
	if ((w & 0xfc000000u) == 0x94000000u ||
	    (w & 0xfffffc1fu) == 0xd63f0000u ||
	    (w & 0xfefff800u) == 0xd63f0800u)
		return 1;
	return 0;
}

/* The vDSO without CFI (arch.h): its functions are frameless leaves when
 * no instruction in it does frame work; the scan reads the image's code as
 * the trampoline's search does (a few pages). */
uint32_t pp_arch_bare_rule(uintptr_t lo, uintptr_t hi, pp_arch_copy_fn copy)
{
	uint32_t w[1024];
	if (hi - lo > (64u << 10))
		return 0; /* not a vDSO-sized image: no claim about it */
	for (uintptr_t a = lo & ~(uintptr_t)3; a + 4 <= hi; a += sizeof w) {
		size_t want = hi - a < sizeof w ? (size_t)(hi - a) : sizeof w;
		size_t n = copy(a, w, want) / 4;
		if (n == 0)
			return 0;
		for (size_t i = 0; i < n; i++)
			if (frame_work(w[i]))
				return 0;
		if (n * 4 < want)
			return 0;
	}
	return PP_ARCH_RULE(PP_FRAME_CFA_SP, 0, 0, 0);
}

/* bl imm26; blr xN; blraa, blrab, blraaz, blrabz (pointer-authenticated
 * calls through a register). */
int pp_arch_after_call(const unsigned char b[PP_ARCH_CALL_BYTES])
{
	uint32_t w;
	memcpy(&w, b, 4);
	return (w & 0xfc000000u) == 0x94000000u ||
	       (w & 0xfffffc1fu) == 0xd63f0000u ||
	       (w & 0xfefff800u) == 0xd63f0800u;
}

/* bl's target, and through a PLT stub ([bti c] adrp x16, page; ldr x17,
 * [x16, #off]; add; br x17) the function its GOT slot holds. Through a
 * register it cannot be told. */
uintptr_t pp_arch_call_target(uintptr_t ra, pp_arch_copy_fn copy)
{
	uint32_t w, s[3];
	if (ra < 4 || copy(ra - 4, &w, 4) != 4 ||
	    (w & 0xfc000000u) != 0x94000000u)
		return 0;
	int64_t imm = (int64_t)((uint64_t)(w & 0x03ffffffu) << 38) >> 36;
	uintptr_t target = ra - 4 + (uintptr_t)imm;
	if (copy(target, s, sizeof s) != sizeof s)
		return target;
	int i = s[0] == A64_BTI_C;
	uint32_t adrp = s[i], ldr = s[i + 1];
	if ((adrp & 0x9f00001fu) != 0x90000010u || /* adrp x16 */
	    (ldr & 0xffc003ffu) != 0xf9400211u)    /* ldr x17, [x16, #o] */
		return target;
	uint64_t lo2 = (adrp >> 29) & 3, hi19 = (adrp >> 5) & 0x7ffff;
	int64_t page = (int64_t)(((hi19 << 2) | lo2) << 43) >> 31;
	uintptr_t stub = target + 4 * (uintptr_t)i;
	uintptr_t slot = (stub & ~(uintptr_t)0xfff) + (uintptr_t)page +
	                 ((ldr >> 10) & 0xfffu) * 8;
	uintptr_t fn;
	return copy(slot, &fn, 8) == 8 ? fn : target;
}

#endif

/*
 * Context: signal.
 *
 * x86_64's architecture layer, out of line (arch/arch.h says what each hook
 * must do; the inline ones are in arch/x86_64.h): the compact rule of a row
 * of CFI, the PLT's CFA expression, and the call instructions the walks
 * from outside decode. Pure functions: memory is read only through the
 * checked copy the caller passes.
 */
/* Every port's file is built; one compiles. */
#if defined(__x86_64__) && !defined(PP_ARCH_TABLES_AARCH64)
#define _GNU_SOURCE 1
#include "arch/arch.h"

#include <string.h>

#include "arch/rules.h"

uint32_t pp_arch_cfi_rule(const struct pp_cfi_state *s)
{
	if (s->ra != PP_CFI_OFFSET || s->ra_off != -8 || s->sp != PP_CFI_SAME)
		return PP_ARCH_RULE(PP_FRAME_UNSUPPORTED, 0, 0, 0);
	if (s->cfa_kind == PP_CFI_CFA_PLT)
		return PP_ARCH_RULE(PP_FRAME_PLT, s->plt_k, 1, s->cfa_off);
	if (s->cfa_kind != PP_CFI_CFA_REG || s->cfa_off < 8 ||
	    s->cfa_off > PP_ARCH_RULE_MAX_OFF ||
	    (s->cfa_reg != PP_ARCH_DW_SP && s->cfa_reg != PP_ARCH_DW_FP))
		return PP_ARCH_RULE(PP_FRAME_UNSUPPORTED, 0, 0, 0);
	unsigned k = 0;
	if (s->fp == PP_CFI_OFFSET) {
		if (s->fp_off >= 0 || s->fp_off % 8 ||
		    -s->fp_off / 8 > PP_ARCH_RULE_MAX_FP)
			return PP_ARCH_RULE(PP_FRAME_UNSUPPORTED, 0, 0, 0);
		k = (unsigned)(-s->fp_off / 8);
	} else if (s->fp != PP_CFI_SAME) {
		return PP_ARCH_RULE(PP_FRAME_UNSUPPORTED, 0, 0, 0);
	}
	return PP_ARCH_RULE(s->cfa_reg == PP_ARCH_DW_SP ? PP_FRAME_CFA_SP
	                                                : PP_FRAME_CFA_FP,
	                    k, 1, s->cfa_off);
}

/* glibc's __restore_rt has CFI with the 'S' augmentation: nothing to
 * find. */
int pp_arch_cfi_trampoline(uintptr_t lo, uintptr_t hi, pp_arch_copy_fn copy,
                           uintptr_t *at, size_t *len)
{
	(void)lo;
	(void)hi;
	(void)copy;
	(void)at;
	(void)len;
	return 0;
}

/* The x86_64 vDSO carries CFI: no image without it is described. */
uint32_t pp_arch_bare_rule(uintptr_t lo, uintptr_t hi, pp_arch_copy_fn copy)
{
	(void)lo;
	(void)hi;
	(void)copy;
	return 0;
}

/* The PLT's CFA expression, as GNU ld and lld write it for .plt:
 * DW_OP_breg7 (rsp) N; DW_OP_breg16 (rip) 0; DW_OP_lit15; DW_OP_and;
 * DW_OP_litK; DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus: rsp + N, plus 8
 * from the entry's K-th byte on (pp_arch_plt_cfa). */
/* A sleb128 at e[*i] (len bytes in all); 0, or -1 past the end. */
static int sleb(const unsigned char *e, size_t len, size_t *i, int64_t *out)
{
	uint64_t v = 0;
	unsigned shift = 0;
	unsigned char b;
	do {
		if (*i == len)
			return -1;
		b = e[(*i)++];
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	if (shift < 64 && (b & 0x40))
		v |= ~(uint64_t)0 << shift;
	*out = (int64_t)v;
	return 0;
}

int pp_arch_cfa_expression(const unsigned char *e, size_t len,
                           struct pp_cfi_state *s)
{
	static const unsigned char tail[] = {0x2a, 0x33, 0x24, 0x22};
	size_t i = 0;
	int64_t n, zero;
	if (len < 1 || e[i++] != 0x77 || sleb(e, len, &i, &n) || i == len ||
	    e[i++] != 0x80 || sleb(e, len, &i, &zero) || zero != 0 ||
	    len - i != 3 + sizeof tail || e[i] != 0x3f || e[i + 1] != 0x1a)
		return 0;
	unsigned lit = e[i + 2];
	if (lit < 0x30 || lit > 0x4f || memcmp(e + i + 3, tail, sizeof tail))
		return 0;
	s->cfa_kind = PP_CFI_CFA_PLT;
	s->cfa_off = n;
	s->plt_k = lit - 0x30;
	return 1;
}

/* call rel32, or call with a ModRM reg field of 2 in 2, 3, 6 or 7 bytes:
 * through a register, or memory with a displacement or an index. */
int pp_arch_after_call(const unsigned char b[PP_ARCH_CALL_BYTES])
{
	if (b[2] == 0xe8)
		return 1;
	for (int at = 0; at < 6; at++)
		if (b[at] == 0xff && ((b[at + 1] >> 3) & 7) == 2 &&
		    (at == 0 || at == 1 || at == 4 || at == 5))
			return 1;
	return 0;
}

/* Through a register it cannot be told. */
uintptr_t pp_arch_call_target(uintptr_t ra, pp_arch_copy_fn copy_remote)
{
	unsigned char b[7];
	uintptr_t target = 0;
	int32_t rel;
	if (ra < 7 || copy_remote(ra - 7, b, 7) != 7)
		return 0;
	if (b[2] == 0xe8) { /* call rel32 */
		memcpy(&rel, b + 3, 4);
		target = ra + (uintptr_t)(intptr_t)rel;
	} else if (b[1] == 0xff && b[2] == 0x15) { /* call *rel32(%rip) */
		memcpy(&rel, b + 3, 4);
		uintptr_t slot = ra + (uintptr_t)(intptr_t)rel;
		return copy_remote(slot, &target, 8) == 8 ? target : 0;
	} else {
		return 0;
	}
	/* A PLT entry: [endbr64] [bnd] jmp *rel32(%rip) to its GOT slot. */
	unsigned char s[12];
	if (copy_remote(target, s, sizeof s) != sizeof s)
		return target;
	for (int i = 0; i + 6 <= (int)sizeof s && i <= 5; i++) {
		if (s[i] == 0xff && s[i + 1] == 0x25) {
			memcpy(&rel, s + i + 2, 4);
			uintptr_t slot = target + (uintptr_t)i + 6 +
			                 (uintptr_t)(intptr_t)rel;
			uintptr_t fn;
			return copy_remote(slot, &fn, 8) == 8 ? fn : target;
		}
	}
	return target;
}

#endif

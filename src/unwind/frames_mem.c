/*
 * Context: agent.
 *
 * Walks of another thread's stack from outside (frames_mem.h): the thread
 * is not interrupted (blocked in a system call, or a perf_event sample
 * copied its stack), so its stack is read through a copy, with the same
 * frame-by-frame walk as the handler's (frames_step.h); where its frame
 * pointer is not known, a heuristic finds the frame record.
 */
#define _GNU_SOURCE 1
#include "unwind/frames_mem.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "arch/arch.h"
#include "unwind/frames.h"
#include "unwind/frames_step.h"
#include "unwind/registry.h"
#include "unwind/unwind.h"
#include "util/seccomp.h"

static size_t copy_remote(uintptr_t from, void *to, size_t n)
{
	struct iovec local = {to, n};
	struct iovec remote = {(void *)from, n};
	if (pp_seccomp_vm_readv_forbidden())
		return 0;
	ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
	return got > 0 ? (size_t)got : 0;
}

int pp_frames_mem_load(struct pp_frames_mem *m, uintptr_t addr, uintptr_t *out)
{
	if (addr > UINTPTR_MAX - 8)
		return -1;
	if (addr >= m->base && addr + 8 <= m->base + m->len) {
		memcpy(out, m->buf + (addr - m->base), 8);
		return 0;
	}
	if (m->live && addr >= m->base && addr + 8 <= m->base + m->cap) {
		/* More of the stack, 16 KiB at a time: a deep walk reads
		 * it once, not a word per frame. */
		size_t want = addr + 8 - (m->base + m->len);
		want = (want + 16383) & ~(size_t)16383;
		if (want > m->cap - m->len)
			want = m->cap - m->len;
		m->len += copy_remote(m->base + m->len, m->buf + m->len, want);
		if (addr + 8 <= m->base + m->len) {
			memcpy(out, m->buf + (addr - m->base), 8);
			return 0;
		}
		return -1;
	}
	if (!m->live || !m->reads)
		return -1;
	m->reads--;
	return copy_remote(addr, out, 8) == 8 ? 0 : -1;
}

/* Is ra a return address: does a call instruction end just before it?
 * A function pointer or a stale code address left in a frame seldom is. */
static int after_call(uintptr_t ra)
{
	unsigned char b[PP_ARCH_CALL_BYTES];
	if (ra < sizeof b ||
	    copy_remote(ra - sizeof b, b, sizeof b) != sizeof b)
		return 0;
	return pp_arch_after_call(b);
}

/* Could a frame record ([a] the caller's frame pointer, [a +
 * PP_ARCH_FRAME_RECORD_RA] its return address) be at a? The return address must
 * follow a call in code with unwind rows, and with `check_caller`, the caller's
 * own return address found by its row must too (two frames agreeing are seldom
 * an accident). */
/* Can a frame return to ra (in t's image)? After a call, or to a signal
 * trampoline: the kernel pushes its address as a handler's return address
 * and no call precedes it. */
static int returns_to(const struct pp_frame_table *t, uintptr_t ra)
{
	return after_call(ra) ||
	       PP_FRAME_KIND(pp_frames_rule(t, ra - 1)) == PP_FRAME_SIGNAL;
}

static int frame_record_at(void *src, uintptr_t a, int check_caller)
{
	uintptr_t saved, ra, ra2;
	if (pp_frames_mem_load(src, a, &saved) ||
	    pp_frames_mem_load(src, a + PP_ARCH_FRAME_RECORD_RA, &ra))
		return -1;
	ra = pp_arch_strip_ra(ra);
	if (saved && (saved <= a + 8 || saved - a > (8u << 20)))
		return 0;
	int covered;
	const struct pp_frame_table *t = pp_registry_table(ra - 1, &covered);
	if (!t || !returns_to(t, ra))
		return 0;
	uint32_t rule = pp_frames_rule(t, ra - 1);
	uintptr_t sp = a + PP_ARCH_FRAME_RECORD_SIZE, cfa;
	switch (PP_FRAME_KIND(rule)) {
	case PP_FRAME_OUTERMOST: return 1;
	case PP_FRAME_CFA_SP: cfa = sp + PP_FRAME_OFF(rule); break;
	case PP_FRAME_CFA_FP:
		if (!saved)
			return 0;
		cfa = saved + PP_FRAME_OFF(rule);
		break;
	default: return check_caller ? 0 : 1;
	}
	if (!check_caller)
		return 1;
	if (PP_FRAME_RA(rule) == 0)
		return 0; /* in a link register: nothing to check it by */
	if (cfa <= sp ||
	    pp_frames_mem_load(src, cfa - 8 * PP_FRAME_RA(rule), &ra2))
		return 0;
	ra2 = pp_arch_strip_ra(ra2);
	if (!ra2)
		return 1;
	t = pp_registry_table(ra2 - 1, &covered);
	return t && returns_to(t, ra2);
}

/* Where the call just before return address ra went (pp_arch_call_target;
 * code read with checked copies). */
static uintptr_t call_target(uintptr_t ra)
{
	return pp_arch_call_target(ra, copy_remote);
}

#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 35)
/* The start of the named function holding pc, or 0: the function symbol
 * of its image's dynamic symbol table that holds pc (what dladdr answers).
 * Agent context. dladdr reads the table where the image is mapped, which
 * for a file truncated after it was loaded (a plugin cp'd over) raises
 * SIGBUS: here the image is found with _dl_find_object (the loader's own
 * data, not the image's), and its dynamic section and symbol table are
 * copied with checked reads first. */
static uintptr_t function_of(uintptr_t pc)
{
	struct dl_find_object fo;
	if (!pc || _dl_find_object((void *)pc, &fo) != 0 || !fo.dlfo_link_map)
		return 0;
	const struct link_map *lm = fo.dlfo_link_map;
	uintptr_t base = lm->l_addr, symtab = 0, strtab = 0;
	size_t syment = sizeof(ElfW(Sym));
	ElfW(Dyn) d;
	for (uintptr_t at = (uintptr_t)lm->l_ld;; at += sizeof d) {
		if (!lm->l_ld || copy_remote(at, &d, sizeof d) != sizeof d)
			return 0;
		if (d.d_tag == DT_NULL)
			break;
		if (d.d_tag == DT_SYMTAB)
			symtab = d.d_un.d_ptr;
		else if (d.d_tag == DT_STRTAB)
			strtab = d.d_un.d_ptr;
		else if (d.d_tag == DT_SYMENT && d.d_un.d_val)
			syment = d.d_un.d_val;
	}
	/* The loader relocates these in place where .dynamic is writable;
	 * where it is not (the vDSO) they are still image-relative. */
	if (symtab && symtab < base)
		symtab += base;
	if (strtab && strtab < base)
		strtab += base;
	/* .dynstr follows .dynsym: what ld writes, and the only count of
	 * the symbols short of walking the hash table. */
	if (!symtab || strtab <= symtab || syment != sizeof(ElfW(Sym)) ||
	    strtab - symtab > (8u << 20))
		return 0;
	size_t n = (strtab - symtab) / syment;
	ElfW(Sym) *syms = malloc(n * sizeof *syms);
	if (!syms)
		return 0;
	uintptr_t best = 0;
	if (copy_remote(symtab, syms, n * sizeof *syms) == n * sizeof *syms) {
		for (size_t i = 0; i < n; i++) {
			const ElfW(Sym) *sym = &syms[i];
			if (ELF64_ST_TYPE(sym->st_info) != STT_FUNC &&
			    ELF64_ST_TYPE(sym->st_info) != STT_GNU_IFUNC)
				continue;
			if (sym->st_shndx == SHN_UNDEF || !sym->st_value)
				continue;
			/* As glibc's dladdr: a sized symbol holds its range,
			 * an unsized one only its own address. */
			uintptr_t lo = base + sym->st_value;
			if (pc >= lo && lo > best &&
			    (pc < lo + sym->st_size || pc == lo))
				best = lo;
		}
	}
	free(syms);
	return best;
}
#else
/* The start of the named function holding pc, or 0 (dladdr: the loader's
 * symbol tables; agent context). */
static uintptr_t function_of(uintptr_t pc)
{
	Dl_info info;
	if (!pc || !dladdr((void *)pc, &info) || !info.dli_saddr)
		return 0;
	return (uintptr_t)info.dli_saddr;
}
#endif

/* The frame record of a frame whose rule is "CFA = fp +
 * PP_ARCH_FRAME_RECORD_SIZE, fp saved at the record" (the standard
 * prologue), at code address `at`, when fp is not known: a heuristic, used
 * only for a thread read from outside before any frame restored fp. Plausible
 * records in the 16 KiB above sp are tried. Stale ones, left in the frame's
 * locals by calls that returned long ago, form chains too (they were real
 * once), so a record counts only when the call before its return address went
 * to the function at `at`; where that cannot be told (a call through a
 * register), the record whose walk reaches the outermost frame with the most
 * frames is taken. */
#define FIND_FP_SPAN 16384 /* an ASan interceptor's frame is 2 KiB */
#define FIND_FP_CANDIDATES 16
#define FIND_FP_DEPTH 256

static int mem_load(void *src, uintptr_t addr, uintptr_t *out);
static int mem_load_code(void *src, uintptr_t addr, uintptr_t *out);
static void mem_other_stack(void *src, uintptr_t sp);

static int mem_find_fp(void *src, uintptr_t at, uintptr_t sp, uintptr_t *fp)
{
	uintptr_t pcs[FIND_FP_DEPTH], best = 0;
	int best_depth = -1, tried = 0;
	uintptr_t here = function_of(at);
	for (uintptr_t a = (sp + 7) & ~(uintptr_t)7;
	     a < sp + FIND_FP_SPAN && tried < FIND_FP_CANDIDATES; a += 8) {
		int r = frame_record_at(src, a, 1);
		if (r < 0)
			break;
		if (!r)
			continue;
		uintptr_t saved, ra;
		pp_frames_mem_load(src, a, &saved);
		pp_frames_mem_load(src, a + PP_ARCH_FRAME_RECORD_RA, &ra);
		ra = pp_arch_strip_ra(ra);
		uintptr_t called = here ? function_of(call_target(ra)) : 0;
		if (called && called == here) {
			*fp = a; /* its caller called this very function */
			return 0;
		}
		if (called)
			continue; /* a call to another function: stale */
		tried++;
		int why;
		struct pp_arch_regs from = {ra, a + PP_ARCH_FRAME_RECORD_SIZE,
		                            saved, 0};
		int n = pp_frames_walk_core(&from, 1, pcs, FIND_FP_DEPTH, &why,
		                            src, mem_load, mem_load_code,
		                            mem_other_stack, NULL);
		if (why == PP_UNWIND_OK && n > best_depth) {
			best_depth = n;
			best = a;
		}
	}
	if (best_depth < 0)
		return -1;
	*fp = best;
	return 0;
}

static int mem_load(void *src, uintptr_t addr, uintptr_t *out)
{
	return pp_frames_mem_load(src, addr, out);
}

/* A word of code (copied: the image may be unmapped meanwhile). */
static int mem_load_code(void *src, uintptr_t addr, uintptr_t *out)
{
	(void)src;
	return copy_remote(addr, out, 8) == 8 ? 0 : -1;
}

static void mem_other_stack(void *src, uintptr_t sp)
{
	(void)src;
	(void)sp; /* every address is read through the same source */
}

int pp_frames_walk_mem(struct pp_frames_mem *m, const struct pp_arch_regs *r,
                       int regs_known, uintptr_t *pcs, unsigned max, int *why)
{
	/* Inside the registry's reader count, as a handler's capture is: a
	 * dlclose on a host thread refreshes the registry and frees the
	 * range sets and tables it replaced once no reader is inside (TSan
	 * saw a thread dump's walk read a set that dlclose freed). */
	pp_registry_enter();
	int n =
	    pp_frames_walk_core(r, regs_known, pcs, max, why, m, mem_load,
	                        mem_load_code, mem_other_stack, mem_find_fp);
	pp_registry_leave();
	return n;
}

/*
 * Compact frame tables (frames.h). pp_frames_build is AGENT CONTEXT;
 * pp_frames_rule, pp_frames_walk and pp_frames_walk_fp are HOT/UNSAFE
 * CONTEXT: they run in the SIGPROF handler inside arbitrary code, so no
 * malloc, no lock, and no load from memory not proven readable.
 *
 * Proving memory readable without a system call per frame: the walk reads
 * only the interrupted thread's stack (return addresses, saved rbp, a
 * signal frame's ucontext). Each thread remembers in TLS a range of its
 * stack already checked ([lo, hi), page-aligned): a load inside it is a
 * plain load; a load above it first checks the next pages with one
 * process_vm_readv (which fails on an unmapped or PROT_NONE page instead of
 * faulting) and widens the range. A thread's first samples pay a system
 * call or two, later ones none. The range is trusted only while the interrupted
 * sp lies in it, i.e. while the thread runs on that stack; a thread that
 * switches stacks (coroutines) starts a new range.
 */
#define _GNU_SOURCE 1
#include "unwind/frames.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

#include "unwind/registry.h"
#include "unwind/unwind.h"

#define PAGE 4096u

/* The walk reads slots of other functions' frames (return addresses, saved
 * rbp): under AddressSanitizer that is not an error of ours to report. */
#define PP_NO_ASAN __attribute__((no_sanitize("address", "undefined")))

/* ---------------------------------------------------------------------
 * Checked reads of the interrupted stack (hot context).
 */

struct stack_range {
	uintptr_t lo, hi;
};

static __thread struct stack_range checked
    __attribute__((tls_model("initial-exec")));
static _Atomic uint64_t stack_checks;

uint64_t pp_frames_stack_checks(void)
{
	return atomic_load_explicit(&stack_checks, memory_order_relaxed);
}

/* How many pages from `from` on (at most n) can be read: one byte of each
 * is copied by the kernel, which stops at the first it cannot read. */
static size_t readable_pages(uintptr_t from, size_t n)
{
	struct iovec remote[16];
	unsigned char sink[16];
	struct iovec local = {sink, 0};

	if (n > 16)
		n = 16;
	for (size_t i = 0; i < n; i++)
		remote[i] = (struct iovec){(void *)(from + i * PAGE), 1};
	local.iov_len = n;
	atomic_fetch_add_explicit(&stack_checks, 1, memory_order_relaxed);
	ssize_t got = process_vm_readv(getpid(), &local, 1, remote, n, 0);
	return got > 0 ? (size_t)got : 0;
}

/* The walk's view: the checked range it may load from, and how many pages
 * it may still check (a corrupt frame pointing far away stops the walk
 * rather than cost hundreds of system calls). */
struct reader {
	struct stack_range *r;
	unsigned budget;
	/* May this walk check pages (a system call, and more stack: the
	 * handler does that on a stack of its own)? If not, wanted_check says
	 * it stopped for want of one. */
	int may_check, wanted_check;
	struct stack_range other; /* a stack met through a signal frame */
};

static int may_check(struct reader *rd)
{
	if (!rd->may_check)
		rd->wanted_check = 1;
	return rd->may_check;
}

/* Make r cover the page of sp (start a new range when sp left it). */
static void reader_start(struct reader *rd, struct stack_range *r, uintptr_t sp)
{
	uintptr_t page = sp & ~(uintptr_t)(PAGE - 1);
	rd->r = r;
	rd->budget = 256; /* pages: 1 MiB of stack per capture */
	if (sp >= r->lo && sp < r->hi)
		return;
	if (!may_check(rd)) {
		rd->budget = 0; /* every load fails: the walk stops */
		return;
	}
	if (sp < r->lo && r->lo - page <= 64u * PAGE && r->lo < r->hi) {
		/* The same stack, grown (the main thread's grows on demand). */
		uintptr_t at = page;
		while (at < r->lo && rd->budget) {
			size_t want = (r->lo - at) / PAGE;
			size_t ok = readable_pages(at, want);
			rd->budget -= want < 16 ? (unsigned)want : 16;
			if (ok < (want < 16 ? want : 16))
				break;
			at += ok * PAGE;
		}
		if (at >= r->lo) {
			r->lo = page;
			return;
		}
	}
	r->lo = r->hi = page;
}

PP_NO_ASAN static int load(struct reader *rd, uintptr_t addr, uintptr_t *out)
{
	struct stack_range *r = rd->r;
	if (addr < r->lo || addr > UINTPTR_MAX - 8)
		return -1;
	while (addr + 8 > r->hi) {
		if (!rd->budget || !may_check(rd))
			return -1;
		size_t want = (addr + 8 - r->hi + PAGE - 1) / PAGE;
		if (want > 16)
			want = 16;
		if (want > rd->budget)
			want = rd->budget;
		rd->budget -= (unsigned)want;
		uintptr_t hi = r->hi;
		size_t ok = readable_pages(hi, want);
		/* A walk of the thread's own stack from a malloc or lock
		 * wrapper may be interrupted here by the handler, whose walk
		 * moves the same range: grow it only while it still ends
		 * within what was just checked (else the handler's range
		 * stands, and the loop looks again). */
		uintptr_t seen = hi;
		while (seen >= hi && seen < hi + ok * PAGE && r->lo <= hi &&
		       !__atomic_compare_exchange_n(
		           &r->hi, &seen, hi + ok * PAGE, 0, __ATOMIC_RELAXED,
		           __ATOMIC_RELAXED))
			;
		if (ok < want && addr + 8 > r->hi)
			return -1;
	}
	/* A plain load (alignment is not the walk's to check). */
	*out = *(const uintptr_t *)addr;
	return 0;
}

/* ---------------------------------------------------------------------
 * Reads of another thread's stack (agent context).
 */

static size_t copy_remote(uintptr_t from, void *to, size_t n)
{
	struct iovec local = {to, n};
	struct iovec remote = {(void *)from, n};
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

/* ---------------------------------------------------------------------
 * The walk (hot context).
 */

uint32_t pp_frames_rule(const struct pp_frame_table *t, uintptr_t pc)
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

/* Offsets in a ucontext_t of the registers a signal frame restores. */
#define UC_GREG(i)                                                             \
	(offsetof(ucontext_t, uc_mcontext) + offsetof(mcontext_t, gregs) +     \
	 (size_t)(i) * sizeof(greg_t))

int pp_frames_walk(void *ucontext, uintptr_t *pcs, unsigned max, int *why,
                   int checks)
{
	const ucontext_t *uc = ucontext;
	return pp_frames_walk_regs((uintptr_t)uc->uc_mcontext.gregs[REG_RIP],
	                           (uintptr_t)uc->uc_mcontext.gregs[REG_RSP],
	                           (uintptr_t)uc->uc_mcontext.gregs[REG_RBP],
	                           pcs, max, why, checks);
}

/* The walk itself, over any source of stack words: the SIGPROF handler's
 * checked loads of its own thread's stack (hot), or a copy of another
 * thread's stack (pp_frames_walk_mem, agent context). Inlined into each
 * with constant functions, so the hot walk makes no indirect call.
 *
 * bp_known 0: the walk starts without rbp (a thread read from outside gives
 * only pc and sp). A frame whose CFA is rbp-based before any frame restored
 * rbp asks find_bp for the frame record (saved rbp, return address) above
 * sp, or ends there. */
#define WHY_NO_TABLE PP_UNWIND_NO_TABLE
typedef int (*walk_load_fn)(void *src, uintptr_t addr, uintptr_t *out);
typedef void (*walk_stack_fn)(void *src, uintptr_t sp);
typedef int (*walk_find_bp_fn)(void *src, uintptr_t at, uintptr_t sp,
                               uintptr_t *bp);

static inline __attribute__((always_inline)) int
walk_core(uintptr_t pc, uintptr_t sp, uintptr_t bp, int bp_known,
          uintptr_t *pcs, unsigned max, int *why, void *src, walk_load_fn ld,
          walk_load_fn ld_code, walk_stack_fn other_stack,
          walk_find_bp_fn find_bp)
{
	/* Is pc exact (the interrupted instruction) or a return address? */
	int exact = 1;
	unsigned n = 0;

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
		    pp_registry_table(at, &covered);
		if (!covered) {
			*why = PP_UNWIND_UNKNOWN_CODE;
			return (int)n;
		}
		if (!t) {
			*why = WHY_NO_TABLE;
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
			    (w >> 48) == 0x050f)
				rule = pp_frames_rule(t, pc - 1);
		}
		uintptr_t cfa, ra;
		switch (PP_FRAME_KIND(rule)) {
		case PP_FRAME_OUTERMOST: return (int)n;
		case PP_FRAME_CFA_RSP: cfa = sp + PP_FRAME_OFF(rule); break;
		case PP_FRAME_CFA_RBP:
			if (!bp_known &&
			    (!find_bp || PP_FRAME_OFF(rule) != 16 ||
			     find_bp(src, at, sp, &bp))) {
				*why = PP_UNWIND_FAILED;
				return (int)n;
			}
			cfa = bp + PP_FRAME_OFF(rule);
			break;
		case PP_FRAME_PLT:
			/* Until the entry's jump to the resolver pushed two
			 * more words, the CFA is rsp + 8; after, rsp + 16. */
			cfa = sp + PP_FRAME_OFF(rule) +
			      ((pc & 15) >= PP_FRAME_RBP(rule) ? 8 : 0);
			break;
		case PP_FRAME_SIGNAL: {
			uintptr_t regs[3];
			if (ld(src, sp + UC_GREG(REG_RIP), &regs[0]) ||
			    ld(src, sp + UC_GREG(REG_RSP), &regs[1]) ||
			    ld(src, sp + UC_GREG(REG_RBP), &regs[2])) {
				*why = PP_UNWIND_FAILED;
				return (int)n;
			}
			pc = regs[0];
			sp = regs[1];
			bp = regs[2];
			bp_known = 1;
			exact = 1;
			other_stack(src, sp);
			continue;
		}
		default: /* END, UNSUPPORTED */
			*why = WHY_NO_TABLE;
			return (int)n;
		}
		if (cfa <= sp || ld(src, cfa - 8, &ra)) {
			*why = PP_UNWIND_FAILED;
			return (int)n;
		}
		if (PP_FRAME_RBP(rule) && PP_FRAME_KIND(rule) != PP_FRAME_PLT) {
			if (ld(src, cfa - 8 * PP_FRAME_RBP(rule), &bp)) {
				*why = PP_UNWIND_FAILED;
				return (int)n;
			}
			bp_known = 1;
		}
		sp = cfa;
		pc = ra;
		exact = 0;
	}
	return (int)n;
}

static int hot_load(void *src, uintptr_t addr, uintptr_t *out)
{
	return load(src, addr, out);
}

/* sigaltstack: the interrupted code ran on another stack, checked on its
 * own (not remembered). */
static void hot_other_stack(void *src, uintptr_t sp)
{
	struct reader *rd = src;
	if (sp >= rd->r->lo && sp < rd->r->hi)
		return;
	rd->other.lo = rd->other.hi = 0;
	unsigned budget = rd->budget;
	reader_start(rd, &rd->other, sp);
	rd->budget = budget;
}

int pp_frames_walk_regs(uintptr_t pc, uintptr_t sp, uintptr_t bp,
                        uintptr_t *pcs, unsigned max, int *why, int checks)
{
	struct reader rd;

	rd.may_check = checks;
	rd.wanted_check = 0;
	reader_start(&rd, &checked, sp);
	int n = walk_core(pc, sp, bp, 1, pcs, max, why, &rd, hot_load, NULL,
	                  hot_other_stack, NULL);
	if (*why == WHY_NO_TABLE)
		return -1; /* libunwind does it all again */
	/* A load failed for want of a page check: walk again where the
	 * caller may check. */
	return n >= 0 && *why == PP_UNWIND_FAILED && rd.wanted_check ? -2 : n;
}

/* Is ra a return address: does a call instruction end just before it?
 * (call rel32, or call with a ModRM reg field of 2 in 2, 3, 6 or 7 bytes:
 * through a register, or memory with a displacement or an index.) A
 * function pointer or a stale code address left in a frame seldom is. */
static int after_call(uintptr_t ra)
{
	unsigned char b[7];
	if (ra < 7 || copy_remote(ra - 7, b, 7) != 7)
		return 0;
	if (b[2] == 0xe8)
		return 1;
	for (int at = 0; at < 6; at++)
		if (b[at] == 0xff && ((b[at + 1] >> 3) & 7) == 2 &&
		    (at == 0 || at == 1 || at == 4 || at == 5))
			return 1;
	return 0;
}

/* Could a frame record ([a] the caller's rbp, [a+8] its return address)
 * be at a? The return address must follow a call in code with unwind
 * rows, and with `check_caller`, the caller's own return address found
 * by its row must too (two frames agreeing are seldom an accident). */
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
	    pp_frames_mem_load(src, a + 8, &ra))
		return -1;
	if (saved && (saved <= a + 8 || saved - a > (8u << 20)))
		return 0;
	int covered;
	const struct pp_frame_table *t = pp_registry_table(ra - 1, &covered);
	if (!t || !returns_to(t, ra))
		return 0;
	uint32_t rule = pp_frames_rule(t, ra - 1);
	uintptr_t sp = a + 16, cfa;
	switch (PP_FRAME_KIND(rule)) {
	case PP_FRAME_OUTERMOST: return 1;
	case PP_FRAME_CFA_RSP: cfa = sp + PP_FRAME_OFF(rule); break;
	case PP_FRAME_CFA_RBP:
		if (!saved)
			return 0;
		cfa = saved + PP_FRAME_OFF(rule);
		break;
	default: return check_caller ? 0 : 1;
	}
	if (!check_caller)
		return 1;
	if (cfa <= sp || pp_frames_mem_load(src, cfa - 8, &ra2))
		return 0;
	if (!ra2)
		return 1;
	t = pp_registry_table(ra2 - 1, &covered);
	return t && returns_to(t, ra2);
}

/* Where the call just before return address ra went, through a PLT stub
 * or a GOT slot to the function itself; 0 when it cannot be told (a call
 * through a register). Agent context: reads code with checked copies. */
static uintptr_t call_target(uintptr_t ra)
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

/* The frame record of a frame whose rule is "CFA = rbp + 16, rbp saved at
 * CFA - 16" (the standard prologue), at code address `at`, when rbp is not
 * known: a heuristic, used only for a thread read from outside before any
 * frame restored rbp. Plausible records in the 16 KiB above sp are tried.
 * Stale ones, left in the frame's locals by calls that returned long ago,
 * form chains too (they were real once), so a record counts only when the
 * call before its return address went to the function at `at`; where that
 * cannot be told (a call through a register), the record whose walk
 * reaches the outermost frame with the most frames is taken. */
#define FIND_BP_SPAN 16384 /* an ASan interceptor's frame is 2 KiB */
#define FIND_BP_CANDIDATES 16
#define FIND_BP_DEPTH 256

static int mem_load(void *src, uintptr_t addr, uintptr_t *out);
static int mem_load_code(void *src, uintptr_t addr, uintptr_t *out);
static void mem_other_stack(void *src, uintptr_t sp);

static int mem_find_bp(void *src, uintptr_t at, uintptr_t sp, uintptr_t *bp)
{
	uintptr_t pcs[FIND_BP_DEPTH], best = 0;
	int best_depth = -1, tried = 0;
	uintptr_t here = function_of(at);
	for (uintptr_t a = (sp + 7) & ~(uintptr_t)7;
	     a < sp + FIND_BP_SPAN && tried < FIND_BP_CANDIDATES; a += 8) {
		int r = frame_record_at(src, a, 1);
		if (r < 0)
			break;
		if (!r)
			continue;
		uintptr_t saved, ra;
		pp_frames_mem_load(src, a, &saved);
		pp_frames_mem_load(src, a + 8, &ra);
		uintptr_t called = here ? function_of(call_target(ra)) : 0;
		if (called && called == here) {
			*bp = a; /* its caller called this very function */
			return 0;
		}
		if (called)
			continue; /* a call to another function: stale */
		tried++;
		int why;
		int n = walk_core(ra, a + 16, saved, 1, pcs, FIND_BP_DEPTH,
		                  &why, src, mem_load, mem_load_code,
		                  mem_other_stack, NULL);
		if (why == PP_UNWIND_OK && n > best_depth) {
			best_depth = n;
			best = a;
		}
	}
	if (best_depth < 0)
		return -1;
	*bp = best;
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

int pp_frames_walk_mem(struct pp_frames_mem *m, uintptr_t pc, uintptr_t sp,
                       uintptr_t bp, int bp_known, uintptr_t *pcs, unsigned max,
                       int *why)
{
	/* Inside the registry's reader count, as a handler's capture is: a
	 * dlclose on a host thread refreshes the registry and frees the
	 * range sets and tables it replaced once no reader is inside (TSan
	 * saw a thread dump's walk read a set that dlclose freed). */
	pp_registry_enter();
	int n = walk_core(pc, sp, bp, bp_known, pcs, max, why, m, mem_load,
	                  mem_load_code, mem_other_stack, mem_find_bp);
	pp_registry_leave();
	return n;
}

int pp_frames_walk_fp(void *ucontext, uintptr_t *pcs, unsigned max, int *why,
                      int checks)
{
	const ucontext_t *uc = ucontext;
	uintptr_t fp = (uintptr_t)uc->uc_mcontext.gregs[REG_RBP];
	uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
	unsigned n = 0;
	struct reader rd;

	rd.may_check = checks;
	rd.wanted_check = 0;
	reader_start(&rd, &checked, sp);
	pcs[n++] = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	while (n < max) {
		uintptr_t saved_fp, ra;
		/* A frame pointer chain climbs the stack: each frame above the
		 * last, aligned, and not absurdly far (a corrupt chain stops).
		 */
		if (fp < sp || fp & 7 || fp - sp > (64u << 20) ||
		    load(&rd, fp, &saved_fp) || load(&rd, fp + 8, &ra))
			break;
		if (ra == 0) {
			*why = PP_UNWIND_OK;
			return (int)n;
		}
		pcs[n++] = ra;
		sp = fp + 16;
		fp = saved_fp;
	}
	*why = n == max ? PP_UNWIND_TRUNCATED : PP_UNWIND_FAILED;
	return n < max && rd.wanted_check ? -2 : (int)n;
}

/* ---------------------------------------------------------------------
 * Building a table (agent context).
 */

/* Read n bytes of this process at addr into out; 0 or -1 (unmapped). */
static int copy_in(uintptr_t addr, void *out, size_t n)
{
	struct iovec local = {out, n};
	struct iovec remote = {(void *)addr, n};
	return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) ==
	               (ssize_t)n
	           ? 0
	           : -1;
}

/* A cursor over a copy of image memory: p walks buf, whose first byte was
 * at address `addr` in the image. */
struct cur {
	const unsigned char *p, *end;
	const unsigned char *buf;
	uintptr_t addr;
	int bad;
};

static uintptr_t cur_addr(const struct cur *c)
{
	return c->addr + (uintptr_t)(c->p - c->buf);
}

static int need(struct cur *c, size_t n)
{
	if ((size_t)(c->end - c->p) < n) {
		c->bad = 1;
		c->p = c->end;
		return 0;
	}
	return 1;
}

static uint64_t u8(struct cur *c)
{
	return need(c, 1) ? *c->p++ : 0;
}

static uint64_t fixed(struct cur *c, size_t n)
{
	uint64_t v = 0;
	if (!need(c, n))
		return 0;
	memcpy(&v, c->p, n); /* little-endian */
	c->p += n;
	return v;
}

static uint64_t uleb(struct cur *c)
{
	uint64_t v = 0;
	unsigned shift = 0;
	for (;;) {
		uint64_t b = u8(c);
		if (c->bad)
			return 0;
		if (shift < 64)
			v |= (b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			return v;
	}
}

static int64_t sleb(struct cur *c)
{
	uint64_t v = 0;
	unsigned shift = 0;
	uint64_t b;
	do {
		b = u8(c);
		if (c->bad)
			return 0;
		if (shift < 64)
			v |= (b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	if (shift < 64 && (b & 0x40))
		v |= ~(uint64_t)0 << shift;
	return (int64_t)v;
}

enum {
	PE_omit = 0xff,
	PE_absptr = 0x00,
	PE_uleb128 = 0x01,
	PE_udata2 = 0x02,
	PE_udata4 = 0x03,
	PE_udata8 = 0x04,
	PE_sleb128 = 0x09,
	PE_sdata2 = 0x0a,
	PE_sdata4 = 0x0b,
	PE_sdata8 = 0x0c,
	PE_pcrel = 0x10,
	PE_datarel = 0x30,
	PE_indirect = 0x80,
};

/* A pointer in encoding `enc`. With `with_base` 0 only the value (a pc
 * range is encoded so); pcrel is relative to the field's address. */
static uintptr_t pointer(struct cur *c, unsigned enc, int with_base,
                         uintptr_t datarel)
{
	uintptr_t here = cur_addr(c);
	uint64_t v;
	switch (enc & 0x0f) {
	case PE_absptr:
	case PE_udata8:
	case PE_sdata8: v = fixed(c, 8); break;
	case PE_uleb128: v = uleb(c); break;
	case PE_sleb128: v = (uint64_t)sleb(c); break;
	case PE_udata2: v = fixed(c, 2); break;
	case PE_sdata2: v = (uint64_t)(int64_t)(int16_t)fixed(c, 2); break;
	case PE_udata4: v = fixed(c, 4); break;
	case PE_sdata4: v = (uint64_t)(int64_t)(int32_t)fixed(c, 4); break;
	default: c->bad = 1; return 0;
	}
	if (!with_base)
		return (uintptr_t)v;
	switch (enc & 0x70) {
	case 0: break;
	case PE_pcrel: v += here; break;
	case PE_datarel: v += datarel; break;
	default: c->bad = 1; return 0;
	}
	return (uintptr_t)v;
}

struct cie {
	unsigned fde_enc;
	int64_t data_align;
	uint64_t code_align;
	unsigned ra_reg;
	int signal;
	int aug_z; /* FDEs carry augmentation data (its length first) */
	const unsigned char *insns, *insns_end;
};

static int parse_cie(const unsigned char *at, struct cur *image,
                     struct cie *out)
{
	struct cur c = *image;
	c.p = at;
	uint64_t len = fixed(&c, 4);
	if (len == 0xffffffffu)
		len = fixed(&c, 8);
	if (c.bad || len > (uint64_t)(c.end - c.p))
		return -1;
	const unsigned char *end = c.p + len;
	c.end = end;
	if (fixed(&c, 4) != 0)
		return -1; /* not a CIE */
	unsigned version = (unsigned)u8(&c);
	const char *aug = (const char *)c.p;
	size_t alen = strnlen(aug, (size_t)(end - c.p));
	if (alen == (size_t)(end - c.p))
		return -1;
	c.p += alen + 1;
	if (strstr(aug, "eh"))
		return -1; /* a pre-2001 layout */
	memset(out, 0, sizeof *out);
	out->code_align = uleb(&c);
	out->data_align = sleb(&c);
	out->ra_reg = version == 1 ? (unsigned)u8(&c) : (unsigned)uleb(&c);
	out->fde_enc = PE_absptr;
	out->aug_z = aug[0] == 'z';
	if (aug[0] == 'z') {
		uint64_t alen2 = uleb(&c);
		const unsigned char *after = c.p + alen2;
		if (alen2 > (uint64_t)(end - c.p))
			return -1;
		for (const char *a = aug + 1; *a && !c.bad; a++) {
			switch (*a) {
			case 'R': out->fde_enc = (unsigned)u8(&c); break;
			case 'L': u8(&c); break;
			case 'P': {
				unsigned enc = (unsigned)u8(&c);
				pointer(&c, enc & ~PE_indirect, 0, 0);
				break;
			}
			case 'S': out->signal = 1; break;
			default: break; /* 'B', 'G': no data */
			}
		}
		c.p = after;
	} else if (aug[0]) {
		return -1; /* unknown augmentation: its data cannot be skipped
		            */
	}
	if (c.bad)
		return -1;
	out->insns = c.p;
	out->insns_end = end;
	return 0;
}

/* The register rules the walk cares about, while a CFA program runs. */
enum { R_SAME, R_OFFSET, R_UNDEF, R_OTHER };

struct state {
	unsigned cfa_reg;
	int64_t cfa_off;
	int cfa_kind; /* 0 reg+off, 1 the PLT expression, 2 other expression */
	unsigned plt_k;
	int rbp, ra, rsp; /* R_* */
	int64_t rbp_off, ra_off;
};

struct rows {
	struct pp_frame_row *v;
	size_t n, cap, unsupported;
	uintptr_t base;
	int oom;
};

static void emit(struct rows *r, uintptr_t pc, uint32_t rule)
{
	if (pc < r->base || pc - r->base > UINT32_MAX)
		return;
	uint32_t off = (uint32_t)(pc - r->base);
	if (r->n) {
		struct pp_frame_row *last = &r->v[r->n - 1];
		if (off < last->pc)
			return; /* overlapping descriptions: the first wins */
		if (off == last->pc) {
			last->rule = rule; /* an empty row: replaced */
			if (r->n > 1 && r->v[r->n - 2].rule == rule)
				r->n--;
			return;
		}
		if (last->rule == rule)
			return;
	}
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 1024;
		struct pp_frame_row *v = realloc(r->v, cap * sizeof *v);
		if (!v) {
			r->oom = 1;
			return;
		}
		r->v = v;
		r->cap = cap;
	}
	r->v[r->n++] = (struct pp_frame_row){off, rule};
}

enum { DW_RBP = 6, DW_RSP = 7 };

static uint32_t rule_of(const struct state *s, int signal)
{
	if (signal)
		return PP_FRAME_RULE(PP_FRAME_SIGNAL, 0, 0);
	if (s->ra == R_UNDEF)
		return PP_FRAME_RULE(PP_FRAME_OUTERMOST, 0, 0);
	if (s->ra != R_OFFSET || s->ra_off != -8 || s->rsp != R_SAME)
		return PP_FRAME_RULE(PP_FRAME_UNSUPPORTED, 0, 0);
	if (s->cfa_kind == 1)
		return PP_FRAME_RULE(PP_FRAME_PLT, s->plt_k, s->cfa_off);
	if (s->cfa_kind != 0 || s->cfa_off < 8 ||
	    s->cfa_off > PP_FRAME_MAX_OFF ||
	    (s->cfa_reg != DW_RSP && s->cfa_reg != DW_RBP))
		return PP_FRAME_RULE(PP_FRAME_UNSUPPORTED, 0, 0);
	unsigned k = 0;
	if (s->rbp == R_OFFSET) {
		if (s->rbp_off >= 0 || s->rbp_off % 8 || -s->rbp_off / 8 > 255)
			return PP_FRAME_RULE(PP_FRAME_UNSUPPORTED, 0, 0);
		k = (unsigned)(-s->rbp_off / 8);
	} else if (s->rbp != R_SAME) {
		return PP_FRAME_RULE(PP_FRAME_UNSUPPORTED, 0, 0);
	}
	return PP_FRAME_RULE(s->cfa_reg == DW_RSP ? PP_FRAME_CFA_RSP
	                                          : PP_FRAME_CFA_RBP,
	                     k, s->cfa_off);
}

/* The PLT's CFA expression, as GNU ld and lld write it for .plt:
 * DW_OP_breg7 (rsp) N; DW_OP_breg16 (rip) 0; DW_OP_lit15; DW_OP_and;
 * DW_OP_litK; DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus. */
static int plt_expression(const unsigned char *e, uint64_t len, int64_t *n,
                          unsigned *k)
{
	struct cur c = {e, e + len, e, 0, 0};
	if (u8(&c) != 0x77)
		return 0;
	*n = sleb(&c);
	if (u8(&c) != 0x80 || sleb(&c) != 0 || u8(&c) != 0x3f || u8(&c) != 0x1a)
		return 0;
	unsigned lit = (unsigned)u8(&c);
	if (lit < 0x30 || lit > 0x4f)
		return 0;
	*k = lit - 0x30;
	if (u8(&c) != 0x2a || u8(&c) != 0x33 || u8(&c) != 0x24 ||
	    u8(&c) != 0x22 || c.bad || c.p != c.end)
		return 0;
	return 1;
}

static void set_reg(struct state *s, uint64_t reg, int rule, int64_t off,
                    unsigned ra_reg)
{
	if (reg == DW_RBP) {
		s->rbp = rule;
		s->rbp_off = off;
	} else if (reg == ra_reg) {
		s->ra = rule;
		s->ra_off = off;
	} else if (reg == DW_RSP) {
		s->rsp = rule == R_SAME ? R_SAME : R_OTHER;
	}
}

/* DW_CFA_restore: reg's rule back to what the CIE's program left. */
static void restore_reg(struct state *s, const struct state *initial,
                        uint64_t reg, unsigned ra_reg)
{
	if (reg == DW_RBP) {
		s->rbp = initial->rbp;
		s->rbp_off = initial->rbp_off;
	} else if (reg == ra_reg) {
		s->ra = initial->ra;
		s->ra_off = initial->ra_off;
	} else if (reg == DW_RSP) {
		s->rsp = initial->rsp;
	}
}

/* Run a CFA program from pc on, emitting a row at every advance. Returns
 * the pc reached, or 0 when the program is not understood. */
static uintptr_t run_cfa(struct cur *c, struct state *s,
                         const struct state *initial, const struct cie *cie,
                         uintptr_t pc, uintptr_t pc_end, struct rows *r,
                         int emit_rows)
{
	struct state stack[16];
	int depth = 0;

	while (c->p < c->end && !c->bad) {
		unsigned op = (unsigned)u8(c);
		uint64_t reg, delta = 0;
		int advance = 0;
		switch (op & 0xc0) {
		case 0x40:
			delta = (op & 0x3f) * cie->code_align;
			advance = 1;
			break;
		case 0x80:
			set_reg(s, op & 0x3f, R_OFFSET,
			        (int64_t)uleb(c) * cie->data_align,
			        cie->ra_reg);
			continue;
		case 0xc0:
			if (!initial)
				return 0;
			restore_reg(s, initial, op & 0x3f, cie->ra_reg);
			continue;
		default: break;
		}
		if (!advance) {
			switch (op) {
			case 0x00: continue; /* nop */
			case 0x01:           /* set_loc */
				delta = pointer(c, cie->fde_enc, 1, 0) - pc;
				advance = 1;
				break;
			case 0x02:
				delta = fixed(c, 1) * cie->code_align;
				advance = 1;
				break;
			case 0x03:
				delta = fixed(c, 2) * cie->code_align;
				advance = 1;
				break;
			case 0x04:
				delta = fixed(c, 4) * cie->code_align;
				advance = 1;
				break;
			case 0x05: /* offset_extended */
				reg = uleb(c);
				set_reg(s, reg, R_OFFSET,
				        (int64_t)uleb(c) * cie->data_align,
				        cie->ra_reg);
				continue;
			case 0x06: /* restore_extended */
				reg = uleb(c);
				if (!initial)
					return 0;
				restore_reg(s, initial, reg, cie->ra_reg);
				continue;
			case 0x07:
				set_reg(s, uleb(c), R_UNDEF, 0, cie->ra_reg);
				continue;
			case 0x08:
				set_reg(s, uleb(c), R_SAME, 0, cie->ra_reg);
				continue;
			case 0x09: /* register */
				reg = uleb(c);
				uleb(c);
				set_reg(s, reg, R_OTHER, 0, cie->ra_reg);
				continue;
			case 0x0a: /* remember_state */
				if (depth == 16)
					return 0;
				stack[depth++] = *s;
				continue;
			case 0x0b: /* restore_state */
				if (depth == 0)
					return 0;
				/* The CFA rule too, as GCC's unwinder does. */
				*s = stack[--depth];
				continue;
			case 0x0c: /* def_cfa */
				s->cfa_reg = (unsigned)uleb(c);
				s->cfa_off = (int64_t)uleb(c);
				s->cfa_kind = 0;
				continue;
			case 0x0d:
				s->cfa_reg = (unsigned)uleb(c);
				s->cfa_kind = 0;
				continue;
			case 0x0e: s->cfa_off = (int64_t)uleb(c); continue;
			case 0x0f: { /* def_cfa_expression */
				uint64_t len = uleb(c);
				if (!need(c, len))
					return 0;
				int64_t n;
				unsigned k;
				if (plt_expression(c->p, len, &n, &k)) {
					s->cfa_kind = 1;
					s->cfa_off = n;
					s->plt_k = k;
				} else {
					s->cfa_kind = 2;
				}
				c->p += len;
				continue;
			}
			case 0x11: /* offset_extended_sf */
				reg = uleb(c);
				set_reg(s, reg, R_OFFSET,
				        sleb(c) * cie->data_align, cie->ra_reg);
				continue;
			case 0x12: /* def_cfa_sf */
				s->cfa_reg = (unsigned)uleb(c);
				s->cfa_off = sleb(c) * cie->data_align;
				s->cfa_kind = 0;
				continue;
			case 0x13:
				s->cfa_off = sleb(c) * cie->data_align;
				continue;
			case 0x14: /* val_offset */
			case 0x15: /* val_offset_sf */
				reg = uleb(c);
				if (op == 0x14)
					uleb(c);
				else
					sleb(c);
				set_reg(s, reg, R_OTHER, 0, cie->ra_reg);
				continue;
			case 0x10: /* expression: a register saved at an address
			            * a DWARF expression computes (a signal
			            * trampoline's, a realigned frame's rbp) */
			case 0x16: /* val_expression */
				reg = uleb(c);
				{
					uint64_t len = uleb(c);
					if (!need(c, len))
						return 0;
					c->p += len;
				}
				set_reg(s, reg, R_OTHER, 0, cie->ra_reg);
				continue;
			case 0x2e: uleb(c); continue; /* GNU_args_size */
			case 0x2f: /* GNU_negative_offset_extended */
				reg = uleb(c);
				set_reg(s, reg, R_OFFSET,
				        -(int64_t)uleb(c) * cie->data_align,
				        cie->ra_reg);
				continue;
			default: return 0; /* an opcode we do not know */
			}
		}
		if (advance && emit_rows) {
			uintptr_t next = pc + delta;
			if (next > pc_end)
				next = pc_end;
			if (next > pc)
				emit(r, pc, rule_of(s, cie->signal));
			pc = next;
		}
	}
	return c->bad ? 0 : pc;
}

static int fde_cmp(const void *a, const void *b)
{
	const int32_t *x = a, *y = b;
	return (x[0] > y[0]) - (x[0] < y[0]);
}

/*
 * Where the tables live. fork() copies the page tables of the parent's
 * private memory and the child's exit tears them down: the 4.5 MB of tables
 * of a PostgreSQL postmaster's 50 images were copied at every connection's
 * fork. The tables live in shared anonymous regions instead, which fork
 * does not copy (a child maps the same pages, and faults them in only if
 * it reads them).
 *
 * That is safe because a table is never written once built, and a region
 * is written only by the process that mapped it, only in the part it has
 * not handed out yet, which no child has a pointer into: a forked child
 * maps regions of its own for its tables. Space is never reused. What a
 * region holds is counted in private memory (struct region, malloc), and
 * the region is unmapped when its last table is freed, in this process
 * only: a child keeps its mapping. A table that does not get a region is
 * malloc'd, as before.
 */
struct region {
	unsigned char *base;
	size_t size, used;
	size_t live; /* tables not freed yet */
	pid_t pid;   /* the process that hands out its space */
};

#define REGION_SIZE ((size_t)2 << 20)

static struct region *current;

static void region_drop(struct region *r)
{
	munmap(r->base, r->size);
	free(r);
}

static void *table_alloc(size_t bytes, struct region **from)
{
	bytes = (bytes + 63) & ~(size_t)63;
	struct region *r = current;
	pid_t self = getpid();
	if (!r || r->pid != self || r->size - r->used < bytes) {
		size_t page = (size_t)sysconf(_SC_PAGESIZE);
		size_t size = bytes > REGION_SIZE
		                  ? (bytes + page - 1) / page * page
		                  : REGION_SIZE;
		struct region *n = malloc(sizeof *n);
		void *m =
		    n ? mmap(NULL, size, PROT_READ | PROT_WRITE,
		             MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
		      : MAP_FAILED;
		if (m == MAP_FAILED) {
			free(n);
			*from = NULL;
			return malloc(bytes);
		}
		*n = (struct region){m, size, 0, 0, self};
		/* The one it replaces stays while it holds tables; if it is
		 * ours and holds none, nothing will ever free it. */
		if (r && r->pid == self && r->live == 0)
			region_drop(r);
		current = r = n;
	}
	void *p = r->base + r->used;
	r->used += bytes;
	r->live++;
	*from = r;
	return p;
}

void pp_frames_free(struct pp_frame_table *t)
{
	if (!t)
		return;
	struct region *r = t->region;
	if (!r) {
		free(t);
		return;
	}
	if (--r->live == 0 && (r != current || r->pid != getpid())) {
		if (r == current)
			current = NULL;
		region_drop(r);
	}
}

struct pp_frame_table *pp_frames_build(uintptr_t hdr, uintptr_t table,
                                       size_t count, uintptr_t lo, uintptr_t hi)
{
	struct pp_frame_table *out = NULL;
	int32_t *entries = NULL;
	unsigned char *eh = NULL;
	struct rows r = {.base = lo};

	if (count == 0 || count > (64u << 20) / 8)
		return NULL;
	entries = malloc(count * 8);
	if (!entries || copy_in(table, entries, count * 8))
		goto done;
	/* The table is sorted by pc already (it is a search table); sorting
	 * again costs little and protects the rows' order. */
	qsort(entries, count, 8, fde_cmp);
	/* The part of .eh_frame the table points into: from the lowest
	 * FDE's CIE (CIEs precede their FDEs) to the end of the highest
	 * FDE. CIE pointers are checked against this copy. */
	uintptr_t first = UINTPTR_MAX, last = 0;
	for (size_t i = 0; i < count; i++) {
		uintptr_t f = hdr + (intptr_t)entries[2 * i + 1];
		if (f < first)
			first = f;
		if (f > last)
			last = f;
	}
	uint32_t last_len;
	if (copy_in(last, &last_len, 4) || last_len == 0xffffffffu)
		goto done;
	uintptr_t end = last + 4 + last_len;
	/* CIEs come before the first FDE: take up to 64 KiB more below it
	 * (what can be read). */
	uintptr_t start = first > (64u << 10) ? first - (64u << 10) : 0;
	if (end - start > (256u << 20))
		goto done;
	eh = malloc(end - start);
	if (!eh)
		goto done;
	while (copy_in(start, eh, end - start)) {
		/* Less room below: halve it until the copy reads. */
		if (start == first)
			goto done;
		start = first - (first - start) / 2;
		if (first - start < 64)
			start = first;
	}
	struct cur image = {eh, eh + (end - start), eh, start, 0};
	for (size_t i = 0; i < count && !r.oom; i++) {
		uintptr_t f = hdr + (intptr_t)entries[2 * i + 1];
		struct cur c = image;
		c.p = eh + (f - start);
		uint64_t len = fixed(&c, 4);
		if (c.bad || len == 0 || len == 0xffffffffu ||
		    len > (uint64_t)(c.end - c.p))
			continue;
		c.end = c.p + len;
		uintptr_t id_at = cur_addr(&c);
		uint32_t cie_off = (uint32_t)fixed(&c, 4);
		uintptr_t cie_addr = id_at - cie_off;
		struct cie cie;
		if (cie_off == 0 || cie_addr < start || cie_addr >= end ||
		    parse_cie(eh + (cie_addr - start), &image, &cie))
			continue;
		uintptr_t pc = pointer(&c, cie.fde_enc, 1, 0);
		uintptr_t range = pointer(&c, cie.fde_enc, 0, 0);
		if (c.bad || pc < lo || pc >= hi || range > hi - pc)
			continue;
		if (cie.aug_z) {
			uint64_t alen = uleb(&c);
			if (!need(&c, alen))
				continue;
			c.p += alen;
		}
		uint32_t unsupported =
		    PP_FRAME_RULE(PP_FRAME_UNSUPPORTED, 0, 0);
		uint32_t none = PP_FRAME_RULE(PP_FRAME_END, 0, 0);
		struct state init = {.cfa_reg = DW_RSP,
		                     .rbp = R_SAME,
		                     .ra = R_SAME,
		                     .rsp = R_SAME};
		struct cur ci = image;
		ci.p = cie.insns;
		ci.end = cie.insns_end;
		if (!run_cfa(&ci, &init, NULL, &cie, pc, pc + range, &r, 0)) {
			emit(&r, pc, unsupported);
			emit(&r, pc + range, none);
			continue;
		}
		struct state s = init;
		size_t mark = r.n;
		uintptr_t at =
		    run_cfa(&c, &s, &init, &cie, pc, pc + range, &r, 1);
		if (!at) {
			/* A program not understood: none of its rows. */
			r.n = mark;
			emit(&r, pc, unsupported);
		} else if (at < pc + range) {
			emit(&r, at, rule_of(&s, cie.signal));
		}
		emit(&r, pc + range, none);
	}
	if (r.oom)
		goto done;
	size_t npages = ((hi - lo) >> PP_FRAME_PAGE_SHIFT) + 2;
	struct region *region;
	out = table_alloc(sizeof *out + r.n * sizeof r.v[0] +
	                      npages * sizeof(uint32_t),
	                  &region);
	if (!out)
		goto done;
	out->region = region;
	out->base = lo;
	out->n = r.n;
	out->fdes = count;
	out->unsupported = 0;
	for (size_t i = 0; i < r.n; i++) {
		out->rows[i] = r.v[i];
		if (PP_FRAME_KIND(r.v[i].rule) == PP_FRAME_UNSUPPORTED)
			out->unsupported++;
	}
	uint32_t *pages = (uint32_t *)(out->rows + r.n);
	for (size_t p = 0, k = 0; p < npages; p++) {
		uint64_t from = (uint64_t)p << PP_FRAME_PAGE_SHIFT;
		while (k < r.n && out->rows[k].pc < from)
			k++;
		pages[p] = (uint32_t)k;
	}
	out->pages = pages;
	out->npages = npages;
done:
	free(r.v);
	free(eh);
	free(entries);
	return out;
}

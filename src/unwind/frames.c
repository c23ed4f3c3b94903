/*
 * Context: signal.
 *
 * The walks of the compact frame tables (frames.h) in the sampling
 * signal's handler: pp_frames_walk and pp_frames_walk_fp
 * run inside arbitrary code, so no malloc, no lock, and no load from
 * memory not proven readable. The tables are built in cfi.c.
 *
 * Proving memory readable without a system call per frame: the walk reads
 * only the interrupted thread's stack (return addresses, saved frame
 * pointers, a
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

#include <stdatomic.h>
#include <sys/uio.h>
#include <unistd.h>

#include "arch/arch.h"
#include "unwind/frames_step.h"
#include "unwind/registry.h"
#include "unwind/unwind.h"
#include "util/seccomp.h"

#define PAGE 4096u

/* The walk reads slots of other functions' frames (return addresses, saved
 * frame pointers): under AddressSanitizer that is not an error of ours to
 * report. */
#define PP_NO_ASAN __attribute__((no_sanitize("address", "undefined")))

/* ---------------------------------------------------------------------
 * Checked reads of the interrupted stack.
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

	/* A seccomp filter that kills for process_vm_readv: nothing is
	 * proven readable (the walk ends there). */
	if (pp_seccomp_vm_readv_forbidden())
		return 0;
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

/* A load above the checked range: check the next pages first. */
static __attribute__((noinline)) int load_above(struct reader *rd,
                                                uintptr_t addr)
{
	struct stack_range *r = rd->r;
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
	return 0;
}

/* Inline, and the page checks out of line: the common load (inside the
 * checked range) then saves no registers. */
PP_NO_ASAN static inline int load(struct reader *rd, uintptr_t addr,
                                  uintptr_t *out)
{
	struct stack_range *r = rd->r;
	if (addr < r->lo || addr > UINTPTR_MAX - 8)
		return -1;
	if (__builtin_expect(addr + 8 > r->hi, 0) && load_above(rd, addr))
		return -1;
	/* A plain load (alignment is not the walk's to check). */
	*out = *(const uintptr_t *)addr;
	return 0;
}

/* ---------------------------------------------------------------------
 * The walk.
 */

int pp_frames_walk(void *ucontext, uintptr_t *pcs, unsigned max, int *why,
                   int checks)
{
	struct pp_arch_regs r;
	pp_arch_regs_of_ucontext(ucontext, &r);
	return pp_frames_walk_regs(&r, pcs, max, why, checks);
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

int pp_frames_walk_regs(const struct pp_arch_regs *r, uintptr_t *pcs,
                        unsigned max, int *why, int checks)
{
	struct reader rd;

	rd.may_check = checks;
	rd.wanted_check = 0;
	reader_start(&rd, &checked, r->sp);
	int n = pp_frames_walk_core(r, 1, pcs, max, why, &rd, hot_load, NULL,
	                            hot_other_stack, NULL);
	if (*why == PP_UNWIND_NO_TABLE)
		return -1; /* libunwind does it all again */
	/* A load failed for want of a page check: walk again where the
	 * caller may check. */
	return n >= 0 && *why == PP_UNWIND_FAILED && rd.wanted_check ? -2 : n;
}

int pp_frames_walk_fp(void *ucontext, uintptr_t *pcs, unsigned max, int *why,
                      int checks)
{
	struct pp_arch_regs r;
	pp_arch_regs_of_ucontext(ucontext, &r);
	uintptr_t fp = r.fp;
	uintptr_t sp = r.sp;
	unsigned n = 0;
	struct reader rd;

	rd.may_check = checks;
	rd.wanted_check = 0;
	reader_start(&rd, &checked, sp);
	pcs[n++] = r.pc;
	while (n < max) {
		uintptr_t saved_fp, ra;
		/* A frame pointer chain climbs the stack: each frame above the
		 * last, aligned, and not absurdly far (a corrupt chain stops).
		 */
		if (fp < sp || fp & 7 || fp - sp > (64u << 20) ||
		    load(&rd, fp, &saved_fp) ||
		    load(&rd, fp + PP_ARCH_FRAME_RECORD_RA, &ra))
			break;
		if (ra == 0) {
			*why = PP_UNWIND_OK;
			return (int)n;
		}
		pcs[n++] = pp_arch_strip_ra(ra);
		sp = fp + PP_ARCH_FRAME_RECORD_SIZE;
		fp = saved_fp;
	}
	*why = n == max ? PP_UNWIND_TRUNCATED : PP_UNWIND_FAILED;
	return n < max && rd.wanted_check ? -2 : (int)n;
}

/*
 * Stack capture: in the sampling signal's handler, and in the heap
 * sampler inside a host's malloc. It runs inside arbitrary application
 * code: no malloc, no locks, no stdio, no dl_iterate_phdr; it reads only
 * memory it can prove is mapped. (The stack pool's setup is mmap and
 * madvise: safe there too.)
 * Context: signal.
 */
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "arch/arch.h"
#include "shim/cpu_hot.h"
#include "unwind/frames.h"
#include "unwind/registry.h"

/* Where valgrind's header is at hand, the stacks below are declared to it
 * (a client request: a few no-op instructions outside valgrind). Without,
 * memcheck takes our switch to one for a huge frame and loses track of
 * what is defined. */
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef VALGRIND_STACK_REGISTER
#define VALGRIND_STACK_REGISTER(lo, hi) ((void)(lo), (void)(hi), 0u)
#endif
#include "unwind/unwind.h"

/*
 * Walk outwards from the cursor's frame, stepping only from code whose
 * tables we registered: anything else would send libunwind to
 * dl_iterate_phdr. With `from` set, the frames met before the one at
 * `from` (the profiler's own) are left out, and not meeting it within
 * PP_UNWIND_SKIP_ROOM frames is a failure.
 */
static unsigned walk(unw_cursor_t *cursor, uintptr_t from, uintptr_t *pcs,
                     unsigned max, int *why)
{
	unw_word_t ip;
	unsigned n = 0;

	*why = PP_UNWIND_OK;
	for (unsigned frame = 0;; frame++) {
		if (unw_get_reg(cursor, UNW_REG_IP, &ip) < 0 || ip == 0)
			break;
		if (n == 0 && from && (uintptr_t)ip != from) {
			if (frame >= PP_UNWIND_SKIP_ROOM)
				break;
		} else {
			pcs[n++] = (uintptr_t)ip;
			if (n == max) {
				*why = PP_UNWIND_TRUNCATED;
				return n;
			}
		}
		/* Every frame but the first holds a return address. */
		if (!pp_registry_covers((uintptr_t)ip - (frame > 0))) {
			*why = PP_UNWIND_UNKNOWN_CODE;
			return n;
		}
		int rc = unw_step(cursor);
		if (rc < 0) {
			*why = PP_UNWIND_FAILED;
			return n;
		}
		if (rc == 0)
			break; /* the outermost frame */
	}
	if (n == 0 && from)
		*why = PP_UNWIND_FAILED;
	return n;
}

static unsigned capture_libunwind(ucontext_t *uc, uintptr_t *pcs, unsigned max,
                                  int *why)
{
	unw_cursor_t cursor;

	if (unw_init_local2(&cursor, (unw_context_t *)uc,
	                    UNW_INIT_SIGNAL_FRAME) < 0)
		return 0;
	return walk(&cursor, 0, pcs, max, why);
}

/* Decided once at pp_unwind_init: the guard is in place. */
static atomic_int trace_allowed;
static _Atomic uint64_t fast_traces;

uint64_t pp_unwind_fast_traces(void)
{
	return atomic_load_explicit(&fast_traces, memory_order_relaxed);
}

void pp_unwind_allow_trace(int yes)
{
	atomic_store(&trace_allowed, yes);
}

/* Where `from` is among the first frames of buf: its index, and 1 when the
 * unwinder stored return addresses minus one (some libunwind versions do),
 * 0 when as they are. -1 when it is not there. */
static int find_from(const uintptr_t *buf, int n, uintptr_t from, int *delta)
{
	for (int k = 0; k < n && k < PP_UNWIND_SKIP_ROOM; k++) {
		if (buf[k] == from || buf[k] == from - 1) {
			*delta = buf[k] != from;
			return k;
		}
	}
	return -1;
}

/* The fast way: libunwind's unw_backtrace, which keeps the shape of every
 * frame it met in a per-thread cache and so reads a known stack without
 * parsing unwind tables or taking a lock. Code without a registered table
 * would send it to dl_iterate_phdr: the guard turns that into "unknown
 * code" and the trace ends there. */
static int capture_trace(uintptr_t from, uintptr_t *pcs, unsigned max, int *why)
{
	pp_unwind_guard = 1;
	int n = unw_backtrace((void **)pcs, (int)(max + PP_UNWIND_SKIP_ROOM));
	pp_unwind_guard = 0;
	int delta, k = find_from(pcs, n, from, &delta);
	if (k < 0)
		return -1;
	unsigned kept = (unsigned)(n - k);
	*why = PP_UNWIND_OK;
	if (kept > max ||
	    (kept == max && n == (int)(max + PP_UNWIND_SKIP_ROOM))) {
		kept = max;
		*why = PP_UNWIND_TRUNCATED;
	}
	for (unsigned i = 0; i < kept; i++)
		pcs[i] = pcs[k + i] + (uintptr_t)delta;
	return (int)kept;
}

/* The checked way: step by step, through registered code only. Its own
 * function (never inlined), so that the context and cursor (2 KiB) take
 * the allocating thread's stack only when the fast way failed: the heap
 * sampler runs on whatever stack the host gave the thread. */
__attribute__((noinline)) static unsigned
capture_checked(uintptr_t from, uintptr_t *pcs, unsigned max, int *why)
{
	unw_context_t ctx;
	unw_cursor_t cursor;
	unsigned n = 0;

	unw_getcontext(&ctx);
	pp_registry_enter();
	pp_unwind_guard = 1;
	if (unw_init_local(&cursor, &ctx) == 0)
		n = walk(&cursor, from, pcs, max, why);
	pp_unwind_guard = 0;
	pp_registry_leave();
	if (n == 0)
		pcs[n++] = from;
	return n;
}

/* The libunwind ways: the cached trace when it may be used, else step by
 * step through registered code. For captures the compact tables cannot
 * make. */
static unsigned here_libunwind(uintptr_t from, uintptr_t *pcs, unsigned max,
                               int *why)
{
	*why = PP_UNWIND_FAILED;
	if (max == 0)
		return 0;
	if (atomic_load_explicit(&trace_allowed, memory_order_relaxed) &&
	    pp_registry_trace_safe()) {
		int got = capture_trace(from, pcs, max, why);
		if (got > 0) {
			atomic_fetch_add_explicit(&fast_traces, 1,
			                          memory_order_relaxed);
			return (unsigned)got;
		}
	}
	return capture_checked(from, pcs, max, why);
}

/* Host captures walked by the compact tables alone, and those handed to
 * libunwind at a frame the tables cannot describe (the heap sampler's, for
 * status). */
static _Atomic uint64_t here_compact, here_fallbacks;

uint64_t pp_unwind_here_compact(void)
{
	return atomic_load_explicit(&here_compact, memory_order_relaxed);
}

uint64_t pp_unwind_here_fallbacks(void)
{
	return atomic_load_explicit(&here_fallbacks, memory_order_relaxed);
}

/* The compact tables' walk of this thread's own stack from pc, sp and fp:
 * the frames from `from` on into pcs (room for max + PP_UNWIND_SKIP_ROOM),
 * just `from` when it is not met (the walk stopped first: code not
 * registered yet, an image being unloaded, a stack load that failed; libunwind
 * could not go further either). -1 where a frame needs libunwind. The loads
 * are checked against the thread's checked stack range, as in the handler
 * (a system call on a thread's first captures), so no page is assumed
 * readable. */
static int here_tables(const struct pp_arch_regs *here, uintptr_t from,
                       uintptr_t *pcs, unsigned max, int *why)
{
	pp_registry_enter();
	int n =
	    pp_frames_walk_regs(here, pcs, max + PP_UNWIND_SKIP_ROOM, why, 1);
	pp_registry_leave();
	if (n < 0)
		return -1;
	/* pcs[0] is the capturing function's own pc, never `from`. */
	for (int k = 1; k < n && k <= PP_UNWIND_SKIP_ROOM; k++) {
		if (pcs[k] != from)
			continue;
		unsigned kept = (unsigned)(n - k);
		if (kept > max) {
			kept = max;
			*why = PP_UNWIND_TRUNCATED;
		}
		memmove(pcs, pcs + k, kept * sizeof *pcs);
		return (int)kept;
	}
	if (*why == PP_UNWIND_OK || *why == PP_UNWIND_TRUNCATED)
		*why = PP_UNWIND_FAILED;
	pcs[0] = from;
	return 1;
}

/* The compact tables first (no system call once the thread's stack range is
 * checked, no lock, no libunwind: libunwind's step masks every signal
 * around its locks, two rt_sigprocmask calls per frame), libunwind only
 * for a capture they cannot make. Never inlined: the pc it reads is its
 * own. */
__attribute__((noinline)) unsigned
pp_unwind_capture_here(uintptr_t from, uintptr_t *pcs, unsigned max, int *why)
{
	struct pp_arch_regs here; /* this very point: pc, sp, frame pointer */

	*why = PP_UNWIND_FAILED;
	if (max == 0)
		return 0;
	pp_arch_here(&here);
	int n = here_tables(&here, from, pcs, max, why);
	if (n >= 0) {
		atomic_fetch_add_explicit(&here_compact, 1,
		                          memory_order_relaxed);
		return (unsigned)n;
	}
	atomic_fetch_add_explicit(&here_fallbacks, 1, memory_order_relaxed);
	return here_libunwind(from, pcs, max, why);
}

/*
 * Stacks of our own for libunwind in the SIGPROF handler. The handler runs on
 * whatever stack the interrupted thread has left, and libunwind's cursor and
 * DWARF state take several KiB: a thread made with a PTHREAD_STACK_MIN stack
 * (16 KiB, of which the kernel's signal frame alone takes ~3 KiB with the
 * AVX state) died of SIGSEGV in the handler when sampled deep in its work
 * (tests/integration/test_safety.py, test_tiny_stack). We cannot give every
 * host thread a sigaltstack (only a thread can set its own), so the handler
 * claims one stack of a pool allocated once and never freed (a handler may
 * still be on it while the agent stops), and unwinds there. With every stack
 * in use (that many threads in the handler at once) the sample is dropped as
 * not captured rather than risk the thread's stack.
 */
#define UNWIND_STACKS 32
#define UNWIND_STACK_SIZE (64u * 1024u)

static unsigned char *unwind_stacks;
static atomic_int unwind_stack_busy[UNWIND_STACKS];

int pp_unwind_stacks_init(void)
{
	if (unwind_stacks)
		return 0;
	void *p = mmap(NULL, (size_t)UNWIND_STACKS * UNWIND_STACK_SIZE,
	               PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -1;
#ifdef MADV_WIPEONFORK
	/* Scratch: a forked child gets the pool as zeroed pages (it has no
	 * thread on any of them), and fork copies none of the pages used. */
	(void)madvise(p, (size_t)UNWIND_STACKS * UNWIND_STACK_SIZE,
	              MADV_WIPEONFORK);
#endif
	for (size_t i = 0; i < UNWIND_STACKS; i++) {
		unsigned char *lo = (unsigned char *)p + i * UNWIND_STACK_SIZE;
		(void)VALGRIND_STACK_REGISTER(lo, lo + UNWIND_STACK_SIZE - 1);
	}
	unwind_stacks = p;
	return 0;
}

void pp_unwind_stacks_forget_in_child(void)
{
	for (int i = 0; i < UNWIND_STACKS; i++)
		if (atomic_load_explicit(&unwind_stack_busy[i],
		                         memory_order_relaxed))
			atomic_store_explicit(&unwind_stack_busy[i], 0,
			                      memory_order_relaxed);
}

static _Atomic uint64_t compact_walks, fallbacks;

struct capture_call {
	ucontext_t *uc;
	uintptr_t *pcs;
	unsigned max, n;
	int *why;
	enum pp_unwind_mode mode;
};

/* On a stack of the pool: libunwind, and the walks that have to check
 * stack pages. */
static void capture_call_run(void *arg)
{
	struct capture_call *c = arg;
	if (c->mode == PP_UNWIND_FP) {
		c->n = (unsigned)pp_frames_walk_fp(c->uc, c->pcs, c->max,
		                                   c->why, 1);
		return;
	}
	int n = -1;
	if (c->mode == PP_UNWIND_DWARF) {
		n = pp_frames_walk(c->uc, c->pcs, c->max, c->why, 1);
		atomic_fetch_add_explicit(n >= 0 ? &compact_walks : &fallbacks,
		                          1, memory_order_relaxed);
	}
	if (n < 0) {
		*c->why = PP_UNWIND_OK;
		n = (int)capture_libunwind(c->uc, c->pcs, c->max, c->why);
	}
	c->n = (unsigned)n;
}

static unsigned capture_own_stack(ucontext_t *uc, enum pp_unwind_mode mode,
                                  uintptr_t *pcs, unsigned max, int *why)
{
	struct capture_call c = {uc, pcs, max, 0, why, mode};
	if (!unwind_stacks) {
		*why = PP_UNWIND_FAILED;
		return 0;
	}
	for (int i = 0; i < UNWIND_STACKS; i++) {
		int free_ = 0;
		if (!atomic_compare_exchange_strong_explicit(
		        &unwind_stack_busy[i], &free_, 1, memory_order_acquire,
		        memory_order_relaxed))
			continue;
		void *top = unwind_stacks + (size_t)(i + 1) * UNWIND_STACK_SIZE;
		/* Said per thread: a handler left on it gives it back
		 * (shim/cpu_hot.h). */
		int prev = pp_cpu_tls.stack;
		pp_cpu_tls.stack = i + 1;
		pp_arch_call_on_stack(capture_call_run, &c, top);
		pp_cpu_tls.stack = prev;
		atomic_store_explicit(&unwind_stack_busy[i], 0,
		                      memory_order_release);
		return c.n;
	}
	*why = PP_UNWIND_FAILED;
	return 0;
}

void pp_unwind_stack_release(int stack)
{
	if (stack > 0 && stack <= UNWIND_STACKS)
		atomic_store_explicit(&unwind_stack_busy[stack - 1], 0,
		                      memory_order_release);
}

uint64_t pp_unwind_compact(void)
{
	return atomic_load_explicit(&compact_walks, memory_order_relaxed);
}

uint64_t pp_unwind_fallbacks(void)
{
	return atomic_load_explicit(&fallbacks, memory_order_relaxed);
}

uint64_t pp_unwind_stack_checks(void)
{
	return pp_frames_stack_checks();
}

unsigned pp_unwind_capture(void *ucontext, enum pp_unwind_mode mode,
                           uintptr_t *pcs, unsigned max, int *why)
{
	*why = PP_UNWIND_OK;
	/* A handler may interrupt a capture of its own thread: keep the
	 * guard as it was. */
	int guarded = pp_unwind_guard;
	pp_unwind_guard = 1;
	pp_registry_enter();
	/* The walks first run here, on the interrupted thread's stack, whose
	 * cache lines the kernel just wrote (a stack of the pool is cold: it
	 * cost about 1 us a sample), taking a few hundred bytes. What needs
	 * more — libunwind, a page check and its system call — runs on a
	 * stack of the pool: the kernel's signal frame alone can take 3 KiB of
	 * a small thread stack, and a check on top of it overflowed a
	 * PTHREAD_STACK_MIN thread now and then (test_safety's tiny stack). */
	int n = -1;
	if (mode == PP_UNWIND_FP)
		n = pp_frames_walk_fp(ucontext, pcs, max, why, 0);
	else if (mode == PP_UNWIND_DWARF)
		n = pp_frames_walk(ucontext, pcs, max, why, 0);
	if (n >= 0 && mode == PP_UNWIND_DWARF)
		atomic_fetch_add_explicit(&compact_walks, 1,
		                          memory_order_relaxed);
	else if (n == -1 && mode == PP_UNWIND_DWARF)
		atomic_fetch_add_explicit(&fallbacks, 1, memory_order_relaxed);
	if (n < 0) {
		*why = PP_UNWIND_OK;
		/* A fallback goes straight to libunwind. */
		enum pp_unwind_mode m = n == -1 && mode == PP_UNWIND_DWARF
		                            ? PP_UNWIND_LIBUNWIND
		                            : mode;
		n = (int)capture_own_stack(ucontext, m, pcs, max, why);
	}
	pp_registry_leave();
	pp_unwind_guard = guarded;
	return (unsigned)n;
}

unsigned pp_unwind_capture_regs(uintptr_t pc, uintptr_t sp, uintptr_t bp,
                                uintptr_t *pcs, unsigned max)
{
	int why;
	pp_registry_enter();
	struct pp_arch_regs r = {pc, sp, bp, 0};
	int n = pp_frames_walk_regs(&r, pcs, max, &why, 1);
	pp_registry_leave();
	return n < 0 ? 0 : (unsigned)n;
}

__attribute__((noinline)) unsigned
pp_unwind_capture_caller(uintptr_t from, uintptr_t *pcs, unsigned max)
{
	uintptr_t all[PP_UNWIND_CALLER_MAX + PP_UNWIND_SKIP_ROOM];
	unsigned n = 0;
	if (max > PP_UNWIND_CALLER_MAX)
		max = PP_UNWIND_CALLER_MAX;
	struct pp_arch_regs here;
	pp_arch_here(&here);
	n = pp_unwind_capture_regs(here.pc, here.sp, here.fp, all,
	                           max + PP_UNWIND_SKIP_ROOM);
	for (unsigned k = 1; k < n && k <= PP_UNWIND_SKIP_ROOM; k++) {
		if (all[k] != from)
			continue;
		unsigned m = n - k < max ? n - k : max;
		memcpy(pcs, all + k, m * sizeof *pcs);
		return m;
	}
	int why;
	return here_libunwind(from, pcs, max, &why);
}

enum pp_unwind_mode pp_unwind_mode_parse(const char *name)
{
	if (!strcmp(name, "fp"))
		return PP_UNWIND_FP;
	if (!strcmp(name, "libunwind"))
		return PP_UNWIND_LIBUNWIND;
	return PP_UNWIND_DWARF;
}

const char *pp_unwind_mode_name(enum pp_unwind_mode mode)
{
	switch (mode) {
	case PP_UNWIND_FP: return "frame-pointer";
	case PP_UNWIND_LIBUNWIND: return "libunwind";
	default: return "dwarf";
	}
}

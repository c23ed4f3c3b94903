/*
 * Stack capture in the SIGPROF handler. HOT/UNSAFE CONTEXT: runs inside
 * arbitrary application code. No malloc, no locks, no stdio, no
 * dl_iterate_phdr; reads only memory it can prove is mapped.
 */
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <stdatomic.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

#include "unwind/registry.h"
#include "unwind/unwind.h"

/* Read n bytes at addr without risking a fault: the kernel checks the
 * mapping for us. */
static int safe_read(uintptr_t addr, void *out, size_t n)
{
	struct iovec local = {out, n};
	struct iovec remote = {(void *)addr, n};
	return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) ==
	               (ssize_t)n
	           ? 0
	           : -1;
}

static unsigned capture_fp(const ucontext_t *uc, uintptr_t *pcs, unsigned max,
                           int *why)
{
	uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	uintptr_t fp = (uintptr_t)uc->uc_mcontext.gregs[REG_RBP];
	uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
	unsigned n = 0;

	pcs[n++] = pc;
	while (n < max) {
		uintptr_t frame[2]; /* saved fp, return address */
		/* A frame pointer chain climbs the stack: each frame above the
		 * last, aligned, and not absurdly far (a corrupt chain stops).
		 */
		if (fp < sp || fp & 7 || fp - sp > (64u << 20) ||
		    safe_read(fp, frame, sizeof frame))
			break;
		if (frame[1] == 0)
			return n;
		pcs[n++] = frame[1];
		sp = fp + sizeof frame;
		fp = frame[0];
	}
	*why = n == max ? PP_UNWIND_TRUNCATED : PP_UNWIND_FAILED;
	return n;
}

static unsigned capture_libunwind(ucontext_t *uc, uintptr_t *pcs, unsigned max,
                                  int *why)
{
	unw_cursor_t cursor;
	unw_word_t ip;
	unsigned n = 0;

	if (unw_init_local2(&cursor, (unw_context_t *)uc,
	                    UNW_INIT_SIGNAL_FRAME) < 0)
		return 0;
	for (;;) {
		if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0)
			return n;
		pcs[n++] = (uintptr_t)ip;
		if (n == max) {
			*why = PP_UNWIND_TRUNCATED;
			return n;
		}
		/* Step only from code whose tables we registered: anything
		 * else would send libunwind to dl_iterate_phdr. */
		if (!pp_registry_covers((uintptr_t)ip - (n > 1))) {
			*why = PP_UNWIND_UNKNOWN_CODE;
			return n;
		}
		int rc = unw_step(&cursor);
		if (rc == 0)
			return n; /* the outermost frame */
		if (rc < 0) {
			*why = PP_UNWIND_FAILED;
			return n;
		}
	}
}

unsigned pp_unwind_capture_here(uintptr_t from, uintptr_t *pcs, unsigned max,
                                int *why)
{
	/* Frames above `from` are the profiler's own: a few, whatever the
	 * compiler inlined. More than this and `from` was not on the way. */
	enum { MAX_SKIP = 16 };
	unw_context_t ctx;
	unw_cursor_t cursor;
	unw_word_t ip;
	unsigned n = 0, frame = 0;

	*why = PP_UNWIND_FAILED;
	if (max == 0)
		return 0;
	unw_getcontext(&ctx);
	pp_registry_enter();
	if (unw_init_local(&cursor, &ctx) < 0)
		goto out;
	for (;; frame++) {
		if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0) {
			if (n)
				*why = PP_UNWIND_OK;
			break;
		}
		if (n == 0 && (uintptr_t)ip != from && frame >= MAX_SKIP)
			break;
		if (n || (uintptr_t)ip == from) {
			pcs[n++] = (uintptr_t)ip;
			if (n == max) {
				*why = PP_UNWIND_TRUNCATED;
				break;
			}
		}
		/* Every frame but this function's own holds a return
		 * address. */
		if (!pp_registry_covers((uintptr_t)ip - (frame > 0))) {
			*why = PP_UNWIND_UNKNOWN_CODE;
			break;
		}
		int rc = unw_step(&cursor);
		if (rc <= 0) {
			*why = rc == 0 && n ? PP_UNWIND_OK : PP_UNWIND_FAILED;
			break;
		}
	}
out:
	pp_registry_leave();
	if (n == 0)
		pcs[n++] = from;
	return n;
}

unsigned pp_unwind_capture(void *ucontext, enum pp_unwind_mode mode,
                           uintptr_t *pcs, unsigned max, int *why)
{
	*why = PP_UNWIND_OK;
	if (mode == PP_UNWIND_FP)
		return capture_fp(ucontext, pcs, max, why);
	pp_registry_enter();
	unsigned n = capture_libunwind(ucontext, pcs, max, why);
	pp_registry_leave();
	return n;
}

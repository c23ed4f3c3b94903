/*
 * walkwork: the cost of one stack capture by depth, pullprof's compact frame
 * tables beside libunwind, in one process (bench/bench_walk.py runs it).
 * Linked with the static agent library: it calls the capture the sampling
 * signal's handler calls, pp_unwind_capture, on a context of its own
 * (getcontext) at a known depth, without signals or timers, so that
 * callgrind can count its instructions (--toggle-collect=measured) and a
 * plain run can time it.
 *
 *   walkwork MODE DEPTH LOOPS
 *
 * MODE: dwarf (pullprof's tables), libunwind (pullprof's libunwind mode),
 * unw_backtrace (libunwind's cached trace, the peer at its fastest) or
 * unw_step (libunwind's plain step loop), or getcontext (the context
 * alone: what every other mode pays on top of its walk).
 * Prints "frames F ns_per_capture N".
 */
#define _GNU_SOURCE 1
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>

#include "unwind/unwind.h"

#define MAX 256

static const char *mode;
static unsigned loops;
static volatile unsigned sink;

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static unsigned capture(ucontext_t *uc, uintptr_t *pcs)
{
	int why = 0;
	if (!strcmp(mode, "dwarf"))
		return pp_unwind_capture(uc, PP_UNWIND_DWARF, pcs, MAX, &why);
	if (!strcmp(mode, "libunwind"))
		return pp_unwind_capture(uc, PP_UNWIND_LIBUNWIND, pcs, MAX,
		                         &why);
	if (!strcmp(mode, "unw_backtrace"))
		return (unsigned)unw_backtrace((void **)pcs, MAX);
	if (!strcmp(mode, "unw_step")) {
		unw_cursor_t c;
		unsigned n = 0;
		/* x86_64's unw_context_t is ucontext_t; arm64's has its
		 * layout up to the registers (capture.c casts alike). */
		if (unw_init_local(&c, (unw_context_t *)uc) < 0)
			return 0;
		do {
			unw_word_t ip;
			unw_get_reg(&c, UNW_REG_IP, &ip);
			pcs[n++] = (uintptr_t)ip;
		} while (n < MAX && unw_step(&c) > 0);
		return n;
	}
	return 1; /* getcontext */
}

/* One capture of the stack this function stands on. */
static __attribute__((noinline)) unsigned one(uintptr_t *pcs)
{
	ucontext_t uc;
	getcontext(&uc);
	return capture(&uc, pcs);
}

/* The timed loop, on its own for callgrind's --toggle-collect. */
static __attribute__((noinline)) void measured(void)
{
	uintptr_t pcs[MAX];
	unsigned frames = 0;
	double t0 = now_ns();
	for (unsigned i = 0; i < loops; i++) {
		frames = one(pcs);
		sink += frames;
	}
	double t1 = now_ns();
	printf("frames %u ns_per_capture %.0f\n", frames, (t1 - t0) / loops);
}

/* DEPTH frames of two shapes: every third one with a variable-length array
 * (its CFA from the frame pointer), the others with a fixed frame (the CFA
 * from the stack pointer). Built without frame pointers. */
static unsigned down(unsigned d);

static __attribute__((noinline)) unsigned down_vla(unsigned d)
{
	volatile char pad[32 + (d % 2) * 16];
	pad[0] = (char)d;
	return down(d - 1) + pad[0];
}

static __attribute__((noinline)) unsigned down(unsigned d)
{
	volatile char pad[48];
	pad[0] = (char)d;
	if (d == 0) {
		measured();
		return pad[0];
	}
	if (d % 3 == 0)
		return down_vla(d - 1) + pad[0];
	return down(d - 1) + pad[0];
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: walkwork MODE DEPTH LOOPS\n");
		return 2;
	}
	mode = argv[1];
	loops = (unsigned)atoi(argv[3]);
	if (loops == 0 || pp_unwind_init() != 0) {
		fprintf(stderr, "walkwork: no loops, or no unwinder\n");
		return 1;
	}
	unsigned r = down((unsigned)atoi(argv[2]));
	sink += r;
	return 0;
}

/* The two libraries tests/symbols/swaphost swaps at one address
 * (tests/integration/test_hostile_unload.py): libswapa.so and libswapb.so
 * are this file built twice, SWAP_NAME naming the one function, so both
 * have the same size and layout and the loader puts the second where the
 * first was. Only libswapa's function ever runs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef SWAP_NAME
#define SWAP_NAME swap_a_spin
#endif

uint64_t SWAP_NAME(double seconds);
void *swap_keep(void);

/* 16 MiB in 1 MiB blocks allocated here and never freed (the host's heap
 * then has this library's frames). */
__attribute__((noinline)) void *swap_keep(void)
{
	void **kept = malloc(16 * sizeof *kept);
	for (int i = 0; kept && i < 16; i++) {
		kept[i] = malloc(1 << 20);
		if (kept[i])
			memset(kept[i], i, 1 << 20);
	}
	return kept;
}

/* Burn this thread's CPU for seconds of CPU time, in this function. */
__attribute__((noinline)) uint64_t SWAP_NAME(double seconds)
{
	struct timespec t;
	volatile uint64_t x = 0;
	double start, now;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	start = (double)t.tv_sec + (double)t.tv_nsec / 1e9;
	do {
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
		now = (double)t.tv_sec + (double)t.tv_nsec / 1e9;
	} while (now - start < seconds);
	return x;
}

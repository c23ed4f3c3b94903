/* A host whose allocator is gperftools' tcmalloc, for
 * test_heap_tcmalloc.py: built linked statically with libtcmalloc.a
 * (tests/heap/tcmallocwork: the executable defines malloc, so a preloaded
 * pullprof never sees an allocation) and linked with libtcmalloc.so
 * (tests/heap/tcmallocwork_shared). It never calls pullprof.
 *
 * At start it allocates known amounts from three functions and prints the
 * truth, "truth tc_big BYTES tc_mid BYTES tc_small BYTES", then answers
 * one line per command on stdin:
 *   free-small   frees tc_small's blocks     -> "freed BYTES"
 *   quit         exits 0 (so does end of input)
 *
 * tcmalloc 2.10 leaves the first 16 MiB the main thread allocates
 * unsampled (its sampler picks its first interval before it reads
 * TCMALLOC_SAMPLE_PARAMETER): warm_up() goes past them first, so that the
 * three sites are sampled at the period. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB ((size_t)1 << 20)
#define N_BIG 32
#define N_MID 128
#define N_SMALL 32768

static void *big[N_BIG], *mid[N_MID], *small[N_SMALL];

__attribute__((noinline)) void *tc_big(size_t n);
__attribute__((noinline)) void *tc_mid(size_t n);
__attribute__((noinline)) void *tc_small(size_t n);

/* Each touches its block (it is really used) and does not end in a tail
 * call, so it is on the stack tcmalloc records. */
__attribute__((noinline)) void *tc_big(size_t n)
{
	void *p = malloc(n);
	memset(p, 1, n);
	__asm__ volatile("" ::: "memory");
	return p;
}

__attribute__((noinline)) void *tc_mid(size_t n)
{
	void *p = malloc(n);
	memset(p, 2, n);
	__asm__ volatile("" ::: "memory");
	return p;
}

__attribute__((noinline)) void *tc_small(size_t n)
{
	void *p = malloc(n);
	memset(p, 3, n);
	__asm__ volatile("" ::: "memory");
	return p;
}

__attribute__((noinline)) static void warm_up(void)
{
	for (int i = 0; i < 24; i++) {
		void *volatile p = malloc(MIB);
		memset(p, 0, 64);
		free(p);
	}
}

int main(void)
{
	warm_up();
	for (int i = 0; i < N_BIG; i++)
		big[i] = tc_big(MIB);
	for (int i = 0; i < N_MID; i++)
		mid[i] = tc_mid(256 << 10);
	for (int i = 0; i < N_SMALL; i++)
		small[i] = tc_small(1 << 10);
	printf("truth tc_big %zu tc_mid %zu tc_small %zu\n", N_BIG * MIB,
	       (size_t)N_MID << 18, (size_t)N_SMALL << 10);
	fflush(stdout);
	char line[128];
	while (fgets(line, sizeof line, stdin)) {
		if (strncmp(line, "free-small", 10) == 0) {
			for (int i = 0; i < N_SMALL; i++) {
				free(small[i]);
				small[i] = NULL;
			}
			printf("freed %zu\n", (size_t)N_SMALL << 10);
		} else if (strncmp(line, "quit", 4) == 0) {
			break;
		} else {
			printf("unknown command\n");
		}
		fflush(stdout);
	}
	return 0;
}

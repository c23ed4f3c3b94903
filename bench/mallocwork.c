/*
 * mallocwork: a malloc-heavy load for the heap overhead benchmark
 * (bench/bench_malloc.py). Not linked with pullprof: the allocator under
 * test comes in with LD_PRELOAD (pullprof, jemalloc, tcmalloc) or a tool
 * (heaptrack, valgrind), so the same binary runs in every configuration.
 *
 * Each of THREADS threads owns 4096 slots, fills them (untimed), then does
 * PAIRS malloc+free pairs: pick a slot and a size of 16..511 bytes from a
 * xorshift generator, free the slot's block, malloc a new one and write a
 * byte into it. The threads start together (a barrier); each times its own
 * PAIRS pairs with CLOCK_MONOTONIC and with its CPU clock. Prints one line:
 *   ns_per_pair MEAN max MAX wall_ms W cpu_ns_per_pair CPU
 * MEAN is the mean over the threads of (thread's wall time / PAIRS), MAX
 * the slowest thread's, W the wall time from the barrier to the last join,
 * CPU the mean of (thread's CPU time / PAIRS): on a machine shared with
 * other work, the wall time counts the time a thread waited for a core, its
 * CPU time does not.
 * PAIRS is per thread: two threads do twice the work of one.
 *
 * With HOLD 1 it then waits for end of input before freeing and exiting,
 * so that a script can query a preloaded profiler's agent.
 *
 * MODE (malloc by default) picks what a pair is:
 *   malloc   free + malloc, as above;
 *   pool     the same pair made by a pool of the program's own and
 *            reported to pullprof's pool API: pullprof_heap_free of the
 *            slot's block, then pullprof_heap_alloc of n bytes at the
 *            slot's place in an arena of SLOTS x 512 bytes (what a pool's
 *            own work is, a bump, is left out: the pair is the API's cost
 *            over the loop's);
 *   release  the same, with pullprof_heap_release of the slot's 512 bytes
 *            in place of the free (a pool reset, found empty or not);
 *   new      C++'s operator delete + operator new (libstdc++ is loaded
 *            with dlopen, the operators are the first definitions in the
 *            process, found with dlsym: pullprof's when it is preloaded,
 *            an allocator's when one is preloaded alone), for
 *            bench/bench_new.py.
 * The API's functions are found with dlsym (the library comes in with
 * LD_PRELOAD); without it, functions here that do nothing stand in, called
 * the same way (through a pointer), as the baseline.
 *
 *   mallocwork THREADS PAIRS [HOLD [malloc|pool|release|new]]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLOTS 4096
#define MAX_THREADS 64

static long pairs;
static enum { MALLOC, POOL, RELEASE, NEW } mode;
static void *(*cxx_new)(size_t);
static void (*cxx_delete)(void *);

#define SLOT_BYTES 512

static void no_alloc(const void *p, size_t n, const char *pool)
{
	(void)p, (void)n, (void)pool;
}
static void no_free(const void *p)
{
	(void)p;
}
static void no_release(const void *p, size_t n)
{
	(void)p, (void)n;
}

static void (*report_alloc)(const void *, size_t, const char *) = no_alloc;
static void (*report_free)(const void *) = no_free;
static void (*report_release)(const void *, size_t) = no_release;
static pthread_barrier_t start;
static double thread_ns[MAX_THREADS], thread_cpu_ns[MAX_THREADS];
static volatile unsigned sink;

static double clock_ns(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static double now_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

static inline uint32_t next(uint32_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

/* The pool modes' loop: the same draws, the block at the slot's place. */
static __attribute__((noinline)) unsigned
run_pool(unsigned char **slot, unsigned char *arena, uint32_t *x)
{
	unsigned sum = 0;
	for (long i = 0; i < pairs; i++) {
		uint32_t r = next(x);
		unsigned s = r & (SLOTS - 1);
		size_t n = 16 + (r >> 12) % 496;
		sum += slot[s][0];
		if (mode == RELEASE)
			report_release(arena + (size_t)s * SLOT_BYTES,
			               SLOT_BYTES);
		else
			report_free(slot[s]);
		slot[s] = arena + (size_t)s * SLOT_BYTES;
		report_alloc(slot[s], n, "bench");
		slot[s][0] = (unsigned char)r;
	}
	return sum;
}

/* The new mode's loop: the same draws, operator delete and new. */
static __attribute__((noinline)) unsigned run_new(unsigned char **slot,
                                                  uint32_t *x)
{
	unsigned sum = 0;
	for (long i = 0; i < pairs; i++) {
		uint32_t r = next(x);
		unsigned s = r & (SLOTS - 1);
		size_t n = 16 + (r >> 12) % 496;
		sum += slot[s][0];
		cxx_delete(slot[s]);
		slot[s] = cxx_new(n);
		slot[s][0] = (unsigned char)r;
	}
	return sum;
}

/* The timed loop, on its own so that callgrind can count it alone
 * (--toggle-collect=run_pairs). */
static __attribute__((noinline)) unsigned
run_pairs(unsigned char **slot, uint32_t *x, unsigned char *arena)
{
	unsigned sum = 0;
	if (mode == NEW)
		return run_new(slot, x);
	if (mode != MALLOC)
		return run_pool(slot, arena, x);
	for (long i = 0; i < pairs; i++) {
		uint32_t r = next(x);
		unsigned s = r & (SLOTS - 1);
		size_t n = 16 + (r >> 12) % 496;
		sum += slot[s][0];
		free(slot[s]);
		slot[s] = malloc(n);
		if (!slot[s])
			abort();
		slot[s][0] = (unsigned char)r;
	}
	return sum;
}

static void *worker(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg;
	uint32_t x = 2463534242u + id * 0x9e3779b9u;
	unsigned char **slot = calloc(SLOTS, sizeof *slot);
	unsigned char *arena = NULL;
	unsigned sum;

	if (!slot)
		abort();
	if (mode != MALLOC && mode != NEW) {
		arena = malloc((size_t)SLOTS * SLOT_BYTES);
		if (!arena)
			abort();
	}
	for (int i = 0; i < SLOTS; i++) {
		size_t n = 16 + next(&x) % 496;
		if (arena) {
			slot[i] = arena + (size_t)i * SLOT_BYTES;
			report_alloc(slot[i], n, "bench");
		} else {
			slot[i] = mode == NEW ? cxx_new(n) : malloc(n);
		}
		if (!slot[i])
			abort();
		slot[i][0] = (unsigned char)i;
	}
	pthread_barrier_wait(&start);
	double c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	double t0 = now_ns();
	sum = run_pairs(slot, &x, arena);
	thread_ns[id] = now_ns() - t0;
	thread_cpu_ns[id] = clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
	sink += sum;
	/* Freed by main after the hold: a profiler sees them still live. */
	if (arena) {
		report_release(arena, (size_t)SLOTS * SLOT_BYTES);
		memset(slot, 0, SLOTS * sizeof *slot);
		slot[0] = arena; /* freed by main */
	}
	return slot;
}

int main(int argc, char **argv)
{
	if (argc < 3 || argc > 5) {
		fprintf(stderr, "usage: mallocwork THREADS PAIRS "
		                "[HOLD [malloc|pool|release]]\n");
		return 2;
	}
	int threads = atoi(argv[1]);
	pairs = atol(argv[2]);
	int hold = argc >= 4 && atoi(argv[3]);
	if (argc == 5 && strcmp(argv[4], "new") == 0) {
		mode = NEW;
		if (!dlopen("libstdc++.so.6", RTLD_NOW | RTLD_GLOBAL))
			return 2;
		cxx_new = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "_Znwm");
		cxx_delete = (void (*)(void *))dlsym(RTLD_DEFAULT, "_ZdlPv");
		if (!cxx_new || !cxx_delete)
			return 2;
	} else if (argc == 5 && strcmp(argv[4], "malloc") != 0) {
		mode = strcmp(argv[4], "release") == 0 ? RELEASE : POOL;
		void *a = dlsym(RTLD_DEFAULT, "pullprof_heap_alloc");
		void *f = dlsym(RTLD_DEFAULT, "pullprof_heap_free");
		void *r = dlsym(RTLD_DEFAULT, "pullprof_heap_release");
		if (a && f && r) {
			report_alloc =
			    (void (*)(const void *, size_t, const char *))a;
			report_free = (void (*)(const void *))f;
			report_release = (void (*)(const void *, size_t))r;
		}
	}
	pthread_t t[MAX_THREADS];
	void *slots[MAX_THREADS];

	if (threads < 1 || threads > MAX_THREADS || pairs < 1)
		return 2;
	pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
	for (int i = 0; i < threads; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i))
			return 1;
	pthread_barrier_wait(&start);
	double t0 = now_ns();
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], &slots[i]);
	double wall = now_ns() - t0, mean = 0, max = 0, cpu = 0;
	for (int i = 0; i < threads; i++) {
		double per = thread_ns[i] / (double)pairs;
		mean += per / threads;
		if (per > max)
			max = per;
		cpu += thread_cpu_ns[i] / (double)pairs / threads;
	}
	printf("ns_per_pair %.2f max %.2f wall_ms %.1f cpu_ns_per_pair %.2f\n",
	       mean, max, wall / 1e6, cpu);
	fflush(stdout);
	if (hold) {
		char buf[64];
		while (fgets(buf, sizeof buf, stdin))
			;
	}
	for (int i = 0; i < threads; i++) {
		unsigned char **slot = slots[i];
		for (int j = 0; j < SLOTS; j++)
			if (mode == NEW)
				cxx_delete(slot[j]);
			else
				free(slot[j]);
		free(slot);
	}
	return 0;
}

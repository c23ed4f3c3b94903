/*
 * tracework: CPU work on command, for bench/bench_trace.py. It starts the
 * agent (PULLPROF_LISTEN), prints "port N", then for each "burn THREADS MS"
 * line on stdin runs THREADS threads burning for MS milliseconds through a
 * few functions of different depths, and prints "burnt". Between commands
 * it is idle, so what the agent does then (rendering) is measured alone.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <pullprof.h>

#define NOINLINE __attribute__((noinline, used))

NOINLINE uint64_t tw_leaf(uint64_t x, int n);
NOINLINE uint64_t tw_mid(uint64_t x, int depth);
NOINLINE uint64_t tw_top(uint64_t x, int kind);

static volatile uint64_t sink;
static uint64_t until_ns;

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

NOINLINE uint64_t tw_leaf(uint64_t x, int n)
{
	for (int i = 0; i < n; i++)
		x = x * 6364136223846793005u + 1442695040888963407u;
	return x;
}

/* Recursion to a depth that varies with the work: many distinct stacks. */
NOINLINE uint64_t tw_mid(uint64_t x, int depth)
{
	if (depth <= 0)
		return tw_leaf(x, 3000);
	x = tw_mid(x ^ (uint64_t)depth, depth - 1);
	__asm__ volatile("" : "+r"(x));
	return x;
}

NOINLINE uint64_t tw_top(uint64_t x, int kind)
{
	return tw_mid(x, 2 + kind % 24);
}

static void *burner(void *arg)
{
	uint64_t x = (uintptr_t)arg + 1;
	int kind = 0;
	while (now_ns() < until_ns)
		x = tw_top(x, kind++);
	sink += x;
	return NULL;
}

int main(void)
{
	char line[64];
	if (pullprof_start(NULL) != 0) {
		fprintf(stderr, "tracework: the agent did not start\n");
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("port %d\n", pullprof_port());
	while (fgets(line, sizeof line, stdin)) {
		unsigned threads, ms;
		if (sscanf(line, "burn %u %u", &threads, &ms) != 2 ||
		    threads > 64)
			continue;
		pthread_t t[64];
		until_ns = now_ns() + (uint64_t)ms * 1000000u;
		for (unsigned i = 0; i < threads; i++)
			pthread_create(&t[i], NULL, burner,
			               (void *)(uintptr_t)i);
		for (unsigned i = 0; i < threads; i++)
			pthread_join(t[i], NULL);
		printf("burnt\n");
	}
	return 0;
}

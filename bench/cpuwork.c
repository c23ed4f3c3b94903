/*
 * cpuwork: a fixed amount of CPU work on THREADS threads, for the overhead
 * benchmark. Starts the pullprof agent (PULLPROF_LISTEN), prints its port,
 * waits DELAY ms (so a profile request can be opened), does the work and
 * prints the work's wall time and the worker threads' CPU time:
 *   port N
 *   wall_ms W cpu_ms C
 * then waits for end of input (so a profile window can finish) and exits.
 *
 *   cpuwork THREADS ITERATIONS DELAY_MS
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <pullprof.h>

static long iterations;
static double thread_cpu_ms[64];
static volatile uint64_t sink;

static double ms(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static __attribute__((noinline)) uint64_t work(uint64_t x)
{
	for (int i = 0; i < 10000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	return x;
}

static void *worker(void *arg)
{
	uint64_t x = (uintptr_t)arg + 1;
	for (long i = 0; i < iterations; i++)
		x = work(x);
	sink += x;
	thread_cpu_ms[(uintptr_t)arg] = ms(CLOCK_THREAD_CPUTIME_ID);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: cpuwork THREADS ITERATIONS DELAY_MS\n");
		return 2;
	}
	int threads = atoi(argv[1]);
	iterations = atol(argv[2]);
	pthread_t t[64];

	if (threads < 1 || threads > 64)
		return 2;
	int rc = pullprof_start(NULL);
	if (rc)
		fprintf(stderr, "cpuwork: no agent: %s\n",
		        pullprof_strerror(rc));
	printf("port %d\n", pullprof_port());
	fflush(stdout);
	usleep((useconds_t)atoi(argv[3]) * 1000);

	double t0 = ms(CLOCK_MONOTONIC);
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	double wall = ms(CLOCK_MONOTONIC) - t0, cpu = 0;
	for (int i = 0; i < threads; i++)
		cpu += thread_cpu_ms[i];
	printf("wall_ms %.1f cpu_ms %.1f\n", wall, cpu);
	fflush(stdout);
	char buf[64];
	while (fgets(buf, sizeof buf, stdin))
		;
	pullprof_stop();
	return 0;
}

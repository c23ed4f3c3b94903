/*
 * recordwork: a calm server with a CPU burst on command, for
 * bench/bench_record.py. It starts the agent (PULLPROF_LISTEN) and prints
 *   port N
 *   f ADDR
 * (burst_f's address in this process: with its size from the symbol
 * table, a profile whose stacks are bare addresses, gperftools', can be
 * attributed), then a
 * worker thread ("rw-worker") does a little work in calm_work() every
 * 50 ms, as an idle server's housekeeping would. For each line
 *   burst MS
 * on stdin the same worker runs burst_f() until it used MS ms of its own
 * CPU (a loaded machine stretches the wall time, not the work), then
 * prints
 *   burst START END CPU_NS
 * START and END the burst's Unix times (seconds, with a fraction), CPU_NS
 * the CPU the worker spent in burst_f(). The process ends when stdin does.
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

#define KEEP __attribute__((noinline, noclone, used))

KEEP uint64_t burst_f(uint64_t x, uint64_t cpu_ns);
KEEP uint64_t calm_work(uint64_t x);

static volatile uint64_t sink;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static long burst_ms; /* asked, 0: none */
static int quit;

static uint64_t ns_of(clockid_t c)
{
	struct timespec t;
	clock_gettime(c, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static uint64_t mix(uint64_t x)
{
	for (int k = 0; k < 1000; k++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	return x;
}

/* The burst: xorshift until this thread used cpu_ns of CPU. */
uint64_t burst_f(uint64_t x, uint64_t cpu_ns)
{
	uint64_t t0 = ns_of(CLOCK_THREAD_CPUTIME_ID);
	while (ns_of(CLOCK_THREAD_CPUTIME_ID) - t0 < cpu_ns)
		x = mix(x);
	return x;
}

/* About 1 ms of CPU: the calm period's housekeeping. */
uint64_t calm_work(uint64_t x)
{
	uint64_t t0 = ns_of(CLOCK_THREAD_CPUTIME_ID);
	while (ns_of(CLOCK_THREAD_CPUTIME_ID) - t0 < 1000000u)
		x = mix(x);
	return x;
}

static double real_s(void)
{
	return (double)ns_of(CLOCK_REALTIME) / 1e9;
}

static void *worker(void *arg)
{
	uint64_t x = (uintptr_t)arg + 88172645463325252ULL;
	pthread_setname_np(pthread_self(), "rw-worker");
	pthread_mutex_lock(&mu);
	while (!quit) {
		if (burst_ms) {
			long ms = burst_ms;
			pthread_mutex_unlock(&mu);
			double start = real_s();
			uint64_t c0 = ns_of(CLOCK_THREAD_CPUTIME_ID);
			x = burst_f(x, (uint64_t)ms * 1000000u);
			uint64_t cpu = ns_of(CLOCK_THREAD_CPUTIME_ID) - c0;
			double end = real_s();
			printf("burst %.6f %.6f %llu\n", start, end,
			       (unsigned long long)cpu);
			pthread_mutex_lock(&mu);
			burst_ms = 0;
			continue;
		}
		pthread_mutex_unlock(&mu);
		/* Polled: a burst starts within 50 ms of being asked. */
		x = calm_work(x);
		usleep(50000);
		pthread_mutex_lock(&mu);
	}
	pthread_mutex_unlock(&mu);
	sink += x;
	return NULL;
}

int main(void)
{
	char line[64];
	int rc = pullprof_start(NULL);
	if (rc)
		fprintf(stderr, "recordwork: no agent: %s\n",
		        pullprof_strerror(rc));
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("port %d\n", pullprof_port());
	printf("f %#lx\n", (unsigned long)(uintptr_t)burst_f);
	pthread_t t;
	pthread_create(&t, NULL, worker, NULL);
	while (fgets(line, sizeof line, stdin)) {
		long ms;
		if (sscanf(line, "burst %ld", &ms) != 1 || ms <= 0)
			continue;
		pthread_mutex_lock(&mu);
		burst_ms = ms;
		pthread_mutex_unlock(&mu);
	}
	pthread_mutex_lock(&mu);
	quit = 1;
	pthread_mutex_unlock(&mu);
	pthread_join(t, NULL);
	pullprof_stop();
	return 0;
}

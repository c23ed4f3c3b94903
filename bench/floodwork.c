/*
 * floodwork: the host's own work, for the flood benchmark
 * (bench/bench_flood.py). Starts the pullprof agent (PULLPROF_LISTEN),
 * prints its port, then for every line "run SECONDS" on stdin runs a
 * CPU-bound loop on one thread for that long and prints how much it did:
 *   port N
 *   rate R cpu_ms C        (work() calls per second, the thread's CPU time)
 * Exits at end of input. bench/peer_flood.go is the same program in Go,
 * serving net/http/pprof.
 *
 *   floodwork
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <pullprof.h>

static volatile uint64_t sink;

static double now_s(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The same work as bench/cpuwork and peer_flood.go: 10,000 xorshift
 * steps. */
static __attribute__((noinline)) uint64_t work(uint64_t x)
{
	for (int i = 0; i < 10000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	return x;
}

int main(void)
{
	char line[64];
	int rc = pullprof_start(NULL);

	if (rc)
		fprintf(stderr, "floodwork: no agent: %s\n",
		        pullprof_strerror(rc));
	printf("port %d\n", pullprof_port());
	fflush(stdout);
	while (fgets(line, sizeof line, stdin)) {
		double secs = 0;
		if (sscanf(line, "run %lf", &secs) != 1 || secs <= 0)
			continue;
		uint64_t x = 1, n = 0;
		double c0 = now_s(CLOCK_THREAD_CPUTIME_ID);
		double t0 = now_s(CLOCK_MONOTONIC), t = t0;
		while (t - t0 < secs) {
			for (int i = 0; i < 16; i++)
				x = work(x);
			n += 16;
			t = now_s(CLOCK_MONOTONIC);
		}
		sink += x;
		printf("rate %.1f cpu_ms %.1f\n", (double)n / (t - t0),
		       (now_s(CLOCK_THREAD_CPUTIME_ID) - c0) * 1e3);
		fflush(stdout);
	}
	pullprof_stop();
	return 0;
}

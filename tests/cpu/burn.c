/*
 * burn: known CPU work for the accuracy tests. THREADS threads named
 * "burn-N" each loop over burn_heavy (3 units of work) and burn_light
 * (1 unit), so three quarters of their CPU time is in burn_heavy. The agent
 * is started on PULLPROF_LISTEN (port 0 is fine) and the port printed.
 *
 *   burn THREADS SECONDS
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

static volatile int done;
static volatile uint64_t sink;

__attribute__((noinline)) uint64_t burn_heavy(uint64_t x);
__attribute__((noinline)) uint64_t burn_light(uint64_t x);

/* Each does its own work (no callee), so the leaf of every sample is
 * burn_heavy or burn_light itself. */
__attribute__((noinline)) uint64_t burn_heavy(uint64_t x)
{
	for (int k = 0; k < 3 * 20000; k++) {
		x ^= x << 13; /* MARK:heavy */
		x ^= x >> 7;
		x ^= x << 17;
	}
	return x;
}

__attribute__((noinline)) uint64_t burn_light(uint64_t x)
{
	for (int k = 0; k < 20000; k++) {
		x ^= x << 13; /* MARK:light */
		x ^= x >> 7;
		x ^= x << 17;
	}
	return x;
}

static void *burner(void *arg)
{
	char name[16];
	uint64_t x = (uintptr_t)arg + 88172645463325252ULL;

	snprintf(name, sizeof name, "burn-%d", (int)(uintptr_t)arg);
	pthread_setname_np(pthread_self(), name);
	while (!__atomic_load_n(&done, __ATOMIC_RELAXED)) {
		x = burn_heavy(x);
		x = burn_light(x);
	}
	__atomic_fetch_add(&sink, x, __ATOMIC_RELAXED);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: burn THREADS SECONDS\n");
		return 2;
	}
	int threads = atoi(argv[1]), seconds = atoi(argv[2]);
	pthread_t t[64];

	int rc = pullprof_start(NULL);
	if (rc) {
		fprintf(stderr, "burn: %s\n", pullprof_strerror(rc));
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 0; i < threads && i < 64; i++)
		pthread_create(&t[i], NULL, burner, (void *)(uintptr_t)i);
	printf("port %d\n", pullprof_port());
	sleep((unsigned)seconds);
	__atomic_store_n(&done, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < threads && i < 64; i++)
		pthread_join(t[i], NULL);
	printf("done\n");
	pullprof_stop();
	return 0;
}

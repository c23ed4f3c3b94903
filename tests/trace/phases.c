/*
 * phases: CPU work at known times, for the trace tests. Two threads,
 * "phase-a" and "phase-b", burn in turn: on each "go MS" line on stdin,
 * phase-a runs phase_a_work for MS milliseconds, then phase-b runs
 * phase_b_work for MS milliseconds, and the host prints
 * "phases A0 A1 B0 B1" (CLOCK_MONOTONIC nanoseconds: when each burnt from
 * and to). A third thread, "idle", sleeps in idle_wait throughout. The agent
 * starts on PULLPROF_LISTEN; the host prints "port N" and then "ready".
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pullprof.h>

#define KEEP __attribute__((noinline, used))

KEEP void phase_a_work(uint64_t until);
KEEP void phase_b_work(uint64_t until);
KEEP void idle_wait(void);

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int turn;         /* 1: phase-a's, 2: phase-b's, 0: nobody's */
static unsigned burn_ms; /* how long each burns */
static uint64_t at[4];   /* A0 A1 B0 B1 */
static volatile uint64_t sink;

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Burn until `until`, in this very function (no callee but the clock). */
KEEP void phase_a_work(uint64_t until)
{
	uint64_t x = 1;
	while (now_ns() < until)
		for (int k = 0; k < 2000; k++)
			x = x * 6364136223846793005u + 1442695040888963407u;
	sink = x;
}

KEEP void phase_b_work(uint64_t until)
{
	uint64_t x = 3;
	while (now_ns() < until)
		for (int k = 0; k < 2000; k++)
			x = x * 2862933555777941757u + 3037000493u;
	sink = x;
}

KEEP void idle_wait(void)
{
	for (;;)
		sleep(3600);
}

static void *idle_main(void *arg)
{
	(void)arg;
	idle_wait();
	return NULL;
}

static void *phase_main(void *arg)
{
	int me = (int)(intptr_t)arg;
	pthread_mutex_lock(&mu);
	for (;;) {
		while (turn != me)
			pthread_cond_wait(&cv, &mu);
		pthread_mutex_unlock(&mu);
		uint64_t t0 = now_ns();
		if (me == 1)
			phase_a_work(t0 + (uint64_t)burn_ms * 1000000u);
		else
			phase_b_work(t0 + (uint64_t)burn_ms * 1000000u);
		uint64_t t1 = now_ns();
		pthread_mutex_lock(&mu);
		at[(me - 1) * 2] = t0;
		at[(me - 1) * 2 + 1] = t1;
		turn = me == 1 ? 2 : 0;
		pthread_cond_broadcast(&cv);
	}
	return NULL;
}

static void start(const char *name, void *(*fn)(void *), void *arg)
{
	pthread_t t;
	if (pthread_create(&t, NULL, fn, arg)) {
		perror("pthread_create");
		exit(1);
	}
	pthread_setname_np(t, name);
}

int main(void)
{
	char line[64];
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (pullprof_start(NULL) != 0) {
		fprintf(stderr, "phases: the agent did not start\n");
		return 1;
	}
	printf("port %d\n", pullprof_port());
	start("phase-a", phase_main, (void *)(intptr_t)1);
	start("phase-b", phase_main, (void *)(intptr_t)2);
	start("idle", idle_main, NULL);
	printf("ready\n");
	while (fgets(line, sizeof line, stdin)) {
		unsigned ms;
		if (sscanf(line, "go %u", &ms) != 1)
			continue;
		pthread_mutex_lock(&mu);
		burn_ms = ms;
		turn = 1;
		pthread_cond_broadcast(&cv);
		while (turn != 0)
			pthread_cond_wait(&cv, &mu);
		printf("phases %llu %llu %llu %llu\n",
		       (unsigned long long)at[0], (unsigned long long)at[1],
		       (unsigned long long)at[2], (unsigned long long)at[3]);
		pthread_mutex_unlock(&mu);
	}
	return 0;
}

/*
 * threadswork: the host for the thread dump and wall-clock benchmark
 * (bench/bench_threads.py). Starts the pullprof agent (PULLPROF_LISTEN),
 * prints its port, then starts N threads that block for good in four
 * different calls, each under a function of its own so a dump can be
 * checked for them:
 *   block_in_condvar   pthread_cond_wait on a condition nobody signals
 *   block_in_nanosleep nanosleep of an hour
 *   block_in_read      read on a pipe nobody writes
 *   block_in_epoll     epoll_wait on an empty epoll set
 * and one worker thread ("worker") doing CPU work in units of ~20 µs,
 * reading CLOCK_MONOTONIC after every unit and keeping the longest gap
 * between two units: a ptrace stop (gdb) or anything else that keeps the
 * worker off its CPU shows as that gap. Protocol on stdout/stdin:
 *   port P                 (after the agent started)
 *   ready                  (every blocked thread and the worker started)
 *   stats -> units U maxgap_us G   (units so far, the longest gap since
 *                           the last "stats"; the gap is reset)
 * Exits at end of input.
 *
 *   threadswork N
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include <pullprof.h>

/* Small stacks, as a server with thousands of threads would set them:
 * 3000 threads at the default 8 MiB would reserve 24 GiB of address
 * space, and a stack walker from outside should not depend on big ones. */
#define STACK_SIZE (64 * 1024)

static pthread_mutex_t never_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never_cv = PTHREAD_COND_INITIALIZER;
static int never_fd[2] = {-1, -1}; /* a pipe whose write end stays silent */
static int never_ep = -1;          /* an epoll set with nothing in it */

static atomic_int started;         /* blocked threads about to block */
static _Atomic uint64_t units;     /* work units the worker finished */
static _Atomic uint64_t maxgap_ns; /* longest gap since the last "stats" */
static volatile uint64_t sink;

/* Every blocking function loops: if a call ever returns (EINTR after a
 * ptrace stop, a spurious condvar wakeup) the thread goes straight back
 * to the same place, so every dump sees the same picture. noinline keeps
 * each one a frame of its own under its own name. */
static __attribute__((noinline)) void block_in_condvar(void)
{
	pthread_mutex_lock(&never_mu);
	for (;;)
		pthread_cond_wait(&never_cv, &never_mu);
}

static __attribute__((noinline)) void block_in_nanosleep(void)
{
	for (;;) {
		struct timespec ts = {.tv_sec = 3600};
		nanosleep(&ts, NULL);
	}
}

static __attribute__((noinline)) void block_in_read(void)
{
	char c;
	for (;;)
		if (read(never_fd[0], &c, 1) == 0)
			return; /* cannot happen: the write end stays open */
}

static __attribute__((noinline)) void block_in_epoll(void)
{
	struct epoll_event ev;
	for (;;)
		epoll_wait(never_ep, &ev, 1, -1);
}

static void *blocked_main(void *arg)
{
	static const char *const names[] = {"blk-condvar", "blk-nanosleep",
	                                    "blk-read", "blk-epoll"};
	int kind = (int)(intptr_t)arg;

	pthread_setname_np(pthread_self(), names[kind]);
	atomic_fetch_add(&started, 1);
	switch (kind) {
	case 0: block_in_condvar(); break;
	case 1: block_in_nanosleep(); break;
	case 2: block_in_read(); break;
	default: block_in_epoll(); break;
	}
	return NULL;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One unit: 10,000 xorshift steps, the work of bench/floodwork and
 * bench/cpuwork (~20 µs here), short enough that a stall of a
 * millisecond stands out from the gaps of normal running. */
static __attribute__((noinline)) uint64_t work_unit(uint64_t x)
{
	for (int i = 0; i < 10000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	return x;
}

static void *worker_main(void *arg)
{
	uint64_t x = 1, last = now_ns();

	(void)arg;
	pthread_setname_np(pthread_self(), "worker");
	for (;;) {
		x = work_unit(x);
		uint64_t t = now_ns(), gap = t - last;
		last = t;
		atomic_fetch_add_explicit(&units, 1, memory_order_relaxed);
		/* A compare-exchange rather than a plain store, so a reset by
		 * "stats" between the load and the store is not undone. */
		uint64_t m =
		    atomic_load_explicit(&maxgap_ns, memory_order_relaxed);
		while (gap > m &&
		       !atomic_compare_exchange_weak(&maxgap_ns, &m, gap))
			;
		sink = x; /* keep the work from being optimized away */
	}
	return NULL;
}

static int start_thread(void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, STACK_SIZE);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return rc;
}

int main(int argc, char **argv)
{
	char line[64];
	int n = argc > 1 ? atoi(argv[1]) : 0;
	int rc = pullprof_start(NULL);

	if (rc)
		fprintf(stderr, "threadswork: no agent: %s\n",
		        pullprof_strerror(rc));
	printf("port %d\n", pullprof_port());
	fflush(stdout);

	if (pipe(never_fd) || (never_ep = epoll_create1(0)) < 0) {
		perror("threadswork: pipe/epoll");
		return 1;
	}
	for (int i = 0; i < n; i++) {
		rc = start_thread(blocked_main, (void *)(intptr_t)(i % 4));
		if (rc) {
			fprintf(stderr, "threadswork: thread %d: %s\n", i,
			        strerror(rc));
			return 1;
		}
	}
	/* "ready" once every thread is at most a few instructions from its
	 * call, plus a moment for the last ones to get into the kernel. */
	while (atomic_load(&started) < n)
		usleep(1000);
	usleep(100 * 1000);
	if ((rc = start_thread(worker_main, NULL))) {
		fprintf(stderr, "threadswork: worker: %s\n", strerror(rc));
		return 1;
	}
	/* A unit done means the worker has its name: the benchmark finds it
	 * by name as soon as it reads "ready". */
	while (atomic_load(&units) == 0)
		usleep(1000);
	printf("ready\n");
	fflush(stdout);

	while (fgets(line, sizeof line, stdin)) {
		if (strncmp(line, "stats", 5) != 0)
			continue;
		uint64_t g = atomic_exchange(&maxgap_ns, 0);
		printf("units %llu maxgap_us %llu\n",
		       (unsigned long long)atomic_load(&units),
		       (unsigned long long)(g / 1000));
		fflush(stdout);
	}
	pullprof_stop();
	return 0;
}

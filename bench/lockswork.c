/*
 * lockswork: pthread lock loads for the lock contention benchmark
 * (bench/bench_locks.py). Not linked with pullprof: the lock calls reach
 * pullprof's wrappers only when it is preloaded (LD_PRELOAD), so the same
 * binary runs alone, preloaded, and under valgrind's callgrind and drd.
 *
 *   lockswork uncontended PAIRS [OPS [IDLE]]
 *       One thread, no other thread touching the locks. For each of OPS
 *       (a comma-separated list of mutex, rwlock, sem; default all three)
 *       PAIRS pairs are timed with CLOCK_MONOTONIC, one line each:
 *         mutex_ns N    pthread_mutex_lock + pthread_mutex_unlock
 *         rwlock_ns N   pthread_rwlock_rdlock + pthread_rwlock_unlock
 *         sem_ns N      sem_post + sem_wait (the count never waits)
 *       Each loop is a function of its own (run_mutex, run_rwlock,
 *       run_sem) so that callgrind can count it alone (--toggle-collect).
 *       With IDLE 1 a second thread is started first and left blocked in
 *       pause(): the C library then knows the process is multi-threaded
 *       (__libc_single_threaded false), as it is whenever an agent's
 *       threads run, and takes its locks with locked instructions; a
 *       process with one thread gets unlocked compare-and-swaps instead.
 *
 *   lockswork contended SECS [HOLD [PIN]]
 *       Two threads take one default mutex as often as they can for SECS
 *       seconds; inside it they add one to a shared counter and do about
 *       50 ns of work (WORK_ITERS dependent multiply-adds). With PIN 1
 *       the two threads are pinned to CPUs 0 and 1. One line:
 *         contended pairs P secs S found_held H sleeps V preempted I
 *                   threads_cpu_s T agent_cpu_ms A work_ns W
 *                   slower_share F counter_ok C
 *       P: lock+unlock pairs of both threads; S: wall seconds from the
 *       start barrier to the stop; H: lock calls made while the other
 *       thread was inside the critical section (a flag the holder sets,
 *       read just before the call: the workload's own count of lock calls
 *       that had to wait, taken the same way in every configuration and
 *       not by the profiler); V, I: the two threads' voluntary and
 *       involuntary context switches (getrusage RUSAGE_THREAD: V counts
 *       the sleeps in the kernel, futex waits); T: the two threads' CPU
 *       seconds (CLOCK_THREAD_CPUTIME_ID); A: the process's CPU over
 *       the run less the two threads' and main's own, in ms (what
 *       anything else in the process, a preloaded agent, used); W: ns of
 *       one work unit alone, timed before the run; F: the pairs of the
 *       thread that made fewer, over P (0.5: both alike; how fair the
 *       lock was); C: 1 when the counter
 *       equals P (the mutex excluded).
 *       With HOLD 1 it then waits for end of input before exiting, so
 *       that a script can read a preloaded agent's /status.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<valgrind/drd.h>)
#include <valgrind/drd.h> /* only client requests: no-ops natively */
#endif
#endif
#ifndef DRD_IGNORE_VAR
#define DRD_IGNORE_VAR(x) ((void)0)
#endif

#define WORK_ITERS 54

static double clock_s(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double now_ns(void)
{
	return clock_s(CLOCK_MONOTONIC) * 1e9;
}

/* ---- uncontended pairs -----------------------------------------------------
 */

static pthread_mutex_t mu1 = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t rw1 = PTHREAD_RWLOCK_INITIALIZER;
static sem_t sem1;

/* noipa: no clone with another name, so callgrind finds each by name. */
static __attribute__((noinline, noipa)) void run_mutex(long pairs)
{
	for (long i = 0; i < pairs; i++) {
		pthread_mutex_lock(&mu1);
		__asm__ volatile("" ::: "memory");
		pthread_mutex_unlock(&mu1);
	}
}

static __attribute__((noinline, noipa)) void run_rwlock(long pairs)
{
	for (long i = 0; i < pairs; i++) {
		pthread_rwlock_rdlock(&rw1);
		__asm__ volatile("" ::: "memory");
		pthread_rwlock_unlock(&rw1);
	}
}

static __attribute__((noinline, noipa)) void run_sem(long pairs)
{
	for (long i = 0; i < pairs; i++) {
		sem_post(&sem1);
		__asm__ volatile("" ::: "memory");
		sem_wait(&sem1);
	}
}

static void *idle(void *arg)
{
	for (;;)
		pause();
	return arg;
}

static int uncontended(long pairs, const char *ops, int idle_thread)
{
	static const struct {
		const char *name;
		void (*run)(long);
	} all[] = {
	    {"mutex", run_mutex}, {"rwlock", run_rwlock}, {"sem", run_sem}};
	if (sem_init(&sem1, 0, 0))
		return 1;
	pthread_t t;
	if (idle_thread && pthread_create(&t, NULL, idle, NULL))
		return 1;
	for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
		if (!strstr(ops, all[k].name))
			continue;
		all[k].run(pairs / 100); /* warm: caches, lazy binding */
		double t0 = now_ns();
		all[k].run(pairs);
		double t1 = now_ns();
		printf("%s_ns %.3f\n", all[k].name, (t1 - t0) / (double)pairs);
	}
	return 0;
}

/* ---- contended mutex -------------------------------------------------------
 */

static pthread_mutex_t mu2 = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int holder; /* 1 while a thread is inside the section */
static uint64_t counter;
static _Alignas(64) _Atomic int stop;
static pthread_barrier_t start;

struct worker {
	int cpu_pin; /* -1: not pinned */
	uint64_t pairs, found_held;
	long nvcsw, nivcsw;
	double cpu;
	char pad[64];
};

static inline uint64_t work(uint64_t x)
{
	for (int i = 0; i < WORK_ITERS; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		__asm__ volatile("" : "+r"(x));
	}
	return x;
}

static volatile uint64_t sink;

static void *hammer(void *arg)
{
	struct worker *w = arg;
	uint64_t x = (uintptr_t)arg, pairs = 0, held = 0;
	if (w->cpu_pin >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(w->cpu_pin, &set);
		pthread_setaffinity_np(pthread_self(), sizeof set, &set);
	}
	pthread_barrier_wait(&start);
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		if (atomic_load_explicit(&holder, memory_order_relaxed))
			held++;
		pthread_mutex_lock(&mu2);
		atomic_store_explicit(&holder, 1, memory_order_relaxed);
		counter++;
		x = work(x);
		atomic_store_explicit(&holder, 0, memory_order_relaxed);
		pthread_mutex_unlock(&mu2);
		pairs++;
	}
	sink = x;
	struct rusage ru;
	getrusage(RUSAGE_THREAD, &ru);
	w->pairs = pairs;
	w->found_held = held;
	w->nvcsw = ru.ru_nvcsw;
	w->nivcsw = ru.ru_nivcsw;
	w->cpu = clock_s(CLOCK_THREAD_CPUTIME_ID);
	return NULL;
}

static int contended(double secs, int hold, int pin)
{
	/* One work unit alone, for the record. */
	uint64_t x = 1;
	double t0 = now_ns();
	for (int i = 0; i < 100000; i++)
		x = work(x);
	double work_ns = (now_ns() - t0) / 100000;
	sink = x;

	/* Read and written without the lock on purpose (C11 atomics, which
	 * drd does not know): not races to report under drd. */
	DRD_IGNORE_VAR(holder);
	DRD_IGNORE_VAR(stop);
	DRD_IGNORE_VAR(sink);

	struct worker w[2];
	pthread_t t[2];
	memset(w, 0, sizeof w);
	for (int i = 0; i < 2; i++)
		w[i].cpu_pin = pin ? i : -1;
	double proc0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
	double main0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
	pthread_barrier_init(&start, NULL, 3);
	for (int i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, hammer, &w[i]))
			return 1;
	pthread_barrier_wait(&start);
	double s0 = now_ns();
	struct timespec d = {(time_t)secs,
	                     (long)((secs - (double)(time_t)secs) * 1e9)};
	while (nanosleep(&d, &d))
		;
	atomic_store_explicit(&stop, 1, memory_order_relaxed);
	double s1 = now_ns();
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	double proc1 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
	double main1 = clock_s(CLOCK_THREAD_CPUTIME_ID);

	uint64_t pairs = w[0].pairs + w[1].pairs;
	double agent = (proc1 - proc0) - (main1 - main0) - w[0].cpu - w[1].cpu;
	printf("contended pairs %llu secs %.3f found_held %llu sleeps %ld "
	       "preempted %ld threads_cpu_s %.3f agent_cpu_ms %.1f "
	       "work_ns %.1f slower_share %.3f counter_ok %d\n",
	       (unsigned long long)pairs, (s1 - s0) / 1e9,
	       (unsigned long long)(w[0].found_held + w[1].found_held),
	       w[0].nvcsw + w[1].nvcsw, w[0].nivcsw + w[1].nivcsw,
	       w[0].cpu + w[1].cpu, agent * 1e3, work_ns,
	       pairs ? (double)(w[0].pairs < w[1].pairs ? w[0].pairs
	                                                : w[1].pairs) /
	                   (double)pairs
	             : 0.0,
	       counter == pairs);
	fflush(stdout);
	if (hold) {
		char buf[64];
		while (fgets(buf, sizeof buf, stdin))
			;
	}
	return counter == pairs ? 0 : 2;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "uncontended")) {
		long pairs = atol(argv[2]);
		if (pairs > 0)
			return uncontended(
			    pairs, argc > 3 ? argv[3] : "mutex,rwlock,sem",
			    argc > 4 && atoi(argv[4]));
	} else if (argc >= 3 && !strcmp(argv[1], "contended")) {
		double secs = atof(argv[2]);
		if (secs > 0)
			return contended(secs, argc > 3 && atoi(argv[3]),
			                 argc > 4 && atoi(argv[4]));
	}
	fprintf(stderr, "usage: lockswork uncontended PAIRS [OPS [IDLE]]\n"
	                "       lockswork contended SECS [HOLD [PIN]]\n");
	return 2;
}

/*
 * The record's test host (test_record.py): it links libpullprof, starts the
 * agent with the environment's settings, prints "port N", and is driven
 * line by line on stdin:
 *
 *   phase alpha|beta SECONDS   burn CPU in phase_alpha() or phase_beta() on
 *                              the main thread for SECONDS of wall time
 *                              -> "phase T0 T1 CPU" (Unix seconds at start
 *                              and end, the thread's CPU seconds used)
 *   both SECONDS               phase_alpha() on a second thread and
 *                              phase_beta() here, at once -> "both T0 T1
 *                              CPU_ALPHA CPU_BETA" (each thread's seconds)
 *   deep THREADS SECONDS       THREADS threads, each recursing through
 *                              eight functions in an order of its own to a
 *                              depth of its own (60..120), burning CPU at
 *                              the bottom and coming back up, again and
 *                              again: many deep, varied stacks, for at most
 *                              SECONDS -> "deep started"
 *   deepstop                   stop them now -> "deep done"
 *   grow MB SECONDS            grow_site() allocates MB MiB in 64 KiB blocks
 *                              over SECONDS and keeps them -> "grow T0 T1"
 *   release                    frees them -> "released T"
 *   contend SECONDS            four threads take one mutex in
 *                              contend_site(), each holding it 2 ms
 *                              -> "contend T0 T1"
 *   save REASON                pullprof_record_save(REASON) -> "saved RC"
 *   saves N                    N saves in a row, as fast as they go
 *                              -> "saves OK BUSY OTHER" (how many gave an
 *                              id, -EBUSY, anything else)
 *   now                        -> "now T" (Unix seconds)
 *   quit                       exit 0
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pullprof.h"

static double now_real(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double cpu_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Named in the profiles the test reads: not static. */
void phase_alpha(double seconds);
void phase_beta(double seconds);
void grow_site(unsigned mb, double seconds);
void contend_site(double seconds);

/* Each thread's work lands in a sink of its own (threads share none of
 * it: a ThreadSanitizer build checks the host too). */
static __thread volatile uint64_t sink;
static atomic_int deep_stop;

static __attribute__((noinline)) uint64_t spin_a(uint64_t n)
{
	uint64_t x = n;
	for (int i = 0; i < 20000; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return x;
}

static __attribute__((noinline)) uint64_t spin_b(uint64_t n)
{
	uint64_t x = n ^ 0x9e3779b97f4a7c15ull;
	for (int i = 0; i < 20000; i++)
		x = (x ^ (x >> 31)) * 0xbf58476d1ce4e5b9ull;
	return x;
}

__attribute__((noinline)) void phase_alpha(double seconds)
{
	double end = now_real() + seconds;
	while (now_real() < end)
		sink += spin_a(sink);
}

__attribute__((noinline)) void phase_beta(double seconds)
{
	double end = now_real() + seconds;
	while (now_real() < end)
		sink += spin_b(sink);
}

static double alpha_cpu;

static void *alpha_thread(void *arg)
{
	double c0 = cpu_now();
	phase_alpha(*(double *)arg);
	alpha_cpu = cpu_now() - c0;
	return NULL;
}

/* Memory and locks. */

static void **blocks;
static size_t nblocks;

__attribute__((noinline)) void grow_site(unsigned mb, double seconds)
{
	size_t n = (size_t)mb * 16; /* 64 KiB each */
	void **b = realloc(blocks, (nblocks + n) * sizeof *b);
	if (!b)
		return;
	blocks = b;
	double start = now_real();
	for (size_t i = 0; i < n; i++) {
		blocks[nblocks] = malloc(64 << 10);
		memset(blocks[nblocks], 1, 64 << 10);
		nblocks++;
		/* Spread over the seconds asked. */
		double due = start + seconds * (double)(i + 1) / (double)n;
		while (now_real() < due) {
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, NULL);
		}
	}
}

static pthread_mutex_t contended = PTHREAD_MUTEX_INITIALIZER;

__attribute__((noinline)) void contend_site(double seconds)
{
	double end = now_real() + seconds;
	while (now_real() < end) {
		pthread_mutex_lock(&contended);
		struct timespec ts = {0, 2000000};
		nanosleep(&ts, NULL);
		pthread_mutex_unlock(&contended);
	}
}

static void *contend_thread(void *arg)
{
	contend_site(*(double *)arg);
	return NULL;
}

/* ---- deep, varied stacks --------------------------------------------------
 */

struct deep {
	unsigned seed, depth;
	double end;
};

typedef uint64_t (*step_fn)(struct deep *, unsigned, uint64_t);
static uint64_t step(struct deep *d, unsigned level, uint64_t x);

#define STEP(n)                                                                \
	static __attribute__((noinline))                                       \
	uint64_t step##n(struct deep *d, unsigned level, uint64_t x)           \
	{                                                                      \
		uint64_t r = step(d, level + 1, x * (n + 3));                  \
		__asm__ volatile("" ::: "memory");                             \
		return r + n;                                                  \
	}
STEP(0)
STEP(1)
STEP(2)
STEP(3)
STEP(4)
STEP(5)
STEP(6)
STEP(7)
static const step_fn steps[8] = {step0, step1, step2, step3,
                                 step4, step5, step6, step7};

static uint64_t step(struct deep *d, unsigned level, uint64_t x)
{
	if (level >= d->depth)
		return spin_a(x) + spin_b(x);
	/* The path through the eight functions is the thread's own. */
	unsigned k = (d->seed >> (level % 24)) ^ (level * 2654435761u);
	return steps[k & 7](d, level, x);
}

static pthread_t *deep_t;
static struct deep *deep_d;
static unsigned deep_n;

static void *deep_thread(void *arg)
{
	struct deep *d = arg;
	while (!atomic_load(&deep_stop) && now_real() < d->end) {
		sink += step(d, 0, d->seed);
		/* Another path and depth now and then. */
		d->seed = d->seed * 1103515245u + 12345u;
		d->depth = 60 + d->seed % 61;
	}
	return NULL;
}

int main(void)
{
	char line[512];
	struct pullprof_config cfg;
	pullprof_config_init(&cfg);
	int rc = pullprof_start(&cfg);
	if (rc) {
		printf("err %d %s\n", rc, pullprof_strerror(rc));
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("port %d\n", pullprof_port());
	while (fgets(line, sizeof line, stdin)) {
		char what[64], reason[256];
		double secs;
		unsigned n;
		if (sscanf(line, "phase %63s %lf", what, &secs) == 2) {
			double t0 = now_real(), c0 = cpu_now();
			if (!strcmp(what, "alpha"))
				phase_alpha(secs);
			else
				phase_beta(secs);
			printf("phase %.6f %.6f %.6f\n", t0, now_real(),
			       cpu_now() - c0);
		} else if (sscanf(line, "both %lf", &secs) == 1) {
			pthread_t t;
			double t0 = now_real(), c0 = cpu_now();
			pthread_create(&t, NULL, alpha_thread, &secs);
			phase_beta(secs);
			double beta_cpu = cpu_now() - c0;
			pthread_join(t, NULL);
			printf("both %.6f %.6f %.6f %.6f\n", t0, now_real(),
			       alpha_cpu, beta_cpu);
		} else if (sscanf(line, "deep %u %lf", &n, &secs) == 2) {
			deep_t = calloc(n, sizeof *deep_t);
			deep_d = calloc(n, sizeof *deep_d);
			deep_n = n;
			double end = now_real() + secs;
			atomic_store(&deep_stop, 0);
			for (unsigned i = 0; i < n; i++) {
				deep_d[i] = (struct deep){2654435761u * (i + 1),
				                          60 + i % 61, end};
				pthread_create(&deep_t[i], NULL, deep_thread,
				               &deep_d[i]);
			}
			printf("deep started\n");
		} else if (!strncmp(line, "deepstop", 8)) {
			atomic_store(&deep_stop, 1);
			for (unsigned i = 0; i < deep_n; i++)
				pthread_join(deep_t[i], NULL);
			free(deep_t);
			free(deep_d);
			deep_n = 0;
			printf("deep done\n");
		} else if (sscanf(line, "grow %u %lf", &n, &secs) == 2) {
			double t0 = now_real();
			grow_site(n, secs);
			printf("grow %.6f %.6f\n", t0, now_real());
		} else if (!strncmp(line, "release", 7)) {
			for (size_t i = 0; i < nblocks; i++)
				free(blocks[i]);
			nblocks = 0;
			printf("released %.6f\n", now_real());
		} else if (sscanf(line, "contend %lf", &secs) == 1) {
			pthread_t t[4];
			double t0 = now_real();
			for (int i = 0; i < 4; i++)
				pthread_create(&t[i], NULL, contend_thread,
				               &secs);
			for (int i = 0; i < 4; i++)
				pthread_join(t[i], NULL);
			printf("contend %.6f %.6f\n", t0, now_real());
		} else if (sscanf(line, "saves %u", &n) == 1) {
			unsigned good = 0, busy = 0, other = 0;
			for (unsigned i = 0; i < n; i++) {
				int src = pullprof_record_save("burst");
				if (src > 0)
					good++;
				else if (src == -EBUSY)
					busy++;
				else
					other++;
			}
			printf("saves %u %u %u\n", good, busy, other);
		} else if (sscanf(line, "save %255[^\n]", reason) == 1) {
			printf("saved %d\n", pullprof_record_save(reason));
		} else if (!strncmp(line, "now", 3)) {
			printf("now %.6f\n", now_real());
		} else if (!strncmp(line, "quit", 4)) {
			break;
		} else {
			printf("unknown\n");
		}
	}
	pullprof_stop();
	return 0;
}

/*
 * demo: a long-running program that links libpullprof and keeps a few threads
 * busy with different kinds of work, so its profiles show something real:
 *
 *   - "hash" threads: CPU-bound FNV/xorshift hashing over a buffer;
 *   - a "sort" thread: allocates arrays, sorts them with qsort, frees most;
 *   - a "cache" thread: keeps a rolling set of live allocations of mixed sizes
 *     (what a heap profile of a server looks like).
 *
 * Usage: demo [--threads N] [--seconds S]
 *   --threads N   hashing threads (default 2)
 *   --seconds S   exit after S seconds (default 0: run until interrupted)
 * The agent listens on PULLPROF_LISTEN (default 127.0.0.1:6060).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* pthread_setname_np */
#endif
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pullprof.h>

/* Shared between threads (and the signal handler): atomic, not just
 * volatile, which orders nothing between threads (ThreadSanitizer). */
static sig_atomic_t done;
static uint64_t sink;
#define DONE() __atomic_load_n(&done, __ATOMIC_RELAXED)
#define SINK(v) __atomic_fetch_add(&sink, (v), __ATOMIC_RELAXED)

static void on_signal(int sig)
{
	(void)sig;
	__atomic_store_n(&done, 1, __ATOMIC_RELAXED);
}

static uint64_t __attribute__((noinline)) hash_block(const uint8_t *p, size_t n)
{
	uint64_t h = 1469598103934665603ULL;
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 1099511628211ULL;
	}
	return h;
}

static void __attribute__((noinline)) mix_rounds(uint64_t *state, int rounds)
{
	for (int i = 0; i < rounds; i++) {
		*state ^= *state << 13;
		*state ^= *state >> 7;
		*state ^= *state << 17;
	}
}

static void *hash_worker(void *arg)
{
	uint8_t buf[4096];
	uint64_t s = (uintptr_t)arg + 88172645463325252ULL;

	pthread_setname_np(pthread_self(), "demo-hash");
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (uint8_t)(i * 31);
	while (!DONE()) {
		SINK(hash_block(buf, sizeof buf)); /* about two thirds */
		mix_rounds(&s, 2000);              /* about one third */
		buf[s % sizeof buf] = (uint8_t)s;
	}
	return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

static void *sort_worker(void *arg)
{
	uint32_t seed = 12345;
	(void)arg;

	pthread_setname_np(pthread_self(), "demo-sort");
	while (!DONE()) {
		size_t n = 20000 + seed % 20000;
		uint32_t *v = malloc(n * sizeof *v);
		if (!v)
			continue;
		for (size_t i = 0; i < n; i++) {
			seed = seed * 1664525u + 1013904223u;
			v[i] = seed;
		}
		qsort(v, n, sizeof *v, cmp_u32);
		SINK(v[n / 2]);
		free(v);
		struct timespec ts = {0, 2 * 1000 * 1000};
		nanosleep(&ts, NULL); /* leaves some idle time in the profile */
	}
	return NULL;
}

#define CACHE_SLOTS 4096

static void *cache_worker(void *arg)
{
	static void *slots[CACHE_SLOTS];
	uint32_t seed = 777;
	(void)arg;

	pthread_setname_np(pthread_self(), "demo-cache");
	while (!DONE()) {
		for (int k = 0; k < 256; k++) {
			seed = seed * 1664525u + 1013904223u;
			size_t i = seed % CACHE_SLOTS;
			/* Mostly small objects, now and then a large one. */
			size_t size = (seed >> 8) % 100 < 95
			                  ? 32 + (seed >> 16) % 480
			                  : 64 * 1024 + (seed >> 16) % 65536;
			free(slots[i]);
			slots[i] = malloc(size);
			if (slots[i])
				memset(slots[i], (int)k, size < 64 ? size : 64);
		}
		struct timespec ts = {0, 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	for (int i = 0; i < CACHE_SLOTS; i++)
		free(slots[i]);
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = 2, seconds = 0;
	pthread_t tid[66];
	int n = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
			threads = atoi(argv[++i]);
		else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
			seconds = atoi(argv[++i]);
		else {
			fprintf(stderr,
			        "usage: %s [--threads N] [--seconds S]\n",
			        argv[0]);
			return 2;
		}
	}
	if (threads < 0 || threads > 64) {
		fprintf(stderr, "demo: --threads must be 0..64\n");
		return 2;
	}

	struct pullprof_config cfg;
	pullprof_config_init(&cfg);
	int rc = pullprof_start(&cfg);
	if (rc == -EALREADY)
		rc = 0; /* started by PULLPROF_AUTOSTART=1 */
	if (rc < 0) {
		/* The agent already wrote why; a real server would run on. */
		fprintf(stderr,
		        "demo: running without the profiling agent (%s)\n",
		        pullprof_strerror(rc));
	} else {
		const char *p = getenv("PULLPROF_PREFIX");
		char base[128];
		snprintf(base, sizeof base, "http://127.0.0.1:%d%s",
		         pullprof_port(), p ? p : "/debug/pprof");
		printf(
		    "demo (pid %d): pullprof %s is serving on port %d\n"
		    "  index:   %s/\n"
		    "  status:  curl -s %s/status\n"
		    "  cmdline: curl -s %s/cmdline | tr '\\0' ' '\n"
		    "  CPU:     go tool pprof -top '%s/profile?seconds=5'\n"
		    "  heap:    go tool pprof -sample_index=inuse_space -top "
		    "%s/heap\n",
		    (int)getpid(), pullprof_version(), pullprof_port(), base,
		    base, base, base, base);
		fflush(stdout);
	}

	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	for (int i = 0; i < threads; i++)
		pthread_create(&tid[n++], NULL, hash_worker,
		               (void *)(uintptr_t)i);
	pthread_create(&tid[n++], NULL, sort_worker, NULL);
	pthread_create(&tid[n++], NULL, cache_worker, NULL);

	time_t end = seconds > 0 ? time(NULL) + seconds : 0;
	while (!DONE() && (!end || time(NULL) < end))
		usleep(100 * 1000);
	__atomic_store_n(&done, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < n; i++)
		pthread_join(tid[i], NULL);
	pullprof_stop();
	printf("demo: done\n");
	return 0;
}

/*
 * capture: a program that writes its own profiles, with no HTTP server.
 *
 * It starts pullprof with listen "none" (nothing is bound), keeps a worker
 * thread busy, and every --every seconds, or when it receives SIGUSR1,
 * writes a CPU profile of the next --window seconds and a heap profile into
 * --dir: cpu-STAMP.pb.gz and heap-STAMP.pb.gz, each written to a temporary
 * name and renamed, so a reader never sees half a file. Read them with
 * `go tool pprof -top cpu-STAMP.pb.gz`.
 *
 * Usage: capture [--dir DIR] [--every S] [--window S] [--count N]
 *   --dir DIR    where to write (default: .)
 *   --every S    capture every S seconds (default 60; 0: on SIGUSR1 only)
 *   --window S   length of each CPU profile in seconds (default 10)
 *   --count N    exit after N captures (default 0: run until SIGINT/SIGTERM)
 *
 * Signals are taken in the main loop with sigtimedwait(), not in a
 * handler: a capture blocks the calling thread for the window, which is
 * fine in a loop and not in a signal handler. PULLPROF_LISTEN still wins
 * over the struct (PULLPROF_LISTEN=127.0.0.1:6060 serves as well).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pullprof.h>

static int running = 1; /* atomic: read by the worker */

/* The work the profiles show: hashing (CPU) and a cache of live blocks
 * (heap). */
static __attribute__((noinline)) uint64_t hash_rounds(uint64_t x, int n)
{
	for (int i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	return x;
}

static __attribute__((noinline)) void cache_put(void **slot, size_t size)
{
	free(*slot);
	*slot = malloc(size);
	if (*slot)
		memset(*slot, 1, size);
}

static void *worker(void *arg)
{
	static void *cache[4096];
	uint64_t x = 88172645463325252ull;
	(void)arg;
	pthread_setname_np(pthread_self(), "capture-work");
	while (__atomic_load_n(&running, __ATOMIC_RELAXED)) {
		x = hash_rounds(x, 100000);
		cache_put(&cache[x % 4096], 1024 + x % 16384);
	}
	for (int i = 0; i < 4096; i++)
		free(cache[i]);
	return NULL;
}

/* Write one profile to DIR/KIND-STAMP.pb.gz. */
static int write_profile(const char *dir, const char *kind, const char *stamp,
                         unsigned window)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	snprintf(path, sizeof path, "%s/%s-%s.pb.gz", dir, kind, stamp);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		fprintf(stderr, "capture: %s: %s\n", tmp, strerror(errno));
		return -errno;
	}
	int rc = kind[0] == 'c'
	             ? pullprof_write_cpu_profile(fd, window, 0)
	             : pullprof_write_heap_profile(fd, PULLPROF_HEAP_INUSE);
	if (close(fd) != 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, path) != 0)
		rc = -errno;
	if (rc) {
		unlink(tmp);
		fprintf(stderr, "capture: %s: %s\n", path,
		        pullprof_strerror(rc));
	} else {
		printf("capture: wrote %s\n", path);
	}
	return rc;
}

static unsigned number(const char *s)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	if (!*s || *end || v > 86400) {
		fprintf(stderr, "capture: bad number \"%s\"\n", s);
		exit(2);
	}
	return (unsigned)v;
}

int main(int argc, char **argv)
{
	const char *dir = ".";
	unsigned every = 60, window = 10, count = 0, done = 0;

	for (int i = 1; i < argc; i++) {
		if (i + 1 < argc && !strcmp(argv[i], "--dir"))
			dir = argv[++i];
		else if (i + 1 < argc && !strcmp(argv[i], "--every"))
			every = number(argv[++i]);
		else if (i + 1 < argc && !strcmp(argv[i], "--window"))
			window = number(argv[++i]);
		else if (i + 1 < argc && !strcmp(argv[i], "--count"))
			count = number(argv[++i]);
		else {
			fprintf(stderr,
			        "usage: capture [--dir DIR] [--every S] "
			        "[--window S] [--count N]\n");
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);

	/* The signals this loop waits for are blocked in every thread
	 * (threads inherit the mask): they stay pending until sigtimedwait
	 * takes them. */
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGUSR1);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);

	struct pullprof_config cfg;
	pullprof_config_init(&cfg);
	cfg.listen = "none"; /* no server: this program writes the profiles */
	int rc = pullprof_start(&cfg);
	if (rc) {
		fprintf(stderr, "capture: no profiling: %s\n",
		        pullprof_strerror(rc));
		return 1;
	}
	pthread_t t;
	pthread_create(&t, NULL, worker, NULL);
	printf("capture: pid %d writes profiles to %s every %u s "
	       "(kill -USR1 %d: now)\n",
	       (int)getpid(), dir, every, (int)getpid());

	unsigned left = every; /* seconds to the next timed capture */
	while (!count || done < count) {
		struct timespec second = {1, 0};
		int sig = sigtimedwait(&sigs, NULL, &second);
		if (sig == SIGINT || sig == SIGTERM)
			break;
		if (sig != SIGUSR1 && (!every || --left > 0))
			continue; /* a second passed */
		char stamp[48];
		struct tm tm;
		time_t now = time(NULL);
		strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%S",
		         localtime_r(&now, &tm));
		snprintf(stamp + strlen(stamp), sizeof stamp - strlen(stamp),
		         "-%u", done + 1);
		write_profile(dir, "cpu", stamp, window);
		write_profile(dir, "heap", stamp, window);
		done++;
		left = every;
	}
	__atomic_store_n(&running, 0, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	pullprof_stop();
	printf("capture: done, %u captures\n", done);
	return 0;
}

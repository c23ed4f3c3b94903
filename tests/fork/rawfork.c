/*
 * rawfork: a program that makes children without glibc's fork(), for
 * test_hostile_fork.py; preloaded with libpullprof (it knows nothing of
 * it). Such a child runs none of fork()'s handlers: it has a copy of the
 * agent's memory, none of its threads, and copies of its descriptors.
 *
 *   rawfork MODE      MODE: _Fork (glibc 2.34's async-signal-safe fork)
 *                     or clone (the raw system call, SIGCHLD, no flags)
 *
 * Commands on stdin, one answer line each on stdout:
 *   child   make a child that allocates (malloc/free/realloc) for 0.5 s,
 *           says "child PID allocated" on stdout, waits for SIGUSR1 and
 *           calls exit(0) -> "child PID"
 *   reap PID  wait for it (at most 20 s) -> "reaped PID status S MS ms",
 *           MS the time from this command to its end, or "hung PID"
 *           (then it is killed)
 *   alloc   allocate for 0.2 s here -> "allocated"
 *   quit    return from main (exit's handlers run) -> no answer
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__GLIBC__) &&                                                      \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
#define HAVE_FORK_UNDERSCORE 1
#endif

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void *volatile keep[64];

/* Allocations of every size class, some kept a while: sampled ones are
 * recorded (and, freed, looked up) by the heap sampler. */
__attribute__((noinline)) static void allocate(double seconds)
{
	double until = now() + seconds;
	unsigned i = 0;
	while (now() < until) {
		for (int k = 0; k < 256; k++, i++) {
			size_t size = (size_t)16 << (i % 12);
			void *p = malloc(size);
			if (p)
				memset(p, 1, 16);
			unsigned slot = i % 64;
			free(keep[slot]);
			keep[slot] = p;
			if (i % 7 == 0) {
				void *q = realloc(keep[slot], size * 2);
				if (q)
					keep[slot] = q;
			}
		}
	}
	for (unsigned s = 0; s < 64; s++) {
		free(keep[s]);
		keep[s] = NULL;
	}
}

static volatile sig_atomic_t go;

static void on_usr1(int sig)
{
	(void)sig;
	go = 1;
}

static void say(const char *fmt, long a)
{
	char line[96];
	int n = snprintf(line, sizeof line, fmt, a);
	if (n > 0 && write(1, line, (size_t)n) < 0)
		_exit(4);
}

static void child(void)
{
	allocate(0.5);
	say("child %ld allocated\n", (long)getpid());
	while (!go)
		usleep(1000);
	exit(0);
}

static pid_t make_child(const char *mode)
{
	/* SIGUSR1 waits, blocked, until the child is ready for it. */
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	pid_t pid;
	if (strcmp(mode, "clone") == 0) {
		pid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
	} else {
#ifdef HAVE_FORK_UNDERSCORE
		pid = _Fork();
#else
		pid = -1;
#endif
	}
	if (pid == 0)
		child();
	return pid;
}

int main(int argc, char **argv)
{
	if (argc != 2 ||
	    (strcmp(argv[1], "_Fork") != 0 && strcmp(argv[1], "clone") != 0)) {
		fprintf(stderr, "usage: rawfork _Fork|clone\n");
		return 2;
	}
#ifndef HAVE_FORK_UNDERSCORE
	if (strcmp(argv[1], "_Fork") == 0) {
		printf("no _Fork in this C library\n");
		return 3;
	}
#endif
	setvbuf(stdout, NULL, _IOLBF, 0);
	char line[128];
	printf("ready\n");
	while (fgets(line, sizeof line, stdin)) {
		long pid;
		if (strcmp(line, "child\n") == 0) {
			printf("child %ld\n", (long)make_child(argv[1]));
		} else if (sscanf(line, "reap %ld", &pid) == 1) {
			double t0 = now();
			int status = 0;
			pid_t got = 0;
			while ((got = waitpid((pid_t)pid, &status, WNOHANG)) ==
			           0 &&
			       now() < t0 + 20)
				usleep(2000);
			if (got == (pid_t)pid) {
				printf("reaped %ld status %d %ld ms\n", pid,
				       status, (long)((now() - t0) * 1000));
			} else {
				printf("hung %ld\n", pid);
				kill((pid_t)pid, SIGKILL);
				waitpid((pid_t)pid, &status, 0);
			}
		} else if (strcmp(line, "alloc\n") == 0) {
			allocate(0.2);
			printf("allocated\n");
		} else if (strcmp(line, "quit\n") == 0) {
			break;
		}
	}
	return 0;
}

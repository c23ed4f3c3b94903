/*
 * The host of tests/arm64/test_profiles.py: everything but CPU profiles,
 * in one arm64 process the test boots once in the emulated Debian, with
 * libpullprof preloaded and PULLPROF_FORK=follow.
 *
 *   profhost PORT
 *
 * At start, in this order:
 * 1. Heap: three call sites allocate known amounts and keep them live
 *    (site_small: 20000 x 256 B, site_mid: 2000 x 4000 B, site_big:
 *    64 x 131072 B), so /heap's in-use bytes per site can be held to what
 *    was allocated.
 * 2. Threads that block for good, each in a call of its own, for the
 *    thread dump: pp-sleep in nanosleep (wait_in_nanosleep), pp-cond in
 *    pthread_cond_wait (wait_in_cond), pp-read in read on a pipe
 *    (wait_in_read), pp-poll in poll on that pipe (wait_in_poll), pp-mutex
 *    in pthread_mutex_lock of a mutex the main thread holds
 *    (wait_in_mutex).
 * 3. Lock contention, for /mutex and /block: pp-holder takes a mutex and
 *    spins 2 ms holding it (hold_lock_long, also the CPU samples of the
 *    Perfetto trace), pp-wait1 and pp-wait2 take it briefly
 *    (wait_for_lock) and so wait for the holder.
 * Then it prints "profhost: ready PID" and serves PORT (TCP, one line per
 * connection, one line back): "fork" forks two children and answers
 * "pids A B"; "alloc" has each child allocate 40 x 100000 B in child_alloc
 * and keep it, answering "allocated 2" once both did; "quit" kills the
 * children and exits with status 0.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* noclone: no .constprop copies, the profiles name the functions as
 * written. */
#define NOINLINE __attribute__((noinline, noclone))

static void *volatile keep[32];
static int pipefd[2];
static pthread_mutex_t stuck = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t contended = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t never_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never_c = PTHREAD_COND_INITIALIZER;
static volatile unsigned long shared, holds;

/* The blocks' lists are static: a site allocates only its blocks. */
static void *small_v[20000], *mid_v[2000], *big_v[64], *child_v[40];

static NOINLINE void **site_small(int n)
{
	void **v = small_v;
	for (int i = 0; i < n; i++)
		v[i] = malloc(256);
	return v;
}

static NOINLINE void **site_mid(int n)
{
	void **v = mid_v;
	for (int i = 0; i < n; i++)
		v[i] = malloc(4000);
	return v;
}

static NOINLINE void **site_big(int n)
{
	void **v = big_v;
	for (int i = 0; i < n; i++) {
		v[i] = malloc(131072);
		memset(v[i], 1, 131072);
	}
	return v;
}

static NOINLINE void **child_alloc(int n)
{
	void **v = child_v;
	for (int i = 0; i < n; i++) {
		v[i] = malloc(100000);
		memset(v[i], 2, 100000);
	}
	return v;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static NOINLINE void wait_in_nanosleep(void)
{
	struct timespec ts = {100000, 0};
	for (;;)
		nanosleep(&ts, NULL);
}

static NOINLINE void wait_in_cond(void)
{
	pthread_mutex_lock(&never_m);
	for (;;)
		pthread_cond_wait(&never_c, &never_m);
}

static NOINLINE void wait_in_read(void)
{
	char c;
	while (read(pipefd[0], &c, 1) != 0)
		;
}

static NOINLINE void wait_in_poll(void)
{
	struct pollfd p = {.fd = pipefd[0], .events = POLLIN};
	for (;;)
		poll(&p, 1, -1);
}

static NOINLINE void wait_in_mutex(void)
{
	pthread_mutex_lock(&stuck);
	pthread_mutex_unlock(&stuck);
}

static NOINLINE void spin_while_holding(double ms)
{
	double end = now_ms() + ms;
	while (now_ms() < end)
		;
}

static NOINLINE void hold_lock_long(void)
{
	pthread_mutex_lock(&contended);
	spin_while_holding(2.0);
	pthread_mutex_unlock(&contended);
	holds++; /* after the unlock: no tail call, this frame stays */
}

static NOINLINE void wait_for_lock(void)
{
	pthread_mutex_lock(&contended);
	shared++;
	pthread_mutex_unlock(&contended);
	shared++;
}

static void *thread_main(void *arg)
{
	const char *name = arg;
	pthread_setname_np(pthread_self(), name);
	if (!strcmp(name, "pp-sleep"))
		wait_in_nanosleep();
	else if (!strcmp(name, "pp-cond"))
		wait_in_cond();
	else if (!strcmp(name, "pp-read"))
		wait_in_read();
	else if (!strcmp(name, "pp-poll"))
		wait_in_poll();
	else if (!strcmp(name, "pp-mutex"))
		wait_in_mutex();
	else if (!strcmp(name, "pp-holder"))
		for (;;) {
			hold_lock_long();
			usleep(1000);
		}
	else
		for (;;) {
			wait_for_lock();
			usleep(300);
		}
	return NULL;
}

static pid_t kids[2];
static int ready[2] = {-1, -1};

/* The children wait for SIGUSR1 before they allocate: a child's own agent
 * (PULLPROF_FORK=follow) samples from its start on (docs/forking.md), and
 * the test sends "alloc" once /children lists them. */
static void fork_children(char *answer, size_t size)
{
	sigset_t usr1, old;
	if (pipe(ready) != 0) {
		snprintf(answer, size, "error pipe");
		return;
	}
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, &old);
	for (int k = 0; k < 2; k++) {
		pid_t pid = fork();
		if (pid == 0) {
			int sig;
			close(ready[0]);
			sigwait(&usr1, &sig);
			keep[10] = child_alloc(40);
			if (write(ready[1], "x", 1) != 1)
				_exit(1);
			for (;;)
				pause();
		}
		kids[k] = pid;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	close(ready[1]);
	snprintf(answer, size, "pids %d %d", (int)kids[0], (int)kids[1]);
}

static void alloc_children(char *answer, size_t size)
{
	char c;
	int n = 0;
	for (int k = 0; k < 2; k++)
		kill(kids[k], SIGUSR1);
	while (n < 2 && read(ready[0], &c, 1) == 1)
		n++;
	snprintf(answer, size, "allocated %d", n);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: profhost PORT\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	keep[0] = site_small(20000);
	keep[1] = site_mid(2000);
	keep[2] = site_big(64);
	if (pipe(pipefd) != 0)
		return 1;
	pthread_mutex_lock(&stuck);
	static const char *names[] = {"pp-sleep", "pp-cond",  "pp-read",
	                              "pp-poll",  "pp-mutex", "pp-holder",
	                              "pp-wait1", "pp-wait2"};
	for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, thread_main, (void *)names[i]) !=
		    0)
			return 1;
	}

	int s = socket(AF_INET, SOCK_STREAM, 0);
	int one = 1;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	struct sockaddr_in a = {.sin_family = AF_INET,
	                        .sin_port = htons(atoi(argv[1]))};
	if (bind(s, (struct sockaddr *)&a, sizeof a) != 0 ||
	    listen(s, 4) != 0) {
		perror("profhost: listen");
		return 1;
	}
	printf("profhost: ready %d\n", (int)getpid());
	for (;;) {
		int c = accept(s, NULL, NULL);
		if (c < 0)
			continue;
		char line[64] = {0}, answer[64] = "unknown";
		ssize_t n = read(c, line, sizeof line - 1);
		if (n > 0 && !strncmp(line, "fork", 4))
			fork_children(answer, sizeof answer);
		else if (n > 0 && !strncmp(line, "alloc", 5) && kids[0] > 0)
			alloc_children(answer, sizeof answer);
		int quit = n > 0 && !strncmp(line, "quit", 4);
		if (quit)
			snprintf(answer, sizeof answer, "bye");
		strcat(answer, "\n");
		if (write(c, answer, strlen(answer)) < 0)
			perror("profhost: write");
		close(c);
		if (quit)
			break;
	}
	for (int k = 0; k < 2; k++)
		if (kids[k] > 0) {
			kill(kids[k], SIGKILL);
			waitpid(kids[k], NULL, 0);
		}
	printf("profhost: bye\n");
	return 0;
}

/*
 * forkwork: a forking program for the fork tests, preloaded with
 * libpullprof (it knows nothing of it). Each mode's work is a function of
 * its own, so profiles show who ran what.
 *
 *   forkwork daemon PIDFILE SECONDS   daemon(3) (keeping stderr), write the
 *                                     daemon's pid, spin in daemon_spin
 *   forkwork double PIDFILE SECONDS   the same by fork, setsid, fork
 *            (either with a 4th word "go": read a line from stdin first)
 *   forkwork tree N [UID]             fork N children (changing to user
 *                                     UID, if given) spinning in
 *                                     child_spin (each dies with the
 *                                     parent); the parent spins in
 *                                     parent_spin on a thread and answers
 *                                     commands on stdin:
 *       pids            -> "pids P1 P2 ..." (the live children)
 *       more N          fork N more -> "pids ..."
 *       crash           fork a child that spins 1 s in child_spin, then
 *                       dereferences NULL -> "crashing PID"
 *       wait PID        -> "exit N" / "signal N"
 *       quit            kill the children, reap them, exit 0
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile double sink;

#define SPIN(name)                                                             \
	__attribute__((noinline)) void name(double until)                      \
	{                                                                      \
		struct timespec t;                                             \
		do {                                                           \
			for (int i = 0; i < 200000; i++)                       \
				sink += i * 0.5;                               \
			clock_gettime(CLOCK_MONOTONIC, &t);                    \
		} while (t.tv_sec + t.tv_nsec / 1e9 < until);                  \
	}

void daemon_spin(double until);
void child_spin(double until);
void parent_spin(double until);
SPIN(child_spin)
SPIN(parent_spin)

/* The daemon's work also allocates, as a server's does (an adopt-mode
 * child looks for its parent from the allocator's slow path). */
__attribute__((noinline)) void daemon_spin(double until)
{
	struct timespec t;
	do {
		for (int i = 0; i < 200000; i++)
			sink += i * 0.5;
		void *volatile p = malloc(4096);
		free(p);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (t.tv_sec + t.tv_nsec / 1e9 < until);
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void write_pid(const char *path)
{
	char tmp[4096];
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (!f)
		exit(3);
	fprintf(f, "%d\n", (int)getpid());
	fclose(f);
	rename(tmp, path);
}

#define MAX_CHILDREN 256
static pid_t children[MAX_CHILDREN];
static int nchildren;

/* With a UID, each child changes to that user (and group) at once, as a
 * server's workers do. */
static int child_uid = -1;

static pid_t spawn(int crash)
{
	pid_t pid = fork();
	if (pid == 0) {
		if (child_uid >= 0 &&
		    (setgid((gid_t)child_uid) || setuid((uid_t)child_uid)))
			_exit(4);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (crash) {
			child_spin(now() + 1);
			*(volatile int *)0 = 1;
		}
		for (;;)
			child_spin(now() + 3600);
	}
	return pid;
}

static void *parent_thread(void *arg)
{
	(void)arg;
	for (;;)
		parent_spin(now() + 3600);
	return NULL;
}

static void print_pids(void)
{
	printf("pids");
	for (int i = 0; i < nchildren; i++)
		if (children[i] > 0)
			printf(" %d", (int)children[i]);
	printf("\n");
	fflush(stdout);
}

static void more(int n)
{
	for (int i = 0; i < n && nchildren < MAX_CHILDREN; i++) {
		pid_t pid = spawn(0);
		if (pid > 0)
			children[nchildren++] = pid;
	}
}

static int tree(int n)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	more(n);
	pthread_t t;
	pthread_create(&t, NULL, parent_thread, NULL);
	printf("ready\n");
	print_pids();
	char line[128];
	while (fgets(line, sizeof line, stdin)) {
		int k;
		if (strncmp(line, "pids", 4) == 0) {
			print_pids();
		} else if (sscanf(line, "more %d", &k) == 1) {
			more(k);
			print_pids();
		} else if (strncmp(line, "crash", 5) == 0) {
			printf("crashing %d\n", (int)spawn(1));
		} else if (sscanf(line, "wait %d", &k) == 1) {
			int st;
			if (waitpid(k, &st, 0) < 0)
				printf("error %s\n", strerror(errno));
			else if (WIFSIGNALED(st))
				printf("signal %d\n", WTERMSIG(st));
			else
				printf("exit %d\n", WEXITSTATUS(st));
			for (int i = 0; i < nchildren; i++)
				if (children[i] == k)
					children[i] = -1;
		} else if (strncmp(line, "quit", 4) == 0) {
			break;
		}
	}
	for (int i = 0; i < nchildren; i++)
		if (children[i] > 0)
			kill(children[i], SIGKILL);
	while (wait(NULL) > 0 || errno == EINTR)
		;
	return 0;
}

int main(int argc, char **argv)
{
	if ((argc == 3 || argc == 4) && strcmp(argv[1], "tree") == 0) {
		if (argc == 4)
			child_uid = atoi(argv[3]);
		return tree(atoi(argv[2]));
	}
	if (argc != 4 && !(argc == 5 && strcmp(argv[4], "go") == 0)) {
		fprintf(stderr, "usage: forkwork daemon|double PIDFILE SECONDS "
		                "[go] | tree N\n");
		return 2;
	}
	if (argc == 5) {
		char line[16];
		if (!fgets(line, sizeof line, stdin))
			return 1;
	}
	double until = now() + atof(argv[3]);
	if (strcmp(argv[1], "daemon") == 0) {
		if (daemon(1, 1) != 0)
			return 1;
	} else if (strcmp(argv[1], "double") == 0) {
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid > 0) {
			/* The original waits for the first child, as a shell's
			 * "daemonize" would, then exits. */
			waitpid(pid, NULL, 0);
			return 0;
		}
		setsid();
		if (fork() != 0)
			_exit(0);
	} else {
		return 2;
	}
	write_pid(argv[2]);
	daemon_spin(until);
	return 0;
}

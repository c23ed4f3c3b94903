/*
 * A host sized to its limits (test_hostile_limits.py), run with libpullprof
 * preloaded, never linked. Commands on stdin, one answer line each:
 *
 *   round N MB   N times: malloc MB megabytes, write a byte in each page
 *                of the first megabyte, free; answers "round OK FAIL"
 *   vm           "vm VMSIZE_KB" (/proc/self/status)
 *   spawn N      runs /bin/true N times (fork and exec: the children
 *                inherit LD_PRELOAD and the environment); answers "spawned N"
 *   quit
 *
 * It starts with "ready" and keeps a thread of its own that allocates a
 * little now and then (a host thread with an arena of its own, as servers
 * have).
 * Context: agent.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char *volatile held[16];

static void *worker(void *arg)
{
	(void)arg;
	for (unsigned i = 0;; i++) {
		char *p = malloc(4096);
		if (p)
			p[0] = 1;
		free(held[i % 16]);
		held[i % 16] = p;
		usleep(10000);
	}
	return NULL;
}

static long vm_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "VmSize: %ld", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

int main(void)
{
	pthread_t t;
	char line[256];
	if (pthread_create(&t, NULL, worker, NULL) == 0)
		pthread_detach(t);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	while (fgets(line, sizeof line, stdin)) {
		long n = 0, mb = 0;
		if (sscanf(line, "round %ld %ld", &n, &mb) == 2) {
			long good = 0, bad = 0;
			size_t bytes = (size_t)mb << 20;
			for (long i = 0; i < n; i++) {
				char *volatile p = malloc(bytes);
				if (!p) {
					bad++;
					continue;
				}
				for (size_t o = 0; o < bytes && o < (1u << 20);
				     o += 4096)
					p[o] = 1;
				free(p);
				good++;
			}
			printf("round %ld %ld\n", good, bad);
		} else if (strncmp(line, "vm", 2) == 0) {
			printf("vm %ld\n", vm_kb());
		} else if (sscanf(line, "spawn %ld", &n) == 1) {
			long done = 0;
			for (long i = 0; i < n; i++) {
				pid_t c = fork();
				if (c == 0) {
					execl("/bin/true", "true",
					      (char *)NULL);
					_exit(127);
				}
				if (c > 0 && waitpid(c, NULL, 0) == c)
					done++;
			}
			printf("spawned %ld\n", done);
		} else if (strncmp(line, "quit", 4) == 0) {
			break;
		}
	}
	return 0;
}

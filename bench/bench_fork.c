/*
 * bench_fork: a host that forks, for bench/bench_fork.py. It has a heap of
 * its own (--heap-mb, written once, as a server's caches would be) and is
 * driven line by line on stdin, so that one process can be measured before
 * and after the agent served it a profile:
 *
 *   batch N EXIT KIB   fork N children at once, then wait for them all.
 *                      Each child writes KIB KiB of the parent's heap and
 *                      leaves by EXIT: "exit" (atexit handlers, destructors,
 *                      stdio) or "_exit".
 *                      -> "batch cpu_us=C wall_us=W minflt=F" per fork:
 *                         C the forking thread's CPU (RUSAGE_THREAD: fork
 *                         and waitpid) plus the children's (RUSAGE_CHILDREN),
 *                         W the wall time of the batch, F the children's
 *                         minor faults, each over N
 *   probe EXIT KIB     fork one child that does the same work, then stops
 *                      itself (SIGSTOP) just before leaving; the parent
 *                      reads its /proc/PID/smaps_rollup and /proc/PID/stat,
 *                      lets it go on and waits for it
 *                      -> "probe dirty_kib=D minflt=F minflt_exit=E":
 *                         D its Private_Dirty when stopped (what it had
 *                         copied or allocated since fork), F its minor
 *                         faults until then, E until it was reaped
 *   vmas N PAGES       map N more private anonymous regions of PAGES
 *                      pages each, every page written (a guard page
 *                      after each keeps the kernel from merging them):
 *                      what another library or thread adds to what fork
 *                      copies and exit tears down
 *                      -> "vmas N"
 *   quit
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static unsigned char *heap;
static size_t heap_bytes;

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static double tv_us(struct timeval tv)
{
	return tv.tv_sec * 1e6 + tv.tv_usec;
}

static double cpu_us(int who)
{
	struct rusage ru;
	getrusage(who, &ru);
	return tv_us(ru.ru_utime) + tv_us(ru.ru_stime);
}

static long child_minflt(void)
{
	struct rusage ru;
	getrusage(RUSAGE_CHILDREN, &ru);
	return ru.ru_minflt;
}

/* The child's work: a little memory written (pages of the parent's heap,
 * copied on write), then out by the way asked. */
static void child_work(int use_exit, size_t kib, int stop)
{
	size_t n = kib * 1024 < heap_bytes ? kib * 1024 : heap_bytes;
	for (size_t i = 0; i < n; i += 64)
		heap[i]++;
	if (stop)
		raise(SIGSTOP);
	if (use_exit)
		exit(0);
	_exit(0);
}

static int parse_exit(const char *w)
{
	if (strcmp(w, "exit") == 0)
		return 1;
	if (strcmp(w, "_exit") == 0)
		return 0;
	return -1;
}

static void batch(int n, int use_exit, size_t kib)
{
	pid_t *pids = calloc((size_t)n, sizeof *pids);
	if (!pids) {
		printf("err no memory\n");
		return;
	}
	double c0 = cpu_us(RUSAGE_THREAD) + cpu_us(RUSAGE_CHILDREN);
	long f0 = child_minflt();
	double w0 = now_us();
	int forked = 0;
	for (int i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid == 0)
			child_work(use_exit, kib, 0);
		if (pid < 0)
			break;
		pids[forked++] = pid;
	}
	int bad = forked < n;
	for (int i = 0; i < forked; i++) {
		int st;
		if (waitpid(pids[i], &st, 0) != pids[i] || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != 0)
			bad = 1;
	}
	double w1 = now_us();
	double c1 = cpu_us(RUSAGE_THREAD) + cpu_us(RUSAGE_CHILDREN);
	long f1 = child_minflt();
	free(pids);
	if (bad) {
		printf("err a child failed or was not forked\n");
		return;
	}
	printf("batch cpu_us=%.1f wall_us=%.1f minflt=%.1f\n", (c1 - c0) / n,
	       (w1 - w0) / n, (double)(f1 - f0) / n);
}

static long private_dirty_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	snprintf(path, sizeof path, "/proc/%d/smaps_rollup", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "Private_Dirty: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static long stat_minflt(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	size_t len = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[len] = 0;
	/* After the command's closing parenthesis: state is field 3, minflt
	 * field 10. */
	char *p = strrchr(buf, ')');
	long v = -1;
	if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %ld", &v) != 1)
		v = -1;
	return v;
}

static void probe(int use_exit, size_t kib)
{
	long f0 = child_minflt();
	pid_t pid = fork();
	if (pid == 0)
		child_work(use_exit, kib, 1);
	if (pid < 0) {
		printf("err fork: %s\n", strerror(errno));
		return;
	}
	int st;
	if (waitpid(pid, &st, WUNTRACED) != pid || !WIFSTOPPED(st)) {
		printf("err the child did not stop\n");
		return;
	}
	long dirty = private_dirty_kib(pid);
	long flt = stat_minflt(pid);
	kill(pid, SIGCONT);
	waitpid(pid, &st, 0);
	printf("probe dirty_kib=%ld minflt=%ld minflt_exit=%ld\n", dirty, flt,
	       child_minflt() - f0);
}

static int vmas(long n, long pages)
{
	long page = sysconf(_SC_PAGESIZE);
	for (long i = 0; i < n; i++) {
		unsigned char *p = mmap(NULL, (size_t)(pages + 1) * page,
		                        PROT_READ | PROT_WRITE,
		                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED ||
		    mprotect(p + pages * page, (size_t)page, PROT_NONE))
			return -1;
		for (long j = 0; j < pages; j++)
			p[j * page] = 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	long mb = argc > 1 ? atol(argv[1]) : 64;
	heap_bytes = (size_t)mb << 20;
	heap = malloc(heap_bytes);
	if (!heap) {
		fprintf(stderr, "bench_fork: no memory for %ld MiB\n", mb);
		return 1;
	}
	memset(heap, 1, heap_bytes);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");

	char line[256], cmd[32], how[16];
	while (fgets(line, sizeof line, stdin)) {
		long n = 0, kib = 0;
		int k = sscanf(line, "%31s", cmd);
		if (k != 1)
			continue;
		if (strcmp(cmd, "quit") == 0)
			break;
		if (strcmp(cmd, "batch") == 0 &&
		    sscanf(line, "%*s %ld %15s %ld", &n, how, &kib) == 3 &&
		    n > 0 && kib >= 0 && parse_exit(how) >= 0) {
			batch((int)n, parse_exit(how), (size_t)kib);
		} else if (strcmp(cmd, "probe") == 0 &&
		           sscanf(line, "%*s %15s %ld", how, &kib) == 2 &&
		           kib >= 0 && parse_exit(how) >= 0) {
			probe(parse_exit(how), (size_t)kib);
		} else if (strcmp(cmd, "vmas") == 0 &&
		           sscanf(line, "%*s %ld %ld", &n, &kib) == 2 &&
		           n > 0 && kib > 0) {
			if (vmas(n, kib))
				printf("err vmas: %s\n", strerror(errno));
			else
				printf("vmas %ld\n", n);
		} else {
			printf("err usage: batch N exit|_exit KIB | probe "
			       "exit|_exit KIB | vmas N PAGES | quit\n");
		}
	}
	return 0;
}

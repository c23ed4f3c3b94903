/*
 * A host for the capture tests (tests/integration/test_capture.py): it links
 * libpullprof, burns CPU and allocates known amounts in known functions
 * (cw_*, kept out of line), and writes profiles itself with
 * pullprof_write_cpu_profile / pullprof_write_heap_profile on command. The
 * agent is not started until asked. SIGPIPE keeps its default action (the
 * process dies of it), so a capture that raised one would be seen.
 *
 * Commands on stdin, one answer line each on stdout:
 *
 *   start                 pullprof_start(NULL), env applies
 *                                          -> "ok PORT" | "err RC MESSAGE"
 *   stop                  pullprof_stop    -> "stop RC"
 *   burn N                N threads (cw-burn-K) loop over cw_burn_heavy (3
 *                         units) and cw_burn_light (1 unit) -> "burning N"
 *   calm                  stop them        -> "calm"
 *   keep                  allocate and keep 100,000 x 256 B in cw_keep_small
 *                         and 16 x 1 MiB in cw_keep_large
 *                         -> "truth FUNC ALLOC INUSE FUNC ALLOC INUSE"
 *   churn BYTES           allocate and free BYTES in 1 KiB blocks in cw_churn
 *                         -> "truth cw_churn BYTES 0"
 *   spread                allocate and free 2,000 blocks of as many sizes
 *                         (16 KiB and up) in cw_spread: a heap profile with
 *                         thousands of samples -> "spread"
 *   cpu TARGET SECONDS HZ capture a CPU profile  -> "rc RC MS MESSAGE"
 *   heap TARGET KIND      capture a heap profile -> "rc RC MS MESSAGE"
 *   cpu-bg SLOT TARGET SECONDS HZ   the same on a new thread -> "started SLOT"
 *   heap-bg SLOT TARGET KIND
 *   join SLOT             wait for it      -> "rc RC MS MESSAGE"
 *   alive                 -> "alive SIGPIPE=default|changed"
 *   quit
 *
 * MS is how long the call took. TARGET is a file path (created or
 * truncated), or one of:
 *   @null           /dev/null
 *   @closed         a descriptor number that is not open
 *   @rdonly         /dev/null opened read-only
 *   @pipe-closed    the write end of a pipe whose read end is closed
 *   @socket-closed  a stream socket whose peer is closed
 *   @slowpipe:MS:PATH  the non-blocking write end of a one-page pipe,
 *                   filled up with padding: a thread starts reading MS
 *                   milliseconds later, drops the padding and copies what
 *                   follows to PATH a little at a time. A writer meets
 *                   EAGAIN (the pipe is full) and short writes.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <pullprof.h>

#define NOINLINE __attribute__((noinline, noclone))

static void *volatile sink;
static int burning;

/* ---- CPU ---------------------------------------------------------------- */

/* Each does its own work (no callee): the leaf of a sample is the function
 * itself. Three quarters of a burner's time is in cw_burn_heavy. */
NOINLINE static uint64_t cw_burn_heavy(uint64_t x)
{
	for (int k = 0; k < 3 * 20000; k++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	return x;
}

NOINLINE static uint64_t cw_burn_light(uint64_t x)
{
	for (int k = 0; k < 20000; k++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	return x;
}

static pthread_t burners[16];
static int nburners;
static uint64_t burn_sink;

static void *burner(void *arg)
{
	char name[16];
	uint64_t x = (uintptr_t)arg + 88172645463325252ULL;
	snprintf(name, sizeof name, "cw-burn-%d", (int)(uintptr_t)arg);
	pthread_setname_np(pthread_self(), name);
	while (__atomic_load_n(&burning, __ATOMIC_RELAXED)) {
		x = cw_burn_heavy(x);
		x = cw_burn_light(x);
	}
	__atomic_fetch_add(&burn_sink, x, __ATOMIC_RELAXED);
	return NULL;
}

/* ---- heap --------------------------------------------------------------- */

static void touch(void *p, size_t n)
{
	if (p && n) {
		((volatile char *)p)[0] = 1;
		((volatile char *)p)[n - 1] = 1;
	}
	__atomic_store_n(&sink, p, __ATOMIC_RELAXED);
}

#define SMALL_N 100000
#define SMALL_SIZE 256
#define LARGE_N 16
#define LARGE_SIZE (1 << 20)
static void *small[SMALL_N], *large[LARGE_N];

NOINLINE static void cw_keep_small(void)
{
	for (int i = 0; i < SMALL_N; i++)
		touch(small[i] = malloc(SMALL_SIZE), SMALL_SIZE);
}

NOINLINE static void cw_keep_large(void)
{
	for (int i = 0; i < LARGE_N; i++)
		touch(large[i] = malloc(LARGE_SIZE), LARGE_SIZE);
}

NOINLINE static void cw_churn(unsigned long long bytes)
{
	for (unsigned long long done = 0; done < bytes; done += 1024) {
		void *p = malloc(1024);
		touch(p, 1024);
		free(p);
	}
}

NOINLINE static void cw_spread(void)
{
	for (size_t i = 0; i < 2000; i++) {
		void *p = malloc(16384 + 8 * i);
		touch(p, 16384 + 8 * i);
		free(p);
	}
}

/* ---- targets and captures ----------------------------------------------- */

struct slowpipe {
	int rfd;
	FILE *out;
	unsigned delay_ms;
	size_t padding;
	pthread_t t;
};

static void *slow_reader(void *arg)
{
	struct slowpipe *s = arg;
	char buf[256];
	ssize_t n;
	size_t skip = s->padding;
	usleep(s->delay_ms * 1000);
	while ((n = read(s->rfd, buf, sizeof buf)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		size_t drop = (size_t)n < skip ? (size_t)n : skip;
		skip -= drop;
		fwrite(buf + drop, 1, (size_t)n - drop, s->out);
		usleep(500);
	}
	return NULL;
}

/* Open TARGET for writing: a descriptor (or a number that is none), and
 * what to clean up afterwards. */
struct target {
	int fd;
	int owned;
	struct slowpipe *slow;
};

static struct target open_target(const char *t)
{
	struct target r = {-1, 0, NULL};
	int p[2];
	if (!strcmp(t, "@null")) {
		r.fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
		r.owned = 1;
	} else if (!strcmp(t, "@closed")) {
		r.fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
		close(r.fd); /* a number nothing is open under */
	} else if (!strcmp(t, "@rdonly")) {
		r.fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		r.owned = 1;
	} else if (!strcmp(t, "@pipe-closed")) {
		if (pipe2(p, O_CLOEXEC) == 0) {
			close(p[0]);
			r.fd = p[1];
			r.owned = 1;
		}
	} else if (!strcmp(t, "@socket-closed")) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) ==
		    0) {
			close(p[1]);
			r.fd = p[0];
			r.owned = 1;
		}
	} else if (!strncmp(t, "@slowpipe:", 10)) {
		struct slowpipe *s = calloc(1, sizeof *s);
		const char *file = strchr(t + 10, ':');
		if (s && file && pipe2(p, O_CLOEXEC) == 0) {
			static const char pad[512];
			ssize_t n;
			fcntl(p[1], F_SETPIPE_SZ, 4096);
			fcntl(p[1], F_SETFL, O_NONBLOCK);
			while ((n = write(p[1], pad, sizeof pad)) > 0)
				s->padding += (size_t)n;
			s->delay_ms = (unsigned)atoi(t + 10);
			s->rfd = p[0];
			s->out = fopen(file + 1, "we");
			pthread_create(&s->t, NULL, slow_reader, s);
			r.fd = p[1];
			r.owned = 1;
			r.slow = s;
		} else {
			free(s);
		}
	} else {
		r.fd = open(t, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		r.owned = 1;
	}
	return r;
}

static void close_target(struct target *r)
{
	if (r->owned && r->fd >= 0)
		close(r->fd);
	if (r->slow) {
		pthread_join(r->slow->t, NULL);
		close(r->slow->rfd);
		if (r->slow->out)
			fclose(r->slow->out);
		free(r->slow);
	}
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

struct job {
	int heap;
	char target[256];
	unsigned seconds, hz;
	int kind;
	int rc;
	double ms;
	pthread_t t;
	int running;
};

static void run_job(struct job *j)
{
	struct target t = open_target(j->target);
	double t0 = now_ms();
	j->rc = j->heap ? pullprof_write_heap_profile(t.fd, j->kind)
	                : pullprof_write_cpu_profile(t.fd, j->seconds, j->hz);
	j->ms = now_ms() - t0;
	close_target(&t);
}

static void *job_thread(void *arg)
{
	run_job(arg);
	return NULL;
}

static void print_rc(const struct job *j)
{
	printf("rc %d %.0f %s\n", j->rc, j->ms, pullprof_strerror(j->rc));
}

static struct job slots[8];

int main(void)
{
	char line[512];
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_DFL);
	printf("ready %d\n", (int)getpid());
	while (fgets(line, sizeof line, stdin)) {
		char cmd[32] = "", a[256] = "", b[256] = "";
		unsigned long long n1 = 0, n2 = 0;
		int n = sscanf(line, "%31s %255s %255s", cmd, a, b);
		if (n < 1)
			continue;
		if (!strcmp(cmd, "start")) {
			int rc = pullprof_start(NULL);
			if (rc == 0)
				printf("ok %d\n", pullprof_port());
			else
				printf("err %d %s\n", rc,
				       pullprof_strerror(rc));
		} else if (!strcmp(cmd, "stop")) {
			printf("stop %d\n", pullprof_stop());
		} else if (!strcmp(cmd, "burn")) {
			int want = atoi(a);
			__atomic_store_n(&burning, 1, __ATOMIC_RELAXED);
			while (nburners < want && nburners < 16) {
				pthread_create(&burners[nburners], NULL, burner,
				               (void *)(uintptr_t)nburners);
				nburners++;
			}
			printf("burning %d\n", nburners);
		} else if (!strcmp(cmd, "calm")) {
			__atomic_store_n(&burning, 0, __ATOMIC_RELAXED);
			for (int i = 0; i < nburners; i++)
				pthread_join(burners[i], NULL);
			nburners = 0;
			printf("calm\n");
		} else if (!strcmp(cmd, "keep")) {
			cw_keep_small();
			cw_keep_large();
			unsigned long long s = (unsigned long long)SMALL_N *
			                       SMALL_SIZE,
			                   l = (unsigned long long)LARGE_N *
			                       LARGE_SIZE;
			printf("truth cw_keep_small %llu %llu cw_keep_large "
			       "%llu %llu\n",
			       s, s, l, l);
		} else if (!strcmp(cmd, "churn")) {
			n1 = strtoull(a, NULL, 10);
			cw_churn(n1);
			printf("truth cw_churn %llu 0\n", n1);
		} else if (!strcmp(cmd, "spread")) {
			cw_spread();
			printf("spread\n");
		} else if (!strcmp(cmd, "cpu") || !strcmp(cmd, "heap")) {
			struct job j = {.heap = cmd[0] == 'h'};
			if (sscanf(line, "%*s %255s %llu %llu", j.target, &n1,
			           &n2) < 2) {
				printf("usage\n");
				continue;
			}
			j.seconds = (unsigned)n1;
			j.hz = (unsigned)n2;
			j.kind = (int)n1;
			run_job(&j);
			print_rc(&j);
		} else if (!strcmp(cmd, "cpu-bg") || !strcmp(cmd, "heap-bg")) {
			unsigned slot = (unsigned)atoi(a);
			if (slot >= 8 || slots[slot].running) {
				printf("bad slot\n");
				continue;
			}
			struct job *j = &slots[slot];
			memset(j, 0, sizeof *j);
			j->heap = cmd[0] == 'h';
			if (sscanf(line, "%*s %*s %255s %llu %llu", j->target,
			           &n1, &n2) < 2) {
				printf("usage\n");
				continue;
			}
			j->seconds = (unsigned)n1;
			j->hz = (unsigned)n2;
			j->kind = (int)n1;
			j->running = 1;
			pthread_create(&j->t, NULL, job_thread, j);
			printf("started %u\n", slot);
		} else if (!strcmp(cmd, "join")) {
			unsigned slot = (unsigned)atoi(a);
			if (slot >= 8 || !slots[slot].running) {
				printf("bad slot\n");
				continue;
			}
			pthread_join(slots[slot].t, NULL);
			slots[slot].running = 0;
			print_rc(&slots[slot]);
		} else if (!strcmp(cmd, "alive")) {
			struct sigaction sa;
			sigaction(SIGPIPE, NULL, &sa);
			printf("alive SIGPIPE=%s\n", sa.sa_handler == SIG_DFL
			                                 ? "default"
			                                 : "changed");
		} else if (!strcmp(cmd, "quit")) {
			break;
		} else {
			printf("unknown %s\n", cmd);
		}
	}
	if (nburners) {
		__atomic_store_n(&burning, 0, __ATOMIC_RELAXED);
		for (int i = 0; i < nburners; i++)
			pthread_join(burners[i], NULL);
	}
	pullprof_stop();
	return 0;
}

/*
 * A host for the profile-label tests: a small "server" whose worker threads
 * handle requests of two kinds inside label scopes, the way a real server
 * would use pullprof_label_push/pop. It links libpullprof, starts the agent
 * from the environment and prints "port N". Commands on stdin, one answer
 * line each:
 *
 *   serve THREADS SECONDS   THREADS workers, each looping for SECONDS:
 *                           a /api/users request (endpoint=/api/users and,
 *                           nested, tenant=a|b alternately: 3 units of CPU
 *                           in lw_users, 3 blocks of BLOCK bytes), a
 *                           /api/orders request (1 unit in lw_orders, 1
 *                           block), then 1 unit outside any scope (lw_idle)
 *                           -> "served REQUESTS UNITS_USERS UNITS_ORDERS
 *                               UNITS_IDLE BYTES_USERS BYTES_ORDERS"
 *   push KEY VALUE / pop    on the command thread -> "rc N" / "ok"
 *   quit
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pullprof.h>

#define NOINLINE __attribute__((noinline, noclone))
#define UNIT_LOOPS 200000
#define BLOCK 65536

static void *volatile sink;
static uint64_t spin_sink; /* written by every worker (atomically) */

static NOINLINE void burn(unsigned units)
{
	uint64_t x = 88172645463325252ull;
	for (unsigned long i = 0; i < (unsigned long)units * UNIT_LOOPS; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	__atomic_store_n(&spin_sink, x, __ATOMIC_RELAXED);
}

static NOINLINE void allocate(unsigned blocks)
{
	for (unsigned i = 0; i < blocks; i++) {
		char *p = malloc(BLOCK);
		if (p) {
			p[0] = p[BLOCK - 1] = 1;
			__atomic_store_n(&sink, p, __ATOMIC_RELAXED);
		}
		free(p);
	}
}

static NOINLINE void lw_users(unsigned n)
{
	burn(3);
	allocate(3);
	__asm__ volatile("" ::"r"(n));
}

static NOINLINE void lw_orders(void)
{
	burn(1);
	allocate(1);
	__asm__ volatile("");
}

static NOINLINE void lw_idle(void)
{
	burn(1);
	__asm__ volatile("");
}

struct worker {
	pthread_t t;
	double seconds;
	unsigned long requests, users, orders, idle;
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	double end = now() + w->seconds;
	while (now() < end) {
		pullprof_label_push("endpoint", "/api/users");
		pullprof_label_push("tenant", w->users % 2 ? "b" : "a");
		lw_users((unsigned)w->users);
		pullprof_label_pop();
		pullprof_label_pop();
		w->users++;

		pullprof_label_push("endpoint", "/api/orders");
		lw_orders();
		pullprof_label_pop();
		w->orders++;

		lw_idle();
		w->idle++;
		w->requests += 2;
	}
	return NULL;
}

static void serve(unsigned nthreads, double seconds)
{
	struct worker ws[16];
	if (nthreads < 1 || nthreads > 16) {
		printf("error threads 1..16\n");
		return;
	}
	for (unsigned i = 0; i < nthreads; i++) {
		memset(&ws[i], 0, sizeof ws[i]);
		ws[i].seconds = seconds;
		pthread_create(&ws[i].t, NULL, work, &ws[i]);
		char name[16];
		snprintf(name, sizeof name, "worker-%u", i);
		pthread_setname_np(ws[i].t, name);
	}
	unsigned long req = 0, u = 0, o = 0, idle = 0;
	for (unsigned i = 0; i < nthreads; i++) {
		pthread_join(ws[i].t, NULL);
		req += ws[i].requests;
		u += ws[i].users;
		o += ws[i].orders;
		idle += ws[i].idle;
	}
	printf("served %lu %lu %lu %lu %lu %lu\n", req, u * 3, o, idle,
	       u * 3 * (unsigned long)BLOCK, o * (unsigned long)BLOCK);
}

int main(void)
{
	char line[1024];
	int rc = pullprof_start(NULL);
	if (rc) {
		printf("err %s\n", pullprof_strerror(rc));
		return 1;
	}
	printf("port %d\n", pullprof_port());
	fflush(stdout);
	while (fgets(line, sizeof line, stdin)) {
		char cmd[32] = "", a[512] = "", b[512] = "";
		int n = sscanf(line, "%31s %511s %511s", cmd, a, b);
		if (n < 1)
			continue;
		if (strcmp(cmd, "serve") == 0) {
			serve((unsigned)atoi(a), atof(b));
		} else if (strcmp(cmd, "push") == 0) {
			printf("rc %d\n",
			       pullprof_label_push(
			           strcmp(a, "-") ? a : "",
			           n > 2 && strcmp(b, "-") ? b : ""));
		} else if (strcmp(cmd, "pop") == 0) {
			pullprof_label_pop();
			printf("ok\n");
		} else if (strcmp(cmd, "quit") == 0) {
			pullprof_stop();
			printf("bye\n");
			fflush(stdout);
			return 0;
		} else {
			printf("error unknown command %s\n", cmd);
		}
		fflush(stdout);
	}
	pullprof_stop();
	return 0;
}

/*
 * bench_labels: the cost of a pullprof_label_push/pop pair, in nanoseconds,
 * for the shapes a server uses (bench/run.sh prints it beside Go's
 * pprof.Do, bench/peer_labels.go):
 *
 *   one label          push endpoint=/api/users, pop (the set is known)
 *   two nested         endpoint, then tenant inside it
 *   1000 values        endpoint=/api/v/<i % 1000> (all known after round 1)
 *   2 threads at once  "one label" on two threads, per pair per thread
 *   first sight        a value never seen: the set is interned (malloc,
 *                      the index's lock) — 20,000 of them
 *   with the agent     "one label" while the agent runs a 100 Hz CPU window
 *                      (the handler reads the label set of every sample)
 *
 * Usage: bench_labels [ROUNDS]   (ROUNDS million pairs per shape, default 5)
 * Each shape is timed 5 times; the median is printed.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pullprof.h>

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static char values[1000][24];
static long rounds;

static double one_label(void)
{
	double t0 = now_ns();
	for (long i = 0; i < rounds; i++) {
		pullprof_label_push("endpoint", "/api/users");
		__asm__ volatile("" ::: "memory");
		pullprof_label_pop();
	}
	return (now_ns() - t0) / (double)rounds;
}

static double two_nested(void)
{
	double t0 = now_ns();
	for (long i = 0; i < rounds; i++) {
		pullprof_label_push("endpoint", "/api/users");
		pullprof_label_push("tenant", (i & 1) ? "b" : "a");
		__asm__ volatile("" ::: "memory");
		pullprof_label_pop();
		pullprof_label_pop();
	}
	return (now_ns() - t0) / (double)rounds;
}

static double many_values(void)
{
	double t0 = now_ns();
	for (long i = 0; i < rounds; i++) {
		pullprof_label_push("endpoint", values[i % 1000]);
		__asm__ volatile("" ::: "memory");
		pullprof_label_pop();
	}
	return (now_ns() - t0) / (double)rounds;
}

static void *thread_one(void *arg)
{
	*(double *)arg = one_label();
	return NULL;
}

static double two_threads(void)
{
	double a, b;
	pthread_t t;
	pthread_create(&t, NULL, thread_one, &a);
	b = one_label();
	pthread_join(t, NULL);
	return (a + b) / 2;
}

static unsigned fresh;

static double first_sight(void)
{
	char v[48];
	const int n = 20000;
	double t0 = now_ns();
	for (int i = 0; i < n; i++) {
		snprintf(v, sizeof v, "/api/new/%u", fresh++);
		pullprof_label_push("endpoint", v);
		pullprof_label_pop();
	}
	/* snprintf included: subtract its cost. */
	double t1 = now_ns();
	for (int i = 0; i < n; i++) {
		snprintf(v, sizeof v, "/api/new/%u", fresh + (unsigned)i);
		__asm__ volatile("" ::"r"(v) : "memory");
	}
	double t2 = now_ns();
	return ((t1 - t0) - (t2 - t1)) / n;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double (*fn)(void))
{
	double r[5];
	for (int i = 0; i < 5; i++)
		r[i] = fn();
	qsort(r, 5, sizeof r[0], cmp);
	return r[2];
}

int main(int argc, char **argv)
{
	rounds = (argc > 1 ? atol(argv[1]) : 5) * 1000000L;
	if (rounds <= 0)
		rounds = 5000000L;
	for (int i = 0; i < 1000; i++)
		snprintf(values[i], sizeof values[i], "/api/v/%d", i);
	many_values(); /* every value seen once */

	printf("| shape | ns per push+pop pair |\n|---|---|\n");
	printf("| one label | %.1f |\n", median(one_label));
	printf("| two nested | %.1f |\n", median(two_nested));
	printf("| 1000 values | %.1f |\n", median(many_values));
	printf("| 2 threads at once | %.1f |\n", median(two_threads));
	printf("| first sight (new set: interned) | %.1f |\n",
	       median(first_sight));

	/* With the agent and a CPU window: the handler runs on this thread. */
	struct pullprof_config cfg;
	pullprof_config_init(&cfg);
	cfg.listen = "127.0.0.1:0";
	cfg.ignore_env = 1;
	if (pullprof_start(&cfg) == 0) {
		char cmd[160];
		snprintf(
		    cmd, sizeof cmd,
		    "curl -s -o /dev/null "
		    "'http://127.0.0.1:%d/debug/pprof/profile?seconds=30' &",
		    pullprof_port());
		if (system(cmd) == 0) {
			usleep(500000);
			printf(
			    "| one label, agent sampling at 100 Hz | %.1f |\n",
			    median(one_label));
		}
		pullprof_stop();
	}
	return 0;
}

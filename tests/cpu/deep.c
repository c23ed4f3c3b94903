/*
 * deep: CPU work at known stack depths and in short-lived threads, for the
 * unwinding and thread-lifetime tests and benchmarks. Built without frame
 * pointers (-fomit-frame-pointer), so stacks are only walkable with DWARF
 * CFI. Starts the agent on PULLPROF_LISTEN and prints "port N".
 *
 *   deep depth D THREADS      THREADS threads each descend D frames
 *                             (deep_even/deep_odd alternating, every third
 *                             frame with a variable-length array so its
 *                             CFA is rbp-based) and spin in deep_leaf;
 *                             prints "ready" once all are down there.
 *   deep short LIFETIME_US CONCURRENCY SECONDS [MIN_THREADS]
 *                             after a line on stdin, keeps CONCURRENCY
 *                             threads alive for SECONDS (and on until
 *                             MIN_THREADS have ended: a loaded machine
 *                             makes fewer in that time), each burning
 *                             LIFETIME_US of its own CPU in short_work()
 *                             and exiting; prints "cpu_ms C threads N":
 *                             the CPU those threads used, their number;
 *                             with DEEP_ENDS in the environment, then a
 *                             line "end REALTIME_NS CPU_NS" per thread
 *                             (when it ended, the CPU it used) and
 *                             "ends N".
 *   deep odd D THREADS        the same, with odd_frame (a frame whose CFA
 *                             is in rbx) between deep_leaf and the rest.
 *   deep fixed D THREADS UNITS
 *                             after a line on stdin, THREADS threads each
 *                             do UNITS units of work at depth D; prints
 *                             "units U cpu_ms C": the work done and the CPU
 *                             the threads used for it.
 *   deep spawn N              after a line on stdin, starts and joins N
 *                             threads that do nothing, one at a time;
 *                             prints "spawn_us U": microseconds each.
 *   deep threads N            N threads blocked on a condition variable
 *                             and one busy in deep_leaf; prints "ready".
 *
 * Every mode then runs until its stdin is closed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pullprof.h>

static volatile uint64_t sink;
static volatile int stop_spinning;
static int ready_count;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;

#define KEEP __attribute__((noinline, noclone, used))

KEEP uint64_t deep_leaf(uint64_t x);
KEEP uint64_t deep_even(int n, uint64_t x);
KEEP uint64_t deep_odd(int n, uint64_t x);

/* Units of work each thread does in deep_leaf in "fixed" mode (0: spin
 * until the process ends). */
static long leaf_units;
static _Atomic long units_done;

uint64_t deep_leaf(uint64_t x)
{
	long n = 0;
	while (!__atomic_load_n(&stop_spinning, __ATOMIC_RELAXED) &&
	       (!leaf_units || n++ < leaf_units))
		for (int k = 0; k < 1000; k++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
		}
	if (leaf_units)
		units_done += leaf_units;
	return x;
}

/* Hand-written code whose CFA lives in rbx (as in some assembly and in
 * stack-realigning prologues): a frame the compact tables cannot describe,
 * so the profiler must fall back to libunwind to get past it. */
uint64_t odd_frame(uint64_t x);
#if defined(__x86_64__)
__asm__(".text\n"
        ".globl odd_frame\n"
        ".type odd_frame, @function\n"
        "odd_frame:\n"
        ".cfi_startproc\n"
        "push %rbx\n"
        ".cfi_adjust_cfa_offset 8\n"
        ".cfi_rel_offset %rbx, 0\n"
        "mov %rsp, %rbx\n"
        ".cfi_def_cfa_register %rbx\n"
        "and $-32, %rsp\n"
        "sub $32, %rsp\n"
        "call deep_leaf\n"
        "mov %rbx, %rsp\n"
        ".cfi_def_cfa_register %rsp\n"
        "pop %rbx\n"
        ".cfi_adjust_cfa_offset -8\n"
        ".cfi_restore %rbx\n"
        "ret\n"
        ".cfi_endproc\n"
        ".size odd_frame, .-odd_frame\n");
#elif defined(__aarch64__)
/* The same on AArch64: the CFA in x19 (callee-saved). */
__asm__(".text\n"
        ".globl odd_frame\n"
        ".type odd_frame, @function\n"
        "odd_frame:\n"
        ".cfi_startproc\n"
        "stp x29, x30, [sp, #-32]!\n"
        ".cfi_def_cfa_offset 32\n"
        ".cfi_offset x29, -32\n"
        ".cfi_offset x30, -24\n"
        "str x19, [sp, #16]\n"
        ".cfi_offset x19, -16\n"
        "mov x19, sp\n"
        ".cfi_def_cfa_register x19\n"
        "mov x9, sp\n"
        "and x9, x9, #-32\n"
        "sub sp, x9, #32\n"
        "bl deep_leaf\n"
        "mov sp, x19\n"
        ".cfi_def_cfa_register sp\n"
        "ldr x19, [sp, #16]\n"
        ".cfi_restore x19\n"
        "ldp x29, x30, [sp], #32\n"
        ".cfi_restore x29\n"
        ".cfi_restore x30\n"
        ".cfi_def_cfa_offset 0\n"
        "ret\n"
        ".cfi_endproc\n"
        ".size odd_frame, .-odd_frame\n");
#endif

static int use_odd;

KEEP uint64_t bottom(uint64_t x);
uint64_t bottom(uint64_t x)
{
	return use_odd ? odd_frame(x) : deep_leaf(x);
}

static void arrived(void)
{
	pthread_mutex_lock(&lock);
	ready_count++;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

/* The arithmetic after each call keeps it from being a tail call, so
 * every level is a real frame. */
uint64_t deep_even(int n, uint64_t x)
{
	if (n <= 0) {
		arrived();
		return bottom(x);
	}
	if (n % 3 == 0) {
		/* A variable-length array: this frame's CFA is rbp-based. */
		volatile char pad[16 + (x & 15)];
		pad[0] = (char)x;
		return deep_odd(n - 1, x + (uint64_t)pad[0]) * 3 + 1;
	}
	return deep_odd(n - 1, x + 1) * 3 + 1;
}

uint64_t deep_odd(int n, uint64_t x)
{
	if (n <= 0) {
		arrived();
		return bottom(x);
	}
	if (n % 3 == 0) {
		volatile char pad[24 + (x & 7)];
		pad[0] = (char)x;
		return deep_even(n - 1, x ^ (uint64_t)pad[0]) * 5 + 2;
	}
	return deep_even(n - 1, x ^ 1) * 5 + 2;
}

static int depth;

static _Atomic uint64_t fixed_cpu_ns;
static uint64_t thread_cpu_ns(void);

static void *descender(void *arg)
{
	pthread_setname_np(pthread_self(), "deep-worker");
	/* depth deep_even/deep_odd frames, then bottom and deep_leaf. */
	sink += deep_even(depth - 1, (uintptr_t)arg + 88172645463325252ULL);
	fixed_cpu_ns += thread_cpu_ns();
	return NULL;
}

static void wait_ready(int n)
{
	pthread_mutex_lock(&lock);
	while (ready_count < n)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t lifetime_ns;
static _Atomic uint64_t short_cpu_ns, short_threads;

KEEP uint64_t short_work(uint64_t x);

uint64_t short_work(uint64_t x)
{
	uint64_t start = thread_cpu_ns();
	do {
		for (int k = 0; k < 200; k++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
		}
	} while (thread_cpu_ns() - start < lifetime_ns);
	return x;
}

/* Each short thread's end (CLOCK_REALTIME) and CPU, for "short" with
 * DEEP_ENDS set: a test counts the threads that ended inside its window. */
#define SHORT_ENDS 65536
static struct {
	uint64_t end_ns, cpu_ns;
} short_ends[SHORT_ENDS];
static _Atomic uint64_t short_ended;

static void *short_thread(void *arg)
{
	sink += short_work((uintptr_t)arg + 1);
	/* Everything this thread used, the start-up included. */
	uint64_t cpu = thread_cpu_ns();
	short_cpu_ns += cpu;
	short_threads++;
	uint64_t i = short_ended++;
	if (i < SHORT_ENDS) {
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		short_ends[i].end_ns =
		    (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
		short_ends[i].cpu_ns = cpu;
	}
	if ((uintptr_t)arg & 1)
		pthread_exit(NULL); /* half end so, half by returning */
	return NULL;
}

static void *nothing(void *arg)
{
	return arg;
}

static void *idler(void *arg)
{
	(void)arg;
	arrived();
	pthread_mutex_lock(&lock);
	while (!stop_spinning)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	return NULL;
}

static void wait_stdin_closed(void)
{
	char buf[256];
	while (fgets(buf, sizeof buf, stdin))
		;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr,
		        "usage: deep depth D THREADS | deep short "
		        "LIFETIME_US CONCURRENCY SECONDS | deep threads "
		        "N\n");
		return 2;
	}
	int rc = pullprof_start(NULL);
	if (rc) {
		fprintf(stderr, "deep: %s\n", pullprof_strerror(rc));
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("port %d\n", pullprof_port());

	if ((!strcmp(argv[1], "depth") || !strcmp(argv[1], "odd")) &&
	    argc == 4) {
		use_odd = !strcmp(argv[1], "odd");
		depth = atoi(argv[2]);
		int n = atoi(argv[3]);
		if (depth < 1 || n < 1)
			return 2;
		for (int i = 0; i < n; i++) {
			pthread_t t;
			pthread_create(&t, NULL, descender,
			               (void *)(uintptr_t)i);
			pthread_detach(t);
		}
		wait_ready(n);
		printf("ready\n");
	} else if (!strcmp(argv[1], "short") && (argc == 5 || argc == 6)) {
		lifetime_ns = (uint64_t)atol(argv[2]) * 1000u;
		int conc = atoi(argv[3]), seconds = atoi(argv[4]);
		uint64_t min_threads = argc == 6 ? (uint64_t)atol(argv[5]) : 0;
		char line[64];
		if (conc < 1 || conc > 64 || seconds < 1 ||
		    !fgets(line, sizeof line, stdin))
			return 2;
		pthread_t t[64];
		struct timespec end;
		clock_gettime(CLOCK_MONOTONIC, &end);
		end.tv_sec += seconds;
		uintptr_t seq = 0;
		for (int i = 0; i < conc; i++)
			pthread_create(&t[i], NULL, short_thread,
			               (void *)seq++);
		for (;;) {
			struct timespec now;
			for (int i = 0; i < conc; i++) {
				pthread_join(t[i], NULL);
				clock_gettime(CLOCK_MONOTONIC, &now);
				if ((now.tv_sec > end.tv_sec ||
				     (now.tv_sec == end.tv_sec &&
				      now.tv_nsec >= end.tv_nsec)) &&
				    short_threads >= min_threads) {
					for (int j = i + 1; j < conc; j++)
						pthread_join(t[j], NULL);
					goto done;
				}
				pthread_create(&t[i], NULL, short_thread,
				               (void *)seq++);
			}
		}
	done:
		printf("cpu_ms %.3f threads %llu\n", (double)short_cpu_ns / 1e6,
		       (unsigned long long)short_threads);
		if (getenv("DEEP_ENDS")) {
			uint64_t n =
			    short_ended < SHORT_ENDS ? short_ended : SHORT_ENDS;
			for (uint64_t i = 0; i < n; i++)
				printf(
				    "end %llu %llu\n",
				    (unsigned long long)short_ends[i].end_ns,
				    (unsigned long long)short_ends[i].cpu_ns);
			printf("ends %llu\n", (unsigned long long)n);
		}
	} else if (!strcmp(argv[1], "fixed") && argc == 5) {
		depth = atoi(argv[2]);
		int n = atoi(argv[3]);
		leaf_units = atol(argv[4]);
		char line[64];
		if (depth < 1 || n < 1 || n > 64 || leaf_units < 1 ||
		    !fgets(line, sizeof line, stdin))
			return 2;
		pthread_t t[64];
		for (int i = 0; i < n; i++)
			pthread_create(&t[i], NULL, descender,
			               (void *)(uintptr_t)i);
		for (int i = 0; i < n; i++)
			pthread_join(t[i], NULL);
		printf("units %ld cpu_ms %.3f\n", (long)units_done,
		       (double)fixed_cpu_ns / 1e6);
	} else if (!strcmp(argv[1], "spawn") && argc == 3) {
		int n = atoi(argv[2]);
		char line[64];
		if (n < 1 || !fgets(line, sizeof line, stdin))
			return 2;
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		for (int i = 0; i < n; i++) {
			pthread_t t;
			if (pthread_create(&t, NULL, nothing, NULL) == 0)
				pthread_join(t, NULL);
		}
		clock_gettime(CLOCK_MONOTONIC, &b);
		printf("spawn_us %.2f\n", ((double)(b.tv_sec - a.tv_sec) * 1e9 +
		                           (double)(b.tv_nsec - a.tv_nsec)) /
		                              1e3 / n);
	} else if (!strcmp(argv[1], "threads") && argc == 3) {
		int n = atoi(argv[2]);
		if (n < 0)
			return 2;
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setstacksize(&attr, 64 * 1024);
		for (int i = 0; i < n; i++) {
			pthread_t t;
			if (pthread_create(&t, &attr, idler, NULL) == 0)
				pthread_detach(t);
			else
				arrived();
		}
		depth = 3;
		pthread_t t;
		pthread_create(&t, NULL, descender, NULL);
		pthread_detach(t);
		wait_ready(n + 1);
		printf("ready\n");
	} else {
		fprintf(stderr, "deep: bad arguments\n");
		return 2;
	}
	wait_stdin_closed();
	pullprof_stop();
	return 0;
}

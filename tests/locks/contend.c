/*
 * contend: known lock contention for the mutex and block profile tests.
 * Starts the agent on PULLPROF_LISTEN (rates from PULLPROF_MUTEX_RATE and
 * PULLPROF_BLOCK_RATE), prints "port N", then reads commands on stdin:
 *
 *   run N [rw]   thread A takes the lock N times in holder(), holding it
 *                about 1 ms each time (spinning), while threads B and C
 *                take it in waiter_b() and waiter_c() as often as they can,
 *                holding it a moment (B under the profile label
 *                role=reader). With "rw" the lock is a
 *                pthread_rwlock_t (A and C write, B reads). When A is done:
 *                "done B_WAIT C_WAIT B_UNTIL C_UNTIL A_WAIT COUNT" in ns:
 *                the time B and C waited in their lock calls (measured
 *                around the call), the part of it until the unlock that let
 *                them in (what a mutex profile charges to the unlocker),
 *                A's own waits, how many of B's and C's lock calls had
 *                to wait, then "BY_A BY_B BY_C": the waits each thread's
 *                unlocks ended or cut short, as a mutex profile charges
 *                them (each unlock is charged, for every thread waiting
 *                then, the time since it began to wait or since the unlock
 *                before, whichever was later), then "SQ_A SQ_B SQ_C": the
 *                sum of the squares of each unlock's charge, by unlocker
 *                (ns^2; a profile that samples 1 in R unlocks has a
 *                variance of (R - 1) times that).
 *   cond N       thread D waits N times on a condition variable in
 *                cond_waiter() until main signals it 2 ms later; prints
 *                "done WAIT" (ns D spent in pthread_cond_wait).
 *   sem N        the same with a semaphore in sem_waiter() (sem_wait).
 *   join N       join_waiter() joins N threads that each live 2 ms; prints
 *                "done WAIT".
 *
 * Every run is separate: nothing contends between commands.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pullprof.h>

static uint64_t now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void spin_ns(uint64_t ns)
{
	uint64_t end = now() + ns;
	while (now() < end)
		;
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static int use_rw;
static _Atomic int a_done;

struct waits {
	uint64_t wait, until, count;
};
static struct waits wb, wc, wa;

/* Every unlock of the run's lock: when, and by whom (0 A, 1 B, 2 C).
 * Written by the holder just before it unlocks; read by a waiter once it
 * holds the lock. One thread holds it at a time (B is the only reader), so
 * the lock itself orders the log. */
#define ULOG 8192u
static struct {
	uint64_t t, charged;
	int who;
} ulog[ULOG];
static uint64_t ulog_n;
static uint64_t caused[3];
static double squares[3];

/* An unlock's charge is final once no wait can reach back to it. */
static void fold(uint64_t i)
{
	double d = (double)ulog[i % ULOG].charged;
	squares[ulog[i % ULOG].who] += d * d;
}

/* Charge a wait from t0 to the unlocks that happened during it. */
static void charge(uint64_t t0)
{
	uint64_t n = ulog_n;
	for (uint64_t i = n; i > 0 && n - i < ULOG - 1; i--) {
		uint64_t u = ulog[(i - 1) % ULOG].t;
		if (u <= t0)
			break;
		uint64_t prev = i > 1 ? ulog[(i - 2) % ULOG].t : 0;
		uint64_t d = u - (prev > t0 ? prev : t0);
		caused[ulog[(i - 1) % ULOG].who] += d;
		ulog[(i - 1) % ULOG].charged += d;
	}
}

/* A lock call that has to wait: timed from just before it (the failed try
 * is not a wait), as the profiler times it inside. */
static void take(int write, struct waits *w)
{
	uint64_t t0;
	if (use_rw) {
		if (!(write ? pthread_rwlock_trywrlock(&rw)
		            : pthread_rwlock_tryrdlock(&rw)))
			return; /* no wait: nothing to count */
		t0 = now();
		if (write)
			pthread_rwlock_wrlock(&rw);
		else
			pthread_rwlock_rdlock(&rw);
	} else {
		if (pthread_mutex_trylock(&mu) == 0)
			return;
		t0 = now();
		pthread_mutex_lock(&mu);
	}
	uint64_t t1 = now();
	/* When the lock was last released: the log's last entry. */
	uint64_t u = ulog_n ? ulog[(ulog_n - 1) % ULOG].t : 0;
	charge(t0);
	w->wait += t1 - t0;
	w->until += u > t0 ? u - t0 : 0;
	w->count++;
}

static void give(int who)
{
	uint64_t t = now();
	if (ulog_n >= ULOG)
		fold(ulog_n - ULOG);
	ulog[ulog_n % ULOG].t = t;
	ulog[ulog_n % ULOG].charged = 0;
	ulog[ulog_n % ULOG].who = who;
	ulog_n++;
	if (use_rw)
		pthread_rwlock_unlock(&rw);
	else
		pthread_mutex_unlock(&mu);
}

static __attribute__((noinline)) void holder(int n)
{
	for (int i = 0; i < n; i++) {
		take(1, &wa);
		spin_ns(1000000);
		give(0);
		usleep(300);
	}
}

static __attribute__((noinline)) void waiter_b(void)
{
	pullprof_label_push("role", "reader");
	while (!atomic_load(&a_done)) {
		take(0, &wb);
		spin_ns(20000);
		give(1);
		usleep(200);
	}
	pullprof_label_pop();
}

static __attribute__((noinline)) void waiter_c(void)
{
	while (!atomic_load(&a_done)) {
		take(1, &wc);
		spin_ns(20000);
		give(2);
		usleep(200);
	}
}

static void *run_a(void *arg)
{
	holder((int)(intptr_t)arg);
	atomic_store(&a_done, 1);
	return NULL;
}

static void *run_b(void *arg)
{
	(void)arg;
	waiter_b();
	return NULL;
}

static void *run_c(void *arg)
{
	(void)arg;
	waiter_c();
	return NULL;
}

static void run(int n)
{
	pthread_t a, b, c;
	memset(&wa, 0, sizeof wa);
	memset(&wb, 0, sizeof wb);
	memset(&wc, 0, sizeof wc);
	memset(caused, 0, sizeof caused);
	memset(squares, 0, sizeof squares);
	ulog_n = 0;
	atomic_store(&a_done, 0);
	pthread_create(&b, NULL, run_b, NULL);
	pthread_create(&c, NULL, run_c, NULL);
	pthread_setname_np(b, "waiter-b");
	pthread_setname_np(c, "waiter-c");
	pthread_create(&a, NULL, run_a, (void *)(intptr_t)n);
	pthread_setname_np(a, "holder-a");
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	pthread_join(c, NULL);
	for (uint64_t i = ulog_n > ULOG ? ulog_n - ULOG : 0; i < ulog_n; i++)
		fold(i);
	printf("done %llu %llu %llu %llu %llu %llu %llu %llu %llu %.0f %.0f "
	       "%.0f\n",
	       (unsigned long long)wb.wait, (unsigned long long)wc.wait,
	       (unsigned long long)wb.until, (unsigned long long)wc.until,
	       (unsigned long long)wa.wait,
	       (unsigned long long)(wb.count + wc.count),
	       (unsigned long long)caused[0], (unsigned long long)caused[1],
	       (unsigned long long)caused[2], squares[0], squares[1],
	       squares[2]);
}

/* ---- condition variable, semaphore, join -----------------------------------
 */

static pthread_mutex_t cmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static sem_t sem;
static int turn, rounds;
static _Atomic int armed;
static uint64_t waited;

static __attribute__((noinline)) void cond_waiter(int n)
{
	for (int i = 0; i < n; i++) {
		pthread_mutex_lock(&cmu);
		atomic_store(&armed, 1);
		uint64_t t0 = now();
		while (turn == i)
			pthread_cond_wait(&cv, &cmu);
		waited += now() - t0;
		pthread_mutex_unlock(&cmu);
	}
}

static __attribute__((noinline)) void sem_waiter(int n)
{
	for (int i = 0; i < n; i++) {
		atomic_store(&armed, 1);
		uint64_t t0 = now();
		while (sem_wait(&sem))
			;
		waited += now() - t0;
	}
}

static void *short_life(void *arg)
{
	(void)arg;
	usleep(2000);
	return NULL;
}

static __attribute__((noinline)) void join_waiter(int n)
{
	for (int i = 0; i < n; i++) {
		pthread_t t;
		pthread_create(&t, NULL, short_life, NULL);
		uint64_t t0 = now();
		pthread_join(t, NULL);
		waited += now() - t0;
	}
}

static void *run_cond(void *arg)
{
	cond_waiter((int)(intptr_t)arg);
	return NULL;
}

static void *run_sem(void *arg)
{
	sem_waiter((int)(intptr_t)arg);
	return NULL;
}

static void signaller(pthread_t t, int n, int use_sem)
{
	for (int i = 0; i < n; i++) {
		while (!atomic_exchange(&armed, 0))
			usleep(100);
		usleep(2000);
		if (use_sem) {
			sem_post(&sem);
		} else {
			pthread_mutex_lock(&cmu);
			turn = i + 1;
			pthread_cond_signal(&cv);
			pthread_mutex_unlock(&cmu);
		}
	}
	pthread_join(t, NULL);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	int rc = pullprof_start(NULL);
	if (rc) {
		fprintf(stderr, "contend: %s\n", pullprof_strerror(rc));
		return 1;
	}
	printf("port %d\n", pullprof_port());
	sem_init(&sem, 0, 0);
	char line[128];
	while (fgets(line, sizeof line, stdin)) {
		int n = 0;
		char what[16] = "";
		if (sscanf(line, "run %d %15s", &n, what) >= 1) {
			use_rw = strcmp(what, "rw") == 0;
			run(n);
		} else if (sscanf(line, "cond %d", &n) == 1 ||
		           sscanf(line, "sem %d", &n) == 1) {
			int s = line[0] == 's';
			pthread_t t;
			waited = 0;
			turn = 0;
			rounds = n;
			atomic_store(&armed, 0);
			pthread_create(&t, NULL, s ? run_sem : run_cond,
			               (void *)(intptr_t)n);
			signaller(t, n, s);
			printf("done %llu\n", (unsigned long long)waited);
		} else if (sscanf(line, "join %d", &n) == 1) {
			waited = 0;
			join_waiter(n);
			printf("done %llu\n", (unsigned long long)waited);
		}
	}
	return 0;
}

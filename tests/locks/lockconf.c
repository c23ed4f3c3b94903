/*
 * lockconf: the semantics of every pthread lock call a lock profiler
 * interposes, checked call by call: return values (EBUSY, ETIMEDOUT,
 * EDEADLK, EPERM, EOWNERDEAD, ENOTRECOVERABLE), recursion counts, timeouts
 * that do not end early, wake-ups, every mutex type (normal, recursive,
 * errorcheck, robust, priority-inherit, process-shared across a fork),
 * rwlocks, condition variables, semaphores, joins, and a lock taken in a
 * constructor before anything else ran.
 *
 *   lockconf [agent]   run every check (with "agent": after starting the
 *                      agent on PULLPROF_LISTEN); prints "bad: ..." for each
 *                      failure and "checks N bad M" at the end; exits 0
 *                      when M is 0.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pullprof.h>

static int checks, bad;

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		checks++;                                                      \
		if (!(cond)) {                                                 \
			bad++;                                                 \
			printf("bad: line %d: ", __LINE__);                    \
			printf(__VA_ARGS__);                                   \
			printf("\n");                                          \
		}                                                              \
	} while (0)

#define EQ(got, want, what)                                                    \
	do {                                                                   \
		int g_ = (got), w_ = (want);                                   \
		CHECK(g_ == w_, "%s: got %d (%s), want %d (%s)", what, g_,     \
		      strerror(g_), w_, strerror(w_));                         \
	} while (0)

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* An absolute time ms from now on clock c. */
static struct timespec in_ms(clockid_t c, long ms)
{
	struct timespec t;
	clock_gettime(c, &t);
	t.tv_nsec += ms * 1000000L;
	t.tv_sec += t.tv_nsec / 1000000000L;
	t.tv_nsec %= 1000000000L;
	return t;
}

/* ---- a lock taken before main, with a static initializer ---------------- */

static pthread_mutex_t early = PTHREAD_MUTEX_INITIALIZER;
static int early_rc = -1;

__attribute__((constructor)) static void take_early(void)
{
	early_rc = pthread_mutex_lock(&early);
	if (!early_rc)
		early_rc = pthread_mutex_unlock(&early);
}

/* ---- helpers: another thread tries a lock ------------------------------- */

struct attempt {
	pthread_mutex_t *m;
	int rc;
};

static void *try_other(void *arg)
{
	struct attempt *a = arg;
	a->rc = pthread_mutex_trylock(a->m);
	if (a->rc == 0)
		pthread_mutex_unlock(a->m);
	return NULL;
}

static int trylock_elsewhere(pthread_mutex_t *m)
{
	struct attempt a = {m, -1};
	pthread_t t;
	pthread_create(&t, NULL, try_other, &a);
	pthread_join(t, NULL);
	return a.rc;
}

static void *unlock_other(void *arg)
{
	struct attempt *a = arg;
	a->rc = pthread_mutex_unlock(a->m);
	return NULL;
}

static void *lock_and_exit(void *arg)
{
	pthread_mutex_lock(arg);
	return NULL; /* dies holding it */
}

static void init_mutex(pthread_mutex_t *m, int type, int robust, int proto,
                       int pshared)
{
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, type);
	if (robust)
		pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	if (proto)
		pthread_mutexattr_setprotocol(&a, proto);
	if (pshared)
		pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
}

/* ---- mutexes --------------------------------------------------------------
 */

/* A holder that keeps the lock until it is told to let go, and then
 * 50 ms more (so that a lock asked for at once waits for it). It held it
 * for 200 ms from its start: on a loaded machine the main thread's loop
 * "until the holder has it" could miss those 200 ms altogether (then it
 * spun on a free lock for good: the lock run of test_locks found no
 * "checks" line), and the timed locks could outlast them. */
struct holder {
	pthread_mutex_t *m;
	int held, release; /* atomic */
};

static void *hold_for(void *arg)
{
	struct holder *h = arg;
	struct timespec ms = {0, 1000000L}, ts = {0, 50 * 1000000L};
	pthread_mutex_lock(h->m);
	__atomic_store_n(&h->held, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&h->release, __ATOMIC_ACQUIRE))
		nanosleep(&ms, NULL);
	nanosleep(&ts, NULL);
	pthread_mutex_unlock(h->m);
	return NULL;
}

static void mutex_kind(const char *name, int type, int robust, int proto)
{
	pthread_mutex_t m;
	char what[96];
	init_mutex(&m, type, robust, proto, 0);

	snprintf(what, sizeof what, "%s: lock", name);
	EQ(pthread_mutex_lock(&m), 0, what);
	snprintf(what, sizeof what, "%s: trylock from another thread", name);
	EQ(trylock_elsewhere(&m), EBUSY, what);
	snprintf(what, sizeof what, "%s: trylock by the owner", name);
	/* glibc: an error-checking priority-inheritance mutex says EDEADLK. */
	int want = type == PTHREAD_MUTEX_RECURSIVE             ? 0
	           : type == PTHREAD_MUTEX_ERRORCHECK && proto ? EDEADLK
	                                                       : EBUSY;
	EQ(pthread_mutex_trylock(&m), want, what);
	if (type == PTHREAD_MUTEX_RECURSIVE) {
		snprintf(what, sizeof what, "%s: lock again (count 3)", name);
		EQ(pthread_mutex_lock(&m), 0, what);
		EQ(pthread_mutex_unlock(&m), 0, "recursive: unlock 3");
		EQ(pthread_mutex_unlock(&m), 0, "recursive: unlock 2");
		snprintf(what, sizeof what,
		         "%s: still held after two of three unlocks", name);
		EQ(trylock_elsewhere(&m), EBUSY, what);
	}
	if (type == PTHREAD_MUTEX_ERRORCHECK) {
		EQ(pthread_mutex_lock(&m), EDEADLK, "errorcheck: relock");
		struct attempt a = {&m, -1};
		pthread_t t;
		pthread_create(&t, NULL, unlock_other, &a);
		pthread_join(t, NULL);
		EQ(a.rc, EPERM, "errorcheck: unlock by another thread");
	}
	snprintf(what, sizeof what, "%s: unlock", name);
	EQ(pthread_mutex_unlock(&m), 0, what);
	if (type == PTHREAD_MUTEX_ERRORCHECK || robust)
		EQ(pthread_mutex_unlock(&m), EPERM,
		   "errorcheck/robust: unlock when not held");
	snprintf(what, sizeof what, "%s: trylock when free", name);
	EQ(pthread_mutex_trylock(&m), 0, what);
	EQ(pthread_mutex_unlock(&m), 0, "unlock after trylock");

	/* Timed locks against a holder that keeps it until told. */
	pthread_t h;
	struct holder hd = {&m, 0, 0};
	pthread_create(&h, NULL, hold_for, &hd);
	struct timespec ms = {0, 1000000L};
	while (!__atomic_load_n(&hd.held, __ATOMIC_ACQUIRE))
		nanosleep(&ms, NULL); /* until the holder has it */
	uint64_t t0 = now_ns();
	struct timespec ts = in_ms(CLOCK_REALTIME, 30);
	snprintf(what, sizeof what, "%s: timedlock on a held lock", name);
	EQ(pthread_mutex_timedlock(&m, &ts), ETIMEDOUT, what);
	CHECK(now_ns() - t0 >= 29000000u, "%s: timedlock waited its time",
	      name);
	t0 = now_ns();
	ts = in_ms(CLOCK_MONOTONIC, 30);
	snprintf(what, sizeof what, "%s: clocklock on a held lock", name);
	EQ(pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &ts), ETIMEDOUT, what);
	CHECK(now_ns() - t0 >= 29000000u, "%s: clocklock waited its time",
	      name);
	snprintf(what, sizeof what, "%s: lock waits for the holder", name);
	__atomic_store_n(&hd.release, 1, __ATOMIC_RELEASE);
	EQ(pthread_mutex_lock(&m), 0, what);
	EQ(pthread_mutex_unlock(&m), 0, "unlock after the wait");
	pthread_join(h, NULL);

	if (robust) {
		pthread_t t;
		pthread_create(&t, NULL, lock_and_exit, &m);
		pthread_join(t, NULL);
		EQ(pthread_mutex_lock(&m), EOWNERDEAD,
		   "robust: the owner died holding it");
		EQ(pthread_mutex_consistent(&m), 0, "robust: made consistent");
		EQ(pthread_mutex_unlock(&m), 0, "robust: unlock");
		pthread_create(&t, NULL, lock_and_exit, &m);
		pthread_join(t, NULL);
		EQ(pthread_mutex_trylock(&m), EOWNERDEAD,
		   "robust: trylock after the owner died");
		EQ(pthread_mutex_unlock(&m), 0,
		   "robust: unlock without consistent");
		EQ(pthread_mutex_lock(&m), ENOTRECOVERABLE,
		   "robust: not recoverable");
	}
	pthread_mutex_destroy(&m);
}

/* A process-shared mutex in shared memory, held by a child process. */
static void process_shared(void)
{
	pthread_mutex_t *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
	                          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		CHECK(0, "mmap");
		return;
	}
	init_mutex(m, PTHREAD_MUTEX_NORMAL, 0, 0, 1);
	/* fds: the child says it holds the lock; go: it may let go (then
	 * 50 ms later). It let go 200 ms after it took it, which a loaded
	 * machine could let pass before the trylock below. */
	int fds[2], go[2];
	if (pipe(fds)) {
		CHECK(0, "pipe");
		return;
	}
	if (pipe(go)) {
		CHECK(0, "pipe");
		return;
	}
	pid_t pid = fork();
	if (pid == 0) {
		pthread_mutex_lock(m);
		char c = 'x';
		if (write(fds[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(2);
		struct timespec ts = {0, 50 * 1000000L};
		nanosleep(&ts, NULL);
		pthread_mutex_unlock(m);
		_exit(0);
	}
	char c = 'g';
	EQ((int)read(fds[0], &c, 1), 1, "pshared: the child holds it");
	EQ(pthread_mutex_trylock(m), EBUSY, "pshared: held by the child");
	EQ((int)write(go[1], &c, 1), 1, "pshared: the child is told to let go");
	EQ(pthread_mutex_lock(m), 0, "pshared: lock after the child let go");
	EQ(pthread_mutex_unlock(m), 0, "pshared: unlock");
	int st;
	waitpid(pid, &st, 0);
	EQ(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 0, "pshared: child exit");
	close(fds[0]);
	close(fds[1]);
	close(go[0]);
	close(go[1]);
	munmap(m, 4096);
}

/* ---- rwlocks ----------------------------------------------------------------
 */

static void *rw_trywr(void *arg)
{
	return (void *)(intptr_t)pthread_rwlock_trywrlock(arg);
}

static void *rw_tryrd(void *arg)
{
	int rc = pthread_rwlock_tryrdlock(arg);
	if (!rc)
		pthread_rwlock_unlock(arg);
	return (void *)(intptr_t)rc;
}

static int in_thread(void *(*fn)(void *), void *arg)
{
	pthread_t t;
	void *r;
	pthread_create(&t, NULL, fn, arg);
	pthread_join(t, &r);
	return (int)(intptr_t)r;
}

static void rwlocks(void)
{
	pthread_rwlock_t l;
	pthread_rwlock_init(&l, NULL);
	EQ(pthread_rwlock_rdlock(&l), 0, "rwlock: rdlock");
	EQ(pthread_rwlock_rdlock(&l), 0, "rwlock: rdlock again");
	EQ(in_thread(rw_trywr, &l), EBUSY, "rwlock: trywrlock while read");
	EQ(in_thread(rw_tryrd, &l), 0, "rwlock: tryrdlock while read");
	EQ(pthread_rwlock_unlock(&l), 0, "rwlock: unlock read");
	EQ(pthread_rwlock_unlock(&l), 0, "rwlock: unlock read 2");
	EQ(pthread_rwlock_wrlock(&l), 0, "rwlock: wrlock");
	EQ(pthread_rwlock_wrlock(&l), EDEADLK, "rwlock: wrlock again");
	EQ(in_thread(rw_tryrd, &l), EBUSY, "rwlock: tryrdlock while written");
	uint64_t t0 = now_ns();
	EQ(pthread_rwlock_unlock(&l), 0, "rwlock: unlock write");
	EQ(pthread_rwlock_trywrlock(&l), 0, "rwlock: trywrlock when free");
	struct timespec ts = in_ms(CLOCK_REALTIME, 30);
	EQ(pthread_rwlock_timedrdlock(&l, &ts), EDEADLK,
	   "rwlock: timedrdlock by the writer");
	EQ(pthread_rwlock_unlock(&l), 0, "rwlock: unlock");
	CHECK(now_ns() - t0 < 5000000000u, "rwlock: no hang");
	pthread_rwlock_destroy(&l);
}

/* ---- condition variables, semaphores, joins --------------------------------
 */

static pthread_mutex_t cm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int flag;
/* While set, signal_later waits before it signals and ends: the checks
 * of a join "while it runs" ran against its 50 ms of sleep, which a
 * loaded machine can let pass before them. */
static int keep_running; /* atomic */

static void *signal_later(void *arg)
{
	(void)arg;
	struct timespec ts = {0, 50 * 1000000L}, ms = {0, 1000000L};
	nanosleep(&ts, NULL);
	while (__atomic_load_n(&keep_running, __ATOMIC_ACQUIRE))
		nanosleep(&ms, NULL);
	pthread_mutex_lock(&cm);
	flag = 1;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&cm);
	return (void *)(intptr_t)42;
}

static void conds_sems_joins(void)
{
	pthread_mutex_lock(&cm);
	uint64_t t0 = now_ns();
	struct timespec ts = in_ms(CLOCK_REALTIME, 30);
	EQ(pthread_cond_timedwait(&cv, &cm, &ts), ETIMEDOUT,
	   "cond: timedwait times out");
	CHECK(now_ns() - t0 >= 29000000u, "cond: timedwait waited its time");
	ts = in_ms(CLOCK_MONOTONIC, 30);
	EQ(pthread_cond_clockwait(&cv, &cm, CLOCK_MONOTONIC, &ts), ETIMEDOUT,
	   "cond: clockwait times out");
	EQ(pthread_mutex_trylock(&cm), EBUSY,
	   "cond: the mutex is held again after the wait");
	pthread_t t;
	pthread_create(&t, NULL, signal_later, NULL);
	while (!flag)
		EQ(pthread_cond_wait(&cv, &cm), 0, "cond: wait");
	pthread_mutex_unlock(&cm);
	void *r;
	EQ(pthread_join(t, &r), 0, "join");
	EQ((int)(intptr_t)r, 42, "join: the thread's value");

	sem_t s;
	sem_init(&s, 0, 0);
	errno = 0;
	EQ(sem_trywait(&s) == -1 ? errno : 0, EAGAIN, "sem: trywait empty");
	t0 = now_ns();
	ts = in_ms(CLOCK_REALTIME, 30);
	errno = 0;
	EQ(sem_timedwait(&s, &ts) == -1 ? errno : 0, ETIMEDOUT,
	   "sem: timedwait times out");
	CHECK(now_ns() - t0 >= 29000000u, "sem: timedwait waited its time");
	ts = in_ms(CLOCK_MONOTONIC, 30);
	errno = 0;
	EQ(sem_clockwait(&s, CLOCK_MONOTONIC, &ts) == -1 ? errno : 0, ETIMEDOUT,
	   "sem: clockwait times out");
	EQ(sem_post(&s), 0, "sem: post");
	EQ(sem_wait(&s), 0, "sem: wait takes it");
	sem_destroy(&s);

	flag = 0;
	__atomic_store_n(&keep_running, 1, __ATOMIC_RELEASE);
	pthread_create(&t, NULL, signal_later, NULL);
	EQ(pthread_tryjoin_np(t, &r), EBUSY, "tryjoin while it runs");
	ts = in_ms(CLOCK_REALTIME, 10);
	EQ(pthread_timedjoin_np(t, &r, &ts), ETIMEDOUT,
	   "timedjoin while it runs");
	__atomic_store_n(&keep_running, 0, __ATOMIC_RELEASE);
	pthread_mutex_lock(&cm);
	while (!flag)
		pthread_cond_wait(&cv, &cm);
	pthread_mutex_unlock(&cm);
	EQ(pthread_join(t, &r), 0, "join after the timed ones");
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && !strcmp(argv[1], "agent")) {
		int rc = pullprof_start(NULL);
		if (rc) {
			fprintf(stderr, "lockconf: %s\n",
			        pullprof_strerror(rc));
			return 1;
		}
		printf("port %d\n", pullprof_port());
	}
	EQ(early_rc, 0, "a static mutex locked in a constructor");
	mutex_kind("normal", PTHREAD_MUTEX_NORMAL, 0, 0);
	mutex_kind("recursive", PTHREAD_MUTEX_RECURSIVE, 0, 0);
	mutex_kind("errorcheck", PTHREAD_MUTEX_ERRORCHECK, 0, 0);
	mutex_kind("robust", PTHREAD_MUTEX_NORMAL, 1, 0);
	mutex_kind("priority-inherit", PTHREAD_MUTEX_NORMAL, 0,
	           PTHREAD_PRIO_INHERIT);
	mutex_kind("robust priority-inherit", PTHREAD_MUTEX_ERRORCHECK, 1,
	           PTHREAD_PRIO_INHERIT);
	process_shared();
	rwlocks();
	conds_sems_joins();
	printf("checks %d bad %d\n", checks, bad);
	return bad != 0;
}

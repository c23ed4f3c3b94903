/*
 * The pthread lock calls, interposed. Every lock the program
 * takes comes through here, on any thread, holding any of its other locks.
 *
 * The library defines the names (a linked host's calls and a preloaded
 * one's reach these first) and forwards to the next definition (RTLD_NEXT:
 * the C library, or a sanitizer's interceptor before it). What each wrapper
 * costs when nothing waits:
 *  - lock: while profiling, the C library's trylock instead of its lock
 *    (the same compare-and-swap); only when the try fails is the wait timed
 *    and counted (record.c). Profiling off: the real lock, through a
 *    pointer.
 *  - unlock: one load of a process-wide count of threads waiting right
 *    now; only when some thread waits for some lock is this lock looked at.
 *
 * Semantics are the C library's own, call by call (tests/locks/lockconf
 * checks them with and without the agent): a try is only made where the
 * call itself would succeed at once and the outcome cannot differ (a clock
 * or deadline the call would refuse goes straight to it; semaphores keep
 * sem_wait's cancellation point); condition variables, joins and timed
 * semaphore waits are not tried, only timed.
 *
 * Light object (src/shim/shim.h): the recorder's calls go through the
 * agent's table. pp_locks.on and pp_locks.waiting stay 0 until the agent is
 * loaded and records, so the slow paths find it there.
 * Context: host.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "arch/arch.h"
#include "pullprof.h"
#include "shim/locks_hot.h"
#include "shim/shim.h"

/* What the wrappers' fast paths read, pp_locks, is defined in src/shim/shim.c
 * (the light object); the agent's recorder sets it. All zero until the
 * agent runs, so nothing below calls into the agent before it is loaded. */

/* Under ThreadSanitizer its interceptors of these calls come first and call
 * ours as the "real" ones (some not at all: it asks for the condition
 * variable calls by version, which ours do not carry), and instrumented
 * code run from inside its blocking interceptors breaks its model (a
 * sem_wait that never returned, synchronization it did not see). There
 * every wrapper goes straight to the C library: the lock profiles are
 * served, empty. */
#if defined(__SANITIZE_THREAD__)
#define RECORDING 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RECORDING 0
#endif
#endif
#ifndef RECORDING
#define RECORDING 1
#endif

/* ThreadSanitizer builds leave the wrappers out altogether (the lock
 * profiles are served, empty): its interceptors go to the C library
 * directly. Built into one object with the agent (libpp-static.la: the unit
 * tests), wrappers that only passed calls on were still first in line,
 * and TSan missed what pthread_cond_wait did to its mutex. */
#if RECORDING

#define RA() ((uintptr_t)__builtin_return_address(0))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

typedef int (*mutex_fn)(pthread_mutex_t *);
typedef int (*mutex_timed_fn)(pthread_mutex_t *, const struct timespec *);
typedef int (*mutex_clock_fn)(pthread_mutex_t *, clockid_t,
                              const struct timespec *);
typedef int (*rw_fn)(pthread_rwlock_t *);
typedef int (*rw_timed_fn)(pthread_rwlock_t *, const struct timespec *);
typedef int (*rw_clock_fn)(pthread_rwlock_t *, clockid_t,
                           const struct timespec *);
typedef int (*cond_fn)(pthread_cond_t *, pthread_mutex_t *);
typedef int (*cond_timed_fn)(pthread_cond_t *, pthread_mutex_t *,
                             const struct timespec *);
typedef int (*cond_clock_fn)(pthread_cond_t *, pthread_mutex_t *, clockid_t,
                             const struct timespec *);
typedef int (*sem_fn)(sem_t *);
typedef int (*sem_timed_fn)(sem_t *, const struct timespec *);
typedef int (*sem_clock_fn)(sem_t *, clockid_t, const struct timespec *);
typedef int (*join_fn)(pthread_t, void **);
typedef int (*join_timed_fn)(pthread_t, void **, const struct timespec *);
typedef int (*join_clock_fn)(pthread_t, void **, clockid_t,
                             const struct timespec *);

/* The next definitions, found once (at load, or at a first call that comes
 * before our constructor: another library's). */
static struct {
	mutex_fn mutex_lock, mutex_trylock, mutex_unlock;
	mutex_timed_fn mutex_timedlock;
	mutex_clock_fn mutex_clocklock;
	rw_fn rdlock, wrlock, tryrdlock, trywrlock, rwunlock;
	rw_timed_fn timedrdlock, timedwrlock;
	rw_clock_fn clockrdlock, clockwrlock;
	cond_fn cond_wait;
	cond_timed_fn cond_timedwait;
	cond_clock_fn cond_clockwait;
	sem_fn sem_wait, sem_trywait;
	sem_timed_fn sem_timedwait;
	sem_clock_fn sem_clockwait;
	join_fn join;
	join_timed_fn timedjoin;
	join_clock_fn clockjoin;
} real;

/* What a first call may use while dlsym runs (should dlsym itself lock):
 * the C library's own older names of the mutex calls, bound directly. */
extern int pp_glibc_mutex_lock(pthread_mutex_t *);
extern int pp_glibc_mutex_unlock(pthread_mutex_t *);
__asm__(
    ".symver pp_glibc_mutex_lock, __pthread_mutex_lock@" PP_ARCH_GLIBC_BASE);
__asm__(".symver pp_glibc_mutex_unlock, "
        "__pthread_mutex_unlock@" PP_ARCH_GLIBC_BASE);

static int recording(void)
{
	return RECORDING && pp_locks_on();
}

static int anyone_waiting(void)
{
	return RECORDING && pp_locks_anyone_waiting();
}

static void *next(const char *name, const char *version)
{
	void *f = version ? dlvsym(RTLD_NEXT, name, version) : NULL;
	return f ? f : dlsym(RTLD_NEXT, name);
}

#define FIND(field, name, version)                                             \
	__atomic_store_n((void **)&real.field, next(name, version),            \
	                 __ATOMIC_RELAXED)

static __thread int resolving __attribute__((tls_model("initial-exec")));

static void resolve(void)
{
	if (resolving)
		return;
	resolving = 1;
	FIND(mutex_lock, "pthread_mutex_lock", NULL);
	FIND(mutex_trylock, "pthread_mutex_trylock", NULL);
	FIND(mutex_unlock, "pthread_mutex_unlock", NULL);
	FIND(mutex_timedlock, "pthread_mutex_timedlock", NULL);
	FIND(mutex_clocklock, "pthread_mutex_clocklock", NULL);
	FIND(rdlock, "pthread_rwlock_rdlock", NULL);
	FIND(wrlock, "pthread_rwlock_wrlock", NULL);
	FIND(tryrdlock, "pthread_rwlock_tryrdlock", NULL);
	FIND(trywrlock, "pthread_rwlock_trywrlock", NULL);
	FIND(rwunlock, "pthread_rwlock_unlock", NULL);
	FIND(timedrdlock, "pthread_rwlock_timedrdlock", NULL);
	FIND(timedwrlock, "pthread_rwlock_timedwrlock", NULL);
	FIND(clockrdlock, "pthread_rwlock_clockrdlock", NULL);
	FIND(clockwrlock, "pthread_rwlock_clockwrlock", NULL);
	/* The condition variable calls have two versions: the one programs
	 * built since glibc 2.3.2 use (an unversioned lookup may find the
	 * old one). */
	FIND(cond_wait, "pthread_cond_wait", "GLIBC_2.3.2");
	FIND(cond_timedwait, "pthread_cond_timedwait", "GLIBC_2.3.2");
	FIND(cond_clockwait, "pthread_cond_clockwait", NULL);
	FIND(sem_wait, "sem_wait", NULL);
	FIND(sem_trywait, "sem_trywait", NULL);
	FIND(sem_timedwait, "sem_timedwait", NULL);
	FIND(sem_clockwait, "sem_clockwait", NULL);
	FIND(join, "pthread_join", NULL);
	FIND(timedjoin, "pthread_timedjoin_np", NULL);
	FIND(clockjoin, "pthread_clockjoin_np", NULL);
	resolving = 0;
}

__attribute__((constructor(101))) static void resolve_at_load(void)
{
	resolve();
}

/* The next definition of a call (one load once resolved); NULL only when
 * the C library lacks it. */
#define REAL(field)                                                            \
	__extension__({                                                        \
		__typeof__(real.field) next_f_ =                               \
		    __atomic_load_n(&real.field, __ATOMIC_RELAXED);            \
		if (UNLIKELY(!next_f_)) {                                      \
			resolve();                                             \
			next_f_ =                                              \
			    __atomic_load_n(&real.field, __ATOMIC_RELAXED);    \
		}                                                              \
		next_f_;                                                       \
	})

#define CALL(field, ...)                                                       \
	({                                                                     \
		__typeof__(real.field) f_ = REAL(field);                       \
		f_ ? f_(__VA_ARGS__) : ENOSYS;                                 \
	})

/* The clocks the C library's timed waits accept: another is refused with
 * EINVAL before any try, so such a call goes straight to it. */
static int clock_ok(clockid_t c)
{
	return c == CLOCK_REALTIME || c == CLOCK_MONOTONIC;
}

static int deadline_ok(const struct timespec *t)
{
	return t && t->tv_nsec >= 0 && t->tv_nsec < 1000000000;
}

/* ---- mutexes --------------------------------------------------------------
 */

/* A wait the try could not spare: timed and counted around the real call. */
#define WAITED(addr, owned, self, from, expr)                                  \
	({                                                                     \
		struct pp_locks_wait w_;                                       \
		const struct pp_agent_ops *ops_ = PP_AGENT_OPS();              \
		int r_;                                                        \
		if (!ops_ || !ops_->locks_wait_begin(&w_, (addr), (owned))) {  \
			r_ = (expr);                                           \
		} else {                                                       \
			r_ = (expr);                                           \
			ops_->locks_wait_end(&w_, (self), (from));             \
		}                                                              \
		r_;                                                            \
	})

static __attribute__((noinline)) int mutex_wait(pthread_mutex_t *m,
                                                uintptr_t from, uintptr_t self)
{
	return WAITED(m, 1, self, from, CALL(mutex_lock, m));
}

PULLPROF_API int pthread_mutex_lock(pthread_mutex_t *m)
{
	if (UNLIKELY(!__atomic_load_n(&real.mutex_lock, __ATOMIC_RELAXED)) &&
	    resolving)
		return pp_glibc_mutex_lock(m);
	if (LIKELY(!recording()))
		return CALL(mutex_lock, m);
	int rc = CALL(mutex_trylock, m);
	if (LIKELY(rc != EBUSY))
		return rc; /* taken, or refused as lock would refuse it */
	return mutex_wait(m, RA(), PP_LOCKS_SELF());
}

static __attribute__((noinline)) int mutex_timed_wait(pthread_mutex_t *m,
                                                      const struct timespec *t,
                                                      uintptr_t from,
                                                      uintptr_t self)
{
	return WAITED(m, 1, self, from, CALL(mutex_timedlock, m, t));
}

PULLPROF_API int pthread_mutex_timedlock(pthread_mutex_t *m,
                                         const struct timespec *t)
{
	if (LIKELY(!recording()))
		return CALL(mutex_timedlock, m, t);
	int rc = CALL(mutex_trylock, m);
	if (rc != EBUSY)
		return rc;
	return mutex_timed_wait(m, t, RA(), PP_LOCKS_SELF());
}

static __attribute__((noinline)) int
mutex_clock_wait(pthread_mutex_t *m, clockid_t c, const struct timespec *t,
                 uintptr_t from, uintptr_t self)
{
	return WAITED(m, 1, self, from, CALL(mutex_clocklock, m, c, t));
}

PULLPROF_API int pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t c,
                                         const struct timespec *t)
{
	if (LIKELY(!recording()) || !clock_ok(c))
		return CALL(mutex_clocklock, m, c, t);
	int rc = CALL(mutex_trylock, m);
	if (rc != EBUSY)
		return rc;
	return mutex_clock_wait(m, c, t, RA(), PP_LOCKS_SELF());
}

/*
 * Does this unlock release the mutex? Not when a recursive mutex is held
 * more than once (the layout of pthread_mutex_t is the C library's ABI, in
 * bits/struct_mutex.h). Whether anyone waits is the contention slot's to
 * say, not the lock word's: a thread that has begun to wait may not have
 * marked the word yet (preempted between the two), and the unlocks it
 * sleeps through would otherwise leave its time to the next one.
 */
#define MUTEX_KIND_TYPE 3

static int releases(pthread_mutex_t *m)
{
	int kind = __atomic_load_n(&m->__data.__kind, __ATOMIC_RELAXED);
	return (kind & MUTEX_KIND_TYPE) != PTHREAD_MUTEX_RECURSIVE ||
	       m->__data.__count <= 1;
}

static __attribute__((noinline)) int
mutex_unlock_slow(pthread_mutex_t *m, uintptr_t from, uintptr_t self)
{
	const struct pp_agent_ops *ops = PP_AGENT_OPS();
	uint64_t charge = ops && releases(m) ? ops->locks_release(m) : 0;
	int rc = CALL(mutex_unlock, m);
	if (charge && rc == 0)
		ops->locks_released(charge, self, from);
	return rc;
}

PULLPROF_API int pthread_mutex_unlock(pthread_mutex_t *m)
{
	if (UNLIKELY(!__atomic_load_n(&real.mutex_unlock, __ATOMIC_RELAXED)) &&
	    resolving)
		return pp_glibc_mutex_unlock(m);
	if (LIKELY(!anyone_waiting()))
		return CALL(mutex_unlock, m);
	return mutex_unlock_slow(m, RA(), PP_LOCKS_SELF());
}

/* ---- reader-writer locks ----------------------------------------------------
 */

static __attribute__((noinline)) int rw_wait(pthread_rwlock_t *l, int write,
                                             uintptr_t from, uintptr_t self)
{
	return write ? WAITED(l, 1, self, from, CALL(wrlock, l))
	             : WAITED(l, 1, self, from, CALL(rdlock, l));
}

PULLPROF_API int pthread_rwlock_rdlock(pthread_rwlock_t *l)
{
	if (LIKELY(!recording()))
		return CALL(rdlock, l);
	int rc = CALL(tryrdlock, l);
	if (rc != EBUSY)
		return rc;
	return rw_wait(l, 0, RA(), PP_LOCKS_SELF());
}

PULLPROF_API int pthread_rwlock_wrlock(pthread_rwlock_t *l)
{
	if (LIKELY(!recording()))
		return CALL(wrlock, l);
	int rc = CALL(trywrlock, l);
	if (rc != EBUSY)
		return rc;
	return rw_wait(l, 1, RA(), PP_LOCKS_SELF());
}

static __attribute__((noinline)) int
rw_timed_wait(pthread_rwlock_t *l, int write, const struct timespec *t,
              uintptr_t from, uintptr_t self)
{
	return write ? WAITED(l, 1, self, from, CALL(timedwrlock, l, t))
	             : WAITED(l, 1, self, from, CALL(timedrdlock, l, t));
}

/* The C library checks a reader-writer lock's deadline before it tries
 * (EINVAL even when the lock is free): a bad one goes straight to it. */
PULLPROF_API int pthread_rwlock_timedrdlock(pthread_rwlock_t *l,
                                            const struct timespec *t)
{
	if (LIKELY(!recording()) || !deadline_ok(t))
		return CALL(timedrdlock, l, t);
	int rc = CALL(tryrdlock, l);
	if (rc != EBUSY)
		return rc;
	return rw_timed_wait(l, 0, t, RA(), PP_LOCKS_SELF());
}

PULLPROF_API int pthread_rwlock_timedwrlock(pthread_rwlock_t *l,
                                            const struct timespec *t)
{
	if (LIKELY(!recording()) || !deadline_ok(t))
		return CALL(timedwrlock, l, t);
	int rc = CALL(trywrlock, l);
	if (rc != EBUSY)
		return rc;
	return rw_timed_wait(l, 1, t, RA(), PP_LOCKS_SELF());
}

static __attribute__((noinline)) int
rw_clock_wait(pthread_rwlock_t *l, int write, clockid_t c,
              const struct timespec *t, uintptr_t from, uintptr_t self)
{
	return write ? WAITED(l, 1, self, from, CALL(clockwrlock, l, c, t))
	             : WAITED(l, 1, self, from, CALL(clockrdlock, l, c, t));
}

PULLPROF_API int pthread_rwlock_clockrdlock(pthread_rwlock_t *l, clockid_t c,
                                            const struct timespec *t)
{
	if (LIKELY(!recording()) || !clock_ok(c) || !deadline_ok(t))
		return CALL(clockrdlock, l, c, t);
	int rc = CALL(tryrdlock, l);
	if (rc != EBUSY)
		return rc;
	return rw_clock_wait(l, 0, c, t, RA(), PP_LOCKS_SELF());
}

PULLPROF_API int pthread_rwlock_clockwrlock(pthread_rwlock_t *l, clockid_t c,
                                            const struct timespec *t)
{
	if (LIKELY(!recording()) || !clock_ok(c) || !deadline_ok(t))
		return CALL(clockwrlock, l, c, t);
	int rc = CALL(trywrlock, l);
	if (rc != EBUSY)
		return rc;
	return rw_clock_wait(l, 1, c, t, RA(), PP_LOCKS_SELF());
}

static __attribute__((noinline)) int
rw_unlock_slow(pthread_rwlock_t *l, uintptr_t from, uintptr_t self)
{
	const struct pp_agent_ops *ops = PP_AGENT_OPS();
	uint64_t charge = ops ? ops->locks_release(l) : 0;
	int rc = CALL(rwunlock, l);
	if (charge && rc == 0)
		ops->locks_released(charge, self, from);
	return rc;
}

PULLPROF_API int pthread_rwlock_unlock(pthread_rwlock_t *l)
{
	if (LIKELY(!anyone_waiting()))
		return CALL(rwunlock, l);
	return rw_unlock_slow(l, RA(), PP_LOCKS_SELF());
}

static int block_on(void)
{
	return recording() &&
	       atomic_load_explicit(&pp_locks.block_rate, memory_order_relaxed);
}

/* ---- condition variables ----------------------------------------------------
 */

static __attribute__((noinline)) int
cond_wait(pthread_cond_t *c, pthread_mutex_t *m, uintptr_t from, uintptr_t self)
{
	return WAITED(c, 0, self, from, CALL(cond_wait, c, m));
}

PULLPROF_API int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
	if (LIKELY(!block_on()))
		return CALL(cond_wait, c, m);
	return cond_wait(c, m, RA(), PP_LOCKS_SELF());
}

static __attribute__((noinline)) int
cond_timed_wait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *t,
                uintptr_t from, uintptr_t self)
{
	return WAITED(c, 0, self, from, CALL(cond_timedwait, c, m, t));
}

PULLPROF_API int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
                                        const struct timespec *t)
{
	if (LIKELY(!block_on()))
		return CALL(cond_timedwait, c, m, t);
	return cond_timed_wait(c, m, t, RA(), PP_LOCKS_SELF());
}

static __attribute__((noinline)) int
cond_clock_wait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t k,
                const struct timespec *t, uintptr_t from, uintptr_t self)
{
	return WAITED(c, 0, self, from, CALL(cond_clockwait, c, m, k, t));
}

PULLPROF_API int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m,
                                        clockid_t k, const struct timespec *t)
{
	if (LIKELY(!block_on()))
		return CALL(cond_clockwait, c, m, k, t);
	return cond_clock_wait(c, m, k, t, RA(), PP_LOCKS_SELF());
}

/* ---- semaphores
 * --------------------------------------------------------------- */

static __attribute__((noinline)) int sem_wait_slow(sem_t *s, uintptr_t from,
                                                   uintptr_t self)
{
	/* sem_wait is a cancellation point even when it need not wait: the
	 * C library acts on a pending request before it takes the count, and
	 * so does this, before the try. */
	pthread_testcancel();
	int e = errno;
	if (CALL(sem_trywait, s) == 0)
		return 0;
	if (errno != EAGAIN)
		return -1; /* EINVAL: as sem_wait would say */
	errno = e;
	return WAITED(s, 0, self, from, CALL(sem_wait, s));
}

PULLPROF_API int sem_wait(sem_t *s)
{
	if (LIKELY(!block_on()))
		return CALL(sem_wait, s);
	return sem_wait_slow(s, RA(), PP_LOCKS_SELF());
}

static __attribute__((noinline)) int sem_timed_wait(sem_t *s,
                                                    const struct timespec *t,
                                                    uintptr_t from,
                                                    uintptr_t self)
{
	return WAITED(s, 0, self, from, CALL(sem_timedwait, s, t));
}

PULLPROF_API int sem_timedwait(sem_t *s, const struct timespec *t)
{
	if (LIKELY(!block_on()))
		return CALL(sem_timedwait, s, t);
	return sem_timed_wait(s, t, RA(), PP_LOCKS_SELF());
}

static __attribute__((noinline)) int sem_clock_wait(sem_t *s, clockid_t c,
                                                    const struct timespec *t,
                                                    uintptr_t from,
                                                    uintptr_t self)
{
	return WAITED(s, 0, self, from, CALL(sem_clockwait, s, c, t));
}

PULLPROF_API int sem_clockwait(sem_t *s, clockid_t c, const struct timespec *t)
{
	if (LIKELY(!block_on()))
		return CALL(sem_clockwait, s, c, t);
	return sem_clock_wait(s, c, t, RA(), PP_LOCKS_SELF());
}

/* ---- joins
 * ---------------------------------------------------------------------- */

static __attribute__((noinline)) int join_wait(pthread_t t, void **ret,
                                               uintptr_t from, uintptr_t self)
{
	return WAITED((void *)t, 0, self, from, CALL(join, t, ret));
}

PULLPROF_API int pthread_join(pthread_t t, void **ret)
{
	if (LIKELY(!block_on()))
		return CALL(join, t, ret);
	return join_wait(t, ret, RA(), PP_LOCKS_SELF());
}

static __attribute__((noinline)) int join_timed_wait(pthread_t t, void **ret,
                                                     const struct timespec *d,
                                                     uintptr_t from,
                                                     uintptr_t self)
{
	return WAITED((void *)t, 0, self, from, CALL(timedjoin, t, ret, d));
}

PULLPROF_API int pthread_timedjoin_np(pthread_t t, void **ret,
                                      const struct timespec *d)
{
	if (LIKELY(!block_on()))
		return CALL(timedjoin, t, ret, d);
	return join_timed_wait(t, ret, d, RA(), PP_LOCKS_SELF());
}

static __attribute__((noinline)) int
join_clock_wait(pthread_t t, void **ret, clockid_t c, const struct timespec *d,
                uintptr_t from, uintptr_t self)
{
	return WAITED((void *)t, 0, self, from, CALL(clockjoin, t, ret, c, d));
}

PULLPROF_API int pthread_clockjoin_np(pthread_t t, void **ret, clockid_t c,
                                      const struct timespec *d)
{
	if (LIKELY(!block_on()))
		return CALL(clockjoin, t, ret, c, d);
	return join_clock_wait(t, ret, c, d, RA(), PP_LOCKS_SELF());
}

#endif /* RECORDING */

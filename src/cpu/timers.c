/*
 * Per-thread CPU-time timers and thread discovery (timers.h). AGENT
 * CONTEXT, on the CPU collector thread only.
 */
#include "cpu/timers.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <sched.h>

#include "agent.h"
#include "cpu/sampler.h"
#include "util/clock.h"
#include "util/fds.h"
#include "util/u64map.h"

struct thread_timer {
	pid_t tid;
	int has_timer;
	timer_t timer;
	/* The signal its timer raises: the window's (timers.signo), or
	 * SIGPROF for a thread that blocks SIGURG only (signal_for). */
	int signo;
	int seen;
	/* It blocks the signal: no timer (the host would read what it
	 * raised), its CPU time measured instead (blocked_measure). */
	int blocked;
	/* An agent thread (pullprof-http, -jobs: created with every signal
	 * blocked, never sampled): not the host's doing, not charged. */
	int agent;
	uint64_t blk_check_ns; /* when its SigBlk was last read */
	/* Its CPU clock and samples drained when last looked at: a thread
	 * that used periods of CPU and gave no sample may have blocked the
	 * signal since its timer was armed. */
	uint64_t cpu_mark, samples, samples_mark;
	uint64_t name_read_ns; /* when name was read */
	char name[20];
};

static struct {
	unsigned hz;
	int setitimer_mode;
	/* The signal the timers raise, and the host's disposition of it
	 * before; SIGPROF too when the process-wide timer (setitimer mode)
	 * needs it and the signal is SIGURG. */
	int signo;
	struct sigaction old_action;
	int prof_taken;
	struct sigaction old_prof;
	/* What the threads not sampled block, for the note (blocked_what). */
	const char *blocked_what;
	/* Threads that block the signal, and the CPU time they used while
	 * not sampled, since the agent started. */
	unsigned nblocked;
	uint64_t blocked_ns;
	struct thread_timer *threads;
	size_t nthreads, cap_threads;
	struct pp_u64map index; /* tid -> position in threads + 1 */
	uint64_t rng;
	/* What others may read (publish()). */
	_Atomic unsigned pub_hz, pub_nthreads;
	_Atomic int pub_setitimer, pub_signo;
	_Atomic unsigned pub_nblocked, pub_nprof;
	_Atomic int pub_mixed;
	_Atomic(const char *) pub_blocked_what;
} timers;

/* The collector's sampling state, for /status and the window-open check
 * (a data race TSan found: they read the rate while the collector changed
 * it). */
static void publish(void)
{
	/* Threads with a timer: those that block the signal have none. */
	unsigned armed = 0, prof = 0;
	for (size_t i = 0; i < timers.nthreads; i++) {
		armed += timers.threads[i].has_timer != 0;
		prof += timers.threads[i].has_timer &&
		        timers.threads[i].signo != timers.signo;
	}
	atomic_store(&timers.pub_nprof, prof);
	atomic_store(&timers.pub_mixed, timers.hz && !timers.setitimer_mode &&
	                                    timers.signo != SIGPROF &&
	                                    timers.prof_taken);
	atomic_store(&timers.pub_blocked_what, timers.blocked_what);
	atomic_store(&timers.pub_nthreads, armed);
	atomic_store(&timers.pub_setitimer, timers.setitimer_mode);
	atomic_store(&timers.pub_hz, timers.hz);
	atomic_store(&timers.pub_signo, timers.hz ? timers.signo : 0);
	atomic_store(&timers.pub_nblocked, timers.nblocked);
}

int pp_timers_signal(void)
{
	return atomic_load(&timers.pub_signo);
}

void pp_timers_published(struct pp_timers_published *out)
{
	out->hz = atomic_load(&timers.pub_hz);
	out->threads = atomic_load(&timers.pub_nthreads);
	out->setitimer = atomic_load(&timers.pub_setitimer);
	out->signo = atomic_load(&timers.pub_signo);
	out->blocked = atomic_load(&timers.pub_nblocked);
	out->threads_sigprof = atomic_load(&timers.pub_nprof);
	out->mixed = atomic_load(&timers.pub_mixed);
	out->blocked_what = atomic_load(&timers.pub_blocked_what);
}

unsigned pp_timers_hz(void)
{
	return timers.hz;
}

static uint64_t next_random(void)
{
	if (!timers.rng)
		timers.rng = pp_clock_ns(CLOCK_REALTIME) | 1;
	timers.rng ^= timers.rng << 13;
	timers.rng ^= timers.rng >> 7;
	timers.rng ^= timers.rng << 17;
	return timers.rng;
}

static void arm(struct thread_timer *t)
{
	uint64_t period = PP_NS_PER_SEC / timers.hz;
	/* A random first expiry: threads started together do not tick
	 * together, and no phase of a periodic workload is favoured. */
	uint64_t first = 1 + next_random() % period;
	struct itimerspec its = {
	    .it_interval = {0, (long)period},
	    .it_value = {(time_t)(first / PP_NS_PER_SEC),
	                 (long)(first % PP_NS_PER_SEC)},
	};
	timer_settime(t->timer, 0, &its, NULL);
}

/* The thread's name (its comm); what out held stays when it cannot be
 * read (the thread is gone). */
static void read_name(pid_t tid, char *out, size_t len)
{
	char path[64], name[32];
	snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)tid);
	FILE *f = pp_fds_fopen(path, "r");
	if (f) {
		if (fgets(name, (int)(len < sizeof name ? len : sizeof name),
		          f)) {
			name[strcspn(name, "\n")] = 0;
			size_t n = strnlen(name, len - 1);
			memcpy(out, name, n);
			out[n] = 0;
		}
		pp_fds_fclose(f);
	}
}

static struct thread_timer *thread_of(pid_t tid)
{
	uint64_t *at = pp_u64map_get(&timers.index, (uint64_t)tid);
	return at && *at ? &timers.threads[*at - 1] : NULL;
}

void pp_timers_count_sample(pid_t tid)
{
	struct thread_timer *t = thread_of(tid);
	if (t)
		t->samples++;
}

/* A host thread's CPU clock: MAKE_THREAD_CPUCLOCK(tid, SCHED). */
static clockid_t thread_clock(pid_t tid)
{
	return (clockid_t)((~(unsigned)tid << 3) | 6);
}

static int thread_cpu(pid_t tid, uint64_t *ns)
{
	struct timespec ts;
	if (clock_gettime(thread_clock(tid), &ts) != 0)
		return -1;
	*ns = (uint64_t)ts.tv_sec * PP_NS_PER_SEC + (uint64_t)ts.tv_nsec;
	return 0;
}

/* Does the thread block sig (SigBlk in its status)? A blocked signal the
 * kernel directs at a thread stays pending on that thread, and that
 * pending signal is exactly what the thread's sigwait() or signalfd read
 * returns: a host that blocks every signal and reads them itself would
 * consume the samples. */
static unsigned long long sigblk(pid_t tid)
{
	char path[64], line[128];
	unsigned long long blocked = 0;
	snprintf(path, sizeof path, "/proc/self/task/%d/status", (int)tid);
	FILE *f = pp_fds_fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof line, f))
		if (strncmp(line, "SigBlk:", 7) == 0) {
			blocked = strtoull(line + 7, NULL, 16);
			break;
		}
	pp_fds_fclose(f);
	return blocked;
}

static int in_mask(unsigned long long m, int sig)
{
	return (int)((m >> (sig - 1)) & 1);
}

static int host_handles(int sig);
static int prof_free(const char *first, char *err, size_t errlen);
static void install(int sig, struct sigaction *old);

/* The signal a thread whose SigBlk is m can be sampled with, 0 when none
 * (its CPU is then measured instead): the window's signal, or SIGPROF for
 * a thread that blocks SIGURG but not SIGPROF (PostgreSQL's backends read
 * SIGURG, their latch signal, from a signalfd; the Go runtime and other
 * latch-style programs do likewise), when SIGPROF is free. The handler is
 * installed for SIGPROF here, the first time a thread needs it, and stays
 * until sampling stops (pp_timers_stop gives it back exactly). See "the
 * signal" below. */
static int signal_for(unsigned long long m)
{
	if (!in_mask(m, timers.signo))
		return timers.signo;
	if (timers.signo != SIGURG) {
		timers.blocked_what = "SIGPROF";
		return 0;
	}
	if (in_mask(m, SIGPROF)) {
		timers.blocked_what = "both SIGURG and SIGPROF";
		return 0;
	}
	if (!timers.prof_taken) {
		if (prof_free(NULL, NULL, 0)) {
			if (!timers.blocked_what)
				timers.blocked_what =
				    "SIGURG (SIGPROF is the host's)";
			return 0;
		}
		install(SIGPROF, &timers.old_prof);
		timers.prof_taken = 1;
		atomic_store(&pp_sampler.alt_signo, SIGPROF);
	}
	return SIGPROF;
}

static void mark_blocked(struct thread_timer *t, uint64_t now)
{
	t->blocked = 1;
	t->blk_check_ns = now;
	t->agent = pp_agent_thread_is(t->tid);
	if (!t->agent)
		timers.nblocked++;
	if (thread_cpu(t->tid, &t->cpu_mark) != 0)
		t->cpu_mark = 0;
}

uint64_t pp_timers_blocked_measure(unsigned *nthreads)
{
	for (size_t i = 0; i < timers.nthreads; i++) {
		struct thread_timer *t = &timers.threads[i];
		uint64_t cpu;
		if (!t->blocked || t->agent)
			continue;
		/* One seen before it said it was the agent's. */
		if (pp_agent_thread_is(t->tid)) {
			t->agent = 1;
			timers.nblocked--;
			continue;
		}
		if (thread_cpu(t->tid, &cpu) != 0)
			continue;
		if (cpu > t->cpu_mark)
			timers.blocked_ns += cpu - t->cpu_mark;
		t->cpu_mark = cpu;
	}
	if (nthreads)
		*nthreads = timers.nblocked;
	return timers.blocked_ns;
}

/* Forget threads[i] (its timer already deleted): the last takes its
 * place. */
static void remove_thread(size_t i)
{
	uint64_t *at =
	    pp_u64map_get(&timers.index, (uint64_t)timers.threads[i].tid);
	if (at)
		*at = 0;
	if (timers.threads[i].blocked && !timers.threads[i].agent)
		timers.nblocked--;
	timers.threads[i] = timers.threads[--timers.nthreads];
	if (i < timers.nthreads) {
		at = pp_u64map_get(&timers.index,
		                   (uint64_t)timers.threads[i].tid);
		if (at)
			*at = i + 1;
	}
}

static void forget_all_threads(void)
{
	timers.nthreads = 0;
	timers.nblocked = 0;
	pp_u64map_free(&timers.index);
	memset(&timers.index, 0, sizeof timers.index);
}

static struct thread_timer *add_thread(pid_t tid)
{
	if (timers.nthreads == timers.cap_threads) {
		size_t cap = timers.cap_threads ? timers.cap_threads * 2 : 64;
		struct thread_timer *v =
		    realloc(timers.threads, cap * sizeof *v);
		if (!v)
			return NULL;
		timers.threads = v;
		timers.cap_threads = cap;
	}
	int inserted;
	uint64_t *at = pp_u64map_put(&timers.index, (uint64_t)tid, &inserted);
	if (!at)
		return NULL;
	*at = timers.nthreads + 1;
	struct thread_timer *t = &timers.threads[timers.nthreads++];
	memset(t, 0, sizeof *t);
	t->tid = tid;
	t->name_read_ns = pp_clock_ns(CLOCK_MONOTONIC);
	read_name(tid, t->name, sizeof t->name);
	return t;
}

const char *pp_timers_thread_name(pid_t tid)
{
	struct thread_timer *t = thread_of(tid);
	if (!t)
		return (t = add_thread(tid)) ? t->name : "";
	/* Threads often name themselves after they start: the name of a
	 * thread that is sampled is read again, once a second at most (only
	 * sampled threads: with thousands idle, reading every name on every
	 * scan cost more than all the rest of the agent). */
	uint64_t now = pp_clock_ns(CLOCK_MONOTONIC);
	if (now - t->name_read_ns >= PP_NS_PER_SEC) {
		t->name_read_ns = now;
		read_name(tid, t->name, sizeof t->name);
	}
	return t->name;
}

/* ---- threads started while sampling (thread_start.c) -------------------
 *
 * A starting thread creates its own timer (it cannot wait for the next
 * scan) and hands it over here through a fixed array of slots, a
 * multi-producer queue with one consumer, the collector (adopt()). `arming`
 * counts threads between their check of want_starts and their hand-over:
 * pp_timers_stop clears want_starts, waits for it to reach 0 and then
 * deletes whatever was handed over, so no timer outlives the sampling. */
#define ADOPT_SLOTS 1024

enum { SLOT_FREE, SLOT_FILLING, SLOT_FULL };

/* A slot holds a thread's timer (START) or says that a thread which armed
 * one is ending (EXIT: its timer can go at once, no scan needed). */
enum { SLOT_START, SLOT_EXIT };

static struct adopt_slot {
	atomic_int state;
	int kind;
	unsigned session; /* sampling_session when handed over */
	pid_t tid;
	timer_t timer;
	uint32_t period_ns;
	int signo;
} adopt_slots[ADOPT_SLOTS];
/* Set at the first hand-over: until then the slots' pages were never
 * touched, and a forked child need not read them in (fault them in) to
 * find every one free. */
static atomic_int adopt_used;
static atomic_int adopt_pending, arming, want_starts;
static _Atomic uint64_t starts_armed, starts_unarmed;

int pp_timers_want_starts(void)
{
	return atomic_load_explicit(&want_starts, memory_order_relaxed);
}

/* Bumped when sampling stops: what a thread hands over in one session
 * means nothing in the next (its timer is gone, its tid may be another
 * thread's). */
static atomic_uint sampling_session;

static int hand_over(int kind, unsigned session, pid_t tid, timer_t timer,
                     uint32_t period_ns, int signo)
{
	unsigned first = (unsigned)tid % ADOPT_SLOTS;
	for (unsigned k = 0; k < ADOPT_SLOTS; k++) {
		struct adopt_slot *s = &adopt_slots[(first + k) % ADOPT_SLOTS];
		int free_ = SLOT_FREE;
		if (!atomic_compare_exchange_strong(&s->state, &free_,
		                                    SLOT_FILLING))
			continue;
		s->kind = kind;
		s->session = session;
		s->tid = tid;
		s->timer = timer;
		s->period_ns = period_ns;
		s->signo = signo;
		if (!atomic_load_explicit(&adopt_used, memory_order_relaxed))
			atomic_store_explicit(&adopt_used, 1,
			                      memory_order_relaxed);
		atomic_store_explicit(&s->state, SLOT_FULL,
		                      memory_order_release);
		atomic_fetch_add(&adopt_pending, 1);
		return 1;
	}
	return 0;
}

/* Bumped whenever armed timers change (rate, stop): a thread's record of
 * how its timer was armed is good only while this has not moved. */
static atomic_uint arm_generation;

unsigned pp_timers_generation(void)
{
	return atomic_load_explicit(&arm_generation, memory_order_acquire);
}

int pp_timers_thread_started(struct pp_timers_start *out)
{
	int armed = 0;
	atomic_fetch_add(&arming, 1);
	int signo = atomic_load(&pp_sampler.signo);
	sigset_t mask;
	/* A thread that starts with the signal blocked (its creator blocked
	 * it) raises SIGPROF instead when the collector took SIGPROF for
	 * such threads already (signal_for; alt_signo) and it does not block
	 * that; else it is left to the scan, which takes SIGPROF if free or
	 * measures its CPU instead. */
	if (signo && pthread_sigmask(SIG_BLOCK, NULL, &mask) == 0 &&
	    sigismember(&mask, signo)) {
		int alt = atomic_load(&pp_sampler.alt_signo);
		signo = alt && !sigismember(&mask, alt) ? alt : 0;
	}
	if (atomic_load(&want_starts) && signo) {
		uint32_t period = atomic_load(&pp_sampler.period_ns);
		pid_t tid = pp_sampler_tid();
		struct sigevent sev;
		timer_t timer;
		memset(&sev, 0, sizeof sev);
		sev.sigev_notify = SIGEV_THREAD_ID;
		sev.sigev_signo = signo;
		out->signo = signo;
		sev.sigev_value.sival_int = PP_START_TIMER_MARK;
		sev._sigev_un._tid = tid;
		out->generation = pp_timers_generation();
		out->session = atomic_load(&sampling_session);
		out->period_ns = period;
		if (period &&
		    timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, &timer) == 0) {
			/* A random first expiry in (0, period]: a thread
			 * using less CPU than a period is still sampled,
			 * with the probability its CPU time deserves. */
			uint64_t r = pp_clock_ns(CLOCK_MONOTONIC) ^
			             ((uint64_t)tid << 32) ^ (uintptr_t)&sev;
			r ^= r >> 33;
			r *= 0xff51afd7ed558ccdULL;
			r ^= r >> 33;
			uint64_t first = 1 + r % period;
			struct itimerspec its = {
			    .it_interval = {0, (long)period},
			    .it_value = {0, (long)first},
			};
			out->cpu0_ns = pp_clock_ns(CLOCK_THREAD_CPUTIME_ID);
			out->first_ns = first;
			timer_settime(timer, 0, &its, NULL);
			if (hand_over(SLOT_START, out->session, tid, timer,
			              period, signo)) {
				armed = 1;
				atomic_fetch_add_explicit(&starts_armed, 1,
				                          memory_order_relaxed);
			} else {
				/* Every slot taken: the next scan arms it. */
				timer_delete(timer);
				atomic_fetch_add_explicit(&starts_unarmed, 1,
				                          memory_order_relaxed);
			}
		}
	}
	atomic_fetch_sub(&arming, 1);
	return armed;
}

void pp_timers_thread_exited(unsigned session)
{
	timer_t none;
	memset(&none, 0, sizeof none);
	/* Its timer went with the session; no room: the next scan finds the
	 * thread gone. */
	if (session == atomic_load(&sampling_session))
		hand_over(SLOT_EXIT, session, pp_sampler_tid(), none, 0, 0);
}

/* Collector: take the handed-over timers into the table (keep = 1), or
 * delete them (keep = 0); then forget the threads that ended. A start and
 * the same thread's end may both be waiting: starts first. */
static void adopt(int keep)
{
	if (!atomic_load(&adopt_pending))
		return;
	for (unsigned i = 0; i < 2 * ADOPT_SLOTS; i++) {
		struct adopt_slot *s = &adopt_slots[i % ADOPT_SLOTS];
		int kind = i < ADOPT_SLOTS ? SLOT_START : SLOT_EXIT;
		if (atomic_load_explicit(&s->state, memory_order_acquire) !=
		        SLOT_FULL ||
		    s->kind != kind)
			continue;
		pid_t tid = s->tid;
		int current = s->session == atomic_load(&sampling_session);
		timer_t timer = s->timer;
		uint32_t period = s->period_ns;
		int signo = s->signo;
		atomic_store_explicit(&s->state, SLOT_FREE,
		                      memory_order_release);
		atomic_fetch_sub(&adopt_pending, 1);
		if (kind == SLOT_EXIT) {
			struct thread_timer *t =
			    current ? thread_of(tid) : NULL;
			if (t) {
				if (t->has_timer)
					timer_delete(t->timer);
				/* remove_thread counts a blocked one out */
				remove_thread((size_t)(t - timers.threads));
			}
			continue;
		}
		struct thread_timer *t =
		    keep && current ? thread_of(tid) : NULL;
		if (keep && current && !t)
			t = add_thread(tid);
		if (!t || t->has_timer) {
			/* Not wanted, or a scan was quicker. */
			timer_delete(timer);
			continue;
		}
		t->timer = timer;
		t->has_timer = 1;
		t->signo = signo;
		t->blk_check_ns = pp_clock_ns(CLOCK_MONOTONIC);
		t->seen = 1;
		if (thread_cpu(tid, &t->cpu_mark) != 0)
			t->cpu_mark = 0;
		t->samples_mark = t->samples;
		if (period != PP_NS_PER_SEC / timers.hz)
			arm(t); /* the rate changed meanwhile */
	}
	publish();
}

void pp_timers_adopt(void)
{
	if (timers.hz && !timers.setitimer_mode)
		adopt(1);
}

void pp_timers_start_stats(uint64_t *armed, uint64_t *unarmed)
{
	*armed = atomic_load_explicit(&starts_armed, memory_order_relaxed);
	*unarmed = atomic_load_explicit(&starts_unarmed, memory_order_relaxed);
}

int pp_timers_scan(void)
{
	DIR *d = pp_fds_opendir("/proc/self/task");
	struct dirent *e;
	int armed = 0;

	if (!d)
		return 0;
	uint64_t now = pp_clock_ns(CLOCK_MONOTONIC);
	uint64_t period = timers.hz ? PP_NS_PER_SEC / timers.hz : 0;
	adopt(1);
	for (size_t i = 0; i < timers.nthreads; i++)
		timers.threads[i].seen = 0;
	while ((e = readdir(d)) != NULL) {
		pid_t tid = (pid_t)atoi(e->d_name);
		if (tid <= 0 || pp_agent_thread_unsampled(tid))
			continue;
		struct thread_timer *t = thread_of(tid);
		if (!t && !(t = add_thread(tid)))
			continue;
		t->seen = 1;
		if (!t->has_timer && atomic_load(&adopt_pending)) {
			adopt(1); /* perhaps it handed one over just now */
			/* The table may have moved (grown, or lost a thread
			 * that ended). */
			if (!(t = thread_of(tid)))
				continue;
			t->seen = 1;
		}
		if (timers.setitimer_mode || !timers.hz)
			continue;
		unsigned long long m = 0;
		if (t->blocked) {
			/* Unblocked since (either signal)? Looked at once a
			 * second. */
			if (now - t->blk_check_ns < PP_NS_PER_SEC)
				continue;
			t->blk_check_ns = now;
			m = sigblk(tid);
			if (in_mask(m, timers.signo) &&
			    (timers.signo != SIGURG || in_mask(m, SIGPROF)))
				continue;
			uint64_t cpu;
			if (!t->agent && thread_cpu(tid, &cpu) == 0 &&
			    cpu > t->cpu_mark) {
				timers.blocked_ns += cpu - t->cpu_mark;
				t->cpu_mark = cpu;
			}
			if (!t->agent)
				timers.nblocked--;
			t->blocked = 0;
			t->agent = 0;
		} else if (t->has_timer) {
			/* Periods of CPU and not one sample: did it block its
			 * timer's signal after the timer was armed? (Its
			 * SigBlk decides; the counts only say when to look.)
			 * The periods since the last look went to the host.
			 * And a thread on SIGPROF that unblocked SIGURG goes
			 * back to it (looked at once a second): SIGURG is the
			 * safer signal ("the signal" below). */
			uint64_t cpu;
			if (thread_cpu(tid, &cpu) != 0)
				continue;
			int stuck = 0, back = 0;
			if (t->samples == t->samples_mark && period &&
			    cpu > t->cpu_mark + 4 * period) {
				m = sigblk(tid);
				stuck = in_mask(m, t->signo);
			}
			if (!stuck && t->signo != timers.signo &&
			    now - t->blk_check_ns >= PP_NS_PER_SEC) {
				t->blk_check_ns = now;
				m = sigblk(tid);
				back = !in_mask(m, timers.signo);
			}
			if (!stuck && !back) {
				t->cpu_mark = cpu;
				t->samples_mark = t->samples;
				continue;
			}
			timer_delete(t->timer);
			t->has_timer = 0;
			if (stuck && !t->agent && !pp_agent_thread_is(t->tid))
				timers.blocked_ns += cpu - t->cpu_mark;
			t->cpu_mark = cpu;
		} else {
			m = sigblk(tid);
		}
		/* Its signal: the window's, or SIGPROF when it blocks only
		 * SIGURG; neither: its CPU is measured instead. */
		int sig = signal_for(m);
		if (!sig) {
			uint64_t mark = t->cpu_mark;
			mark_blocked(t, now);
			if (mark && !t->agent && t->cpu_mark > mark)
				timers.blocked_ns += t->cpu_mark - mark;
			continue;
		}
		struct sigevent sev;
		memset(&sev, 0, sizeof sev);
		sev.sigev_notify = SIGEV_THREAD_ID;
		sev.sigev_signo = sig;
		sev.sigev_value.sival_int = PP_TIMER_MARK;
		sev._sigev_un._tid = tid;
		if (timer_create(thread_clock(tid), &sev, &t->timer) == 0) {
			t->has_timer = 1;
			t->signo = sig;
			t->blk_check_ns = now;
			armed++;
			if (thread_cpu(tid, &t->cpu_mark) != 0)
				t->cpu_mark = 0;
			t->samples_mark = t->samples;
			arm(t);
		} else if (errno != ESRCH && errno != EINVAL) {
			/* No per-thread timers here: one process-wide timer. */
			timers.setitimer_mode = 1;
		}
	}
	pp_fds_closedir(d);
	for (size_t i = 0; i < timers.nthreads;) {
		if (timers.threads[i].seen) {
			i++;
			continue;
		}
		if (timers.threads[i].has_timer)
			timer_delete(timers.threads[i].timer);
		remove_thread(i);
	}
	publish();
	return armed;
}

static void set_setitimer(unsigned hz)
{
	struct itimerval it = {{0, 0}, {0, 0}};
	if (hz) {
		it.it_interval.tv_usec = (suseconds_t)(1000000 / hz);
		it.it_value = it.it_interval;
	}
	setitimer(ITIMER_PROF, &it, NULL);
}

/* ---- the signal ----------------------------------------------------------
 *
 * Why SIGURG, and not SIGPROF or a realtime signal: the per-thread timers
 * (SIGEV_THREAD_ID) may raise any signal, and what matters is what happens
 * to one that arrives when pullprof's handler is not installed. A host may
 * reset every disposition to SIG_DFL at any moment (daemons do, at start),
 * and pullprof only notices at its next check: an expiry between the reset
 * and the check is delivered with the default action. For SIGPROF and for
 * every realtime signal that action is to terminate the process; for
 * SIGURG it is to ignore the signal. No check before each arm can close
 * that gap (the timers are periodic, and a one-shot re-armed from the
 * handler still leaves a period between the arm and the expiry); only a
 * signal whose default action is harmless does. SIGURG is also the signal
 * the Go runtime chose for the same reason (its preemption signal):
 * out-of-band TCP data is almost never used, and a program that uses it
 * must already expect a SIGURG that says nothing. And SIGPROF stays the
 * host's: its own profiler (a handler and setitimer(ITIMER_PROF),
 * gperftools) runs beside pullprof's windows untouched, neither receiving
 * the other's signals.
 *
 * The same holds for a host that execs during a window: a signal still
 * pending on the thread that execs goes to the new program, which ignores
 * a SIGURG and is killed by a SIGPROF.
 *
 * When the host handles SIGURG itself (a Go runtime, a program using
 * out-of-band data) pullprof falls back to SIGPROF, when the host neither
 * handles SIGPROF nor has armed ITIMER_PROF; otherwise the window is
 * refused (409). The process-wide timer of setitimer mode (no per-thread
 * timers here) can only raise SIGPROF, under the same conditions. With
 * SIGPROF the gap above is back: a host that resets its dispositions may
 * be killed by an expiry in the 10 ms before the collector's check (what
 * the collector does then is the same).
 *
 * The signal is chosen per thread. A thread that blocks SIGURG gets no
 * SIGURG timer (what it does not receive, the host's signalfd or sigwait
 * would read), and some hosts block exactly SIGURG: PostgreSQL 14+ on
 * Linux blocks it in every backend and reads it from a signalfd (its
 * latches: WAIT_USE_SIGNALFD), and other latch-style programs do the
 * same. With SIGURG alone every backend's CPU went to the "blocks the
 * signal" frame. So a thread that blocks SIGURG but not SIGPROF gets a
 * timer raising SIGPROF (signal_for), under the conditions of the
 * fallback above (the host neither handles SIGPROF nor has armed
 * ITIMER_PROF): the handler is installed for SIGPROF the first time a
 * thread needs it, both dispositions are re-checked every 10 ms
 * (pp_timers_check: a host that takes SIGPROF, or arms ITIMER_PROF, stops
 * the window with a note, as for SIGURG), and both are given back exactly
 * when sampling stops. A thread's SigBlk is looked at again when its
 * timer gives CPU without samples (it blocked its signal since: it moves
 * to the other one if that is free, else it is charged to the frame) and
 * once a second for a thread on SIGPROF (SIGURG unblocked: back to it)
 * or one not sampled. A thread that starts with SIGURG blocked uses
 * SIGPROF at once if the collector took it already (pp_sampler.alt_signo),
 * else it waits for the scan. Only threads that block both, or block
 * SIGURG while SIGPROF is the host's, are not sampled.
 *
 * The residual risk is the one of SIGPROF above, limited to the threads
 * that block SIGURG: a host that resets SIGPROF to SIG_DFL while a SIGPROF
 * timer is armed on one of its threads is killed by an expiry before the
 * collector's next check (10 ms). Such a thread blocks SIGURG and reads
 * it, so it is a host that manages its signals (PostgreSQL resets its
 * dispositions at a backend's start, before it blocks SIGURG: no timer of
 * ours is on that thread then).
 */
static int is_ours(const struct sigaction *a)
{
	return (a->sa_flags & SA_SIGINFO) &&
	       a->sa_sigaction == pp_sampler_handler;
}

/* The host's handler, not a default or SIG_IGN (nor ours). */
static int host_handles(int sig)
{
	struct sigaction cur;
	if (sigaction(sig, NULL, &cur) != 0 || is_ours(&cur))
		return 0;
	return (cur.sa_flags & SA_SIGINFO) ||
	       (cur.sa_handler != SIG_DFL && cur.sa_handler != SIG_IGN);
}

/* Is ITIMER_PROF armed (by the host, when not in setitimer mode)? */
static int prof_timer_armed(void)
{
	struct itimerval it;
	return getitimer(ITIMER_PROF, &it) == 0 &&
	       (it.it_value.tv_sec || it.it_value.tv_usec);
}

/* Can SIGPROF be taken? 0, or -EEXIST with err saying why not. */
static int prof_free(const char *first, char *err, size_t errlen)
{
	const char *why = host_handles(SIGPROF)
	                      ? "its own SIGPROF handler (another profiler?)"
	                  : prof_timer_armed()
	                      ? "its ITIMER_PROF timer armed (setitimer: "
	                        "another profiler?)"
	                      : NULL;
	if (!why)
		return 0;
	if (err)
		snprintf(err, errlen,
		         "this process has %s and %s: pullprof samples with "
		         "SIGURG or else SIGPROF, and replaces neither the "
		         "host's handler nor its timer",
		         first, why);
	return -EEXIST;
}

int pp_timers_choose_signal(char *err, size_t errlen)
{
	if (!host_handles(SIGURG))
		return SIGURG;
	int rc = prof_free("its own SIGURG handler", err, errlen);
	return rc ? rc : SIGPROF;
}

static void install(int sig, struct sigaction *old)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = pp_sampler_handler;
	/* SA_RESTART: the host's interrupted system calls resume by
	 * themselves where the kernel allows. */
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, old);
}

/* The timers are deleted: SIG_IGN first, which discards every instance
 * still pending on any thread (one blocked in a thread stays pending for
 * ever, and the host's sigwait or signalfd would read it, or a restored
 * SIG_DFL of SIGPROF terminate the host when it unblocks it); then exactly
 * the disposition (handler, flags, mask) the host had. A disposition the
 * host set since the last check is its choice: it stays. */
static void restore(int sig, const struct sigaction *old)
{
	struct sigaction ign, cur;
	memset(&ign, 0, sizeof ign);
	ign.sa_handler = SIG_IGN;
	sigemptyset(&ign.sa_mask);
	if (sigaction(sig, &ign, &cur) != 0)
		return;
	sigaction(sig, is_ours(&cur) ? old : &cur, NULL);
}

/* The host took sig: what it put there, for the note. */
static const char *describe(const struct sigaction *a)
{
	if (!(a->sa_flags & SA_SIGINFO) && a->sa_handler == SIG_DFL)
		return "reset it to SIG_DFL";
	if (!(a->sa_flags & SA_SIGINFO) && a->sa_handler == SIG_IGN)
		return "set it to SIG_IGN";
	return "installed a handler of its own";
}

int pp_timers_check(char *why, size_t len)
{
	struct sigaction cur;
	int sigs[2] = {timers.signo, timers.prof_taken ? SIGPROF : 0};

	if (!timers.hz)
		return 0;
	for (int i = 0; i < 2; i++) {
		if (!sigs[i] || sigaction(sigs[i], NULL, &cur) != 0 ||
		    is_ours(&cur))
			continue;
		snprintf(why, len,
		         "the host %s for %s, the signal pullprof samples "
		         "with",
		         describe(&cur),
		         sigs[i] == SIGURG ? "SIGURG" : "SIGPROF");
		return 1;
	}
	/* Its own ITIMER_PROF: its SIGPROFs would come to pullprof's handler
	 * (which drops them) instead of its own profiler's. */
	if ((timers.signo == SIGPROF || timers.prof_taken) &&
	    !timers.setitimer_mode && prof_timer_armed()) {
		snprintf(why, len,
		         "the host armed ITIMER_PROF (a profiler of its own?) "
		         "while pullprof sampled with SIGPROF");
		return 1;
	}
	return 0;
}

int pp_timers_start(unsigned hz, enum pp_unwind_mode unwind, char *err,
                    size_t errlen)
{
	int sig = pp_timers_choose_signal(err, errlen);
	if (sig < 0)
		return sig;
	/* Libraries may have come and gone since the last window. */
	if (unwind != PP_UNWIND_FP)
		pp_unwind_refresh();
	timers.signo = sig;
	timers.blocked_what = NULL;
	install(sig, &timers.old_action);
	atomic_store(&pp_sampler.signo, sig);
	timers.hz = hz;
	atomic_store(&pp_sampler.period_ns, PP_NS_PER_SEC / hz);
	atomic_store(&pp_sampler.active, 1);
	pp_timers_scan();
	if (timers.setitimer_mode) {
		/* ITIMER_PROF raises SIGPROF, whatever the signal chosen. */
		int rc = sig == SIGPROF
		             ? 0
		             : prof_free("no per-thread timers", err, errlen);
		if (rc) {
			pp_timers_stop();
			return rc;
		}
		if (sig != SIGPROF && !timers.prof_taken) {
			install(SIGPROF, &timers.old_prof);
			timers.prof_taken = 1;
		}
		atomic_store(&pp_sampler.setitimer, 1);
		set_setitimer(hz);
	} else {
		atomic_store(&want_starts, 1);
	}
	publish();
	return 0;
}

void pp_timers_change_rate(unsigned hz)
{
	atomic_fetch_add(&arm_generation, 1);
	timers.hz = hz;
	atomic_store(&pp_sampler.period_ns, PP_NS_PER_SEC / hz);
	if (timers.setitimer_mode)
		set_setitimer(hz);
	else
		for (size_t i = 0; i < timers.nthreads; i++)
			if (timers.threads[i].has_timer)
				arm(&timers.threads[i]);
	publish();
}

/* No timer left of ours, and the handler records nothing more. */
static void disarm(void)
{
	/* No thread starts arming now; wait for those that began (a second
	 * at most: a thread stopped by a debugger mid-way must not hang the
	 * agent; what it hands over later is deleted by the next start). */
	atomic_store(&want_starts, 0);
	atomic_store(&pp_sampler.alt_signo, 0);
	atomic_fetch_add(&arm_generation, 1);
	uint64_t until = pp_clock_ns(CLOCK_MONOTONIC) + PP_NS_PER_SEC;
	while (atomic_load(&arming) && pp_clock_ns(CLOCK_MONOTONIC) < until)
		sched_yield();
	adopt(0);
	atomic_fetch_add(&sampling_session, 1);
	pp_timers_blocked_measure(NULL); /* their CPU up to now */
	for (size_t i = 0; i < timers.nthreads; i++)
		if (timers.threads[i].has_timer)
			timer_delete(timers.threads[i].timer);
	forget_all_threads();
	if (timers.setitimer_mode)
		set_setitimer(0);
	atomic_store(&pp_sampler.setitimer, 0);
	atomic_store(&pp_sampler.active, 0);
}

void pp_timers_stop(void)
{
	disarm();
	/* Exactly as the host had it, SIG_DFL included: a SIGPROF left
	 * SIG_IGN was inherited by everything the host executed. The timers
	 * are gone and restore() discards what they left pending, so nothing
	 * of pullprof's arrives after this (and with SIGURG, the usual
	 * signal, a late one would be ignored by default anyway). */
	restore(timers.signo, &timers.old_action);
	if (timers.prof_taken)
		restore(SIGPROF, &timers.old_prof);
	timers.prof_taken = 0;
	timers.hz = 0;
	publish();
}

/* The host's new disposition stays. Pending signals of ours are discarded
 * only where the host would discard them anyway (SIG_DFL of SIGURG,
 * SIG_IGN): never by touching a handler the host installed. A SIG_DFL of
 * SIGPROF must lose them (it would terminate the host): SIG_IGN, then the
 * host's SIG_DFL back. */
static void let_go(int sig)
{
	struct sigaction cur, ign;
	if (sigaction(sig, NULL, &cur) != 0 || (cur.sa_flags & SA_SIGINFO) ||
	    (cur.sa_handler != SIG_DFL && cur.sa_handler != SIG_IGN))
		return;
	memset(&ign, 0, sizeof ign);
	ign.sa_handler = SIG_IGN;
	sigemptyset(&ign.sa_mask);
	if (sigaction(sig, &ign, &cur) == 0 && !is_ours(&cur))
		sigaction(sig, &cur, NULL);
}

void pp_timers_abandon(void)
{
	disarm();
	for (int i = 0; i < 2; i++) {
		int sig = i ? (timers.prof_taken ? SIGPROF : 0) : timers.signo;
		struct sigaction cur;
		if (!sig)
			continue;
		/* A signal still ours (the other one was taken) goes back
		 * as the host had it. */
		if (sigaction(sig, NULL, &cur) == 0 && is_ours(&cur))
			restore(sig, i ? &timers.old_prof : &timers.old_action);
		else
			let_go(sig);
	}
	timers.prof_taken = 0;
	timers.hz = 0;
	publish();
}

void pp_timers_free(void)
{
	forget_all_threads();
	free(timers.threads);
	timers.threads = NULL;
	timers.cap_threads = 0;
}

void pp_timers_forget_in_child(void)
{
	if (timers.hz) {
		sigaction(timers.signo, &timers.old_action, NULL);
		if (timers.prof_taken)
			sigaction(SIGPROF, &timers.old_prof, NULL);
	}
	timers.prof_taken = 0;
	timers.hz = 0;
	atomic_store(&pp_sampler.setitimer, 0);
	atomic_store(&pp_sampler.alt_signo, 0);
	/* The parent's table and queue: timers are not inherited, and the
	 * map's memory is left as it is (as the agent leaves its own). */
	timers.nthreads = 0;
	memset(&timers.index, 0, sizeof timers.index);
	atomic_store(&want_starts, 0);
	atomic_fetch_add(&sampling_session, 1);
	atomic_fetch_add(&arm_generation, 1);
	atomic_store(&arming, 0);
	atomic_store(&adopt_pending, 0);
	/* Only the slots in use are written: storing into every one copied
	 * (or, never touched, allocated) the array's 8 pages in each child;
	 * none is read before the first hand-over. */
	if (atomic_load(&adopt_used))
		for (unsigned i = 0; i < ADOPT_SLOTS; i++)
			if (atomic_load_explicit(&adopt_slots[i].state,
			                         memory_order_relaxed) !=
			    SLOT_FREE)
				atomic_store(&adopt_slots[i].state, SLOT_FREE);
	publish();
}

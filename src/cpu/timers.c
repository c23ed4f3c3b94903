/*
 * Per-thread CPU-time timers and thread discovery (timers.h): the table of
 * host threads found in /proc/self/task, the signal each is sampled with
 * and the threads that block it, the rate, the start and stop of
 * sampling. The signal's disposition is disposition.c's; the queue through
 * which starting threads hand their own timer over is handover.c's (host
 * context). Everything here runs on the CPU collector thread only, which
 * owns this state; others read only the published figures.
 * Context: agent.
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

#include "agent_threads.h"
#include "cpu/disposition.h"
#include "cpu/handover.h"
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
	/* When it was taken into the table, and when its name was last read
	 * for a sample (0: not yet; the name read then is a fallback only). */
	uint64_t born_ns, name_read_ns;
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

/* The signal a thread whose SigBlk is m can be sampled with, 0 when none
 * (its CPU is then measured instead): the window's signal, or SIGPROF for
 * a thread that blocks SIGURG but not SIGPROF (PostgreSQL's backends read
 * SIGURG, their latch signal, from a signalfd; the Go runtime and other
 * latch-style programs do likewise), when SIGPROF is free. The handler is
 * installed for SIGPROF here, the first time a thread needs it, and stays
 * until sampling stops (pp_timers_stop gives it back exactly). See "the
 * signal" in disposition.c. */
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
		if (pp_timers_prof_free(NULL, NULL, 0)) {
			if (!timers.blocked_what)
				timers.blocked_what =
				    "SIGURG (SIGPROF is the host's)";
			return 0;
		}
		if (pp_timers_install(SIGPROF, &timers.old_prof)) {
			if (!timers.blocked_what)
				timers.blocked_what =
				    "SIGURG (SIGPROF is the host's)";
			return 0;
		}
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
	t->born_ns = pp_clock_ns(CLOCK_MONOTONIC);
	read_name(tid, t->name, sizeof t->name);
	return t;
}

const char *pp_timers_thread_name(pid_t tid)
{
	struct thread_timer *t = thread_of(tid);
	if (!t) {
		if (!(t = add_thread(tid)))
			return "";
		t->name_read_ns = t->born_ns; /* just read */
		return t->name;
	}
	/* Threads often name themselves just after they start, often after
	 * their timer was adopted: the name read then is kept only for a
	 * thread gone before its first sample. A sampled thread's name is
	 * read at its first sample, then again every 100 ms in its first
	 * second and once a second after that (only sampled threads: with
	 * thousands idle, reading every name on every scan cost more than all
	 * the rest of the agent). */
	uint64_t now = pp_clock_ns(CLOCK_MONOTONIC);
	uint64_t every = now - t->born_ns < PP_NS_PER_SEC ? PP_NS_PER_SEC / 10
	                                                  : PP_NS_PER_SEC;
	if (!t->name_read_ns || now - t->name_read_ns >= every) {
		t->name_read_ns = now;
		read_name(tid, t->name, sizeof t->name);
	}
	return t->name;
}

/* Collector: take the handed-over timers into the table (keep = 1), or
 * delete them (keep = 0); then forget the threads that ended. A start and
 * the same thread's end may both be waiting: starts first. */
static void adopt(int keep)
{
	struct pp_timers_handed h;
	unsigned cursor = 0;
	if (!pp_timers_handed_pending())
		return;
	while (pp_timers_take_handed(&cursor, &h)) {
		pid_t tid = h.tid;
		int current = h.current;
		if (h.exit) {
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
			timer_delete(h.timer);
			continue;
		}
		t->timer = h.timer;
		t->has_timer = 1;
		t->signo = h.signo;
		if (t->blocked) {
			/* A scan met it as it started, all signals still
			 * blocked by pthread_create; it armed its own since:
			 * sampled, no longer blocking (else the next scan,
			 * seeing it unblocked, armed a second timer and it was
			 * sampled twice). */
			if (!t->agent)
				timers.nblocked--;
			t->blocked = 0;
			t->agent = 0;
		}
		t->blk_check_ns = pp_clock_ns(CLOCK_MONOTONIC);
		t->seen = 1;
		if (thread_cpu(tid, &t->cpu_mark) != 0)
			t->cpu_mark = 0;
		t->samples_mark = t->samples;
		if (h.period_ns != PP_NS_PER_SEC / timers.hz)
			arm(t); /* the rate changed meanwhile */
	}
	publish();
}

void pp_timers_adopt(void)
{
	if (timers.hz && !timers.setitimer_mode)
		adopt(1);
}

int pp_timers_scan(void)
{
	DIR *d = pp_fds_opendir("/proc/self/task");
	struct dirent *e;
	int armed = 0, deferred = 0;

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
		if (!t->has_timer && pp_timers_handed_pending()) {
			adopt(1); /* perhaps it handed one over just now */
			/* The table may have moved (grown, or lost a thread
			 * that ended). */
			if (!(t = thread_of(tid)))
				continue;
			t->seen = 1;
		}
		if (timers.setitimer_mode || !timers.hz)
			continue;
		/* Arming its own at its start: the next adopt() takes it. */
		if (!t->has_timer && pp_timers_is_arming(tid)) {
			deferred = 1;
			continue;
		}
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
			if (t->has_timer)
				continue; /* one timer a thread, never two */
		} else if (t->has_timer) {
			/* Periods of CPU and not one sample: did it block its
			 * timer's signal after the timer was armed? (Its
			 * SigBlk decides; the counts only say when to look.)
			 * The periods since the last look went to the host.
			 * And a thread on SIGPROF that unblocked SIGURG goes
			 * back to it (looked at once a second): SIGURG is the
			 * safer signal ("the signal", disposition.c). */
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
	/* A thread left to its own timer keeps the scans frequent. */
	return armed + deferred;
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

int pp_timers_check(char *why, size_t len)
{
	if (!timers.hz)
		return 0;
	return pp_timers_check_signals(timers.signo, timers.prof_taken,
	                               timers.setitimer_mode, why, len);
}

/* A signal the host is taking (src/shim/signals.c: its sigaction waits
 * while the collector moves off, then installs its own): not chosen again
 * until the host's call is surely done. */
static struct {
	int sig;
	uint64_t until_ns;
} avoid;

void pp_timers_avoid(int sig, uint64_t until_ns)
{
	avoid.sig = sig;
	avoid.until_ns = until_ns;
}

static const char *signame(int sig)
{
	return sig == SIGURG ? "SIGURG" : "SIGPROF";
}

int pp_timers_start(unsigned hz, enum pp_unwind_mode unwind, char *err,
                    size_t errlen)
{
	int sig = pp_timers_choose_signal(err, errlen);
	if (sig < 0)
		return sig;
	if (sig == avoid.sig && pp_clock_ns(CLOCK_MONOTONIC) < avoid.until_ns) {
		if (sig == SIGURG &&
		    pp_timers_prof_free("SIGURG taken by the host just now",
		                        err, errlen) == 0) {
			sig = SIGPROF;
		} else {
			snprintf(err, errlen,
			         "the host is installing a disposition of its "
			         "own for %s",
			         signame(sig));
			return -EBUSY;
		}
	}
	/* Libraries may have come and gone since the last window. */
	if (unwind != PP_UNWIND_FP)
		pp_unwind_refresh();
	int rc = pp_timers_install(sig, &timers.old_action);
	if (rc) {
		snprintf(err, errlen,
		         "the host installed a handler of its own for %s as "
		         "sampling started",
		         signame(sig));
		/* The next turn chooses again (SIGPROF, if free). */
		return rc == -EEXIST ? -EBUSY : rc;
	}
	timers.signo = sig;
	timers.blocked_what = NULL;
	atomic_store(&pp_sampler.signo, sig);
	timers.hz = hz;
	atomic_store(&pp_sampler.period_ns, PP_NS_PER_SEC / hz);
	atomic_store(&pp_sampler.active, 1);
	pp_timers_scan();
	if (timers.setitimer_mode) {
		/* ITIMER_PROF raises SIGPROF, whatever the signal chosen. */
		rc = sig == SIGPROF ? 0
		                    : pp_timers_prof_free(
		                          "no per-thread timers", err, errlen);
		if (rc) {
			pp_timers_stop();
			return rc;
		}
		if (sig != SIGPROF && !timers.prof_taken) {
			if (pp_timers_install(SIGPROF, &timers.old_prof)) {
				snprintf(err, errlen,
				         "the host installed a handler of its "
				         "own for SIGPROF as sampling started");
				pp_timers_stop();
				return -EEXIST;
			}
			timers.prof_taken = 1;
		}
		atomic_store(&pp_sampler.setitimer, 1);
		set_setitimer(hz);
	} else {
		pp_timers_set_want_starts(1);
	}
	publish();
	return 0;
}

void pp_timers_change_rate(unsigned hz)
{
	pp_timers_new_generation();
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
	pp_timers_set_want_starts(0);
	atomic_store(&pp_sampler.alt_signo, 0);
	pp_timers_new_generation();
	uint64_t until = pp_clock_ns(CLOCK_MONOTONIC) + PP_NS_PER_SEC;
	while (pp_timers_arming() && pp_clock_ns(CLOCK_MONOTONIC) < until)
		sched_yield();
	adopt(0);
	pp_timers_new_session();
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
	 * are gone and pp_timers_restore discards what they left pending, so
	 * nothing of pullprof's arrives after this (and with SIGURG, the usual
	 * signal, a late one would be ignored by default anyway). */
	pp_timers_restore(timers.signo, &timers.old_action);
	if (timers.prof_taken)
		pp_timers_restore(SIGPROF, &timers.old_prof);
	timers.prof_taken = 0;
	timers.hz = 0;
	publish();
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
		if (pp_timers_sigaction(sig, NULL, &cur) == 0 &&
		    pp_timers_is_ours(&cur))
			pp_timers_restore(sig, i ? &timers.old_prof
			                         : &timers.old_action);
		else
			pp_timers_let_go(sig);
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
		pp_timers_sigaction(timers.signo, &timers.old_action, NULL);
		if (timers.prof_taken)
			pp_timers_sigaction(SIGPROF, &timers.old_prof, NULL);
	}
	timers.prof_taken = 0;
	timers.hz = 0;
	atomic_store(&pp_sampler.setitimer, 0);
	atomic_store(&pp_sampler.alt_signo, 0);
	/* The parent's table and queue: timers are not inherited, and the
	 * map's memory is left as it is (as the agent leaves its own). */
	timers.nthreads = 0;
	memset(&timers.index, 0, sizeof timers.index);
	pp_timers_handover_forget_in_child();
	publish();
}

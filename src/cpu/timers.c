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

#include "agent.h"
#include "cpu/sampler.h"
#include "util/clock.h"

struct thread_timer {
	pid_t tid;
	int has_timer;
	timer_t timer;
	int seen;
	uint64_t first_seen_ns;
	char name[20];
};

static struct {
	unsigned hz;
	int setitimer_mode;
	struct sigaction old_action;
	struct thread_timer *threads;
	size_t nthreads, cap_threads;
	uint64_t rng;
	/* What others may read (publish()). */
	_Atomic unsigned pub_hz, pub_nthreads;
	_Atomic int pub_setitimer;
} timers;

/* The collector's sampling state, for /status and the window-open check
 * (a data race TSan found: they read the rate while the collector changed
 * it). */
static void publish(void)
{
	atomic_store(&timers.pub_nthreads, (unsigned)timers.nthreads);
	atomic_store(&timers.pub_setitimer, timers.setitimer_mode);
	atomic_store(&timers.pub_hz, timers.hz);
}

void pp_timers_published(struct pp_timers_published *out)
{
	out->hz = atomic_load(&timers.pub_hz);
	out->threads = atomic_load(&timers.pub_nthreads);
	out->setitimer = atomic_load(&timers.pub_setitimer);
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

static void read_name(pid_t tid, char *out, size_t len)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)tid);
	FILE *f = fopen(path, "re");
	out[0] = 0;
	if (f) {
		if (fgets(out, (int)len, f))
			out[strcspn(out, "\n")] = 0;
		fclose(f);
	}
}

static struct thread_timer *thread_of(pid_t tid)
{
	for (size_t i = 0; i < timers.nthreads; i++)
		if (timers.threads[i].tid == tid)
			return &timers.threads[i];
	return NULL;
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
	struct thread_timer *t = &timers.threads[timers.nthreads++];
	memset(t, 0, sizeof *t);
	t->tid = tid;
	t->first_seen_ns = pp_clock_ns(CLOCK_MONOTONIC);
	read_name(tid, t->name, sizeof t->name);
	return t;
}

const char *pp_timers_thread_name(pid_t tid)
{
	struct thread_timer *t = thread_of(tid);
	if (!t)
		t = add_thread(tid); /* a sample from a thread not seen yet */
	return t ? t->name : "";
}

void pp_timers_scan(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;

	if (!d)
		return;
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
		/* New threads often name themselves just after they start:
		 * read the name again during their first second. */
		if (pp_clock_ns(CLOCK_MONOTONIC) - t->first_seen_ns <
		    PP_NS_PER_SEC)
			read_name(tid, t->name, sizeof t->name);
		if (t->has_timer || timers.setitimer_mode || !timers.hz)
			continue;
		struct sigevent sev;
		memset(&sev, 0, sizeof sev);
		sev.sigev_notify = SIGEV_THREAD_ID;
		sev.sigev_signo = SIGPROF;
		sev._sigev_un._tid = tid;
		/* The thread's CPU clock: MAKE_THREAD_CPUCLOCK(tid, SCHED). */
		clockid_t clk = (clockid_t)((~(unsigned)tid << 3) | 6);
		if (timer_create(clk, &sev, &t->timer) == 0) {
			t->has_timer = 1;
			arm(t);
		} else if (errno != ESRCH && errno != EINVAL) {
			/* No per-thread timers here: one process-wide timer. */
			timers.setitimer_mode = 1;
		}
	}
	closedir(d);
	for (size_t i = 0; i < timers.nthreads;) {
		if (timers.threads[i].seen) {
			i++;
			continue;
		}
		if (timers.threads[i].has_timer)
			timer_delete(timers.threads[i].timer);
		timers.threads[i] = timers.threads[--timers.nthreads];
	}
	publish();
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

void pp_timers_start(unsigned hz, enum pp_unwind_mode unwind)
{
	struct sigaction sa;

	/* Libraries may have come and gone since the last window. */
	if (unwind != PP_UNWIND_FP)
		pp_unwind_refresh();
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = pp_sampler_handler;
	/* SA_RESTART: the host's interrupted system calls resume by
	 * themselves where the kernel allows. */
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGPROF, &sa, &timers.old_action);
	timers.hz = hz;
	atomic_store(&pp_sampler.period_ns, PP_NS_PER_SEC / hz);
	atomic_store(&pp_sampler.active, 1);
	pp_timers_scan();
	if (timers.setitimer_mode)
		set_setitimer(hz);
	publish();
}

void pp_timers_change_rate(unsigned hz)
{
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

void pp_timers_stop(void)
{
	for (size_t i = 0; i < timers.nthreads; i++)
		if (timers.threads[i].has_timer)
			timer_delete(timers.threads[i].timer);
	timers.nthreads = 0;
	if (timers.setitimer_mode)
		set_setitimer(0);
	atomic_store(&pp_sampler.active, 0);
	/* SIG_IGN first: it discards signals still pending on any thread,
	 * which the restored disposition (often SIG_DFL: terminate!) would
	 * otherwise receive. */
	struct sigaction ign;
	memset(&ign, 0, sizeof ign);
	ign.sa_handler = SIG_IGN;
	sigaction(SIGPROF, &ign, NULL);
	/* A default disposition (terminate) stays "ignore": a SIGPROF still
	 * in flight must not kill the host. Under valgrind, which queues
	 * signals itself, one arrived after the restore and did (test_safety,
	 * stops as windows end). A handler or SIG_IGN is put back as it was. */
	if ((timers.old_action.sa_flags & SA_SIGINFO) ||
	    timers.old_action.sa_handler != SIG_DFL)
		sigaction(SIGPROF, &timers.old_action, NULL);
	timers.hz = 0;
	publish();
}

void pp_timers_free(void)
{
	free(timers.threads);
	timers.threads = NULL;
	timers.nthreads = timers.cap_threads = 0;
}

void pp_timers_forget_in_child(void)
{
	if (timers.hz)
		sigaction(SIGPROF, &timers.old_action, NULL);
	timers.hz = 0;
	timers.nthreads = 0;
	publish();
}

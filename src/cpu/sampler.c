/*
 * The CPU profiler's agent side. AGENT CONTEXT (the handler is handler.c).
 *
 * Threads:
 *  - the HTTP thread opens and releases windows;
 *  - "pullprof-cpu", the collector, owns sampling: it installs the SIGPROF
 *    handler while any window runs, keeps one CPU-time timer per host thread
 *    (new threads are picked up every 100 ms), drains the ring into every
 *    window whose time span holds the sample, watches clients for hang-ups
 *    and hands finished windows to
 *  - "pullprof-build", which symbolizes and encodes them and tells the
 *    request (its done callback resumes the HTTP connection).
 * One lock guards the window list and the build queue.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "cpu/cpu.h"
#include "cpu/sampler.h"
#include "heap/heap.h"
#include "labels/labels.h"
#include "profile/model.h"
#include "profile/recent.h"
#include "profile/render.h"
#include "symbols/symbols.h"
#include "util/clock.h"
#include "util/proc.h"

#define RING_CAPACITY 4096
#define SCAN_NS 100000000ull /* thread scan and checks: every 100 ms */
#define DRAIN_NS 10000000ull /* ring drain while sampling: every 10 ms */
#define GRACE_NS 20000000ull /* after a window's end, for late samples */

enum { W_RUNNING, W_BUILDING, W_DONE, W_CANCELLED };

struct pp_cpu_window {
	atomic_int refs;
	int state;
	uint64_t start_ns, end_ns; /* CLOCK_MONOTONIC */
	int64_t start_real_ns;
	unsigned hz;
	struct pp_render_opts render;
	int keep;                 /* the model goes to the ?id= store */
	struct pp_recent *stored; /* a kept profile to render again (?id=) */
	uint64_t id;              /* of the profile rendered */
	int client_fd;
	pp_cpu_done_fn done;
	void *arg; /* NULL once the request let go */
	struct pp_profile *model;
	uint64_t lost_at_open;
	uint32_t min_period, max_period;
	char *result;
	size_t result_len;
	int result_err;
	struct pp_cpu_window *next;
};

struct thread_timer {
	pid_t tid;
	int has_timer;
	timer_t timer;
	int seen;
	uint64_t first_seen_ns;
	char name[20];
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t wake, build_wake;
	int threads_up, stopping;
	pthread_t collector, builder;
	pid_t agent_tids[2];
	struct pp_cpu_window *windows; /* running */
	struct pp_cpu_window *build_q; /* waiting to be rendered */
	unsigned nwindows;
	struct pp_cpu_settings settings;
	int ring_ready, unwind_ready;
	/* Owned by the collector, which changes them without the lock (timer
	 * and /proc work): others read the published copies below. */
	unsigned hz;
	int setitimer_mode;
	/* What the collector last published of them (publish()). */
	_Atomic unsigned pub_hz, pub_nthreads;
	_Atomic int pub_setitimer;
	struct sigaction old_action;
	struct thread_timer *threads;
	size_t nthreads, cap_threads;
	uint64_t rng;
} S = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .build_wake = PTHREAD_COND_INITIALIZER,
    .settings = {PP_UNWIND_LIBUNWIND, 128, 8},
};

static uint64_t lost_now(void)
{
	return atomic_load(&pp_sampler.dropped_ring_full);
}

void pp_cpu_configure(const struct pp_cpu_settings *s)
{
	pthread_mutex_lock(&S.mu);
	S.settings = *s;
	pthread_mutex_unlock(&S.mu);
}

/* ---- windows' lifetime ------------------------------------------------- */

static void unref(struct pp_cpu_window *w)
{
	if (atomic_fetch_sub(&w->refs, 1) != 1)
		return;
	pp_profile_free(w->model);
	pp_recent_unref(w->stored);
	free(w->result);
	free(w);
}

/* Take w off the running list (lock held). */
static void unlink_window(struct pp_cpu_window *w)
{
	for (struct pp_cpu_window **p = &S.windows; *p; p = &(*p)->next) {
		if (*p == w) {
			*p = w->next;
			S.nwindows--;
			return;
		}
	}
}

/* ---- sampling: handler, timers ----------------------------------------- */

static uint64_t next_random(void)
{
	S.rng ^= S.rng << 13;
	S.rng ^= S.rng >> 7;
	S.rng ^= S.rng << 17;
	return S.rng;
}

static void arm(struct thread_timer *t)
{
	uint64_t period = 1000000000u / S.hz;
	/* A random first expiry: threads started together do not tick
	 * together, and no phase of a periodic workload is favoured. */
	uint64_t first = 1 + next_random() % period;
	struct itimerspec its = {
	    .it_interval = {0, (long)period},
	    .it_value = {(time_t)(first / 1000000000u),
	                 (long)(first % 1000000000u)},
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
	for (size_t i = 0; i < S.nthreads; i++)
		if (S.threads[i].tid == tid)
			return &S.threads[i];
	return NULL;
}

static struct thread_timer *add_thread(pid_t tid)
{
	if (S.nthreads == S.cap_threads) {
		size_t cap = S.cap_threads ? S.cap_threads * 2 : 64;
		struct thread_timer *v = realloc(S.threads, cap * sizeof *v);
		if (!v)
			return NULL;
		S.threads = v;
		S.cap_threads = cap;
	}
	struct thread_timer *t = &S.threads[S.nthreads++];
	memset(t, 0, sizeof *t);
	t->tid = tid;
	t->first_seen_ns = pp_clock_ns(CLOCK_MONOTONIC);
	read_name(tid, t->name, sizeof t->name);
	return t;
}

/* Per-thread CPU-time timers for every host thread; new threads get one,
 * timers of threads that exited are deleted. */
static void scan_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;

	if (!d)
		return;
	for (size_t i = 0; i < S.nthreads; i++)
		S.threads[i].seen = 0;
	while ((e = readdir(d)) != NULL) {
		pid_t tid = (pid_t)atoi(e->d_name);
		if (tid <= 0 || tid == S.agent_tids[0] ||
		    tid == S.agent_tids[1])
			continue;
		struct thread_timer *t = thread_of(tid);
		if (!t && !(t = add_thread(tid)))
			continue;
		t->seen = 1;
		/* New threads often name themselves just after they start:
		 * read the name again during their first second. */
		if (pp_clock_ns(CLOCK_MONOTONIC) - t->first_seen_ns <
		    1000000000u)
			read_name(tid, t->name, sizeof t->name);
		if (t->has_timer || S.setitimer_mode)
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
			S.setitimer_mode = 1;
		}
	}
	closedir(d);
	for (size_t i = 0; i < S.nthreads;) {
		if (S.threads[i].seen) {
			i++;
			continue;
		}
		if (S.threads[i].has_timer)
			timer_delete(S.threads[i].timer);
		S.threads[i] = S.threads[--S.nthreads];
	}
}

/* The collector's sampling state, for /status and the window-open check
 * (a data race TSan found: they read S.hz under S.mu, which the collector
 * does not hold when it changes it). */
static void publish(void)
{
	atomic_store(&S.pub_nthreads, (unsigned)S.nthreads);
	atomic_store(&S.pub_setitimer, S.setitimer_mode);
	atomic_store(&S.pub_hz, S.hz);
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

static void start_sampling(unsigned hz)
{
	struct sigaction sa;

	/* Libraries may have come and gone since the last window. */
	if (S.settings.unwind == PP_UNWIND_LIBUNWIND)
		pp_unwind_refresh();
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = pp_sampler_handler;
	/* SA_RESTART: the host's interrupted system calls resume by
	 * themselves where the kernel allows. */
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGPROF, &sa, &S.old_action);
	S.hz = hz;
	atomic_store(&pp_sampler.period_ns, 1000000000u / hz);
	atomic_store(&pp_sampler.active, 1);
	scan_threads();
	if (S.setitimer_mode)
		set_setitimer(hz);
	publish();
}

static void change_rate(unsigned hz)
{
	S.hz = hz;
	atomic_store(&pp_sampler.period_ns, 1000000000u / hz);
	if (S.setitimer_mode)
		set_setitimer(hz);
	else
		for (size_t i = 0; i < S.nthreads; i++)
			if (S.threads[i].has_timer)
				arm(&S.threads[i]);
	publish();
}

static void stop_sampling(void)
{
	for (size_t i = 0; i < S.nthreads; i++)
		if (S.threads[i].has_timer)
			timer_delete(S.threads[i].timer);
	S.nthreads = 0;
	if (S.setitimer_mode)
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
	if ((S.old_action.sa_flags & SA_SIGINFO) ||
	    S.old_action.sa_handler != SIG_DFL)
		sigaction(SIGPROF, &S.old_action, NULL);
	S.hz = 0;
	publish();
}

/* ---- collecting --------------------------------------------------------- */

static void add_record(struct pp_cpu_window *w, const struct pp_ring_rec *rec)
{
	uintptr_t pcs[513];
	size_t depth = rec->depth;
	struct pp_profile *p = w->model;

	memcpy(pcs, rec->pcs, depth * sizeof *pcs);
	if (depth == 0)
		pcs[depth++] = pp_profile_synthetic_pc(
		    p, "[pullprof: stack not captured]");
	else if (rec->truncated)
		pcs[depth++] =
		    pp_profile_synthetic_pc(p, "[pullprof: stack truncated]");
	if (pcs[depth - 1] == 0)
		return; /* out of memory for the synthetic frame */
	int64_t v[2] = {rec->weight, (int64_t)rec->weight * rec->period_ns};
	struct thread_timer *t = thread_of((pid_t)rec->tid);
	if (!t)
		t = add_thread((pid_t)rec->tid);
	struct pp_label labels[2 + PP_LABEL_MAX_EXPANDED] = {
	    {"thread_id", NULL, rec->tid, NULL},
	    {"thread_name", t && t->name[0] ? t->name : "?", 0, NULL},
	};
	size_t nlabels = 2 + pp_labels_to_profile(rec->labels, labels + 2,
	                                          PP_LABEL_MAX_EXPANDED);
	pp_profile_add(p, pcs, depth, v, labels, nlabels);
	if (!w->min_period || rec->period_ns < w->min_period)
		w->min_period = rec->period_ns;
	if (rec->period_ns > w->max_period)
		w->max_period = rec->period_ns;
}

/* Ring -> every running window whose span holds the sample. Lock held. */
static void drain(void)
{
	const struct pp_ring_rec *rec;
	if (!S.ring_ready)
		return;
	while ((rec = pp_ring_peek(&pp_sampler.ring)) != NULL) {
		for (struct pp_cpu_window *w = S.windows; w; w = w->next)
			if (rec->time_ns >= w->start_ns &&
			    rec->time_ns < w->end_ns)
				add_record(w, rec);
		pp_ring_release(&pp_sampler.ring);
	}
}

/* Clients that hung up: their windows are cancelled. Lock held; returns the
 * windows whose requests must be told. */
static struct pp_cpu_window *check_clients(void)
{
	struct pp_cpu_window *gone = NULL, **p = &S.windows;
	while (*p) {
		struct pp_cpu_window *w = *p;
		if (pp_fd_hung_up(w->client_fd)) {
			*p = w->next;
			S.nwindows--;
			w->state = W_CANCELLED;
			w->next = gone; /* the list's reference moves here */
			gone = w;
			continue;
		}
		p = &w->next;
	}
	return gone;
}

static void notify(struct pp_cpu_window *list)
{
	while (list) {
		struct pp_cpu_window *next = list->next;
		pthread_mutex_lock(&S.mu);
		pp_cpu_done_fn done = list->done;
		void *arg = list->arg;
		pthread_mutex_unlock(&S.mu);
		if (done && arg)
			done(arg);
		unref(list);
		list = next;
	}
}

static void *collector(void *unused)
{
	uint64_t last_scan = 0;
	(void)unused;
	pp_heap_agent_thread();
	S.agent_tids[0] = (pid_t)syscall(SYS_gettid);
	pthread_mutex_lock(&S.mu);
	while (!S.stopping) {
		if (!S.windows && !S.hz) {
			pthread_cond_wait(&S.wake, &S.mu);
		} else {
			struct timespec until =
			    pp_clock_after(CLOCK_REALTIME, DRAIN_NS);
			pthread_cond_timedwait(&S.wake, &S.mu, &until);
		}
		drain();
		uint64_t now = pp_clock_ns(CLOCK_MONOTONIC);
		int periodic = now - last_scan >= SCAN_NS;
		struct pp_cpu_window *gone = periodic ? check_clients() : NULL;
		/* Finished windows go to the builder, once their last samples
		 * had time to arrive. */
		for (struct pp_cpu_window **p = &S.windows; *p;) {
			struct pp_cpu_window *w = *p;
			if (now < w->end_ns + GRACE_NS) {
				p = &w->next;
				continue;
			}
			*p = w->next;
			S.nwindows--;
			w->state = W_BUILDING;
			w->next = NULL;
			struct pp_cpu_window **q = &S.build_q;
			while (*q)
				q = &(*q)->next;
			*q = w;
			pthread_cond_signal(&S.build_wake);
		}
		unsigned want = 0;
		for (struct pp_cpu_window *w = S.windows; w; w = w->next)
			if (w->hz > want)
				want = w->hz;
		pthread_mutex_unlock(&S.mu);

		if (want && !S.hz)
			start_sampling(want);
		else if (!want && S.hz)
			stop_sampling();
		else if (want && want != S.hz)
			change_rate(want);
		if (periodic) {
			if (S.hz) {
				scan_threads();
				publish();
				pp_unwind_refresh();
			}
			last_scan = now;
		}
		notify(gone);
		pthread_mutex_lock(&S.mu);
	}
	pthread_mutex_unlock(&S.mu);
	if (S.hz)
		stop_sampling();
	return NULL;
}

/* ---- building ----------------------------------------------------------- */

/* Finish a window's model: period, time, notes. */
static void finish_model(struct pp_cpu_window *w)
{
	struct pp_profile *p = w->model;
	uint64_t lost = lost_now() - w->lost_at_open;
	uint32_t period = w->min_period ? w->min_period : 1000000000u / w->hz;
	char note[200];

	if (lost) {
		/* Samples the handler had to drop, charged to a frame of their
		 * own so the totals stay honest. */
		uintptr_t pc = pp_profile_synthetic_pc(
		    p, "[pullprof: lost samples (ring full)]");
		int64_t v[2] = {(int64_t)lost, (int64_t)lost * period};
		if (pc)
			pp_profile_add(p, &pc, 1, v, NULL, 0);
	}
	p->period = period;
	pp_profile_set_time(p, w->start_real_ns,
	                    (int64_t)(w->end_ns - w->start_ns));
	snprintf(note, sizeof note,
	         "pullprof %s: %u Hz asked, sampled every %u ns, %s unwinding",
	         PACKAGE_VERSION, w->hz, period,
	         S.settings.unwind == PP_UNWIND_FP ? "frame-pointer"
	                                           : "libunwind");
	pp_profile_add_comment(p, note);
	if (p->over_limit) {
		snprintf(
		    note, sizeof note,
		    "%llu samples of new stacks past the profile size limit "
		    "went to %s",
		    (unsigned long long)p->over_limit, PP_PROFILE_LIMIT_FRAME);
		pp_profile_add_comment(p, note);
	}
	if (w->max_period != w->min_period && w->min_period) {
		snprintf(
		    note, sizeof note,
		    "the rate changed during this window (periods %u..%u ns, "
		    "another window asked for more): values are weighted by "
		    "the period in force",
		    w->min_period, w->max_period);
		pp_profile_add_comment(p, note);
	}
}

static void build(struct pp_cpu_window *w)
{
	const struct pp_profile *p;
	char *body;
	size_t len;
	uint64_t id = 0;

	if (w->stored) {
		p = pp_recent_profile(w->stored);
		id = w->id;
	} else {
		finish_model(w);
		p = w->model;
	}
	int rc = pp_render_body(p, &w->render, &body, &len);
	if (!w->stored && w->keep) {
		/* Kept for ?id= (the store frees it in the end). */
		id = pp_recent_add("profile", w->model);
		w->model = NULL;
	}

	pthread_mutex_lock(&S.mu);
	w->result = body;
	w->result_len = len;
	w->result_err = rc;
	w->id = id;
	w->state = W_DONE;
	pthread_mutex_unlock(&S.mu);
}

static void *builder(void *unused)
{
	(void)unused;
	pp_heap_agent_thread();
	pthread_mutex_lock(&S.mu);
	/* Under the lock: the collector reads it in scan_threads. */
	S.agent_tids[1] = (pid_t)syscall(SYS_gettid);
	for (;;) {
		while (!S.build_q && !S.stopping)
			pthread_cond_wait(&S.build_wake, &S.mu);
		struct pp_cpu_window *w = S.build_q;
		if (!w)
			break; /* stopping, nothing left */
		S.build_q = w->next;
		w->next = NULL;
		int cancel = S.stopping;
		pthread_mutex_unlock(&S.mu);
		if (cancel) {
			pthread_mutex_lock(&S.mu);
			w->state = W_CANCELLED;
			pthread_mutex_unlock(&S.mu);
		} else {
			build(w);
		}
		notify(w);
		pthread_mutex_lock(&S.mu);
	}
	pthread_mutex_unlock(&S.mu);
	return NULL;
}

/* ---- the request side ---------------------------------------------------- */

static int start_threads(char *err, size_t errlen)
{
	sigset_t all, old;
	int rc;

	if (!S.ring_ready) {
		rc = pp_ring_init(&pp_sampler.ring, RING_CAPACITY,
		                  S.settings.max_depth);
		if (rc) {
			snprintf(err, errlen,
			         "cannot allocate the sample ring");
			return rc;
		}
		S.ring_ready = 1;
	}
	/* Read by the SIGPROF handler, which may be running (timers of an
	 * earlier window still armed): an atomic store. */
	__atomic_store_n(&pp_sampler.unwind, S.settings.unwind,
	                 __ATOMIC_RELAXED);
	if (!S.unwind_ready && S.settings.unwind == PP_UNWIND_LIBUNWIND) {
		rc = pp_unwind_init();
		if (rc) {
			snprintf(err, errlen, "cannot set up stack unwinding");
			return rc;
		}
		S.unwind_ready = 1;
	}
	if (S.threads_up)
		return 0;
	S.rng = (uint64_t)(int64_t)pp_clock_ns(CLOCK_REALTIME) | 1;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = -pthread_create(&S.collector, NULL, collector, NULL);
	if (rc == 0) {
		rc = -pthread_create(&S.builder, NULL, builder, NULL);
		if (rc) {
			S.stopping = 1;
			pthread_cond_signal(&S.wake);
			pthread_mutex_unlock(&S.mu);
			pthread_join(S.collector, NULL);
			pthread_mutex_lock(&S.mu);
			S.stopping = 0;
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		snprintf(err, errlen,
		         "cannot start the CPU profiler's threads");
		return rc;
	}
	pthread_setname_np(S.collector, "pullprof-cpu");
	pthread_setname_np(S.builder, "pullprof-build");
	S.threads_up = 1;
	return 0;
}

/* ?id=: a window that samples nothing and goes straight to the builder with
 * a kept profile (lock held). */
static int rerender(const struct pp_cpu_query *q, pp_cpu_done_fn done,
                    void *arg, struct pp_cpu_window **out, char *err,
                    size_t errlen)
{
	struct pp_recent *kept = pp_recent_get(q->id, "profile", err, errlen);
	if (!kept)
		return -ENOENT;
	int rc = start_threads(err, errlen);
	struct pp_cpu_window *w = rc ? NULL : calloc(1, sizeof *w);
	if (!w) {
		pp_recent_unref(kept);
		if (!rc)
			snprintf(err, errlen, "out of memory");
		return rc ? rc : -ENOMEM;
	}
	atomic_init(&w->refs, 2); /* the build queue and the request */
	w->state = W_BUILDING;
	w->stored = kept;
	w->id = q->id;
	w->render = q->render;
	w->client_fd = -1;
	w->done = done;
	w->arg = arg;
	struct pp_cpu_window **b = &S.build_q;
	while (*b)
		b = &(*b)->next;
	*b = w;
	*out = w;
	pthread_cond_signal(&S.build_wake);
	return 0;
}

int pp_cpu_window_open(const struct pp_cpu_query *q, int client_fd,
                       pp_cpu_done_fn done, void *arg,
                       struct pp_cpu_window **out, unsigned *retry_after,
                       char *err, size_t errlen)
{
	static const struct pp_value_type types[] = {{"samples", "count"},
	                                             {"cpu", "nanoseconds"}};
	int rc;

	pthread_mutex_lock(&S.mu);
	if (S.stopping) {
		snprintf(err, errlen, "the agent is stopping");
		rc = -ESHUTDOWN;
		goto out;
	}
	if (q->id) {
		rc = rerender(q, done, arg, out, err, errlen);
		goto out;
	}
	if (S.nwindows >= S.settings.max_windows) {
		uint64_t now = pp_clock_ns(CLOCK_MONOTONIC), first = UINT64_MAX;
		for (struct pp_cpu_window *w = S.windows; w; w = w->next)
			if (w->end_ns < first)
				first = w->end_ns;
		*retry_after = first > now
		                   ? (unsigned)((first - now) / 1000000000u) + 1
		                   : 1;
		snprintf(err, errlen,
		         "%u CPU profiles are already running (the most "
		         "PULLPROF_MAX_CPU_WINDOWS allows); retry in %u s",
		         S.nwindows, *retry_after);
		rc = -EBUSY;
		goto out;
	}
	if (!S.windows && !atomic_load(&S.pub_hz)) {
		/* Do not clobber a profiler the host runs itself. */
		struct sigaction cur;
		sigaction(SIGPROF, NULL, &cur);
		if ((cur.sa_flags & SA_SIGINFO)
		        ? cur.sa_sigaction != pp_sampler_handler
		        : (cur.sa_handler != SIG_DFL &&
		           cur.sa_handler != SIG_IGN)) {
			snprintf(
			    err, errlen,
			    "this process has its own SIGPROF handler (another "
			    "profiler?); pullprof will not replace it");
			rc = -EEXIST;
			goto out;
		}
	}
	rc = start_threads(err, errlen);
	if (rc)
		goto out;
	struct pp_cpu_window *w = calloc(1, sizeof *w);
	struct pp_value_type period_type = {"cpu", "nanoseconds"};
	if (w)
		w->model =
		    pp_profile_new(types, 2, &period_type, 1000000000 / q->hz);
	if (w && w->model)
		w->model->max_bytes = S.settings.max_profile_bytes;
	if (!w || !w->model) {
		free(w);
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	atomic_init(&w->refs, 2); /* the running list and the request */
	w->state = W_RUNNING;
	w->hz = q->hz;
	w->render = q->render;
	w->keep = q->keep;
	w->client_fd = client_fd;
	w->done = done;
	w->arg = arg;
	w->start_ns = pp_clock_ns(CLOCK_MONOTONIC);
	w->end_ns = w->start_ns + (uint64_t)q->seconds * 1000000000u;
	w->start_real_ns = (int64_t)pp_clock_ns(CLOCK_REALTIME);
	w->lost_at_open = lost_now();
	w->next = S.windows;
	S.windows = w;
	S.nwindows++;
	*out = w;
	pthread_cond_signal(&S.wake);
out:
	pthread_mutex_unlock(&S.mu);
	return rc;
}

void pp_cpu_window_release(struct pp_cpu_window *w)
{
	int listed = 0;
	if (!w)
		return;
	pthread_mutex_lock(&S.mu);
	w->arg = NULL;
	w->done = NULL;
	if (w->state == W_RUNNING) {
		unlink_window(w);
		w->state = W_CANCELLED;
		listed = 1;
		pthread_cond_signal(&S.wake);
	}
	pthread_mutex_unlock(&S.mu);
	if (listed)
		unref(w); /* the running list's reference */
	unref(w);         /* the request's */
}

int pp_cpu_window_take(struct pp_cpu_window *w, char **body, size_t *len,
                       uint64_t *id)
{
	int rc;
	pthread_mutex_lock(&S.mu);
	if (w->state == W_DONE) {
		rc = w->result_err;
		*body = w->result;
		*len = w->result_len;
		*id = w->id;
		w->result = NULL;
		if (!rc && !*body)
			rc = -ENODATA; /* taken before */
	} else {
		rc = w->state == W_CANCELLED ? -ECANCELED : -EAGAIN;
	}
	pthread_mutex_unlock(&S.mu);
	return rc;
}

void pp_cpu_shutdown(void)
{
	pthread_mutex_lock(&S.mu);
	if (!S.threads_up) {
		pthread_mutex_unlock(&S.mu);
		goto free_memory;
	}
	S.stopping = 1;
	struct pp_cpu_window *gone = S.windows;
	for (struct pp_cpu_window *w = S.windows; w; w = w->next)
		w->state = W_CANCELLED;
	S.windows = NULL;
	S.nwindows = 0;
	pthread_cond_broadcast(&S.wake);
	pthread_cond_broadcast(&S.build_wake);
	pthread_mutex_unlock(&S.mu);
	pthread_join(S.collector, NULL); /* it stops sampling on its way out */
	pthread_join(S.builder, NULL);   /* it cancels what it had not built */
	notify(gone);
	pthread_mutex_lock(&S.mu);
	S.threads_up = 0;
	S.stopping = 0;
	pthread_mutex_unlock(&S.mu);
free_memory:
	/* No timer is left and the handler is no longer installed; one that
	 * started before is waited for before the ring's memory goes. */
	while (atomic_load(&pp_sampler.inside))
		usleep(100);
	free(S.threads);
	S.threads = NULL;
	S.nthreads = S.cap_threads = 0;
	if (S.ring_ready) {
		pp_ring_free(&pp_sampler.ring);
		S.ring_ready = 0;
	}
	if (S.unwind_ready) {
		pp_unwind_shutdown();
		S.unwind_ready = 0;
	}
}

void pp_cpu_forget_in_child(void)
{
	atomic_store(&pp_sampler.active, 0);
	/* A parent thread inside the handler at fork time counted itself in
	 * and never counts out here: pp_cpu_shutdown's wait for handlers to
	 * leave would spin forever, and the child hung in pullprof_stop
	 * (test_safety.py, forks during a 1000 Hz window). */
	atomic_store(&pp_sampler.inside, 0);
	/* Likewise a record it had claimed and not yet published: the child's
	 * collector would wait at that slot for ever, and every CPU profile
	 * of the child came out empty (test_safety.py, 1 run in many). */
	if (S.ring_ready)
		pp_ring_reset(&pp_sampler.ring);
	if (S.hz)
		sigaction(SIGPROF, &S.old_action, NULL);
	/* The parent's threads may have held these at fork time. */
	pthread_mutex_init(&S.mu, NULL);
	pthread_cond_init(&S.wake, NULL);
	pthread_cond_init(&S.build_wake, NULL);
	S.threads_up = 0;
	S.stopping = 0;
	S.windows = S.build_q = NULL; /* left to leak: their owners are gone */
	S.nwindows = 0;
	S.hz = 0;
	S.nthreads = 0;
	publish();
}

void pp_cpu_stats(struct pp_cpu_stats *o)
{
	struct pp_sampler_shared *s = &pp_sampler;
	memset(o, 0, sizeof *o);
	pthread_mutex_lock(&S.mu);
	o->windows_open = S.nwindows;
	o->hz = atomic_load(&S.pub_hz);
	o->threads_sampled = atomic_load(&S.pub_nthreads);
	o->timer_mode = !o->hz                          ? "off"
	                : atomic_load(&S.pub_setitimer) ? "setitimer"
	                                                : "per-thread";
	o->ring_capacity = S.ring_ready ? s->ring.mask + 1 : 0;
	o->ring_high_water =
	    S.ring_ready ? atomic_load(&s->ring.high_water) : 0;
	pthread_mutex_unlock(&S.mu);
	o->samples = atomic_load(&s->samples);
	o->weighted = atomic_load(&s->weighted);
	o->dropped_ring_full = atomic_load(&s->dropped_ring_full);
	o->unwind_truncated = atomic_load(&s->unwind_truncated);
	o->unwind_unknown_code = atomic_load(&s->unwind_unknown_code);
	o->unwind_failed = atomic_load(&s->unwind_failed);
	o->handler_calls = atomic_load(&s->handler_calls);
	o->handler_ns_total = atomic_load(&s->handler_ns_total);
	o->handler_ns_max = atomic_load(&s->handler_ns_max);
	for (size_t i = 0; i <= PP_CPU_HANDLER_BUCKETS; i++)
		o->handler_buckets[i] = atomic_load_explicit(
		    &s->handler_buckets[i], memory_order_relaxed);
	o->unwind_images = pp_unwind_images();
}

/*
 * The CPU collector, thread "pullprof-cpu". (The handler is handler.c, the
 * timers timers.c.)
 *
 * It owns sampling: the timers run while any window is listed, at the
 * fastest rate a window asks; every 10 ms it drains the ring into every
 * window whose span holds the sample; every 100 ms it looks for new host
 * threads; and once a window's time is up (and its last samples had time
 * to arrive) it finishes the window's model and delivers it to the job
 * pipeline, which renders and answers.
 * Context: agent.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent_threads.h"
#include "bounds.h"
#include "cpu/model.h"
#include "cpu/producer.h"
#include "cpu/sampler.h"
#include "cpu/sink.h"
#include "cpu/timers.h"
#include "error.h"
#include "heap/heap.h"
#include "labels/labels.h"
#include "symbols/unloaded.h"
#include "util/clock.h"

#define RING_CAPACITY 4096
#define SCAN_NS 100000000ull       /* thread scan: every 100 ms, */
#define SCAN_MAX_NS 1000000000ull  /* up to 1 s while it finds nothing */
#define DRAIN_NS 10000000ull       /* ring drain while sampling: every 10 ms */
#define SINK_DRAIN_NS 100000000ull /* the sinks alone: up to 100 ms */
#define GRACE_NS 20000000ull       /* after a window's end, for late samples */
/* A ring slot claimed and not published for this long: its handler was
 * left without returning (shim/cpu_hot.h), the slot is taken back. A handler
 * takes microseconds; a second covers one descheduled on a busy host. */
#define RECLAIM_NS 1000000000ull

uint64_t pp_cpu_lost_now(void)
{
	return atomic_load(&pp_sampler.dropped_ring_full);
}

/* ---- the sinks (sink.h) ------------------------------------------------- */

#define MAX_SINKS 4
/* Under pp_cpu.mu. */
static const struct pp_cpu_sink *sinks[MAX_SINKS];

/* The sinks that sample now, into live; their count. Lock held. */
static size_t sinks_live(const struct pp_cpu_sink **live)
{
	size_t n = 0;
	for (size_t i = 0; i < MAX_SINKS; i++)
		if (sinks[i] && sinks[i]->hz())
			live[n++] = sinks[i];
	return n;
}

/* The fastest rate a sink samples at; 0: none samples. Lock held. */
static unsigned sinks_hz(void)
{
	unsigned hz = 0;
	for (size_t i = 0; i < MAX_SINKS; i++) {
		unsigned h = sinks[i] ? sinks[i]->hz() : 0;
		if (h > hz)
			hz = h;
	}
	return hz;
}

/* ---- collecting --------------------------------------------------------- */

static void add_record(struct pp_cpu_window *w, const struct pp_ring_rec *rec,
                       const char *name)
{
	if (pp_cpu_model_add(w->model, rec->pcs, rec->depth, rec->flags,
	                     rec->weight, rec->period_ns, rec->tid, name,
	                     rec->labels, rec->time_ns) == -ENOMEM)
		return;
	if (!w->min_period || rec->period_ns < w->min_period)
		w->min_period = rec->period_ns;
	if (rec->period_ns > w->max_period)
		w->max_period = rec->period_ns;
}

/* ---- images unloaded since (symbols/unloaded.h) -------------------------- */

/* Finished windows waiting for the wall window beside them (collector
 * only). */
static struct pp_cpu_window *waiting;
/* Images unloaded whose PCs the models no longer hold (collector only). */
static uint64_t unloads_applied;

struct unloads {
	const struct pp_unloaded_range *v;
	size_t n;
};

static uintptr_t to_ghost(uintptr_t pc, void *arg)
{
	const struct unloads *u = arg;
	for (size_t i = 0; i < u->n; i++)
		if (pc >= u->v[i].lo && pc < u->v[i].hi)
			return pc + u->v[i].delta;
	return pc;
}

/* Images a dlclose took away since the models were last looked at: every
 * sample they hold was added before the unload was recorded, so was taken
 * while the image was mapped (a sample of what the loader put there later
 * comes after: drain() applies this before each sample). Its PCs there
 * move to the image's ghost range, where the symbolizer names them from
 * that image. Lock held. */
static void apply_unloads(const struct pp_cpu_sink **live, size_t nlive)
{
	struct pp_unloaded_range r[16];
	size_t n;
	while ((n = pp_unloaded_take(&unloads_applied, r, 16)) > 0) {
		struct unloads u = {r, n};
		for (struct pp_cpu_window *w = pp_cpu.windows; w; w = w->next)
			if (w->model)
				pp_profile_remap(w->model, to_ghost, &u);
		for (struct pp_cpu_window *w = waiting; w; w = w->next)
			if (w->model)
				pp_profile_remap(w->model, to_ghost, &u);
		for (size_t i = 0; i < nlive; i++)
			live[i]->remap(to_ghost, &u);
	}
}

/* A sample taken before an image it names was unloaded: a copy with those
 * PCs in the image's ghost range. */
static const struct pp_ring_rec *ghosted(const struct pp_ring_rec *rec)
{
	static union {
		struct pp_ring_rec rec;
		unsigned char bytes[sizeof(struct pp_ring_rec) +
		                    PP_MAX_DEPTH * sizeof(uintptr_t)];
	} copy;
	size_t depth = rec->depth > PP_MAX_DEPTH ? PP_MAX_DEPTH : rec->depth;
	copy.rec = *rec;
	copy.rec.depth = (uint16_t)depth;
	for (size_t i = 0; i < depth; i++)
		copy.rec.pcs[i] = pp_unloaded_ghost(rec->gen, rec->pcs[i]);
	return &copy.rec;
}

/* Ring -> every listed window whose span holds the sample, and every sink
 * that samples (sink.h). Lock held. */
static void drain(void)
{
	const struct pp_ring_rec *rec;
	static uint64_t lost_seen;
	if (!pp_cpu.ring_ready)
		return;
	const struct pp_cpu_sink *live[MAX_SINKS];
	size_t nlive = sinks_live(live);
	for (size_t i = 0; i < nlive; i++)
		live[i]->begin(&pp_cpu.mu);
	apply_unloads(live, nlive);
	for (;;) {
		rec = pp_ring_peek(&pp_sampler.ring);
		if (!rec) {
			if (pp_ring_reclaim(&pp_sampler.ring,
			                    pp_clock_ns(CLOCK_MONOTONIC),
			                    RECLAIM_NS))
				continue;
			break;
		}
		if (rec->flags & PP_REC_ABANDONED) {
			pp_ring_release(&pp_sampler.ring);
			continue;
		}
		/* What the models hold is of the images before this
		 * sample's own unloads. */
		if (pp_unloaded_count() != unloads_applied)
			apply_unloads(live, nlive);
		if (rec->depth && pp_unloaded_after_gen(rec->gen))
			rec = ghosted(rec);
		pp_timers_count_sample((pid_t)rec->tid);
		const char *name = pp_timers_thread_name((pid_t)rec->tid);
		for (struct pp_cpu_window *w = pp_cpu.windows; w; w = w->next)
			if (rec->time_ns >= w->start_ns &&
			    rec->time_ns < w->end_ns)
				add_record(w, rec, name);
		for (size_t i = 0; i < nlive; i++)
			live[i]->add(rec, name);
		pp_ring_release(&pp_sampler.ring);
	}
	if (nlive) {
		uint64_t lost = pp_cpu_lost_now();
		uint64_t now = pp_clock_ns(CLOCK_MONOTONIC);
		for (size_t i = 0; i < nlive; i++) {
			if (lost > lost_seen && lost_seen)
				live[i]->add_lost(lost - lost_seen, now);
			live[i]->end();
		}
		lost_seen = lost;
	}
}

/* ---- finishing ----------------------------------------------------------- */

/* A window's model as a profile: period, time, notes. */
static void finish_model(struct pp_cpu_window *w)
{
	struct pp_profile *p = w->model;
	uint64_t lost = pp_cpu_lost_now() - w->lost_at_open;
	uint32_t period =
	    w->min_period ? w->min_period : (uint32_t)(PP_NS_PER_SEC / w->hz);
	char note[400];

	if (lost) {
		/* Samples the handler had to drop, charged to a frame of their
		 * own so the totals stay honest. */
		uintptr_t pc = pp_profile_synthetic_pc(
		    p, "[pullprof: lost samples, the ring was full]");
		int64_t v[2] = {(int64_t)lost, (int64_t)lost * period};
		/* On the timeline: the process's, at the window's end (when
		 * they were dropped is not known). */
		if (pc)
			pp_profile_add_at(p, &pc, 1, v, NULL, 0, w->end_ns - 1,
			                  0);
	}
	unsigned nblocked = 0;
	uint64_t blocked = pp_timers_blocked_measure(&nblocked);
	blocked = w->blocked_base_set ? blocked - w->blocked_base : 0;
	if (nblocked > w->blocked_threads)
		w->blocked_threads = nblocked;
	if (blocked) {
		/* The CPU time of threads that block the signal (a host that
		 * reads its signals with signalfd or sigwait blocks them
		 * all): measured on their CPU clocks, never sampled, charged
		 * to a frame of its own like lost samples.
		 * In whole periods, as every sample stands for one: the
		 * formats that keep counts only (legacy) or weigh a timeline
		 * event by the period (Perfetto) then say what pprof says;
		 * the note below keeps the time measured. Less than half a
		 * period, which sampling would most likely miss too, is in
		 * the note alone. */
		int64_t n = (int64_t)((blocked + period / 2) / period);
		uintptr_t pc =
		    n ? pp_profile_synthetic_pc(
		            p, "[pullprof: not sampled, the thread blocks "
		               "the signal]")
		      : 0;
		int64_t v[2] = {n, n * (int64_t)period};
		if (pc)
			pp_profile_add_at(p, &pc, 1, v, NULL, 0, w->end_ns - 1,
			                  0);
		/* A thread that blocks only SIGURG is sampled with SIGPROF
		 * when that is free (timers.c, signal_for): those here block
		 * both, or SIGPROF was the host's. */
		snprintf(note, sizeof note,
		         "%u thread(s) blocked %s, the signal(s) pullprof "
		         "samples with (a host that reads signals with "
		         "signalfd or sigwait blocks them): their %.3f s of "
		         "CPU could not be sampled and is charged to "
		         "[pullprof: not sampled, the thread blocks the "
		         "signal]",
		         w->blocked_threads ? w->blocked_threads : 1,
		         w->blocked_what       ? w->blocked_what
		         : w->signo == SIGPROF ? "SIGPROF"
		                               : "SIGURG",
		         (double)blocked / 1e9);
		pp_profile_add_comment(p, note);
	}
	if (w->cut) {
		snprintf(note, sizeof note,
		         "sampling stopped %.2f s into this %.0f s window: %s; "
		         "the profile covers only the time before",
		         (double)(w->end_ns - w->start_ns) / 1e9,
		         (double)w->asked_ns / 1e9, w->cut_why);
		pp_profile_add_comment(p, note);
	}
	p->period = period;
	pp_profile_set_time(p, w->start_real_ns,
	                    (int64_t)(w->end_ns - w->start_ns));
	snprintf(note, sizeof note,
	         "pullprof %s: %u Hz asked, sampled every %u ns, %s unwinding",
	         PACKAGE_VERSION, w->hz, period,
	         pp_unwind_mode_name(pp_cpu.settings.unwind));
	pp_profile_add_comment(p, note);
	pp_cpu_model_notes(p, w->min_period, w->max_period);
}

/* Windows whose time is up (and grace after), off the list (lock held). */
static struct pp_cpu_window *take_finished(uint64_t now)
{
	struct pp_cpu_window *done = NULL, **tail = &done;
	for (struct pp_cpu_window **p = &pp_cpu.windows; *p;) {
		struct pp_cpu_window *w = *p;
		if (now < w->end_ns + GRACE_NS) {
			p = &w->next;
			continue;
		}
		*p = w->next;
		w->listed = 0;
		w->next = NULL;
		*tail = w;
		tail = &w->next;
	}
	return done;
}

/* How long past its end a window waits for its wall window's model. */
#define WALL_WAIT_NS 5000000000ull

/* What /trace asked beside the CPU samples: the wall window's model (1
 * while it is still coming) and a heap snapshot. */
static int attach(struct pp_cpu_window *w, uint64_t now)
{
	struct pp_profile *p = w->model;
	if (w->wall) {
		struct pp_profile *wall = NULL;
		int rc = 0;
		if (!pp_wall_companion_take(w->wall, &wall, &rc) &&
		    now < w->end_ns + WALL_WAIT_NS)
			return 1;
		pp_cpu_window_drop_wall(w);
		p->wall = wall;
		if (!wall)
			pp_profile_add_comment(
			    p,
			    rc ? "the wall-clock window failed: no wall "
			         "samples here"
			       : "the wall-clock window did not end in time: "
			         "no wall samples here");
	}
	if (w->heap) {
		struct pp_profile *peak = NULL;
		if (pp_heap_trace_models(&p->heap, &peak) == 0)
			p->heap->heap = peak; /* the peak, beside it */
		else
			pp_profile_add_comment(p, "the heap snapshot failed");
	}
	return 0;
}

/* Unlocked: each finished window's model goes to its job. */
static void deliver(struct pp_cpu_window *list)
{
	uint64_t now = pp_clock_ns(CLOCK_MONOTONIC);
	struct pp_cpu_window **tail = &list;
	while (*tail)
		tail = &(*tail)->next;
	*tail = waiting;
	waiting = NULL;
	while (list) {
		struct pp_cpu_window *w = list;
		list = w->next;
		w->next = NULL;
		if (!w->finished) {
			finish_model(w);
			w->finished = 1;
		}
		if (attach(w, now)) {
			w->next = waiting;
			waiting = w;
			continue;
		}
		struct pp_profile *p = w->model;
		w->model = NULL;
		struct pp_job *j = w->job;
		pp_job_deliver(j, p, 0);
		pp_job_unref(j); /* the list's */
	}
}

/* How long the collector sleeps between drains (lock held). Windows want
 * their samples soon (every 10 ms); the record alone can wait, so an idle
 * host is not woken a hundred times a second for it: up to 100 ms, while
 * a quarter of the ring holds what the threads sample meanwhile. */
static uint64_t drain_interval(void)
{
	if (pp_cpu.windows || waiting)
		return DRAIN_NS;
	struct pp_timers_published tp;
	pp_timers_published(&tp);
	uint64_t per_sec =
	    (uint64_t)(tp.hz ? tp.hz : 1) * (tp.threads ? tp.threads : 1);
	uint64_t ns = (uint64_t)(RING_CAPACITY / 4) * PP_NS_PER_SEC / per_sec;
	return ns > SINK_DRAIN_NS ? SINK_DRAIN_NS
	       : ns < DRAIN_NS    ? DRAIN_NS
	                          : ns;
}

/* ---- the thread ---------------------------------------------------------- */

/* The host took the signal (or would not let go of it when sampling
 * started): every listed window ends now, with why, and is delivered as
 * far as it got. New windows choose the signal again (and get a 409 when
 * none is free). The sinks pause and sample on with the signal free
 * (SIGPROF when the host took SIGURG), a gap over the pause; when none is
 * free, it stops. */
void pp_cpu_cut(const char *why, uint64_t now)
{
	static int said;
	pthread_mutex_lock(&pp_cpu.mu);
	for (struct pp_cpu_window *w = pp_cpu.windows; w; w = w->next) {
		if (w->cut)
			continue;
		w->cut = 1;
		snprintf(w->cut_why, sizeof w->cut_why, "%s", why);
		if (w->end_ns > now)
			w->end_ns = now > w->start_ns ? now : w->start_ns + 1;
	}
	/* The record pauses, and samples on once a signal is free (the
	 * collector's next turn starts sampling again); paused already (no
	 * signal was free), it samples no more until the agent starts
	 * again: it says why. */
	const struct pp_cpu_sink *live[MAX_SINKS];
	size_t nlive = sinks_live(live);
	if (nlive && !pp_cpu.sinks_cut && !pp_cpu.sinks_gap) {
		pp_cpu.sinks_gap = 1;
		for (size_t i = 0; i < nlive; i++)
			live[i]->gap_open(now, why);
	} else if (nlive && !pp_cpu.sinks_cut) {
		pp_cpu.sinks_cut = 1;
		for (size_t i = 0; i < nlive; i++)
			live[i]->stopped(why);
	}
	pthread_mutex_unlock(&pp_cpu.mu);
	if (!said) {
		said = 1;
		pp_log("CPU sampling stopped: %s", why);
	}
}

/*
 * The windows that sampling at their rate now serves begin now: their
 * span is moved to start here, its length kept. A window opened while the
 * sampler was off waited for the collector to start it (install the
 * handler, read the threads, arm their timers): milliseconds, but on a
 * loaded machine up to a second, in which threads the host started got no
 * timer and the window's first part had no sample at all, with nothing
 * to say so (a test's short-lived threads lost a fifth of their CPU). A
 * window opened while the sampler already ran at its rate begins at once.
 */
static void begin_windows(void)
{
	unsigned hz = pp_timers_hz();
	if (!hz)
		return;
	uint64_t now = pp_clock_ns(CLOCK_MONOTONIC);
	pthread_mutex_lock(&pp_cpu.mu);
	for (struct pp_cpu_window *w = pp_cpu.windows; w; w = w->next) {
		if (w->begun || w->cut || w->hz > hz)
			continue;
		w->begun = 1;
		if (w->start_ns >= now)
			continue;
		uint64_t late = now - w->start_ns;
		w->start_ns = now;
		w->end_ns = now + w->asked_ns;
		w->start_real_ns += (int64_t)late;
		w->model->mono_start_ns = w->start_ns;
		w->model->mono_end_ns = w->end_ns;
	}
	pthread_mutex_unlock(&pp_cpu.mu);
}

/* Sampling started again: a pause of the sinks ends (their gap says with
 * which signal it goes on). */
static void sinks_resumed(uint64_t now)
{
	const char *sig = pp_timers_signal() == SIGPROF ? "SIGPROF" : "SIGURG";
	pthread_mutex_lock(&pp_cpu.mu);
	if (pp_cpu.sinks_gap) {
		pp_cpu.sinks_gap = 0;
		const struct pp_cpu_sink *live[MAX_SINKS];
		size_t nlive = sinks_live(live);
		for (size_t i = 0; i < nlive; i++)
			live[i]->gap_close(now, sig);
	}
	pthread_mutex_unlock(&pp_cpu.mu);
}

/* ---- a host's sigaction (takeover.c) ------------------------------------ */

/* After the host's call is answered, the signal is not chosen again for
 * this long (its disposition may not be in place yet). */
#define AVOID_NS 1000000000ull

static const char *take_describe(int what)
{
	return what == PP_TAKE_DFL   ? "reset it to SIG_DFL"
	       : what == PP_TAKE_IGN ? "set it to SIG_IGN"
	                             : "installed a handler of its own";
}

void pp_cpu_handle_takes(uint64_t now)
{
	unsigned asked = atomic_load(&pp_cpu.take_asked);
	unsigned req = atomic_exchange(&pp_cpu.take_req, 0);
	if (req && pp_timers_hz()) {
		int sig = req & 1u ? SIGURG : SIGPROF;
		char why[160];
		snprintf(why, sizeof why,
		         "the host %s for %s, the signal pullprof samples "
		         "with",
		         take_describe(
		             atomic_load(&pp_cpu.take_what[sig == SIGPROF])),
		         sig == SIGURG ? "SIGURG" : "SIGPROF");
		/* Every timer deleted, what they left pending discarded, the
		 * dispositions the host had before sampling back: its own
		 * goes on top once its call returns. */
		pp_timers_abandon();
		pp_timers_avoid(sig, now + AVOID_NS);
		pp_cpu_cut(why, now);
	}
	atomic_store(&pp_cpu.take_done, asked);
}

static void *collector(void *unused)
{
	uint64_t last_scan = 0, last_refresh = 0, scan_ns = SCAN_NS;
	unsigned nblocked = 0; /* threads blocking the signal, last scan */
	(void)unused;
	pp_agent_thread_enter(PP_AGENT_UNSAMPLED);
	pthread_mutex_lock(&pp_cpu.mu);
	while (!pp_cpu.stopping) {
		if (!pp_cpu.windows && !pp_timers_hz() && !waiting &&
		    (!sinks_hz() || pp_cpu.sinks_cut)) {
			pthread_cond_wait(&pp_cpu.wake, &pp_cpu.mu);
		} else {
			struct timespec until =
			    pp_clock_after(CLOCK_REALTIME, drain_interval());
			pthread_cond_timedwait(&pp_cpu.wake, &pp_cpu.mu,
			                       &until);
		}
		/* A host's sigaction waits for this (takeover.c). */
		if (atomic_load(&pp_cpu.take_req)) {
			pthread_mutex_unlock(&pp_cpu.mu);
			pp_cpu_handle_takes(pp_clock_ns(CLOCK_MONOTONIC));
			pthread_mutex_lock(&pp_cpu.mu);
		}
		drain();
		uint64_t now = pp_clock_ns(CLOCK_MONOTONIC);
		struct pp_cpu_window *finished = take_finished(now);
		unsigned want = 0;
		struct pp_timers_published tp;
		pp_timers_published(&tp);
		for (struct pp_cpu_window *w = pp_cpu.windows; w; w = w->next) {
			if (tp.blocked_what && !w->cut)
				w->blocked_what = tp.blocked_what;
			/* A window cut short samples no more. */
			if (!w->cut && w->hz > want)
				want = w->hz;
			if (!w->blocked_base_set) {
				w->blocked_base =
				    pp_timers_blocked_measure(NULL);
				w->blocked_base_set = 1;
			}
			if (nblocked > w->blocked_threads)
				w->blocked_threads = nblocked;
			if (!w->signo)
				w->signo = pp_timers_signal();
		}
		/* The sinks sample all the time at their own rate; a faster
		 * window raises it for both. */
		unsigned shz = pp_cpu.sinks_cut ? 0 : sinks_hz();
		if (shz > want)
			want = shz;
		pthread_mutex_unlock(&pp_cpu.mu);

		unsigned hz = pp_timers_hz();
		char why[160];
		if (want && !hz) {
			int rc = pp_timers_start(want, pp_cpu.settings.unwind,
			                         why, sizeof why);
			/* -EBUSY: the host is taking the signal just now;
			 * the next turn tries again. */
			if (rc && rc != -EBUSY)
				pp_cpu_cut(why, now);
			if (!rc)
				sinks_resumed(now);
		} else if (!want && hz) {
			pp_timers_stop();
		} else if (want && want != hz) {
			pp_timers_change_rate(want);
		}
		begin_windows();
		/* Is the signal still ours? A host that resets every
		 * disposition, or installs a handler of its own, took it:
		 * sampling stops and the windows say why (with SIGURG a timer
		 * expiry meanwhile is ignored, not fatal: disposition.c). */
		if (pp_timers_hz() && pp_timers_check(why, sizeof why)) {
			pp_timers_abandon();
			pp_cpu_cut(why, now);
		}
		if (pp_timers_hz() && now - last_scan >= scan_ns) {
			/* Threads started through pthread_create arm their
			 * own timers: while a scan finds none to arm, the
			 * next waits twice as long, up to SCAN_MAX_NS
			 * (reading /proc/self/task costs ~3 us a thread). */
			scan_ns = pp_timers_scan()            ? SCAN_NS
			          : scan_ns * 2 > SCAN_MAX_NS ? SCAN_MAX_NS
			                                      : scan_ns * 2;
			last_scan = now;
			pp_timers_blocked_measure(&nblocked);
		} else if (pp_timers_hz()) {
			pp_timers_adopt();
		}
		if (pp_timers_hz() && now - last_refresh >= SCAN_NS) {
			pp_unwind_refresh();
			last_refresh = now;
		}
		if (!pp_timers_hz())
			scan_ns = SCAN_NS;
		deliver(finished);
		pthread_mutex_lock(&pp_cpu.mu);
	}
	pthread_mutex_unlock(&pp_cpu.mu);
	/* Stopping: windows still waiting for a wall window end here. */
	while (waiting) {
		struct pp_cpu_window *w = waiting;
		waiting = w->next;
		w->next = NULL;
		pp_cpu_window_drop_wall(w);
		pp_job_deliver(w->job, NULL, -ECANCELED);
		pp_job_unref(w->job);
	}
	if (pp_timers_hz())
		pp_timers_stop();
	pp_agent_thread_leave();
	return NULL;
}

int pp_collector_start(char *err, size_t errlen)
{
	int rc;

	if (!pp_cpu.ring_ready) {
		rc = pp_ring_init(&pp_sampler.ring, RING_CAPACITY,
		                  pp_cpu.settings.max_depth);
		if (rc) {
			snprintf(err, errlen,
			         "cannot allocate the sample ring");
			return rc;
		}
		pp_cpu.ring_ready = 1;
	}
	/* Read by the SIGPROF handler, which may be running (timers of an
	 * earlier window still armed): an atomic store. */
	__atomic_store_n(&pp_sampler.unwind, pp_cpu.settings.unwind,
	                 __ATOMIC_RELAXED);
	/* Frame pointers need no tables, only the handler's stacks. */
	if (pp_cpu.settings.unwind == PP_UNWIND_FP &&
	    pp_unwind_stacks_init() != 0) {
		snprintf(err, errlen, "cannot set up stack unwinding");
		return -ENOMEM;
	}
	if (!pp_cpu.unwind_ready && pp_cpu.settings.unwind != PP_UNWIND_FP) {
		rc = pp_unwind_init();
		if (rc) {
			snprintf(err, errlen, "cannot set up stack unwinding");
			return rc;
		}
		pp_cpu.unwind_ready = 1;
	}
	if (pp_cpu.collector_up)
		return 0;
	rc = pp_agent_thread_create(&pp_cpu.collector, "pullprof-cpu",
	                            collector, NULL);
	if (rc) {
		snprintf(err, errlen,
		         "cannot start the CPU profiler's thread: %s",
		         strerror(-rc));
		return rc;
	}
	__atomic_store_n(&pp_cpu.collector_up, 1, __ATOMIC_RELEASE);
	return 0;
}

void pp_collector_stop(void)
{
	if (!pp_cpu.collector_up)
		return;
	pp_cpu.stopping = 1;
	pthread_cond_broadcast(&pp_cpu.wake);
	pthread_mutex_unlock(&pp_cpu.mu);
	pthread_join(pp_cpu.collector, NULL); /* it stops sampling */
	pthread_mutex_lock(&pp_cpu.mu);
	__atomic_store_n(&pp_cpu.collector_up, 0, __ATOMIC_RELEASE);
	pp_cpu.stopping = 0;
}

/* ---- sinks coming and going --------------------------------------------- */

int pp_cpu_sink_add(const struct pp_cpu_sink *s, char *why, size_t n)
{
	/* Not under a seccomp filter that kills for a call of the
	 * sampler's, nor when the host handles both signals itself: the
	 * sink is told why it holds nothing, and the agent serves all the
	 * same. */
	int rc = pp_cpu_seccomp_check(why, n);
	pthread_mutex_lock(&pp_cpu.mu);
	size_t free_at = MAX_SINKS;
	int known = 0;
	for (size_t i = 0; i < MAX_SINKS; i++) {
		if (sinks[i] == s)
			known = 1;
		else if (!sinks[i] && free_at == MAX_SINKS)
			free_at = i;
	}
	if (!known && free_at < MAX_SINKS)
		sinks[free_at] = s;
	else if (!known) {
		snprintf(why, n, "more than %d sinks of CPU samples",
		         MAX_SINKS);
		rc = -ENOSPC;
	}
	pp_cpu.sinks_cut = 0;
	pp_cpu.sinks_gap = 0;
	if (!rc && !pp_cpu.windows && !pp_timers_hz())
		rc = pp_timers_choose_signal(why, n);
	if (rc >= 0)
		rc = pp_collector_start(why, n);
	if (rc < 0)
		pp_cpu.sinks_cut = 1;
	pthread_cond_signal(&pp_cpu.wake);
	pthread_mutex_unlock(&pp_cpu.mu);
	return rc < 0 ? rc : 0;
}

void pp_cpu_sink_remove(const struct pp_cpu_sink *s)
{
	pthread_mutex_lock(&pp_cpu.mu);
	for (size_t i = 0; i < MAX_SINKS; i++)
		if (sinks[i] == s)
			sinks[i] = NULL;
	pthread_mutex_unlock(&pp_cpu.mu);
}

void pp_cpu_sink_wake(void)
{
	pthread_cond_signal(&pp_cpu.wake);
}

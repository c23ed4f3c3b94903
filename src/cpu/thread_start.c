/*
 * Threads sampled from their first instruction. pthread_create
 * is interposed by the light object (src/shim/thread_create.c: a linked
 * host's calls and a preloaded one's reach it first), which hands every
 * call to pp_thread_create here once the agent is loaded.
 *
 * While a CPU window samples with per-thread timers, a thread the host
 * starts runs a short prologue before its start routine: it creates and
 * arms its own CPU-time timer, with a random first expiry inside one period
 * (so that a thread shorter than a period is sampled with the probability
 * its CPU time deserves), and hands the timer to the collector
 * (pp_timers_thread_started, handover.c), which owns it from then on.
 * Without this a thread waited for the collector's next scan of
 * /proc/self/task (every 100 ms) and one that lived less was never
 * sampled.
 * Context: host.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent_threads.h"
#include "arch/arch.h"
#include "cpu/handover.h"
#include "cpu/sampler.h"
#include "process.h"
#include "pullprof.h"
#include "shim/heap_hot.h"
#include "shim/shim.h"
#include "threads/threads.h"
#include "unwind/unwind.h"
#include "util/clock.h"

/* Under ThreadSanitizer its interceptor of pthread_create calls ours with
 * its own start routine, which must be the first code the new thread runs
 * (instrumented code before it finds no thread state: SIGSEGV). There the
 * prologue is left out and starting threads are found by the scan. */
#if defined(__SANITIZE_THREAD__)
#define START_PROLOGUE 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define START_PROLOGUE 0
#endif
#endif
#ifndef START_PROLOGUE
#define START_PROLOGUE 1
#endif

struct start {
	void *(*fn)(void *);
	void *arg;
};

/* What a thread that armed its own timer at its start remembers, for its
 * exit: how the timer was armed, how many periods the signals of our timers
 * stood for (its own, or a scan's that was armed first and made the
 * collector delete its own), and the stack to charge the rest to (its
 * start routine and callers). */
#define OUTER_MAX 8

static __thread struct young {
	int armed;
	struct pp_timers_start start;
	uint32_t delivered;
	unsigned n;
	uintptr_t pcs[OUTER_MAX + 1];
} young __attribute__((tls_model("initial-exec")));

void pp_thread_start_delivered(uint32_t weight)
{
	young.delivered += weight;
}

void pp_thread_start_forget_in_child(void)
{
	young.armed = 0; /* the forking thread's timer is the parent's */
}

static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
static int exit_key_ok;

/*
 * The kernel checks CPU-time timers only at its scheduler tick (every 4 ms
 * at 250 Hz): an expiry that falls after the thread's last tick is never
 * signalled, and a thread that lives a few milliseconds loses most of its
 * samples that way. The thread's own CPU clock says exactly how many
 * expiries its timer had; those not signalled are recorded here, at its
 * start routine (where inside it is not known: under a frame of its own).
 */
static void thread_ending(void *arg)
{
	struct young *y = arg;
	sigset_t prof;

	if (!y->armed)
		return;
	y->armed = 0;
	pp_timers_thread_exited(y->start.session);
	/* No signal of its timer while this counts what came. */
	sigemptyset(&prof);
	sigaddset(&prof, y->start.signo);
	pthread_sigmask(SIG_BLOCK, &prof, NULL);
	if (pp_timers_generation() != y->start.generation)
		return; /* re-armed at another rate, or stopped */
	uint64_t period = y->start.period_ns, first = y->start.first_ns;
	uint64_t cpu0 = y->start.cpu0_ns;
	uint64_t used = pp_clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
	if (!period)
		return;
	uint64_t due = used < first ? 0 : 1 + (used - first) / period;
	/* The CPU it used before its timer was armed (cpu0: its start-up):
	 * the expiry before the first would have fallen inside it with
	 * probability cpu0 / period, which is when first >= period - cpu0
	 * (first is uniform in (0, period]). */
	if (cpu0 >= period || first >= period - cpu0)
		due++;
	if (due > y->delivered)
		pp_sampler_record_exit(y->pcs, y->n,
		                       (uint32_t)(due - y->delivered),
		                       y->start.period_ns);
}

static void make_exit_key(void)
{
	exit_key_ok = pthread_key_create(&exit_key, thread_ending) == 0;
}

/* Everything a starting thread does before its start routine, in a frame
 * of its own that is gone before the routine runs: the thread keeps its
 * whole stack (a host may size it tightly). */
__attribute__((noinline)) static void thread_begins(void *(*fn)(void *))
{
	pthread_once(&exit_key_once, make_exit_key);
	if (!exit_key_ok || !pp_timers_thread_started(&young.start))
		return;
	/* The stack an exit record is charged to: the start routine (+1: a
	 * caller's frame is looked up at pc - 1), then what called it, from
	 * this function's own registers (getcontext would cost a system
	 * call); this function's frame is left out. */
	uintptr_t outer[OUTER_MAX + 1];
	unsigned n = 0;
	struct pp_arch_regs here;
	pp_arch_here(&here);
	n = pp_unwind_capture_regs(here.pc, here.sp, here.fp, outer,
	                           OUTER_MAX + 1);
	young.pcs[0] = (uintptr_t)fn + 1;
	young.n = 1;
	for (unsigned i = 1; i < n; i++)
		young.pcs[young.n++] = outer[i];
	young.delivered = 0;
	young.armed = 1;
	pthread_setspecific(exit_key, &young);
}

static void *prologue(void *p)
{
	struct start s = *(struct start *)p;
	free(p);
	/* What this allocates (pthread_setspecific may) is the agent's, not
	 * the starting thread's. */
	int hidden = pp_heap_hide();
	thread_begins(s.fn);
	pp_heap_unhide(hidden);
	return s.fn(s.arg);
}

/* The thread is made: the threadcreate profile counts the host's, by the
 * stack above `from` (pthread_create's return address). */
static int created(int rc, int agents, uintptr_t from)
{
	if (!rc && !agents && pp_threadcreate_on()) {
		int hidden = pp_heap_hide(); /* a new stack's entry */
		pp_threadcreate_record(from);
		pp_heap_unhide(hidden);
	}
	return rc;
}

int pp_thread_create(pthread_t *t, const pthread_attr_t *attr,
                     void *(*fn)(void *), void *arg, uintptr_t from)
{
	int agents = pp_on_agent_thread() || pp_creating_agent_thread();
	/* A child made without fork() has no agent to report to. */
	if (pp_process_foreign())
		return pp_real_pthread_create(t, attr, fn, arg);
	/* Only while a window samples per thread, and never for the agent's
	 * own threads (made by agent threads). */
	if (!START_PROLOGUE || !pp_timers_want_starts() || agents)
		return created(pp_real_pthread_create(t, attr, fn, arg), agents,
		               from);
	int hidden = pp_heap_hide(); /* the agent's block, not the host's */
	struct start *s = malloc(sizeof *s);
	pp_heap_unhide(hidden);
	if (!s)
		return created(pp_real_pthread_create(t, attr, fn, arg), 0,
		               from);
	s->fn = fn;
	s->arg = arg;
	int rc = pp_real_pthread_create(t, attr, prologue, s);
	if (rc)
		free(s);
	return created(rc, 0, from);
}

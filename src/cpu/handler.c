/*
 * The SIGPROF handler. It runs on any thread, inside any
 * code. It saves errno, captures the stack into a ring record and counts;
 * no malloc, no lock, no stdio. What it cannot do it drops and counts.
 * Context: signal.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cpu/sampler.h"
#include "cpu/timers.h"
#include "labels/labels.h"
#include "shim/cpu_hot.h"
#include "shim/heap_hot.h"
#include "symbols/generation.h"
#include "unwind/registry.h"
#include "util/clock.h"

struct pp_sampler_shared pp_sampler;

/* The calling thread's id, asked of the kernel once per thread (a system
 * call per sample otherwise). A forked child's thread has a new id: the
 * fork handler forgets it (pp_sampler_forget_tid). */
static __thread pid_t cached_tid __attribute__((tls_model("initial-exec")));

pid_t pp_sampler_tid(void)
{
	if (!cached_tid)
		cached_tid = (pid_t)syscall(SYS_gettid);
	return cached_tid;
}

void pp_sampler_forget_tid(void)
{
	cached_tid = 0;
}

const uint32_t pp_cpu_handler_bounds_ns[PP_CPU_HANDLER_BUCKETS] = {
    500,   1000,   2000,   5000,   10000,  20000,
    50000, 100000, 200000, 500000, 1000000};

static void count(_Atomic uint64_t *c, uint64_t n)
{
	atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* A handler of ours was left on this thread without returning (shim/cpu_hot.h):
 * what it had taken is given back. Its ring slot is published empty unless
 * the collector took it back already; it no longer counts as inside. */
static void repair(struct pp_sampler_shared *s, struct pp_cpu_tls *t)
{
	/* Unless the collector took the slot back (after a second: the
	 * record is then another lap's to write). */
	if (t->claimed && pp_ring_claimed(&s->ring, t->pos)) {
		struct pp_ring_rec *rec = pp_ring_slot(&s->ring, t->pos);
		rec->depth = 0;
		rec->weight = 0;
		rec->flags = PP_REC_ABANDONED;
		(void)pp_ring_publish(&s->ring, t->pos);
	}
	t->claimed = 0;
	if (t->stack != t->entry_stack) {
		pp_unwind_stack_release(t->stack);
		t->stack = t->entry_stack;
	}
	if (t->registry > t->entry_registry) {
		pp_registry_forget_readers(t->registry - t->entry_registry);
		t->registry = t->entry_registry;
	}
	pp_unwind_guard = t->entry_guard;
	pp_heap_tls.busy = t->entry_busy;
	t->in_handler = 0;
	count(&s->handlers_left, 1);
	atomic_fetch_sub_explicit(&s->inside, 1, memory_order_release);
}

void pp_sampler_handler(int sig, siginfo_t *si, void *uc)
{
	struct pp_sampler_shared *s = &pp_sampler;
	struct pp_cpu_tls *t = &pp_cpu_tls;
	int saved = errno;
	size_t pos;

	/* Both signals are in the handler's mask: one found running on its
	 * own thread was left without returning. */
	if (t->in_handler)
		repair(s, t);
	atomic_fetch_add_explicit(&s->inside, 1, memory_order_acq_rel);
	t->in_handler = 1;
	t->entry_stack = t->stack;
	t->entry_registry = t->registry;
	t->entry_guard = pp_unwind_guard;
	t->entry_busy = pp_heap_tls.busy;
	/* Only our timers, which carry a mark in their value: not a stray
	 * kill(), not a timer of the host's, not the host's own ITIMER_PROF
	 * (SI_KERNEL) unless the process-wide timer is ours. */
	int ours =
	    si->si_code == SI_TIMER
	        ? si->si_value.sival_int == PP_TIMER_MARK ||
	              si->si_value.sival_int == PP_START_TIMER_MARK
	        : si->si_code == SI_KERNEL && sig == SIGPROF &&
	              atomic_load_explicit(&s->setitimer, memory_order_relaxed);
	if (!ours) {
		count(&s->foreign, 1);
		goto out;
	}
	if (!atomic_load_explicit(&s->active, memory_order_acquire))
		goto out;
	/* The handler's cost is measured on the monotonic clock, which the
	 * vDSO reads without a system call: this thread's CPU clock would
	 * cost two system calls per sample, more than the handler's own work
	 * (a sample's figure then includes any moment the scheduler took the
	 * core away: rare in a few microseconds, and visible in the max). */
	uint64_t t0 = pp_clock_ns(CLOCK_MONOTONIC);
	uint32_t weight = 1;
	if (si->si_code == SI_TIMER && si->si_overrun > 0)
		weight += (uint32_t)si->si_overrun;
	/* Every period a timer of ours signalled to this thread, its own
	 * start timer's or a scan's: when a scan armed one first, the
	 * collector deletes the start timer, and a thread that counted only
	 * that timer's periods charged at its exit again all that the scan's
	 * timer had sampled (found in the emulated arm64 system, whose slow
	 * threads widen that race). */
	if (si->si_code == SI_TIMER)
		pp_thread_start_delivered(weight);

	struct pp_ring_rec *rec = pp_ring_claim(&s->ring, &pos);
	if (!rec) {
		count(&s->dropped_ring_full, weight);
		goto out;
	}
	t->pos = pos;
	t->claimed = 1;
	int why;
	/* Before the walk: its PCs are of the images mapped at least until
	 * this generation ended (a dlclose bumps it before it unmaps). */
	rec->gen = pp_unloaded_generation();
	/* Inside pullprof for the lock and heap wrappers: libunwind (its
	 * mode, or a fallback) takes its cache lock where it has no
	 * per-thread cache (Debian's arm64 build), and a wait for that lock
	 * recorded from here would unwind again inside libunwind, holding
	 * it (locks/record.c: seen in the arm64 VM, both busy threads stuck
	 * on libunwind's lock). */
	int busy = pp_heap_tls.busy;
	pp_heap_tls.busy = 1;
	rec->depth = (uint16_t)pp_unwind_capture(
	    uc, __atomic_load_n(&s->unwind, __ATOMIC_RELAXED), rec->pcs,
	    s->ring.max_depth, &why);
	pp_heap_tls.busy = busy;
	rec->flags = why == PP_UNWIND_TRUNCATED ? PP_REC_TRUNCATED : 0;
	rec->tid = (uint32_t)pp_sampler_tid();
	rec->labels = pp_labels_current();
	rec->weight = weight;
	rec->period_ns =
	    atomic_load_explicit(&s->period_ns, memory_order_relaxed);
	rec->time_ns = t0;
	t->claimed = 0;
	if (pp_ring_publish(&s->ring, pos) != 0)
		count(&s->dropped_reclaimed, weight);

	if (why == PP_UNWIND_TRUNCATED)
		count(&s->unwind_truncated, 1);
	else if (why == PP_UNWIND_UNKNOWN_CODE)
		count(&s->unwind_unknown_code, 1);
	else if (why == PP_UNWIND_FAILED)
		count(&s->unwind_failed, 1);
	count(&s->samples, 1);
	count(&s->weighted, weight);

	uint64_t dt = pp_clock_ns(CLOCK_MONOTONIC) - t0;
	count(&s->handler_calls, 1);
	count(&s->handler_ns_total, dt);
	/* Ten compares at most, on constant data: the histogram /metrics
	 * shows. */
	unsigned b = 0;
	while (b < PP_CPU_HANDLER_BUCKETS && dt > pp_cpu_handler_bounds_ns[b])
		b++;
	count(&s->handler_buckets[b], 1);
	uint64_t max =
	    atomic_load_explicit(&s->handler_ns_max, memory_order_relaxed);
	while (dt > max && !atomic_compare_exchange_weak_explicit(
	                       &s->handler_ns_max, &max, dt,
	                       memory_order_relaxed, memory_order_relaxed))
		;
out:
	t->in_handler = 0;
	atomic_fetch_sub_explicit(&s->inside, 1, memory_order_release);
	errno = saved;
}

void pp_sampler_record_exit(const uintptr_t *pcs, unsigned n, uint32_t weight,
                            uint32_t period_ns)
{
	struct pp_sampler_shared *s = &pp_sampler;
	size_t pos;

	atomic_fetch_add_explicit(&s->inside, 1, memory_order_acq_rel);
	if (!atomic_load_explicit(&s->active, memory_order_acquire))
		goto out;
	struct pp_ring_rec *rec = pp_ring_claim(&s->ring, &pos);
	if (!rec) {
		count(&s->dropped_ring_full, weight);
		goto out;
	}
	if (n > s->ring.max_depth)
		n = s->ring.max_depth;
	memcpy(rec->pcs, pcs, n * sizeof *pcs);
	rec->gen = pp_unloaded_generation();
	rec->depth = (uint16_t)n;
	rec->flags = PP_REC_EXIT;
	rec->tid = (uint32_t)pp_sampler_tid();
	rec->labels = pp_labels_current();
	rec->weight = weight;
	rec->period_ns = period_ns;
	rec->time_ns = pp_clock_ns(CLOCK_MONOTONIC);
	if (pp_ring_publish(&s->ring, pos) != 0) {
		count(&s->dropped_reclaimed, weight);
		goto out;
	}
	/* Periods, not a handler's sample: samples_total counts those. */
	count(&s->weighted, weight);
	count(&s->exit_remainders, weight);
out:
	atomic_fetch_sub_explicit(&s->inside, 1, memory_order_release);
}

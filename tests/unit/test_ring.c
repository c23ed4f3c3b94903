/* Unit tests: the sample ring, and emptying it in a forked child without
 * writing its pages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cpu/ring.h"
#include "cpu/sampler.h"
#include "shim/cpu_hot.h"
#include "shim/heap_hot.h"
#include "unwind/registry.h"
#include "unwind/registry_internal.h"

#define CAP 1024
#define DEPTH 64 /* 16 + 32 + 512 bytes a slot: 140 pages */

static void put(struct pp_ring *r, uint32_t tid)
{
	size_t pos;
	struct pp_ring_rec *rec = pp_ring_claim(r, &pos);
	assert_non_null(rec);
	rec->tid = tid;
	rec->depth = 1;
	rec->pcs[0] = tid;
	pp_ring_publish(r, pos);
}

/* The parent's state at fork: records published, some read, one claimed
 * and never published (its thread is gone in the child). */
static void fill(struct pp_ring *r)
{
	size_t pos;
	for (uint32_t i = 0; i < CAP - 10; i++)
		put(r, i + 1);
	for (int i = 0; i < 100; i++) {
		assert_non_null(pp_ring_peek(r));
		pp_ring_release(r);
	}
	assert_non_null(pp_ring_claim(r, &pos));
}

/* An empty ring that takes a whole lap and more of records in order. */
static void check_fresh(struct pp_ring *r)
{
	assert_null(pp_ring_peek(r));
	assert_int_equal(atomic_load(&r->head), 0);
	for (uint32_t lap = 0; lap < 3; lap++) {
		for (uint32_t i = 0; i < CAP; i++)
			put(r, lap * CAP + i + 7);
		size_t pos;
		assert_null(pp_ring_claim(r, &pos)); /* full */
		for (uint32_t i = 0; i < CAP; i++) {
			const struct pp_ring_rec *rec = pp_ring_peek(r);
			assert_non_null(rec);
			assert_int_equal(rec->tid, lap * CAP + i + 7);
			pp_ring_release(r);
		}
		assert_null(pp_ring_peek(r));
	}
}

static long minflt(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt;
}

static void test_reset_same_process(void **state)
{
	struct pp_ring r;
	(void)state;
	assert_int_equal(pp_ring_init(&r, CAP, DEPTH), 0);
	fill(&r);
	pp_ring_reset(&r);
	check_fresh(&r);
	pp_ring_free(&r);
}

/* In the child: the reset faults in none of the ring's pages (it did all
 * 140 before: each fork of a profiled host copied the whole ring), and
 * the ring is then empty and works. Exit codes say what failed. */
static void forked_child(struct pp_ring *r)
{
	long before = minflt();
	pp_ring_reset(r);
	long faults = minflt() - before;
#ifndef __SANITIZE_THREAD__
	/* (ThreadSanitizer's shadow of what the reset writes faults too.) */
	if (faults > 4)
		_exit(10);
#else
	(void)faults;
#endif
	if (pp_ring_peek(r))
		_exit(11);
	size_t pos;
	if (!pp_ring_claim(r, &pos))
		_exit(12);
	pp_ring_publish(r, pos);
	const struct pp_ring_rec *rec = pp_ring_peek(r);
	if (!rec)
		_exit(13);
	pp_ring_release(r);
	/* A whole lap: no slot is left claimed from the parent. */
	for (int i = 0; i < CAP; i++) {
		if (!pp_ring_claim(r, &pos))
			_exit(14);
		pp_ring_publish(r, pos);
	}
	_exit(0);
}

static void fork_and_check(int wiped)
{
	struct pp_ring r;
	assert_int_equal(pp_ring_init(&r, CAP, DEPTH), 0);
	if (!wiped)
		r.wiped_on_fork = 0; /* as on a kernel before 4.14 */
	fill(&r);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		forked_child(&r);
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	/* The parent's records are still there: the child's reset is the
	 * child's alone. */
	const struct pp_ring_rec *rec = pp_ring_peek(&r);
	assert_non_null(rec);
	assert_int_equal(rec->tid, 101);
	pp_ring_free(&r);
}

static void test_reset_in_child_wiped(void **state)
{
	(void)state;
	fork_and_check(1);
}

static void test_reset_in_child_remapped(void **state)
{
	(void)state;
	fork_and_check(0);
}

/* A slot claimed and never published (its handler was left without
 * returning): the consumer takes it back once it has waited long enough,
 * the records behind it come through, a publish that comes after all
 * fails, and the slot serves the next lap. */
static void test_reclaim(void **state)
{
	(void)state;
	struct pp_ring r;
	assert_int_equal(pp_ring_init(&r, CAP, DEPTH), 0);
	put(&r, 1);
	size_t left;
	assert_non_null(pp_ring_claim(&r, &left));
	put(&r, 3);
	assert_non_null(pp_ring_peek(&r));
	pp_ring_release(&r);
	assert_null(pp_ring_peek(&r)); /* held at the claimed slot */
	assert_int_equal(pp_ring_reclaim(&r, 1000, 500), 0); /* first seen */
	assert_int_equal(pp_ring_reclaim(&r, 1400, 500), 0); /* too soon */
	assert_int_equal(pp_ring_reclaim(&r, 1600, 500), 1);
	assert_int_equal(atomic_load(&r.reclaimed), 1);
	const struct pp_ring_rec *rec = pp_ring_peek(&r);
	assert_non_null(rec);
	assert_int_equal(rec->tid, 3);
	pp_ring_release(&r);
	assert_int_equal(pp_ring_publish(&r, left), -1); /* too late */
	assert_null(pp_ring_peek(&r));
	assert_int_equal(pp_ring_reclaim(&r, 9000, 500), 0); /* empty */
	/* A whole lap more, over the slot taken back. */
	for (uint32_t i = 0; i < CAP; i++)
		put(&r, 100 + i);
	for (uint32_t i = 0; i < CAP; i++) {
		rec = pp_ring_peek(&r);
		assert_non_null(rec);
		assert_int_equal(rec->tid, 100 + i);
		pp_ring_release(&r);
	}
	/* Published before the wait is over: nothing taken back. */
	size_t slow;
	assert_non_null(pp_ring_claim(&r, &slow));
	assert_int_equal(pp_ring_reclaim(&r, 10000, 500), 0);
	assert_int_equal(pp_ring_publish(&r, slow), 0);
	assert_int_equal(pp_ring_reclaim(&r, 20000, 500), 0);
	assert_non_null(pp_ring_peek(&r));
	pp_ring_free(&r);
}

/* A handler of ours left on this thread without returning (a host's
 * handler jumped out of a fault in it): a slot claimed, counted inside and
 * among the registry's readers, the capture guard and the heap's busy flag
 * set. The next handler on the thread, even for a signal it drops, gives
 * all of it back, and the consumer skips the slot published empty. */
static void test_handler_left(void **state)
{
	(void)state;
	struct pp_cpu_tls *t = &pp_cpu_tls;
	assert_int_equal(pp_ring_init(&pp_sampler.ring, CAP, DEPTH), 0);
	put(&pp_sampler.ring, 5);
	size_t pos;
	assert_non_null(pp_ring_claim(&pp_sampler.ring, &pos));
	put(&pp_sampler.ring, 6);
	int readers = atomic_load(&pp_registry_readers);
	atomic_store(&pp_sampler.inside, 1);
	t->in_handler = 1;
	t->entry_registry = t->registry;
	t->entry_guard = pp_unwind_guard;
	t->entry_busy = pp_heap_tls.busy;
	t->entry_stack = t->stack;
	t->claimed = 1;
	t->pos = pos;
	pp_registry_enter();
	pp_unwind_guard = 1;
	pp_heap_tls.busy = 1;

	siginfo_t si;
	memset(&si, 0, sizeof si);
	si.si_code = SI_USER; /* a kill(): not a sample */
	pp_sampler_handler(SIGURG, &si, NULL);
	assert_int_equal(atomic_load(&pp_sampler.inside), 0);
	assert_int_equal(atomic_load(&pp_sampler.handlers_left), 1);
	assert_int_equal(t->in_handler, 0);
	assert_int_equal(t->claimed, 0);
	assert_int_equal(pp_unwind_guard, 0);
	assert_int_equal(pp_heap_tls.busy, 0);
	assert_int_equal(t->registry, t->entry_registry);
	assert_int_equal(atomic_load(&pp_registry_readers), readers);
	const struct pp_ring_rec *rec = pp_ring_peek(&pp_sampler.ring);
	assert_non_null(rec);
	assert_int_equal(rec->tid, 5);
	pp_ring_release(&pp_sampler.ring);
	rec = pp_ring_peek(&pp_sampler.ring);
	assert_non_null(rec);
	assert_true(rec->flags & PP_REC_ABANDONED);
	pp_ring_release(&pp_sampler.ring);
	rec = pp_ring_peek(&pp_sampler.ring);
	assert_non_null(rec);
	assert_int_equal(rec->tid, 6);
	pp_ring_release(&pp_sampler.ring);
	pp_ring_free(&pp_sampler.ring);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_handler_left),
	    cmocka_unit_test(test_reclaim),
	    cmocka_unit_test(test_reset_same_process),
	    cmocka_unit_test(test_reset_in_child_wiped),
	    cmocka_unit_test(test_reset_in_child_remapped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

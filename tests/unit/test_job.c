/* Unit tests: the job pipeline (profile/job.c), the one lifecycle of every
 * profile request, driven with two small producers of its two shapes — one
 * that makes its model when due (as heap does) and one that delivers (as
 * the CPU collector does) — and real sockets for hang-ups. The real
 * producers are tested through HTTP in tests/integration. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "profile/job.h"
#include "profile/model.h"

/* What the producers were asked to do. */
static struct {
	int starts, makes, cancels, frees;
	int fail_start; /* start returns this */
	struct pp_job *last;
} calls;

static struct pp_profile *one_sample(const char *frame)
{
	static const struct pp_value_type types[] = {{"samples", "count"}};
	struct pp_profile *p = pp_profile_new(types, 1, &types[0], 1);
	uintptr_t pc = pp_profile_synthetic_pc(p, frame);
	int64_t v = 7;
	pp_profile_add(p, &pc, 1, &v, NULL, 0);
	return p;
}

static int t_start(struct pp_job *j, const void *query, char *err,
                   size_t errlen)
{
	calls.starts++;
	calls.last = j;
	if (calls.fail_start) {
		snprintf(err, errlen, "refused on purpose");
		return calls.fail_start;
	}
	pp_job_set_data(j, strdup(query ? (const char *)query : "made"));
	return 0;
}

static int t_make(struct pp_job *j, struct pp_profile **out)
{
	calls.makes++;
	*out = one_sample(pp_job_data(j));
	return 0;
}

static void t_cancel(struct pp_job *j)
{
	(void)j;
	calls.cancels++;
}

static void t_free(void *data)
{
	calls.frees++;
	free(data);
}

static struct pp_producer maker = {
    .kind = "test",
    .what = "test profiles",
    .limit_setting = "TEST_LIMIT",
    .max_open = 2,
    .start = t_start,
    .make = t_make,
    .cancel = t_cancel,
    .free = t_free,
};

static struct pp_producer deliverer = {
    .kind = "test-delivered",
    .what = "delivered profiles",
    .limit_setting = "TEST_LIMIT",
    .max_open = 4,
    .start = t_start,
    .cancel = t_cancel,
    .free = t_free,
};

/* A requester waiting for the done callback. */
struct waiter {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done;
};

static void wake(void *arg)
{
	struct waiter *w = arg;
	pthread_mutex_lock(&w->mu);
	w->done++;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

/* Wait for done, at most `seconds` (a generous bound: a stuck pipeline
 * fails the test instead of hanging it). Returns how many calls came. */
static int wait_done(struct waiter *w, int seconds)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += seconds;
	pthread_mutex_lock(&w->mu);
	while (!w->done && pthread_cond_timedwait(&w->cv, &w->mu, &until) == 0)
		;
	int n = w->done;
	pthread_mutex_unlock(&w->mu);
	return n;
}

#define WAITER                                                                 \
	{                                                                      \
		PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0         \
	}

static struct pp_job_request request(struct pp_producer *p, struct waiter *w,
                                     unsigned seconds)
{
	struct pp_job_request rq = {
	    .producer = p,
	    .seconds = seconds,
	    .render = {.format = PP_FORMAT_TEXT, .sample_index = -1},
	    .keep = 1,
	    .client_fd = -1,
	    .done = wake,
	    .arg = w,
	};
	return rq;
}

static int setup(void **state)
{
	char err[200];
	(void)state;
	memset(&calls, 0, sizeof calls);
	return pp_jobs_start(err, sizeof err);
}

static int teardown(void **state)
{
	(void)state;
	pp_jobs_shutdown();
	return 0;
}

static void test_made_rendered_kept(void **state)
{
	struct waiter w = WAITER, again = WAITER;
	struct pp_job_request rq = request(&maker, &w, 0);
	struct pp_job *j;
	unsigned retry;
	char err[200], *body = NULL;
	size_t len;
	uint64_t id = 0;
	(void)state;

	rq.query = "made_frame";
	assert_int_equal(pp_job_open(&rq, &j, &retry, err, sizeof err), 0);
	assert_int_equal(wait_done(&w, 30), 1);
	assert_int_equal(pp_job_take(j, &body, &len, &id), 0);
	assert_non_null(strstr(body, "made_frame"));
	assert_true(id > 0);
	free(body);
	/* Taken once only. */
	assert_int_equal(pp_job_take(j, &body, &len, &id), -EALREADY);
	pp_job_release(j);
	assert_int_equal(calls.starts, 1);
	assert_int_equal(calls.makes, 1);
	assert_int_equal(calls.cancels, 0);
	assert_int_equal(calls.frees, 1);

	/* ?id=: the kept model again, in another format; the producer is
	 * not asked. */
	rq = request(&maker, &again, 0);
	rq.id = id;
	rq.render.format = PP_FORMAT_FOLDED;
	assert_int_equal(pp_job_open(&rq, &j, &retry, err, sizeof err), 0);
	assert_int_equal(wait_done(&again, 30), 1);
	uint64_t id2 = 0;
	assert_int_equal(pp_job_take(j, &body, &len, &id2), 0);
	assert_int_equal(id2, id);
	assert_non_null(strstr(body, "made_frame 7"));
	free(body);
	pp_job_release(j);
	assert_int_equal(calls.starts, 1);
	assert_int_equal(calls.makes, 1);

	/* An id of another kind, or none: -ENOENT with a reason. */
	rq.producer = &deliverer;
	err[0] = 0;
	assert_int_equal(pp_job_open(&rq, &j, &retry, err, sizeof err),
	                 -ENOENT);
	assert_true(err[0] != 0);
}

static void test_limit_and_retry(void **state)
{
	struct waiter w[3] = {WAITER, WAITER, WAITER};
	struct pp_job *j[3];
	unsigned retry = 0;
	char err[200];
	(void)state;

	for (int i = 0; i < 2; i++) {
		struct pp_job_request rq = request(&maker, &w[i], 30);
		assert_int_equal(
		    pp_job_open(&rq, &j[i], &retry, err, sizeof err), 0);
	}
	struct pp_job_request rq = request(&maker, &w[2], 30);
	assert_int_equal(pp_job_open(&rq, &j[2], &retry, err, sizeof err),
	                 -EBUSY);
	assert_in_range(retry, 29, 31);
	assert_non_null(strstr(err, "TEST_LIMIT"));
	assert_int_equal(pp_jobs_open(&maker), 2);
	/* Another kind has its own limit. */
	struct waiter d = WAITER;
	struct pp_job *other;
	rq = request(&deliverer, &d, 30);
	assert_int_equal(pp_job_open(&rq, &other, &retry, err, sizeof err), 0);
	pp_job_release(other);

	/* A waiting job let go is cancelled (its producer told), and frees
	 * its place. */
	pp_job_release(j[0]);
	assert_int_equal(calls.cancels, 2);
	assert_int_equal(pp_jobs_open(&maker), 1);
	rq = request(&maker, &w[2], 30);
	assert_int_equal(pp_job_open(&rq, &j[2], &retry, err, sizeof err), 0);
	pp_job_release(j[1]);
	pp_job_release(j[2]);
	assert_int_equal(calls.makes, 0);
	assert_int_equal(calls.frees, calls.starts);
}

static void test_hangup_cancels(void **state)
{
	struct waiter w = WAITER;
	struct pp_job *j;
	unsigned retry;
	char err[200], *body;
	size_t len;
	uint64_t id;
	int sv[2];
	(void)state;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	struct pp_job_request rq = request(&maker, &w, 60);
	rq.client_fd = sv[0];
	assert_int_equal(pp_job_open(&rq, &j, &retry, err, sizeof err), 0);
	close(sv[1]); /* the client hangs up */
	assert_int_equal(wait_done(&w, 30), 1);
	assert_int_equal(pp_job_take(j, &body, &len, &id), -ECANCELED);
	assert_int_equal(calls.cancels, 1);
	assert_int_equal(calls.makes, 0);
	pp_job_release(j);
	assert_int_equal(w.done, 1); /* told once */
	close(sv[0]);
}

static void test_delivered(void **state)
{
	struct waiter w = WAITER, gone = WAITER;
	struct pp_job *j, *k;
	unsigned retry;
	char err[200], *body;
	size_t len;
	uint64_t id;
	(void)state;

	struct pp_job_request rq = request(&deliverer, &w, 5);
	assert_int_equal(pp_job_open(&rq, &j, &retry, err, sizeof err), 0);
	struct pp_job *mine = calls.last;
	assert_ptr_equal(mine, j);
	assert_int_equal(pp_job_take(j, &body, &len, &id), -EAGAIN);
	pp_job_deliver(mine, one_sample("delivered_frame"), 0);
	assert_int_equal(wait_done(&w, 30), 1);
	assert_int_equal(pp_job_take(j, &body, &len, &id), 0);
	assert_non_null(strstr(body, "delivered_frame"));
	free(body);
	pp_job_release(j);

	/* Delivered after the requester let go: the model is freed (the
	 * sanitizer and valgrind runs see a leak otherwise), nobody told.
	 * The producer holds its own reference meanwhile, as the CPU
	 * collector does while a window is listed. */
	rq = request(&deliverer, &gone, 5);
	assert_int_equal(pp_job_open(&rq, &k, &retry, err, sizeof err), 0);
	pp_job_ref(k);
	pp_job_release(k);
	pp_job_deliver(k, one_sample("late"), 0);
	pp_job_unref(k);
	assert_int_equal(gone.done, 0);
	assert_int_equal(calls.frees, 2);

	/* A producer's failure ends the job with its error. */
	struct waiter f = WAITER;
	rq = request(&deliverer, &f, 5);
	assert_int_equal(pp_job_open(&rq, &k, &retry, err, sizeof err), 0);
	pp_job_deliver(k, NULL, -EIO);
	assert_int_equal(wait_done(&f, 30), 1);
	assert_int_equal(pp_job_take(k, &body, &len, &id), -EIO);
	pp_job_release(k);
}

static void test_start_refused(void **state)
{
	struct waiter w = WAITER;
	struct pp_job *j = NULL;
	unsigned retry;
	char err[200];
	(void)state;

	calls.fail_start = -EEXIST;
	struct pp_job_request rq = request(&maker, &w, 0);
	assert_int_equal(pp_job_open(&rq, &j, &retry, err, sizeof err),
	                 -EEXIST);
	assert_string_equal(err, "refused on purpose");
	assert_null(j);
	assert_int_equal(pp_jobs_open(&maker), 0);
	assert_int_equal(w.done, 0);
	calls.fail_start = 0;
}

static void test_shutdown_cancels(void **state)
{
	struct waiter w = WAITER, d = WAITER;
	struct pp_job *j, *k;
	unsigned retry;
	char err[200], *body;
	size_t len;
	uint64_t id;
	(void)state;

	struct pp_job_request rq = request(&maker, &w, 60);
	assert_int_equal(pp_job_open(&rq, &j, &retry, err, sizeof err), 0);
	rq = request(&deliverer, &d, 60);
	assert_int_equal(pp_job_open(&rq, &k, &retry, err, sizeof err), 0);
	pp_jobs_shutdown();
	assert_int_equal(w.done, 1);
	assert_int_equal(d.done, 1);
	assert_int_equal(calls.cancels, 2);
	assert_int_equal(pp_job_take(j, &body, &len, &id), -ECANCELED);
	assert_int_equal(pp_job_take(k, &body, &len, &id), -ECANCELED);
	/* A delivery after the stop finds nobody. */
	pp_job_deliver(k, one_sample("too_late"), 0);
	pp_job_release(j);
	pp_job_release(k);
	rq = request(&maker, &w, 0);
	assert_int_equal(pp_job_open(&rq, &j, &retry, err, sizeof err),
	                 -ESHUTDOWN);
	assert_int_equal(calls.frees, 2);
	/* And it starts again (teardown stops it). */
	assert_int_equal(setup(state), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_made_rendered_kept, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_limit_and_retry, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_hangup_cancels, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_delivered, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_start_refused, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_shutdown_cancels, setup,
	                                    teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit tests: what the capture functions refuse before anything runs, and
 * the one refusal a real host cannot provoke: a call from one of the
 * agent's own threads (-EDEADLK: the capture would wait for the thread it
 * runs on). tests/integration/test_capture.py drives the rest in a real
 * process. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent.h"
#include "agent_threads.h"
#include "pullprof.h"

static int devnull = -1;

static void *as_agent_thread(void *arg)
{
	int *rc = arg;
	pp_agent_thread_enter(0); /* what every agent thread says first */
	rc[0] = pullprof_write_cpu_profile(devnull, 1, 100);
	rc[1] = pullprof_write_heap_profile(devnull, PULLPROF_HEAP_INUSE);
	return NULL;
}

static void test_not_running(void **state)
{
	(void)state;
	assert_int_equal(pullprof_write_cpu_profile(devnull, 1, 100), -ESRCH);
	assert_int_equal(pullprof_write_heap_profile(devnull, 0), -ESRCH);
	/* Arguments wrong whatever the configuration come first. */
	assert_int_equal(pullprof_write_cpu_profile(devnull, 0, 100), -EINVAL);
	assert_int_equal(pullprof_write_cpu_profile(devnull, 1, 1001), -EINVAL);
	assert_int_equal(pullprof_write_heap_profile(devnull, 7), -EINVAL);
	assert_int_equal(pullprof_write_cpu_profile(-1, 1, 100), -EBADF);
	assert_int_equal(pullprof_write_heap_profile(-1, 0), -EBADF);
}

static void test_agent_thread(void **state)
{
	struct pullprof_config c;
	pthread_t t;
	int rc[2] = {0, 0};
	(void)state;

	pullprof_config_init(&c);
	c.ignore_env = 1;
	c.listen = "none";
	c.heap_rate = 4096;
	assert_int_equal(pullprof_start(&c), 0);
	assert_int_equal(pullprof_port(), 0);
	assert_int_equal(pthread_create(&t, NULL, as_agent_thread, rc), 0);
	pthread_join(t, NULL);
	assert_int_equal(rc[0], -EDEADLK);
	assert_int_equal(rc[1], -EDEADLK);
	/* From a thread of the host's, the same calls work. */
	assert_int_equal(pullprof_write_cpu_profile(devnull, 1, 100), 0);
	assert_int_equal(pullprof_write_heap_profile(devnull, 1), 0);
	assert_int_equal(pullprof_stop(), 0);
	assert_int_equal(pullprof_write_cpu_profile(devnull, 1, 100), -ESRCH);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_not_running),
	    cmocka_unit_test(test_agent_thread),
	};
	devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	int failed = cmocka_run_group_tests_name("capture", tests, NULL, NULL);
	close(devnull);
	return failed;
}

/* Unit tests: profile label scopes (labels/labels.c) — what a sample taken
 * inside a scope would carry, the limits, threads, fork. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "labels/labels.h"
#include "pullprof.h"

/* The labels in force as "k=v,k=v" (outermost first). */
static const char *now(void)
{
	static char out[4096];
	struct pp_label_pair p[PP_LABEL_MAX_EXPANDED];
	size_t n =
	    pp_labels_expand(pp_labels_current(), p, PP_LABEL_MAX_EXPANDED);
	out[0] = 0;
	for (size_t i = 0; i < n; i++)
		snprintf(out + strlen(out), sizeof out - strlen(out), "%s%s=%s",
		         i ? "," : "", p[i].key, p[i].value);
	return out;
}

static void test_scopes(void **state)
{
	(void)state;
	assert_int_equal(pp_labels_current(), 0);
	assert_string_equal(now(), "");
	assert_int_equal(pullprof_label_push("endpoint", "/api/users"), 0);
	assert_string_equal(now(), "endpoint=/api/users");
	assert_int_equal(pullprof_label_push("tenant", "a"), 0);
	assert_string_equal(now(), "endpoint=/api/users,tenant=a");
	/* An inner scope's value wins for the same key (listed where the
	 * inner scope opened)... */
	assert_int_equal(pullprof_label_push("endpoint", "/api/users/1"), 0);
	assert_string_equal(now(), "tenant=a,endpoint=/api/users/1");
	pullprof_label_pop();
	/* ... until it closes. */
	assert_string_equal(now(), "endpoint=/api/users,tenant=a");
	pullprof_label_pop();
	pullprof_label_pop();
	assert_int_equal(pp_labels_current(), 0);
	/* A pop with nothing open does nothing. */
	pullprof_label_pop();
	assert_int_equal(pp_labels_current(), 0);
	/* The same scope twice is the same set (interned). */
	pullprof_label_push("endpoint", "/api/users");
	uint32_t a = pp_labels_current();
	pullprof_label_pop();
	pullprof_label_push("endpoint", "/api/users");
	assert_int_equal(pp_labels_current(), a);
	pullprof_label_pop();
	/* The empty value is a value. */
	assert_int_equal(pullprof_label_push("k", ""), 0);
	assert_string_equal(now(), "k=");
	pullprof_label_pop();
}

static void test_bad_input(void **state)
{
	char key[PP_LABEL_MAX_KEY + 2], value[PP_LABEL_MAX_VALUE + 2];
	struct pp_label_stats before, after;
	(void)state;

	pp_labels_stats(&before);
	pullprof_label_push("outer", "1");
	memset(key, 'k', sizeof key - 1);
	key[sizeof key - 1] = 0;
	memset(value, 'v', sizeof value - 1);
	value[sizeof value - 1] = 0;
	/* Refused, and the scope opens with the labels around it, so the
	 * caller's pop still balances. */
	assert_int_equal(pullprof_label_push(key, "x"), -EINVAL);
	assert_string_equal(now(), "outer=1");
	pullprof_label_pop();
	assert_int_equal(pullprof_label_push("k", value), -EINVAL);
	pullprof_label_pop();
	assert_int_equal(pullprof_label_push("", "x"), -EINVAL);
	pullprof_label_pop();
	assert_int_equal(pullprof_label_push(NULL, "x"), -EINVAL);
	pullprof_label_pop();
	assert_int_equal(pullprof_label_push("k", NULL), -EINVAL);
	pullprof_label_pop();
	assert_string_equal(now(), "outer=1");
	/* The longest allowed are fine. */
	key[PP_LABEL_MAX_KEY] = 0;
	value[PP_LABEL_MAX_VALUE] = 0;
	assert_int_equal(pullprof_label_push(key, value), 0);
	pullprof_label_pop();
	pullprof_label_pop();
	assert_int_equal(pp_labels_current(), 0);
	pp_labels_stats(&after);
	assert_int_equal(after.refused - before.refused, 5);
}

static void test_depth(void **state)
{
	char v[16];
	(void)state;
	for (int i = 0; i < PP_LABEL_MAX_DEPTH; i++) {
		snprintf(v, sizeof v, "%d", i);
		assert_int_equal(pullprof_label_push("d", v), 0);
	}
	assert_string_equal(now(), "d=31");
	/* Past the depth: refused, nothing recorded, pops still balance. */
	assert_int_equal(pullprof_label_push("deeper", "x"), -ENOSPC);
	assert_int_equal(pullprof_label_push("deeper", "y"), -ENOSPC);
	assert_string_equal(now(), "d=31");
	pullprof_label_pop();
	pullprof_label_pop();
	assert_string_equal(now(), "d=31");
	pullprof_label_pop();
	assert_string_equal(now(), "d=30");
	for (int i = 0; i < PP_LABEL_MAX_DEPTH - 1; i++)
		pullprof_label_pop();
	assert_int_equal(pp_labels_current(), 0);
}

struct racer {
	int id;
	uint32_t sets[64];
};

static void *race(void *arg)
{
	struct racer *r = arg;
	char v[16];
	/* Every thread interns the same 64 sets, at the same time. */
	for (int i = 0; i < 64; i++) {
		snprintf(v, sizeof v, "race-%d", i);
		pullprof_label_push("race", v);
		r->sets[i] = pp_labels_current();
		if (pp_labels_current() == 0)
			r->sets[i] = 0;
		pullprof_label_pop();
	}
	/* Another thread's scopes are not this one's. */
	if (pp_labels_current() != 0)
		r->id = -1;
	return NULL;
}

static void test_threads(void **state)
{
	struct racer rs[8];
	pthread_t t[8];
	(void)state;
	pullprof_label_push("main", "only");
	for (int i = 0; i < 8; i++) {
		memset(&rs[i], 0, sizeof rs[i]);
		rs[i].id = i;
		pthread_create(&t[i], NULL, race, &rs[i]);
	}
	for (int i = 0; i < 8; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(rs[i].id, i);
		for (int k = 0; k < 64; k++) {
			assert_int_not_equal(rs[i].sets[k], 0);
			/* One set per distinct scope, whoever interned it. */
			assert_int_equal(rs[i].sets[k], rs[0].sets[k]);
		}
	}
	assert_string_equal(now(), "main=only");
	pullprof_label_pop();
}

static void test_fork(void **state)
{
	(void)state;
	pullprof_label_push("parent", "1");
	pid_t pid = fork();
	if (pid == 0) {
		/* The child keeps its scopes and can intern new sets. */
		int ok = strcmp(now(), "parent=1") == 0 &&
		         pullprof_label_push("child", "new") == 0 &&
		         strcmp(now(), "parent=1,child=new") == 0;
		_exit(ok ? 0 : 1);
	}
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	pullprof_label_pop();
}

/* Last: it fills the process's table of sets. */
static void test_table_full(void **state)
{
	char v[32];
	struct pp_label_stats st;
	int refused = 0;
	(void)state;
	for (unsigned i = 0; i < PP_LABEL_MAX_SETS + 10; i++) {
		snprintf(v, sizeof v, "fill-%u", i);
		int rc = pullprof_label_push("fill", v);
		if (rc) {
			assert_int_equal(rc, -ENOSPC);
			assert_int_equal(pp_labels_current(), 0);
			refused++;
		}
		pullprof_label_pop();
	}
	pp_labels_stats(&st);
	assert_int_equal(st.sets, PP_LABEL_MAX_SETS - 1);
	assert_true(refused >= 10);
	/* Sets interned before still work. */
	assert_int_equal(pullprof_label_push("endpoint", "/api/users"), 0);
	assert_string_equal(now(), "endpoint=/api/users");
	pullprof_label_pop();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_scopes), cmocka_unit_test(test_bad_input),
	    cmocka_unit_test(test_depth),  cmocka_unit_test(test_threads),
	    cmocka_unit_test(test_fork),   cmocka_unit_test(test_table_full),
	};
	return cmocka_run_group_tests_name("labels", tests, NULL, NULL);
}

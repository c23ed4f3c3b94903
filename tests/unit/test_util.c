/* Unit tests: the byte buffer and the /proc readers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/buf.h"
#include "util/proc.h"
#include "util/utf8.h"

static void test_buf_grows(void **state)
{
	struct pp_buf b = {0};
	size_t len;
	(void)state;

	for (int i = 0; i < 10000; i++)
		pp_buf_printf(&b, "%d,", i);
	assert_false(b.failed);
	assert_int_equal(strncmp(b.data, "0,1,2,", 6), 0);
	assert_non_null(strstr(b.data, ",9999,"));
	/* A printf longer than the small stack buffer. */
	char big[1000];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = 0;
	size_t before = b.len;
	pp_buf_printf(&b, "<%s>", big);
	assert_int_equal(b.len, before + 1001);
	assert_int_equal(b.data[b.len - 1], '>');
	char *p = pp_buf_take(&b, &len);
	assert_non_null(p);
	assert_int_equal(strlen(p), len);
	assert_null(b.data);
	free(p);
}

static void test_buf_html(void **state)
{
	struct pp_buf b = {0};
	size_t len;
	(void)state;

	pp_buf_html(&b, "<a href=\"x\">'&'</a>");
	char *p = pp_buf_take(&b, &len);
	assert_string_equal(
	    p, "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
	free(p);
}

static void test_buf_empty_take(void **state)
{
	struct pp_buf b = {0};
	size_t len = 99;
	(void)state;
	char *p = pp_buf_take(&b, &len);
	assert_non_null(p);
	assert_int_equal(len, 0);
	assert_string_equal(p, "");
	free(p);
}

static void test_proc_cmdline(void **state)
{
	char *args;
	size_t len;
	(void)state;

	assert_int_equal(pp_proc_cmdline(&args, &len), 0);
	/* argv[0] of this very test comes first. */
	assert_non_null(strstr(args, "test_util"));
	assert_true(len >= strlen(args));
	free(args);
}

static void test_proc_exe_and_start(void **state)
{
	(void)state;
	char *exe = pp_proc_exe();
	assert_non_null(exe);
	assert_non_null(strstr(exe, "test_util"));
	free(exe);

	double start = pp_proc_start_time();
	double now = (double)time(NULL);
	/* This process started within the last few minutes, not in the future
	 * (one clock tick of slack). */
	assert_true(start > now - 600);
	assert_true(start <= now + 1);
}

static void test_proc_read_limit(void **state)
{
	char *p;
	size_t len;
	(void)state;
	assert_int_equal(pp_proc_read_file("/proc/self/maps", 100, &p, &len),
	                 0);
	assert_true(len <= 4096); /* the first chunk at most, then capped */
	free(p);
	assert_true(pp_proc_read_file("/nonexistent/file", 100, &p, &len) < 0);
}

static void utf8(const char *in, size_t len, const char *want)
{
	char *got = pp_utf8_sanitize(in, len);
	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
}

static void test_utf8_sanitize(void **state)
{
	(void)state;
	utf8("plain", 5, "plain");
	utf8("\xc3\xbc\xe2\x82\xac\xf0\x9f\x98\x80", 9,
	     "\xc3\xbc\xe2\x82\xac\xf0\x9f\x98\x80"); /* ü € 😀 kept */
	utf8("a\xff"
	     "b",
	     3,
	     "a\xef\xbf\xbd"
	     "b");                                       /* stray byte */
	utf8("\xc0\xaf", 2, "\xef\xbf\xbd\xef\xbf\xbd"); /* overlong / */
	utf8("\xed\xa0\x80", 3,
	     "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");    /* surrogate */
	utf8("\xe2\x82", 2, "\xef\xbf\xbd\xef\xbf\xbd"); /* truncated */
	utf8("\xf4\x90\x80\x80", 4,
	     "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"); /* > U+10FFFF
	                                                           */
	utf8("a\0b", 3,
	     "a\xef\xbf\xbd"
	     "b"); /* embedded NUL */
	utf8("", 0, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_buf_grows),
	    cmocka_unit_test(test_buf_html),
	    cmocka_unit_test(test_buf_empty_take),
	    cmocka_unit_test(test_proc_cmdline),
	    cmocka_unit_test(test_proc_exe_and_start),
	    cmocka_unit_test(test_proc_read_limit),
	    cmocka_unit_test(test_utf8_sanitize),
	};
	return cmocka_run_group_tests_name("util", tests, NULL, NULL);
}

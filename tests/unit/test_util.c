/* Unit tests: the byte buffer and the /proc readers. */
#include <errno.h>
#include <fcntl.h>
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
#include "util/fds.h"
#include "util/proc.h"
#include "util/utf8.h"
#include "util/when.h"

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

/* main's arguments, for the checks of this process's own command line. */
static int main_argc;
static char **main_argv;

/* The arguments of a pp_proc_cmdline answer, as one string each. */
static void split(const char *args, size_t len, size_t argc, char **out)
{
	size_t at = 0;
	for (size_t k = 0; k < argc; k++) {
		out[k] = (char *)args + at;
		at += strlen(args + at) + 1;
	}
	assert_true(at == len + 1 || (argc == 0 && len == 0));
}

static void test_proc_cmdline(void **state)
{
	char *args, *got[64];
	size_t len, argc;
	(void)state;

	/* Untouched: exactly main's arguments. */
	assert_int_equal(pp_proc_cmdline(&args, &len, &argc), 0);
	assert_int_equal(argc, main_argc);
	assert_true(argc <= 64);
	split(args, len, argc, got);
	for (int i = 0; i < main_argc; i++)
		assert_string_equal(got[i], main_argv[i]);
	free(args);
}

/* A title written over the argv area as setproctitle does (redis: the
 * title over argv[0], the rest of the area cleared): one string, as ps
 * shows it, not the title and a run of empty strings. */
static void test_proc_cmdline_title(void **state)
{
	char *args, *got[64];
	size_t len, argc;
	(void)state;

	char *area = main_argv[0];
	char *end =
	    main_argv[main_argc - 1] + strlen(main_argv[main_argc - 1]) + 1;
	size_t size = (size_t)(end - area);
	char *saved = malloc(size);
	assert_non_null(saved);
	memcpy(saved, area, size);
	const char *title = "pp title";
	/* The test's own path is longer than the title (or nothing to do). */
	if (size < strlen(title) + 3) {
		free(saved);
		skip();
	}
	memset(area, 0, size);
	memcpy(area, title, strlen(title));

	int rc = pp_proc_cmdline(&args, &len, &argc);
	memcpy(area, saved, size);
	free(saved);
	assert_int_equal(rc, 0);
	assert_int_equal(argc, 1);
	assert_int_equal(len, strlen(title));
	split(args, len, argc, got);
	assert_string_equal(got[0], title);
	free(args);
}

static void shape(const char *buf, size_t n, int as_started, size_t want_len,
                  size_t want_argc)
{
	size_t argc = 99;
	assert_int_equal(pp_proc_cmdline_shape(buf, n, as_started, &argc),
	                 want_len);
	assert_int_equal(argc, want_argc);
}

static void test_proc_cmdline_shape(void **state)
{
	(void)state;
#define S(lit) lit, sizeof lit - 1
	/* As started: every argument, a trailing empty one included. */
	shape(S("sleep\0"
	        "30\0"),
	      1, 8, 2);
	shape(S("prog\0a\0\0"), 1, 7, 3);
	shape(S("\0"), 1, 0, 1); /* argv = {""} */
	/* Rewritten: the padding goes, a title with spaces stays whole. */
	shape(S("redis-server *:6379\0\0\0\0\0\0"), 0, 19, 1);
	shape(S("nginx: worker process\0\0"), 0, 21, 1);
	/* A title that ran over the area's last NUL (the kernel then reads
	 * on to the first NUL): an unterminated string is one. */
	shape(S("postgres: checkpointer"), 0, 22, 1);
	/* Not padding: NULs inside are separators, as before. */
	shape(S("a\0b\0\0\0"), 0, 3, 2);
	/* Nothing (a zombie's empty file). */
	shape("", 0, 0, 0, 0);
	shape("", 0, 1, 0, 0);
	shape(S("\0\0\0"), 0, 0, 0);
#undef S
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
	     "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"); /* surrogate */
	utf8("\xe2\x82", 2, "\xef\xbf\xbd"); /* truncated: one character */
	utf8("\xf4\x90\x80\x80", 4,
	     "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"); /* > U+10FFFF
	                                                           */
	utf8("a\0b", 3,
	     "a\xef\xbf\xbd"
	     "b"); /* embedded NUL */
	utf8("", 0, "");
}

/* Inputs and what Python's bytes.decode("utf-8", "replace") makes of
 * them (Unicode's substitution of maximal subparts), with the length of
 * the valid prefix (UnicodeDecodeError.start). */
static const struct {
	const char *in;
	size_t len, valid;
	const char *want;
} repairs[] = {
    /* The Unicode standard's own example (§3.9, Table 3-8). */
    {"\x61\xf1\x80\x80\xe1\x80\xc2\x62\x80\x63\x80\xbf\x64", 13, 1,
     "\x61\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\x62\xef\xbf\xbd\x63\xef\xbf"
     "\xbd\xef\xbf\xbd\x64"},
    /* The thread name of issue 27. */
    {"\xff\xfe\x80\xc3\x28", 5, 0,
     "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\x28"},
    /* 15-byte comms that cut a 2-, 3- and 4-byte character: one U+FFFD
     * for the part left, the rest kept. */
    {"abcdefghijklmn\xc3", 15, 14, "abcdefghijklmn\xef\xbf\xbd"},
    {"abcdefghijklm\xe2\x82", 15, 13, "abcdefghijklm\xef\xbf\xbd"},
    {"abcdefghijkl\xf0\x9f\x98", 15, 12, "abcdefghijkl\xef\xbf\xbd"},
    {"\xe2\x82", 2, 0, "\xef\xbf\xbd"},
    /* Overlongs, out of range, surrogates: each byte its own. */
    {"\xe0\x80\x80", 3, 0, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
    {"\xf0\x80\x80\x80", 4, 0,
     "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
    {"\xf5", 1, 0, "\xef\xbf\xbd"},
    {"\xc1\xbf", 2, 0, "\xef\xbf\xbd\xef\xbf\xbd"},
    {"\xed\xa0\x80", 3, 0, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
    {"\xf4\x90\x80\x80", 4, 0,
     "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
    /* The edges of every range, valid: U+0080, U+07FF, U+0800, U+FFFF,
     * U+10000, U+10FFFF, U+D7FF, U+E000. */
    {"\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf"
     "\xbf\xed\x9f\xbf\xee\x80\x80",
     24, 24,
     "\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf"
     "\xbf\xed\x9f\xbf\xee\x80\x80"},
    /* Past the eight-byte ASCII steps, and across one. */
    {"0123456789abcdef\x80", 17, 16, "0123456789abcdef\xef\xbf\xbd"},
    {"01234567\xc3\xa9"
     "89abcdef\xe2\x82\xac",
     21, 21,
     "01234567\xc3\xa9"
     "89abcdef\xe2\x82\xac"},
    {"\xf0\x9f\x98\x80\xf0\x9f\x98", 7, 4, "\xf0\x9f\x98\x80\xef\xbf\xbd"},
    {"", 0, 0, ""},
};

static void test_utf8_repair(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof repairs / sizeof repairs[0]; i++) {
		const char *in = repairs[i].in;
		size_t len = repairs[i].len;
		struct pp_buf b = {0};
		assert_int_equal(pp_utf8_valid_prefix(in, len),
		                 repairs[i].valid);
		assert_int_equal(pp_utf8_valid(in, len),
		                 repairs[i].valid == len);
		pp_utf8_append(&b, in, len);
		assert_false(b.failed);
		assert_int_equal(b.len, strlen(repairs[i].want));
		assert_memory_equal(b.data ? b.data : "", repairs[i].want,
		                    b.len);
		pp_buf_free(&b);
		utf8(in, len, repairs[i].want); /* no NUL: the same */
	}
	/* NUL is U+0000: valid where the caller keeps lengths. */
	assert_true(pp_utf8_valid("a\0b", 3));
}

/* Random bytes, mostly pieces of characters: the repair is always valid,
 * at most three bytes per byte, keeps the valid prefix (and so valid
 * input) as it is. */
static void test_utf8_random(void **state)
{
	static const unsigned char pieces[] = {
	    'a',  '(',  0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf,
	    0xc0, 0xc1, 0xc2, 0xc3, 0xdf, 0xe0, 0xe1, 0xec, 0xed,
	    0xee, 0xef, 0xf0, 0xf1, 0xf3, 0xf4, 0xf5, 0xfe, 0xff};
	unsigned seed = 27;
	(void)state;
	for (int round = 0; round < 20000; round++) {
		char in[40];
		size_t len = (size_t)(rand_r(&seed) % (int)sizeof in);
		for (size_t i = 0; i < len; i++)
			in[i] =
			    (char)pieces[(size_t)rand_r(&seed) % sizeof pieces];
		struct pp_buf b = {0};
		pp_utf8_append(&b, in, len);
		assert_false(b.failed);
		assert_true(pp_utf8_valid(b.data ? b.data : "", b.len));
		assert_true(b.len <= 3 * len);
		size_t ok = pp_utf8_valid_prefix(in, len);
		assert_true(ok <= len);
		assert_true(pp_utf8_valid(in, ok));
		/* The valid prefix comes through as it is. */
		assert_true(b.len >= ok);
		assert_memory_equal(b.data ? b.data : "", in, ok);
		if (ok == len)
			assert_int_equal(b.len, len);
		pp_buf_free(&b);
	}
}

/* A descriptor the host closed and got again for a file of its own is not
 * the agent's: not ours, and pp_fd_id_close leaves it open. */
static void test_fd_id(void **state)
{
	(void)state;
	int ours[2], host[2];
	struct pp_fd_id rd, wr;
	assert_int_equal(pipe2(ours, O_CLOEXEC), 0);
	assert_int_equal(pp_fd_id_take(ours[0], &rd), 0);
	assert_int_equal(pp_fd_id_take(ours[1], &wr), 0);
	assert_true(pp_fd_id_ours(&rd));
	assert_true(pp_fd_id_ours(&wr));
	/* The host closes both and makes a pipe, which takes the numbers. */
	close(ours[0]);
	close(ours[1]);
	assert_false(pp_fd_id_ours(&rd));
	assert_int_equal(pipe2(host, O_CLOEXEC), 0);
	assert_int_equal(host[0], ours[0]);
	assert_false(pp_fd_id_ours(&rd));
	assert_false(pp_fd_id_ours(&wr));
	assert_int_equal(pp_fd_id_close(&rd), 0);
	assert_int_equal(rd.fd, -1);
	assert_int_equal(write(host[1], "x", 1), 1); /* still the host's */
	char c = 0;
	assert_int_equal(read(host[0], &c, 1), 1);
	assert_int_equal(c, 'x');
	/* dup2 onto a number: the same kind of file, another inode. */
	int ours2[2];
	assert_int_equal(pipe2(ours2, O_CLOEXEC), 0);
	struct pp_fd_id id;
	assert_int_equal(pp_fd_id_take(ours2[0], &id), 0);
	assert_int_equal(dup2(host[0], ours2[0]), ours2[0]);
	assert_false(pp_fd_id_ours(&id));
	close(ours2[0]);
	close(ours2[1]);
	/* What is still ours is closed. */
	struct pp_fd_id h;
	assert_int_equal(pp_fd_id_take(host[1], &h), 0);
	assert_int_equal(pp_fd_id_close(&h), 1);
	assert_int_equal(fcntl(host[1], F_GETFD), -1);
	close(host[0]);
	assert_int_equal(pp_fd_id_take(-1, &h), -EBADF);
	assert_false(pp_fd_id_ours(&h));
}

/* Points in time: Unix seconds and RFC 3339, checked against timegm. */
static void test_when(void **state)
{
	(void)state;
	char err[200];
	int64_t ns;
	struct tm tm = {
	    .tm_year = 126, .tm_mon = 10, .tm_mday = 27, .tm_hour = 8};
	int64_t t = (int64_t)timegm(&tm) * 1000000000ll;
	static const struct {
		const char *s;
		int64_t off_ns;
	} good[] = {
	    {"2026-11-27T08:00:00Z", 0},
	    {"2026-11-27t08:00:00z", 0},
	    {"2026-11-27 08:00:00Z", 0},
	    {"2026-11-27T09:00:00+01:00", 0},
	    {"2026-11-27T03:30:00-04:30", 0},
	    {"2026-11-27T08:00:00.25Z", 250000000},
	    {"2026-11-27T08:00:00.123456789123Z", 123456789},
	};
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		assert_int_equal(pp_when_parse(good[i].s, &ns, err, sizeof err),
		                 0);
		assert_int_equal(ns, t + good[i].off_ns);
	}
	char unix_s[40];
	snprintf(unix_s, sizeof unix_s, "%lld.5",
	         (long long)(t / 1000000000ll));
	assert_int_equal(pp_when_parse(unix_s, &ns, err, sizeof err), 0);
	assert_int_equal(ns, t + 500000000);
	/* A leap second reads as the last second before it. */
	assert_int_equal(
	    pp_when_parse("2016-12-31T23:59:60Z", &ns, err, sizeof err), 0);
	assert_int_equal(ns, 1483228799ll * 1000000000ll);
	static const char *bad[] = {
	    "",
	    "now",
	    "1764230400x",
	    "1764230400.",
	    "-5",
	    "2026-11-27",
	    "2026-11-27T08:00:00",
	    "2026-13-01T00:00:00Z",
	    "2026-02-29T00:00:00Z",
	    "2026-11-31T00:00:00Z",
	    "2026-11-27T24:00:00Z",
	    "2026-11-27T08:00:00+1:00",
	    "2026-11-27T08:00:00Zjunk",
	    "1234567890123",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = 0;
		if (pp_when_parse(bad[i], &ns, err, sizeof err) != -EINVAL ||
		    !strstr(err, "not a time"))
			fail_msg("\"%s\" was taken (%s)", bad[i], err);
	}
	assert_int_equal(
	    pp_when_parse("2024-02-29T00:00:00Z", &ns, err, sizeof err), 0);
}

static void test_duration(void **state)
{
	(void)state;
	char err[200];
	int64_t ns, max = 3600ll * 1000000000ll;
	static const struct {
		const char *s;
		int64_t ns;
	} good[] = {
	    {"300", 300000000000ll}, {"2.5", 2500000000ll},
	    {"90s", 90000000000ll},  {"5m", 300000000000ll},
	    {"1h", 3600000000000ll}, {"0.5m", 30000000000ll},
	};
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
		assert_int_equal(
		    pp_duration_parse(good[i].s, max, &ns, err, sizeof err), 0);
		assert_int_equal(ns, good[i].ns);
	}
	assert_int_equal(pp_duration_parse("2h", max, &ns, err, sizeof err),
	                 -ERANGE);
	assert_non_null(strstr(err, "longer than 3600 s"));
	assert_int_equal(pp_duration_parse("0", max, &ns, err, sizeof err),
	                 -ERANGE);
	static const char *bad[] = {"",   "m",   "5d",  "5 m",
	                            "-1", "1e3", "5mm", ".5"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if (pp_duration_parse(bad[i], max, &ns, err, sizeof err) !=
		    -EINVAL)
			fail_msg("\"%s\" was taken", bad[i]);
}

/* Past what int64_t nanoseconds hold: refused (-ERANGE, saying so), never
 * wrapped into another time or duration; the last ones that fit read. */
static void test_when_overflow(void **state)
{
	(void)state;
	char err[200];
	int64_t ns;
	static const char *range[] = {
	    "9999-12-31T23:59:59Z",           "2262-04-12T00:00:00Z",
	    "2262-04-11T23:47:16.854775808Z", "9223372037",
	    "999999999999.999999999",         "0000-01-01T00:00:00Z",
	    "1969-12-31T23:59:59Z",           "1970-01-01T00:30:00+01:00",
	};
	for (size_t i = 0; i < sizeof range / sizeof range[0]; i++) {
		err[0] = 0;
		if (pp_when_parse(range[i], &ns, err, sizeof err) != -ERANGE ||
		    !strstr(err, "2262-04-11T23:47:16Z"))
			fail_msg("\"%s\" was taken (%s)", range[i], err);
	}
	assert_int_equal(pp_when_parse("2262-04-11T23:47:16.854775807Z", &ns,
	                               err, sizeof err),
	                 0);
	assert_true(ns == INT64_MAX);
	assert_int_equal(
	    pp_when_parse("9223372036.854775807", &ns, err, sizeof err), 0);
	assert_true(ns == INT64_MAX);
	assert_int_equal(
	    pp_when_parse("1970-01-01T00:00:00Z", &ns, err, sizeof err), 0);
	assert_int_equal(ns, 0);
}

static void test_duration_overflow(void **state)
{
	(void)state;
	char err[200];
	int64_t ns;
	/* Each wrapped to a short positive duration before: 307445735m to
	 * 26.3 s, 307445736m to 86.3 s, 5124096h to 1526 s. */
	static const char *wrap[] = {"307445735m", "307445736m", "5124096h",
	                             "999999999h", "999999999.9h"};
	for (size_t i = 0; i < sizeof wrap / sizeof wrap[0]; i++)
		for (int m = 0; m < 2; m++) {
			int64_t max = m ? INT64_MAX : 86400ll * 1000000000ll;
			err[0] = 0;
			if (pp_duration_parse(wrap[i], max, &ns, err,
			                      sizeof err) != -ERANGE ||
			    !strstr(err, "longer than"))
				fail_msg("\"%s\" was taken (%s)", wrap[i], err);
		}
	assert_int_equal(
	    pp_duration_parse("2562047h", INT64_MAX, &ns, err, sizeof err), 0);
	assert_true(ns == 2562047ll * 3600 * 1000000000ll);
}

int main(int argc, char **argv)
{
	main_argc = argc;
	main_argv = argv;
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_buf_grows),
	    cmocka_unit_test(test_buf_html),
	    cmocka_unit_test(test_buf_empty_take),
	    cmocka_unit_test(test_proc_cmdline),
	    cmocka_unit_test(test_proc_cmdline_title),
	    cmocka_unit_test(test_proc_cmdline_shape),
	    cmocka_unit_test(test_proc_exe_and_start),
	    cmocka_unit_test(test_proc_read_limit),
	    cmocka_unit_test(test_utf8_sanitize),
	    cmocka_unit_test(test_utf8_repair),
	    cmocka_unit_test(test_utf8_random),
	    cmocka_unit_test(test_fd_id),
	    cmocka_unit_test(test_when),
	    cmocka_unit_test(test_duration),
	    cmocka_unit_test(test_when_overflow),
	    cmocka_unit_test(test_duration_overflow),
	};
	return cmocka_run_group_tests_name("util", tests, NULL, NULL);
}

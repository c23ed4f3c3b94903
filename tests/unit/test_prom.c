/* Unit tests: the Prometheus text format writer (src/util/prom.c) —
 * escaping, numbers, histograms. What a real parser makes of the whole
 * /metrics answer is tests/integration/test_metrics.py's part. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util/prom.h"

/* The buffer's text, NUL-terminated, and the buffer emptied. */
static char *text(struct pp_buf *b)
{
	size_t len;
	char *s = pp_buf_take(b, &len);
	assert_non_null(s);
	return s;
}

static void test_label_escaping(void **state)
{
	struct pp_buf b = {0};
	(void)state;

	pp_prom_escape(&b, "plain");
	pp_prom_escape(&b, "|a\\b\"c\nd|");
	pp_prom_escape(&b, NULL);
	pp_prom_escape(&b, "\\\\\n\n\"\"");
	char *s = text(&b);
	assert_string_equal(s, "plain|a\\\\b\\\"c\\nd|\\\\\\\\\\n\\n\\\"\\\"");
	free(s);

	struct pp_prom_label l[2] = {{"path", "C:\\dir \"x\"\n"},
	                             {"code", "2xx"}};
	pp_prom_u64(&b, "m_total", l, 2, 7);
	pp_prom_u64(&b, "m_total", NULL, 0, UINT64_MAX);
	s = text(&b);
	assert_string_equal(s, "m_total{path=\"C:\\\\dir \\\"x\\\"\\n\","
	                       "code=\"2xx\"} 7\n"
	                       "m_total 18446744073709551615\n");
	free(s);
}

/* Values that are not UTF-8 (the format is) are written repaired, and
 * still escaped. */
static void test_label_utf8(void **state)
{
	struct pp_buf b = {0};
	(void)state;

	struct pp_prom_label l = {"thread", "\xff\"x\\\xe2\x82"};
	pp_prom_u64(&b, "m_total", &l, 1, 1);
	pp_prom_family(&b, "y", "gauge", "caf\xc3\xa9 \xc3");
	char *s = text(&b);
	assert_string_equal(s, "m_total{thread=\"\xef\xbf\xbd\\\"x\\\\"
	                       "\xef\xbf\xbd\"} 1\n"
	                       "# HELP y caf\xc3\xa9 \xef\xbf\xbd\n"
	                       "# TYPE y gauge\n");
	free(s);
}

static void test_help_escaping(void **state)
{
	struct pp_buf b = {0};
	(void)state;

	/* HELP escapes backslash and newline, not the double quote. */
	pp_prom_family(&b, "x_bytes", "gauge", "a \"b\" c\\d\ne");
	char *s = text(&b);
	assert_string_equal(s, "# HELP x_bytes a \"b\" c\\\\d\\ne\n"
	                       "# TYPE x_bytes gauge\n");
	free(s);
}

static void test_numbers(void **state)
{
	char out[40];
	(void)state;

	pp_prom_format(0.1, out, sizeof out);
	assert_string_equal(out, "0.1");
	pp_prom_format(1e-06, out, sizeof out);
	assert_string_equal(out, "1e-06");
	pp_prom_format(0, out, sizeof out);
	assert_string_equal(out, "0");
	pp_prom_format(1795261352.6286395, out, sizeof out);
	assert_true(strtod(out, NULL) == 1795261352.6286395);
	pp_prom_format(INFINITY, out, sizeof out);
	assert_string_equal(out, "+Inf");
	pp_prom_format(-INFINITY, out, sizeof out);
	assert_string_equal(out, "-Inf");
	pp_prom_format(NAN, out, sizeof out);
	assert_string_equal(out, "NaN");
	/* Every double reads back as itself. */
	double v = 1.0 / 3.0;
	for (int i = 0; i < 200; i++, v *= 7.77) {
		pp_prom_format(v, out, sizeof out);
		assert_true(strtod(out, NULL) == v);
	}
}

static void test_histogram(void **state)
{
	struct pp_buf b = {0};
	const double bounds[3] = {1e-06, 2e-06, 0.5};
	const uint64_t counts[4] = {3, 0, 5, 2};
	(void)state;

	pp_prom_histogram(&b, "h_seconds", "Time.", bounds, counts, 3, 1.25);
	char *s = text(&b);
	/* Cumulative buckets; +Inf and _count are the total. */
	assert_string_equal(s, "# HELP h_seconds Time.\n"
	                       "# TYPE h_seconds histogram\n"
	                       "h_seconds_bucket{le=\"1e-06\"} 3\n"
	                       "h_seconds_bucket{le=\"2e-06\"} 3\n"
	                       "h_seconds_bucket{le=\"0.5\"} 8\n"
	                       "h_seconds_bucket{le=\"+Inf\"} 10\n"
	                       "h_seconds_sum 1.25\n"
	                       "h_seconds_count 10\n");
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_label_escaping),
	    cmocka_unit_test(test_help_escaping),
	    cmocka_unit_test(test_label_utf8),
	    cmocka_unit_test(test_numbers),
	    cmocka_unit_test(test_histogram),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

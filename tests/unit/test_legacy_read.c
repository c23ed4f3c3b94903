/* Unit tests: the maps-text parser (strict and lenient) and the legacy CPU
 * profile reader, including a round trip through the agent's legacy writer. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "profile/legacy_read.h"
#include "profile/model.h"
#include "profile/render.h"
#include "symbols/symbols.h"
#include "util/buf.h"

static const char kernel_maps[] =
    "55d0c0a00000-55d0c0a01000 r--p 00000000 fe:00 1234    /usr/bin/my app\n"
    "55d0c0a01000-55d0c0a02000 r-xp 00001000 fe:00 1234    /usr/bin/my app\n"
    "7f0000000000-7f0000100000 r-xp 00002000 fe:00 99      /lib/libc.so.6\n"
    "7f0000200000-7f0000300000 r-xp 00000000 00:00 0\n"
    "7f0000400000-7f0000500000 r-xp 00000000 fe:00 77      /tmp/x.so "
    "(deleted)\n"
    "7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0       [vdso]\n"
    "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]";

static void test_maps_parse(void **state)
{
	struct pp_mappings m;
	(void)state;

	assert_int_equal(pp_mappings_parse(kernel_maps, strlen(kernel_maps),
	                                   "/usr/bin/my app", PP_MAPS_STRICT,
	                                   &m, NULL, 0, NULL),
	                 0);
	assert_int_equal(m.n, 6); /* the executable ones, vsyscall too */
	assert_int_equal(m.v[0].start, 0x55d0c0a01000);
	assert_int_equal(m.v[0].limit, 0x55d0c0a02000);
	assert_int_equal(m.v[0].offset, 0x1000);
	assert_string_equal(m.v[0].path, "/usr/bin/my app");
	assert_true(m.v[0].is_main && m.v[0].is_file);
	assert_int_equal(m.v[0].id, 1);
	assert_string_equal(m.v[0].build_id, "");
	assert_string_equal(m.v[1].path, "/lib/libc.so.6");
	assert_int_equal(m.v[1].id, 2);
	assert_string_equal(m.v[2].path, "");
	assert_false(m.v[2].is_file);
	assert_string_equal(m.v[3].path, "/tmp/x.so");
	assert_true(m.v[3].deleted);
	assert_string_equal(m.v[4].path, "[vdso]");
	assert_false(m.v[4].is_file);
	assert_int_equal(m.v[5].start, 0xffffffffff600000);
	assert_ptr_equal(pp_mappings_find(&m, 0x7f0000000010), &m.v[1]);
	assert_null(pp_mappings_find(&m, 0x7f0000100000));
	uint64_t sig = m.signature;
	pp_mappings_free(&m);

	/* Without a main path, the first file mapping is the main one. */
	assert_int_equal(pp_mappings_parse(kernel_maps, strlen(kernel_maps),
	                                   NULL, 0, &m, NULL, 0, NULL),
	                 0);
	assert_true(m.v[0].is_main);
	assert_int_equal(m.signature, sig);
	pp_mappings_free(&m);

	/* Out of order text is sorted; IDs follow addresses. */
	static const char unsorted[] = "2000-3000 r-xp 0 00:00 0 /b\n"
	                               "1000-2000 r-xp 0 00:00 0 /a\n";
	assert_int_equal(pp_mappings_parse(unsorted, strlen(unsorted), "/b",
	                                   PP_MAPS_STRICT, &m, NULL, 0, NULL),
	                 0);
	assert_string_equal(m.v[0].path, "/a");
	assert_int_equal(m.v[0].id, 2);
	assert_int_equal(m.v[1].id, 1);
	pp_mappings_free(&m);

	/* Empty text: no mappings. */
	assert_int_equal(
	    pp_mappings_parse("", 0, NULL, PP_MAPS_STRICT, &m, NULL, 0, NULL),
	    0);
	assert_int_equal(m.n, 0);
	pp_mappings_free(&m);
}

static void expect_maps_error(const char *text, const char *want,
                              size_t want_at)
{
	struct pp_mappings m;
	char err[200];
	size_t at = 12345;

	assert_int_equal(pp_mappings_parse(text, strlen(text), NULL,
	                                   PP_MAPS_STRICT, &m, err, sizeof err,
	                                   &at),
	                 -EINVAL);
	assert_string_equal(err, want);
	assert_int_equal(at, want_at);
	assert_int_equal(m.n, 0);
	assert_null(m.v);
	/* Lenient: the line is skipped. */
	assert_int_equal(
	    pp_mappings_parse(text, strlen(text), NULL, 0, &m, NULL, 0, NULL),
	    0);
	pp_mappings_free(&m);
}

static void test_maps_errors(void **state)
{
	(void)state;
	expect_maps_error(
	    "1000-2000 r-xp 0 00:00 0 /a\n2000-1000 r-xp 0 0:0 0\n",
	    "maps text line 2: the mapping ends before it starts", 28);
	expect_maps_error("1000-2000 rwzp 0 00:00 0 /a\n",
	                  "maps text line 1: bad permission letters", 0);
	expect_maps_error("1000-2000 r-x 0 00:00 0 /a\n",
	                  "maps text line 1: expected four permission letters",
	                  0);
	expect_maps_error("1000-2000 r-xp g 00:00 0 /a\n",
	                  "maps text line 1: expected the file offset in hex",
	                  0);
	expect_maps_error(
	    "1000-2000 r-xp 0 00 0 /a\n",
	    "maps text line 1: expected the device as major:minor "
	    "in hex",
	    0);
	expect_maps_error("1000-2000 r-xp 0 00:00 x /a\n",
	                  "maps text line 1: expected the inode in decimal", 0);
	expect_maps_error("1000-2000 r-xp 0 00:00 99999999999999999999 /a\n",
	                  "maps text line 1: expected the inode in decimal", 0);
	expect_maps_error("1000-2000 r-xp 0 00:00 1x /a\n",
	                  "maps text line 1: expected a space after the inode",
	                  0);
	expect_maps_error("11112222333344445-2 r-xp 0 00:00 0\n",
	                  "maps text line 1: expected start-limit in hex", 0);
	expect_maps_error("1000-2000 r-xp 0 00:00 0 /a\n"
	                  "1800-2800 r-xp 0 00:00 0 /b\n",
	                  "maps text: executable mappings 1000-2000 and "
	                  "1800-2800 overlap",
	                  0);

	/* Lines that do not start as a mapping are ignored, even strict. */
	static const char other[] = "build=/x\n# comment\n\nfe-\n";
	struct pp_mappings m;
	char err[200];
	assert_int_equal(pp_mappings_parse(other, 9, NULL, PP_MAPS_STRICT, &m,
	                                   err, sizeof err, NULL),
	                 0);
	pp_mappings_free(&m);
	assert_int_equal(pp_mappings_parse(other, strlen(other), NULL,
	                                   PP_MAPS_STRICT, &m, err, sizeof err,
	                                   NULL),
	                 -EINVAL); /* "fe-" starts as one */
	/* A NUL byte anywhere in a line. */
	static const char nul[] = "1000-2000 r-xp 0 00:00 0 /a\0b\n";
	assert_int_equal(pp_mappings_parse(nul, sizeof nul - 1, NULL,
	                                   PP_MAPS_STRICT, &m, err, sizeof err,
	                                   NULL),
	                 -EINVAL);
	assert_string_equal(err, "maps text line 1: NUL byte in the text");
}

/* A legacy file: words of size ws, swapped or not, then text. */
static size_t legacy(unsigned char *buf, unsigned ws, int swap,
                     const uint64_t *w, size_t n, const char *text)
{
	size_t len = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char b[8];
		for (unsigned k = 0; k < ws; k++) {
			unsigned shift = 8 * (swap ? ws - 1 - k : k);
			b[k] = (unsigned char)(w[i] >> shift);
		}
		memcpy(buf + len, b, ws);
		len += ws;
	}
	memcpy(buf + len, text, strlen(text));
	return len + strlen(text);
}

static const uint64_t good[] = {0,      3,      0, 10000, 0,      5, 2,
                                0x1010, 0x2020, 2, 1,     0x1010, 3, 2,
                                0x1010, 0x2020, 0, 1,     0};
static const char good_maps[] = "1000-3000 r-xp 0 08:02 1 /bin/x\n";

static void check_good(const struct pp_legacy *l)
{
	assert_int_equal(l->period_us, 10000);
	assert_int_equal(l->records, 3);
	assert_int_equal(l->samples, 10);
	assert_int_equal(l->profile->period, 10000000);
	assert_string_equal(l->profile->period_type.type, "cpu");
	assert_string_equal(l->profile->types[0].type, "samples");
	assert_string_equal(l->profile->types[1].unit, "nanoseconds");
	/* 5 + 3 on the same stack: summed. */
	assert_int_equal(l->profile->nsamples, 2);
	const struct pp_sample *s = l->profile->first;
	assert_int_equal(s->depth, 2);
	assert_int_equal(s->pcs[0], 0x1010);
	assert_int_equal(s->pcs[1], 0x2020);
	assert_int_equal(s->values[0], 8);
	assert_int_equal(s->values[1], 80000000);
	assert_int_equal(s->next->values[0], 2);
	assert_int_equal(l->maps.n, 1);
	assert_string_equal(l->maps.v[0].path, "/bin/x");
}

static void test_legacy_read(void **state)
{
	unsigned char buf[1024];
	struct pp_legacy l;
	char err[256];
	(void)state;

	for (unsigned ws = 4; ws <= 8; ws += 4) {
		for (int swap = 0; swap < 2; swap++) {
			size_t n =
			    legacy(buf, ws, swap, good,
			           sizeof good / sizeof good[0], good_maps);
			assert_int_equal(
			    pp_legacy_read(buf, n, &l, err, sizeof err), 0);
			assert_int_equal(l.word_size, ws);
			assert_int_equal(l.swapped, swap);
			assert_int_equal(l.maps_offset, 19 * ws);
			check_good(&l);
			pp_legacy_free(&l);
		}
	}
}

static void expect_error(const uint64_t *w, size_t n, const char *text,
                         const char *want)
{
	unsigned char buf[65536];
	struct pp_legacy l;
	char err[256];
	size_t len = legacy(buf, 8, 0, w, n, text);

	assert_int_equal(pp_legacy_read(buf, len, &l, err, sizeof err),
	                 -EINVAL);
	assert_string_equal(err, want);
	assert_null(l.profile);
}

#define W(...) ((const uint64_t[]){__VA_ARGS__})
#define N(...) (sizeof((const uint64_t[]){__VA_ARGS__}) / sizeof(uint64_t))
#define BAD(want, text, ...)                                                   \
	expect_error(W(__VA_ARGS__), N(__VA_ARGS__), text, want)

static void test_legacy_errors(void **state)
{
	(void)state;
	BAD("offset 0: the file has 8 bytes, too few for the header of a "
	    "gperftools CPU profile",
	    "", 0);
	BAD("offset 0: not a gperftools CPU profile: header count 0x2, must be "
	    "0",
	    "", 2, 3, 0, 1, 0, 0, 1, 0);
	BAD("offset 16: format version 2, only version 0 is known", "", 0, 3, 2,
	    1, 0, 0, 1, 0);
	BAD("offset 24: sampling period 0, must be at least 1 microsecond", "",
	    0, 3, 0, 0, 0, 0, 1, 0);
	BAD("offset 32: header padding 0x1, must be 0", "", 0, 3, 0, 1, 1, 0, 1,
	    0);
	BAD("offset 48: record with depth 0 (a record has at least one PC)", "",
	    0, 3, 0, 1, 0, 1, 0, 0, 1, 0);
	BAD("offset 48: record depth 1000000 exceeds the remaining 3 words", "",
	    0, 3, 0, 1, 0, 1, 1000000, 0, 1, 0);
	BAD("offset 64: the file ends before the trailer (0 1 0) after 1 "
	    "records: truncated?",
	    "", 0, 3, 0, 1, 0, 1, 1, 0x10);
	BAD("offset 40: the file ends inside the trailer: truncated?", "", 0, 3,
	    0, 1, 0, 0, 1);
	BAD("offset 40: record with sample count 0 (only the trailer 0 1 0 may "
	    "have it; this one has depth 2)",
	    "", 0, 3, 0, 1, 0, 0, 2, 0, 0);
	BAD("offset 64: maps text line 1: bad permission letters",
	    "1000-2000 rwzp 0 00:00 0 /a\n", 0, 3, 0, 1, 0, 0, 1, 0);
	BAD("offset 92: maps text line 2: the mapping ends before it starts",
	    "1000-2000 r-xp 0 00:00 0 /a\n2-1 r-xp 0 00:00 0\n", 0, 3, 0, 1, 0,
	    0, 1, 0);
}

/* The agent's legacy writer, read back: the same stacks and counts. */
static void test_round_trip(void **state)
{
	static const struct pp_value_type t[] = {{"samples", "count"},
	                                         {"cpu", "nanoseconds"}};
	static const struct pp_value_type pt = {"cpu", "nanoseconds"};
	struct pp_profile *p = pp_profile_new(t, 2, &pt, 4000000);
	uintptr_t a[] = {(uintptr_t)test_round_trip, (uintptr_t)check_good,
	                 (uintptr_t)legacy};
	int64_t v[] = {7, 28000000};
	struct pp_buf out = {0};
	struct pp_legacy l;
	char err[256];
	(void)state;

	assert_int_equal(pp_profile_add(p, a, 3, v, NULL, 0), 0);
	assert_int_equal(pp_profile_add(p, a + 1, 2, v, NULL, 0), 0);
	assert_int_equal(pp_legacy_write(p, &out), 0);
	assert_int_equal(pp_legacy_read(out.data, out.len, &l, err, sizeof err),
	                 0);
	assert_int_equal(l.profile->period, 4000000);
	assert_int_equal(l.profile->nsamples, 2);
	const struct pp_sample *s = l.profile->first;
	assert_int_equal(s->depth, 3);
	assert_memory_equal(s->pcs, a, sizeof a);
	assert_memory_equal(s->values, v, sizeof v);
	assert_int_equal(s->next->depth, 2);
	/* This process's maps: the test program's code is in them. */
	assert_non_null(pp_mappings_find(&l.maps, a[0]));
	pp_legacy_free(&l);
	pp_buf_free(&out);
	pp_profile_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_maps_parse),
	    cmocka_unit_test(test_maps_errors),
	    cmocka_unit_test(test_legacy_read),
	    cmocka_unit_test(test_legacy_errors),
	    cmocka_unit_test(test_round_trip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

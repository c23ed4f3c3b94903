/* Unit tests: the protobuf wire encoder, the tables under the model, and the
 * model's aggregation. The encoder's output is checked byte by byte against
 * the protobuf encoding rules. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zlib.h>

#include "profile/model.h"
#include "profile/pb.h"
#include "profile/pprof.h"
#include "profile/recent.h"
#include "profile/render.h"
#include "symbols/symbols.h"
#include "util/strtab.h"
#include "util/u64map.h"
#include "util/utf8.h"

/* Encode with f into raw bytes and compare with want. */
#define EXPECT_BYTES(code, ...)                                                \
	do {                                                                   \
		static const unsigned char want_[] = {__VA_ARGS__};            \
		struct pp_buf out_ = {0};                                      \
		struct pp_pb pb_;                                              \
		assert_int_equal(pp_pb_init(&pb_, &out_, 0), 0);               \
		{                                                              \
			struct pp_pb *pb = &pb_;                               \
			code;                                                  \
		}                                                              \
		assert_int_equal(pp_pb_finish(&pb_), 0);                       \
		assert_int_equal(out_.len, sizeof want_);                      \
		assert_memory_equal(out_.data, want_, sizeof want_);           \
		pp_buf_free(&out_);                                            \
	} while (0)

static void test_varints(void **state)
{
	(void)state;
	EXPECT_BYTES(pp_pb_varint(pb, 0), 0x00);
	EXPECT_BYTES(pp_pb_varint(pb, 1), 0x01);
	EXPECT_BYTES(pp_pb_varint(pb, 127), 0x7f);
	EXPECT_BYTES(pp_pb_varint(pb, 128), 0x80, 0x01);
	EXPECT_BYTES(pp_pb_varint(pb, 300), 0xac, 0x02);
	EXPECT_BYTES(pp_pb_varint(pb, 16383), 0xff, 0x7f);
	EXPECT_BYTES(pp_pb_varint(pb, 16384), 0x80, 0x80, 0x01);
	EXPECT_BYTES(pp_pb_varint(pb, 0xffffffffULL), 0xff, 0xff, 0xff, 0xff,
	             0x0f);
	EXPECT_BYTES(pp_pb_varint(pb, 1ULL << 63), 0x80, 0x80, 0x80, 0x80, 0x80,
	             0x80, 0x80, 0x80, 0x80, 0x01);
	EXPECT_BYTES(pp_pb_varint(pb, UINT64_MAX), 0xff, 0xff, 0xff, 0xff, 0xff,
	             0xff, 0xff, 0xff, 0xff, 0x01);
	assert_int_equal(pp_pb_varint_len(0), 1);
	assert_int_equal(pp_pb_varint_len(127), 1);
	assert_int_equal(pp_pb_varint_len(128), 2);
	assert_int_equal(pp_pb_varint_len(UINT64_MAX), 10);
}

static void test_fields(void **state)
{
	(void)state;
	/* Field 1 varint 150: the example of the protobuf documentation. */
	EXPECT_BYTES(pp_pb_uint64(pb, 1, 150), 0x08, 0x96, 0x01);
	/* int64 -1 is ten bytes (two's complement), not zigzag. */
	EXPECT_BYTES(pp_pb_int64(pb, 2, -1), 0x10, 0xff, 0xff, 0xff, 0xff, 0xff,
	             0xff, 0xff, 0xff, 0xff, 0x01);
	/* Optional zeros and false booleans are not written. */
	EXPECT_BYTES((pp_pb_uint64_opt(pb, 1, 0), pp_pb_int64_opt(pb, 2, 0),
	              pp_pb_bool(pb, 7, 0), pp_pb_bool(pb, 8, 1)),
	             0x40, 0x01);
	/* Field 16 needs a two-byte key. */
	EXPECT_BYTES(pp_pb_uint64(pb, 16, 1), 0x80, 0x01, 0x01);
	EXPECT_BYTES(pp_pb_bytes(pb, 6, "ab", 2), 0x32, 0x02, 'a', 'b');
	EXPECT_BYTES(pp_pb_bytes(pb, 6, "", 0), 0x32, 0x00);
}

static void test_packed(void **state)
{
	static const uint64_t v[] = {3, 270, 86942};
	static const int64_t neg[] = {-1, 1};
	(void)state;
	/* The packed example of the protobuf documentation. */
	EXPECT_BYTES(pp_pb_uint64s(pb, 4, v, 3), 0x22, 0x06, 0x03, 0x8e, 0x02,
	             0x9e, 0xa7, 0x05);
	EXPECT_BYTES(pp_pb_int64s(pb, 2, neg, 2), 0x12, 0x0b, 0xff, 0xff, 0xff,
	             0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x01);
	/* An empty repeated field is absent. */
	EXPECT_BYTES((pp_pb_uint64s(pb, 4, v, 0), pp_pb_varint(pb, 9)), 0x09);
}

static void test_nested(void **state)
{
	(void)state;
	/* Submessage: tag, length, content; nested twice. */
	EXPECT_BYTES(
	    {
		    size_t a = pp_pb_start(pb);
		    pp_pb_uint64(pb, 1, 1);
		    size_t b = pp_pb_start(pb);
		    pp_pb_uint64(pb, 2, 2);
		    pp_pb_end(pb, 3, b);
		    pp_pb_end(pb, 4, a);
	    },
	    0x22, 0x06, 0x08, 0x01, 0x1a, 0x02, 0x10, 0x02);
	/* A 200-byte submessage: the length takes two bytes, and the content
	 * moves right by one more than a one-byte length would need. */
	struct pp_buf out = {0};
	struct pp_pb pb;
	char blob[197];
	memset(blob, 'x', sizeof blob);
	assert_int_equal(pp_pb_init(&pb, &out, 0), 0);
	size_t m = pp_pb_start(&pb);
	pp_pb_bytes(&pb, 1, blob, sizeof blob); /* 1 + 2 + 197 = 200 bytes */
	pp_pb_end(&pb, 2, m);
	assert_int_equal(pp_pb_finish(&pb), 0);
	assert_int_equal(out.len, 3 + 200);
	assert_int_equal((unsigned char)out.data[0], 0x12);
	assert_int_equal((unsigned char)out.data[1],
	                 0xc8); /* 200 = 0xc8 0x01 */
	assert_int_equal((unsigned char)out.data[2], 0x01);
	assert_int_equal((unsigned char)out.data[3], 0x0a);
	assert_int_equal(out.data[out.len - 1], 'x');
	pp_buf_free(&out);
}

static void test_gzip_stream(void **state)
{
	struct pp_buf out = {0};
	struct pp_pb pb;
	(void)state;
	/* More than the flush threshold, so deflate runs mid-stream. */
	assert_int_equal(pp_pb_init(&pb, &out, 6), 0);
	for (uint64_t i = 0; i < 200000; i++) {
		pp_pb_uint64(&pb, 1, i);
		pp_pb_flush(&pb);
	}
	assert_int_equal(pp_pb_finish(&pb), 0);
	assert_int_equal((unsigned char)out.data[0], 0x1f);
	assert_int_equal((unsigned char)out.data[1], 0x8b);
	/* Inflate and compare with the raw encoding. */
	struct pp_buf raw = {0};
	struct pp_pb rp;
	assert_int_equal(pp_pb_init(&rp, &raw, 0), 0);
	for (uint64_t i = 0; i < 200000; i++)
		pp_pb_uint64(&rp, 1, i);
	assert_int_equal(pp_pb_finish(&rp), 0);
	unsigned char *back = malloc(raw.len + 16);
	z_stream z = {0};
	assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
	z.next_in = (unsigned char *)out.data;
	z.avail_in = (unsigned)out.len;
	z.next_out = back;
	z.avail_out = (unsigned)raw.len + 16;
	assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
	assert_int_equal(z.total_out, raw.len);
	assert_memory_equal(back, raw.data, raw.len);
	inflateEnd(&z);
	free(back);
	pp_buf_free(&raw);
	pp_buf_free(&out);
}

static void test_strtab(void **state)
{
	struct pp_strtab t;
	(void)state;
	assert_int_equal(pp_strtab_init(&t), 0);
	assert_int_equal(pp_strtab_add(&t, ""), 0);
	assert_int_equal(pp_strtab_add(&t, NULL), 0);
	assert_int_equal(pp_strtab_add(&t, "a"), 1);
	assert_int_equal(pp_strtab_add(&t, "b"), 2);
	assert_int_equal(pp_strtab_add(&t, "a"), 1);
	assert_int_equal(pp_strtab_intern(&t, "ab", 1), 1); /* "a" */
	char buf[32];
	for (int i = 0; i < 50000; i++) {
		snprintf(buf, sizeof buf, "s%d", i);
		assert_int_equal(pp_strtab_add(&t, buf), 3 + i);
	}
	for (int i = 0; i < 50000; i += 997) {
		snprintf(buf, sizeof buf, "s%d", i);
		assert_int_equal(pp_strtab_add(&t, buf), 3 + i);
		assert_string_equal(pp_strtab_get(&t, 3 + (size_t)i), buf);
	}
	/* Embedded NULs are part of the string. */
	int64_t z = pp_strtab_intern(&t, "x\0y", 3);
	assert_true(z > 0);
	assert_int_equal(pp_strtab_intern(&t, "x\0y", 3), z);
	assert_int_not_equal(pp_strtab_intern(&t, "x\0z", 3), z);
	pp_strtab_free(&t);
}

/* Bytes that are not UTF-8 are interned as their repair: two that repair
 * alike are one string; a table of bytes keeps them exact. */
static void test_strtab_utf8(void **state)
{
	struct pp_strtab t;
	(void)state;
	assert_int_equal(pp_strtab_init(&t), 0);
	int64_t i = pp_strtab_intern(&t,
	                             "a\xff"
	                             "b",
	                             3);
	assert_true(i > 0);
	assert_string_equal(pp_strtab_get(&t, (size_t)i),
	                    "a" PP_UTF8_REPLACEMENT "b");
	assert_int_equal(pp_strtab_intern(&t,
	                                  "a\xfe"
	                                  "b",
	                                  3),
	                 i);
	assert_int_equal(pp_strtab_add(&t, "a" PP_UTF8_REPLACEMENT "b"), i);
	/* A cut character: one replacement, the rest kept. */
	i = pp_strtab_add(&t, "worker-\xe2\x82");
	assert_string_equal(pp_strtab_get(&t, (size_t)i),
	                    "worker-" PP_UTF8_REPLACEMENT);
	/* Valid text is stored as it is. */
	i = pp_strtab_add(&t, "caf\xc3\xa9");
	assert_string_equal(pp_strtab_get(&t, (size_t)i), "caf\xc3\xa9");
	pp_strtab_free(&t);

	assert_int_equal(pp_strtab_init(&t), 0);
	t.bytes = 1;
	int64_t x = pp_strtab_intern(&t, "\x01\xff\x80", 3);
	int64_t y = pp_strtab_intern(&t, "\x01\xfe\x80", 3);
	assert_true(x > 0 && y > 0 && x != y);
	assert_memory_equal(pp_strtab_get(&t, (size_t)x), "\x01\xff\x80", 3);
	pp_strtab_free(&t);
}

static void test_u64map(void **state)
{
	struct pp_u64map m = {0};
	int ins;
	(void)state;
	assert_null(pp_u64map_get(&m, 5));
	for (uint64_t k = 0; k < 100000; k++)
		*pp_u64map_put(&m, k * 7919, &ins) = k + 1;
	assert_int_equal(m.len, 100000);
	for (uint64_t k = 0; k < 100000; k += 13)
		assert_int_equal(*pp_u64map_get(&m, k * 7919), k + 1);
	assert_null(pp_u64map_get(&m, 1));
	*pp_u64map_put(&m, 0, &ins) += 1;
	assert_int_equal(ins, 0);
	assert_int_equal(*pp_u64map_get(&m, 0), 2);
	pp_u64map_free(&m);
}

/* The bounds a caller takes before it inserts (merge.c's memory limit):
 * what a map or table would hold after n more is never less than what it
 * holds once they are in, and is what it holds now for none. */
static void test_bytes_with(void **state)
{
	struct pp_u64map m = {0};
	struct pp_strtab t;
	int ins;
	(void)state;
	assert_int_equal(pp_u64map_bytes(&m), 0);
	assert_int_equal(pp_u64map_bytes_with(&m, 0), 0);
	for (size_t n = 1; n < 5000; n += n / 3 + 1) {
		size_t before = pp_u64map_bytes_with(&m, n);
		size_t len = m.len;
		for (uint64_t k = 0; k < n; k++)
			pp_u64map_put(&m, (len + k) * 31 + 1, &ins);
		assert_true(pp_u64map_bytes(&m) <= before);
		/* Doubling: never more than twice what is needed. */
		assert_true(pp_u64map_bytes(&m) * 2 >= before);
		assert_int_equal(pp_u64map_bytes_with(&m, 0),
		                 pp_u64map_bytes(&m));
	}
	pp_u64map_free(&m);

	assert_int_equal(pp_strtab_init(&t), 0);
	assert_int_equal(pp_strtab_count(&t), 1);
	assert_int_equal(pp_strtab_length(&t, 0), 0);
	assert_int_equal(pp_strtab_bytes_with(&t, 0, 0), pp_strtab_bytes(&t));
	size_t total = 1;
	for (size_t n = 1; n < 3000; n += n / 2 + 1) {
		char s[32];
		size_t room = 0;
		for (size_t k = 0; k < n; k++) {
			snprintf(s, sizeof s, "string %zu", total + k);
			room += pp_strtab_room(strlen(s));
		}
		size_t before = pp_strtab_bytes_with(&t, n, room);
		for (size_t k = 0; k < n; k++) {
			snprintf(s, sizeof s, "string %zu", total + k);
			assert_int_equal(pp_strtab_add(&t, s), total + k);
			assert_int_equal(pp_strtab_length(&t, total + k),
			                 strlen(s));
		}
		total += n;
		assert_int_equal(pp_strtab_count(&t), total);
		assert_true(pp_strtab_bytes(&t) <= before);
	}
	/* An existing string costs nothing, but the bound cannot know. */
	assert_int_equal(pp_strtab_add(&t, "string 1"), 1);
	assert_int_equal(pp_strtab_count(&t), total);
	pp_strtab_free(&t);
}

static const struct pp_value_type two[] = {{"samples", "count"},
                                           {"cpu", "nanoseconds"}};

static void test_model_aggregation(void **state)
{
	struct pp_profile *p = pp_profile_new(two, 2, &two[1], 1000);
	uintptr_t a[] = {1, 2, 3}, b[] = {1, 2, 4};
	int64_t v[] = {1, 10};
	char key[] = "k", val1[] = "v1", val1b[] = "v1";
	struct pp_label l1 = {key, val1, 0, NULL}, l1b = {"k", val1b, 0, NULL};
	struct pp_label n1 = {"bytes", NULL, 64, "bytes"};
	struct pp_label n2 = {"bytes", NULL, 128, "bytes"};
	(void)state;

	assert_non_null(p);
	assert_int_equal(pp_profile_add(p, a, 3, v, NULL, 0), 0);
	assert_int_equal(pp_profile_add(p, a, 3, v, NULL, 0), 0);
	assert_int_equal(p->nsamples, 1);
	assert_int_equal(p->first->values[0], 2);
	assert_int_equal(p->first->values[1], 20);
	assert_int_equal(pp_profile_add(p, b, 3, v, NULL, 0), 0);
	assert_int_equal(pp_profile_add(p, a, 2, v, NULL, 0), 0); /* prefix */
	assert_int_equal(p->nsamples, 3);
	/* Same stack, labels: equal by content, not by pointer. */
	assert_int_equal(pp_profile_add(p, a, 3, v, &l1, 1), 0);
	assert_int_equal(pp_profile_add(p, a, 3, v, &l1b, 1), 0);
	assert_int_equal(p->nsamples, 4);
	assert_int_equal(p->last->values[0], 2);
	assert_int_equal(pp_profile_add(p, a, 3, v, &n1, 1), 0);
	assert_int_equal(pp_profile_add(p, a, 3, v, &n2, 1), 0);
	assert_int_equal(pp_profile_add(p, a, 3, v, &n1, 1), 0);
	assert_int_equal(p->nsamples, 6);
	/* The model keeps its own copy of label strings. */
	strcpy(val1, "zz");
	assert_string_equal(p->first->next->next->next->labels[0].str, "v1");
	/* Empty stacks are samples too. */
	assert_int_equal(pp_profile_add(p, NULL, 0, v, NULL, 0), 0);
	assert_int_equal(pp_profile_add(p, NULL, 0, v, NULL, 0), 0);
	assert_int_equal(p->nsamples, 7);
	assert_int_equal(p->last->values[0], 2);

	assert_int_equal(pp_profile_set_default_type(p, "cpu"), 0);
	assert_int_equal(p->default_type, 1);
	assert_int_equal(pp_profile_set_default_type(p, "nope"), -EINVAL);
	assert_int_equal(p->default_type, 1);
	pp_profile_free(p);
}

static void test_model_100k(void **state)
{
	struct pp_profile *p = pp_profile_new(two, 2, &two[1], 1000);
	uintptr_t pcs[30];
	int64_t v[] = {1, 1000};
	(void)state;

	for (int round = 0; round < 2; round++) {
		for (uintptr_t i = 0; i < 100000; i++) {
			for (int d = 0; d < 30; d++)
				pcs[d] =
				    0x1000 + (i * 31 + (uintptr_t)d) % 4096;
			pcs[0] = i;
			assert_int_equal(pp_profile_add(p, pcs, 30, v, NULL, 0),
			                 0);
		}
	}
	assert_int_equal(p->nsamples, 100000);
	int64_t total = 0;
	size_t n = 0;
	for (struct pp_sample *s = p->first; s; s = s->next, n++) {
		assert_int_equal(s->values[0], 2);
		total += s->values[1];
	}
	assert_int_equal(n, 100000);
	assert_int_equal(total, 200000 * 1000LL);
	/* Render without symbols: addresses only, but a whole profile. */
	struct pp_buf out = {0};
	assert_int_equal(pp_pprof_render(p, NULL, 1, &out), 0);
	assert_true(out.len > 1000);
	pp_buf_free(&out);
	pp_profile_free(p);
}

/* A profile of named frames without a symbol table: synthetic PCs. */
static struct pp_profile *named_profile(uintptr_t *a, uintptr_t *b,
                                        uintptr_t *c)
{
	static const struct pp_value_type t[] = {{"samples", "count"},
	                                         {"cpu", "nanoseconds"}};
	struct pp_profile *p = pp_profile_new(t, 2, &t[1], 10000000);
	assert_non_null(p);
	a[0] = pp_profile_synthetic_pc(p, "leaf");
	a[1] = pp_profile_synthetic_pc(p, "mid;dle");
	a[2] = pp_profile_synthetic_pc(p, "root");
	b[0] = 0x7f0000001000; /* an address nobody can name */
	b[1] = a[2];
	c[0] = a[0];
	c[1] = a[1];
	c[2] = a[2];
	return p;
}

static char *render(const struct pp_profile *p, enum pp_format f, int index)
{
	struct pp_view v;
	struct pp_buf out = {0};
	struct pp_render_opts o = {.format = f, .sample_index = index};
	assert_int_equal(pp_view_build(&v, p, NULL), 0);
	switch (f) {
	case PP_FORMAT_FOLDED:
		assert_int_equal(pp_folded_write(&v, &o, &out), 0);
		break;
	case PP_FORMAT_TEXT:
		assert_int_equal(pp_text_write(&v, &o, &out), 0);
		break;
	default: assert_int_equal(pp_json_write(&v, &out), 0); break;
	}
	pp_view_free(&v);
	size_t len;
	char *s = pp_buf_take(&out, &len);
	assert_non_null(s);
	return s;
}

static void test_folded(void **state)
{
	uintptr_t a[3], b[2], c[3];
	struct pp_profile *p = named_profile(a, b, c);
	int64_t v1[] = {2, 20000000}, v2[] = {3, 30000000}, v0[] = {0, 0};
	(void)state;

	assert_int_equal(pp_profile_add(p, a, 3, v1, NULL, 0), 0);
	assert_int_equal(pp_profile_add(p, b, 2, v2, NULL, 0), 0);
	/* Same frames, another sample (a label): folds into one line. */
	struct pp_label l = {"k", "v", 0, NULL};
	assert_int_equal(pp_profile_add(p, c, 3, v1, &l, 1), 0);
	assert_int_equal(pp_profile_add(p, a, 1, v0, NULL, 0), 0);
	char *s = render(p, PP_FORMAT_FOLDED, -1);
	/* Root first, ';' in a name made ':', sorted, zero lines left out. */
	assert_string_equal(s, "root;0x7f0000001000 30000000\n"
	                       "root;mid:dle;leaf 40000000\n");
	free(s);
	s = render(p, PP_FORMAT_FOLDED, 0);
	assert_string_equal(s, "root;0x7f0000001000 3\n"
	                       "root;mid:dle;leaf 4\n");
	free(s);
	pp_profile_free(p);
}

static void test_text(void **state)
{
	uintptr_t a[3], b[2], c[3];
	struct pp_profile *p = named_profile(a, b, c);
	int64_t v1[] = {1, 10000000}, v2[] = {3, 30000000};
	(void)state;

	/* root -> root -> leaf: recursion counts once in cum. */
	uintptr_t rec[] = {a[0], a[2], a[2]};
	assert_int_equal(pp_profile_add(p, rec, 3, v1, NULL, 0), 0);
	assert_int_equal(pp_profile_add(p, b, 2, v2, NULL, 0), 0);
	pp_profile_set_time(p, 0, 1000000000);
	char *s = render(p, PP_FORMAT_TEXT, -1);
	assert_non_null(strstr(s, "Type: cpu (nanoseconds)\n"));
	assert_non_null(
	    strstr(s, "Duration: 1.00s, Total cpu = 40.00ms (4.00% of the "
	              "duration) in 2 stacks\n"));
	assert_non_null(strstr(s, "Period: 10.00ms of cpu\n"));
	/* By flat: the unknown address (30 ms), then leaf (10 ms). */
	assert_non_null(strstr(s, "   30.00ms  75.00%  75.00%    30.00ms  "
	                          "75.00%  0x7f0000001000\n"
	                          "   10.00ms  25.00% 100.00%    10.00ms  "
	                          "25.00%  leaf\n"));
	/* By cum: root first, 100% (not 125%: counted once per sample). */
	assert_non_null(
	    strstr(s, "   40.00ms 100.00%          0   0.00%  root\n"));
	free(s);
	pp_profile_free(p);
}

static void test_json(void **state)
{
	uintptr_t a[3], b[2], c[3];
	struct pp_profile *p = named_profile(a, b, c);
	int64_t v1[] = {1, 10000000};
	(void)state;

	assert_int_equal(pp_profile_add(p, b, 2, v1, NULL, 0), 0);
	char *s = render(p, PP_FORMAT_JSON, -1);
	assert_non_null(
	    strstr(s, "\"locations\":[{\"address\":\"0x7f0000001000\","
	              "\"mapping\":-1,\"lines\":[]},{\"address\":\"\","
	              "\"mapping\":-1,\"lines\":[{\"function\":0,\"line\":0}]"
	              "}],\"samples\":[{\"locations\":[0,1],\"values\":[1,"
	              "10000000]}],\"totals\":[1,10000000]"));
	assert_non_null(strstr(s, "\"default_sample_type\":1,"));
	free(s);
	pp_profile_free(p);
}

/* A label, a comment and a synthetic frame from outside reach every
 * renderer as text. */
static void test_model_utf8(void **state)
{
	static const struct pp_value_type t[] = {{"samples", "count"}};
	struct pp_profile *p = pp_profile_new(t, 1, NULL, 0);
	struct pp_label l = {"thread_name", "\xff\xfe\x80\xc3(", 0, NULL};
	int64_t v[] = {1};
	(void)state;
	assert_non_null(p);
	uintptr_t pc = pp_profile_synthetic_pc(p, "frame-\xf0\x9f\x98");
	assert_int_equal(pp_profile_add_comment(p, "note \xc0"), 0);
	assert_int_equal(pp_profile_add(p, &pc, 1, v, &l, 1), 0);
	assert_string_equal(p->first->labels[0].str,
	                    PP_UTF8_REPLACEMENT PP_UTF8_REPLACEMENT
	                        PP_UTF8_REPLACEMENT PP_UTF8_REPLACEMENT "(");
	const enum pp_format formats[] = {PP_FORMAT_JSON, PP_FORMAT_TEXT,
	                                  PP_FORMAT_FOLDED};
	for (size_t f = 0; f < 3; f++) {
		char *s = render(p, formats[f], -1);
		assert_true(pp_utf8_valid(s, strlen(s)));
		assert_non_null(strstr(s, "frame-" PP_UTF8_REPLACEMENT));
		free(s);
	}
	pp_profile_free(p);
}

/* A mapping's path stays the bytes to open; its name is the text. */
static void test_mapping_names(void **state)
{
	static const char maps[] =
	    "7f0000000000-7f0000001000 r-xp 00000000 08:01 1 /lib/ok.so\n"
	    "7f0000002000-7f0000003000 r-xp 00000000 08:01 2 /tmp/b\xff\xfe"
	    "\xc3.so\n";
	struct pp_mappings m;
	(void)state;
	assert_int_equal(pp_mappings_parse(maps, sizeof maps - 1, NULL, 0, &m,
	                                   NULL, 0, NULL),
	                 0);
	assert_int_equal(m.n, 2);
	assert_ptr_equal(m.v[0].name, m.v[0].path);
	assert_string_equal(m.v[1].path, "/tmp/b\xff\xfe\xc3.so");
	assert_string_equal(
	    m.v[1].name,
	    "/tmp/b" PP_UTF8_REPLACEMENT PP_UTF8_REPLACEMENT PP_UTF8_REPLACEMENT
	    ".so");
	pp_mappings_free(&m);
}

static void test_legacy(void **state)
{
	uintptr_t a[3], b[2], c[3];
	struct pp_profile *p = named_profile(a, b, c);
	int64_t v1[] = {5, 50000000}, v0[] = {0, 0};
	struct pp_buf out = {0};
	(void)state;

	assert_int_equal(pp_profile_add(p, b, 2, v1, NULL, 0), 0);
	assert_int_equal(pp_profile_add(p, a, 3, v0, NULL, 0), 0);
	assert_int_equal(pp_legacy_write(p, &out), 0);
	uint64_t want[] = {0, 3, 0, 10000, 0, 5, 2, b[0], b[1], 0, 1, 0};
	assert_true(out.len > sizeof want);
	assert_memory_equal(out.data, want, sizeof want);
	/* Then /proc/self/maps. */
	assert_non_null(strstr(out.data + sizeof want, "[stack]"));
	pp_buf_free(&out);
	pp_profile_free(p);

	/* A profile without a count value has no legacy form. */
	static const struct pp_value_type h[] = {{"inuse_space", "bytes"}};
	p = pp_profile_new(h, 1, &h[0], 512);
	assert_int_equal(pp_legacy_write(p, &out), -EINVAL);
	pp_buf_free(&out);
	pp_profile_free(p);
}

static void test_size_limit(void **state)
{
	static const struct pp_value_type t[] = {{"samples", "count"}};
	struct pp_profile *p = pp_profile_new(t, 1, NULL, 0);
	int64_t one = 1, total = 0;
	(void)state;

	assert_non_null(p);
	p->max_bytes = 256 * 1024;
	for (uintptr_t i = 0; i < 100000; i++) {
		uintptr_t pcs[8] = {0x400000 + i, 0x500000, 0x600000 + i % 7};
		assert_int_equal(pp_profile_add(p, pcs, 8, &one, NULL, 0), 0);
		total++;
	}
	/* Bounded (one arena chunk past the bound at most), every value
	 * kept, the rest on the limit frame. */
	assert_true(pp_profile_bytes(p) < p->max_bytes + 128 * 1024);
	assert_true(p->over_limit > 0);
	assert_true(p->nsamples < 100000);
	int64_t sum = 0, limit = 0;
	for (const struct pp_sample *s = p->first; s; s = s->next) {
		sum += s->values[0];
		if (s->depth == 1 && pp_profile_synthetic_name(p, s->pcs[0]))
			limit += s->values[0];
	}
	assert_int_equal(sum, total);
	assert_int_equal(limit, (int64_t)p->over_limit);
	pp_profile_free(p);
}

static void test_recent(void **state)
{
	uint64_t ids[PP_RECENT_MAX + 1];
	char err[200];
	(void)state;

	for (int i = 0; i <= PP_RECENT_MAX; i++) {
		static const struct pp_value_type t[] = {{"samples", "count"}};
		ids[i] =
		    pp_recent_add("profile", pp_profile_new(t, 1, NULL, 0));
		assert_true(ids[i] > 0);
	}
	/* The oldest went; a kind must match. */
	assert_null(pp_recent_get(ids[0], "profile", err, sizeof err));
	assert_null(pp_recent_get(ids[1], "heap", err, sizeof err));
	assert_non_null(strstr(err, "no heap profile"));
	struct pp_recent *r = pp_recent_get(ids[1], "profile", err, sizeof err);
	assert_non_null(r);
	/* Referenced entries outlive a clear. */
	pp_recent_clear();
	assert_null(pp_recent_get(ids[2], "profile", err, sizeof err));
	assert_int_equal(pp_recent_profile(r)->ntypes, 1);
	pp_recent_unref(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_varints),
	    cmocka_unit_test(test_fields),
	    cmocka_unit_test(test_packed),
	    cmocka_unit_test(test_nested),
	    cmocka_unit_test(test_gzip_stream),
	    cmocka_unit_test(test_strtab),
	    cmocka_unit_test(test_strtab_utf8),
	    cmocka_unit_test(test_model_utf8),
	    cmocka_unit_test(test_mapping_names),
	    cmocka_unit_test(test_u64map),
	    cmocka_unit_test(test_bytes_with),
	    cmocka_unit_test(test_model_aggregation),
	    cmocka_unit_test(test_model_100k),
	    cmocka_unit_test(test_folded),
	    cmocka_unit_test(test_text),
	    cmocka_unit_test(test_json),
	    cmocka_unit_test(test_legacy),
	    cmocka_unit_test(test_size_limit),
	    cmocka_unit_test(test_recent),
	};
	return cmocka_run_group_tests_name("profile", tests, NULL, NULL);
}

/* Unit tests: the allocators' own heap dumps (src/heap/foreign.c) —
 * jemalloc's heap_v2 and gperftools' heap profile text parsed into rows,
 * every malformed line refused with its line number, the names of the
 * allocator's frames, and the unsampled model. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "heap/foreign.h"

static const char jemalloc_dump[] =
    "heap_v2/524288\n"
    "  t*: 983: 42007458 [0: 0]\n"
    "  t0: 530: 13021683 [0: 0]\n"
    "  t1: 453: 28985775 [0: 0]\n"
    "@ 0x55d0a1 0x55d0b2 0x7f0001\n"
    "  t*: 530: 13021683 [7: 700]\n"
    "  t0: 530: 13021683 [7: 700]\n"
    "@ 0x55d0a1 0x55d0c3\n"
    "  t*: 453: 28985775 [0: 0]\n"
    "  t1: 453: 28985775 [0: 0]\n"
    "\n"
    "MAPPED_LIBRARIES:\n"
    "55d000000000-55d000001000 r-xp 00000000 fe:00 1 /x\n";

static void test_jemalloc(void **state)
{
	(void)state;
	struct pp_foreign_dump d;
	char err[200];
	assert_int_equal(pp_foreign_parse_jemalloc(jemalloc_dump,
	                                           strlen(jemalloc_dump), &d,
	                                           err, sizeof err),
	                 0);
	assert_int_equal(d.period, 524288);
	assert_int_equal(d.n, 2);
	assert_int_equal(d.rows[0].depth, 3);
	assert_int_equal(d.rows[0].inuse_objs, 530);
	assert_int_equal(d.rows[0].inuse_bytes, 13021683);
	assert_int_equal(d.rows[0].alloc_objs, 7);
	assert_int_equal(d.rows[0].alloc_bytes, 700);
	assert_int_equal(d.pcs[d.rows[0].first + 2], 0x7f0001);
	assert_int_equal(d.rows[1].depth, 2);
	assert_int_equal(d.pcs[d.rows[1].first + 1], 0x55d0c3);
	assert_int_equal(d.rows[1].inuse_bytes, 28985775);
	/* Cumulative counts somewhere: kept. */
	assert_true(d.has_alloc);
	pp_foreign_dump_free(&d);
}

static const char gperf_dump[] =
    "heap profile:    3:   300000 [    5:   500000] @ heap_v2/524288\n"
    "     2:   200000 [     3:   300000] @ 0x401000 0x402000\n"
    "     1:   100000 [     2:   200000] @ 0x403000\n"
    "\n"
    "MAPPED_LIBRARIES:\n";

static void test_gperftools(void **state)
{
	(void)state;
	struct pp_foreign_dump d;
	char err[200];
	assert_int_equal(pp_foreign_parse_gperftools(gperf_dump,
	                                             strlen(gperf_dump), &d,
	                                             err, sizeof err),
	                 0);
	assert_int_equal(d.period, 524288);
	assert_true(d.has_alloc);
	assert_int_equal(d.n, 2);
	assert_int_equal(d.rows[0].inuse_objs, 2);
	assert_int_equal(d.rows[0].alloc_bytes, 300000);
	assert_int_equal(d.rows[0].depth, 2);
	assert_int_equal(d.pcs[d.rows[1].first], 0x403000);
	pp_foreign_dump_free(&d);

	/* The full heap profiler: every allocation, nothing to unsample. */
	const char full[] = "heap profile: 1: 10 [ 1: 10] @ heapprofile\n"
	                    "1: 10 [ 1: 10] @ 0x1234\n";
	assert_int_equal(pp_foreign_parse_gperftools(full, strlen(full), &d,
	                                             err, sizeof err),
	                 0);
	assert_int_equal(d.period, 0);
	assert_int_equal(d.n, 1);
	pp_foreign_dump_free(&d);
}

/* Each malformed text is refused, naming its line. */
static void test_malformed(void **state)
{
	(void)state;
	static const struct {
		const char *text;
		int jemalloc;
		const char *line;
	} bad[] = {
	    {"", 1, "line 0"},
	    {"heap_v3/524288\n", 1, "line 1"},
	    {"heap_v2/\n", 1, "line 1"},
	    {"heap_v2/512\n@ 0x1 zz\n", 1, "line 2"},
	    {"heap_v2/512\n@ 0x1\n  t*: 1: 2 [3: 4\n", 1, "line 3"},
	    {"heap_v2/512\n@ 0x1\n  t*: 1 2 [3: 4]\n", 1, "line 3"},
	    {"heap_v2/512\n@ 0x1\nsomething else\n", 1, "line 3"},
	    {"heap_v2/512\n@ 0x99999999999999999999\n", 1, "line 2"},
	    {"heap profile: 1: 2 [3: 4] @ heap_v2/0\n", 0, "line 1"},
	    {"heap profile: 1: 2 [3: 4] @ cpu\n", 0, "line 1"},
	    {"heap profile: 1: 2 [3: 4] @ heap_v2/8\n1: 2 [3: 4] 0x1\n", 0,
	     "line 2"},
	    {"heap profile: 1: 2 [3: 4] @ heap_v2/8\n1: 2 @ 0x1\n", 0,
	     "line 2"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct pp_foreign_dump d;
		char err[200] = "";
		int rc = bad[i].jemalloc
		             ? pp_foreign_parse_jemalloc(bad[i].text,
		                                         strlen(bad[i].text),
		                                         &d, err, sizeof err)
		             : pp_foreign_parse_gperftools(bad[i].text,
		                                           strlen(bad[i].text),
		                                           &d, err, sizeof err);
		if (rc != -EINVAL || !strstr(err, bad[i].line))
			fail_msg("case %zu: rc %d, err \"%s\"", i, rc, err);
		assert_null(d.rows);
		assert_null(d.pcs);
	}
}

/* Arbitrary bytes never crash the parsers (a cheap fuzz: prefixes of the
 * good dumps and single-byte changes). */
static void test_mutations(void **state)
{
	(void)state;
	const char *texts[] = {jemalloc_dump, gperf_dump};
	for (int t = 0; t < 2; t++) {
		size_t n = strlen(texts[t]);
		char *buf = malloc(n);
		for (size_t cut = 0; cut <= n; cut++)
			for (int b = 0; b < 3; b++) {
				memcpy(buf, texts[t], n);
				if (cut < n)
					buf[cut] = "x:\n"[b];
				struct pp_foreign_dump d;
				char err[200];
				int rc =
				    t == 0 ? pp_foreign_parse_jemalloc(
				                 buf, cut, &d, err, sizeof err)
				           : pp_foreign_parse_gperftools(
				                 buf, cut, &d, err, sizeof err);
				assert_true(rc == 0 || rc == -EINVAL);
				for (size_t i = 0; rc == 0 && i < d.n; i++)
					assert_true(d.rows[i].first +
					                d.rows[i].depth <=
					            d.npcs);
				pp_foreign_dump_free(&d);
			}
		free(buf);
	}
}

static void test_allocator_frames(void **state)
{
	(void)state;
	const char *yes[] = {"malloc",
	                     "je_malloc_default",
	                     "prof_backtrace_impl",
	                     "je_prof_tctx_create",
	                     "_rjem_malloc",
	                     "imalloc_body",
	                     "calloc",
	                     "tcmalloc::ThreadCache::FetchFromCentralCache("
	                     "unsigned int, int, void* (*)(unsigned long))",
	                     "tc_malloc",
	                     "operator new(unsigned long)",
	                     "_Znwm",
	                     "__libc_malloc",
	                     "posix_memalign",
	                     "MallocHook::InvokeNewHookSlow(void const*, "
	                     "unsigned long)"};
	const char *no[] = {"main",      "jh_site_a", "strdup",     "mallocate",
	                    "my_malloc", "zmalloc",   "ngx_palloc", NULL};
	for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
		if (!pp_foreign_is_allocator_frame(yes[i]))
			fail_msg("%s: not an allocator frame", yes[i]);
	for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
		if (pp_foreign_is_allocator_frame(no[i]))
			fail_msg("%s: an allocator frame",
			         no[i] ? no[i] : "NULL");
}

/* Unsampled per stack by its mean size, as jeprof does. */
static void test_model(void **state)
{
	(void)state;
	struct pp_foreign_dump d;
	char err[200];
	struct pp_profile *p;
	assert_int_equal(pp_foreign_parse_jemalloc(jemalloc_dump,
	                                           strlen(jemalloc_dump), &d,
	                                           err, sizeof err),
	                 0);
	d.has_alloc = 0;
	assert_int_equal(pp_foreign_model(&d, "note", 0, 0, &p), 0);
	assert_int_equal(p->ntypes, 2);
	int64_t bytes = 0, objs = 0;
	for (struct pp_sample *s = p->first; s; s = s->next) {
		objs += s->values[0];
		bytes += s->values[1];
	}
	double want = 0, wanto = 0;
	const double rows[2][2] = {{530, 13021683}, {453, 28985775}};
	for (int i = 0; i < 2; i++) {
		double scale =
		    1 / -expm1(-(rows[i][1] / rows[i][0]) / 524288.0);
		want += llround(rows[i][1] * scale);
		wanto += llround(rows[i][0] * scale);
	}
	assert_int_equal(bytes, (int64_t)want);
	assert_int_equal(objs, (int64_t)wanto);
	pp_profile_free(p);
	pp_foreign_dump_free(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_jemalloc),
	    cmocka_unit_test(test_gperftools),
	    cmocka_unit_test(test_malformed),
	    cmocka_unit_test(test_mutations),
	    cmocka_unit_test(test_allocator_frames),
	    cmocka_unit_test(test_model),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

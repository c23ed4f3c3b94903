/* Unit tests: the heap profiler's tables (live table with backward-shift
 * deletion, buckets, the free filter, the lazy peak), the pools' ordered
 * index and its records apart from malloc's, and the unsampling factor,
 * driven directly with made-up addresses and stacks. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "heap/pool_index.h"
#include "heap/table.h"
#include "pullprof.h"
#include "shim/heap_hot.h"
#include "unwind/unwind.h"

#define N 100000

/* Made-up block addresses: 48 bytes apart, like a small-object heap. */
static void *addr(size_t i)
{
	return (void *)(uintptr_t)(0x7f0000000000ull + i * 48);
}

static size_t filter_bits(void)
{
	size_t n = 0;
	for (size_t i = 0; i < PP_HEAP_FILTER_BITS / 64; i++)
		n += (size_t)__builtin_popcountll(pp_heap_filter[i]);
	return n;
}

static void record(size_t i, size_t size)
{
	uintptr_t pcs[3] = {0x401000 + i % 7, 0x402000, 0x403000};
	assert_int_equal(
	    pp_heap_table_record(addr(i), size, pcs, 3, PP_UNWIND_OK, 10, 0, 0),
	    0);
}

static void totals(const struct pp_heap_snapshot *s, uint64_t *allocs,
                   uint64_t *frees)
{
	*allocs = *frees = 0;
	for (size_t i = 0; i < s->n; i++) {
		*allocs += s->rows[i].allocs;
		*frees += s->rows[i].frees;
	}
}

static void test_live_table(void **state)
{
	(void)state;
	size_t bits0 = filter_bits();
	struct pp_heap_stats st;
	struct pp_heap_snapshot snap;
	uint64_t a, f;

	assert_int_equal(pp_heap_table_open(4096), 0);
	for (size_t i = 0; i < N; i++)
		record(i, 64 + (i % 3) * 16);
	for (size_t i = 0; i < N; i++)
		assert_true(pp_heap_filter_hit(addr(i)));
	memset(&st, 0, sizeof st);
	pp_heap_table_stats(&st);
	assert_int_equal(st.sampled, N);
	assert_int_equal(st.live_objects, N);
	assert_int_equal(st.stacks, 7);
	assert_int_equal(st.buckets, 21); /* 7 stacks x 3 sizes */

	/* Free every other one: the rest must still be found (the deletion
	 * must not break probe chains). */
	for (size_t i = 0; i < N; i += 2)
		pp_heap_free_hit(addr(i));
	pp_heap_table_stats(&st);
	assert_int_equal(st.live_objects, N / 2);
	assert_int_equal(st.sampled_freed, N / 2);
	assert_int_equal(st.false_hits, 0);
	/* A second free of the same address is not a sampled free. */
	pp_heap_free_hit(addr(0));
	pp_heap_table_stats(&st);
	assert_int_equal(st.sampled_freed, N / 2);
	assert_int_equal(st.false_hits, 1);

	/* realloc that failed: the record goes back; that succeeded: freed. */
	struct pp_heap_taken t;
	pp_heap_take(addr(1), &t);
	assert_true(t.found);
	pp_heap_table_stats(&st);
	assert_int_equal(st.live_objects, N / 2 - 1);
	pp_heap_settle(&t, 0);
	pp_heap_table_stats(&st);
	assert_int_equal(st.live_objects, N / 2);
	assert_int_equal(st.sampled_freed, N / 2);
	pp_heap_take(addr(1), &t);
	pp_heap_settle(&t, 1);
	pp_heap_table_stats(&st);
	assert_int_equal(st.live_objects, N / 2 - 1);
	assert_int_equal(st.sampled_freed, N / 2 + 1);

	assert_int_equal(pp_heap_table_snapshot(0, 0, &snap), 0);
	totals(&snap, &a, &f);
	assert_int_equal(a, N);
	assert_int_equal(a - f, N / 2 - 1);
	assert_int_equal(snap.rate, 4096);
	free(snap.rows);

	for (size_t i = 3; i < N; i += 2)
		pp_heap_free_hit(addr(i));
	pp_heap_table_stats(&st);
	assert_int_equal(st.live_objects, 0);
	/* Every bit the samples set is clear again. */
	assert_int_equal(filter_bits(), bits0);
	pp_heap_table_close();
	assert_int_equal(filter_bits(), bits0);
}

static void test_null_free(void **state)
{
	(void)state;
	struct pp_heap_stats st;
	struct pp_heap_taken none;

	/* addr(0) starts at a multiple of 16 MiB: it shares its filter bit
	 * with NULL. free(NULL) and realloc(NULL, n) pass the filter then,
	 * and must find nothing (0 marks an empty entry of the live table). */
	assert_int_equal(pp_heap_slot(addr(0)), pp_heap_slot(NULL));
	assert_int_equal(pp_heap_table_open(4096), 0);
	record(0, 64);
	pp_heap_free_hit(NULL);
	pp_heap_take(NULL, &none);
	assert_false(none.found);
	memset(&st, 0, sizeof st);
	pp_heap_table_stats(&st);
	assert_int_equal(st.live_objects, 1);
	assert_int_equal(st.sampled_freed, 0);
	assert_true(pp_heap_filter_hit(addr(0)));
	pp_heap_free_hit(addr(0));
	pp_heap_table_stats(&st);
	assert_int_equal(st.live_objects, 0);
	assert_int_equal(st.sampled_freed, 1);
	pp_heap_table_close();
}

static void test_peak(void **state)
{
	(void)state;
	struct pp_heap_snapshot snap;
	uint64_t a, f;

	assert_int_equal(pp_heap_table_open(1), 0); /* rate 1: exact */
	for (size_t i = 0; i < 1000; i++)
		record(i, 1000);
	for (size_t i = 0; i < 1000; i++)
		pp_heap_free_hit(addr(i));
	for (size_t i = 1000; i < 1100; i++)
		record(i, 1000);

	/* Now 100 live; the peak was 1000 live. */
	assert_int_equal(pp_heap_table_snapshot(1, 0, &snap), 0);
	totals(&snap, &a, &f);
	assert_int_equal(a - f, 1000);
	assert_int_equal(a, 1000);
	assert_true(fabs(snap.peak_bytes - 1000 * 1000.0) < 1);
	free(snap.rows);

	/* Reset: the peak is now what is live. */
	assert_int_equal(pp_heap_table_snapshot(1, 1, &snap), 0);
	free(snap.rows);
	assert_int_equal(pp_heap_table_snapshot(1, 0, &snap), 0);
	totals(&snap, &a, &f);
	assert_int_equal(a - f, 100);
	free(snap.rows);

	/* Below the new peak, it does not move; above, it does. */
	for (size_t i = 1000; i < 1050; i++)
		pp_heap_free_hit(addr(i));
	for (size_t i = 2000; i < 2200; i++)
		record(i, 1000);
	pp_heap_free_hit(addr(2000));
	assert_int_equal(pp_heap_table_snapshot(1, 0, &snap), 0);
	totals(&snap, &a, &f);
	assert_int_equal(a - f, 250);
	free(snap.rows);
	pp_heap_table_close();
}

/* The ordered index against a plain array: random puts, takes and range
 * takes, in address order, with every walk checked. */
static uintptr_t ref[4096];
static size_t nref;
static uintptr_t seen[4096];
static size_t nseen;

static void note(uintptr_t p, uint32_t bucket, void *arg)
{
	(void)arg;
	assert_int_equal(bucket, (uint32_t)(p >> 4));
	seen[nseen++] = p;
}

static size_t ref_find(uintptr_t p)
{
	for (size_t i = 0; i < nref; i++)
		if (ref[i] == p)
			return i;
	return nref;
}

static void test_pool_index(void **state)
{
	(void)state;
	struct pp_pool_index x;
	uint32_t rng = 12345, b;
	memset(&x, 0, sizeof x);
	nref = 0;
	for (int round = 0; round < 200000; round++) {
		rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
		/* 1024 addresses, increasing as a bump pointer's. */
		uintptr_t p = 0x10000 + (uintptr_t)(rng % 1024) * 16;
		unsigned op = (rng >> 20) % 16;
		size_t at = ref_find(p);
		if (op < 8) {
			uint32_t old = 0;
			int rc =
			    pp_pool_index_put(&x, p, (uint32_t)(p >> 4), &old);
			assert_int_equal(rc, at < nref ? 1 : 0);
			if (at == nref)
				ref[nref++] = p;
			else
				assert_int_equal(old, (uint32_t)(p >> 4));
		} else if (op < 15) {
			int rc = pp_pool_index_take(&x, p, &b);
			assert_int_equal(rc, at < nref ? 0 : -ENOENT);
			if (at < nref) {
				assert_int_equal(b, (uint32_t)(p >> 4));
				ref[at] = ref[--nref];
			}
		} else {
			uintptr_t hi = p + 16 * ((rng >> 8) % 64);
			size_t want = 0;
			uintptr_t last = 0;
			for (size_t i = 0; i < nref; i++)
				want += ref[i] >= p && ref[i] < hi;
			nseen = 0;
			assert_int_equal(
			    pp_pool_index_take_range(&x, p, hi, note, NULL),
			    want);
			assert_int_equal(nseen, want);
			for (size_t i = 0; i < nseen; i++) {
				assert_true(seen[i] > last); /* in order */
				last = seen[i];
				size_t k = ref_find(seen[i]);
				assert_true(k < nref);
				ref[k] = ref[--nref];
			}
		}
		assert_int_equal(x.n, nref);
	}
	/* Everything left, in one range. */
	nseen = 0;
	assert_int_equal(
	    pp_pool_index_take_range(&x, 1, UINTPTR_MAX, note, NULL), nref);
	assert_int_equal(x.n, 0);
	assert_true(pp_pool_index_bytes(&x) > 0);
	pp_pool_index_free(&x);
	assert_int_equal(pp_pool_index_bytes(&x), 0);
}

static void record_pool(uintptr_t p, size_t size)
{
	uintptr_t pcs[2] = {0x501000, 0x502000};
	assert_int_equal(pp_heap_table_record((void *)p, size, pcs, 2,
	                                      PP_UNWIND_OK, 0, 0, 1),
	                 0);
}

/* A pool inside a malloc block: the two kinds of record at one address
 * never take each other out; a release takes the pool's and leaves
 * malloc's; everything comes back to where it started. */
static void test_pool_records(void **state)
{
	(void)state;
	struct pp_heap_stats st;
	struct pp_heap_pool_stats ps;
	size_t bits0 = filter_bits();
	uintptr_t chunk = 0x7e0000001000ull;

	assert_int_equal(pp_heap_table_open(1), 0);
	/* The chunk, sampled as malloc's, and pool blocks from its start. */
	uintptr_t pcs[1] = {0x401000};
	assert_int_equal(pp_heap_table_record((void *)chunk, 65536, pcs, 1,
	                                      PP_UNWIND_OK, 0, 0, 0),
	                 0);
	for (uintptr_t i = 0; i < 100; i++)
		record_pool(chunk + i * 64, 64);
	memset(&st, 0, sizeof st);
	pp_heap_table_stats(&st);
	assert_int_equal(st.live_objects, 101);
	assert_true(pp_heap_filter_hit((void *)(chunk + 99 * 64)));

	/* A pool free of the chunk's address takes the pool block only. */
	pp_heap_pool_free_hit((void *)chunk);
	pp_heap_pool_free_hit((void *)chunk); /* twice: ignored */
	pp_heap_table_stats(&st);
	assert_int_equal(st.live_objects, 100);
	assert_int_equal(st.false_hits, 1);
	/* Reported again where one still is: replaced, counted freed. */
	record_pool(chunk + 64, 64);
	pp_heap_table_pool_stats(&ps);
	assert_int_equal(ps.replaced, 1);
	assert_int_equal(ps.live, 99);
	/* A release of half the chunk, then malloc's free of the chunk: the
	 * other half's pool records stay. */
	pp_heap_pool_release(chunk, chunk + 50 * 64);
	pp_heap_table_pool_stats(&ps);
	assert_int_equal(ps.released, 49);
	assert_int_equal(ps.live, 50);
	pp_heap_free_hit((void *)chunk);
	pp_heap_table_stats(&st);
	assert_int_equal(st.live_objects, 50);
	assert_true(pp_heap_filter_hit((void *)(chunk + 60 * 64)));
	/* A release of a range with nothing in it. */
	pp_heap_pool_release(chunk + (1 << 20), chunk + (2 << 20));
	pp_heap_pool_release(chunk, chunk + 65536);
	pp_heap_table_stats(&st);
	pp_heap_table_pool_stats(&ps);
	assert_int_equal(st.live_objects, 0);
	assert_int_equal(ps.live, 0);
	assert_int_equal(ps.sampled, 101);
	assert_int_equal(ps.freed + ps.released + ps.replaced, 101);
	assert_int_equal(st.sampled_freed, 102);
	assert_int_equal(st.inuse_bytes, 0);
	assert_int_equal(filter_bits(), bits0);
	pp_heap_table_close();
}

/* pullprof_heap_release's own look at the filter (src/shim/pool.c): a
 * range in one word of it, over several, and past its scan, each finding
 * the one block inside and leaving the ones just outside; and free's. */
static void test_pool_release_paths(void **state)
{
	(void)state;
	struct pp_heap_pool_stats ps;
	size_t bits0 = filter_bits();
	/* base + len for each shape; blocks at base - 16, base + len / 2 and
	 * base + len (the first and last outside). */
	const uintptr_t base = 0x7d0000010000ull;
	const size_t lens[] = {512, 4096, 16384, 1 << 20, 64 << 20};

	assert_int_equal(pp_heap_table_open(1), 0);
	for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
		uintptr_t b = base + i * (256ull << 20);
		record_pool(b - 16, 16);
		record_pool(b + lens[i] / 2, 16);
		record_pool(b + lens[i], 16);
		pullprof_heap_release((void *)b, lens[i]);
		pp_heap_table_pool_stats(&ps);
		assert_int_equal(ps.released, i + 1);
		assert_int_equal(ps.live, 2);
		pullprof_heap_release((void *)b, lens[i]); /* again: nothing */
		pullprof_heap_free((void *)(b - 16));
		pullprof_heap_free((void *)(b + lens[i]));
		pullprof_heap_free((void *)(b + lens[i])); /* twice */
		pp_heap_table_pool_stats(&ps);
		assert_int_equal(ps.released, i + 1);
		assert_int_equal(ps.live, 0);
	}
	/* The bad ones. */
	pullprof_heap_release(NULL, 4096);
	pullprof_heap_release((void *)base, 0);
	record_pool(UINTPTR_MAX - 4095, 16);
	pullprof_heap_release((void *)(UINTPTR_MAX - 8191), 1 << 20);
	pp_heap_table_pool_stats(&ps);
	assert_int_equal(ps.live, 0);
	pullprof_heap_free(NULL);
	assert_int_equal(filter_bits(), bits0);
	pp_heap_table_close();
}

static void test_scale(void **state)
{
	(void)state;
	assert_true(pp_heap_scale(100, 1) == 1.0);
	assert_true(pp_heap_scale(0, 4096) == 1.0);
	/* s = rate: sampled with probability 1 - 1/e. */
	assert_true(fabs(pp_heap_scale(524288, 524288) - 1.0 / (1 - exp(-1))) <
	            1e-12);
	/* Tiny blocks: about rate / size. */
	assert_true(fabs(pp_heap_scale(16, 524288) / (524288.0 / 16) - 1) <
	            1e-4);
	/* Huge blocks: always sampled. */
	assert_true(pp_heap_scale(1u << 30, 524288) == 1.0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_live_table),
	    cmocka_unit_test(test_null_free),
	    cmocka_unit_test(test_peak),
	    cmocka_unit_test(test_scale),
	    cmocka_unit_test(test_pool_index),
	    cmocka_unit_test(test_pool_records),
	    cmocka_unit_test(test_pool_release_paths),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

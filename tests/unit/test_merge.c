/* Unit tests: merging pprof profiles of several processes (merge.c), on
 * profiles encoded with the project's encoder (pb.c) and rendered by its
 * renderer (pprof.c), and on truncated and corrupt ones. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "profile/merge.h"
#include "profile/model.h"
#include "profile/pb.h"
#include "profile/pprof.h"
#include "util/strtab.h"

/* ---- a profile described in C, encoded with pb.c ------------------------ */

struct t_fn {
	uint64_t id;
	const char *name, *sys, *file;
	int64_t start;
};
struct t_map {
	uint64_t id, start, limit;
	const char *file, *build_id;
};
struct t_loc {
	uint64_t id, mapping, address;
	uint64_t fn[3];
	int64_t line[3];
	int nlines;
};
struct t_label {
	const char *key, *str;
	int64_t num;
	const char *unit;
};
struct t_sample {
	uint64_t locs[4];
	int nlocs;
	int64_t vals[2];
	struct t_label labels[2];
	int nlabels;
};
struct t_prof {
	const char *types[2][2];
	int ntypes;
	const char *period_type[2];
	int64_t period, time, duration;
	const char *comments[3];
	int ncomments;
	const char *default_type, *drop;
	const struct t_fn *fns;
	int nfns;
	const struct t_map *maps;
	int nmaps;
	const struct t_loc *locs;
	int nlocs;
	const struct t_sample *samples;
	int nsamples;
	int unpacked; /* repeated varints one field each */
	int unknown;  /* unknown fields of every wire type here and there */
};

static int64_t sid(struct pp_strtab *t, const char *s)
{
	return s ? pp_strtab_add(t, s) : 0;
}

static void unknown_fields(struct pp_pb *pb)
{
	pp_pb_uint64(pb, 99, 12345);
	pp_pb_double(pb, 98, 1.5);
	pp_pb_bytes(pb, 97, "junk", 4);
	pp_pb_varint(pb, 96 << 3 | 5); /* fixed32 */
	pp_pb_raw(pb, "\1\2\3\4", 4);
}

static void varints(struct pp_pb *pb, int tag, const uint64_t *v, int n,
                    int unpacked)
{
	if (!unpacked)
		pp_pb_uint64s(pb, tag, v, (size_t)n);
	else
		for (int i = 0; i < n; i++)
			pp_pb_uint64(pb, tag, v[i]);
}

/* The profile as bytes (gzipped at level 1..9, raw at 0); free() them. */
static char *encode(const struct t_prof *p, int level, size_t *len)
{
	struct pp_strtab t;
	struct pp_buf out = {0};
	struct pp_pb pb;
	assert_int_equal(pp_strtab_init(&t), 0);
	assert_int_equal(pp_pb_init(&pb, &out, level), 0);
	for (int i = 0; i < p->ntypes; i++) {
		size_t m = pp_pb_start(&pb);
		pp_pb_int64_opt(&pb, VALUETYPE_TYPE, sid(&t, p->types[i][0]));
		pp_pb_int64_opt(&pb, VALUETYPE_UNIT, sid(&t, p->types[i][1]));
		pp_pb_end(&pb, PROFILE_SAMPLE_TYPE, m);
	}
	if (p->unknown)
		unknown_fields(&pb);
	for (int i = 0; i < p->nsamples; i++) {
		const struct t_sample *s = &p->samples[i];
		size_t m = pp_pb_start(&pb);
		if (p->unknown)
			unknown_fields(&pb);
		varints(&pb, SAMPLE_LOCATION_ID, s->locs, s->nlocs,
		        p->unpacked);
		varints(&pb, SAMPLE_VALUE, (const uint64_t *)s->vals, p->ntypes,
		        p->unpacked);
		for (int k = 0; k < s->nlabels; k++) {
			const struct t_label *l = &s->labels[k];
			size_t lm = pp_pb_start(&pb);
			pp_pb_int64_opt(&pb, LABEL_KEY, sid(&t, l->key));
			pp_pb_int64_opt(&pb, LABEL_STR, sid(&t, l->str));
			pp_pb_int64_opt(&pb, LABEL_NUM, l->num);
			pp_pb_int64_opt(&pb, LABEL_NUM_UNIT, sid(&t, l->unit));
			pp_pb_end(&pb, SAMPLE_LABEL, lm);
		}
		pp_pb_end(&pb, PROFILE_SAMPLE, m);
	}
	for (int i = 0; i < p->nlocs; i++) {
		const struct t_loc *l = &p->locs[i];
		size_t m = pp_pb_start(&pb);
		pp_pb_uint64(&pb, LOCATION_ID, l->id);
		pp_pb_uint64_opt(&pb, LOCATION_MAPPING_ID, l->mapping);
		pp_pb_uint64_opt(&pb, LOCATION_ADDRESS, l->address);
		if (p->unknown)
			unknown_fields(&pb);
		for (int k = 0; k < l->nlines; k++) {
			size_t lm = pp_pb_start(&pb);
			pp_pb_uint64_opt(&pb, LINE_FUNCTION_ID, l->fn[k]);
			pp_pb_int64_opt(&pb, LINE_LINE, l->line[k]);
			pp_pb_end(&pb, LOCATION_LINE, lm);
		}
		pp_pb_end(&pb, PROFILE_LOCATION, m);
	}
	for (int i = 0; i < p->nmaps; i++) {
		const struct t_map *mp = &p->maps[i];
		size_t m = pp_pb_start(&pb);
		pp_pb_uint64(&pb, MAPPING_ID, mp->id);
		pp_pb_uint64_opt(&pb, MAPPING_START, mp->start);
		pp_pb_uint64_opt(&pb, MAPPING_LIMIT, mp->limit);
		pp_pb_int64_opt(&pb, MAPPING_FILENAME, sid(&t, mp->file));
		pp_pb_int64_opt(&pb, MAPPING_BUILD_ID, sid(&t, mp->build_id));
		pp_pb_bool(&pb, MAPPING_HAS_FUNCTIONS, 1);
		pp_pb_end(&pb, PROFILE_MAPPING, m);
	}
	for (int i = 0; i < p->nfns; i++) {
		const struct t_fn *f = &p->fns[i];
		size_t m = pp_pb_start(&pb);
		pp_pb_uint64(&pb, FUNCTION_ID, f->id);
		pp_pb_int64_opt(&pb, FUNCTION_NAME, sid(&t, f->name));
		pp_pb_int64_opt(&pb, FUNCTION_SYSTEM_NAME, sid(&t, f->sys));
		pp_pb_int64_opt(&pb, FUNCTION_FILENAME, sid(&t, f->file));
		pp_pb_int64_opt(&pb, FUNCTION_START_LINE, f->start);
		pp_pb_end(&pb, PROFILE_FUNCTION, m);
	}
	pp_pb_int64_opt(&pb, PROFILE_TIME_NANOS, p->time);
	pp_pb_int64_opt(&pb, PROFILE_DURATION_NANOS, p->duration);
	if (p->period_type[0]) {
		size_t m = pp_pb_start(&pb);
		pp_pb_int64_opt(&pb, VALUETYPE_TYPE,
		                sid(&t, p->period_type[0]));
		pp_pb_int64_opt(&pb, VALUETYPE_UNIT,
		                sid(&t, p->period_type[1]));
		pp_pb_end(&pb, PROFILE_PERIOD_TYPE, m);
	}
	pp_pb_int64_opt(&pb, PROFILE_PERIOD, p->period);
	uint64_t c[3];
	for (int i = 0; i < p->ncomments; i++)
		c[i] = (uint64_t)sid(&t, p->comments[i]);
	varints(&pb, PROFILE_COMMENT, c, p->ncomments, p->unpacked);
	pp_pb_int64_opt(&pb, PROFILE_DEFAULT_SAMPLE_TYPE,
	                sid(&t, p->default_type));
	pp_pb_int64_opt(&pb, PROFILE_DROP_FRAMES, sid(&t, p->drop));
	for (size_t i = 0; i < t.len; i++)
		pp_pb_bytes(&pb, PROFILE_STRING_TABLE, t.strs[i], t.lens[i]);
	assert_int_equal(pp_pb_finish(&pb), 0);
	pp_strtab_free(&t);
	return pp_buf_take(&out, len);
}

/* Two processes of one program (same functions, different mappings) and
 * a third with a function of the same name from another file. */
static const struct t_fn fns_a[] = {
    {1, "main", "main", "app.c", 10},
    {2, "work", "_Z4workv", "app.c", 20},
    {3, "inl", "inl", "app.h", 5},
};
static const struct t_map maps_a[] = {
    {1, 0x400000, 0x500000, "/usr/bin/app", "abc123"},
    {2, 0x7e0000, 0x7e8000, "/lib/libapp.so", ""},
};
static const struct t_loc locs_a[] = {
    {1, 1, 0x401000, {1}, {12}, 1},
    {2, 2, 0x7e1000, {3, 2}, {6, 22}, 2}, /* inl inlined into work */
};
static const struct t_sample samples_a[] = {
    {{2, 1}, 2, {3, 30}, {{"thread", "main", 0, NULL}}, 1},
    {{1}, 1, {1, 10}, {{"bytes", NULL, 4096, "bytes"}}, 1},
};
static const struct t_prof prof_a = {
    .types = {{"samples", "count"}, {"cpu", "nanoseconds"}},
    .ntypes = 2,
    .period_type = {"cpu", "nanoseconds"},
    .period = 10000000,
    .time = 2000,
    .duration = 5,
    .comments = {"pullprof 1.0", "shared note"},
    .ncomments = 2,
    .default_type = "cpu",
    .drop = "runtime\\..*",
    .fns = fns_a,
    .nfns = 3,
    .maps = maps_a,
    .nmaps = 2,
    .locs = locs_a,
    .nlocs = 2,
    .samples = samples_a,
    .nsamples = 2,
};

/* IDs numbered otherwise, same functions (plus one), its own mapping at
 * another address; a sample carrying a stale "pid" label. */
static const struct t_fn fns_b[] = {
    {7, "work", "_Z4workv", "app.c", 20},
    {5, "main", "main", "app.c", 10},
    {6, "other", "other", "app.c", 40},
};
static const struct t_map maps_b[] = {
    {4, 0x7f0000, 0x800000, "/usr/bin/app", "abc123"},
};
static const struct t_loc locs_b[] = {
    {9, 4, 0x401000, {5}, {12}, 1}, /* same address as A's, unrelated */
    {8, 4, 0x7f1000, {7}, {21}, 1},
    {3, 4, 0x7f2000, {6}, {41}, 1},
};
static const struct t_sample samples_b[] = {
    {{8, 9}, 2, {5, 50}, {{"pid", "999", 0, NULL}}, 1},
    {{3, 9}, 2, {2, 20}, {{0}}, 0},
};
static const struct t_prof prof_b = {
    .types = {{"samples", "count"}, {"cpu", "nanoseconds"}},
    .ntypes = 2,
    .period_type = {"cpu", "nanoseconds"},
    .period = 20000000,
    .time = 1000,
    .duration = 9,
    .comments = {"shared note", "only b"},
    .ncomments = 2,
    .default_type = "samples",
    .fns = fns_b,
    .nfns = 3,
    .maps = maps_b,
    .nmaps = 1,
    .locs = locs_b,
    .nlocs = 3,
    .samples = samples_b,
    .nsamples = 2,
    .unpacked = 1,
    .unknown = 1,
};

static const struct t_fn fns_c[] = {
    {1, "main", "main", "other.c", 10},
};
static const struct t_loc locs_c[] = {
    {1, 0, 0x1234, {1}, {11}, 1}, /* no mapping */
};
static const struct t_sample samples_c[] = {
    {{1}, 1, {7, 70}, {{0}}, 0},
};
static const struct t_prof prof_c = {
    .types = {{"samples", "count"}, {"cpu", "nanoseconds"}},
    .ntypes = 2,
    .period_type = {"cpu", "nanoseconds"},
    .period = 10000000,
    .fns = fns_c,
    .nfns = 1,
    .locs = locs_c,
    .nlocs = 1,
    .samples = samples_c,
    .nsamples = 1,
};

/* ---- reading the merged profile ------------------------------------------ */

struct got {
	struct pp_pprof_decoded d;
	char *bytes;
	size_t len;
};

static const char *str(const struct got *g, uint64_t i)
{
	static char s[8][512];
	static int next;
	char *b = s[next++ % 8];
	size_t n = g->d.strs[i].len < 511 ? g->d.strs[i].len : 511;
	memcpy(b, g->d.strs[i].p, n);
	b[n] = 0;
	return b;
}

static int merge_into(struct got *g, const struct pp_merge_part *parts,
                      size_t n, const struct pp_merge_opts *o, char *err)
{
	memset(g, 0, sizeof *g);
	int rc = pp_merge_pprof(parts, n, o, &g->bytes, &g->len, err, 512);
	if (rc)
		return rc;
	assert_true(g->len > 2 && (unsigned char)g->bytes[0] == 0x1f);
	char why[256] = "";
	int drc = pp_pprof_read(g->bytes, g->len, &g->d, why, sizeof why);
	if (drc)
		fail_msg("the merged profile does not decode: %s", why);
	return 0;
}

static void got_free(struct got *g)
{
	pp_pprof_read_free(&g->d);
	free(g->bytes);
}

/* A sample's label value of key (NULL: none); *count: how many such. */
static const char *label_of(const struct got *g,
                            const struct pp_pprof_sample *s, const char *key,
                            int *count)
{
	const char *v = NULL;
	*count = 0;
	for (uint32_t k = 0; k < s->nlabels; k++) {
		const struct pp_pprof_label *l = &g->d.labels[s->labels + k];
		if (strcmp(str(g, l->key), key) == 0) {
			(*count)++;
			v = l->str ? str(g, l->str) : "(num)";
		}
	}
	return v;
}

/* "leaf-fn;...;root-fn" of a sample (innermost line first). */
static void stack_of(const struct got *g, const struct pp_pprof_sample *s,
                     char *buf, size_t len)
{
	buf[0] = 0;
	for (uint32_t k = 0; k < s->nlocs; k++) {
		const struct pp_pprof_location *l =
		    &g->d.locations[g->d.locs[s->locs + k]];
		for (uint32_t i = 0; i < l->nlines; i++) {
			const struct pp_pprof_line *ln =
			    &g->d.lines[l->lines + i];
			const char *name =
			    ln->function
			        ? str(g, g->d.functions[ln->function - 1].name)
			        : "?";
			snprintf(buf + strlen(buf), len - strlen(buf), "%s%s",
			         buf[0] ? ";" : "", name);
		}
	}
}

static void check_ids(const struct got *g)
{
	for (size_t i = 0; i < g->d.nmappings; i++)
		assert_int_equal(g->d.mappings[i].id, i + 1);
	for (size_t i = 0; i < g->d.nlocations; i++)
		assert_int_equal(g->d.locations[i].id, i + 1);
	for (size_t i = 0; i < g->d.nfunctions; i++)
		assert_int_equal(g->d.functions[i].id, i + 1);
}

/* ---- tests ----------------------------------------------------------------
 */

static void test_merge_two(void **state)
{
	(void)state;
	size_t la, lb, lc;
	char *a = encode(&prof_a, 6, &la), *b = encode(&prof_b, 0, &lb),
	     *c = encode(&prof_c, 1, &lc);
	struct pp_merge_part parts[] = {
	    {100, a, la}, {200, b, lb}, {300, c, lc}};
	const char *notes[] = {"pid 400: no answer within 40 s", "shared note"};
	struct pp_merge_stats st;
	struct pp_merge_opts o = {0, notes, 2, &st};
	struct got g;
	char err[512];

	assert_int_equal(merge_into(&g, parts, 3, &o, err), 0);
	check_ids(&g);
	assert_int_equal(g.d.ntypes, 2);
	assert_string_equal(str(&g, g.d.types[1].type), "cpu");
	assert_string_equal(str(&g, g.d.period_type.unit), "nanoseconds");
	assert_int_equal(g.d.period, 10000000);  /* the first part's */
	assert_int_equal(g.d.time_nanos, 1000);  /* the earliest */
	assert_int_equal(g.d.duration_nanos, 9); /* the longest */
	assert_string_equal(str(&g, g.d.default_sample_type), "cpu");
	assert_string_equal(str(&g, g.d.drop_frames), "runtime\\..*");
	/* Comments: each once, the notes after. */
	assert_int_equal(g.d.ncomments, 4);
	assert_string_equal(str(&g, g.d.comments[0]), "pullprof 1.0");
	assert_string_equal(str(&g, g.d.comments[1]), "shared note");
	assert_string_equal(str(&g, g.d.comments[2]), "only b");
	assert_string_equal(str(&g, g.d.comments[3]),
	                    "pid 400: no answer within 40 s");
	/* Samples: all five, in order, each with one pid label. */
	static const struct {
		const char *pid, *stack;
		int64_t v0, v1;
		const char *thread;
	} want[] = {
	    {"100", "inl;work;main", 3, 30, "main"},
	    {"100", "main", 1, 10, NULL},
	    {"200", "work;main", 5, 50, NULL},
	    {"200", "other;main", 2, 20, NULL},
	    {"300", "main", 7, 70, NULL},
	};
	assert_int_equal(g.d.nsamples, 5);
	assert_int_equal(st.samples, 5);
	assert_int_equal(st.over_limit, 0);
	for (size_t i = 0; i < 5; i++) {
		const struct pp_pprof_sample *s = &g.d.samples[i];
		char stack[256];
		int n;
		assert_string_equal(label_of(&g, s, "pid", &n), want[i].pid);
		assert_int_equal(n, 1); /* B's stale "pid" replaced */
		stack_of(&g, s, stack, sizeof stack);
		assert_string_equal(stack, want[i].stack);
		assert_int_equal(g.d.vals[s->vals], want[i].v0);
		assert_int_equal(g.d.vals[s->vals + 1], want[i].v1);
		const char *t = label_of(&g, s, "thread", &n);
		if (want[i].thread)
			assert_string_equal(t, want[i].thread);
		else
			assert_null(t);
	}
	/* A's numeric label kept, with its unit. */
	const struct pp_pprof_label *nl = &g.d.labels[g.d.samples[1].labels];
	assert_string_equal(str(&g, nl->key), "bytes");
	assert_int_equal(nl->num, 4096);
	assert_string_equal(str(&g, nl->unit), "bytes");
	/* Functions: main, work, inl shared by A and B; other; C's main
	 * (another file). */
	assert_int_equal(g.d.nfunctions, 5);
	int mains = 0;
	for (size_t i = 0; i < g.d.nfunctions; i++)
		mains += strcmp(str(&g, g.d.functions[i].name), "main") == 0;
	assert_int_equal(mains, 2);
	/* Mappings and locations per process: A's 0x401000 and B's are two
	 * locations, in two mappings. The first process's first mapping (its
	 * executable) is the first, though its first sample's leaf is in
	 * another: the pprof tool names the binary after it. */
	assert_int_equal(g.d.nmappings, 3);
	assert_string_equal(str(&g, g.d.mappings[0].filename), "/usr/bin/app");
	assert_string_equal(str(&g, g.d.mappings[1].filename),
	                    "/lib/libapp.so");
	assert_int_equal(g.d.nlocations, 2 + 3 + 1);
	int at401 = 0;
	for (size_t i = 0; i < g.d.nlocations; i++)
		at401 += g.d.locations[i].address == 0x401000;
	assert_int_equal(at401, 2);
	assert_int_equal(g.d.mappings[2].start, 0x7f0000);
	assert_string_equal(str(&g, g.d.mappings[0].build_id), "abc123");
	assert_int_equal(g.d.locations[5].mapping, 0); /* C's had none */
	got_free(&g);
	free(a);
	free(b);
	free(c);
}

/* Parts rendered by pprof.c from the model: synthetic frames in their
 * "[pullprof]" mapping, labels, gzip. */
static char *rendered(int pid_salt, size_t max_bytes, size_t *len)
{
	struct pp_value_type types[] = {{"samples", "count"},
	                                {"cpu", "nanoseconds"}};
	struct pp_value_type period = {"cpu", "nanoseconds"};
	struct pp_profile *p = pp_profile_new(types, 2, &period, 1000);
	assert_non_null(p);
	p->max_bytes = max_bytes;
	uintptr_t trunc = pp_profile_synthetic_pc(p, "[pullprof: stack "
	                                             "truncated]");
	for (int i = 0; i < 20; i++) {
		uintptr_t pcs[] = {0x10000 + (uintptr_t)i * 16, 0x20000, trunc};
		int64_t v[] = {i + 1, (i + 1) * 1000};
		struct pp_label l = {"thread_name", i % 2 ? "odd" : "even", 0,
		                     NULL};
		assert_int_equal(pp_profile_add(p, pcs, 3, v, &l, 1), 0);
	}
	pp_profile_set_time(p, 5000 + pid_salt, 100);
	struct pp_buf out = {0};
	assert_int_equal(pp_pprof_render(p, NULL, 1, &out), 0);
	pp_profile_free(p);
	return pp_buf_take(&out, len);
}

static void test_merge_rendered(void **state)
{
	(void)state;
	size_t l1, l2;
	char *p1 = rendered(1, 0, &l1), *p2 = rendered(2, 1, &l2);
	struct pp_merge_part parts[] = {{11, p1, l1}, {22, p2, l2}};
	struct got g;
	char err[512];
	assert_int_equal(merge_into(&g, parts, 2, NULL, err), 0);
	check_ids(&g);
	int64_t sum[2][2] = {{0}};
	int trunc = 0, limit = 0, evens = 0;
	for (size_t i = 0; i < g.d.nsamples; i++) {
		const struct pp_pprof_sample *s = &g.d.samples[i];
		char stack[512];
		int n;
		const char *pid = label_of(&g, s, "pid", &n);
		int k = strcmp(pid, "11") == 0 ? 0 : 1;
		sum[k][0] += g.d.vals[s->vals];
		sum[k][1] += g.d.vals[s->vals + 1];
		stack_of(&g, s, stack, sizeof stack);
		trunc += strstr(stack, "[pullprof: stack truncated]") != NULL;
		limit += strstr(stack, PP_PROFILE_LIMIT_FRAME) != NULL;
		const char *t = label_of(&g, s, "thread_name", &n);
		evens += t && strcmp(t, "even") == 0;
	}
	/* 1 + ... + 20 each; the second part, built with a 1-byte bound,
	 * is all in its own limit frame. */
	assert_int_equal(sum[0][0], 210);
	assert_int_equal(sum[1][0], 210);
	assert_int_equal(sum[0][1], 210000);
	assert_int_equal(sum[1][1], 210000);
	assert_int_equal(trunc, 20);
	assert_int_equal(evens, 10);
	assert_true(limit >= 1);
	/* Synthetic frames stay in mappings named [pullprof], per process. */
	int own = 0;
	for (size_t i = 0; i < g.d.nmappings; i++)
		own += strcmp(str(&g, g.d.mappings[i].filename),
		              "[pullprof]") == 0;
	assert_int_equal(own, 2);
	assert_int_equal(g.d.time_nanos, 5001);
	got_free(&g);
	free(p1);
	free(p2);
}

static void test_merge_mismatch(void **state)
{
	(void)state;
	struct t_prof heap = prof_c, period = prof_c;
	heap.types[0][0] = "alloc_objects";
	period.period_type[1] = "count";
	size_t la, lh, lp;
	char *a = encode(&prof_a, 0, &la), *h = encode(&heap, 0, &lh),
	     *p = encode(&period, 0, &lp);
	struct pp_merge_part parts[] = {{1, a, la}, {2, h, lh}, {3, p, lp}};
	struct pp_merge_stats st;
	struct pp_merge_opts o = {0, NULL, 0, &st};
	struct got g;
	char err[512];
	assert_int_equal(merge_into(&g, parts, 3, &o, err), 0);
	assert_int_equal(st.left_out, 2);
	assert_int_equal(g.d.nsamples, 2); /* A's only */
	assert_int_equal(g.d.ncomments, 4);
	assert_string_equal(
	    str(&g, g.d.comments[2]),
	    "pid 2 left out of the merge: its sample types (alloc_objects/"
	    "count, cpu/nanoseconds; period cpu/nanoseconds) differ from "
	    "those of pid 1 (samples/count, cpu/nanoseconds; period "
	    "cpu/nanoseconds)");
	assert_non_null(strstr(str(&g, g.d.comments[3]),
	                       "pid 3 left out of the merge: its sample types "
	                       "(samples/count, cpu/nanoseconds; period "
	                       "cpu/count)"));
	got_free(&g);
	/* A part that is no profile fails the merge, and says which. */
	struct pp_merge_part bad[] = {{1, a, la}, {7, "\x08", 1}};
	char *out;
	size_t len;
	assert_int_equal(pp_merge_pprof(bad, 2, NULL, &out, &len, err, 512),
	                 -EINVAL);
	assert_string_equal(err, "part 2 (pid 7): byte 0: Profile: field 1: "
	                         "truncated varint");
	assert_null(out);
	assert_int_equal(pp_merge_pprof(NULL, 0, NULL, &out, &len, err, 512),
	                 -EINVAL);
	assert_string_equal(err, "no profiles to merge");
	struct pp_merge_part nopid[] = {{0, a, la}};
	assert_int_equal(pp_merge_pprof(nopid, 1, NULL, &out, &len, err, 512),
	                 -EINVAL);
	assert_string_equal(err, "part 1: pid 0 is not a process ID");
	free(a);
	free(h);
	free(p);
}

/* A big part: n samples of distinct two-frame stacks, distinct functions. */
static char *big_part(int n, int salt, size_t *len)
{
	struct t_fn *fns = calloc((size_t)n, sizeof *fns);
	struct t_loc *locs = calloc((size_t)n, sizeof *locs);
	struct t_sample *ss = calloc((size_t)n, sizeof *ss);
	char(*names)[32] = calloc((size_t)n, 32);
	struct t_map map = {1, 0x400000, 0x900000, "/usr/bin/big", "b1d"};
	for (int i = 0; i < n; i++) {
		snprintf(names[i], 32, "fn_%d_%d", salt, i);
		fns[i] = (struct t_fn){(uint64_t)i + 1, names[i], names[i],
		                       "big.c", i};
		locs[i] = (struct t_loc){
		    (uint64_t)i + 1,   1,       0x400000 + (uint64_t)i * 8,
		    {(uint64_t)i + 1}, {i + 1}, 1};
		ss[i] = (struct t_sample){{(uint64_t)i + 1, 1},
		                          2,
		                          {1, 1000 + i},
		                          {{"k", names[i], 0, NULL}},
		                          1};
	}
	struct t_prof p = {{{"samples", "count"}, {"cpu", "nanoseconds"}},
	                   2,
	                   {"cpu", "nanoseconds"},
	                   1000,
	                   0,
	                   0,
	                   {0},
	                   0,
	                   NULL,
	                   NULL,
	                   fns,
	                   n,
	                   &map,
	                   1,
	                   locs,
	                   n,
	                   ss,
	                   n,
	                   0,
	                   0};
	char *bytes = encode(&p, 1, len);
	free(fns);
	free(locs);
	free(ss);
	free(names);
	return bytes;
}

static void test_merge_limit(void **state)
{
	(void)state;
	enum { PARTS = 50, SAMPLES = 2000 };
	struct pp_merge_part parts[PARTS];
	for (int i = 0; i < PARTS; i++) {
		parts[i].pid = 1000 + i;
		parts[i].data = big_part(SAMPLES, i, &parts[i].len);
	}
	/* Unbounded first: how big it gets. */
	struct pp_merge_stats all, st;
	struct pp_merge_opts o = {0, NULL, 0, &all};
	struct got g;
	char err[512];
	assert_int_equal(merge_into(&g, parts, PARTS, &o, err), 0);
	assert_int_equal(all.samples, PARTS * SAMPLES);
	assert_int_equal(all.over_limit, 0);
	got_free(&g);
	/* A quarter of that: within it, the rest charged per pid. */
	o.max_bytes = all.bytes / 4;
	o.stats = &st;
	assert_int_equal(merge_into(&g, parts, PARTS, &o, err), 0);
	print_message("50 parts x %d samples: %zu bytes unbounded; bound %zu: "
	              "%zu bytes, %llu samples kept, %llu charged\n",
	              SAMPLES, all.bytes, o.max_bytes, st.bytes,
	              (unsigned long long)st.samples,
	              (unsigned long long)st.over_limit);
	assert_true(st.bytes <= o.max_bytes);
	assert_true(st.over_limit > 0 && st.samples > 0);
	assert_int_equal(st.samples + st.over_limit, PARTS * SAMPLES);
	check_ids(&g);
	int64_t count[PARTS] = {0}, cpu[PARTS] = {0};
	int limits[PARTS] = {0};
	for (size_t i = 0; i < g.d.nsamples; i++) {
		const struct pp_pprof_sample *s = &g.d.samples[i];
		char stack[256];
		int n;
		int k = atoi(label_of(&g, s, "pid", &n)) - 1000;
		assert_true(k >= 0 && k < PARTS);
		count[k] += g.d.vals[s->vals];
		cpu[k] += g.d.vals[s->vals + 1];
		stack_of(&g, s, stack, sizeof stack);
		if (strcmp(stack, PP_PROFILE_LIMIT_FRAME) == 0) {
			limits[k]++;
			assert_int_equal(s->nlabels, 1);
			const struct pp_pprof_location *l =
			    &g.d.locations[g.d.locs[s->locs]];
			assert_string_equal(
			    str(&g, g.d.mappings[l->mapping - 1].filename),
			    "[pullprof]");
		}
	}
	/* Every pid's values add up; later pids are all in the frame. */
	for (int k = 0; k < PARTS; k++) {
		assert_int_equal(count[k], SAMPLES);
		assert_int_equal(cpu[k],
		                 SAMPLES * 1000 + SAMPLES * (SAMPLES - 1) / 2);
		assert_true(limits[k] <= 1);
	}
	assert_int_equal(limits[PARTS - 1], 1);
	assert_int_equal(limits[0], 0);
	int said = 0;
	for (size_t i = 0; i < g.d.ncomments; i++)
		said += strstr(str(&g, g.d.comments[i]),
		               "past the merged profile's size limit") != NULL;
	assert_int_equal(said, 1);
	got_free(&g);
	for (int i = 0; i < PARTS; i++)
		free((void *)parts[i].data);
}

/* Every prefix, and every byte changed, of valid profiles: 0 or -EINVAL
 * with a sentence, never a crash or a read out of bounds. */
static void torture(const char *bytes, size_t len)
{
	char *copy = malloc(len);
	char err[512];
	for (size_t n = 0; n <= len; n++) {
		/* an exact-size heap copy, so ASan sees any overread */
		char *p = malloc(n ? n : 1);
		memcpy(p, bytes, n);
		struct pp_merge_part part = {42, p, n};
		char *out = NULL;
		size_t outlen;
		err[0] = 0;
		int rc = pp_merge_pprof(&part, 1, NULL, &out, &outlen, err,
		                        sizeof err);
		if (rc != 0 && rc != -EINVAL)
			fail_msg("prefix %zu: %d", n, rc);
		if (rc == -EINVAL && strncmp(err, "part 1 (pid 42): ", 17))
			fail_msg("prefix %zu: no reason: '%s'", n, err);
		free(out);
		free(p);
	}
	for (size_t i = 0; i < len; i++) {
		static const unsigned char with[] = {0x00, 0xff, 0x80, 0x7f,
		                                     0x02};
		for (size_t w = 0; w < sizeof with; w++) {
			memcpy(copy, bytes, len);
			copy[i] = (char)with[w];
			struct pp_merge_part part = {42, copy, len};
			char *out = NULL;
			size_t outlen;
			int rc = pp_merge_pprof(&part, 1, NULL, &out, &outlen,
			                        err, sizeof err);
			if (rc != 0 && rc != -EINVAL)
				fail_msg("byte %zu = %#x: %d", i, with[w], rc);
			free(out);
		}
	}
	free(copy);
}

static void test_merge_corrupt(void **state)
{
	(void)state;
	size_t len;
	char *raw = encode(&prof_b, 0, &len); /* unpacked, unknown fields */
	torture(raw, len);
	free(raw);
	raw = encode(&prof_a, 0, &len);
	torture(raw, len);
	free(raw);
	raw = encode(&prof_a, 6, &len);
	torture(raw, len);
	free(raw);
	raw = rendered(0, 0, &len);
	torture(raw, len);
	free(raw);
}

/* What is wrong, in words. */
static void expect_bad(const void *data, size_t len, const char *want)
{
	struct pp_pprof_decoded d;
	char err[512];
	assert_int_equal(pp_pprof_read(data, len, &d, err, sizeof err),
	                 -EINVAL);
	assert_string_equal(err, want);
	pp_pprof_read_free(&d);
}

#define BYTES(...)                                                             \
	(const char[]){__VA_ARGS__}, sizeof((const char[]){__VA_ARGS__})

static void test_decode_errors(void **state)
{
	(void)state;
	expect_bad("", 0, "empty (0 bytes)");
	/* string_table: "" then "x" */
	expect_bad(BYTES(0x32, 0x01, 'x'), "string_table[0] is not empty");
	expect_bad(BYTES(0x48, 0x05), "no string table");
	expect_bad(BYTES(0x0a, 0x02, 0x08, 0x05, 0x32, 0x00),
	           "sample_type 0: string index 5 is past the string "
	           "table's 1 entries");
	expect_bad(BYTES(0x12, 0x02, 0x08, 0x07, 0x32, 0x00),
	           "sample 0 names location ID 7, which no location has");
	expect_bad(
	    BYTES(0x22, 0x02, 0x08, 0x03, 0x22, 0x02, 0x08, 0x03, 0x32, 0x00),
	    "location 1 has the ID 3 of location 0");
	expect_bad(BYTES(0x22, 0x00, 0x32, 0x00), "location 0 has ID 0");
	expect_bad(BYTES(0x22, 0x04, 0x08, 0x01, 0x10, 0x02, 0x32, 0x00),
	           "location 0 names mapping ID 2, which no mapping has");
	expect_bad(BYTES(0x0a, 0x00, 0x12, 0x00, 0x32, 0x00),
	           "sample 0 has 0 values for 1 sample types");
	expect_bad(BYTES(0x32, 0x00, 0x0b), "byte 2: Profile: field 1: wire "
	                                    "type 3 is not supported");
	expect_bad(BYTES(0x32, 0x05, 0x00),
	           "byte 0: Profile: field 6: length 5 runs past the end (1 "
	           "bytes left)");
	expect_bad(BYTES(0x48, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	                 0xff, 0xff, 0x01),
	           "byte 0: Profile: field 9: truncated varint");
	expect_bad(BYTES(0x32, 0x00, 0x10, 0x01),
	           "byte 2: Profile: field 2 has wire type 0, which it "
	           "cannot");
	expect_bad(BYTES(0x12, 0x03, 0x0a, 0x01, 0x80, 0x32, 0x00),
	           "byte 4: sample 0: field 1: truncated packed varint");
	/* Gzip: garbage, truncated, trailing bytes. */
	size_t len;
	char *gz = encode(&prof_c, 6, &len);
	expect_bad(gz, len - 3, "the gzip stream is truncated");
	char *more = malloc(len + 3);
	memcpy(more, gz, len);
	memcpy(more + len, "abc", 3);
	expect_bad(more, len + 3, "3 bytes after the end of the gzip stream");
	/* Two gzip members are one stream, as gzip says: the second sets
	 * time_nanos. */
	struct pp_pprof_decoded d;
	char err[256];
	struct pp_buf tail = {0};
	struct pp_pb pb;
	assert_int_equal(pp_pb_init(&pb, &tail, 6), 0);
	pp_pb_int64(&pb, PROFILE_TIME_NANOS, 77);
	assert_int_equal(pp_pb_finish(&pb), 0);
	free(more);
	more = malloc(len + tail.len);
	memcpy(more, gz, len);
	memcpy(more + len, tail.data, tail.len);
	assert_int_equal(
	    pp_pprof_read(more, len + tail.len, &d, err, sizeof err), 0);
	assert_int_equal(d.nsamples, 1);
	assert_int_equal(d.time_nanos, 77);
	pp_pprof_read_free(&d);
	pp_buf_free(&tail);
	gz[12] ^= 0x55;
	assert_int_equal(pp_pprof_read(gz, len, &d, err, sizeof err), -EINVAL);
	assert_true(strncmp(err, "gzip: ", 6) == 0 ||
	            strstr(err, "byte") != NULL);
	pp_pprof_read_free(&d);
	free(more);
	free(gz);
}

/* Packed and unpacked fields, unknown fields: the same profile. */
static void test_decode_forms(void **state)
{
	(void)state;
	struct t_prof plain = prof_b;
	plain.unpacked = 0;
	plain.unknown = 0;
	size_t l1, l2;
	char *a = encode(&plain, 0, &l1), *b = encode(&prof_b, 0, &l2);
	struct pp_pprof_decoded x, y;
	char err[256];
	assert_true(l2 > l1);
	assert_int_equal(pp_pprof_read(a, l1, &x, err, sizeof err), 0);
	assert_int_equal(pp_pprof_read(b, l2, &y, err, sizeof err), 0);
	assert_int_equal(x.nsamples, y.nsamples);
	assert_int_equal(x.nvals, y.nvals);
	assert_memory_equal(x.vals, y.vals, x.nvals * sizeof *x.vals);
	assert_memory_equal(x.locs, y.locs, x.nlocs * sizeof *x.locs);
	assert_int_equal(x.ncomments, 2);
	assert_int_equal(y.ncomments, 2);
	assert_int_equal(x.nlocations, y.nlocations);
	assert_int_equal(x.nlines, y.nlines);
	pp_pprof_read_free(&x);
	pp_pprof_read_free(&y);
	free(a);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_merge_two),
	    cmocka_unit_test(test_merge_rendered),
	    cmocka_unit_test(test_merge_mismatch),
	    cmocka_unit_test(test_merge_limit),
	    cmocka_unit_test(test_merge_corrupt),
	    cmocka_unit_test(test_decode_errors),
	    cmocka_unit_test(test_decode_forms),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

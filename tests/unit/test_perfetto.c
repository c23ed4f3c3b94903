/* Unit tests: the Perfetto trace writer (src/profile/perfetto*.c) on a
 * small model with known samples, times and threads, its bytes read back
 * with a wire-format reader here: the clock snapshot first, the track
 * descriptors, every sequence started with its state cleared, each sample
 * at its own time on its thread's track (per thread in time order), every
 * interned id defined before it is used, callstacks root first, the wall
 * looks as slices. When protoc and Perfetto's protos are found
 * ($PP_PERFETTO_PROTOS, or shared/perfetto-protos beside the source tree
 * or a directory above it, as test_trace.py finds them) the trace is also
 * decoded with protoc --decode=perfetto.protos.Trace. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "profile/model.h"
#include "profile/perfetto.h"
#include "profile/view.h"

/* ---- a wire-format reader ------------------------------------------------ */

struct span {
	const unsigned char *p, *end;
};

struct field {
	uint64_t num, v; /* v: a varint's value (or a fixed64's bits) */
	int wire;
	struct span sub;
};

static uint64_t varint(struct span *s)
{
	uint64_t x = 0;
	for (unsigned shift = 0; shift < 64; shift += 7) {
		assert_true(s->p < s->end);
		unsigned char b = *s->p++;
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return x;
	}
	fail_msg("varint over 10 bytes");
	return 0;
}

/* The next field of s: 1, or 0 at its end. Fails on a malformed one. */
static int next(struct span *s, struct field *f)
{
	if (s->p == s->end)
		return 0;
	uint64_t key = varint(s);
	f->num = key >> 3;
	f->wire = (int)(key & 7);
	assert_true(f->num > 0);
	switch (f->wire) {
	case 0: f->v = varint(s); break;
	case 1:
		assert_true(s->end - s->p >= 8);
		memcpy(&f->v, s->p, 8);
		s->p += 8;
		break;
	case 2: {
		uint64_t len = varint(s);
		assert_true(len <= (uint64_t)(s->end - s->p));
		f->sub = (struct span){s->p, s->p + len};
		s->p += len;
		break;
	}
	case 5:
		assert_true(s->end - s->p >= 4);
		s->p += 4;
		break;
	default: fail_msg("wire type %d", f->wire);
	}
	return 1;
}

/* The varint field num of message s (or dflt), the last one winning. */
static uint64_t get(struct span s, uint64_t num, uint64_t dflt)
{
	struct field f;
	while (next(&s, &f))
		if (f.num == num && f.wire == 0)
			dflt = f.v;
	return dflt;
}

/* The submessage or string field num of s ({NULL, NULL}: none). */
static struct span sub(struct span s, uint64_t num)
{
	struct field f;
	struct span none = {NULL, NULL};
	while (next(&s, &f))
		if (f.num == num && f.wire == 2)
			none = f.sub;
	return none;
}

static int str_is(struct span s, const char *want)
{
	return s.p && (size_t)(s.end - s.p) == strlen(want) &&
	       memcmp(s.p, want, strlen(want)) == 0;
}

/* ---- the model ------------------------------------------------------------
 */

#define BASE_NS                                                                \
	1000000000000ull /* the window's start on the monotonic clock          \
	                  */
#define UUID(kind, id) ((uint64_t)(id) << 3 | (kind))

static const struct pp_value_type cpu_types[] = {{"samples", "count"},
                                                 {"cpu", "nanoseconds"}};
static const struct pp_value_type wall_types[] = {{"samples", "count"},
                                                  {"wall", "nanoseconds"}};

/* One sample: thread, time after BASE_NS, stack (names, leaf first),
 * periods, value. */
struct t_sample {
	uint32_t tid;
	uint64_t at;
	const char *stack[3];
	int64_t count, value;
	const char *state; /* wall */
};

/* Out of time order on purpose: the writer sorts. */
static const struct t_sample cpu_samples[] = {
    {101, 3000, {"leaf_a", "mid", "main"}, 1, 10000000, NULL},
    {102, 1000, {"leaf_b", "main", NULL}, 2, 20000000, NULL},
    {101, 1000, {"leaf_a", "mid", "main"}, 1, 10000000, NULL},
    {102, 5000, {"leaf_b", "main", NULL}, 1, 10000000, NULL},
    {101, 2000, {"mid", "main", NULL}, 1, 10000000, NULL},
    {0, 4000, {"lost", NULL, NULL}, 3, 30000000, NULL}, /* the process */
};
#define NCPU (sizeof cpu_samples / sizeof cpu_samples[0])

static const struct t_sample wall_samples[] = {
    {101, 4000, {"sleepy", "main", NULL}, 1, 2000, "sleeping"},
    {101, 2000, {"sleepy", "main", NULL}, 1, 1500, "sleeping"},
    {102, 3000, {"leaf_b", "main", NULL}, 1, 3000, "running"},
};
#define NWALL (sizeof wall_samples / sizeof wall_samples[0])

static const char *thread_name(uint32_t tid)
{
	return tid == 101 ? "alpha" : "beta";
}

static struct pp_profile *model(const struct pp_value_type *types,
                                const struct t_sample *ss, size_t n, int wall)
{
	struct pp_profile *p = pp_profile_new(types, 2, &types[1], 10000000);
	assert_non_null(p);
	p->max_events = 1000;
	p->wall_timeline = wall;
	p->mono_start_ns = BASE_NS;
	p->mono_end_ns = BASE_NS + 10000;
	for (size_t i = 0; i < n; i++) {
		const struct t_sample *s = &ss[i];
		uintptr_t pcs[3];
		size_t depth = 0;
		for (; depth < 3 && s->stack[depth]; depth++)
			pcs[depth] =
			    pp_profile_synthetic_pc(p, s->stack[depth]);
		struct pp_label l[2] = {
		    {"thread_name", thread_name(s->tid), 0, NULL},
		    {"state", s->state, 0, NULL}};
		int64_t v[2] = {s->count, s->value};
		assert_int_equal(pp_profile_add_at(p, pcs, depth, v, l,
		                                   s->state ? 2 : 1,
		                                   BASE_NS + s->at, s->tid),
		                 0);
	}
	return p;
}

/* ---- reading the trace back ------------------------------------------------
 */

/* What one sequence has defined so far: iids by kind (a bitmap each). */
enum { K_EVENT_NAME, K_FUNCTION, K_FRAME, K_CALLSTACK, K_DEBUG_NAME, NK };
#define MAX_IID 256

struct seq {
	int started;
	unsigned char defined[NK][MAX_IID];
	/* frame iid -> function iid; function iid -> its name */
	uint64_t frame_fn[MAX_IID];
	char fn_name[MAX_IID][32];
	char event_name[MAX_IID][32];
	/* callstack iid -> its frames, root first */
	uint64_t stack[MAX_IID][8];
	size_t depth[MAX_IID];
};

struct seen {
	int packets;
	uint64_t boot, mono, real, primary;
	int process, pullprof, threads;
	struct seq seqs[8];
	/* CPU instants, in trace order. */
	struct {
		uint32_t tid;
		uint64_t ts, weight, cpu_ns;
		char leaf[32], root[32];
	} cpu[16];
	size_t ncpu;
	/* Wall slices: begin and end. */
	struct {
		uint32_t tid;
		uint64_t begin, end;
		char state[32];
	} wall[16];
	size_t nwall;
	int lost; /* the pullprof track's "lost" instant */
};

static void define(struct seq *q, int kind, uint64_t iid)
{
	assert_true(iid > 0 && iid < MAX_IID);
	q->defined[kind][iid] = 1;
}

static void need(const struct seq *q, int kind, uint64_t iid)
{
	assert_true(iid > 0 && iid < MAX_IID);
	if (!q->defined[kind][iid])
		fail_msg("iid %llu of kind %d used before it is defined",
		         (unsigned long long)iid, kind);
}

/* A name copied (strlen and memcpy: the compiler cannot tell that the
 * two never overlap inside struct seen, and snprintf would warn). */
static void set_name(char *out, size_t len, const char *name)
{
	size_t n = strlen(name);
	assert_true(n < len);
	memcpy(out, name, n + 1);
}

static void copy_str(char *out, size_t len, struct span s)
{
	size_t n = (size_t)(s.end - s.p);
	assert_true(s.p && n < len);
	memcpy(out, s.p, n);
	out[n] = 0;
}

static void interned(struct seq *q, struct span id)
{
	struct field f;
	while (next(&id, &f)) {
		uint64_t iid = get(f.sub, 1, 0);
		switch (f.num) {
		case 2: /* event_names */
			define(q, K_EVENT_NAME, iid);
			copy_str(q->event_name[iid], 32, sub(f.sub, 2));
			break;
		case 3: define(q, K_DEBUG_NAME, iid); break;
		case 5: /* function_names */
			define(q, K_FUNCTION, iid);
			copy_str(q->fn_name[iid], 32, sub(f.sub, 2));
			break;
		case 6: { /* frames: their function first */
			uint64_t fn = get(f.sub, 2, 0);
			if (fn)
				need(q, K_FUNCTION, fn);
			define(q, K_FRAME, iid);
			q->frame_fn[iid] = fn;
			break;
		}
		case 7: { /* callstacks: their frames first */
			struct span s = f.sub;
			struct field g;
			define(q, K_CALLSTACK, iid);
			q->depth[iid] = 0;
			while (next(&s, &g)) {
				if (g.num != 2)
					continue;
				struct span packed = g.sub;
				while (packed.p < packed.end) {
					uint64_t fr = varint(&packed);
					need(q, K_FRAME, fr);
					assert_true(q->depth[iid] < 8);
					q->stack[iid][q->depth[iid]++] = fr;
				}
			}
			break;
		}
		}
	}
}

static void track_event(struct seen *t, struct seq *q, struct span te,
                        uint64_t ts, uint64_t clock)
{
	uint64_t type = get(te, 9, 0), track = get(te, 11, 0);
	if (track >> 3 == (uint64_t)getpid() && (track & 7) == 4) {
		struct span name = sub(te, 23);
		/* The process's 3 samples, on no thread's timeline. */
		static const char said[] = "3 CPU samples not on the timeline";
		if (name.p && memmem(name.p, (size_t)(name.end - name.p), said,
		                     sizeof said - 1))
			t->lost = 1;
		return;
	}
	assert_int_equal(clock, 3);        /* CLOCK_MONOTONIC */
	if ((track & 7) == 2) {            /* a thread: a CPU sample */
		assert_int_equal(type, 3); /* instant */
		uint64_t name = get(te, 10, 0), cs = get(te, 56, 0);
		need(q, K_EVENT_NAME, name);
		assert_string_equal(q->event_name[name], "cpu");
		need(q, K_CALLSTACK, cs);
		assert_true(t->ncpu < 16);
		typeof(t->cpu[0]) *c = &t->cpu[t->ncpu++];
		c->tid = (uint32_t)(track >> 3);
		c->ts = ts;
		struct span w = te;
		struct field f;
		while (next(&w, &f)) {
			if (f.num == 57 && f.wire == 1) {
				double d;
				memcpy(&d, &f.v, 8);
				c->weight = (uint64_t)d;
			}
			if (f.num == 4 && get(f.sub, 1, 0) == 2) /* cpu_ns */
				c->cpu_ns = get(f.sub, 4, 0);
		}
		/* Root first: the last frame is the leaf. */
		size_t d = q->depth[cs];
		assert_true(d > 0);
		set_name(c->root, sizeof c->root,
		         q->fn_name[q->frame_fn[q->stack[cs][0]]]);
		set_name(c->leaf, sizeof c->leaf,
		         q->fn_name[q->frame_fn[q->stack[cs][d - 1]]]);
	} else if ((track & 7) == 3) { /* a wall track */
		uint32_t tid = (uint32_t)(track >> 3);
		if (type == 1) {
			uint64_t name = get(te, 10, 0);
			need(q, K_EVENT_NAME, name);
			need(q, K_CALLSTACK, get(te, 56, 0));
			assert_true(t->nwall < 16);
			t->wall[t->nwall].tid = tid;
			t->wall[t->nwall].begin = ts;
			set_name(t->wall[t->nwall].state,
			         sizeof t->wall[t->nwall].state,
			         q->event_name[name]);
			t->nwall++;
		} else {
			assert_int_equal(type, 2);
			assert_true(t->nwall > 0);
			assert_int_equal(t->wall[t->nwall - 1].tid, tid);
			t->wall[t->nwall - 1].end = ts;
		}
	} else {
		fail_msg("an event on track %llx", (unsigned long long)track);
	}
}

static void read_trace(const struct pp_buf *b, struct seen *t)
{
	struct span all = {(const unsigned char *)b->data,
	                   (const unsigned char *)b->data + b->len};
	struct field f;
	memset(t, 0, sizeof *t);
	while (next(&all, &f)) {
		assert_int_equal(f.num, 1); /* Trace.packet */
		struct span pk = f.sub;
		uint64_t seq = get(pk, 10, 0), flags = get(pk, 13, 0);
		assert_true(seq > 0 && seq < 8);
		struct seq *q = &t->seqs[seq];
		if (!q->started) {
			/* The first packet of each sequence: its state
			 * starts cleared. */
			assert_int_equal(get(pk, 87, 0), 1);
			assert_true(flags & 1);
			q->started = 1;
		}
		struct span cs = sub(pk, 6);
		if (t->packets++ == 0) {
			assert_non_null(cs.p); /* the clock snapshot first */
			struct span c = cs;
			struct field g;
			while (next(&c, &g)) {
				if (g.num == 2)
					t->primary = g.v;
				if (g.num != 1)
					continue;
				uint64_t id = get(g.sub, 1, 0),
				         v = get(g.sub, 2, 0);
				if (id == 6)
					t->boot = v;
				else if (id == 3)
					t->mono = v;
				else if (id == 1)
					t->real = v;
			}
		} else {
			assert_null(cs.p);
		}
		struct span td = sub(pk, 60);
		if (td.p) {
			uint64_t uuid = get(td, 1, 0);
			struct span pd = sub(td, 3), th = sub(td, 4);
			if (pd.p) {
				assert_int_equal(get(pd, 1, 0), getpid());
				assert_int_equal(uuid, UUID(1, getpid()));
				t->process++;
			} else if (th.p) {
				uint64_t tid = get(th, 2, 0);
				assert_int_equal(uuid, UUID(2, tid));
				assert_int_equal(get(th, 1, 0), getpid());
				assert_true(str_is(sub(th, 5),
				                   thread_name((uint32_t)tid)));
				t->threads++;
			} else if (str_is(sub(td, 2), "pullprof")) {
				assert_int_equal(uuid, UUID(4, getpid()));
				t->pullprof++;
			}
		}
		/* Interned data before the event of the same packet. */
		struct span id = sub(pk, 12);
		if (id.p) {
			/* Interning leans on state: never in a packet
			 * that does not keep it. */
			assert_true(flags & 2 || flags & 1);
			interned(q, id);
		}
		struct span te = sub(pk, 11);
		if (te.p)
			track_event(t, q, te, get(pk, 8, 0), get(pk, 58, 0));
	}
}

/* protoc, when it and Perfetto's protos are here: the trace decodes. */
static const char *find_protos(char *buf, size_t len)
{
	const char *env = getenv("PP_PERFETTO_PROTOS");
	if (env && *env)
		return env;
	const char *src = getenv("srcdir");
	char d[PATH_MAX];
	if (!realpath(src && *src ? src : ".", d))
		return NULL;
	for (;;) {
		char *slash = strrchr(d, '/');
		if (!slash)
			return NULL;
		*slash = 0;
		snprintf(buf, len, "%s/shared/perfetto-protos", *d ? d : "");
		struct stat st;
		if (stat(buf, &st) == 0 && S_ISDIR(st.st_mode))
			return buf;
		if (!*d)
			return NULL;
	}
}

static void protoc_decodes(const struct pp_buf *b)
{
	char buf[PATH_MAX + 32], cmd[PATH_MAX * 2 + 200],
	    path[] = "/tmp/pp-trace-XXXXXX";
	const char *protos = find_protos(buf, sizeof buf);
	char proto[PATH_MAX + 96];
	snprintf(proto, sizeof proto, "%s/protos/perfetto/trace/trace.proto",
	         protos ? protos : "");
	if (!protos || access(proto, R_OK) != 0 ||
	    system("protoc --version >/dev/null 2>&1") != 0) {
		printf("# skipped protoc's decoding: no protoc or no "
		       "Perfetto protos (PP_PERFETTO_PROTOS)\n");
		return;
	}
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, b->data, b->len), (ssize_t)b->len);
	close(fd);
	snprintf(cmd, sizeof cmd,
	         "protoc --proto_path='%s' --decode=perfetto.protos.Trace "
	         "protos/perfetto/trace/trace.proto < %s | grep -c "
	         "'clock_snapshot' >/dev/null",
	         protos, path);
	int rc = system(cmd);
	unlink(path);
	assert_true(WIFEXITED(rc));
	assert_int_equal(WEXITSTATUS(rc), 0);
}

/* ---- the tests ----------------------------------------------------------- */

static uint64_t mono_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void test_cpu_and_wall(void **state)
{
	(void)state;
	struct pp_profile *cpu = model(cpu_types, cpu_samples, NCPU, 0);
	struct pp_profile *wall = model(wall_types, wall_samples, NWALL, 1);
	struct pp_view vc, vw;
	assert_int_equal(pp_view_build(&vc, cpu, NULL), 0);
	assert_int_equal(pp_view_build(&vw, wall, NULL), 0);
	struct pp_buf out = {0};
	uint64_t before = mono_now();
	assert_int_equal(pp_perfetto_write(&vc, &vw, NULL, NULL, &out, 0), 0);
	uint64_t after = mono_now();
	struct seen *t = calloc(1, sizeof *t);
	assert_non_null(t);
	read_trace(&out, t);

	/* The clock snapshot relates the clocks as they were while it was
	 * written; BOOTTIME is the primary one, never behind MONOTONIC but
	 * for the time between the two reads (BOOTTIME first). */
	assert_true(t->mono >= before && t->mono <= after);
	assert_true(t->boot + (after - before) >= t->mono);
	assert_true(t->real > 0);
	assert_int_equal(t->primary, 6);
	assert_int_equal(t->process, 1);
	assert_int_equal(t->pullprof, 1);
	assert_int_equal(t->threads, 2);
	assert_true(t->lost);

	/* Every CPU sample on a thread, in time order, at its own time,
	 * weighted by its CPU time, its stack root first. */
	assert_int_equal(t->ncpu, NCPU - 1);
	for (size_t i = 0; i < t->ncpu; i++) {
		if (i)
			assert_true(t->cpu[i].ts >= t->cpu[i - 1].ts);
		size_t k = 0;
		for (; k < NCPU; k++)
			if (cpu_samples[k].tid == t->cpu[i].tid &&
			    BASE_NS + cpu_samples[k].at == t->cpu[i].ts)
				break;
		assert_true(k < NCPU);
		const struct t_sample *s = &cpu_samples[k];
		assert_int_equal(t->cpu[i].weight, (uint64_t)s->value);
		assert_int_equal(t->cpu[i].cpu_ns, (uint64_t)s->value);
		assert_string_equal(t->cpu[i].leaf, s->stack[0]);
		assert_string_equal(t->cpu[i].root, "main");
	}
	/* Wall looks: a slice per look, per thread in time order, ending at
	 * the look, as long as the time it stands for but not before the
	 * thread's previous look or the window. */
	assert_int_equal(t->nwall, NWALL);
	const uint64_t want[3][3] = {
	    /* tid, begin, end (after BASE_NS) */
	    {101, 2000 - 1500, 2000},
	    {101, 2000, 4000}, /* 2000 ns, but the previous look was at 2000 */
	    {102, 0, 3000},    /* 3000 ns: from the window's start */
	};
	for (size_t i = 0; i < NWALL; i++) {
		assert_int_equal(t->wall[i].tid, want[i][0]);
		assert_int_equal(t->wall[i].begin, BASE_NS + want[i][1]);
		assert_int_equal(t->wall[i].end, BASE_NS + want[i][2]);
	}
	assert_string_equal(t->wall[0].state, "sleeping");
	assert_string_equal(t->wall[2].state, "running");

	protoc_decodes(&out);
	free(t);
	pp_buf_free(&out);
	pp_view_free(&vc);
	pp_view_free(&vw);
	pp_profile_free(cpu);
	pp_profile_free(wall);
}

/* A wall window alone (/wall?format=perfetto) and an empty one. */
static void test_wall_alone_and_empty(void **state)
{
	(void)state;
	struct pp_profile *wall = model(wall_types, wall_samples, NWALL, 1);
	struct pp_view vw;
	assert_int_equal(pp_view_build(&vw, wall, NULL), 0);
	struct pp_buf out = {0};
	assert_int_equal(pp_perfetto_write(NULL, &vw, NULL, NULL, &out, 0), 0);
	struct seen *t = calloc(1, sizeof *t);
	read_trace(&out, t);
	assert_int_equal(t->ncpu, 0);
	assert_int_equal(t->nwall, NWALL);
	assert_int_equal(t->threads, 2);
	pp_buf_free(&out);
	pp_view_free(&vw);
	pp_profile_free(wall);

	struct pp_profile *none = model(cpu_types, NULL, 0, 0);
	struct pp_view vn;
	assert_int_equal(pp_view_build(&vn, none, NULL), 0);
	assert_int_equal(pp_perfetto_write(&vn, NULL, NULL, NULL, &out, 0), 0);
	read_trace(&out, t);
	assert_int_equal(t->ncpu, 0);
	assert_int_equal(t->threads, 0);
	assert_int_equal(t->process, 1);
	assert_true(t->mono > 0);
	pp_buf_free(&out);
	pp_view_free(&vn);
	pp_profile_free(none);
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cpu_and_wall),
	    cmocka_unit_test(test_wall_alone_and_empty),
	};
	return cmocka_run_group_tests_name("perfetto", tests, NULL, NULL);
}

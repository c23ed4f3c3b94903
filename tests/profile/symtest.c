/*
 * symtest: builds profiles with the real model, symbolizer and pprof encoder,
 * from stacks captured with libunwind in ordinary context, and writes them
 * to files for tests/integration/test_profile.py to decode with protoc and
 * go tool pprof.
 *
 *   symtest symbols DL_LIBRARY NODEBUG_LIBRARY OUT.pb.gz OUT.pb
 *       stacks through a static function, an inlined function, a function
 *       of a dlopen'ed library, a C++ function in a namespace, and a
 *       function of a library built without debug information
 *   symtest empty OUT.pb.gz
 *   symtest synthetic N DEPTH OUT.pb.gz
 *       N unique stacks of DEPTH made-up PCs, values i and 1000*i, labels
 *
 * Built with -g -O2 (Makefile.am), as real programs are.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "profile/model.h"
#include "profile/pprof.h"
#include "symbols/symbols.h"

#define MAXDEPTH 64

struct capture {
	uintptr_t pcs[MAXDEPTH];
	size_t depth;
};

void symtest_capture(void *arg);
int symtest_cxx_entry(void *c);

/* Record the caller's stack. The first PC is a return address into the
 * function of interest; minus one it lies in the call instruction, which is
 * what a sampled PC at that point would be. */
__attribute__((noinline)) void symtest_capture(void *arg)
{
	struct capture *c = arg;
	void *buf[MAXDEPTH + 1];
	int n = unw_backtrace(buf, MAXDEPTH + 1);

	c->depth = 0;
	for (int i = 1; i < n; i++)
		c->pcs[c->depth++] = (uintptr_t)buf[i];
	if (c->depth)
		c->pcs[0] -= 1;
}

static __attribute__((noinline)) void static_leaf(struct capture *c)
{
	symtest_capture(c); /* MARK:static_call */
	__asm__ volatile("" ::: "memory");
}

static inline __attribute__((always_inline)) void
inlined_helper(struct capture *c)
{
	symtest_capture(c); /* MARK:inline_call */
	__asm__ volatile("" ::: "memory");
}

static __attribute__((noinline)) void caller_of_inline(struct capture *c)
{
	inlined_helper(c); /* MARK:inline_site */
	__asm__ volatile("" ::: "memory");
}

static int write_file(const char *path, const struct pp_buf *b)
{
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(b->data, 1, b->len, f) != b->len || fclose(f)) {
		perror(path);
		return 1;
	}
	return 0;
}

static int render(struct pp_profile *p, int symbolize, int level,
                  const char *path)
{
	struct pp_buf out = {0};
	struct pp_symtab *st = NULL;
	if (symbolize && pp_symtab_acquire(&st))
		st = NULL;
	int rc = pp_pprof_render(p, st, level, &out);
	if (st)
		pp_symtab_release(st);
	if (rc) {
		fprintf(stderr, "render: %s\n", strerror(-rc));
		return 1;
	}
	rc = write_file(path, &out);
	pp_buf_free(&out);
	return rc;
}

static const struct pp_value_type cpu_types[] = {{"samples", "count"},
                                                 {"cpu", "nanoseconds"}};
static const struct pp_value_type cpu_period = {"cpu", "nanoseconds"};

typedef int (*dl_fn)(void (*)(void *), void *);

static dl_fn load(const char *path, const char *name)
{
	void *dl = dlopen(path, RTLD_NOW);
	dl_fn fn = dl ? (dl_fn)dlsym(dl, name) : NULL;
	if (!fn)
		fprintf(stderr, "%s: %s\n", path, dlerror());
	return fn;
}

static int symbols(const char *dl_path, const char *nodebug_path,
                   const char *gz, const char *raw)
{
	struct capture c;
	struct pp_profile *p =
	    pp_profile_new(cpu_types, 2, &cpu_period, 10000000);
	dl_fn dl = load(dl_path, "symtest_dl_function");
	dl_fn nodebug = load(nodebug_path, "symtest_nodebug_function");
	if (!p || !dl || !nodebug)
		return 1;

	pp_profile_set_time(p, 1700000000123456789LL, 2500000000LL);
	pp_profile_set_default_type(p, "cpu");
	pp_profile_add_comment(p, "symtest: made by tests/profile/symtest.c");

	struct pp_label scen = {"scenario", NULL, 0, NULL};
	struct pp_label bytes = {"bytes", NULL, 4096, "bytes"};
	struct {
		const char *name;
		int64_t count;
	} runs[] = {{"static", 3},
	            {"inline", 5},
	            {"dlopen", 7},
	            {"cxx", 11},
	            {"nodebug", 13}};
	for (size_t i = 0; i < 5; i++) {
		switch (i) {
		case 0: static_leaf(&c); break;
		case 1: caller_of_inline(&c); break;
		case 2: dl(symtest_capture, &c); break;
		case 3: symtest_cxx_entry(&c); break;
		case 4: nodebug(symtest_capture, &c); break;
		}
		scen.str = runs[i].name;
		struct pp_label labels[2] = {scen, bytes};
		/* Added twice: the model must sum them into one sample. */
		int64_t v1[2] = {runs[i].count - 1,
		                 (runs[i].count - 1) * 10000000};
		int64_t v2[2] = {1, 10000000};
		if (pp_profile_add(p, c.pcs, c.depth, v1, labels,
		                   i == 0 ? 2 : 1) ||
		    pp_profile_add(p, c.pcs, c.depth, v2, labels,
		                   i == 0 ? 2 : 1))
			return 1;
		printf("%s depth=%zu\n", runs[i].name, c.depth);
	}
	int rc = render(p, 1, 6, gz) || render(p, 1, 0, raw);
	pp_profile_free(p);
	return rc;
}

static int synthetic(long n, long depth, const char *out)
{
	struct pp_profile *p =
	    pp_profile_new(cpu_types, 2, &cpu_period, 10000000);
	uintptr_t pcs[256];
	char name[32];

	if (!p || depth < 1 || depth > 256)
		return 1;
	pp_profile_set_time(p, 1, 1);
	/* Every stack twice: aggregation doubles the values, not the count.
	 * Stacks differ in their leaf; callers are shared, as in real programs
	 * (and as a hash table of stacks must handle). */
	for (int pass = 0; pass < 2; pass++) {
		for (long i = 0; i < n; i++) {
			pcs[0] = 0x400000 + (uintptr_t)i * 16;
			for (long d = 1; d < depth; d++)
				pcs[d] =
				    0x500000 + (uintptr_t)((i + d) % 997) * 32;
			int64_t v[2] = {i, 1000 * i};
			snprintf(name, sizeof name, "w%ld", i % 7);
			struct pp_label l = {"worker", name, 0, NULL};
			if (pp_profile_add(p, pcs, (size_t)depth, v, &l, 1))
				return 1;
		}
	}
	printf("samples=%zu\n", p->nsamples);
	int rc = render(p, 0, 6, out);
	pp_profile_free(p);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc == 6 && strcmp(argv[1], "symbols") == 0)
		return symbols(argv[2], argv[3], argv[4], argv[5]);
	if (argc == 3 && strcmp(argv[1], "empty") == 0) {
		struct pp_profile *p =
		    pp_profile_new(cpu_types, 2, &cpu_period, 10000000);
		int rc = render(p, 1, 6, argv[2]);
		pp_profile_free(p);
		return rc;
	}
	if (argc == 5 && strcmp(argv[1], "synthetic") == 0)
		return synthetic(atol(argv[2]), atol(argv[3]), argv[4]);
	fprintf(stderr, "usage: see the comment at the top of symtest.c\n");
	return 2;
}

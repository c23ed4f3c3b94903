/*
 * bench_profile: what it costs to turn stacks into a served profile.
 *
 * For 1k, 10k and 100k unique stacks of depth 30 made of real code
 * addresses (leaves spread over libc's text, callers from this program and
 * libc, so symbolization does real work), it times:
 *   build   adding every stack to the model (twice: the second pass only
 *           aggregates)
 *   cold    symbolize + encode + gzip with an empty symbol cache (includes
 *           reading the mappings and opening the ELF/DWARF files)
 *   warm    the same with the cache filled by the previous request, at
 *           gzip level 1 (what the agent serves) and 6 (the level of the Go
 *           peer, whose profile also has a function and a line per location)
 *   addr    encode + gzip of addresses alone (no symbols, no mappings)
 * and prints one table row per size; bench/run.sh prints the Go peer next
 * to it. A second table times every other format of the same profile, warm
 * (render.h: text, folded, JSON, legacy), with its size. Each time is the
 * median of 5 runs.
 *
 * Usage: bench_profile [SIZES...]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "profile/model.h"
#include "profile/pprof.h"
#include "profile/render.h"
#include "symbols/symbols.h"

#define DEPTH 30
#define CALLERS 2000
#define RUNS 5

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v)
{
	qsort(v, RUNS, sizeof *v, cmp_double);
	return v[RUNS / 2];
}

/* Render p (symbolized or not) at a gzip level; the time it took, and the
 * size when bytes is given. */
static int timed_render(struct pp_profile *p, int symbolize, int level,
                        double *ms, size_t *bytes)
{
	struct pp_buf out = {0};
	double t = now_ms();
	struct pp_symtab *st = NULL;
	if (symbolize && pp_symtab_acquire(&st))
		st = NULL;
	if ((symbolize && !st) || pp_pprof_render(p, st, level, &out))
		return -1;
	if (st)
		pp_symtab_release(st);
	*ms = now_ms() - t;
	if (bytes)
		*bytes = out.len;
	pp_buf_free(&out);
	return 0;
}

static const enum pp_format formats[] = {PP_FORMAT_TEXT, PP_FORMAT_FOLDED,
                                         PP_FORMAT_JSON, PP_FORMAT_LEGACY};
#define NFORMATS (sizeof formats / sizeof formats[0])

static int timed_format(struct pp_profile *p, enum pp_format f, double *ms,
                        size_t *bytes)
{
	struct pp_render_opts o = {.format = f, .sample_index = -1, .top = 50};
	char *body;
	double t = now_ms();
	if (pp_render_body(p, &o, &body, bytes))
		return -1;
	*ms = now_ms() - t;
	free(body);
	return 0;
}

static const struct pp_mapping *find(const struct pp_mappings *m,
                                     const char *needle)
{
	for (size_t i = 0; i < m->n; i++)
		if (strstr(m->v[i].path, needle))
			return &m->v[i];
	return NULL;
}

int main(int argc, char **argv)
{
	long sizes[8] = {1000, 10000, 100000};
	int nsizes = 3;
	struct pp_mappings maps;
	static const struct pp_value_type types[] = {{"samples", "count"},
	                                             {"cpu", "nanoseconds"}};

	if (argc > 1) {
		nsizes = 0;
		for (int i = 1; i < argc && nsizes < 8; i++)
			sizes[nsizes++] = atol(argv[i]);
	}
	if (pp_mappings_read(&maps, NULL)) {
		fprintf(stderr, "cannot read mappings\n");
		return 1;
	}
	const struct pp_mapping *libc = find(&maps, "libc.so");
	const struct pp_mapping *self = find(&maps, "bench_profile");
	if (!libc || !self) {
		fprintf(stderr, "libc or the bench binary not mapped\n");
		return 1;
	}
	uintptr_t callers[CALLERS];
	for (int i = 0; i < CALLERS; i++) {
		const struct pp_mapping *m = i % 2 ? libc : self;
		callers[i] = m->start + (uintptr_t)(((uint64_t)i * 7919) %
		                                    (m->limit - m->start));
	}

	double fmt_ms[8][NFORMATS];
	size_t fmt_bytes[8][NFORMATS];

	printf("| stacks | build ms | cold ms | warm ms (gzip 1) | bytes "
	       "| warm ms (gzip 6) | bytes | addr-only ms (gzip 1) |\n");
	printf("|---:|---:|---:|---:|---:|---:|---:|---:|\n");
	for (int si = 0; si < nsizes; si++) {
		long n = sizes[si];
		double build[RUNS], cold[RUNS], warm[RUNS], warm6[RUNS],
		    addr[RUNS];
		size_t bytes1 = 0, bytes6 = 0;
		double fmt[NFORMATS][RUNS];
		uintptr_t stride = (libc->limit - libc->start) / (uintptr_t)n;
		if (stride == 0)
			stride = 1;
		for (int run = 0; run < RUNS; run++) {
			uintptr_t pcs[DEPTH];
			double t = now_ms();
			struct pp_profile *p =
			    pp_profile_new(types, 2, &types[1], 10000000);
			for (int pass = 0; pass < 2; pass++) {
				for (long i = 0; i < n; i++) {
					pcs[0] =
					    libc->start + (uintptr_t)i * stride;
					for (int d = 1; d < DEPTH; d++)
						pcs[d] =
						    callers[((uint64_t)i * 7 +
						             (uint64_t)d * 13) %
						            CALLERS];
					int64_t v[2] = {1, 10000000};
					if (pp_profile_add(p, pcs, DEPTH, v,
					                   NULL, 0))
						return 1;
				}
			}
			build[run] = now_ms() - t;

			pp_symtab_shutdown(); /* cold: no cache, no Dwfl */
			if (timed_render(p, 1, 1, &cold[run], NULL) ||
			    timed_render(p, 1, 1, &warm[run], &bytes1) ||
			    timed_render(p, 1, 6, &warm6[run], &bytes6) ||
			    timed_render(p, 0, 1, &addr[run], NULL))
				return 1;
			for (size_t f = 0; f < NFORMATS; f++)
				if (timed_format(p, formats[f], &fmt[f][run],
				                 &fmt_bytes[si][f]))
					return 1;
			pp_profile_free(p);
		}
		printf(
		    "| %ld | %.1f | %.1f | %.1f | %zu | %.1f | %zu | %.1f |\n",
		    n, median(build), median(cold), median(warm), bytes1,
		    median(warm6), bytes6, median(addr));
		fflush(stdout);
		for (size_t f = 0; f < NFORMATS; f++)
			fmt_ms[si][f] = median(fmt[f]);
	}
	printf("\nThe other formats of the same profiles (warm cache; ms and "
	       "bytes):\n\n| stacks | text ms | bytes | folded ms | bytes | "
	       "json ms | bytes | legacy ms | bytes |\n"
	       "|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
	for (int si = 0; si < nsizes; si++) {
		printf("| %ld |", sizes[si]);
		for (size_t f = 0; f < NFORMATS; f++)
			printf(" %.1f | %zu |", fmt_ms[si][f],
			       fmt_bytes[si][f]);
		printf("\n");
	}
	pp_symtab_shutdown();
	pp_mappings_free(&maps);
	return 0;
}

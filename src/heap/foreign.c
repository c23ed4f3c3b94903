/*
 * The allocators' own heap dumps (foreign.h): two text formats into one
 * set of rows, and the pprof model made from them.
 *
 * jemalloc's prof.dump (heap_v2):
 *     heap_v2/PERIOD
 *       t*: CUROBJS: CURBYTES [ACCUMOBJS: ACCUMBYTES]     (the totals)
 *       tN: ...                                           (per thread)
 *     @ 0xPC 0xPC ...
 *       t*: CUROBJS: CURBYTES [ACCUMOBJS: ACCUMBYTES]     (this stack's)
 *       tN: ...
 *     (blank)
 *     MAPPED_LIBRARIES:
 *     (the /proc/self/maps text)
 * gperftools' heap sample or heap profile:
 *     heap profile: INUSE: BYTES [ALLOCS: BYTES] @ heap_v2/PERIOD
 *     INUSE: BYTES [ALLOCS: BYTES] @ 0xPC 0xPC ...
 *     MAPPED_LIBRARIES: ...
 * ("@ heapprofile" instead of heap_v2/PERIOD: the full heap profiler,
 * every allocation recorded.)
 * Context: agent.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heap/foreign.h"
#include "heap/tcmalloc.h"
#include "symbols/symbols.h"

/* Deeper stacks are refused (both allocators keep at most 128 frames). */
#define MAX_DEPTH 1024

void pp_foreign_dump_free(struct pp_foreign_dump *d)
{
	free(d->rows);
	free(d->pcs);
	memset(d, 0, sizeof *d);
}

struct cursor {
	const char *p, *end;
	unsigned line;
};

/* The next line (without its newline) into *s, *n; 0 at the end. */
static int next_line(struct cursor *c, const char **s, size_t *n)
{
	if (c->p >= c->end)
		return 0;
	const char *nl = memchr(c->p, '\n', (size_t)(c->end - c->p));
	*s = c->p;
	*n = (size_t)((nl ? nl : c->end) - c->p);
	c->p = nl ? nl + 1 : c->end;
	c->line++;
	return 1;
}

static const char *skip_spaces(const char *s, const char *end)
{
	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	return s;
}

/* A decimal or 0x-hex number at *s (spaces before it skipped). */
static int number(const char **s, const char *end, int base, uint64_t *v)
{
	const char *p = skip_spaces(*s, end);
	if (base == 16) {
		if (end - p < 3 || p[0] != '0' || (p[1] | 0x20) != 'x')
			return -1;
		p += 2;
	}
	uint64_t x = 0;
	const char *start = p;
	for (; p < end; p++) {
		unsigned d;
		if (*p >= '0' && *p <= '9')
			d = (unsigned)(*p - '0');
		else if (base == 16 && (*p | 0x20) >= 'a' && (*p | 0x20) <= 'f')
			d = (unsigned)((*p | 0x20) - 'a' + 10);
		else
			break;
		if (x > (UINT64_MAX - d) / (unsigned)base)
			return -1;
		x = x * (unsigned)base + d;
	}
	if (p == start)
		return -1;
	*s = p;
	*v = x;
	return 0;
}

static int expect(const char **s, const char *end, char ch)
{
	const char *p = skip_spaces(*s, end);
	if (p >= end || *p != ch)
		return -1;
	*s = p + 1;
	return 0;
}

/* "A: B [C: D]" */
static int counts(const char **s, const char *end, struct pp_foreign_row *r)
{
	return number(s, end, 10, &r->inuse_objs) || expect(s, end, ':') ||
	               number(s, end, 10, &r->inuse_bytes) ||
	               expect(s, end, '[') ||
	               number(s, end, 10, &r->alloc_objs) ||
	               expect(s, end, ':') ||
	               number(s, end, 10, &r->alloc_bytes) ||
	               expect(s, end, ']')
	           ? -1
	           : 0;
}

static int starts(const char *s, size_t n, const char *word)
{
	size_t k = strlen(word);
	return n >= k && memcmp(s, word, k) == 0;
}

static struct pp_foreign_row *new_row(struct pp_foreign_dump *d, size_t *cap)
{
	if (d->n == *cap) {
		size_t c = *cap ? *cap * 2 : 256;
		struct pp_foreign_row *v = realloc(d->rows, c * sizeof *v);
		if (!v)
			return NULL;
		d->rows = v;
		*cap = c;
	}
	struct pp_foreign_row *r = &d->rows[d->n++];
	memset(r, 0, sizeof *r);
	return r;
}

/* The PCs "0xA 0xB ..." from s to end, appended to d->pcs as row's
 * stack: 0, -EINVAL (not PCs, or too many) or -ENOMEM. */
static int stack(struct pp_foreign_dump *d, struct pp_foreign_row *row,
                 size_t *cap, const char *s, const char *end)
{
	row->first = (uint32_t)d->npcs;
	row->depth = 0;
	for (;;) {
		s = skip_spaces(s, end);
		if (s >= end)
			return 0;
		uint64_t pc;
		if (number(&s, end, 16, &pc) || row->depth >= MAX_DEPTH)
			return -EINVAL;
		if (d->npcs == *cap) {
			size_t c = *cap ? *cap * 2 : 4096;
			uintptr_t *v = realloc(d->pcs, c * sizeof *v);
			if (!v)
				return -ENOMEM;
			d->pcs = v;
			*cap = c;
		}
		d->pcs[d->npcs++] = (uintptr_t)pc;
		row->depth++;
	}
}

static int bad(struct pp_foreign_dump *d, const struct cursor *c,
               const char *what, char *err, size_t errlen)
{
	snprintf(err, errlen, "%s dump, line %u: %s", what, c->line,
	         "not in the format expected");
	pp_foreign_dump_free(d);
	return -EINVAL;
}

static int no_memory(struct pp_foreign_dump *d, char *err, size_t errlen)
{
	snprintf(err, errlen, "out of memory");
	pp_foreign_dump_free(d);
	return -ENOMEM;
}

/* A failed stack(): its error, said. */
static int failed(int rc, struct pp_foreign_dump *d, const struct cursor *c,
                  const char *what, char *err, size_t errlen)
{
	return rc == -ENOMEM ? no_memory(d, err, errlen)
	                     : bad(d, c, what, err, errlen);
}

int pp_foreign_parse_jemalloc(const char *text, size_t len,
                              struct pp_foreign_dump *d, char *err,
                              size_t errlen)
{
	struct cursor c = {text, text + len, 0};
	const char *s;
	size_t n, rcap = 0, pcap = 0;
	struct pp_foreign_row *row = NULL;
	uint64_t period;

	memset(d, 0, sizeof *d);
	if (!next_line(&c, &s, &n) || !starts(s, n, "heap_v2/"))
		return bad(d, &c, "jemalloc", err, errlen);
	s += 8;
	if (number(&s, s + n - 8, 10, &period))
		return bad(d, &c, "jemalloc", err, errlen);
	d->period = period;
	while (next_line(&c, &s, &n)) {
		const char *end = s + n;
		if (starts(s, n, "MAPPED_LIBRARIES:"))
			break;
		if (starts(s, n, "@")) {
			if (!(row = new_row(d, &rcap)))
				return no_memory(d, err, errlen);
			int rc = stack(d, row, &pcap, s + 1, end);
			if (rc)
				return failed(rc, d, &c, "jemalloc", err,
				              errlen);
			continue;
		}
		const char *p = skip_spaces(s, end);
		if (p == end)
			continue;
		if (starts(p, (size_t)(end - p), "t*:")) {
			/* The first t* (before any stack) is the totals. */
			p += 3;
			struct pp_foreign_row tmp;
			if (counts(&p, end, &tmp))
				return bad(d, &c, "jemalloc", err, errlen);
			if (row) {
				tmp.depth = row->depth;
				tmp.first = row->first;
				*row = tmp;
			}
			continue;
		}
		if (*p == 't')
			continue; /* one thread's share of the row above */
		return bad(d, &c, "jemalloc", err, errlen);
	}
	/* jemalloc keeps cumulative counts only with opt.prof_accum; its
	 * dump then has them nonzero somewhere. The caller knows better
	 * (mallctl) and may set has_alloc itself. */
	for (size_t i = 0; i < d->n && !d->has_alloc; i++)
		d->has_alloc = d->rows[i].alloc_objs != 0;
	return 0;
}

int pp_foreign_parse_gperftools(const char *text, size_t len,
                                struct pp_foreign_dump *d, char *err,
                                size_t errlen)
{
	struct cursor c = {text, text + len, 0};
	const char *s;
	size_t n, rcap = 0, pcap = 0;
	struct pp_foreign_row head;

	memset(d, 0, sizeof *d);
	if (!next_line(&c, &s, &n) || !starts(s, n, "heap profile:"))
		return bad(d, &c, "gperftools heap", err, errlen);
	const char *p = s + 13, *end = s + n;
	if (counts(&p, end, &head) || expect(&p, end, '@'))
		return bad(d, &c, "gperftools heap", err, errlen);
	p = skip_spaces(p, end);
	if (starts(p, (size_t)(end - p), "heap_v2/")) {
		p += 8;
		if (number(&p, end, 10, &d->period) || !d->period)
			return bad(d, &c, "gperftools heap", err, errlen);
	} else if (!starts(p, (size_t)(end - p), "heapprofile") &&
	           !starts(p, (size_t)(end - p), "heap"))
		return bad(d, &c, "gperftools heap", err, errlen);
	d->has_alloc = 1;
	while (next_line(&c, &s, &n)) {
		end = s + n;
		if (starts(s, n, "MAPPED_LIBRARIES:"))
			break;
		p = skip_spaces(s, end);
		if (p == end)
			continue;
		struct pp_foreign_row *row = new_row(d, &rcap);
		if (!row)
			return no_memory(d, err, errlen);
		int rc = counts(&p, end, row) || expect(&p, end, '@')
		             ? -EINVAL
		             : stack(d, row, &pcap, p, end);
		if (rc)
			return failed(rc, d, &c, "gperftools heap", err,
			              errlen);
	}
	return 0;
}

/* ---- the allocator's own frames ---------------------------------------- */

static const char *const entry_points[] = {"malloc",
                                           "calloc",
                                           "realloc",
                                           "reallocarray",
                                           "free",
                                           "cfree",
                                           "posix_memalign",
                                           "aligned_alloc",
                                           "memalign",
                                           "valloc",
                                           "pvalloc",
                                           "mallocx",
                                           "rallocx",
                                           "xallocx",
                                           "dallocx",
                                           "sdallocx",
                                           "nallocx",
                                           "malloc_default",
                                           "do_malloc",
                                           "do_calloc",
                                           "do_realloc",
                                           "do_memalign",
                                           "do_malloc_or_cpp_alloc",
                                           "newImpl",
                                           "handleOOM",
                                           NULL};

/* Prefixes of jemalloc's internal and prefixed names (je_, and Rust's
 * tikv-jemallocator's _rjem_), glibc's entry aliases, and C++'s allocation
 * functions; gperftools' own are matched by exact name (tcmalloc.c): a
 * prefix such as tc_ would take a host's tc_parse too. */
static const char *const prefixes[] = {
    "je_",    "_rjem_",  "prof_backtrace", "imalloc",
    "ialloc", "iralloc", "__libc_",        "operator new",
    "_Znw",   "_Zna",    "tcmalloc::",     "MallocHook",
    NULL};

int pp_foreign_is_allocator_frame(const char *name)
{
	if (!name)
		return 0;
	/* "tcmalloc::ThreadCache::Allocate(...)": compare up to '(' */
	size_t n = strcspn(name, "(");
	for (size_t i = 0; entry_points[i]; i++)
		if (strlen(entry_points[i]) == n &&
		    memcmp(name, entry_points[i], n) == 0)
			return 1;
	for (size_t i = 0; prefixes[i]; i++)
		if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
			return 1;
	return pp_tcmalloc_own_function(name);
}

static int allocator_frame(struct pp_symtab *st, uintptr_t pc, const char *lib)
{
	struct pp_symbol sym;
	if (!st || pc < 1)
		return 0;
	if (lib) {
		const struct pp_mapping *mp =
		    pp_mappings_find(pp_symtab_mappings(st), pc - 1);
		if (mp && mp->path && strcmp(mp->path, lib) == 0)
			return 1;
	}
	if (pp_symtab_lookup(st, pc - 1, &sym) || !sym.nframes)
		return 0;
	for (uint32_t i = 0; i < sym.nframes; i++)
		if (pp_foreign_is_allocator_frame(sym.frames[i].name) ||
		    pp_foreign_is_allocator_frame(sym.frames[i].system_name))
			return 1;
	return 0;
}

/* ---- the model --------------------------------------------------------- */

static const struct pp_value_type types4[] = {
    {"alloc_objects", "count"},
    {"alloc_space", "bytes"},
    {"inuse_objects", "count"},
    {"inuse_space", "bytes"},
};
static const struct pp_value_type period_type = {"space", "bytes"};

/* Unsampled objects and bytes: each block of the stack taken to be of the
 * stack's mean size, sampled with probability 1 - exp(-size / period). */
static void unsample(uint64_t objs, uint64_t bytes, uint64_t period, int64_t *o,
                     int64_t *b)
{
	double scale = 1.0;
	if (period > 1 && objs && bytes)
		scale = 1.0 / -expm1(-((double)bytes / (double)objs) /
		                     (double)period);
	*o = llround((double)objs * scale);
	*b = llround((double)bytes * scale);
}

int pp_foreign_model(const struct pp_foreign_dump *d, const char *note,
                     size_t max_bytes, uintptr_t allocator_lib,
                     struct pp_profile **out)
{
	const struct pp_value_type *types = d->has_alloc ? types4 : types4 + 2;
	size_t ntypes = d->has_alloc ? 4 : 2;
	struct pp_profile *p =
	    pp_profile_new(types, ntypes, &period_type, (int64_t)d->period);
	struct pp_symtab *st = NULL;
	int rc = 0;

	*out = NULL;
	if (!p)
		return -ENOMEM;
	p->leaf_is_return = 1;
	p->max_bytes = max_bytes;
	if (note)
		pp_profile_add_comment(p, note);
	/* Without the symbolizer the stacks keep the allocator's frames. */
	if (pp_symtab_acquire(&st))
		st = NULL;
	const char *lib = NULL;
	if (st && allocator_lib) {
		const struct pp_mapping *mp =
		    pp_mappings_find(pp_symtab_mappings(st), allocator_lib);
		if (mp && mp->is_file && !mp->is_main)
			lib = mp->path;
	}
	for (size_t i = 0; i < d->n && !rc; i++) {
		const struct pp_foreign_row *r = &d->rows[i];
		if (!r->inuse_objs && !r->alloc_objs)
			continue;
		const uintptr_t *pcs = d->pcs + r->first;
		uint32_t skip = 0;
		while (skip + 1 < r->depth &&
		       allocator_frame(st, pcs[skip], lib))
			skip++;
		int64_t v[4] = {0, 0, 0, 0},
		        *inuse = v + (d->has_alloc ? 2 : 0);
		if (d->has_alloc)
			unsample(r->alloc_objs, r->alloc_bytes, d->period,
			         &v[0], &v[1]);
		unsample(r->inuse_objs, r->inuse_bytes, d->period, &inuse[0],
		         &inuse[1]);
		rc = pp_profile_add(p, pcs + skip, r->depth - skip, v, NULL, 0);
	}
	if (st)
		pp_symtab_release(st);
	if (rc) {
		pp_profile_free(p);
		return rc;
	}
	*out = p;
	return 0;
}

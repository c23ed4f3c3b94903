/*
 * Images unloaded since (unloaded.h): what each dlclose took away, kept
 * for the samples taken while it was mapped. pp_unloaded_before and
 * pp_unloaded_after run on the thread that calls dlclose (they allocate,
 * the heap sampler told to look away by the caller, and take one short
 * lock the agent never holds while it waits for anything); the rest is
 * the agent's. The generation the handler reads is generation.h's.
 * Context: host.
 */
#include "unloaded.h"

#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbols.h"
#include "util/proc.h"

_Atomic uint32_t pp_unloaded_gen;

#define MAX_SEGS 4     /* executable PT_LOAD segments kept per image */
#define NOTES_MAX 1024 /* bytes of a PT_NOTE segment read for its build ID */

struct seg {
	uint64_t vaddr, memsz, offset;
};

struct image {
	uintptr_t addr;            /* dlpi_addr: its bias */
	char *name;                /* dlpi_name, copied */
	uintptr_t lo, hi;          /* its executable segments' range, loaded */
	uint64_t span_lo, span_hi; /* all its PT_LOAD segments' (vaddr) */
	struct seg seg[MAX_SEGS];
	unsigned nseg;
	char build_id[65];
	char *id; /* recorded: build_id, copied where it stays */
	/* Its identity while loaded: the loader's bias, program headers and
	 * name (pointers, never read). */
	const void *key_phdr, *key_name;
};

/* What was loaded before a dlclose: one per dlclose under way (a
 * destructor may dlclose too), newest first, each its thread's. Not in
 * TLS: the agent's TLS block is paid for at every dlopen of it. */
struct before {
	struct before *up;
	pthread_t thread;
	uint32_t gen;
	struct image *v;
	size_t n, cap;
	int oom;
};

/* The images recorded, in the order their dlcloses returned. Never freed
 * (the ghost mappings' strings point here): PP_UNLOADED_MAX at most. The
 * lock also guards pending. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct before *pending;
/* The images loaded as of the last dlclose, as read then: each dlclose
 * reads only what is new (each image read costs a few system calls:
 * checked copies). Their names are owned. */
static struct image *known;
static size_t nknown, known_cap;
static struct image *gone;
static size_t ngone, gone_cap;
static _Atomic uint64_t count, missed;
/* The newest generation any recorded image went away in (0: none). */
static _Atomic uint32_t newest_gen;
static uint32_t *gone_gen; /* by index */

static char *copy_name(const char *name)
{
	/* On the heap: a host thread's stack may be small. */
	char *buf = malloc(PATH_MAX), *out = NULL;
	size_t len = 0;
	if (!name || !buf) {
		free(buf);
		return name ? NULL : strdup("");
	}
	while (len < PATH_MAX && !out) {
		uintptr_t at = (uintptr_t)name + len;
		size_t n = 4096 - (at & 4095);
		if (n > PATH_MAX - len)
			n = PATH_MAX - len;
		if (pp_proc_copy_self(at, buf + len, n))
			break;
		if (memchr(buf + len, 0, n))
			out = strdup(buf);
		len += n;
	}
	free(buf);
	return out;
}

static int same_image(const struct image *a, uintptr_t addr, const void *phdr,
                      const void *name)
{
	return a->addr == addr && a->key_phdr == phdr && a->key_name == name;
}

/* A copy of the known image of this identity (its name copied), or 0. */
static int find_known(struct dl_phdr_info *info, struct image *out)
{
	int found = 0;
	pthread_mutex_lock(&mu);
	for (size_t k = 0; k < nknown && !found; k++) {
		if (!same_image(&known[k], info->dlpi_addr, info->dlpi_phdr,
		                info->dlpi_name))
			continue;
		*out = known[k];
		out->name = strdup(known[k].name);
		found = out->name ? 1 : -1;
	}
	pthread_mutex_unlock(&mu);
	return found;
}

static void add_known(const struct image *img)
{
	pthread_mutex_lock(&mu);
	if (nknown == known_cap) {
		size_t cap = known_cap ? known_cap * 2 : 64;
		struct image *v = realloc(known, cap * sizeof *v);
		if (!v) {
			pthread_mutex_unlock(&mu);
			return;
		}
		known = v;
		known_cap = cap;
	}
	known[nknown] = *img;
	known[nknown].name = strdup(img->name);
	if (known[nknown].name)
		nknown++;
	pthread_mutex_unlock(&mu);
}

static int add_image(struct before *b, const struct image *img)
{
	if (b->n == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 64;
		struct image *v = realloc(b->v, cap * sizeof *v);
		if (!v)
			return -1;
		b->v = v;
		b->cap = cap;
	}
	b->v[b->n++] = *img;
	return 0;
}

/* One loaded image as it is now: its executable segments and build ID
 * (as known when it was seen before). */
static int on_image(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct before *b = arg;
	struct image img;
	(void)size;
	int found = find_known(info, &img);
	if (found) {
		if (found < 0 || add_image(b, &img)) {
			if (found > 0)
				free(img.name);
			b->oom = 1;
			return 1;
		}
		return 0;
	}
	int phnum = info->dlpi_phnum;
	if (phnum <= 0 || phnum > 256)
		return 0;
	/* On the heap, as the notes below: a host thread's stack may be
	 * small (PTHREAD_STACK_MIN). */
	ElfW(Phdr) *phdr = malloc((size_t)phnum * sizeof *phdr + NOTES_MAX);
	if (!phdr) {
		b->oom = 1;
		return 1;
	}
	unsigned char *notes = (unsigned char *)(phdr + phnum);
	if (pp_proc_copy_self((uintptr_t)info->dlpi_phdr, phdr,
	                      (size_t)phnum * sizeof *phdr)) {
		free(phdr);
		return 0;
	}
	img = (struct image){.addr = info->dlpi_addr,
	                     .lo = UINTPTR_MAX,
	                     .span_lo = UINT64_MAX,
	                     .key_phdr = info->dlpi_phdr,
	                     .key_name = info->dlpi_name};
	for (int i = 0; i < phnum; i++) {
		const ElfW(Phdr) *ph = &phdr[i];
		if (ph->p_type == PT_LOAD) {
			/* As libdwfl places a module: its first segment
			 * aligned down. */
			uint64_t align = ph->p_align ? ph->p_align : 1;
			uint64_t lo = ph->p_vaddr & ~(align - 1);
			if (lo < img.span_lo)
				img.span_lo = lo;
			if (ph->p_vaddr + ph->p_memsz > img.span_hi)
				img.span_hi = ph->p_vaddr + ph->p_memsz;
		}
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) ||
		    img.nseg == MAX_SEGS)
			continue;
		img.seg[img.nseg++] =
		    (struct seg){ph->p_vaddr, ph->p_memsz, ph->p_offset};
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (lo < img.lo)
			img.lo = lo;
		if (lo + ph->p_memsz > img.hi)
			img.hi = lo + ph->p_memsz;
	}
	for (int i = 0; i < phnum && img.nseg && !img.build_id[0]; i++) {
		const ElfW(Phdr) *ph = &phdr[i];
		if (ph->p_type != PT_NOTE || ph->p_filesz > NOTES_MAX ||
		    pp_proc_copy_self(info->dlpi_addr + ph->p_vaddr, notes,
		                      ph->p_filesz))
			continue;
		pp_note_build_id(notes, ph->p_filesz, img.build_id,
		                 sizeof img.build_id);
	}
	free(phdr);
	if (!img.nseg)
		return 0;
	img.name = copy_name(info->dlpi_name);
	if (!img.name || add_image(b, &img)) {
		free(img.name);
		b->oom = 1;
		return 1;
	}
	add_known(&img);
	return 0;
}

void pp_unloaded_before(void)
{
	struct before *b = calloc(1, sizeof *b);
	/* A new generation first: a sample taken from here on may already
	 * see the image gone, or another in its place. */
	uint32_t gen = atomic_fetch_add(&pp_unloaded_gen, 1) + 1;
	if (!b) {
		atomic_fetch_add(&missed, 1);
		return;
	}
	b->gen = gen;
	b->thread = pthread_self();
	dl_iterate_phdr(on_image, b);
	pthread_mutex_lock(&mu);
	b->up = pending;
	pending = b;
	pthread_mutex_unlock(&mu);
}

struct present {
	const struct before *b;
	unsigned char *still; /* by index of b->v */
	struct image *now;    /* identities only */
	size_t n, cap;
	int oom;
};

/* The identities loaded now: the loader's own values, nothing read. */
static int on_present(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct present *p = arg;
	(void)size;
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 64;
		struct image *v = realloc(p->now, cap * sizeof *v);
		if (!v) {
			p->oom = 1;
			return 1;
		}
		p->now = v;
		p->cap = cap;
	}
	p->now[p->n++] = (struct image){.addr = info->dlpi_addr,
	                                .key_phdr = info->dlpi_phdr,
	                                .key_name = info->dlpi_name};
	return 0;
}

static int is_present(const struct present *p, const struct image *img)
{
	for (size_t k = 0; k < p->n; k++)
		if (same_image(img, p->now[k].addr, p->now[k].key_phdr,
		               p->now[k].key_name))
			return 1;
	return 0;
}

static void release(struct before *b)
{
	for (size_t i = 0; i < b->n; i++)
		free(b->v[i].name);
	free(b->v);
	free(b);
}

void pp_unloaded_after(void)
{
	pthread_t self = pthread_self();
	pthread_mutex_lock(&mu);
	struct before *b = NULL, **at = &pending;
	for (; *at; at = &(*at)->up) {
		if (pthread_equal((*at)->thread, self)) {
			b = *at;
			*at = b->up;
			break;
		}
	}
	pthread_mutex_unlock(&mu);
	if (!b)
		return;
	if (b->oom) {
		atomic_fetch_add(&missed, 1);
		release(b);
		return;
	}
	struct present p = {b, calloc(b->n + 1, 1), NULL, 0, 0, 0};
	if (p.still)
		dl_iterate_phdr(on_present, &p);
	if (!p.still || p.oom) {
		atomic_fetch_add(&missed, 1);
		free(p.still);
		free(p.now);
		release(b);
		return;
	}
	for (size_t i = 0; i < b->n; i++)
		p.still[i] = (unsigned char)is_present(&p, &b->v[i]);
	pthread_mutex_lock(&mu);
	/* The known images gone (by this dlclose or any other way) are read
	 * again should their identity come back. */
	for (size_t k = 0; k < nknown;) {
		if (is_present(&p, &known[k])) {
			k++;
			continue;
		}
		free(known[k].name);
		known[k] = known[--nknown];
	}
	for (size_t i = 0; i < b->n; i++) {
		if (p.still[i])
			continue;
		if (ngone == PP_UNLOADED_MAX) {
			atomic_fetch_add(&missed, 1);
			continue;
		}
		if (ngone == gone_cap) {
			size_t cap = gone_cap ? gone_cap * 2 : 16;
			struct image *v = realloc(gone, cap * sizeof *v);
			if (v)
				gone = v;
			uint32_t *g =
			    v ? realloc(gone_gen, cap * sizeof *g) : NULL;
			if (g)
				gone_gen = g;
			if (!v || !g) {
				atomic_fetch_add(&missed, 1);
				continue;
			}
			gone_cap = cap;
		}
		char *id = strdup(b->v[i].build_id);
		if (!id) {
			atomic_fetch_add(&missed, 1);
			continue;
		}
		gone[ngone] = b->v[i];
		gone[ngone].id = id;
		gone_gen[ngone++] = b->gen;
		b->v[i].name = NULL; /* kept */
		uint32_t newest = atomic_load(&newest_gen);
		if (b->gen > newest)
			atomic_store(&newest_gen, b->gen);
		atomic_store_explicit(&count, ngone, memory_order_release);
	}
	pthread_mutex_unlock(&mu);
	free(p.still);
	free(p.now);
	release(b);
}

uint64_t pp_unloaded_count(void)
{
	return atomic_load_explicit(&count, memory_order_acquire);
}

uint64_t pp_unloaded_missed(void)
{
	return atomic_load(&missed);
}

static uintptr_t delta_of(size_t k)
{
	return (uintptr_t)(PP_GHOST_BASE + k * PP_GHOST_SPAN) - gone[k].addr;
}

size_t pp_unloaded_take(uint64_t *seen, struct pp_unloaded_range *out,
                        size_t max)
{
	size_t n = 0;
	pthread_mutex_lock(&mu);
	while (*seen < ngone && n < max) {
		size_t k = (size_t)(*seen)++;
		out[n++] = (struct pp_unloaded_range){gone[k].lo, gone[k].hi,
		                                      delta_of(k), gone_gen[k],
		                                      gone[k].name};
	}
	pthread_mutex_unlock(&mu);
	return n;
}

int pp_unloaded_after_gen(uint32_t gen)
{
	return atomic_load_explicit(&newest_gen, memory_order_acquire) > gen;
}

uintptr_t pp_unloaded_ghost(uint32_t gen, uintptr_t pc)
{
	uintptr_t out = pc;
	uint32_t best = UINT32_MAX;
	pthread_mutex_lock(&mu);
	for (size_t k = 0; k < ngone; k++) {
		const struct image *g = &gone[k];
		if (gone_gen[k] > gen && gone_gen[k] < best && pc >= g->lo &&
		    pc < g->hi) {
			best = gone_gen[k];
			out = pc + delta_of(k);
		}
	}
	pthread_mutex_unlock(&mu);
	return out;
}

int pp_unloaded_append_mappings(struct pp_mappings *m)
{
	pthread_mutex_lock(&mu);
	size_t n = ngone, add = 0;
	for (size_t k = 0; k < n; k++)
		add += gone[k].nseg;
	/* The images are never changed once recorded: read them unlocked
	 * below (the array may move: copy what is needed now). */
	struct image *copy = n ? malloc(n * sizeof *copy) : NULL;
	if (copy)
		memcpy(copy, gone, n * sizeof *copy);
	pthread_mutex_unlock(&mu);
	if (!n)
		return 0;
	if (!copy)
		return -ENOMEM;
	struct pp_mapping *v = realloc(m->v, (m->n + add + 1) * sizeof *v);
	if (!v) {
		free(copy);
		return -ENOMEM;
	}
	m->v = v;
	long page = sysconf(_SC_PAGESIZE);
	uint64_t mask = page > 0 ? (uint64_t)page - 1 : 4095;
	unsigned id = (unsigned)m->n;
	for (size_t k = 0; k < n; k++) {
		const struct image *g = &copy[k];
		uintptr_t bias = (uintptr_t)(PP_GHOST_BASE + k * PP_GHOST_SPAN);
		/* Is the file at its path still the one that was loaded? */
		const char *changed = NULL;
		char now[80];
		if (g->id[0] &&
		    (pp_mappings_file_build_id(g->name, now, sizeof now) ||
		     strcmp(now, g->id) != 0))
			changed = "the file at its path is no longer the one "
			          "that was loaded (replaced or removed since "
			          "it was unloaded)";
		for (unsigned s = 0; s < g->nseg; s++) {
			const struct seg *sg = &g->seg[s];
			struct pp_mapping *mp = &m->v[m->n++];
			memset(mp, 0, sizeof *mp);
			mp->start = bias + (sg->vaddr & ~mask);
			mp->limit =
			    bias + ((sg->vaddr + sg->memsz + mask) & ~mask);
			mp->offset = sg->offset & ~mask;
			mp->path = mp->name = g->name;
			mp->build_id = g->id;
			mp->id = ++id;
			mp->is_file = g->name[0] == '/';
			mp->unloaded = 1;
			mp->ghost_bias = bias;
			mp->ghost_lo = bias + g->span_lo;
			mp->ghost_hi = bias + g->span_hi;
			mp->file_changed = changed;
		}
	}
	free(copy);
	return 0;
}

void pp_unloaded_forget_in_child(void)
{
	pthread_mutex_init(&mu, NULL);
	/* The parent's dlcloses under way are not the child's (left to
	 * leak); the child's own thread is not among them. What is known
	 * stays true: the child has the same images. */
	pending = NULL;
}

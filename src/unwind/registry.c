/*
 * The unwind-table registry, the agent's side (its readers, which the
 * sampling signal's handler calls, are registry_read.c).
 *
 * For every loaded image (dl_iterate_phdr, here in agent context) the
 * .eh_frame_hdr binary-search table is registered with libunwind as dynamic
 * unwind info (UNW_INFO_FORMAT_REMOTE_TABLE), which libunwind looks up
 * before it would call dl_iterate_phdr itself. The code ranges covered are
 * published as a sorted array behind an atomic pointer; replaced arrays and
 * cancelled entries are freed only once no handler is inside (a reader
 * count), so a handler never reads freed memory.
 * Context: agent.
 */
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <errno.h>
#include <libunwind.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "shim/heap_hot.h"
#include "shim/shim.h"
#include "unwind/cfi.h"
#include "unwind/frames.h"
#include "unwind/registry.h"
#include "unwind/registry_internal.h"
#include "unwind/unwind.h"
#include "util/fds.h"
#include "util/proc.h"

/* Readable segments kept per image; an image with more has its others read
 * with a checked copy. */
#define SEGS 6

struct image {
	uintptr_t hdr;    /* .eh_frame_hdr address: the identity of the image */
	uintptr_t lo, hi; /* executable code */
	uintptr_t rlo[SEGS], rhi[SEGS]; /* readable segments */
	int nr;
	uintptr_t table; /* its search table, and the number of entries */
	size_t count;
	unw_dyn_info_t *di;
	struct pp_frame_table *frames;
	int seen;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct image *images;
static size_t nimages, cap_images;
static unsigned long long last_adds, last_subs;
static int initialized;
static int users;  /* pp_unwind_init calls not yet matched by a shutdown */
static int forked; /* in a child of fork(): no shared cache */

/* Things replaced while a handler might still hold them, and how each is
 * freed. */
static struct retired {
	void *p;
	void (*free)(void *);
} * retired;
static size_t nretired, cap_retired;

/* dl_iterate_phdr is interposed by the light object (shim/dlclose.c). */
uint64_t pp_unwind_loader_avoided(void)
{
	return __atomic_load_n(&pp_shim.guard_hits, __ATOMIC_RELAXED);
}

int pp_unwind_guard_works(void)
{
	/* libunwind binds dl_iterate_phdr in the global scope: the guard
	 * holds only when that lookup finds the light object's definition. */
	void *self = __atomic_load_n(&pp_shim.iterate_self, __ATOMIC_ACQUIRE);
	return self && dlsym(RTLD_DEFAULT, "dl_iterate_phdr") == self;
}

/* Once, before the first capture: libunwind's accessors of the local
 * address space are a table it hands out (unw_get_accessors). */
static void install_read_checked(void)
{
	unw_accessors_t *a = unw_get_accessors(unw_local_addr_space);
	if (!a || a->access_mem == pp_registry_read_checked)
		return;
	pp_registry_libunwind_read = a->access_mem;
	__atomic_store_n(&a->access_mem, pp_registry_read_checked,
	                 __ATOMIC_RELEASE);
}

static void retire_with(void *p, void (*fn)(void *))
{
	if (!p)
		return;
	if (nretired == cap_retired) {
		size_t cap = cap_retired ? cap_retired * 2 : 16;
		struct retired *v = realloc(retired, cap * sizeof *v);
		if (!v)
			return; /* leak rather than free under a reader */
		retired = v;
		cap_retired = cap;
	}
	retired[nretired++] = (struct retired){p, fn};
}

static void retire(void *p)
{
	retire_with(p, free);
}

static void free_frames(void *t)
{
	pp_cfi_free(t);
}

static void retire_frames(struct pp_frame_table *t)
{
	retire_with(t, free_frames);
}

static void free_retired(void)
{
	/* Anything retired before this load of the reader count is out of
	 * reach of handlers that start from now on; if none is inside, none
	 * holds an old pointer. */
	if (atomic_load_explicit(&pp_registry_readers, memory_order_acquire) !=
	    0)
		return;
	for (size_t i = 0; i < nretired; i++)
		retired[i].free(retired[i].p);
	nretired = 0;
}

struct scan {
	struct image *found;
	size_t n, cap;
	int oom;
};

/* pp_proc_copy_self as pp_arch_copy_fn wants it: the bytes read. */
static size_t copy_self(uintptr_t addr, void *out, size_t n)
{
	return pp_proc_copy_self(addr, out, n) ? 0 : n;
}

static int on_image(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct scan *sc = arg;
	uintptr_t hdr = 0, lo = UINTPTR_MAX, hi = 0;
	uintptr_t rlo[SEGS], rhi[SEGS];
	int nr = 0;
	(void)size;

	/* The program headers and .eh_frame_hdr are in the image's own
	 * mapping, the file's pages: a file truncated since it was loaded
	 * (cp over a loaded plugin) has pages that raise SIGBUS, here on a
	 * host thread too (the dlclose wrapper). Copied with checked reads:
	 * an image that cannot be read gets no table, and unwinding stops
	 * there. */
	int phnum = info->dlpi_phnum;
	if (phnum <= 0)
		return 0;
	ElfW(Phdr) *phdr = malloc((size_t)phnum * sizeof *phdr);
	if (!phdr) {
		sc->oom = 1;
		return 1;
	}
	if (pp_proc_copy_self((uintptr_t)info->dlpi_phdr, phdr,
	                      (size_t)phnum * sizeof *phdr)) {
		free(phdr);
		return 0;
	}
	for (int i = 0; i < phnum; i++) {
		const ElfW(Phdr) *ph = &phdr[i];
		uintptr_t start = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_GNU_EH_FRAME)
			hdr = start;
		/* The loader maps p_filesz bytes of the file and zeroes up
		 * to p_memsz: all of it readable while the image is loaded. */
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_R) &&
		    nr < SEGS && ph->p_memsz) {
			rlo[nr] = start;
			rhi[nr++] = start + ph->p_memsz;
		}
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			if (start < lo)
				lo = start;
			if (start + ph->p_memsz > hi)
				hi = start + ph->p_memsz;
		}
	}
	free(phdr);
	if (hi == 0)
		return 0;
	/* Read the header now: the loader lock keeps the image mapped only
	 * while this callback runs (a dlclose could unmap it right after).
	 * Its fixed part is at most 4 + 8 + 4 bytes. */
	unsigned char h[16];
	uintptr_t table = 0, at;
	size_t count = 0, len;
	if (!hdr) {
		/* No CFI at all: only a signal trampoline the architecture
		 * finds by its code (arm64's vDSO) gets rows, and libunwind
		 * is not given the image. */
		if (!pp_arch_cfi_trampoline(lo, hi, copy_self, &at, &len))
			return 0;
	} else if (pp_proc_copy_self(hdr, h, sizeof h) ||
	           pp_cfi_parse_hdr(h, hdr, &table, &count)) {
		return 0; /* no usable table: unwinding stops there */
	}
	if (sc->n == sc->cap) {
		size_t cap = sc->cap ? sc->cap * 2 : 64;
		struct image *v = realloc(sc->found, cap * sizeof *v);
		if (!v) {
			sc->oom = 1;
			return 1;
		}
		sc->found = v;
		sc->cap = cap;
	}
	struct image *im = &sc->found[sc->n++];
	*im = (struct image){.hdr = hdr,
	                     .lo = lo,
	                     .hi = hi,
	                     .table = table,
	                     .count = count,
	                     .nr = nr};
	memcpy(im->rlo, rlo, sizeof rlo);
	memcpy(im->rhi, rhi, sizeof rhi);
	return 0;
}

static int count_changes(struct dl_phdr_info *info, size_t size, void *arg)
{
	unsigned long long *v = arg;
	(void)size;
	v[0] = info->dlpi_adds;
	v[1] = info->dlpi_subs;
	return 1; /* the counters are the same on every entry */
}

static int cmp_range(const void *a, const void *b)
{
	const struct range *x = a, *y = b;
	return (x->lo > y->lo) - (x->lo < y->lo);
}

static void refresh_images(void);

/* Also run on host threads (the dlclose wrapper, pullprof_start): what it
 * allocates is the agent's, never charged to the host in heap profiles. */
static void refresh_locked(void)
{
	int hidden = pp_heap_hide();
	refresh_images();
	pp_heap_unhide(hidden);
}

static void refresh_images(void)
{
	unsigned long long c[2] = {0, 0};
	struct scan sc = {0};
	int was_unloading = atomic_load(&pp_registry_unloads);

	dl_iterate_phdr(count_changes, c);
	if (initialized && c[0] == last_adds && c[1] == last_subs &&
	    !was_unloading) {
		free_retired();
		return;
	}
	dl_iterate_phdr(on_image, &sc);
	if (sc.oom) {
		free(sc.found);
		return;
	}
	for (size_t i = 0; i < nimages; i++)
		images[i].seen = 0;
	/* Register the new images. */
	for (size_t k = 0; k < sc.n; k++) {
		struct image *im = NULL;
		for (size_t i = 0; i < nimages; i++)
			/* The same image: same place, same table (another
			 * library loaded where one was unloaded is not). */
			if (images[i].hdr == sc.found[k].hdr &&
			    images[i].table == sc.found[k].table &&
			    images[i].count == sc.found[k].count &&
			    images[i].lo == sc.found[k].lo &&
			    images[i].hi == sc.found[k].hi) {
				im = &images[i];
				break;
			}
		if (im) {
			im->seen = 1;
			continue;
		}
		unw_dyn_info_t *di = calloc(1, sizeof *di);
		if (!di)
			continue;
		if (nimages == cap_images) {
			size_t cap = cap_images ? cap_images * 2 : 64;
			struct image *v = realloc(images, cap * sizeof *v);
			if (!v) {
				free(di);
				continue;
			}
			images = v;
			cap_images = cap;
		}
		di->start_ip = sc.found[k].lo;
		di->end_ip = sc.found[k].hi;
		di->format = UNW_INFO_FORMAT_REMOTE_TABLE;
		di->u.rti.segbase = sc.found[k].hdr;
		di->u.rti.table_data = sc.found[k].table;
		/* In words: each entry is two 4-byte offsets. */
		di->u.rti.table_len =
		    sc.found[k].count * 8 / sizeof(unw_word_t);
		if (sc.found[k].hdr)
			_U_dyn_register(di);
		images[nimages] = sc.found[k];
		images[nimages].di = di;
		images[nimages].frames =
		    sc.found[k].hdr
		        ? pp_cfi_build(sc.found[k].hdr, sc.found[k].table,
		                       sc.found[k].count, sc.found[k].lo,
		                       sc.found[k].hi)
		        : pp_cfi_build_bare(sc.found[k].lo, sc.found[k].hi);
		images[nimages].seen = 1;
		nimages++;
	}
	/* Cancel the ones that went away (dlclose). */
	for (size_t i = 0; i < nimages;) {
		if (images[i].seen) {
			i++;
			continue;
		}
		if (images[i].hdr)
			_U_dyn_cancel(images[i].di);
		retire(images[i].di);
		retire_frames(images[i].frames);
		images[i] = images[--nimages];
	}
	free(sc.found);

	size_t nread = 0;
	for (size_t i = 0; i < nimages; i++)
		nread += (size_t)images[i].nr;
	struct range_set *set =
	    malloc(sizeof *set + (nimages + nread + 1) * sizeof(struct range));
	if (set) {
		set->n = nimages;
		set->nread = nread;
		struct range *rd = set->r + nimages;
		for (size_t i = 0; i < nimages; i++) {
			set->r[i] = (struct range){images[i].lo, images[i].hi,
			                           images[i].frames};
			for (int k = 0; k < images[i].nr; k++)
				*rd++ = (struct range){images[i].rlo[k],
				                       images[i].rhi[k], NULL};
		}
		qsort(set->r, set->n, sizeof set->r[0], cmp_range);
		qsort(set->r + set->n, set->nread, sizeof set->r[0], cmp_range);
		retire(atomic_exchange_explicit(&pp_registry_published, set,
		                                memory_order_acq_rel));
	}
	last_adds = c[0];
	last_subs = c[1];
	initialized = 1;
	/* Only an unload that happened before this scan is accounted for. */
	if (was_unloading)
		atomic_compare_exchange_strong(&pp_registry_unloads,
		                               &was_unloading, 0);
	free_retired();
}

int pp_unwind_init(void)
{
	/* Per-thread caches where libunwind has them; Debian's falls back to
	 * one shared cache, whose lock libunwind holds with all signals
	 * blocked, so a handler never interrupts its own thread's holder. */
	unw_set_caching_policy(unw_local_addr_space,
	                       forked ? UNW_CACHE_NONE : UNW_CACHE_PER_THREAD);
	install_read_checked();
	/* libunwind (1.6, x86-64) opens a pipe at its first use, to check
	 * that addresses can be read, and keeps it: two descriptors for the
	 * rest of the process, counted as the agent's (/status), never used
	 * again once pp_registry_read_checked is its reader. */
	static atomic_int pipe_counted;
	if (!atomic_exchange(&pipe_counted, 1))
		pp_fds_add_kept(2);
	pthread_mutex_lock(&lock);
	refresh_locked();
	int ok = atomic_load(&pp_registry_published) != NULL &&
	         pp_unwind_stacks_init() == 0;
	if (ok)
		users++;
	pp_unwind_allow_trace(ok && pp_unwind_guard_works());
	pthread_mutex_unlock(&lock);
	return ok ? 0 : -ENOMEM;
}

void pp_unwind_refresh_after_unload(void)
{
	/* Never wait here: the agent may hold the lock while it waits for
	 * the loader lock, which this thread may hold (a dlclose from a
	 * library's constructor or destructor). */
	if (pthread_mutex_trylock(&lock) != 0)
		return;
	if (initialized)
		refresh_locked();
	pthread_mutex_unlock(&lock);
}

void pp_unwind_refresh(void)
{
	pthread_mutex_lock(&lock);
	refresh_locked();
	pthread_mutex_unlock(&lock);
}

void pp_unwind_shutdown(void)
{
	pthread_mutex_lock(&lock);
	if (users > 0 && --users > 0) {
		pthread_mutex_unlock(&lock);
		return; /* another profiler still unwinds */
	}
	for (size_t i = 0; i < nimages; i++) {
		if (images[i].hdr)
			_U_dyn_cancel(images[i].di);
		retire(images[i].di);
		retire_frames(images[i].frames);
	}
	nimages = 0;
	retire(atomic_exchange(&pp_registry_published, NULL));
	free_retired();
	free(images);
	images = NULL;
	cap_images = 0;
	/* The last user made sure no capture runs any more. */
	for (size_t i = 0; i < nretired; i++)
		retired[i].free(retired[i].p);
	free(retired);
	retired = NULL;
	nretired = cap_retired = 0;
	initialized = 0;
	pthread_mutex_unlock(&lock);
}

/*
 * fork(): the registry's lock is held across it, so the child never finds a
 * registration half done (libunwind's own list lock is only taken under
 * ours). libunwind's shared cache of unwind rules has a lock of its own,
 * which a parent thread may have held while unwinding at fork time: the
 * child stops using that cache (rules are then parsed on every step).
 */
static void atfork_prepare(void)
{
	pthread_mutex_lock(&lock);
}

static void atfork_parent(void)
{
	pthread_mutex_unlock(&lock);
}

static void atfork_child(void)
{
	forked = 1;
	pp_unwind_stacks_forget_in_child();
	if (initialized)
		unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_NONE);
	pthread_mutex_unlock(&lock);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void register_atfork_once(void)
{
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/* Prepare handlers run in the reverse order of registration. The agent
 * takes its lifecycle lock and then (pp_unwind_init) this one, so this one
 * must be registered first, to be taken after the lifecycle lock in fork()
 * too: the agent calls this before registering its own handlers, since a
 * constructor of this file is not guaranteed to run before the agent's
 * autostart constructor. */
void pp_registry_register_atfork(void)
{
	pthread_once(&atfork_once, register_atfork_once);
}

__attribute__((constructor)) static void register_atfork(void)
{
	pp_registry_register_atfork();
}

size_t pp_unwind_images(void)
{
	pthread_mutex_lock(&lock);
	size_t n = nimages;
	pthread_mutex_unlock(&lock);
	return n;
}

void pp_unwind_table_stats(struct pp_unwind_table_stats *out)
{
	memset(out, 0, sizeof *out);
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < nimages; i++) {
		const struct pp_frame_table *t = images[i].frames;
		if (!t) {
			out->images_without++;
			continue;
		}
		out->rows += t->n;
		out->unsupported_rows += t->unsupported;
		out->bytes += sizeof *t + t->n * sizeof t->rows[0] +
		              t->npages * sizeof t->pages[0];
	}
	pthread_mutex_unlock(&lock);
}

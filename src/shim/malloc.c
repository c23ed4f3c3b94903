/*
 * The malloc family, interposed. Every allocation of the
 * process comes through here, on any thread, inside any code.
 *
 * Each wrapper forwards to the next allocator in the chain (RTLD_NEXT: glibc,
 * or a jemalloc/tcmalloc the host loads after us), then spends a decrement
 * and a branch on the sampler's countdown; a free spends one load and a
 * branch on the filter. Everything else is in sample.c, off the fast path.
 *
 * Light object (src/shim/shim.h): the slow paths reach the sampler through
 * the agent's table; until the agent is loaded there is no sampler, and a
 * thread whose countdown runs out looks again RECHECK_BYTES later.
 *
 * Bootstrap: finding the next allocator calls dlsym, which may itself
 * allocate. While that runs, allocations are served from a static arena;
 * its blocks are marked in the free filter, so free() recognises them and
 * drops them (they are never handed to the real allocator), and realloc()
 * copies them out.
 * Context: host.
 */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* valgrind's client request (a few no-op instructions outside it). */
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

#include "pullprof.h"
#include "shim/agentmem.h"
#include "shim/heap_hot.h"
#include "shim/shim.h"
#include "util/env.h"

/* The state the wrappers read (pp_heap_tls, pp_heap_filter) is defined in
 * src/shim/shim.c, in the light object, and read by the agent's sampler
 * too. */

/* Sanitizer builds (configure --enable-asan/--enable-tsan) leave the
 * wrappers out: the sanitizer's runtime defines the malloc family too and is
 * first in the library list, linked or preloaded, so these would never be
 * called; forcing them ahead of it would hand pointers from one allocator to
 * another and hide the sanitizer's view of every allocation. The sampler and
 * the live table (sample.c, table.c) are still built and unit-tested. */
#ifndef PP_NO_HEAP_INTERPOSE

#define RA() ((uintptr_t)__builtin_return_address(0))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* A thread whose countdown ran out while no sampler is there looks again
 * after this many bytes (the agent's own sampler does the same while
 * sampling is off). */
#define RECHECK_BYTES (64 << 10)

static void set_bit(uint32_t i)
{
	atomic_fetch_or_explicit(&pp_heap_filter[i >> 6], 1ull << (i & 63),
	                         memory_order_release);
}

/* The arena's granules: marked in the filter for good, and remembered as
 * one range (it grows upwards from its first block) so that the agent's
 * table never clears them. */
static void protect_slots(uint32_t first, uint32_t count)
{
	uint32_t *bfirst = &pp_shim.heap_boot_first;
	uint32_t *bcount = &pp_shim.heap_boot_count;
	if (__atomic_load_n(bcount, __ATOMIC_ACQUIRE) == 0)
		__atomic_store_n(bfirst, first, __ATOMIC_RELAXED);
	uint32_t end = ((first - __atomic_load_n(bfirst, __ATOMIC_RELAXED)) &
	                (PP_HEAP_FILTER_BITS - 1)) +
	               count;
	for (uint32_t k = 0; k < count; k++)
		set_bit((first + k) & (PP_HEAP_FILTER_BITS - 1));
	if (end > __atomic_load_n(bcount, __ATOMIC_RELAXED))
		__atomic_store_n(bcount, end, __ATOMIC_RELEASE);
}

/* ---- the agent's slow paths ---------------------------------------------- */

static void *sampled(void *p, size_t size, uintptr_t from)
{
	const struct pp_agent_ops *ops = PP_AGENT_OPS();
	if (UNLIKELY(!ops)) {
		pp_heap_tls.countdown = RECHECK_BYTES;
		return p;
	}
	return ops->heap_sampled(p, size, from);
}

/* ---- bootstrap ----------------------------------------------------------- */

#define BOOT_SIZE (256u << 10)
static _Alignas(4096) unsigned char boot_area[BOOT_SIZE];
static atomic_size_t boot_used;
static atomic_int resolve_state; /* 0 not yet, 1 resolving, 2 done */

static int in_boot(const void *p)
{
	return (uintptr_t)p - (uintptr_t)boot_area < BOOT_SIZE;
}

/* A block of the arena: a 16-byte header holding the size, then the data
 * at the asked alignment (at least 16). NULL when the arena is used up. */
static void *boot_alloc(size_t n, size_t align)
{
	if (align < 16)
		align = 16;
	if (n > BOOT_SIZE || align > 4096)
		return NULL;
	size_t used = atomic_load(&boot_used), start, end;
	do {
		start = (used + 16 + align - 1) & ~(align - 1);
		end = (start + n + 15) & ~(size_t)15;
		if (end > BOOT_SIZE)
			return NULL;
	} while (!atomic_compare_exchange_weak(&boot_used, &used, end));
	unsigned char *p = boot_area + start;
	memcpy(p - sizeof n, &n, sizeof n);
	/* Blocks are never freed: the granules stay marked forever. */
	protect_slots(pp_heap_slot(p),
	              (uint32_t)(((uintptr_t)(boot_area + end - 1) >>
	                          PP_HEAP_GRANULE_SHIFT) -
	                         ((uintptr_t)p >> PP_HEAP_GRANULE_SHIFT) + 1));
	return p;
}

static size_t boot_size(const void *p)
{
	size_t n;
	memcpy(&n, (const unsigned char *)p - sizeof n, sizeof n);
	return n;
}

/* ---- the next allocator -------------------------------------------------- */

static void *first_malloc(size_t n);
static void first_free(void *p);
static void *first_calloc(size_t n, size_t m);
static void *first_realloc(void *p, size_t n);
static int first_posix_memalign(void **out, size_t a, size_t n);
static void *first_memalign(size_t a, size_t n);
static size_t first_usable(void *p);

/* memalign, aligned_alloc, valloc and pvalloc only when the allocator of
 * malloc defines them itself: glibc's would hand its own blocks to another
 * allocator's free. NULL means "emulate with posix_memalign". */
static struct pp_agentmem_entries next = {
    first_malloc,
    first_free,
    first_calloc,
    first_realloc,
    first_posix_memalign,
    first_memalign,
    NULL,
    NULL,
    NULL,
    first_usable,
};

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

/* The symbol `name` of the next object, when it lives in the same object
 * as that next object's malloc (or any object, when base is NULL). */
static void *next_sym(const char *name, const void *base)
{
	void *f = dlsym(RTLD_NEXT, name);
	Dl_info info;
	if (f && base && (!dladdr(f, &info) || info.dli_fbase != base))
		return NULL;
	return f;
}

static int memalign_glibc(void **out, size_t a, size_t n)
{
	void *p = __libc_memalign(a, n);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

static size_t usable_none(void *p)
{
	(void)p;
	return 0;
}

static void resolve(void)
{
	int expected = 0;
	if (!atomic_compare_exchange_strong(&resolve_state, &expected, 1)) {
		/* Another thread resolves: wait for it (the resolving thread
		 * itself never gets here, its nested calls use the arena). */
		while (atomic_load(&resolve_state) != 2)
			sched_yield();
		return;
	}
	void *m = dlsym(RTLD_NEXT, "malloc");
	Dl_info info;
	const void *base = m && dladdr(m, &info) ? info.dli_fbase : NULL;
	if (m && base) {
		next.malloc = (void *(*)(size_t))m;
		next.free = (void (*)(void *))next_sym("free", NULL);
		next.calloc =
		    (void *(*)(size_t, size_t))next_sym("calloc", NULL);
		next.realloc =
		    (void *(*)(void *, size_t))next_sym("realloc", NULL);
		next.posix_memalign =
		    (int (*)(void **, size_t, size_t))next_sym("posix_memalign",
		                                               NULL);
		next.memalign =
		    (void *(*)(size_t, size_t))next_sym("memalign", base);
		next.aligned_alloc =
		    (void *(*)(size_t, size_t))next_sym("aligned_alloc", base);
		next.valloc = (void *(*)(size_t))next_sym("valloc", base);
		next.pvalloc = (void *(*)(size_t))next_sym("pvalloc", base);
		next.usable =
		    (size_t(*)(void *))next_sym("malloc_usable_size", NULL);
	}
	/* No next object (a fully static link): glibc's own entry points. */
	if (!m || !base || !next.free || !next.calloc || !next.realloc) {
		next.malloc = __libc_malloc;
		next.free = __libc_free;
		next.calloc = __libc_calloc;
		next.realloc = __libc_realloc;
		next.posix_memalign = memalign_glibc;
		next.memalign = __libc_memalign;
		next.aligned_alloc = NULL;
		next.valloc = NULL;
		next.pvalloc = NULL;
		next.usable = NULL;
	}
	if (!next.posix_memalign)
		next.posix_memalign = memalign_glibc;
	if (!next.usable)
		next.usable = usable_none;
	atomic_store(&resolve_state, 2);
}

/* The first call of each entry: resolve, or serve from the arena when this
 * is dlsym allocating during the resolution. */
static int resolving_here(void)
{
	if (atomic_load(&resolve_state) == 1) {
		/* Nested in dlsym, or another thread during the few
		 * microseconds of resolution: the arena serves both. */
		return 1;
	}
	resolve();
	return 0;
}

static void *first_malloc(size_t n)
{
	return resolving_here() ? boot_alloc(n, 16) : next.malloc(n);
}

static void first_free(void *p)
{
	if (in_boot(p))
		return;
	if (!resolving_here())
		next.free(p);
}

static void *first_calloc(size_t n, size_t m)
{
	size_t bytes;
	if (!resolving_here())
		return next.calloc(n, m);
	if (__builtin_mul_overflow(n, m, &bytes))
		return NULL;
	return boot_alloc(bytes, 16); /* static memory: already zero */
}

static void *first_realloc(void *p, size_t n)
{
	if (!resolving_here())
		return next.realloc(p, n);
	void *q = boot_alloc(n, 16);
	if (q && p)
		memcpy(q, p, in_boot(p) && boot_size(p) < n ? boot_size(p) : n);
	return q;
}

static int first_posix_memalign(void **out, size_t a, size_t n)
{
	if (!resolving_here())
		return next.posix_memalign(out, a, n);
	void *p = boot_alloc(n, a);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

static void *first_memalign(size_t a, size_t n)
{
	if (!resolving_here())
		return next.memalign(a, n);
	return boot_alloc(n, a);
}

static size_t first_usable(void *p)
{
	if (in_boot(p))
		return boot_size(p);
	if (resolving_here())
		return 0; /* nothing but the arena has been handed out */
	return next.usable(p);
}

/* ---- the agent's threads' own allocator ---------------------------------- */

/* The agent's start (src/agent.c, through pp_shim.agentmem_enable), before
 * its first thread: 1 when its threads allocate here from now on, 0 when
 * the next allocator is not glibc's (jemalloc and tcmalloc keep no 64 MiB
 * arena a thread) or an environment variable says not to. Never undone:
 * blocks handed out stay recognised. */
static atomic_int am_state; /* 0 not asked, 1 on, 2 off */

static int am_child_registered;

static void am_child(void)
{
	pp_agentmem_forget_in_child();
}

int pp_heap_agentmem_enable(void)
{
	int st = atomic_load(&am_state);
	if (st)
		return st == 1;
	if (atomic_load(&resolve_state) != 2)
		resolve();
	const char *off = pp_env_get("PULLPROF_AGENT_MALLOC");
	int glibc_next =
	    next.malloc == __libc_malloc && next.free == __libc_free &&
	    next.calloc == __libc_calloc && next.realloc == __libc_realloc &&
	    next.memalign && next.aligned_alloc && next.valloc &&
	    next.pvalloc && next.posix_memalign != memalign_glibc &&
	    next.usable != usable_none;
	/* Under valgrind, whose allocator stands behind glibc's names: the
	 * word before a block is its redzone there (memcheck reports every
	 * free's look at it), and its own books have no arenas to spare. */
	if (RUNNING_ON_VALGRIND)
		glibc_next = 0;
	if (!glibc_next || (off && strcmp(off, "glibc") == 0)) {
		atomic_store(&am_state, 2);
		return 0;
	}
	if (!am_child_registered) {
		am_child_registered = 1;
		pthread_atfork(NULL, NULL, am_child);
	}
	struct pp_agentmem_entries e = next;
	pp_agentmem_wrap(&e);
	/* Readers see either entry: both handle every block the other
	 * hands out until the first agent thread runs. */
	__atomic_store_n(&next.free, e.free, __ATOMIC_RELEASE);
	__atomic_store_n(&next.usable, e.usable, __ATOMIC_RELEASE);
	__atomic_store_n(&next.realloc, e.realloc, __ATOMIC_RELEASE);
	__atomic_store_n(&next.memalign, e.memalign, __ATOMIC_RELEASE);
	__atomic_store_n(&next.aligned_alloc, e.aligned_alloc,
	                 __ATOMIC_RELEASE);
	__atomic_store_n(&next.valloc, e.valloc, __ATOMIC_RELEASE);
	__atomic_store_n(&next.pvalloc, e.pvalloc, __ATOMIC_RELEASE);
	__atomic_store_n(&next.posix_memalign, e.posix_memalign,
	                 __ATOMIC_RELEASE);
	__atomic_store_n(&next.calloc, e.calloc, __ATOMIC_RELEASE);
	__atomic_store_n(&next.malloc, e.malloc, __ATOMIC_RELEASE);
	atomic_store(&am_state, 1);
	return 1;
}

void pp_heap_agentmem_stats(struct pp_agentmem_stats *out)
{
	pp_agentmem_stats(out);
	out->on = atomic_load(&am_state) == 1;
}

/* ---- the wrappers -------------------------------------------------------- */

/* n bytes off the countdown: true while it is not below zero. The store
 * and the test apart, so that the compiler makes them one subtraction from
 * the TLS word and a branch on its sign (3 instructions instead of 5). */
#define COUNT_DOWN(n)                                                          \
	(pp_heap_tls.countdown -= (int64_t)(n),                                \
	 LIKELY(pp_heap_tls.countdown >= 0))

/* The allocation of n bytes (made by `call`) uses up part of the countdown;
 * the rest is the sampler's. Counting first makes the common case a tail
 * call into the next allocator (no frame of ours on the way back). The
 * allocation that uses the countdown up is made by `slow`, a function of
 * its own (SLOW): with the call and the sampling inside the wrapper, the
 * compiler saved registers and made a frame on every call (the common path
 * was 14 instructions instead of 7). */
#define ALLOCATE(call, n, slow)                                                \
	do {                                                                   \
		if (COUNT_DOWN(n))                                             \
			return call;                                           \
		return slow;                                                   \
	} while (0)

/* A wrapper's slow path `name`: `call` (of the parameters listed after n),
 * then the sampler; `from` is the wrapper's return address. */
#define SLOW(name, call, n, ...)                                               \
	static __attribute__((noinline, cold)) void *name(__VA_ARGS__,         \
	                                                  uintptr_t from)      \
	{                                                                      \
		return sampled(call, (n), from);                               \
	}

SLOW(malloc_slow, next.malloc(n), n, size_t n)

PULLPROF_API void *malloc(size_t n)
{
	ALLOCATE(next.malloc(n), n, malloc_slow(n, RA()));
}

static void free_hit(void *p)
{
	if (!p || in_boot(p))
		return; /* free(NULL); the arena's memory is never given back */
	const struct pp_agent_ops *ops = PP_AGENT_OPS();
	if (ops) /* a sampled block: only the agent marks them */
		ops->heap_free_hit(p);
	next.free(p);
}

PULLPROF_API void free(void *p)
{
	if (UNLIKELY(pp_heap_filter_hit(p))) {
		free_hit(p);
		return;
	}
	next.free(p);
}

SLOW(calloc_slow, next.calloc(n, m), bytes, size_t n, size_t m, size_t bytes)

PULLPROF_API void *calloc(size_t n, size_t m)
{
	size_t bytes;
	if (UNLIKELY(__builtin_mul_overflow(n, m, &bytes)))
		return next.calloc(n, m); /* NULL: it checks too */
	ALLOCATE(next.calloc(n, m), bytes, calloc_slow(n, m, bytes, RA()));
}

static void *realloc_hit(void *old, size_t n, uintptr_t from)
{
	const struct pp_agent_ops *ops = PP_AGENT_OPS();
	void *p;
	if (in_boot(old)) {
		/* Out of the arena into the real allocator. */
		size_t have = boot_size(old);
		p = next.malloc(n);
		if (p)
			memcpy(p, old, have < n ? have : n);
	} else if (ops) {
		struct pp_heap_taken t;
		ops->heap_take(old, &t);
		p = next.realloc(old, n);
		/* NULL for n > 0 means it failed and old is still there;
		 * realloc(old, 0) may free old and answer NULL. */
		ops->heap_settle(&t, p != NULL || n == 0);
	} else {
		p = next.realloc(old, n);
	}
	if (COUNT_DOWN(n))
		return p;
	return sampled(p, n, from);
}

SLOW(realloc_slow, next.realloc(old, n), n, void *old, size_t n)

PULLPROF_API void *realloc(void *old, size_t n)
{
	if (UNLIKELY(pp_heap_filter_hit(old)))
		return realloc_hit(old, n, RA());
	ALLOCATE(next.realloc(old, n), n, realloc_slow(old, n, RA()));
}

PULLPROF_API void *reallocarray(void *old, size_t n, size_t m)
{
	size_t bytes;
	if (__builtin_mul_overflow(n, m, &bytes)) {
		errno = ENOMEM;
		return NULL;
	}
	/* Not the next allocator's reallocarray: glibc's would call its own
	 * realloc on another allocator's block. */
	if (UNLIKELY(pp_heap_filter_hit(old)))
		return realloc_hit(old, bytes, RA());
	ALLOCATE(next.realloc(old, bytes), bytes,
	         realloc_slow(old, bytes, RA()));
}

PULLPROF_API int posix_memalign(void **out, size_t a, size_t n)
{
	int rc = next.posix_memalign(out, a, n);
	if (rc)
		return rc;
	if (COUNT_DOWN(n))
		return 0;
	sampled(*out, n, RA());
	return 0;
}

/* memalign and friends through posix_memalign, for allocators that lack
 * them: glibc's semantics (any alignment, rounded up to a power of two). */
static void *emulate_memalign(size_t a, size_t n)
{
	void *p;
	size_t al = sizeof(void *);
	while (al < a && al < ((size_t)1 << 62))
		al <<= 1;
	int rc = next.posix_memalign(&p, al, n);
	if (rc) {
		errno = rc;
		return NULL;
	}
	return p;
}

#define MEMALIGN(a, n)                                                         \
	(next.memalign ? next.memalign(a, n) : emulate_memalign(a, n))
SLOW(memalign_slow, MEMALIGN(a, n), n, size_t a, size_t n)

PULLPROF_API void *memalign(size_t a, size_t n)
{
	ALLOCATE(MEMALIGN(a, n), n, memalign_slow(a, n, RA()));
}

#define ALIGNED_ALLOC(a, n)                                                    \
	(next.aligned_alloc ? next.aligned_alloc(a, n) : emulate_memalign(a, n))
SLOW(aligned_alloc_slow, ALIGNED_ALLOC(a, n), n, size_t a, size_t n)

PULLPROF_API void *aligned_alloc(size_t a, size_t n)
{
	ALLOCATE(ALIGNED_ALLOC(a, n), n, aligned_alloc_slow(a, n, RA()));
}

#define VALLOC(n)                                                              \
	(next.valloc ? next.valloc(n)                                          \
	             : emulate_memalign((size_t)getpagesize(), n))
SLOW(valloc_slow, VALLOC(n), n, size_t n)

PULLPROF_API void *valloc(size_t n)
{
	ALLOCATE(VALLOC(n), n, valloc_slow(n, RA()));
}

SLOW(pvalloc_slow, next.pvalloc(n), n, size_t n)
/* Without the allocator's pvalloc: `rounded` bytes at page alignment. */
SLOW(pvalloc_emulated_slow, emulate_memalign(page, rounded), n, size_t page,
     size_t rounded, size_t n)

PULLPROF_API void *pvalloc(size_t n)
{
	size_t page = (size_t)getpagesize();
	if (next.pvalloc)
		ALLOCATE(next.pvalloc(n), n, pvalloc_slow(n, RA()));
	size_t rounded;
	if (__builtin_add_overflow(n, page - 1, &rounded)) {
		errno = ENOMEM;
		return NULL;
	}
	rounded &= ~(page - 1);
	if (!rounded)
		rounded = page;
	ALLOCATE(emulate_memalign(page, rounded), n,
	         pvalloc_emulated_slow(page, rounded, n, RA()));
}

PULLPROF_API size_t malloc_usable_size(void *p)
{
	if (!p)
		return 0;
	if (UNLIKELY(in_boot(p)))
		return boot_size(p);
	return next.usable(p);
}

/* ---- C++'s operator new and delete ------------------------------------- */

/*
 * libstdc++'s (and libc++'s) operator new calls malloc, so what C++ code
 * allocates reaches the wrappers above. An allocator that defines operator
 * new itself (a shared jemalloc, tcmalloc or mimalloc) would take it all
 * past them, so pullprof defines the operators too. Behind the C++ runtime
 * or an allocator they take the memory from malloc (this file's: sampled
 * once, the runtime's or the allocator's malloc behind) and give it back
 * with free: what the runtime's own operators do, one call shorter, and
 * the same allocator either way. Calling an allocator's own new and
 * sampling it here instead counted some blocks twice (jemalloc's new calls
 * malloc itself on its slower paths). When malloc has nothing, the next
 * operator new is asked: it runs the new-handler and throws
 * std::bad_alloc, which passes through these frames (they have unwind
 * tables and nothing to clean up). Behind anything else (a library's own
 * operators, which may keep books of their own) they only forward.
 */
enum {
	NEW,
	NEW_ARRAY,
	NEW_NOTHROW,
	NEW_ARRAY_NOTHROW,
	NEW_ALIGNED,
	NEW_ARRAY_ALIGNED,
	NEW_ALIGNED_NOTHROW,
	NEW_ARRAY_ALIGNED_NOTHROW,
	DELETE,
	DELETE_ARRAY,
	DELETE_SIZED,
	DELETE_ARRAY_SIZED,
	DELETE_NOTHROW,
	DELETE_ARRAY_NOTHROW,
	DELETE_ALIGNED,
	DELETE_ARRAY_ALIGNED,
	DELETE_SIZED_ALIGNED,
	DELETE_ARRAY_SIZED_ALIGNED,
	DELETE_ALIGNED_NOTHROW,
	DELETE_ARRAY_ALIGNED_NOTHROW,
	CXX_OPS
};

/* The Itanium C++ ABI's names (size_t is unsigned long: "m"). */
static const char *const cxx_names[CXX_OPS] = {
    "_Znwm",
    "_Znam",
    "_ZnwmRKSt9nothrow_t",
    "_ZnamRKSt9nothrow_t",
    "_ZnwmSt11align_val_t",
    "_ZnamSt11align_val_t",
    "_ZnwmSt11align_val_tRKSt9nothrow_t",
    "_ZnamSt11align_val_tRKSt9nothrow_t",
    "_ZdlPv",
    "_ZdaPv",
    "_ZdlPvm",
    "_ZdaPvm",
    "_ZdlPvRKSt9nothrow_t",
    "_ZdaPvRKSt9nothrow_t",
    "_ZdlPvSt11align_val_t",
    "_ZdaPvSt11align_val_t",
    "_ZdlPvmSt11align_val_t",
    "_ZdaPvmSt11align_val_t",
    "_ZdlPvSt11align_val_tRKSt9nothrow_t",
    "_ZdaPvSt11align_val_tRKSt9nothrow_t",
};

static void *cxx_next[CXX_OPS];
/* 0: not resolved yet; CXX_MALLOC: the next operators are the C++
 * runtime's or an allocator's (it defines malloc too), or there are none:
 * malloc and free serve here; CXX_FORWARD: another library's, called. One
 * word, so that the common path reads one. */
enum { CXX_MALLOC = 1, CXX_FORWARD = 2 };
static atomic_int cxx_mode;
static atomic_int cxx_resolving;

static __attribute__((noinline)) int cxx_resolve(void)
{
	int expected = 0;
	if (!atomic_compare_exchange_strong(&cxx_resolving, &expected, 1)) {
		int m;
		while (!(m = atomic_load(&cxx_mode)))
			sched_yield();
		return m;
	}
	for (int i = 0; i < CXX_OPS; i++)
		cxx_next[i] = dlsym(RTLD_NEXT, cxx_names[i]);
	int own = 1;
	Dl_info info;
	if (cxx_next[NEW] && dladdr(cxx_next[NEW], &info) && info.dli_fname) {
		const char *base = strrchr(info.dli_fname, '/');
		base = base ? base + 1 : info.dli_fname;
		void *h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
		void *m = h ? dlsym(h, "malloc") : NULL;
		Dl_info mi;
		own = strncmp(base, "libstdc++.so", 12) == 0 ||
		      strncmp(base, "libc++.so", 9) == 0 ||
		      (m && dladdr(m, &mi) && mi.dli_fbase == info.dli_fbase);
		if (h)
			dlclose(h);
	}
	int mode = own ? CXX_MALLOC : CXX_FORWARD;
	atomic_store(&cxx_mode, mode);
	return mode;
}

static inline int cxx_mode_now(void)
{
	int m = atomic_load_explicit(&cxx_mode, memory_order_acquire);
	return LIKELY(m != 0) ? m : cxx_resolve();
}

extern int pp_heap_self_posix_memalign(void **out, size_t a, size_t n)
    __attribute__((alias("posix_memalign"), visibility("hidden"),
                   copy(posix_memalign)));

/* A macro, not a function (not even an inlined one, which the debug
 * information would still name in the stack): the sample's stack starts at
 * the operator. p: a void * variable for the result. */
#define CXX_ALIGNED(p, n, al)                                                  \
	(pp_heap_self_posix_memalign(                                          \
	     &(p), (al) < sizeof(void *) ? sizeof(void *) : (al),              \
	     (n) ? (n) : 1)                                                    \
	     ? NULL                                                            \
	     : (p))

/* This file's malloc and free, called without the PLT (their
 * attributes copied, as an alias must promise what its target does). */
extern void *pp_heap_self_malloc(size_t n)
    __attribute__((alias("malloc"), visibility("hidden"), copy(malloc)));
extern void pp_heap_self_free(void *p)
    __attribute__((alias("free"), visibility("hidden"), copy(free)));

/* malloc had nothing: the next operator decides (new-handler, throw), or
 * with none at all, abort as an unhandled std::bad_alloc would. */
static void *cxx_none(void *op, size_t n)
{
	if (!op)
		abort();
	return ((void *(*)(size_t))op)(n);
}

#define CXX_NEW(name, op)                                                      \
	PULLPROF_API void *name(size_t n);                                     \
	PULLPROF_API void *name(size_t n)                                      \
	{                                                                      \
		if (LIKELY(cxx_mode_now() == CXX_MALLOC)) {                    \
			void *p = pp_heap_self_malloc(n);                      \
			return LIKELY(p != NULL) ? p                           \
			                         : cxx_none(cxx_next[op], n);  \
		}                                                              \
		return ((void *(*)(size_t))cxx_next[op])(n);                   \
	}
#define CXX_NEW_NOTHROW(name, op)                                              \
	PULLPROF_API void *name(size_t n, const void *nt);                     \
	PULLPROF_API void *name(size_t n, const void *nt)                      \
	{                                                                      \
		typedef void *(*fn)(size_t, const void *);                     \
		void *f;                                                       \
		if (LIKELY(cxx_mode_now() == CXX_MALLOC)) {                    \
			void *p = pp_heap_self_malloc(n);                      \
			if (LIKELY(p != NULL) || !(f = cxx_next[op]))          \
				return p;                                      \
			return ((fn)f)(n, nt);                                 \
		}                                                              \
		return ((fn)cxx_next[op])(n, nt);                              \
	}
#define CXX_NEW_ALIGNED(name, op)                                              \
	PULLPROF_API void *name(size_t n, size_t al);                          \
	PULLPROF_API void *name(size_t n, size_t al)                           \
	{                                                                      \
		typedef void *(*fn)(size_t, size_t);                           \
		if (LIKELY(cxx_mode_now() == CXX_MALLOC)) {                    \
			void *p = NULL;                                        \
			p = CXX_ALIGNED(p, n, al);                             \
			if (LIKELY(p != NULL))                                 \
				return p;                                      \
			if (!cxx_next[op])                                     \
				abort();                                       \
		}                                                              \
		return ((fn)cxx_next[op])(n, al);                              \
	}
#define CXX_NEW_ALIGNED_NOTHROW(name, op)                                      \
	PULLPROF_API void *name(size_t n, size_t al, const void *nt);          \
	PULLPROF_API void *name(size_t n, size_t al, const void *nt)           \
	{                                                                      \
		typedef void *(*fn)(size_t, size_t, const void *);             \
		if (LIKELY(cxx_mode_now() == CXX_MALLOC)) {                    \
			void *p = NULL;                                        \
			p = CXX_ALIGNED(p, n, al);                             \
			if (LIKELY(p != NULL) || !cxx_next[op])                \
				return p;                                      \
		}                                                              \
		return ((fn)cxx_next[op])(n, al, nt);                          \
	}

CXX_NEW(_Znwm, NEW)
CXX_NEW(_Znam, NEW_ARRAY)
CXX_NEW_NOTHROW(_ZnwmRKSt9nothrow_t, NEW_NOTHROW)
CXX_NEW_NOTHROW(_ZnamRKSt9nothrow_t, NEW_ARRAY_NOTHROW)
CXX_NEW_ALIGNED(_ZnwmSt11align_val_t, NEW_ALIGNED)
CXX_NEW_ALIGNED(_ZnamSt11align_val_t, NEW_ARRAY_ALIGNED)
CXX_NEW_ALIGNED_NOTHROW(_ZnwmSt11align_val_tRKSt9nothrow_t, NEW_ALIGNED_NOTHROW)
CXX_NEW_ALIGNED_NOTHROW(_ZnamSt11align_val_tRKSt9nothrow_t,
                        NEW_ARRAY_ALIGNED_NOTHROW)

/* Behind the C++ runtime or an allocator, free: the memory came from
 * malloc. Behind another library's operators, theirs, with the extra
 * arguments (size, alignment, nothrow tag) as they came. */
#define CXX_DELETE(name, op, params, args)                                     \
	PULLPROF_API void name params;                                         \
	PULLPROF_API void name params                                          \
	{                                                                      \
		if (LIKELY(cxx_mode_now() == CXX_MALLOC) || !cxx_next[op]) {   \
			pp_heap_self_free(p);                                  \
			return;                                                \
		}                                                              \
		((void(*) params)cxx_next[op]) args;                           \
	}

CXX_DELETE(_ZdlPv, DELETE, (void *p), (p))
CXX_DELETE(_ZdaPv, DELETE_ARRAY, (void *p), (p))
CXX_DELETE(_ZdlPvm, DELETE_SIZED, (void *p, size_t n), (p, n))
CXX_DELETE(_ZdaPvm, DELETE_ARRAY_SIZED, (void *p, size_t n), (p, n))
CXX_DELETE(_ZdlPvRKSt9nothrow_t, DELETE_NOTHROW, (void *p, const void *t),
           (p, t))
CXX_DELETE(_ZdaPvRKSt9nothrow_t, DELETE_ARRAY_NOTHROW, (void *p, const void *t),
           (p, t))
CXX_DELETE(_ZdlPvSt11align_val_t, DELETE_ALIGNED, (void *p, size_t a), (p, a))
CXX_DELETE(_ZdaPvSt11align_val_t, DELETE_ARRAY_ALIGNED, (void *p, size_t a),
           (p, a))
CXX_DELETE(_ZdlPvmSt11align_val_t, DELETE_SIZED_ALIGNED,
           (void *p, size_t n, size_t a), (p, n, a))
CXX_DELETE(_ZdaPvmSt11align_val_t, DELETE_ARRAY_SIZED_ALIGNED,
           (void *p, size_t n, size_t a), (p, n, a))
CXX_DELETE(_ZdlPvSt11align_val_tRKSt9nothrow_t, DELETE_ALIGNED_NOTHROW,
           (void *p, size_t a, const void *t), (p, a, t))
CXX_DELETE(_ZdaPvSt11align_val_tRKSt9nothrow_t, DELETE_ARRAY_ALIGNED_NOTHROW,
           (void *p, size_t a, const void *t), (p, a, t))

#else /* PP_NO_HEAP_INTERPOSE */

/* The sanitizer's allocator serves every thread: nothing to swap. */
int pp_heap_agentmem_enable(void)
{
	return 0;
}

void pp_heap_agentmem_stats(struct pp_agentmem_stats *out)
{
	memset(out, 0, sizeof *out);
}

#endif /* PP_NO_HEAP_INTERPOSE */

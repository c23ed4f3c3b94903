/*
 * The agent's own allocator. glibc gives each new thread that allocates a
 * malloc arena of its own (a 64 MiB reservation each, up to 8 per core):
 * the agent's five to ten threads took 200 MiB and more of the host's
 * address space, and a host sized to RLIMIT_AS saw its own allocations
 * fail. The malloc wrappers (malloc.c) send what the agent's threads
 * allocate here instead, when the next allocator is glibc's: one shared
 * heap of 1 MiB chunks, mapped as needed, for blocks up to 256 KiB (size
 * classes, four a power of two), and a mapping of its own for each larger
 * block. The host's allocations never come here and never change.
 *
 * A block is recognised by the word before it, PP_AGENTMEM_MAGIC: where
 * glibc keeps its chunk's size, whose bit 3 is always clear (chunks are
 * multiples of 16 bytes, the low three bits are flags). So a free() of
 * any block, on any thread, finds its allocator with one load.
 *
 * Frees, from any thread, push the block on its class's list without a
 * lock (the host's threads free the agent's blocks too, and never wait
 * for the agent); allocations, on the agent's threads only, pop under a
 * spinlock, one popper at a time, so a pop never sees a block leave and
 * come back (no ABA). Not pthread_mutex_lock: the lock wrappers
 * (src/shim/locks.c) record contention and may allocate.
 * Chunks are never given back: the agent's peak of small blocks.
 * Context: host.
 */
#include "shim/agentmem.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shim/heap_hot.h"

#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#define HDR 16u
#define CHUNK ((size_t)1 << 20)
#define MAX_SMALL ((size_t)256 << 10)
#define NCLASS 52
#define LARGE 0xffffffffu
/* A large block's mapping starts with its length; the block at 64. */
#define LARGE_PREFIX 64u

struct hdr {
	uint32_t cls;   /* size class, or LARGE */
	uint32_t shift; /* from the slot's (the mapping's) start to the block */
	uint64_t magic;
};

static _Atomic(void *) lists[NCLASS];
static atomic_flag lock = ATOMIC_FLAG_INIT;
static unsigned char *bump, *bump_end;
static _Atomic uint64_t chunk_bytes, large_bytes, peak_bytes, failures;

/* The class of a slot of `total` bytes (header included), or -1 for a
 * large block. */
static int class_of(size_t total)
{
	if (total <= 128)
		return total <= HDR ? 0 : (int)((total + 15) / 16) - 1;
	if (total > MAX_SMALL)
		return -1;
	int lg = 63 - __builtin_clzll((unsigned long long)(total - 1));
	size_t step = (size_t)1 << (lg - 2);
	size_t k = (total - ((size_t)1 << lg) + step - 1) / step;
	return 8 + (lg - 7) * 4 + (int)k - 1;
}

static size_t class_size(int c)
{
	if (c < 8)
		return (size_t)(c + 1) * 16;
	int lg = 7 + (c - 8) / 4;
	return ((size_t)1 << lg) +
	       (size_t)((c - 8) % 4 + 1) * ((size_t)1 << (lg - 2));
}

static void note_peak(void)
{
	uint64_t now = atomic_load(&chunk_bytes) + atomic_load(&large_bytes);
	uint64_t peak = atomic_load(&peak_bytes);
	while (now > peak &&
	       !atomic_compare_exchange_weak(&peak_bytes, &peak, now))
		;
}

static void *map(size_t len)
{
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE,
	               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED) {
		atomic_fetch_add(&failures, 1);
		return NULL;
	}
	return m;
}

static void take_lock(void)
{
	while (atomic_flag_test_and_set_explicit(&lock, memory_order_acquire))
		sched_yield();
}

static void drop_lock(void)
{
	atomic_flag_clear_explicit(&lock, memory_order_release);
}

/* A free slot of class c, or NULL. */
static unsigned char *slot_get(int c)
{
	size_t size = class_size(c);
	take_lock();
	void *head = atomic_load_explicit(&lists[c], memory_order_acquire);
	while (head) {
		void *next;
		memcpy(&next, head, sizeof next);
		if (atomic_compare_exchange_weak_explicit(
		        &lists[c], &head, next, memory_order_acquire,
		        memory_order_acquire))
			break;
	}
	if (!head) {
		if (!bump || (size_t)(bump_end - bump) < size) {
			/* The rest of the chunk goes unused: at most the
			 * largest class, once a chunk. */
			unsigned char *m = map(CHUNK);
			if (m) {
				bump = m;
				bump_end = m + CHUNK;
				atomic_fetch_add(&chunk_bytes, CHUNK);
				note_peak();
			}
		}
		if (bump && (size_t)(bump_end - bump) >= size) {
			head = bump;
			bump += size;
		}
	}
	drop_lock();
	return head;
}

static void *finish(unsigned char *slot, unsigned char *p, uint32_t cls)
{
	struct hdr h = {cls, (uint32_t)(p - slot), PP_AGENTMEM_MAGIC};
	memcpy(p - HDR, &h, sizeof h);
	return p;
}

static size_t align_up(size_t v, size_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/* n bytes at `align` (a power of two, at least 16). */
static void *alloc(size_t n, size_t align)
{
	size_t extra = align > HDR ? align : 0, total;
	if (__builtin_add_overflow(n, HDR + extra, &total) ||
	    total > ((size_t)1 << 46)) {
		errno = ENOMEM;
		return NULL;
	}
	int c = class_of(total);
	if (c >= 0) {
		unsigned char *slot = slot_get(c);
		if (!slot) {
			errno = ENOMEM;
			return NULL;
		}
		unsigned char *p = (unsigned char *)align_up(
		    (uintptr_t)slot + HDR, align < HDR ? HDR : align);
		return finish(slot, p, (uint32_t)c);
	}
	size_t page = (size_t)getpagesize();
	size_t len = align_up(n + LARGE_PREFIX + extra, page);
	unsigned char *m = map(len);
	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	memcpy(m, &len, sizeof len);
	atomic_fetch_add(&large_bytes, len);
	note_peak();
	unsigned char *p = (unsigned char *)align_up(
	    (uintptr_t)m + LARGE_PREFIX, align < HDR ? HDR : align);
	return finish(m, p, LARGE);
}

static struct hdr header(const void *p)
{
	struct hdr h;
	memcpy(&h, (const unsigned char *)p - HDR, sizeof h);
	return h;
}

void *pp_agentmem_malloc(size_t n)
{
	return alloc(n, HDR);
}

void *pp_agentmem_calloc(size_t n, size_t m)
{
	size_t bytes;
	if (__builtin_mul_overflow(n, m, &bytes)) {
		errno = ENOMEM;
		return NULL;
	}
	void *p = alloc(bytes, HDR);
	if (p)
		memset(p, 0, bytes);
	return p;
}

void *pp_agentmem_memalign(size_t align, size_t n)
{
	if (align & (align - 1)) {
		errno = EINVAL;
		return NULL;
	}
	if (align > ((size_t)1 << 30)) {
		errno = ENOMEM;
		return NULL;
	}
	return alloc(n, align < HDR ? HDR : align);
}

size_t pp_agentmem_usable(const void *p)
{
	struct hdr h = header(p);
	const unsigned char *slot = (const unsigned char *)p - h.shift;
	if (h.cls == LARGE) {
		size_t len;
		memcpy(&len, slot, sizeof len);
		return len - h.shift;
	}
	return class_size((int)h.cls) - h.shift;
}

void pp_agentmem_free(void *p)
{
	struct hdr h = header(p);
	unsigned char *slot = (unsigned char *)p - h.shift;
	if (h.cls == LARGE) {
		size_t len;
		memcpy(&len, slot, sizeof len);
		atomic_fetch_sub(&large_bytes, len);
		munmap(slot, len);
		return;
	}
	if (h.cls >= NCLASS)
		return; /* not a block of ours after all: keep it */
	void *head = atomic_load_explicit(&lists[h.cls], memory_order_relaxed);
	do
		memcpy(slot, &head, sizeof head);
	while (!atomic_compare_exchange_weak_explicit(
	    &lists[h.cls], &head, slot, memory_order_release,
	    memory_order_relaxed));
}

void *pp_agentmem_realloc(void *p, size_t n)
{
	if (!p)
		return alloc(n, HDR);
	size_t have = pp_agentmem_usable(p);
	struct hdr h = header(p);
	if (n <= have && (h.cls == LARGE || n >= have / 2))
		return p;
	if (h.cls == LARGE && h.shift == LARGE_PREFIX && n > have) {
		unsigned char *slot = (unsigned char *)p - h.shift;
		size_t len, page = (size_t)getpagesize();
		memcpy(&len, slot, sizeof len);
		size_t want = align_up(n + LARGE_PREFIX, page);
		unsigned char *m = mremap(slot, len, want, MREMAP_MAYMOVE);
		if (m == MAP_FAILED) {
			atomic_fetch_add(&failures, 1);
			errno = ENOMEM;
			return NULL;
		}
		memcpy(m, &want, sizeof want);
		atomic_fetch_add(&large_bytes, want - len);
		note_peak();
		return m + LARGE_PREFIX;
	}
	void *q = alloc(n, HDR);
	if (!q)
		return NULL;
	memcpy(q, p, have < n ? have : n);
	pp_agentmem_free(p);
	return q;
}

void pp_agentmem_stats(struct pp_agentmem_stats *out)
{
	out->chunks = atomic_load(&chunk_bytes);
	out->large = atomic_load(&large_bytes);
	out->peak = atomic_load(&peak_bytes);
	out->failures = atomic_load(&failures);
}

void pp_agentmem_forget_in_child(void)
{
	/* A thread of the parent's may have held the lock, or been half way
	 * through a pop or a new chunk: start from empty lists. The blocks
	 * on them stay mapped and unused (a copy of the parent's peak). */
	for (int c = 0; c < NCLASS; c++)
		atomic_store(&lists[c], NULL);
	bump = bump_end = NULL;
	atomic_flag_clear(&lock);
}

/* ---- the entries the malloc wrappers call -------------------------------- */

/*
 * Behind glibc's malloc, once an agent starts, the `next` entries become
 * these: the agent's threads (pp_heap_tls.agent) allocate from agentmem.c
 * instead of an arena of their own each, and any thread's free, realloc or
 * malloc_usable_size of such a block goes there (the word before the
 * block tells). The host's threads reach glibc as before, through one more
 * test of a word of their own TLS (in the cache line the countdown just
 * used) and, on free, of the chunk header glibc reads next.
 */
static struct pp_agentmem_entries glibc;

static void *am_malloc(size_t n)
{
	if (UNLIKELY(pp_heap_tls.agent))
		return pp_agentmem_malloc(n);
	return glibc.malloc(n);
}

static void am_free(void *p)
{
	if (p && UNLIKELY(pp_agentmem_owns(p))) {
		pp_agentmem_free(p);
		return;
	}
	glibc.free(p);
}

static void *am_calloc(size_t n, size_t m)
{
	if (UNLIKELY(pp_heap_tls.agent))
		return pp_agentmem_calloc(n, m);
	return glibc.calloc(n, m);
}

static void *am_realloc(void *p, size_t n)
{
	if (p && pp_agentmem_owns(p)) {
		if (pp_heap_tls.agent)
			return pp_agentmem_realloc(p, n);
		/* A host thread's realloc of the agent's block: into glibc. */
		if (n == 0) {
			pp_agentmem_free(p);
			return glibc.malloc(0);
		}
		void *q = glibc.malloc(n);
		if (q) {
			size_t have = pp_agentmem_usable(p);
			memcpy(q, p, have < n ? have : n);
			pp_agentmem_free(p);
		}
		return q;
	}
	if (UNLIKELY(pp_heap_tls.agent) && p) {
		/* An agent thread's realloc of glibc's block stays in
		 * glibc: the block's own arena, none made for the thread. */
		return glibc.realloc(p, n);
	}
	if (UNLIKELY(pp_heap_tls.agent))
		return pp_agentmem_malloc(n);
	return glibc.realloc(p, n);
}

static int am_posix_memalign(void **out, size_t a, size_t n)
{
	if (LIKELY(!pp_heap_tls.agent))
		return glibc.posix_memalign(out, a, n);
	if (a % sizeof(void *) || (a & (a - 1)))
		return EINVAL;
	void *p = pp_agentmem_memalign(a, n);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

/* An agent thread's memalign: glibc's semantics (any alignment, rounded
 * up to a power of two). */
static void *agent_memalign(size_t a, size_t n)
{
	size_t al = 16;
	while (al < a && al < ((size_t)1 << 30))
		al <<= 1;
	return pp_agentmem_memalign(al, n);
}

static void *am_memalign(size_t a, size_t n)
{
	if (UNLIKELY(pp_heap_tls.agent))
		return agent_memalign(a, n);
	return glibc.memalign(a, n);
}

static void *am_aligned_alloc(size_t a, size_t n)
{
	if (UNLIKELY(pp_heap_tls.agent))
		return agent_memalign(a, n);
	return glibc.aligned_alloc(a, n);
}

static void *am_valloc(size_t n)
{
	if (UNLIKELY(pp_heap_tls.agent))
		return agent_memalign((size_t)getpagesize(), n);
	return glibc.valloc(n);
}

static void *am_pvalloc(size_t n)
{
	if (UNLIKELY(pp_heap_tls.agent)) {
		size_t page = (size_t)getpagesize(), r;
		if (__builtin_add_overflow(n, page - 1, &r)) {
			errno = ENOMEM;
			return NULL;
		}
		r &= ~(page - 1);
		return agent_memalign(page, r ? r : page);
	}
	return glibc.pvalloc(n);
}

static size_t am_usable(void *p)
{
	if (p && UNLIKELY(pp_agentmem_owns(p)))
		return pp_agentmem_usable(p);
	return glibc.usable(p);
}

void pp_agentmem_wrap(struct pp_agentmem_entries *e)
{
	glibc = *e;
	e->malloc = am_malloc;
	e->free = am_free;
	e->calloc = am_calloc;
	e->realloc = am_realloc;
	e->posix_memalign = am_posix_memalign;
	e->memalign = am_memalign;
	e->aligned_alloc = am_aligned_alloc;
	e->valloc = am_valloc;
	e->pvalloc = am_pvalloc;
	e->usable = am_usable;
}

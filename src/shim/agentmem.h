/*
 * The agent's own allocator (agentmem.c): what the agent's threads
 * allocate, so that none of them makes glibc reserve a malloc arena of its
 * own (64 MiB of address space each). In the light object.
 * Context: host.
 */
#ifndef PP_HEAP_AGENTMEM_H
#define PP_HEAP_AGENTMEM_H

#include <stddef.h>
#include <stdint.h>

/* What it holds, for /status (bytes of address space). */
struct pp_agentmem_stats {
	int on;            /* agent threads allocate here */
	uint64_t chunks;   /* small blocks' chunks, mapped for good */
	uint64_t large;    /* blocks mapped one by one, now */
	uint64_t peak;     /* chunks + large at most */
	uint64_t failures; /* mmap refused: the allocation answered NULL */
};

/* Blocks of this allocator have this word just before them; the glibc
 * chunk header in that place is a size whose bit 3 is always clear. */
#define PP_AGENTMEM_MAGIC 0x70706d656d6f7708ull

/* Is p (not NULL, a block of glibc's or of this allocator) this
 * allocator's? One load of the word before it. */
static inline int pp_agentmem_owns(const void *p)
{
	uint64_t w;
	__builtin_memcpy(&w, (const unsigned char *)p - 8, sizeof w);
	return (w & 8) && w == PP_AGENTMEM_MAGIC;
}

void *pp_agentmem_malloc(size_t n);
void *pp_agentmem_calloc(size_t n, size_t m);
/* p is this allocator's (or NULL). */
void *pp_agentmem_realloc(void *p, size_t n);
void *pp_agentmem_memalign(size_t align, size_t n);
/* p is this allocator's: any thread, lock-free. */
void pp_agentmem_free(void *p);
size_t pp_agentmem_usable(const void *p);
void pp_agentmem_stats(struct pp_agentmem_stats *out);
/* The next allocator's entries, as the malloc wrappers call them. */
struct pp_agentmem_entries {
	void *(*malloc)(size_t);
	void (*free)(void *);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*memalign)(size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	void *(*valloc)(size_t);
	void *(*pvalloc)(size_t);
	size_t (*usable)(void *);
};
/* glibc's entries in, kept; out, the ones that send the agent's threads
 * (pp_heap_tls.agent) here and any thread's free, realloc and
 * malloc_usable_size of this allocator's blocks here, glibc's to glibc. */
void pp_agentmem_wrap(struct pp_agentmem_entries *e);

/* The wrappers' side (malloc.c; the agent reaches both through
 * pp_shim): swap the next allocator's entries for ones that send the
 * agent's threads here; 1 when on, 0 when the next allocator is not
 * glibc's (or PULLPROF_AGENT_MALLOC=glibc). */
int pp_heap_agentmem_enable(void);
void pp_heap_agentmem_stats(struct pp_agentmem_stats *out);

/* fork()'s child: a lock an agent thread held, lists it was changing. */
void pp_agentmem_forget_in_child(void);

#endif

/* A bump allocator: many small objects, freed all at once.
 * Context: agent.
 */
#ifndef PP_ARENA_H
#define PP_ARENA_H

#include <stddef.h>

struct pp_arena_chunk;

/* The size of a chunk; an object over a quarter of it gets a chunk of its
 * own, of its size. */
#define PP_ARENA_CHUNK (64 * 1024)
/* Every object is rounded up to this (aligned for any scalar). */
#define PP_ARENA_ALIGN 16

struct pp_arena {
	struct pp_arena_chunk *head;
	size_t used;     /* bytes handed out, for size accounting */
	size_t reserved; /* bytes held in chunks */
};

/* n bytes aligned for any scalar, or NULL on ENOMEM. */
void *pp_arena_alloc(struct pp_arena *a, size_t n);
/* The bytes an object of n bytes takes from the arena: for callers that
 * bound their memory before they allocate. */
static inline size_t pp_arena_room(size_t n)
{
	return (n + PP_ARENA_ALIGN - 1) & ~(size_t)(PP_ARENA_ALIGN - 1);
}
void *pp_arena_memdup(struct pp_arena *a, const void *p, size_t n);
void pp_arena_free(struct pp_arena *a);

#endif

/* A bump allocator.
 * Context: agent.
 */
#include "arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK PP_ARENA_CHUNK
#define ALIGN PP_ARENA_ALIGN

struct pp_arena_chunk {
	struct pp_arena_chunk *next;
	size_t size, off;
	_Alignas(ALIGN) unsigned char data[];
};

void *pp_arena_alloc(struct pp_arena *a, size_t n)
{
	struct pp_arena_chunk *c = a->head;

	n = pp_arena_room(n);
	if (!c || c->size - c->off < n) {
		/* Big objects get a chunk of their own, behind the current one,
		 * so the current chunk's free space is not wasted. */
		size_t size = n > CHUNK / 4 ? n : CHUNK;
		struct pp_arena_chunk *nc = malloc(sizeof *nc + size);
		if (!nc)
			return NULL;
		nc->size = size;
		nc->off = 0;
		a->reserved += size;
		if (c && size != CHUNK) {
			nc->next = c->next;
			c->next = nc;
		} else {
			nc->next = c;
			a->head = nc;
		}
		c = nc;
	}
	void *p = c->data + c->off;
	c->off += n;
	a->used += n;
	return p;
}

void *pp_arena_memdup(struct pp_arena *a, const void *p, size_t n)
{
	void *q = pp_arena_alloc(a, n);
	if (q && n)
		memcpy(q, p, n);
	return q;
}

void pp_arena_free(struct pp_arena *a)
{
	struct pp_arena_chunk *c = a->head;
	while (c) {
		struct pp_arena_chunk *next = c->next;
		free(c);
		c = next;
	}
	a->head = NULL;
	a->used = a->reserved = 0;
}

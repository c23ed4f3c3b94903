/*
 * The sampled blocks a host reported through pullprof_heap_alloc (its own
 * pools), ordered by address, so that pullprof_heap_release(base, len) finds
 * every one inside a range in O(log n + k) and never looks at the others.
 * Apart from the malloc table's hash of live blocks: a pool's block and the
 * malloc block that holds the pool may start at the same address, and a
 * free() of the one must not take the other's record.
 *
 * A treap in memory mapped here (nodes numbered, grown by mremap), so that
 * the table can change it under its lock from inside any host code: no
 * malloc, no recursion (every walk is a loop: the allocating thread's stack
 * may be tiny). The caller holds the table's lock.
 * Context: host.
 */
#ifndef PP_HEAP_POOL_INDEX_H
#define PP_HEAP_POOL_INDEX_H

#include <stddef.h>
#include <stdint.h>

struct pp_pool_index {
	struct pp_pool_node *nodes; /* node i is nodes[i - 1]; 0: none */
	size_t cap;                 /* nodes mapped */
	size_t used;                /* nodes ever handed out (high mark) */
	uint32_t root, free_list;
	size_t n; /* blocks in the index */
};

/* Add p (its bucket). If a block already starts at p (the host reused the
 * memory without a free or a release), its bucket goes to *replaced and 1
 * is returned: the caller counts that one freed. 0 when added, -ENOMEM
 * when there was no room (nothing changed). */
int pp_pool_index_put(struct pp_pool_index *x, uintptr_t p, uint32_t bucket,
                      uint32_t *replaced);

/* Take p out: 0 and its bucket, or -ENOENT. */
int pp_pool_index_take(struct pp_pool_index *x, uintptr_t p, uint32_t *bucket);

/* Take out every block whose address is in [lo, hi), calling
 * each(addr, bucket, arg) for each, in address order. Returns how many. */
size_t pp_pool_index_take_range(struct pp_pool_index *x, uintptr_t lo,
                                uintptr_t hi,
                                void (*each)(uintptr_t, uint32_t, void *),
                                void *arg);

/* Bytes mapped. */
size_t pp_pool_index_bytes(const struct pp_pool_index *x);
/* Unmap everything; the index is empty (zeroed) after. */
void pp_pool_index_free(struct pp_pool_index *x);

#endif

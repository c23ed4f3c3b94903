/*
 * The ordered index of sampled pool blocks (pool_index.h): a treap whose
 * priorities are a hash of the address, so its shape is random whatever
 * order a pool hands its addresses out in (a bump pointer hands them in
 * increasing order, which makes a plain search tree a list). Split and
 * merge make a range's removal O(log n + k). Every walk is a loop.
 * Context: host.
 */
#include "heap/pool_index.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "util/hash.h"

struct pp_pool_node {
	uintptr_t addr;
	uint32_t left, right; /* node numbers; 0: none; left: the free list */
	uint32_t bucket;
	uint32_t prio;
};

#define FIRST_CAP 4096 /* nodes: 24 pages */

#define N(x, i) ((x)->nodes[(i)-1])

static uint32_t prio_of(uintptr_t p)
{
	/* Never 0: no tie with an empty link matters, but keep it clear. */
	return (uint32_t)(pp_hash_u64(p) >> 32) | 1;
}

static uint32_t node_new(struct pp_pool_index *x, uintptr_t p, uint32_t bucket)
{
	uint32_t i = x->free_list;
	if (i) {
		x->free_list = N(x, i).left;
	} else {
		if (x->used == x->cap) {
			size_t ncap = x->cap ? x->cap * 2 : FIRST_CAP;
			if (ncap > UINT32_MAX - 1)
				return 0;
			void *m =
			    x->nodes
			        ? mremap(x->nodes, x->cap * sizeof *x->nodes,
			                 ncap * sizeof *x->nodes,
			                 MREMAP_MAYMOVE)
			        : mmap(NULL, ncap * sizeof *x->nodes,
			               PROT_READ | PROT_WRITE,
			               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (m == MAP_FAILED)
				return 0;
			x->nodes = m;
			x->cap = ncap;
		}
		i = (uint32_t)++x->used;
	}
	N(x, i) = (struct pp_pool_node){p, 0, 0, bucket, prio_of(p)};
	return i;
}

static void node_free(struct pp_pool_index *x, uint32_t i)
{
	N(x, i).left = x->free_list;
	x->free_list = i;
}

/* t split into the nodes below key (*lo) and the others (*hi). */
static void split(struct pp_pool_index *x, uint32_t t, uintptr_t key,
                  uint32_t *lo, uint32_t *hi)
{
	while (t) {
		if (N(x, t).addr < key) {
			*lo = t;
			lo = &N(x, t).right;
			t = N(x, t).right;
		} else {
			*hi = t;
			hi = &N(x, t).left;
			t = N(x, t).left;
		}
	}
	*lo = *hi = 0;
}

/* a and b joined: every address of a is below every one of b. */
static uint32_t merge(struct pp_pool_index *x, uint32_t a, uint32_t b)
{
	uint32_t root = 0, *hole = &root;
	while (a && b) {
		if (N(x, a).prio > N(x, b).prio) {
			*hole = a;
			hole = &N(x, a).right;
			a = N(x, a).right;
		} else {
			*hole = b;
			hole = &N(x, b).left;
			b = N(x, b).left;
		}
	}
	*hole = a ? a : b;
	return root;
}

/* The link that holds p's node, or the empty link where it would be. */
static uint32_t *find(struct pp_pool_index *x, uintptr_t p)
{
	uint32_t *link = &x->root;
	while (*link && N(x, *link).addr != p)
		link = p < N(x, *link).addr ? &N(x, *link).left
		                            : &N(x, *link).right;
	return link;
}

int pp_pool_index_put(struct pp_pool_index *x, uintptr_t p, uint32_t bucket,
                      uint32_t *replaced)
{
	uint32_t *link = find(x, p);
	if (*link) {
		*replaced = N(x, *link).bucket;
		N(x, *link).bucket = bucket;
		return 1;
	}
	/* Before any link is taken: the nodes may move. */
	uint32_t i = node_new(x, p, bucket);
	if (!i)
		return -ENOMEM;
	uint32_t prio = N(x, i).prio;
	link = &x->root;
	while (*link && N(x, *link).prio >= prio)
		link = p < N(x, *link).addr ? &N(x, *link).left
		                            : &N(x, *link).right;
	split(x, *link, p, &N(x, i).left, &N(x, i).right);
	*link = i;
	x->n++;
	return 0;
}

int pp_pool_index_take(struct pp_pool_index *x, uintptr_t p, uint32_t *bucket)
{
	if (!x->root)
		return -ENOENT;
	uint32_t *link = find(x, p), i = *link;
	if (!i)
		return -ENOENT;
	*bucket = N(x, i).bucket;
	*link = merge(x, N(x, i).left, N(x, i).right);
	node_free(x, i);
	x->n--;
	return 0;
}

size_t pp_pool_index_take_range(struct pp_pool_index *x, uintptr_t lo,
                                uintptr_t hi,
                                void (*each)(uintptr_t, uint32_t, void *),
                                void *arg)
{
	if (!x->root || lo >= hi)
		return 0;
	uint32_t below, rest, inside, above;
	split(x, x->root, lo, &below, &rest);
	split(x, rest, hi, &inside, &above);
	x->root = merge(x, below, above);
	/* In order, without a stack: rotate the left child up until there is
	 * none, then the node is the least one left. */
	size_t k = 0;
	uint32_t t = inside;
	while (t) {
		uint32_t l = N(x, t).left;
		if (l) {
			N(x, t).left = N(x, l).right;
			N(x, l).right = t;
			t = l;
			continue;
		}
		uint32_t next = N(x, t).right;
		each(N(x, t).addr, N(x, t).bucket, arg);
		node_free(x, t);
		k++;
		t = next;
	}
	x->n -= k;
	return k;
}

size_t pp_pool_index_bytes(const struct pp_pool_index *x)
{
	return x->cap * sizeof *x->nodes;
}

void pp_pool_index_free(struct pp_pool_index *x)
{
	if (x->nodes)
		munmap(x->nodes, x->cap * sizeof *x->nodes);
	memset(x, 0, sizeof *x);
}

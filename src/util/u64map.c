/* An open-addressing (linear probing) hash map of uint64_t.
 * Context: agent.
 */
#include "u64map.h"

#include <stdlib.h>
#include <string.h>

#include "hash.h"

/* The first capacity, and the load kept under 1/2 (probes stay short). */
#define FIRST_CAP 64
#define SLOT_BYTES (2 * sizeof(uint64_t) + 1) /* key, value, used */

static size_t slot(const struct pp_u64map *m, uint64_t key)
{
	size_t mask = m->cap - 1, i = (size_t)pp_hash_u64(key) & mask;
	while (m->used[i] && m->keys[i] != key)
		i = (i + 1) & mask;
	return i;
}

uint64_t *pp_u64map_get(const struct pp_u64map *m, uint64_t key)
{
	if (!m->cap)
		return NULL;
	size_t i = slot(m, key);
	return m->used[i] ? &m->vals[i] : NULL;
}

static int grow(struct pp_u64map *m)
{
	struct pp_u64map n = {0};
	n.cap = m->cap ? m->cap * 2 : FIRST_CAP;
	n.keys = malloc(n.cap * sizeof *n.keys);
	n.vals = malloc(n.cap * sizeof *n.vals);
	n.used = calloc(n.cap, 1);
	if (!n.keys || !n.vals || !n.used) {
		pp_u64map_free(&n);
		return -1;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->used[i])
			continue;
		size_t j = slot(&n, m->keys[i]);
		n.used[j] = 1;
		n.keys[j] = m->keys[i];
		n.vals[j] = m->vals[i];
	}
	n.len = m->len;
	pp_u64map_free(m);
	*m = n;
	return 0;
}

uint64_t *pp_u64map_put(struct pp_u64map *m, uint64_t key, int *inserted)
{
	if ((m->len + 1) * 2 > m->cap && grow(m))
		return NULL;
	size_t i = slot(m, key);
	*inserted = !m->used[i];
	if (*inserted) {
		m->used[i] = 1;
		m->keys[i] = key;
		m->vals[i] = 0;
		m->len++;
	}
	return &m->vals[i];
}

void pp_u64map_free(struct pp_u64map *m)
{
	free(m->keys);
	free(m->vals);
	free(m->used);
	memset(m, 0, sizeof *m);
}

size_t pp_u64map_bytes(const struct pp_u64map *m)
{
	return m->cap * SLOT_BYTES;
}

size_t pp_u64map_bytes_with(const struct pp_u64map *m, size_t more)
{
	size_t need = 2 * (m->len + more), cap = m->cap;
	if (need > cap) {
		cap = cap ? cap : FIRST_CAP;
		while (cap < need)
			cap *= 2;
	}
	return cap * SLOT_BYTES;
}

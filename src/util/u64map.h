/* An open-addressing hash map from uint64_t keys to uint64_t values.
 * Context: agent.
 */
#ifndef PP_U64MAP_H
#define PP_U64MAP_H

#include <stddef.h>
#include <stdint.h>

struct pp_u64map {
	uint64_t *keys;
	uint64_t *vals;
	unsigned char *used;
	size_t cap; /* a power of two, or 0 */
	size_t len;
};

/* Pointer to the value of key, or NULL. */
uint64_t *pp_u64map_get(const struct pp_u64map *m, uint64_t key);
/* Pointer to the value of key, inserting it with value 0 when absent
 * (*inserted says which). NULL on ENOMEM. */
uint64_t *pp_u64map_put(struct pp_u64map *m, uint64_t key, int *inserted);
void pp_u64map_free(struct pp_u64map *m);
/* The memory the map's arrays hold. */
size_t pp_u64map_bytes(const struct pp_u64map *m);
/* The memory they would hold once `more` keys not in it were put: for a
 * caller that bounds its memory before it inserts. */
size_t pp_u64map_bytes_with(const struct pp_u64map *m, size_t more);

#endif

/* Hashing for the agent's tables.
 * Context: agent.
 */
#ifndef PP_HASH_H
#define PP_HASH_H

#include <stddef.h>
#include <stdint.h>

/* A 64-bit finalizer (splitmix64's): spreads every input bit. */
static inline uint64_t pp_hash_u64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

/* Combine h with another 64-bit value. */
static inline uint64_t pp_hash_mix(uint64_t h, uint64_t v)
{
	return pp_hash_u64(h ^
	                   (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)));
}

uint64_t pp_hash_bytes(const void *p, size_t n);

#endif

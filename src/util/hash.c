/* Hashing.
 * Context: agent.
 */
#include "hash.h"

#include <string.h>

uint64_t pp_hash_bytes(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = 0x243f6a8885a308d3ULL ^ n;

	while (n >= 8) {
		uint64_t v;
		memcpy(&v, b, 8);
		h = pp_hash_mix(h, v);
		b += 8;
		n -= 8;
	}
	uint64_t tail = 0;
	/* n == 0 with p == NULL (an empty stack) is a valid call: memcpy
	 * may not be given NULL even for 0 bytes (UBSan). */
	if (n)
		memcpy(&tail, b, n);
	return pp_hash_mix(h, tail);
}

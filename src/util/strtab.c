/* String interning.
 * Context: agent.
 */
#include "strtab.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "utf8.h"

/* The arrays' first capacity. */
#define FIRST_CAP 256

int pp_strtab_init(struct pp_strtab *t)
{
	memset(t, 0, sizeof *t);
	return pp_strtab_intern(t, "", 0) == 0 ? 0 : -ENOMEM;
}

static int64_t intern_as_is(struct pp_strtab *t, const char *s, size_t len)
{
	uint64_t h = pp_hash_bytes(s, len);
	uint64_t *head = pp_u64map_get(&t->by_hash, h);

	for (uint32_t i = head ? (uint32_t)*head : 0; i; i = t->next[i - 1]) {
		if (t->lens[i - 1] == len &&
		    memcmp(t->strs[i - 1], s, len) == 0)
			return i - 1;
	}
	if (t->len == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : FIRST_CAP;
		const char **strs = realloc(t->strs, cap * sizeof *strs);
		if (!strs)
			return -ENOMEM;
		t->strs = strs;
		uint32_t *lens = realloc(t->lens, cap * sizeof *lens);
		if (!lens)
			return -ENOMEM;
		t->lens = lens;
		uint32_t *next = realloc(t->next, cap * sizeof *next);
		if (!next)
			return -ENOMEM;
		t->next = next;
		t->cap = cap;
	}
	char *copy = pp_arena_alloc(&t->arena, len + 1);
	int inserted;
	uint64_t *slot = pp_u64map_put(&t->by_hash, h, &inserted);
	if (!copy || !slot)
		return -ENOMEM;
	memcpy(copy, s, len);
	copy[len] = 0;
	size_t i = t->len++;
	t->strs[i] = copy;
	t->lens[i] = (uint32_t)len;
	/* New strings go to the front of their hash chain. */
	t->next[i] = inserted ? 0 : (uint32_t)*slot;
	*slot = i + 1;
	return (int64_t)i;
}

int64_t pp_strtab_intern(struct pp_strtab *t, const char *s, size_t len)
{
	if (t->bytes || pp_utf8_valid(s, len))
		return intern_as_is(t, s, len);
	/* Bytes from outside (a thread's name, a label, a path): the table
	 * holds them repaired, so every renderer reads text. */
	struct pp_buf b = {0};
	pp_utf8_append(&b, s, len);
	int64_t i = b.failed ? -ENOMEM : intern_as_is(t, b.data, b.len);
	pp_buf_free(&b);
	return i;
}

int64_t pp_strtab_add(struct pp_strtab *t, const char *s)
{
	return s ? pp_strtab_intern(t, s, strlen(s)) : 0;
}

/* The bytes of the arrays by index (strs, lens, next) at capacity cap. */
static size_t arrays_bytes(size_t cap)
{
	return cap * (sizeof(char *) + 2 * sizeof(uint32_t));
}

size_t pp_strtab_bytes(const struct pp_strtab *t)
{
	return t->arena.reserved + arrays_bytes(t->cap) +
	       pp_u64map_bytes(&t->by_hash);
}

size_t pp_strtab_bytes_with(const struct pp_strtab *t, size_t n, size_t room)
{
	size_t b = pp_strtab_bytes(t);
	if (!n)
		return b;
	/* The arena may need a new chunk besides the bytes themselves. */
	b += room + PP_ARENA_CHUNK;
	size_t cap = t->cap ? t->cap : FIRST_CAP;
	if (t->len + n > t->cap)
		while (cap < t->len + n)
			cap *= 2;
	else
		cap = t->cap;
	return b + arrays_bytes(cap) - arrays_bytes(t->cap) +
	       pp_u64map_bytes_with(&t->by_hash, n) -
	       pp_u64map_bytes(&t->by_hash);
}

void pp_strtab_free(struct pp_strtab *t)
{
	pp_arena_free(&t->arena);
	free(t->strs);
	free(t->lens);
	free(t->next);
	pp_u64map_free(&t->by_hash);
	memset(t, 0, sizeof *t);
}

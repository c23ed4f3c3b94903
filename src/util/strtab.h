/* String interning: each distinct string stored once, numbered from 0 in
 * order of first appearance (index 0 is always ""). The numbering is what a
 * pprof string table needs. The table holds UTF-8 text: bytes that are not
 * valid UTF-8 are stored repaired (util/utf8.h), so the profile model, the
 * symbolizer's names and every renderer reading them only ever see text
 * (unless the table is one of bytes, below).
 * Context: agent.
 */
#ifndef PP_STRTAB_H
#define PP_STRTAB_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "u64map.h"

struct pp_strtab {
	struct pp_arena arena;
	const char **strs; /* by index */
	uint32_t *lens;
	size_t len, cap;
	struct pp_u64map by_hash; /* hash -> index+1 of the first string */
	uint32_t *next; /* by index: index+1 of the next with the same hash */
	/* Set after init for a table of bytes (binary build IDs beside
	 * text): strings are then kept exactly as given, never repaired. */
	int bytes;
};

int pp_strtab_init(struct pp_strtab *t);
/* Index of s (len bytes), adding it when new; negative errno on ENOMEM.
 * Invalid UTF-8 is interned as its repair: pp_strtab_get returns the stored
 * text, which is not always s's bytes. */
int64_t pp_strtab_intern(struct pp_strtab *t, const char *s, size_t len);
/* The same for a NUL-terminated string (NULL counts as ""). */
int64_t pp_strtab_add(struct pp_strtab *t, const char *s);
/* The stored copy of string i (NUL-terminated). */
static inline const char *pp_strtab_get(const struct pp_strtab *t, size_t i)
{
	return t->strs[i];
}
/* How many strings it holds: indices 0 .. count - 1. */
static inline size_t pp_strtab_count(const struct pp_strtab *t)
{
	return t->len;
}
/* The length in bytes of string i (which may hold NULs). */
static inline size_t pp_strtab_length(const struct pp_strtab *t, size_t i)
{
	return t->lens[i];
}
/* The memory the table holds: its strings, its arrays, its hash map. */
size_t pp_strtab_bytes(const struct pp_strtab *t);
/* The arena bytes one more string of len bytes takes. */
static inline size_t pp_strtab_room(size_t len)
{
	return pp_arena_room(len + 1);
}
/* An upper bound of the memory it would hold with n more strings, were
 * they all new, taking room bytes (their pp_strtab_room summed): for a
 * caller that bounds its memory before it interns. */
size_t pp_strtab_bytes_with(const struct pp_strtab *t, size_t n, size_t room);
void pp_strtab_free(struct pp_strtab *t);

#endif

/* UTF-8 validation and repair (utf8.h).
 * Context: agent.
 */
#include "utf8.h"

#include <stdint.h>
#include <string.h>

/* The sequence at p (n > 0 bytes left): its length when it is a
 * well-formed UTF-8 character, else 0 with *bad set to the length of its
 * maximal ill-formed subpart (at least 1): the bytes that begin some
 * well-formed sequence but do not finish one. Table 3-7 of the Unicode
 * standard: the second byte's range depends on the first (no overlongs,
 * no surrogates, nothing past U+10FFFF), later ones are 80..BF. */
static size_t sequence(const unsigned char *p, size_t n, size_t *bad)
{
	unsigned c = p[0], lo = 0x80, hi = 0xbf;
	size_t more;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		more = 1;
	} else if (c >= 0xe0 && c <= 0xef) {
		more = 2;
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		more = 3;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
	} else {
		*bad = 1; /* 80..C1, F5..FF: never a first byte */
		return 0;
	}
	for (size_t i = 1; i <= more; i++) {
		if (i >= n || p[i] < lo || p[i] > hi) {
			*bad = i;
			return 0;
		}
		lo = 0x80;
		hi = 0xbf;
	}
	return more + 1;
}

/* Bytes from i on that are ASCII, eight at a time while they are. */
static size_t ascii_run(const unsigned char *p, size_t len, size_t i)
{
	uint64_t w;
	while (i + 8 <= len) {
		memcpy(&w, p + i, 8);
		if (w & 0x8080808080808080ull)
			break;
		i += 8;
	}
	while (i < len && p[i] < 0x80)
		i++;
	return i;
}

size_t pp_utf8_valid_prefix(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, bad;

	for (;;) {
		i = ascii_run(p, len, i);
		if (i == len)
			return len;
		size_t n = sequence(p + i, len - i, &bad);
		if (!n)
			return i;
		i += n;
	}
}

void pp_utf8_append(struct pp_buf *b, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, bad;

	while (i < len) {
		size_t ok = pp_utf8_valid_prefix(s + i, len - i);
		pp_buf_append(b, s + i, ok);
		i += ok;
		if (i == len)
			break;
		sequence(p + i, len - i, &bad);
		pp_buf_append(b, PP_UTF8_REPLACEMENT, 3);
		i += bad;
	}
}

char *pp_utf8_sanitize(const char *s, size_t len)
{
	struct pp_buf b = {0};
	const char *end = s + len;

	/* Each NUL-free piece repaired, each NUL replaced. */
	for (;;) {
		const char *nul = memchr(s, 0, (size_t)(end - s));
		pp_utf8_append(&b, s, (size_t)((nul ? nul : end) - s));
		if (!nul)
			break;
		pp_buf_append(&b, PP_UTF8_REPLACEMENT, 3);
		s = nul + 1;
	}
	size_t n;
	return pp_buf_take(&b, &n); /* "" too: take terminates it */
}

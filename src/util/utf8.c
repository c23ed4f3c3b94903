/* UTF-8 validation and repair. Agent context. */
#include "utf8.h"

#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at p (at most n bytes), or 0. */
static size_t valid_seq(const unsigned char *p, size_t n)
{
	unsigned c = p[0];
	size_t len;
	unsigned min;

	if (c >= 0x01 && c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2, min = 0x80;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, min = 0x800;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, min = 0x10000;
	else
		return 0;
	if (n < len)
		return 0;
	unsigned cp = c & (0xff >> (len + 1));
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

char *pp_utf8_sanitize(const char *s, size_t len)
{
	/* Each bad byte becomes 3 bytes (EF BF BD). */
	char *out = malloc(len * 3 + 1), *o = out;
	const unsigned char *p = (const unsigned char *)s;

	if (!out)
		return NULL;
	for (size_t i = 0; i < len;) {
		size_t n = valid_seq(p + i, len - i);
		if (n) {
			memcpy(o, p + i, n);
			o += n;
			i += n;
		} else {
			memcpy(o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
	}
	*o = 0;
	return out;
}

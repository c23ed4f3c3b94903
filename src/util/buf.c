/* A growable byte buffer.
 * Context: agent.
 */
#include "buf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(struct pp_buf *b, size_t extra)
{
	if (b->failed)
		return -1;
	if (b->len + extra + 1 <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + extra + 1) {
		if (cap > ((size_t)-1) / 2) {
			b->failed = 1;
			return -1;
		}
		cap *= 2;
	}
	char *p = realloc(b->data, cap);
	if (!p) {
		b->failed = 1;
		return -1;
	}
	b->data = p;
	b->cap = cap;
	return 0;
}

void pp_buf_append(struct pp_buf *b, const void *p, size_t n)
{
	if (reserve(b, n))
		return;
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = 0;
}

void pp_buf_puts(struct pp_buf *b, const char *s)
{
	pp_buf_append(b, s, strlen(s));
}

void pp_buf_printf(struct pp_buf *b, const char *fmt, ...)
{
	va_list ap;
	char small[256];

	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof small, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof small) {
		pp_buf_append(b, small, (size_t)n);
		return;
	}
	if (reserve(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void pp_buf_html(struct pp_buf *b, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&': pp_buf_puts(b, "&amp;"); break;
		case '<': pp_buf_puts(b, "&lt;"); break;
		case '>': pp_buf_puts(b, "&gt;"); break;
		case '"': pp_buf_puts(b, "&quot;"); break;
		case '\'': pp_buf_puts(b, "&#39;"); break;
		default: pp_buf_append(b, s, 1);
		}
	}
}

char *pp_buf_take(struct pp_buf *b, size_t *len)
{
	char *p = NULL;

	if (!b->failed && reserve(b, 0) == 0) {
		b->data[b->len] = 0; /* an empty buffer was never terminated */
		p = b->data;
		*len = b->len;
		b->data = NULL;
	}
	pp_buf_free(b);
	return p;
}

void pp_buf_free(struct pp_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
	b->failed = 0;
}

int pp_array_reserve(void *pp, size_t *cap, size_t need, size_t elem)
{
	void **p = pp;
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : 16;
	while (c < need) {
		if (c > ((size_t)-1) / 4 / elem)
			return -ENOMEM;
		c *= 2;
	}
	void *q = realloc(*p, c * elem);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = c;
	return 0;
}

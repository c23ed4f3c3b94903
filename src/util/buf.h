/* A growable byte buffer that remembers allocation failure, so callers check
 * once at the end.
 * Context: agent.
 */
#ifndef PP_BUF_H
#define PP_BUF_H

#include <stddef.h>

struct pp_buf {
	char *data;
	size_t len, cap;
	int failed; /* an allocation failed: data is incomplete */
};

void pp_buf_append(struct pp_buf *b, const void *p, size_t n);
void pp_buf_puts(struct pp_buf *b, const char *s);
void pp_buf_printf(struct pp_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Append s with &, <, >, " and ' escaped for HTML text and attributes. */
void pp_buf_html(struct pp_buf *b, const char *s);
/* Hand the bytes over (NUL-terminated); the buffer is left empty. NULL when
 * an allocation failed. */
char *pp_buf_take(struct pp_buf *b, size_t *len);
void pp_buf_free(struct pp_buf *b);

/* Room for need elements of size elem in the array *pp (capacity *cap,
 * doubling from 16): 0, or -ENOMEM with the array as it was. */
int pp_array_reserve(void *pp, size_t *cap, size_t need, size_t elem);

#endif

/* UTF-8 hygiene for text that leaves the process as JSON. Agent context. */
#ifndef PP_UTF8_H
#define PP_UTF8_H

#include <stddef.h>

/* A malloc'd, NUL-terminated copy of s[0..len) in which every byte sequence
 * that is not valid UTF-8 (stray bytes, overlongs, surrogates, embedded NUL)
 * is replaced by U+FFFD. Command lines and paths are bytes, JSON is UTF-8:
 * a Latin-1 file name must not make /status unparsable. NULL on ENOMEM. */
char *pp_utf8_sanitize(const char *s, size_t len);

#endif

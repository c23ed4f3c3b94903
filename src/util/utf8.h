/*
 * UTF-8 for every string that leaves the process. Thread names, label keys
 * and values, paths, symbol names and command lines are bytes the host
 * chose (a 15-byte comm can end in half a character); pprof's and
 * Perfetto's string fields, JSON and Prometheus's text are UTF-8, and
 * strict readers (protoc, Go's protobuf, Python's json) refuse a whole
 * answer for one bad byte. The repair is the one Python's
 * errors="replace", the WHATWG decoder and ICU make (Unicode's "U+FFFD
 * substitution of maximal subparts"): each maximal ill-formed subsequence
 * becomes one U+FFFD, so a character cut short is one U+FFFD and every
 * valid character around it stays. Valid text, the common case, is
 * checked and copied as it is.
 * Context: agent.
 */
#ifndef PP_UTF8_H
#define PP_UTF8_H

#include <stddef.h>

#include "buf.h"

/* The replacement character, U+FFFD, in UTF-8. */
#define PP_UTF8_REPLACEMENT "\xef\xbf\xbd"

/* The length of the longest valid UTF-8 prefix of s[0..len): len when all
 * of it is valid. NUL bytes count as valid (U+0000). */
size_t pp_utf8_valid_prefix(const char *s, size_t len);

static inline int pp_utf8_valid(const char *s, size_t len)
{
	return pp_utf8_valid_prefix(s, len) == len;
}

/* Append s[0..len) to b, repaired: each maximal ill-formed subsequence
 * replaced by U+FFFD. */
void pp_utf8_append(struct pp_buf *b, const char *s, size_t len);

/* A malloc'd, NUL-terminated copy of s[0..len), repaired as
 * pp_utf8_append does, and with each NUL byte also replaced by U+FFFD (the
 * copy is a C string: a NUL in it would cut it short unseen). NULL on
 * ENOMEM. */
char *pp_utf8_sanitize(const char *s, size_t len);

#endif

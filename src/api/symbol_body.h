/*
 * The address list of a /symbol request (gperftools' remote symbolization
 * protocol), as pure functions: h_symbol.c answers with them, the fuzz
 * target (tests/fuzz/fuzz_symbol.c) calls them without a connection.
 * Context: agent.
 */
#ifndef PP_SYMBOL_BODY_H
#define PP_SYMBOL_BODY_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

/* One address: 0x-hex or decimal, under 40 characters; nothing else (no
 * sign, no space, no overflow). 0 or -EINVAL. (Go's net/http/pprof reads
 * strconv.ParseUint(s, 0, 64), where a leading 0 means octal; pprof sends
 * 0x-hex, and "0123" is 123 here.) */
int pp_symbol_parse_addr(const char *s, size_t n, uint64_t *out);

/* Walk in[0..len): addresses separated by '+' or white space (empty
 * tokens skipped). fn(cls, addr) is called for each address in order; a
 * nonzero return stops the walk (0 returned). A token that is not an
 * address stops it with -EINVAL, its place in *bad and *badlen. */
int pp_symbol_addrs(const char *in, size_t len,
                    int (*fn)(void *cls, uint64_t addr), void *cls, size_t *bad,
                    size_t *badlen);

/* GET arguments arrive split by libmicrohttpd ('+' already made a space):
 * append one argument to the list being joined back. */
void pp_symbol_join_arg(struct pp_buf *b, const char *key, const char *value);

#endif

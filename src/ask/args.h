/*
 * The query-string rules of every endpoint, as pure functions of a source of
 * arguments: query.c gives them libmicrohttpd's parsed arguments, the fuzz
 * target (tests/fuzz/fuzz_query.c) a query string it splits itself. No
 * connection, no server.
 * Context: agent.
 */
#ifndef PP_ARGS_H
#define PP_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include "profile/render.h"

/* Called once per argument, in order; value NULL when the key has no '='. */
typedef void (*pp_args_fn)(void *arg, const char *key, const char *value);

/* Where the arguments come from. */
struct pp_args {
	/* Calls fn(arg, key, value) for every query argument, in order. */
	void (*each)(const struct pp_args *a, pp_args_fn fn, void *arg);
	/* The request's Accept-Encoding header, or NULL. */
	const char *accept_encoding;
	void *cls;
};

/* The first value of name ("" for a bare name), or NULL when absent. */
const char *pp_args_value(const struct pp_args *a, const char *name);
/* The rules of a number or a word, on a pp_args. */
int pp_args_uint(const struct pp_args *a, const char *name, unsigned def,
                 unsigned min, unsigned max, unsigned *out, char *err,
                 size_t errlen);
int pp_args_choice(const struct pp_args *a, const char *name,
                   const char *choices, unsigned *out, char *err,
                   size_t errlen);
/* Is name given with a value ("name=" counts, a bare "name" does not)?
 * Names match exactly, as everywhere here: libmicrohttpd's own lookup
 * ignores case, and a "given" that did while the value lookup did not let
 * ?sample_Index=1 reach a value that was never found (fuzz_query: a NULL
 * read that took the host down). */
int pp_args_given(const struct pp_args *a, const char *name);
int pp_args_render(const struct pp_args *a, const char *types, int flags,
                   struct pp_render_opts *o, char *err, size_t errlen);
int pp_args_id(const struct pp_args *a, const char *sampling, uint64_t *id,
               char *err, size_t errlen);

/* Does an Accept-Encoding value (NULL: none) take gzip? A "gzip" (or
 * "x-gzip", or "*") token whose q is not 0. */
int pp_args_takes_gzip(const char *accept_encoding);

/* Decode %HH escapes of str in place: the server's unescape callback for
 * paths and query arguments. %00 stays encoded: a NUL would cut the C
 * string short ("/status%00junk" would match "/status"), so it matches
 * nothing. Malformed escapes stay as they are. Returns the new length.
 * '+' is the caller's (libmicrohttpd makes it a space in arguments
 * first). */
size_t pp_args_unescape(char *str);

#endif

/*
 * Profiles recently served, kept a few minutes so that the same data can be
 * fetched again in another format (?id=N): the viewer's "download as
 * pprof", or a text and a binary view of one CPU window. Holds the last
 * PP_RECENT_MAX models for at most PP_RECENT_TTL_S seconds, and older ones
 * only while all together hold at most pp_recent_set_max_bytes (the
 * newest is kept whatever its size).
 * Context: agent.
 */
#ifndef PP_RECENT_H
#define PP_RECENT_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

#define PP_RECENT_MAX 8
#define PP_RECENT_TTL_S 600

struct pp_recent;

/* Keep p (ownership passes here; p must not change any more) under kind
 * ("profile", "heap"). Returns its id (> 0), or 0 when it could not be kept
 * (p is freed then). */
uint64_t pp_recent_add(const char *kind, struct pp_profile *p);
/* The bound on the memory kept models hold together (default 64 MiB). */
void pp_recent_set_max_bytes(size_t bytes);
/* The profile id of kind, referenced until pp_recent_unref, or NULL when
 * there is none (never was, expired, or another kind) with a sentence in
 * err saying so. */
struct pp_recent *pp_recent_get(uint64_t id, const char *kind, char *err,
                                size_t errlen);
const struct pp_profile *pp_recent_profile(const struct pp_recent *r);
void pp_recent_unref(struct pp_recent *r);
/* Forget them all (pullprof_stop); referenced ones go when released. */
void pp_recent_clear(void);

/* Registers the store's fork handlers (once); the agent calls it before
 * registering its own (see pp_heap_table_register_atfork). */
void pp_recent_register_atfork(void);

#endif

/*
 * Profile labels: what Go's pprof.Do gives a goroutine, for a C thread.
 *
 * A thread's labels are a stack of scopes (pullprof_label_push/pop). Every
 * scope is one interned *label set*: its parent set plus one key/value, so
 * the set in force is one 32-bit number. The SIGPROF handler and the heap
 * sampler copy that number into what they record (hot context: one
 * initial-exec TLS load, no lock); the agent expands it into key/value
 * pairs when it builds a profile. Sets are never freed: a number taken by a
 * sample stays valid for the life of the process (their count is bounded,
 * PP_LABEL_MAX_SETS).
 *
 * Set 0 is the empty set.
 * Context: host.
 */
#ifndef PP_LABELS_H
#define PP_LABELS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define PP_LABEL_MAX_SETS 65536  /* distinct (parent, key, value) */
#define PP_LABEL_MAX_DEPTH 32    /* scopes recorded per thread */
#define PP_LABEL_MAX_KEY 64      /* bytes, without the NUL */
#define PP_LABEL_MAX_VALUE 256   /* bytes, without the NUL */
#define PP_LABEL_MAX_EXPANDED 32 /* distinct keys a sample carries */

/* Per-thread scope stack. Initial-exec TLS: read from signal handlers and
 * the malloc wrappers without the TLS resolver. depth counts every push,
 * also those past PP_LABEL_MAX_DEPTH (not recorded), so pops balance. */
struct pp_label_tls {
	uint32_t depth;
	uint32_t sets[PP_LABEL_MAX_DEPTH];
};
extern __thread struct pp_label_tls pp_label_tls
    __attribute__((tls_model("initial-exec")));

/* HOT/UNSAFE CONTEXT (async-signal-safe): the set in force on this thread. */
static inline uint32_t pp_labels_current(void)
{
	uint32_t d = pp_label_tls.depth;
	atomic_signal_fence(memory_order_acquire);
	if (!d)
		return 0;
	return pp_label_tls
	    .sets[(d < PP_LABEL_MAX_DEPTH ? d : PP_LABEL_MAX_DEPTH) - 1];
}

/* Agent context: the key/value pairs of set, innermost scope winning for a
 * key given twice, outermost first; at most max. Pointers stay valid for
 * the life of the process. Returns the count. */
struct pp_label_pair {
	const char *key, *value;
};
size_t pp_labels_expand(uint32_t set, struct pp_label_pair *out, size_t max);

/* The same as profile labels (string values) for pp_profile_add. */
struct pp_label;
size_t pp_labels_to_profile(uint32_t set, struct pp_label *out, size_t max);

struct pp_label_stats {
	uint64_t sets; /* distinct label sets interned */
	uint64_t
	    refused; /* pushes refused: bad key/value, table full, too deep */
};
void pp_labels_stats(struct pp_label_stats *out);

#endif

/*
 * Profile labels (see labels.h). push/pop run on any host
 * thread (never in a signal handler); expand is the agent's.
 *
 * Interning: an open-addressing index of set numbers, read without a lock
 * (a set is published — node, then index slot — with release stores). A
 * miss allocates the node first, then takes a small spin lock that guards
 * only the index: nothing else is taken or allocated under it, so no lock
 * order exists with malloc or the heap tables. A forked child resets the
 * lock (the parent may have held it at fork).
 * Context: host.
 */
#include "labels/labels.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "profile/model.h"
#include "pullprof.h"
#include "shim/heap_hot.h"

struct node {
	uint32_t parent;
	uint32_t hash;
	const char *key, *value; /* in the same allocation */
};

#define INDEX_SIZE (2 * PP_LABEL_MAX_SETS) /* a power of two */

static struct node *_Atomic nodes[PP_LABEL_MAX_SETS];
static _Atomic uint32_t index_slots[INDEX_SIZE];
static _Atomic uint32_t nsets = 1; /* set 0 is the empty set */
static atomic_flag guard = ATOMIC_FLAG_INIT;
static _Atomic uint64_t refused;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void child_after_fork(void)
{
	atomic_flag_clear(&guard);
}

static void register_fork(void)
{
	pthread_atfork(NULL, NULL, child_after_fork);
}

static uint32_t hash_of(uint32_t parent, const char *key, const char *value)
{
	uint32_t h = 2166136261u;
	for (int i = 0; i < 4; i++)
		h = (h ^ ((parent >> (8 * i)) & 0xff)) * 16777619u;
	for (const char *p = key; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	h = (h ^ 0xff) * 16777619u; /* between key and value */
	for (const char *p = value; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	return h;
}

static int same(const struct node *n, uint32_t hash, uint32_t parent,
                const char *key, const char *value)
{
	return n->hash == hash && n->parent == parent &&
	       strcmp(n->key, key) == 0 && strcmp(n->value, value) == 0;
}

/* The set's number, or 0 when it is not interned; *slot where the probe
 * ended (the first empty slot). */
static uint32_t find(uint32_t hash, uint32_t parent, const char *key,
                     const char *value, size_t *slot)
{
	size_t i = hash & (INDEX_SIZE - 1);
	for (;;) {
		uint32_t id =
		    atomic_load_explicit(&index_slots[i], memory_order_acquire);
		if (!id) {
			*slot = i;
			return 0;
		}
		const struct node *n =
		    atomic_load_explicit(&nodes[id], memory_order_acquire);
		if (same(n, hash, parent, key, value))
			return id;
		i = (i + 1) & (INDEX_SIZE - 1);
	}
}

static int intern(uint32_t parent, const char *key, const char *value,
                  uint32_t *out)
{
	uint32_t hash = hash_of(parent, key, value);
	size_t slot;
	uint32_t id = find(hash, parent, key, value, &slot);
	if (id) {
		*out = id;
		return 0;
	}
	if (atomic_load_explicit(&nsets, memory_order_relaxed) >=
	    PP_LABEL_MAX_SETS)
		return -ENOSPC;

	size_t kn = strlen(key), vn = strlen(value);
	struct node *n = malloc(sizeof *n + kn + vn + 2);
	if (!n)
		return -ENOMEM;
	char *k = (char *)(n + 1), *v = k + kn + 1;
	memcpy(k, key, kn + 1);
	memcpy(v, value, vn + 1);
	*n = (struct node){parent, hash, k, v};

	pthread_once(&fork_once, register_fork);
	while (atomic_flag_test_and_set_explicit(&guard, memory_order_acquire))
		sched_yield();
	/* Again under the guard: another thread may have added it. */
	id = find(hash, parent, key, value, &slot);
	int rc = 0;
	if (!id) {
		uint32_t next =
		    atomic_load_explicit(&nsets, memory_order_relaxed);
		if (next >= PP_LABEL_MAX_SETS) {
			rc = -ENOSPC;
		} else {
			id = next;
			atomic_store_explicit(&nodes[id], n,
			                      memory_order_release);
			atomic_store_explicit(&index_slots[slot], id,
			                      memory_order_release);
			atomic_store_explicit(&nsets, next + 1,
			                      memory_order_relaxed);
			n = NULL; /* kept */
		}
	}
	atomic_flag_clear_explicit(&guard, memory_order_release);
	free(n);
	*out = id;
	return rc;
}

PULLPROF_API int pullprof_label_push(const char *key, const char *value)
{
	struct pp_label_tls *t = &pp_label_tls;
	uint32_t set = pp_labels_current();
	int rc = 0;

	if (t->depth >= PP_LABEL_MAX_DEPTH)
		rc = -ENOSPC;
	else if (!key || !*key || !value ||
	         strnlen(key, PP_LABEL_MAX_KEY + 1) > PP_LABEL_MAX_KEY ||
	         strnlen(value, PP_LABEL_MAX_VALUE + 1) > PP_LABEL_MAX_VALUE)
		rc = -EINVAL;
	else {
		/* A new set's node is the agent's memory, not the host's. */
		int hidden = pp_heap_hide();
		rc = intern(set, key, value, &set);
		pp_heap_unhide(hidden);
	}
	if (rc) {
		/* The scope still opens (its pop must balance), with the
		 * labels of the scope around it. */
		atomic_fetch_add_explicit(&refused, 1, memory_order_relaxed);
		set = pp_labels_current();
	}
	if (t->depth < PP_LABEL_MAX_DEPTH)
		t->sets[t->depth] = set;
	/* The set is in place before a signal handler on this thread can
	 * see the deeper stack. */
	atomic_signal_fence(memory_order_release);
	t->depth++;
	return rc;
}

PULLPROF_API void pullprof_label_pop(void)
{
	struct pp_label_tls *t = &pp_label_tls;
	if (t->depth)
		t->depth--;
	atomic_signal_fence(memory_order_release);
}

size_t pp_labels_expand(uint32_t set, struct pp_label_pair *out, size_t max)
{
	struct pp_label_pair inner[PP_LABEL_MAX_EXPANDED];
	size_t n = 0;

	/* Innermost first, skipping keys an inner scope already gave. */
	for (uint32_t s = set; s && s < PP_LABEL_MAX_SETS && n < max &&
	                       n < PP_LABEL_MAX_EXPANDED;) {
		const struct node *nd =
		    atomic_load_explicit(&nodes[s], memory_order_acquire);
		if (!nd)
			break;
		int seen = 0;
		for (size_t i = 0; i < n && !seen; i++)
			seen = strcmp(inner[i].key, nd->key) == 0;
		if (!seen)
			inner[n++] = (struct pp_label_pair){nd->key, nd->value};
		s = nd->parent;
	}
	for (size_t i = 0; i < n; i++)
		out[i] = inner[n - 1 - i];
	return n;
}

size_t pp_labels_to_profile(uint32_t set, struct pp_label *out, size_t max)
{
	struct pp_label_pair pairs[PP_LABEL_MAX_EXPANDED];
	size_t n = pp_labels_expand(
	    set, pairs,
	    max < PP_LABEL_MAX_EXPANDED ? max : PP_LABEL_MAX_EXPANDED);
	for (size_t i = 0; i < n; i++)
		out[i] =
		    (struct pp_label){pairs[i].key, pairs[i].value, 0, NULL};
	return n;
}

void pp_labels_stats(struct pp_label_stats *o)
{
	o->sets = atomic_load_explicit(&nsets, memory_order_relaxed) - 1;
	o->refused = atomic_load_explicit(&refused, memory_order_relaxed);
}

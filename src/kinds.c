/*
 * The table of profile kinds (kinds.h) and the loops over it.
 * Context: agent.
 *
 * Adding a kind: its folder (producer, settings, its kind.c with the row),
 * one line here, its docs (HACKING.md, "Adding a kind of profile").
 */
#include "kinds.h"

#include <string.h>

/* The rows (each defined as pp_kind_<name> in its folder's kind.c), in
 * start order. The CPU sampler and the thread looks are only configured at
 * start (their threads start with the first window); the others start
 * recording at once. Stop runs the other way. */
#define PP_KINDS(X) X(cpu) X(record) X(threads) X(threadcreate) X(locks) X(heap)

#define DECLARE(name) extern const struct pp_kind pp_kind_##name;
#define ROW(name) &pp_kind_##name,
PP_KINDS(DECLARE)
const struct pp_kind *const pp_kinds[] = {PP_KINDS(ROW)};
const size_t pp_kinds_count = sizeof pp_kinds / sizeof pp_kinds[0];

int pp_kinds_start(const struct pp_config *c, char *err, size_t errlen)
{
	for (size_t i = 0; i < pp_kinds_count; i++) {
		int rc =
		    pp_kinds[i]->start ? pp_kinds[i]->start(c, err, errlen) : 0;
		if (rc) {
			while (i--)
				if (pp_kinds[i]->stop)
					pp_kinds[i]->stop();
			return rc;
		}
	}
	return 0;
}

void pp_kinds_stop(void)
{
	for (size_t i = pp_kinds_count; i--;)
		if (pp_kinds[i]->stop)
			pp_kinds[i]->stop();
}

void pp_kinds_forget_in_child(void)
{
	for (size_t i = 0; i < pp_kinds_count; i++)
		if (pp_kinds[i]->forget_in_child)
			pp_kinds[i]->forget_in_child();
}

void pp_kinds_register_atfork(void)
{
	for (size_t i = 0; i < pp_kinds_count; i++)
		if (pp_kinds[i]->register_atfork)
			pp_kinds[i]->register_atfork();
}

void pp_kinds_status(struct json_object *root)
{
	/* "kinds": each row's name and its pprof profiles (its endpoints
	 * marked merged, by name, which is their path below the prefix): the
	 * viewer offers these. */
	struct json_object *kinds = json_object_new_array();
	for (size_t i = 0; i < pp_kinds_count; i++) {
		struct json_object *k = json_object_new_object();
		struct json_object *profiles = json_object_new_array();
		for (const struct pp_endpoint *const *e =
		         pp_kinds[i]->endpoints;
		     e && *e; e++)
			if ((*e)->merged)
				json_object_array_add(
				    profiles,
				    json_object_new_string((*e)->name));
		json_object_object_add(
		    k, "name", json_object_new_string(pp_kinds[i]->name));
		json_object_object_add(k, "profiles", profiles);
		json_object_array_add(kinds, k);
	}
	json_object_object_add(root, "kinds", kinds);
	for (size_t i = 0; i < pp_kinds_count; i++)
		if (pp_kinds[i]->status)
			pp_kinds[i]->status(root);
}

void pp_kinds_metrics(struct pp_buf *b)
{
	for (size_t i = 0; i < pp_kinds_count; i++)
		if (pp_kinds[i]->metrics)
			pp_kinds[i]->metrics(b);
}

int pp_kinds_tree_merges(const char *route)
{
	for (size_t i = 0; i < pp_kinds_count; i++) {
		const struct pp_endpoint *const *e = pp_kinds[i]->endpoints;
		for (; e && *e; e++)
			if ((*e)->merged && strcmp((*e)->name, route) == 0)
				return 1;
	}
	return 0;
}

void pp_kinds_each_endpoint(void (*fn)(const struct pp_endpoint *e, void *arg),
                            void *arg)
{
	for (size_t i = 0; i < pp_kinds_count; i++) {
		const struct pp_endpoint *const *e = pp_kinds[i]->endpoints;
		for (; e && *e; e++)
			fn(*e, arg);
	}
}

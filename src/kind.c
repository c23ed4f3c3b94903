/*
 * What the rows of the table of kinds share for their /status parts
 * (kind.h).
 * Context: agent.
 */
#include "kind.h"

struct json_object *pp_kind_section(struct json_object *root, const char *key)
{
	struct json_object *o;
	if (json_object_object_get_ex(root, key, &o) && o)
		return o;
	o = json_object_new_object();
	json_object_object_add(root, key, o);
	return o;
}

struct json_object *pp_kind_unwind_json(uint64_t truncated, uint64_t unknown,
                                        uint64_t failed)
{
	struct json_object *u = json_object_new_object();
	json_object_object_add(u, "truncated", PP_JSON_I64(truncated));
	json_object_object_add(u, "unknown_code", PP_JSON_I64(unknown));
	json_object_object_add(u, "failed", PP_JSON_I64(failed));
	return u;
}

void pp_kind_add_cost(struct json_object *o, uint64_t n, uint64_t total_ns,
                      uint64_t max_ns)
{
	json_object_object_add(o, "mean_ns", PP_JSON_I64(n ? total_ns / n : 0));
	json_object_object_add(o, "max_ns", PP_JSON_I64(max_ns));
}

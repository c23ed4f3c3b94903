/*
 * The settings table (src/config.c), the one declaration of every
 * PULLPROF_* setting, printed as JSON for the documentation checks
 * (tests/integration/test_docs.py): key, env, type, default, range,
 * choices, unit and help of each. With --routes, the routing table
 * (src/routes.c) instead: path, methods and help of each route. With
 * --version, what pullprof_version() returns (docs/abi.md's versions).
 */
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "pullprof.h"
#include "routes.h"

/* Print the array and free it. */
static int print(struct json_object *all)
{
	puts(json_object_to_json_string_ext(all, JSON_C_TO_STRING_PRETTY));
	json_object_put(all);
	return 0;
}

static int routes(void)
{
	char err[200];
	if (pp_routes_build(err, sizeof err)) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	struct json_object *all = json_object_new_array();
	for (size_t i = 0; i < pp_routes_count; i++) {
		const struct pp_route *r = &pp_routes[i];
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "path",
		                       json_object_new_string(r->path));
		json_object_object_add(o, "name",
		                       json_object_new_string(r->name));
		json_object_object_add(o, "methods",
		                       json_object_new_string(r->methods));
		json_object_object_add(o, "help",
		                       json_object_new_string(r->help));
		json_object_array_add(all, o);
	}
	return print(all);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--routes") == 0)
		return routes();
	if (argc > 1 && strcmp(argv[1], "--version") == 0)
		return puts(pullprof_version()) < 0;
	static const char *const types[] = {
	    [PP_SETTING_STRING] = "string",
	    [PP_SETTING_UINT] = "uint",
	    [PP_SETTING_SECRET] = "secret",
	};
	struct json_object *all = json_object_new_array();

	for (size_t i = 0; i < pp_settings_count; i++) {
		const struct pp_setting *s = &pp_settings[i];
		struct json_object *o = json_object_new_object();
		int uint = s->type == PP_SETTING_UINT;
		json_object_object_add(o, "key",
		                       json_object_new_string(s->key));
		json_object_object_add(o, "env",
		                       json_object_new_string(s->env));
		json_object_object_add(o, "type",
		                       json_object_new_string(types[s->type]));
		json_object_object_add(o, "default",
		                       uint ? json_object_new_int64(s->def)
		                       : s->def_text
		                           ? json_object_new_string(s->def_text)
		                           : NULL);
		json_object_object_add(
		    o, "min", uint ? json_object_new_int64(s->min) : NULL);
		json_object_object_add(
		    o, "max", uint ? json_object_new_int64(s->max) : NULL);
		json_object_object_add(
		    o, "choices",
		    s->choices ? json_object_new_string(s->choices) : NULL);
		json_object_object_add(o, "unit",
		                       json_object_new_string(s->unit));
		json_object_object_add(o, "help",
		                       json_object_new_string(s->help));
		json_object_array_add(all, o);
	}
	return print(all);
}

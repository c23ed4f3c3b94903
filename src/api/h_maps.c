/*
 * /maps: the process's executable mappings as JSON, with what the symbolizer
 * found for each (DWARF, an ELF symbol table, nothing; a separate debug
 * file) and whether the file on disk is still the one that was loaded: the
 * first thing to look at when a profile shows bare addresses.
 * Context: agent.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handlers.h"
#include "pullprof.h"
#include "server/lookup.h"
#include "server/respond.h"
#include "symbols/symbols.h"

static struct json_object *hex(uint64_t v)
{
	char buf[24];
	snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)v);
	return json_object_new_string(buf);
}

static struct json_object *mapping_json(struct pp_symtab *st,
                                        const struct pp_mapping *mp)
{
	struct json_object *o = json_object_new_object();
	struct pp_module_info info;
	char now[80];

	pp_symtab_module_info(st, mp, &info);
	/* Replaced: the file at the path is not the one loaded (another build
	 * ID); the kernel's "(deleted)" says it was removed or renamed over. */
	int replaced = mp->deleted || mp->file_changed;
	if (!replaced && mp->is_file && mp->build_id[0] &&
	    pp_mappings_file_build_id(mp->path, now, sizeof now) == 0)
		replaced = strcmp(now, mp->build_id) != 0;

	json_object_object_add(o, "id", json_object_new_int64(mp->id));
	json_object_object_add(o, "start", hex(mp->start));
	json_object_object_add(o, "limit", hex(mp->limit));
	json_object_object_add(o, "offset", hex(mp->offset));
	json_object_object_add(o, "path",
	                       pp_json_text(mp->path, strlen(mp->path)));
	json_object_object_add(o, "build_id",
	                       json_object_new_string(mp->build_id));
	json_object_object_add(o, "main", json_object_new_boolean(mp->is_main));
	json_object_object_add(o, "file", json_object_new_boolean(mp->is_file));
	json_object_object_add(o, "deleted",
	                       json_object_new_boolean(mp->deleted));
	json_object_object_add(o, "replaced",
	                       json_object_new_boolean(replaced));
	json_object_object_add(
	    o, "file_changed",
	    mp->file_changed ? json_object_new_string(mp->file_changed) : NULL);
	json_object_object_add(o, "symbols",
	                       json_object_new_string(info.symbols));
	json_object_object_add(
	    o, "elf_file",
	    pp_json_text(info.elf_file,
	                 info.elf_file ? strlen(info.elf_file) : 0));
	json_object_object_add(
	    o, "debug_file",
	    pp_json_text(info.debug_file,
	                 info.debug_file ? strlen(info.debug_file) : 0));
	return o;
}

/* On the lookup thread: loading a module's DWARF can take a while. */
static void list_maps(void *arg, const atomic_int *cancel,
                      struct pp_lookup_answer *a)
{
	(void)arg;
	struct pp_symtab *st;
	int rc = pp_symtab_acquire(&st);
	if (rc) {
		a->status = MHD_HTTP_SERVICE_UNAVAILABLE;
		if (pp_respond_no_proc(a->msg, sizeof a->msg))
			return;
		snprintf(a->msg, sizeof a->msg,
		         "the mappings could not be read: %s",
		         pullprof_strerror(rc));
		return;
	}
	const struct pp_mappings *m = pp_symtab_mappings(st);
	size_t n = 0; /* m is the symbolizer's: not after release */
	struct json_object *list = json_object_new_array();
	for (size_t i = 0; i < m->n && !atomic_load(cancel); i++) {
		/* Images unloaded since are no mappings of the process any
		 * more (profiles show them where their samples need them). */
		if (m->v[i].unloaded)
			continue;
		json_object_array_add(list, mapping_json(st, &m->v[i]));
		n++;
	}
	rc = pp_symtab_shortage(st);
	pp_symtab_release(st);
	if (rc) {
		/* What a file that could not be opened holds is unknown. */
		json_object_put(list);
		a->status = MHD_HTTP_SERVICE_UNAVAILABLE;
		snprintf(a->msg, sizeof a->msg,
		         "the symbol files could not be read: %s",
		         pullprof_strerror(rc));
		return;
	}

	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "count", json_object_new_int64((int64_t)n));
	json_object_object_add(o, "mappings", list);
	a->status = MHD_HTTP_OK;
	a->json = o;
}

enum MHD_Result pp_h_maps(struct pp_request *r)
{
	return pp_lookup_answer_later(r, list_maps, NULL, NULL);
}

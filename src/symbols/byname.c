/*
 * Functions by name in the symbol tables of the loaded objects
 * (byname.h): each object's file searched with elfsym.c, the executable
 * first, then the libraries in load order; the object's load bias added.
 * Context: agent.
 */
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbols/byname.h"
#include "symbols/elfsym.h"

struct object {
	char path[256];
	uintptr_t bias;
	int main;
};

struct objects {
	struct object *v;
	size_t n, cap;
	int only_main;
};

static int collect(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct objects *o = arg;
	int main = o->n == 0; /* the executable comes first */
	if (o->only_main && !main)
		return 1;
	const char *name = info->dlpi_name;
	if (!main && (!name || !*name))
		return 0; /* the vDSO */
	if (o->n == o->cap) {
		size_t cap = o->cap ? o->cap * 2 : 16;
		struct object *v = realloc(o->v, cap * sizeof *v);
		if (!v)
			return -1;
		o->v = v;
		o->cap = cap;
	}
	struct object *ob = &o->v[o->n++];
	snprintf(ob->path, sizeof ob->path, "%s",
	         main ? "/proc/self/exe" : name);
	ob->bias = info->dlpi_addr;
	ob->main = main;
	return 0;
}

/* 0 (out filled with the first of names the object defines), -ENOENT,
 * or the file's error. */
static int search_object(const struct object *ob, const char *const *names,
                         size_t nnames, struct pp_byname *out)
{
	struct pp_elfsym syms[8];
	unsigned flags = 0;
	if (nnames > sizeof syms / sizeof syms[0])
		return -EINVAL;
	for (size_t i = 0; i < nnames; i++)
		syms[i] = (struct pp_elfsym){.name = names[i]};
	int rc = pp_elfsym_lookup(ob->path, syms, nnames, &flags);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < nnames; i++) {
		if (!syms[i].found || !syms[i].value)
			continue;
		out->addr = (void *)((flags & PP_ELFSYM_PIE ? ob->bias : 0) +
		                     (uintptr_t)syms[i].value);
		out->name = names[i];
		out->in_main = ob->main;
		if (ob->main) {
			ssize_t n = readlink("/proc/self/exe", out->path,
			                     sizeof out->path - 1);
			out->path[n > 0 ? n : 0] = 0;
		} else
			snprintf(out->path, sizeof out->path, "%s", ob->path);
		return 0;
	}
	return -ENOENT;
}

int pp_byname_find(const char *const *names, int only_main,
                   struct pp_byname *out)
{
	struct objects o = {.only_main = only_main};
	size_t nnames = 0;
	int rc = -ENOENT;

	memset(out, 0, sizeof *out);
	while (names[nnames])
		nnames++;
	if (dl_iterate_phdr(collect, &o) < 0) {
		free(o.v);
		return -ENOMEM;
	}
	for (size_t i = 0; i < o.n && rc == -ENOENT; i++) {
		int r = search_object(&o.v[i], names, nnames, out);
		if (r == 0 || r == -ENOENT)
			rc = r;
	}
	free(o.v);
	return rc;
}

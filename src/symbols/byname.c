/*
 * Functions by name in the executable's symbol table (byname.h): its file
 * searched with elfsym.c, the executable's load bias added.
 * Context: agent.
 */
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "symbols/byname.h"
#include "symbols/elfsym.h"

int pp_byname_exe(const char *const *names, struct pp_byname *out)
{
	struct pp_elfsym syms[8];
	unsigned flags = 0;
	size_t n = 0;

	memset(out, 0, sizeof *out);
	while (names[n] && n < sizeof syms / sizeof syms[0]) {
		syms[n] = (struct pp_elfsym){.name = names[n]};
		n++;
	}
	int rc = pp_elfsym_lookup("/proc/self/exe", syms, n, &flags);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		if (!syms[i].found || !syms[i].value)
			continue;
		/* The executable's link map comes first; l_addr is its
		 * load bias (0 for a fixed-address one). */
		uintptr_t bias =
		    flags & PP_ELFSYM_PIE ? _r_debug.r_map->l_addr : 0;
		out->addr = (void *)(bias + (uintptr_t)syms[i].value);
		out->name = names[i];
		ssize_t len =
		    readlink("/proc/self/exe", out->path, sizeof out->path - 1);
		out->path[len > 0 ? len : 0] = 0;
		return 0;
	}
	return -ENOENT;
}

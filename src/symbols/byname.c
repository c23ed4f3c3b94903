/*
 * Functions by name in the ELF symbol tables of the loaded objects
 * (byname.h): each object's file is opened with libelf, its .symtab (or,
 * stripped, its .dynsym) searched, the load bias of the object added.
 * Context: agent.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbols/byname.h"
#include "util/fds.h"

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

/* Search one section's symbols for names[0..best-1]; the index of the
 * best name found, or best when none. */
static size_t search(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh,
                     const char *const *names, size_t best, GElf_Sym *found)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	if (!data || !sh->sh_entsize)
		return best;
	size_t n = sh->sh_size / sh->sh_entsize;
	for (size_t i = 1; i < n && best > 0; i++) {
		GElf_Sym sym;
		if (!gelf_getsym(data, (int)i, &sym) ||
		    GELF_ST_TYPE(sym.st_info) != STT_FUNC ||
		    sym.st_shndx == SHN_UNDEF || !sym.st_value)
			continue;
		const char *s = elf_strptr(elf, sh->sh_link, sym.st_name);
		if (!s)
			continue;
		for (size_t k = 0; k < best; k++)
			if (strcmp(s, names[k]) == 0) {
				best = k;
				*found = sym;
				break;
			}
	}
	return best;
}

static int search_object(const struct object *ob, const char *const *names,
                         size_t nnames, struct pp_byname *out)
{
	int fd = pp_fds_open(ob->path, O_RDONLY);
	if (fd < 0)
		return -errno;
	elf_version(EV_CURRENT);
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	int rc = -ENOENT;
	if (!elf)
		goto out;
	size_t best = nnames, dbest = nnames;
	GElf_Sym sym, dsym;
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_SYMTAB)
			best = search(elf, scn, &sh, names, best, &sym);
		else if (sh.sh_type == SHT_DYNSYM)
			dbest = search(elf, scn, &sh, names, dbest, &dsym);
	}
	if (dbest <= best) {
		best = dbest;
		sym = dsym;
	}
	if (best < nnames) {
		GElf_Ehdr eh;
		int pie = gelf_getehdr(elf, &eh) && eh.e_type == ET_DYN;
		out->addr =
		    (void *)((pie ? ob->bias : 0) + (uintptr_t)sym.st_value);
		out->name = names[best];
		out->in_main = ob->main;
		out->exported = dbest == best;
		if (ob->main) {
			ssize_t n = readlink("/proc/self/exe", out->path,
			                     sizeof out->path - 1);
			out->path[n > 0 ? n : 0] = 0;
		} else
			snprintf(out->path, sizeof out->path, "%s", ob->path);
		rc = 0;
	}
	elf_end(elf);
out:
	pp_fds_close(fd);
	return rc;
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

/*
 * Symbols by name from an ELF file's .symtab and .dynsym (see elfsym.h).
 * Context: agent.
 */
#include "symbols/elfsym.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <string.h>

#include "util/fds.h"

/* The file at path, open in libelf (mapped) with its descriptor in *fd:
 * an Elf, or NULL with *err a negative errno. */
static Elf *open_elf(const char *path, int *fd, int *err)
{
	*fd = pp_fds_open(path, O_RDONLY);
	if (*fd < 0) {
		*err = -(errno ? errno : EIO);
		return NULL;
	}
	elf_version(EV_CURRENT);
	Elf *elf = elf_begin(*fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		if (elf)
			elf_end(elf);
		pp_fds_close(*fd);
		*fd = -1;
		*err = -ENOEXEC;
		return NULL;
	}
	return elf;
}

static void close_elf(Elf *elf, int fd)
{
	elf_end(elf);
	pp_fds_close(fd);
}

/* Look for the names still unfound in one symbol table section. */
static size_t scan_table(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh,
                         struct pp_elfsym *syms, size_t n, size_t *left)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	if (!data || !sh->sh_entsize)
		return 0;
	size_t count = sh->sh_size / sh->sh_entsize, found = 0;
	for (size_t i = 1; i < count && *left; i++) {
		GElf_Sym sym;
		if (!gelf_getsym(data, (int)i, &sym) || !sym.st_name ||
		    sym.st_shndx == SHN_UNDEF)
			continue;
		const char *name = elf_strptr(elf, sh->sh_link, sym.st_name);
		if (!name)
			continue;
		for (size_t k = 0; k < n; k++) {
			if (syms[k].found || strcmp(name, syms[k].name) != 0)
				continue;
			syms[k].value = sym.st_value;
			syms[k].size = sym.st_size;
			syms[k].found = 1;
			found++;
			(*left)--;
		}
	}
	return found;
}

int pp_elfsym_lookup(const char *path, struct pp_elfsym *syms, size_t n,
                     unsigned *flags)
{
	int fd, err;
	unsigned f = 0;
	for (size_t k = 0; k < n; k++) {
		syms[k].value = syms[k].size = 0;
		syms[k].found = 0;
	}
	if (flags)
		*flags = 0;
	Elf *elf = open_elf(path, &fd, &err);
	if (!elf)
		return err;
	GElf_Ehdr eh;
	if (!gelf_getehdr(elf, &eh)) {
		close_elf(elf, fd);
		return -ENOEXEC;
	}
	if (eh.e_type == ET_DYN)
		f |= PP_ELFSYM_PIE;
	size_t left = n, found = 0;
	/* .symtab first: it holds every name .dynsym has, and the local
	 * ones; .dynsym only for a stripped file. */
	for (int pass = 0; pass < 2 && left; pass++) {
		Elf_Scn *scn = NULL;
		while ((scn = elf_nextscn(elf, scn)) != NULL && left) {
			GElf_Shdr sh;
			if (!gelf_getshdr(scn, &sh))
				continue;
			unsigned want = pass == 0 ? SHT_SYMTAB : SHT_DYNSYM;
			if (sh.sh_type != want)
				continue;
			f |= pass == 0 ? PP_ELFSYM_SYMTAB : PP_ELFSYM_DYNSYM;
			found += scan_table(elf, scn, &sh, syms, n, &left);
		}
	}
	close_elf(elf, fd);
	if (flags)
		*flags = f;
	return (int)found;
}

/* Is hit (in [b, end)) the start of a string that is s followed by
 * characters of rest only, one at least ("": none; NULL: anything)? */
static int string_at(const char *b, const char *end, const char *hit,
                     size_t slen, const char *rest)
{
	if (hit > b && hit[-1])
		return 0;
	if (!rest)
		return 1;
	const char *p = hit + slen;
	if (*rest && (p >= end || !*p))
		return 0; /* at least one of rest */
	for (; p < end && *p; p++)
		if (!strchr(rest, *p))
			return 0;
	return 1;
}

int pp_elfsym_has_string(const char *path, const char *s, const char *rest,
                         char *out, size_t outlen)
{
	int fd, err;
	size_t slen = strlen(s);
	Elf *elf = open_elf(path, &fd, &err);
	if (!elf)
		return err;
	int rc = 0;
	Elf_Scn *scn = NULL;
	while (!rc && (scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    !(sh.sh_flags & SHF_ALLOC) ||
		    (sh.sh_flags & (SHF_EXECINSTR | SHF_WRITE)))
			continue;
		Elf_Data *data = elf_getdata(scn, NULL);
		if (!data || !data->d_buf)
			continue;
		const char *b = data->d_buf, *end = b + data->d_size;
		const char *hit = b;
		while ((hit = memmem(hit, (size_t)(end - hit), s, slen)) &&
		       !string_at(b, end, hit, slen, rest))
			hit++;
		if (!hit)
			continue;
		rc = 1;
		if (!out || !outlen)
			break;
		size_t len = strnlen(hit, (size_t)(end - hit));
		if (len >= outlen)
			len = outlen - 1;
		memcpy(out, hit, len);
		out[len] = 0;
	}
	close_elf(elf, fd);
	return rc;
}

/*
 * Executable mappings of this process, from /proc/self/maps, with GNU build
 * IDs. Agent context.
 *
 * Build IDs come from the loaded images' own PT_NOTE segments, found with
 * dl_iterate_phdr: no file is opened, so they are right even when the file
 * on disk was replaced or lives in another mount namespace, and [vdso] gets
 * one too. Mappings the loader does not know (an ELF file mmap'd by hand)
 * fall back to reading the file with libelf.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <elfutils/libdwelf.h>

#include "symbols.h"
#include "util/buf.h"
#include "util/hash.h"
#include "util/proc.h"

#define DELETED " (deleted)"

struct image {
	uintptr_t lo, hi; /* loaded address range */
	char build_id[41 + 24];
};

struct images {
	struct image *v;
	size_t n, cap;
};

static void hex(const unsigned char *p, size_t n, char *out, size_t outlen)
{
	static const char digits[] = "0123456789abcdef";
	size_t k = 0;
	for (size_t i = 0; i < n && k + 2 < outlen; i++) {
		out[k++] = digits[p[i] >> 4];
		out[k++] = digits[p[i] & 15];
	}
	out[k] = 0;
}

/* Is [p, p+n) inside one of the image's PT_LOAD segments (so mapped)? */
static int loaded(const struct dl_phdr_info *info, uintptr_t p, size_t n)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && p >= lo &&
		    p + n <= lo + ph->p_filesz)
			return 1;
	}
	return 0;
}

static int on_image(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct images *im = arg;
	struct image img = {UINTPTR_MAX, 0, ""};
	(void)size;

	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD) {
			if (lo < img.lo)
				img.lo = lo;
			if (lo + ph->p_memsz > img.hi)
				img.hi = lo + ph->p_memsz;
		}
		if (ph->p_type != PT_NOTE || img.build_id[0] ||
		    !loaded(info, lo, ph->p_filesz))
			continue;
		const unsigned char *p = (const unsigned char *)lo;
		const unsigned char *end = p + ph->p_filesz;
		/* Elf64_Nhdr and Elf32_Nhdr are both three 4-byte words. */
		while (p + 12 <= end) {
			const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
			size_t namesz = (nh->n_namesz + 3) & ~3u;
			size_t descsz = (nh->n_descsz + 3) & ~3u;
			const unsigned char *name = p + sizeof *nh;
			const unsigned char *desc = name + namesz;
			if (desc + descsz > end)
				break;
			if (nh->n_type == NT_GNU_BUILD_ID &&
			    nh->n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
				hex(desc, nh->n_descsz, img.build_id,
				    sizeof img.build_id);
				break;
			}
			p = desc + descsz;
		}
	}
	if (img.hi == 0)
		return 0;
	if (im->n == im->cap) {
		size_t cap = im->cap ? im->cap * 2 : 32;
		struct image *v = realloc(im->v, cap * sizeof *v);
		if (!v)
			return 1;
		im->v = v;
		im->cap = cap;
	}
	im->v[im->n++] = img;
	return 0;
}

/* The build ID read from the file itself, for mappings the loader does not
 * know. */
static void file_build_id(const char *path, char *out, size_t outlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	const void *id;

	out[0] = 0;
	if (fd < 0)
		return;
	elf_version(EV_CURRENT);
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (elf) {
		ssize_t n = dwelf_elf_gnu_build_id(elf, &id);
		if (n > 0)
			hex(id, (size_t)n, out, outlen);
		elf_end(elf);
	}
	close(fd);
}

int pp_mappings_read(struct pp_mappings *m)
{
	char *text, *line, *save = NULL;
	size_t len;
	struct images im = {0};
	struct pp_buf strings = {0};
	size_t cap = 0;
	char exe[4096];
	ssize_t exelen;
	int rc;

	memset(m, 0, sizeof *m);
	rc = pp_proc_read_file("/proc/self/maps", 64 << 20, &text, &len);
	if (rc)
		return rc;
	exelen = readlink("/proc/self/exe", exe, sizeof exe - 1);
	exe[exelen > 0 ? exelen : 0] = 0;
	dl_iterate_phdr(on_image, &im);

	/* Offsets into `strings` first; pointers once it stops moving. */
	size_t *path_off = NULL, *id_off = NULL;
	pp_buf_append(&strings, "", 1);
	uint64_t sig = 0;
	int have_main = 0;

	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		unsigned long long start, end, offset, inode;
		char perms[8];
		int pathpos = 0;
		if (sscanf(line, "%llx-%llx %7s %llx %*s %llu %n", &start, &end,
		           perms, &offset, &inode, &pathpos) < 5 ||
		    perms[2] != 'x')
			continue;
		const char *path = pathpos ? line + pathpos : "";
		size_t plen = strlen(path);
		int deleted = 0;
		if (plen > strlen(DELETED) &&
		    strcmp(path + plen - strlen(DELETED), DELETED) == 0) {
			plen -= strlen(DELETED);
			deleted = 1;
		}
		if (m->n == cap) {
			cap = cap ? cap * 2 : 64;
			struct pp_mapping *v = realloc(m->v, cap * sizeof *v);
			size_t *po = realloc(path_off, cap * sizeof *po);
			if (po)
				path_off = po;
			size_t *io = realloc(id_off, cap * sizeof *io);
			if (io)
				id_off = io;
			if (!v || !po || !io) {
				free(v ? v : m->v);
				m->v = NULL;
				rc = -ENOMEM;
				goto out;
			}
			m->v = v;
		}
		struct pp_mapping *mp = &m->v[m->n];
		memset(mp, 0, sizeof *mp);
		mp->start = (uintptr_t)start;
		mp->limit = (uintptr_t)end;
		mp->offset = offset;
		mp->deleted = deleted;
		mp->is_file = plen > 0 && path[0] == '/';
		mp->is_main = mp->is_file && !have_main &&
		              strncmp(path, exe, plen) == 0 && exe[plen] == 0;
		have_main |= mp->is_main;
		path_off[m->n] = strings.len;
		pp_buf_append(&strings, path, plen);
		pp_buf_append(&strings, "", 1);

		char id[80] = "";
		for (size_t i = 0; i < im.n; i++) {
			if (mp->start >= im.v[i].lo && mp->start < im.v[i].hi) {
				strcpy(id, im.v[i].build_id);
				break;
			}
		}
		if (!id[0] && mp->is_file && !deleted) {
			char p[4096];
			snprintf(p, sizeof p, "%.*s", (int)plen, path);
			file_build_id(p, id, sizeof id);
		}
		id_off[m->n] = strings.len;
		pp_buf_append(&strings, id, strlen(id) + 1);

		sig = pp_hash_mix(sig, start);
		sig = pp_hash_mix(sig, end);
		sig = pp_hash_mix(sig, offset);
		sig = pp_hash_mix(sig, pp_hash_bytes(path, plen));
		m->n++;
	}
	if (strings.failed) {
		rc = -ENOMEM;
		goto out;
	}
	m->strings = strings.data;
	strings.data = NULL;
	/* IDs: the main executable first, then the rest by address. */
	unsigned next = 2;
	for (size_t i = 0; i < m->n; i++) {
		m->v[i].path = m->strings + path_off[i];
		m->v[i].build_id = m->strings + id_off[i];
		m->v[i].id = m->v[i].is_main ? 1 : next++;
	}
	if (!have_main) /* no main executable found: number from 1 */
		for (size_t i = 0; i < m->n; i++)
			m->v[i].id--;
	m->signature = sig;
out:
	if (rc)
		pp_mappings_free(m);
	pp_buf_free(&strings);
	free(path_off);
	free(id_off);
	free(im.v);
	free(text);
	return rc;
}

void pp_mappings_free(struct pp_mappings *m)
{
	free(m->v);
	free(m->strings);
	memset(m, 0, sizeof *m);
}

const struct pp_mapping *pp_mappings_find(const struct pp_mappings *m,
                                          uintptr_t pc)
{
	size_t lo = 0, hi = m->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (pc < m->v[mid].start)
			hi = mid;
		else if (pc >= m->v[mid].limit)
			lo = mid + 1;
		else
			return &m->v[mid];
	}
	return NULL;
}

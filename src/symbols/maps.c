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

/* Build IDs for every mapping: from the loaded images first, from the
 * file when the loader does not know the mapping. */
static void add_build_ids(struct pp_mappings *m, struct pp_buf *strings,
                          size_t *id_off)
{
	struct images im = {0};

	dl_iterate_phdr(on_image, &im);
	for (size_t i = 0; i < m->n; i++) {
		struct pp_mapping *mp = &m->v[i];
		char id[80] = "";
		for (size_t k = 0; k < im.n; k++) {
			if (mp->start >= im.v[k].lo && mp->start < im.v[k].hi) {
				strcpy(id, im.v[k].build_id);
				break;
			}
		}
		if (!id[0] && mp->is_file && !mp->deleted)
			file_build_id(strings->data + (size_t)mp->path, id,
			              sizeof id);
		id_off[i] = strings->len;
		pp_buf_append(strings, id, strlen(id) + 1);
	}
	free(im.v);
}

int pp_mappings_read(struct pp_mappings *m, const struct pp_mappings *prev)
{
	char *text, *line, *save = NULL;
	size_t len, cap = 0;
	struct pp_buf strings = {0};
	size_t *id_off = NULL;
	char exe[4096];
	ssize_t exelen;
	uint64_t sig = 0;
	int have_main = 0, rc;

	memset(m, 0, sizeof *m);
	rc = pp_proc_read_file("/proc/self/maps", 64 << 20, &text, &len);
	if (rc)
		return rc;
	exelen = readlink("/proc/self/exe", exe, sizeof exe - 1);
	exe[exelen > 0 ? exelen : 0] = 0;
	pp_buf_append(&strings, "", 1);

	/* Pass 1: the executable mappings and their signature. Paths are
	 * kept as offsets into `strings` (stored in the path pointer) until it
	 * stops moving. */
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
		size_t plen = strlen(path), dl = strlen(DELETED);
		int deleted =
		    plen > dl && strcmp(path + plen - dl, DELETED) == 0;
		if (deleted)
			plen -= dl;
		if (m->n == cap) {
			cap = cap ? cap * 2 : 64;
			struct pp_mapping *v = realloc(m->v, cap * sizeof *v);
			if (!v) {
				rc = -ENOMEM;
				goto out;
			}
			m->v = v;
		}
		struct pp_mapping *mp = &m->v[m->n++];
		memset(mp, 0, sizeof *mp);
		mp->start = (uintptr_t)start;
		mp->limit = (uintptr_t)end;
		mp->offset = offset;
		mp->deleted = deleted;
		mp->is_file = plen > 0 && path[0] == '/';
		mp->is_main = mp->is_file && !have_main &&
		              strncmp(path, exe, plen) == 0 && exe[plen] == 0;
		have_main |= mp->is_main;
		mp->path = (const char *)(uintptr_t)strings.len;
		pp_buf_append(&strings, path, plen);
		pp_buf_append(&strings, "", 1);
		sig = pp_hash_mix(sig, start);
		sig = pp_hash_mix(sig, end);
		sig = pp_hash_mix(sig, offset);
		sig = pp_hash_mix(sig, pp_hash_bytes(path, plen));
	}
	if (prev && prev->v && prev->signature == sig) {
		rc = 1; /* unchanged: spare the build IDs */
		goto out;
	}

	/* Pass 2: build IDs, then pointers, then IDs (main executable 1). */
	id_off = malloc((m->n + 1) * sizeof *id_off);
	if (!id_off) {
		rc = -ENOMEM;
		goto out;
	}
	add_build_ids(m, &strings, id_off);
	if (strings.failed) {
		rc = -ENOMEM;
		goto out;
	}
	m->strings = strings.data;
	strings.data = NULL;
	unsigned next = have_main ? 2 : 1;
	for (size_t i = 0; i < m->n; i++) {
		m->v[i].path = m->strings + (size_t)(uintptr_t)m->v[i].path;
		m->v[i].build_id = m->strings + id_off[i];
		m->v[i].id = m->v[i].is_main ? 1 : next++;
	}
	m->signature = sig;
out:
	if (rc)
		pp_mappings_free(m);
	pp_buf_free(&strings);
	free(id_off);
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

/*
 * Executable mappings of this process, from /proc/self/maps, with GNU build
 * IDs.
 *
 * Build IDs come from the loaded images' own PT_NOTE segments, found with
 * dl_iterate_phdr and copied with checked reads: no file is opened, so they
 * are right even when the file on disk was replaced or lives in another
 * mount namespace, and [vdso] gets one too; a file truncated or written
 * over under its mapping is noticed and said (file_changed), never read
 * through the mapping. Mappings the loader does not know (an ELF file mmap'd by
 * hand) fall back to reading the file with libelf.
 * Context: agent.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <elfutils/libdwelf.h>

#include "symbols.h"
#include "util/buf.h"
#include "util/fds.h"
#include "util/hash.h"
#include "util/proc.h"
#include "util/utf8.h"

#define DELETED " (deleted)"

struct image {
	uintptr_t addr;     /* dlpi_addr */
	uint64_t name_hash; /* of dlpi_name: with addr, the image's identity */
	uintptr_t lo, hi;   /* loaded address range */
	char build_id[41 + 24];
	/* Its program headers or notes could not be read (the file was
	 * truncated under the mapping): lo, hi and build_id are unknown. */
	int unreadable;
	uint64_t seen; /* remembered images: the read that last saw it */
};

struct images {
	struct image *v;
	size_t n, cap;
};

/*
 * What each loaded image was the first time it was seen: its range and
 * build ID. A file overwritten in place (cp over it: truncated, then
 * written) shows its new bytes through the old mapping wherever the
 * process has not written to the page, so the notes read now may be
 * another file's; the code that runs is still (partly) the old one. The
 * build ID remembered here is what was loaded, and a different one read
 * now says the file was replaced.
 */
static pthread_mutex_t seen_mu = PTHREAD_MUTEX_INITIALIZER;
static struct images seen;
static uint64_t seen_reads;
static _Atomic uint64_t changed_images;
static char **changed_paths; /* NULL-terminated, of the last read */
/* Set by an unload that found the lock taken: forget every image. */
static atomic_int forget_all;

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
static int loaded(const ElfW(Phdr) * phdr, int phnum, uintptr_t base,
                  uintptr_t p, size_t n)
{
	for (int i = 0; i < phnum; i++) {
		const ElfW(Phdr) *ph = &phdr[i];
		uintptr_t lo = base + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && p >= lo &&
		    p + n <= lo + ph->p_filesz)
			return 1;
	}
	return 0;
}

/* The GNU build ID among the notes of a PT_NOTE segment (a copy). */
void pp_note_build_id(const unsigned char *p, size_t len, char *out,
                      size_t outlen)
{
	const unsigned char *end = p + len;
	/* Elf64_Nhdr and Elf32_Nhdr are both three 4-byte words. */
	while (p + 12 <= end) {
		ElfW(Nhdr) nh;
		memcpy(&nh, p, sizeof nh);
		size_t namesz = (nh.n_namesz + 3) & ~3u;
		size_t descsz = (nh.n_descsz + 3) & ~3u;
		const unsigned char *name = p + sizeof nh;
		if (namesz > (size_t)(end - name))
			break;
		const unsigned char *desc = name + namesz;
		if (descsz > (size_t)(end - desc))
			break;
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
		    memcmp(name, "GNU", 4) == 0) {
			hex(desc, nh.n_descsz, out, outlen);
			return;
		}
		p = desc + descsz;
	}
}

/* The hash of an image's name (dlpi_name), read with checked copies a page
 * at a time rather than in place: the name is the loader's memory, written
 * under its lock by a host's dlopen, and ThreadSanitizer's dl_iterate_phdr
 * interceptor vouches for the name's bytes but not its terminating NUL
 * (a strlen here was reported racing with the loader's strdup). */
static uint64_t name_hash(const char *name)
{
	char buf[PATH_MAX];
	size_t len = 0;
	if (!name)
		return pp_hash_bytes("", 0);
	while (len < sizeof buf) {
		uintptr_t at = (uintptr_t)name + len;
		size_t n = 4096 - (at & 4095);
		if (n > sizeof buf - len)
			n = sizeof buf - len;
		if (pp_proc_copy_self(at, buf + len, n))
			break;
		char *end = memchr(buf + len, 0, n);
		if (end)
			return pp_hash_bytes(buf, (size_t)(end - buf));
		len += n;
	}
	return pp_hash_bytes(buf, len);
}

/*
 * The loader's list of images. Their program headers and notes live in
 * the images' own mappings, which are the files' pages: a file truncated
 * after it was loaded leaves pages past its new end that raise SIGBUS when
 * read. Every byte is copied with a checked read first (the unwinder's
 * process_vm_readv): an image that cannot be read is noted as such.
 */
static int on_image(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct images *im = arg;
	struct image img = {.addr = info->dlpi_addr, .lo = UINTPTR_MAX};
	ElfW(Phdr) *phdr = NULL;
	int phnum = info->dlpi_phnum;
	(void)size;
	img.name_hash = name_hash(info->dlpi_name);
	if (phnum > 0) {
		phdr = malloc((size_t)phnum * sizeof *phdr);
		if (!phdr)
			return 1;
		if (pp_proc_copy_self((uintptr_t)info->dlpi_phdr, phdr,
		                      (size_t)phnum * sizeof *phdr))
			img.unreadable = 1;
	}
	for (int i = 0; i < phnum && !img.unreadable; i++) {
		const ElfW(Phdr) *ph = &phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD) {
			if (lo < img.lo)
				img.lo = lo;
			if (lo + ph->p_memsz > img.hi)
				img.hi = lo + ph->p_memsz;
		}
	}
	for (int i = 0; i < phnum && !img.unreadable && !img.build_id[0]; i++) {
		const ElfW(Phdr) *ph = &phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type != PT_NOTE || ph->p_filesz > (1u << 20) ||
		    !loaded(phdr, phnum, info->dlpi_addr, lo, ph->p_filesz))
			continue;
		unsigned char *notes = malloc(ph->p_filesz ? ph->p_filesz : 1);
		if (!notes)
			break;
		if (pp_proc_copy_self(lo, notes, ph->p_filesz))
			img.unreadable = 1;
		else
			pp_note_build_id(notes, ph->p_filesz, img.build_id,
			                 sizeof img.build_id);
		free(notes);
	}
	free(phdr);
	if (img.unreadable) {
		img.lo = img.hi = 0;
		img.build_id[0] = 0;
	} else if (img.hi == 0) {
		return 0;
	}
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

/* Reconcile what was read now with what was seen before (seen_mu held):
 * an image that can no longer be read takes its remembered range and
 * build ID and is marked changed; one whose build ID changed keeps the
 * remembered one (what was loaded) and is marked changed; new ones are
 * remembered. Images the loader no longer lists are forgotten. */
static void reconcile_locked(struct images *now, unsigned char *changed)
{
	uint64_t read = ++seen_reads;
	/* An unload whose pruning could not wait for the lock: what is
	 * remembered may be of images gone (and replaced at the same place
	 * since), so start over. */
	if (atomic_exchange(&forget_all, 0))
		seen.n = 0;
	for (size_t k = 0; k < now->n; k++) {
		struct image *img = &now->v[k];
		struct image *old = NULL;
		for (size_t i = 0; i < seen.n && !old; i++)
			if (seen.v[i].addr == img->addr &&
			    seen.v[i].name_hash == img->name_hash)
				old = &seen.v[i];
		if (old) {
			old->seen = read;
			if (img->unreadable ||
			    strcmp(old->build_id, img->build_id) != 0 ||
			    old->lo != img->lo || old->hi != img->hi) {
				changed[k] = 1;
				img->lo = old->lo;
				img->hi = old->hi;
				memcpy(img->build_id, old->build_id,
				       sizeof img->build_id);
			}
			continue;
		}
		if (img->unreadable) {
			changed[k] = 1;
			continue;
		}
		if (seen.n == seen.cap) {
			size_t cap = seen.cap ? seen.cap * 2 : 32;
			struct image *v = realloc(seen.v, cap * sizeof *v);
			if (!v)
				continue;
			seen.v = v;
			seen.cap = cap;
		}
		img->seen = read;
		seen.v[seen.n++] = *img;
	}
	for (size_t i = 0; i < seen.n;) {
		if (seen.v[i].seen == read)
			i++;
		else
			seen.v[i] = seen.v[--seen.n];
	}
}

/* Does the file still hold every page of the mapping? A mapping of a file
 * truncated after it was mapped reaches past the file's end (its last page
 * may hold the file's partial last page: that one is in). */
static int truncated(const struct pp_mapping *mp, const struct stat *sb)
{
	long page = sysconf(_SC_PAGESIZE);
	uint64_t ps = page > 0 ? (uint64_t)page : 4096;
	uint64_t need = mp->offset + (uint64_t)(mp->limit - mp->start);
	uint64_t have = ((uint64_t)sb->st_size + ps - 1) / ps * ps;
	return have < need;
}

/* The build ID read from the file itself, for mappings the loader does not
 * know. */
int pp_mappings_file_build_id(const char *path, char *out, size_t outlen)
{
	int fd = pp_fds_open(path, O_RDONLY);
	const void *id;
	int rc = -ENOENT;

	out[0] = 0;
	if (fd < 0)
		return -errno;
	elf_version(EV_CURRENT);
	/* Read, not mapped: a file truncated meanwhile gives a short read,
	 * where a mapping would give SIGBUS. */
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	if (elf) {
		ssize_t n = dwelf_elf_gnu_build_id(elf, &id);
		if (n > 0) {
			hex(id, (size_t)n, out, outlen);
			rc = 0;
		}
		elf_end(elf);
	}
	pp_fds_close(fd);
	return rc;
}

static int path_in(char **list, const char *path)
{
	for (size_t i = 0; list && list[i]; i++)
		if (strcmp(list[i], path) == 0)
			return 1;
	return 0;
}

/* Remember the paths of the changed mappings for the symbolizer
 * (pp_mappings_path_changed), and count the images newly found changed. */
static void publish_changed_locked(const struct pp_mappings *m)
{
	size_t n = 0;
	for (size_t i = 0; i < m->n; i++)
		n += m->v[i].file_changed != NULL;
	char **list = calloc(n + 1, sizeof *list);
	size_t k = 0;
	for (size_t i = 0; list && i < m->n; i++) {
		const struct pp_mapping *mp = &m->v[i];
		if (!mp->file_changed || path_in(list, mp->path))
			continue;
		if (!path_in(changed_paths, mp->path))
			atomic_fetch_add(&changed_images, 1);
		list[k] = strdup(mp->path);
		if (list[k])
			k++;
	}
	for (size_t i = 0; changed_paths && changed_paths[i]; i++)
		free(changed_paths[i]);
	free(changed_paths);
	changed_paths = list;
}

int pp_mappings_path_changed(const char *path)
{
	pthread_mutex_lock(&seen_mu);
	int r = path_in(changed_paths, path);
	pthread_mutex_unlock(&seen_mu);
	return r;
}

uint64_t pp_mappings_changed_count(void)
{
	return atomic_load(&changed_images);
}

struct present {
	uintptr_t *addr;
	uint64_t *name_hash;
	size_t n, cap;
	int oom;
};

/* Only the loader's own data (the address and the name it keeps): no
 * image memory is read. */
static int on_present(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct present *p = arg;
	(void)size;
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 64;
		uintptr_t *a = realloc(p->addr, cap * sizeof *a);
		if (a)
			p->addr = a;
		uint64_t *h = a ? realloc(p->name_hash, cap * sizeof *h) : NULL;
		if (!a || !h) {
			p->oom = 1;
			return 1;
		}
		p->name_hash = h;
		p->cap = cap;
	}
	p->addr[p->n] = info->dlpi_addr;
	p->name_hash[p->n++] = name_hash(info->dlpi_name);
	return 0;
}

/* An image unloaded and another loaded at the same place with the same
 * name (a plugin reloaded after an upgrade) is not the one remembered:
 * after every dlclose the images gone are forgotten. */
void pp_mappings_after_unload(void)
{
	struct present p = {0};
	dl_iterate_phdr(on_present, &p);
	/* Never wait: the agent may hold the lock while it waits for the
	 * loader lock, which this thread may hold (a dlclose from a
	 * destructor). */
	if (p.oom || pthread_mutex_trylock(&seen_mu) != 0) {
		atomic_store(&forget_all, 1);
	} else {
		for (size_t i = 0; i < seen.n;) {
			int found = 0;
			for (size_t k = 0; k < p.n && !found; k++)
				found = p.addr[k] == seen.v[i].addr &&
				        p.name_hash[k] == seen.v[i].name_hash;
			if (found)
				i++;
			else
				seen.v[i] = seen.v[--seen.n];
		}
		pthread_mutex_unlock(&seen_mu);
	}
	free(p.addr);
	free(p.name_hash);
}

void pp_mappings_forget_in_child(void)
{
	/* The same image is mapped in the child: what the parent saw stays
	 * true, but the list may be half updated. Left to leak. */
	pthread_mutex_init(&seen_mu, NULL);
	memset(&seen, 0, sizeof seen);
	changed_paths = NULL;
}

/* Build IDs for every mapping: from the loaded images first (when the
 * mappings are this process's), from the file when the loader does not know
 * the mapping. A file changed under its mapping (truncated, or the loaded
 * image's bytes no longer what they were) gets no build ID from the file:
 * the file is not what was loaded. */
static int add_build_ids(struct pp_mappings *m, int loaded)
{
	struct images im = {0};
	struct pp_buf ids = {0};
	size_t *off = malloc((m->n + 1) * sizeof *off);
	unsigned char *changed = NULL;

	if (!off)
		return -ENOMEM;
	if (loaded) {
		dl_iterate_phdr(on_image, &im);
		changed = calloc(im.n + 1, 1);
		pthread_mutex_lock(&seen_mu);
		if (changed)
			reconcile_locked(&im, changed);
	}
	for (size_t i = 0; i < m->n; i++) {
		struct pp_mapping *mp = &m->v[i];
		char id[80] = "";
		struct stat sb;
		for (size_t k = 0; k < im.n; k++) {
			if (im.v[k].hi && mp->start >= im.v[k].lo &&
			    mp->start < im.v[k].hi) {
				strcpy(id, im.v[k].build_id);
				if (changed && changed[k])
					mp->file_changed =
					    im.v[k].unreadable
					        ? "the loaded image can no "
					          "longer "
					          "be read: its file was "
					          "truncated"
					        : "the file was overwritten in "
					          "place after it was loaded";
				break;
			}
		}
		if (loaded && mp->is_file && !mp->deleted &&
		    stat(mp->path, &sb) == 0 && truncated(mp, &sb))
			mp->file_changed = "the file is now shorter than its "
			                   "mapping: it was truncated after it "
			                   "was loaded";
		if (!id[0] && mp->is_file && !mp->deleted && !mp->file_changed)
			pp_mappings_file_build_id(mp->path, id, sizeof id);
		off[i] = ids.len;
		pp_buf_append(&ids, id, strlen(id) + 1);
	}
	if (loaded) {
		if (changed)
			publish_changed_locked(m);
		pthread_mutex_unlock(&seen_mu);
	}
	free(changed);
	free(im.v);
	if (ids.failed || !ids.data) {
		pp_buf_free(&ids);
		free(off);
		return m->n ? -ENOMEM : 0;
	}
	size_t n;
	free(m->ids);
	m->ids = pp_buf_take(&ids, &n);
	if (!m->ids) {
		free(off);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->n; i++)
		m->v[i].build_id = m->ids + off[i];
	pp_buf_free(&ids);
	free(off);
	return 0;
}

int pp_mappings_read_build_ids(struct pp_mappings *m)
{
	return add_build_ids(m, 0);
}

/* ---- the maps text ------------------------------------------------------
 * One line per mapping, as the kernel writes /proc/PID/maps:
 *   start-limit perms offset major:minor inode [path]
 * with hex numbers but the decimal inode, single spaces between the fields
 * and any number of them before the path, which runs to the end of the line
 * (spaces included) and may end in " (deleted)". */

struct cursor {
	const char *p, *end;
};

/* 1 to 16 hex digits. */
static int hex_field(struct cursor *c, uint64_t *out)
{
	uint64_t v = 0;
	int n = 0;
	while (c->p < c->end) {
		int ch = (unsigned char)*c->p, d;
		if (ch >= '0' && ch <= '9')
			d = ch - '0';
		else if (ch >= 'a' && ch <= 'f')
			d = ch - 'a' + 10;
		else if (ch >= 'A' && ch <= 'F')
			d = ch - 'A' + 10;
		else
			break;
		if (++n > 16)
			return -1;
		v = v << 4 | (uint64_t)d;
		c->p++;
	}
	*out = v;
	return n ? 0 : -1;
}

static int dec_field(struct cursor *c, uint64_t *out)
{
	uint64_t v = 0;
	int n = 0;
	while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
		unsigned d = (unsigned)(*c->p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
		n++;
		c->p++;
	}
	*out = v;
	return n ? 0 : -1;
}

static int expect(struct cursor *c, char ch)
{
	if (c->p >= c->end || *c->p != ch)
		return -1;
	c->p++;
	return 0;
}

struct parsed_line {
	uint64_t start, limit, offset;
	char perms[5];
	const char *path;
	size_t plen;
	int deleted;
};

/* One line (without its newline): NULL, or why it is not a mapping. */
static const char *parse_line(const char *s, size_t len, struct parsed_line *l)
{
	struct cursor c = {s, s + len};
	uint64_t major, minor, inode;

	if (hex_field(&c, &l->start) || expect(&c, '-'))
		return "expected start-limit in hex";
	if (hex_field(&c, &l->limit) || expect(&c, ' '))
		return "expected start-limit in hex";
	if (l->limit <= l->start)
		return "the mapping ends before it starts";
	if (c.end - c.p < 5 || c.p[4] != ' ')
		return "expected four permission letters";
	for (int i = 0; i < 4; i++) {
		static const char *const allowed[] = {"r-", "w-", "x-", "ps"};
		if (!strchr(allowed[i], c.p[i]) || !c.p[i])
			return "bad permission letters";
		l->perms[i] = c.p[i];
	}
	l->perms[4] = 0;
	c.p += 5;
	if (hex_field(&c, &l->offset) || expect(&c, ' '))
		return "expected the file offset in hex";
	if (hex_field(&c, &major) || expect(&c, ':') || hex_field(&c, &minor) ||
	    expect(&c, ' '))
		return "expected the device as major:minor in hex";
	if (dec_field(&c, &inode))
		return "expected the inode in decimal";
	if (c.p < c.end && *c.p != ' ')
		return "expected a space after the inode";
	while (c.p < c.end && *c.p == ' ')
		c.p++;
	l->path = c.p;
	l->plen = (size_t)(c.end - c.p);
	size_t dl = strlen(DELETED);
	l->deleted =
	    l->plen > dl && memcmp(l->path + l->plen - dl, DELETED, dl) == 0;
	if (l->deleted)
		l->plen -= dl;
	if (memchr(l->path, 0, l->plen))
		return "NUL byte in the path";
	return NULL;
}

/* Hex digits and a dash: what a line of maps starts with ("build=..." or a
 * comment does not). */
static int starts_as_mapping(const char *p, const char *eol)
{
	const char *q = p;
	while (q < eol && isxdigit((unsigned char)*q))
		q++;
	return q > p && q < eol && *q == '-';
}

static int cmp_mapping(const void *a, const void *b)
{
	const struct pp_mapping *x = a, *y = b;
	return (x->start > y->start) - (x->start < y->start);
}

static void fail(char *err, size_t errlen, size_t lineno, const char *why)
{
	if (err && errlen)
		snprintf(err, errlen, "maps text line %zu: %s", lineno, why);
}

int pp_mappings_parse(const char *text, size_t len, const char *main_path,
                      unsigned flags, struct pp_mappings *m, char *err,
                      size_t errlen, size_t *err_at)
{
	struct pp_buf strings = {0};
	size_t cap = 0, lineno = 0;
	uint64_t sig = 0;
	int have_main = 0, rc = 0;
	const int strict = (flags & PP_MAPS_STRICT) != 0;
	const char *p = text, *end = text + len;

	memset(m, 0, sizeof *m);
	if (err && errlen)
		err[0] = 0;
	pp_buf_append(&strings, "", 1);
	/* Paths are kept as offsets into `strings` (in the path pointer)
	 * until it stops moving. */
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;
		struct parsed_line l;
		lineno++;
		const char *why = parse_line(p, (size_t)(eol - p), &l);
		if (why) {
			/* Other lines are ignored (the legacy format says
			 * so), but one that starts as a mapping must be one. */
			if (strict && (starts_as_mapping(p, eol) ||
			               memchr(p, 0, (size_t)(eol - p)))) {
				if (err_at)
					*err_at = (size_t)(p - text);
				fail(err, errlen, lineno,
				     memchr(p, 0, (size_t)(eol - p))
				         ? "NUL byte in the text"
				         : why);
				rc = -EINVAL;
				goto out;
			}
			p = nl ? nl + 1 : end;
			continue;
		}
		p = nl ? nl + 1 : end;
		if (l.perms[2] != 'x')
			continue;
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
		mp->start = (uintptr_t)l.start;
		mp->limit = (uintptr_t)l.limit;
		mp->offset = l.offset;
		mp->deleted = l.deleted;
		mp->build_id = "";
		mp->is_file = l.plen > 0 && l.path[0] == '/';
		mp->is_main =
		    mp->is_file && !have_main &&
		    (!main_path || (strlen(main_path) == l.plen &&
		                    memcmp(l.path, main_path, l.plen) == 0));
		have_main |= mp->is_main;
		mp->path = (const char *)(uintptr_t)strings.len;
		pp_buf_append(&strings, l.path, l.plen);
		pp_buf_append(&strings, "", 1);
		/* A path is bytes (a file name need not be UTF-8), an
		 * answer is text: the repair beside it, when it needs one. */
		mp->name = mp->path;
		if (!pp_utf8_valid(l.path, l.plen)) {
			mp->name = (const char *)(uintptr_t)strings.len;
			pp_utf8_append(&strings, l.path, l.plen);
			pp_buf_append(&strings, "", 1);
		}
		sig = pp_hash_mix(sig, l.start);
		sig = pp_hash_mix(sig, l.limit);
		sig = pp_hash_mix(sig, l.offset);
		sig = pp_hash_mix(sig, pp_hash_bytes(l.path, l.plen));
		sig = pp_hash_mix(sig, (uint64_t)l.deleted);
	}
	if (strings.failed) {
		rc = -ENOMEM;
		goto out;
	}
	size_t slen;
	m->strings = pp_buf_take(&strings, &slen);
	if (!m->strings) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < m->n; i++) {
		m->v[i].path = m->strings + (size_t)(uintptr_t)m->v[i].path;
		m->v[i].name = m->strings + (size_t)(uintptr_t)m->v[i].name;
	}
	/* The kernel lists mappings in order; a file's text might not. */
	if (m->n > 1)
		qsort(m->v, m->n, sizeof *m->v, cmp_mapping);
	size_t kept = m->n ? 1 : 0;
	for (size_t i = 1; i < m->n; i++) {
		const struct pp_mapping *prev = &m->v[kept - 1];
		if (m->v[i].start >= prev->limit) {
			m->v[kept++] = m->v[i];
			continue;
		}
		if (!strict)
			continue; /* not from a kernel: keep the first */
		if (err_at)
			*err_at = 0;
		if (err && errlen)
			snprintf(err, errlen,
			         "maps text: executable mappings %" PRIxPTR
			         "-%" PRIxPTR " and %" PRIxPTR "-%" PRIxPTR
			         " overlap",
			         prev->start, prev->limit, m->v[i].start,
			         m->v[i].limit);
		rc = -EINVAL;
		goto out;
	}
	m->n = kept;
	/* IDs in address order, the main executable first. */
	unsigned next = 2;
	have_main = 0;
	for (size_t i = 0; i < m->n; i++)
		have_main |= m->v[i].is_main;
	if (!have_main)
		next = 1;
	for (size_t i = 0; i < m->n; i++)
		m->v[i].id = m->v[i].is_main ? 1 : next++;
	m->signature = sig;
out:
	if (rc)
		pp_mappings_free(m);
	pp_buf_free(&strings);
	return rc;
}

int pp_mappings_read(struct pp_mappings *m, const struct pp_mappings *prev)
{
	char *text;
	size_t len;
	char exe[4096];
	ssize_t exelen;
	int rc;

	memset(m, 0, sizeof *m);
	rc = pp_proc_read_file("/proc/self/maps", 64 << 20, &text, &len);
	if (rc)
		return rc;
	exelen = readlink("/proc/self/exe", exe, sizeof exe - 1);
	exe[exelen > 0 ? exelen : 0] = 0;
	rc = pp_mappings_parse(text, len, exelen > 0 ? exe : "", 0, m, NULL, 0,
	                       NULL);
	free(text);
	if (rc)
		return rc;
	/* A file truncated or written over keeps its maps line: its size
	 * and times are part of the signature, so that the symbolizer drops
	 * what it read from the old file (and never touches a mapping of
	 * it again). */
	for (size_t i = 0; i < m->n; i++) {
		struct stat sb;
		const struct pp_mapping *mp = &m->v[i];
		if (!mp->is_file || mp->deleted || stat(mp->path, &sb) != 0)
			continue;
		m->signature = pp_hash_mix(m->signature, (uint64_t)sb.st_size);
		m->signature = pp_hash_mix(m->signature, (uint64_t)sb.st_ino);
		m->signature = pp_hash_mix(
		    m->signature, (uint64_t)sb.st_mtim.tv_sec * 1000000000u +
		                      (uint64_t)sb.st_mtim.tv_nsec);
		m->signature = pp_hash_mix(
		    m->signature, (uint64_t)sb.st_ctim.tv_sec * 1000000000u +
		                      (uint64_t)sb.st_ctim.tv_nsec);
	}
	if (prev && prev->v && prev->signature == m->signature) {
		pp_mappings_free(m);
		return 1; /* unchanged: spare the build IDs */
	}
	rc = add_build_ids(m, 1);
	if (rc)
		pp_mappings_free(m);
	return rc;
}

void pp_mappings_free(struct pp_mappings *m)
{
	free(m->v);
	free(m->strings);
	free(m->ids);
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

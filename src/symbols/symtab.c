/*
 * In-process symbolization with elfutils libdwfl/libdw, and its cache.
 * Agent context: one lock around everything, held from acquire to release.
 *
 * For an address: the module (dwfl_addrmodule); with DWARF, the chain of
 * scopes at the address (dwarf_getscopes) gives the innermost function and
 * every function it was inlined into, the line table gives the innermost
 * file:line and each inlined_subroutine's DW_AT_call_file/line the caller's;
 * without DWARF, the ELF symbol table gives the function name only.
 */
#include <dlfcn.h>
#include <dwarf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>

#include "symbols.h"
#include "util/arena.h"
#include "util/fds.h"
#include "util/hash.h"
#include "util/strtab.h"
#include "util/u64map.h"

#define MAX_INLINE 64

/* Per compilation unit: its functions' address ranges, sorted. */
struct fn_range {
	Dwarf_Addr lo, hi;
	Dwarf_Off off;
};

struct cu_index {
	Dwarf *dw;
	Dwarf_Off cu_off;
	struct fn_range *v;
	size_t n, cap;
	int failed;
};

struct pp_symtab {
	struct pp_mappings maps;
	int given; /* maps were given (pp_symtab_new), not this process's */
	Dwfl *dwfl;
	int dwfl_failed;
	struct pp_strtab strings;
	struct pp_arena arena;  /* frames */
	struct pp_u64map cache; /* addr -> index into results */
	struct pp_symbol *results;
	size_t nresults, results_cap;
	struct pp_u64map cu_map; /* (Dwarf, CU offset) -> index into cus */
	struct cu_index *cus;
	size_t ncus, cus_cap;
	struct pp_u64map alt_done; /* Dwarf -> 1: its dwz file was looked for */
	struct alt {
		Dwarf *dw;
		Elf *elf;
	} * alts;
	size_t nalts, alts_cap;
	int shortage; /* EMFILE or ENFILE: a file could not be opened */
	uint64_t lookups, hits, refreshes;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* The counters as of the last release, for /status: read without the lock,
 * which a long /symbol list or profile build may hold for seconds. */
static _Atomic uint64_t shown_lookups, shown_hits, shown_refreshes,
    shown_cached, shown_mappings;

static void show(const struct pp_symtab *st)
{
	atomic_store_explicit(&shown_lookups, st ? st->lookups : 0,
	                      memory_order_relaxed);
	atomic_store_explicit(&shown_hits, st ? st->hits : 0,
	                      memory_order_relaxed);
	atomic_store_explicit(&shown_refreshes, st ? st->refreshes : 0,
	                      memory_order_relaxed);
	atomic_store_explicit(&shown_cached, st ? st->nresults : 0,
	                      memory_order_relaxed);
	atomic_store_explicit(&shown_mappings, st ? st->maps.n : 0,
	                      memory_order_relaxed);
}
static struct pp_symtab *global;
static char *debuginfo_path; /* NULL: the default search path */

/*
 * Descriptors: libdwfl keeps the descriptor of every ELF and debug file it
 * opens until dwfl_end, which for a process with a hundred libraries was a
 * hundred of the host's descriptors held for as long as the mappings did not
 * change (under `ulimit -n 64` the host could no longer open files). Here
 * every file is opened, read into memory (mapped: libelf maps the whole
 * file and ELF_C_FDREAD reads what it could not map) and closed at once,
 * and libdwfl is handed the Elf with no descriptor: the find_elf callback
 * below returns one with -1, which libdwfl takes as it does for the vDSO.
 * A file that could not be opened for want of descriptors (the host's
 * EMFILE, the system's ENFILE, or the agent's share used up) is noted: the
 * request fails with that error and the cache is dropped at release, since
 * libdwfl remembers a module it could not open as one without symbols.
 */
static _Thread_local int fd_shortage; /* EMFILE or ENFILE, or 0 */

static void note_open_error(int err)
{
	if (err == EMFILE || err == ENFILE)
		fd_shortage = err;
}

/* The ELF file at path, in memory, its descriptor closed. NULL when it
 * cannot be opened or read. */
static Elf *elf_unheld(const char *path)
{
	int fd = pp_fds_open(path, O_RDONLY);
	if (fd < 0) {
		note_open_error(errno);
		return NULL;
	}
	elf_version(EV_CURRENT);
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP_PRIVATE, NULL);
	if (elf && elf_cntl(elf, ELF_C_FDREAD) != 0) {
		elf_end(elf);
		elf = NULL;
	}
	pp_fds_close(fd);
	return elf;
}

/* Does elf have this build ID (or, without one, this .gnu_debuglink CRC of
 * the whole file)? */
static int debug_file_matches(Elf *elf, const unsigned char *id, int idlen,
                              GElf_Word crc)
{
	if (elf_kind(elf) != ELF_K_ELF)
		return 0;
	if (idlen > 0) {
		const void *fid;
		ssize_t n = dwelf_elf_gnu_build_id(elf, &fid);
		return n == idlen && memcmp(fid, id, (size_t)n) == 0;
	}
	size_t size = 0;
	char *raw = elf_rawfile(elf, &size);
	if (!raw)
		return 0;
	uLong c = crc32(0L, Z_NULL, 0);
	for (size_t off = 0; off < size;) {
		uInt n =
		    size - off > (1u << 30) ? 1u << 30 : (uInt)(size - off);
		c = crc32(c, (const Bytef *)raw + off, n);
		off += n;
	}
	return (GElf_Word)c == crc;
}

static Elf *try_debug_file(const char *path, const unsigned char *id, int idlen,
                           GElf_Word crc, char **name)
{
	Elf *elf = elf_unheld(path);
	if (!elf)
		return NULL;
	if (!debug_file_matches(elf, id, idlen, crc) ||
	    !(*name = strdup(path))) {
		elf_end(elf);
		return NULL;
	}
	return elf;
}

/* /usr/lib/debug/.build-id/xx/yyyy.debug */
static void build_id_path(char *path, size_t size, const unsigned char *id,
                          int idlen)
{
	int n = snprintf(path, size, "/usr/lib/debug/.build-id/%02x/", id[0]);
	for (int i = 1; i < idlen && n < (int)size - 8; i++)
		n += snprintf(path + n, size - (size_t)n, "%02x", id[i]);
	snprintf(path + n, size - (size_t)n, ".debug");
}

/*
 * Separate debug information, searched on this machine only: by build ID
 * under /usr/lib/debug/.build-id, then by .gnu_debuglink next to the file,
 * in its .debug folder and under /usr/lib/debug. libdw's standard search
 * would also load the debuginfod client (libcurl, TLS libraries) into the
 * host process and, with DEBUGINFOD_URLS set, fetch files over the network
 * from inside it: a profiler must not do either. The file in memory and
 * its path in *name, or NULL.
 */
static Elf *search_debug_file(const unsigned char *id, int idlen,
                              const char *file_name, const char *debuglink_file,
                              GElf_Word debuglink_crc, char **name)
{
	char path[4096];
	Elf *elf;

	if (idlen > 1) {
		build_id_path(path, sizeof path, id, idlen);
		if ((elf = try_debug_file(path, id, idlen, 0, name)))
			return elf;
	}
	if (!debuglink_file || !file_name)
		return NULL;
	const char *slash = strrchr(file_name, '/');
	int dirlen = slash ? (int)(slash - file_name) : 0;
	static const char *const forms[] = {"%.*s/%s", "%.*s/.debug/%s",
	                                    "/usr/lib/debug%.*s/%s"};
	for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
		snprintf(path, sizeof path, forms[i], dirlen, file_name,
		         debuglink_file);
		if (strcmp(path, file_name) == 0)
			continue;
		if ((elf = try_debug_file(path, idlen > 0 ? id : NULL,
		                          idlen > 0 ? idlen : 0, debuglink_crc,
		                          name)))
			return elf;
	}
	return NULL;
}

/* Has elf DWARF of its own (.debug_info, maybe compressed)? */
static int has_dwarf(Elf *elf)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;
	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return 0;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;
		if (gelf_getshdr(scn, &sh) && sh.sh_type != SHT_NOBITS &&
		    (name = elf_strptr(elf, shstrndx, sh.sh_name)) &&
		    (strcmp(name, ".debug_info") == 0 ||
		     strcmp(name, ".zdebug_info") == 0))
			return 1;
	}
	return 0;
}

/*
 * libdwfl's find_elf for this process's modules. A file without DWARF
 * whose separate debug file is found is replaced by that file: it has the
 * same program headers (so the same load bias), the full symbol table and
 * the DWARF; handing it to libdwfl as a separate debug file instead would
 * need a descriptor (find_debuginfo returns one, which libdwfl keeps).
 * /maps tells the two apart by the module's file name.
 */
static int find_elf(Dwfl_Module *mod, void **userdata, const char *modname,
                    Dwarf_Addr base, char **file_name, Elf **elfp)
{
	struct stat sb;

	/* A file truncated or written over since it was loaded is not what
	 * runs: no symbols rather than another file's (or a SIGBUS). */
	if (modname[0] == '/' && pp_mappings_path_changed(modname))
		return -1;
	if (modname[0] != '/' || stat(modname, &sb) != 0 ||
	    !S_ISREG(sb.st_mode)) {
		/* The vDSO (read from memory), a deleted file (not found):
		 * libdwfl's own. Should it return a descriptor after all,
		 * it is read and closed here. */
		if (pp_fds_reserve()) {
			note_open_error(EMFILE);
			return -1;
		}
		int fd = dwfl_linux_proc_find_elf(mod, userdata, modname, base,
		                                  file_name, elfp);
		if (fd >= 0) {
			if (!*elfp) {
				*elfp = elf_begin(fd, ELF_C_READ_MMAP_PRIVATE,
				                  NULL);
				if (*elfp && elf_cntl(*elfp, ELF_C_FDREAD)) {
					elf_end(*elfp);
					*elfp = NULL;
				}
			}
			close(fd);
		}
		pp_fds_release();
		return -1;
	}
	Elf *elf = elf_unheld(modname);
	if (!elf)
		return -1;
	char *name = NULL;
	if (elf_kind(elf) == ELF_K_ELF && !has_dwarf(elf)) {
		const void *id = NULL;
		ssize_t idlen = dwelf_elf_gnu_build_id(elf, &id);
		GElf_Word crc = 0;
		const char *link = dwelf_elf_gnu_debuglink(elf, &crc);
		Elf *dbg = search_debug_file(id, idlen > 0 ? (int)idlen : 0,
		                             modname, link, crc, &name);
		if (dbg) {
			elf_end(elf);
			elf = dbg;
		}
	}
	if (!name && !(name = strdup(modname))) {
		elf_end(elf);
		return -1;
	}
	*file_name = name;
	*elfp = elf;
	return -1;
}

/* libdwfl's find_debuginfo for this process's modules: find_elf has
 * already put the debug file in the place of a file without DWARF. */
static int no_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
                        Dwarf_Addr base, const char *file_name,
                        const char *debuglink_file, GElf_Word debuglink_crc,
                        char **debuginfo_file_name)
{
	(void)mod;
	(void)userdata;
	(void)modname;
	(void)base;
	(void)file_name;
	(void)debuglink_file;
	(void)debuglink_crc;
	(void)debuginfo_file_name;
	return -1;
}

/* libdwfl's find_debuginfo for files given by path (pp_symtab_new, in
 * pullprof-convert: a program of its own, not a host): the same search,
 * the descriptor left to libdwfl. */
static int find_debuginfo(Dwfl_Module *mod, void **userdata,
                          const char *modname, Dwarf_Addr base,
                          const char *file_name, const char *debuglink_file,
                          GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	const unsigned char *id = NULL;
	GElf_Addr id_vaddr;
	int idlen = dwfl_module_build_id(mod, &id, &id_vaddr);
	(void)userdata;
	(void)modname;
	(void)base;

	Elf *elf = search_debug_file(id, idlen, file_name, debuglink_file,
	                             debuglink_crc, debuginfo_file_name);
	if (!elf)
		return -1;
	elf_end(elf);
	int fd = open(*debuginfo_file_name, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		free(*debuginfo_file_name);
		*debuginfo_file_name = NULL;
	}
	return fd;
}

static const Dwfl_Callbacks callbacks = {
    .find_elf = find_elf,
    .find_debuginfo = no_debuginfo,
    .debuginfo_path = &debuginfo_path,
};

/* Files given by path (pp_symtab_new): libdwfl opens them itself. */
static const Dwfl_Callbacks file_callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = find_debuginfo,
    .debuginfo_path = &debuginfo_path,
};

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);

/* C++ names are demangled with the C++ runtime's own __cxa_demangle when the
 * process has one loaded (any process with C++ code does); a C-only process
 * has nothing to demangle, and libpullprof does not pull in libstdc++. */
static demangle_fn demangler(void)
{
	static demangle_fn fn;
	static int looked;
	if (!looked) {
		fn = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
		looked = 1;
	}
	return fn;
}

static void drop_cache(struct pp_symtab *st)
{
	for (size_t i = 0; i < st->ncus; i++)
		free(st->cus[i].v);
	free(st->cus);
	st->cus = NULL;
	st->ncus = st->cus_cap = 0;
	pp_u64map_free(&st->cu_map);
	if (st->dwfl)
		dwfl_end(st->dwfl);
	st->dwfl = NULL;
	st->dwfl_failed = 0;
	/* After dwfl_end: the Dwarf that used them are gone. */
	for (size_t i = 0; i < st->nalts; i++) {
		dwarf_end(st->alts[i].dw);
		elf_end(st->alts[i].elf);
	}
	free(st->alts);
	st->alts = NULL;
	st->nalts = st->alts_cap = 0;
	pp_u64map_free(&st->alt_done);
	st->shortage = 0;
	pp_strtab_free(&st->strings);
	pp_arena_free(&st->arena);
	pp_u64map_free(&st->cache);
	free(st->results);
	st->results = NULL;
	st->nresults = st->results_cap = 0;
}

static int refresh(struct pp_symtab *st)
{
	struct pp_mappings fresh;
	int rc = pp_mappings_read(&fresh, &st->maps);

	if (rc == 1)
		return 0; /* unchanged: keep the cache */
	if (rc)
		return rc;
	pp_mappings_free(&st->maps);
	st->maps = fresh;
	drop_cache(st);
	st->refreshes++;
	return pp_strtab_init(&st->strings);
}

int pp_symtab_acquire(struct pp_symtab **out)
{
	int rc = -ENOMEM;

	*out = NULL;
	pthread_mutex_lock(&lock);
	if (!global) {
		global = calloc(1, sizeof *global);
		if (!global)
			goto fail;
	}
	fd_shortage = 0;
	rc = refresh(global);
	if (rc == 0) {
		*out = global;
		return 0;
	}
fail:
	pthread_mutex_unlock(&lock);
	return rc;
}

int pp_symtab_shortage(const struct pp_symtab *st)
{
	return st->shortage ? -st->shortage : 0;
}

void pp_symtab_release(struct pp_symtab *st)
{
	show(st);
	/* libdwfl remembers a file it could not open as a module without
	 * symbols: the next request starts again from the mappings. */
	if (st->shortage) {
		drop_cache(st);
		pp_mappings_free(&st->maps);
	}
	pthread_mutex_unlock(&lock);
}

void pp_symtab_forget_in_child(void)
{
	/* A parent thread (the job pipeline's, the lookup thread) may have held
	 * the lock at fork time, mid-update: the child starts over and leaves
	 * the parent's cache to leak. Without this a child that started and
	 * stopped an agent hung in pp_symtab_shutdown (test_safety.py, 200
	 * forks during a 1000 Hz window: 1 child in 200 under load). */
	pthread_mutex_init(&lock, NULL);
	global = NULL;
	show(NULL);
	pp_mappings_forget_in_child();
}

void pp_symtab_shutdown(void)
{
	pthread_mutex_lock(&lock);
	if (global) {
		drop_cache(global);
		pp_mappings_free(&global->maps);
		free(global);
		global = NULL;
	}
	show(NULL);
	pthread_mutex_unlock(&lock);
}

struct pp_symtab *pp_symtab_new(struct pp_mappings *m)
{
	struct pp_symtab *st = calloc(1, sizeof *st);

	if (!st || pp_strtab_init(&st->strings)) {
		free(st);
		return NULL;
	}
	st->given = 1;
	st->maps = *m;
	memset(m, 0, sizeof *m);
	return st;
}

void pp_symtab_free(struct pp_symtab *st)
{
	if (!st)
		return;
	drop_cache(st);
	pp_mappings_free(&st->maps);
	free(st);
}

const struct pp_mappings *pp_symtab_mappings(const struct pp_symtab *st)
{
	return &st->maps;
}

void pp_symtab_stats(struct pp_symtab_stats *out)
{
	out->lookups =
	    atomic_load_explicit(&shown_lookups, memory_order_relaxed);
	out->hits = atomic_load_explicit(&shown_hits, memory_order_relaxed);
	out->refreshes =
	    atomic_load_explicit(&shown_refreshes, memory_order_relaxed);
	out->cached = atomic_load_explicit(&shown_cached, memory_order_relaxed);
	out->mappings =
	    atomic_load_explicit(&shown_mappings, memory_order_relaxed);
}

/*
 * Where the ELF file of mapping mp was loaded, as the bias to add to its
 * addresses: the mapping starts at file offset mp->offset, which lies in one
 * PT_LOAD segment (or in the page before it), at vaddr p_vaddr - p_offset +
 * mp->offset. -1 when the file is no ELF file or has no such segment.
 */
static int load_bias(const struct pp_mapping *mp, GElf_Addr *bias)
{
	int fd = open(mp->path, O_RDONLY | O_CLOEXEC);
	size_t phnum;
	int rc = -1;

	if (fd < 0)
		return -1;
	elf_version(EV_CURRENT);
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (elf && elf_kind(elf) == ELF_K_ELF &&
	    elf_getphdrnum(elf, &phnum) == 0) {
		long page = sysconf(_SC_PAGESIZE);
		GElf_Off mask = page > 0 ? (GElf_Off)page - 1 : 4095;
		for (size_t i = 0; i < phnum && rc; i++) {
			GElf_Phdr ph;
			if (!gelf_getphdr(elf, (int)i, &ph) ||
			    ph.p_type != PT_LOAD)
				continue;
			if (mp->offset < (ph.p_offset & ~mask) ||
			    mp->offset >= ph.p_offset + ph.p_filesz)
				continue;
			*bias = (GElf_Addr)mp->start -
			        (ph.p_vaddr - ph.p_offset + mp->offset);
			rc = 0;
		}
	}
	if (elf)
		elf_end(elf);
	close(fd);
	return rc;
}

/* Report every file of the given mappings once, where it was loaded. Files
 * that are missing, replaced (deleted) or do not fit are left out: their
 * addresses stay unsymbolized. */
static void report_files(struct pp_symtab *st)
{
	const struct pp_mappings *m = &st->maps;
	GElf_Addr *biases = calloc(m->n + 1, sizeof *biases);
	unsigned char *done = calloc(m->n + 1, 1);

	for (size_t i = 0; biases && done && i < m->n; i++) {
		const struct pp_mapping *mp = &m->v[i];
		if (!mp->is_file || mp->deleted || load_bias(mp, &biases[i]))
			continue;
		int seen = 0;
		for (size_t k = 0; k < i && !seen; k++)
			seen = done[k] && biases[k] == biases[i] &&
			       strcmp(m->v[k].path, mp->path) == 0;
		if (!seen && dwfl_report_elf(st->dwfl, mp->path, mp->path, -1,
		                             biases[i], false))
			done[i] = 1;
	}
	free(biases);
	free(done);
}

/* This process's modules, from /proc/PID/maps and auxv (the vDSO). A
 * process that changed its user after it started (a server's worker: nginx,
 * a forked child that called setuid) is no longer "dumpable": its auxv is
 * root's to read, and libdwfl refuses the whole report. Its maps it may
 * still read: the modules come from them alone then (the vDSO without
 * symbols). */
static int report_self(Dwfl *dwfl)
{
	if (dwfl_linux_proc_report(dwfl, getpid()) == 0)
		return 0;
	FILE *f = pp_fds_fopen("/proc/self/maps", "r");
	if (!f)
		return -1;
	dwfl_report_begin(dwfl); /* what the failed report left, dropped */
	int rc = dwfl_linux_proc_maps_report(dwfl, f);
	pp_fds_fclose(f);
	return rc;
}

static Dwfl *get_dwfl(struct pp_symtab *st)
{
	if (st->dwfl || st->dwfl_failed)
		return st->dwfl;
	st->dwfl = dwfl_begin(st->given ? &file_callbacks : &callbacks);
	if (st->dwfl) {
		dwfl_report_begin(st->dwfl);
		if (st->given)
			report_files(st);
		int rc = st->given ? 0 : report_self(st->dwfl);
		if (rc != 0 || dwfl_report_end(st->dwfl, NULL, NULL) != 0) {
			dwfl_end(st->dwfl);
			st->dwfl = NULL;
		}
	}
	st->dwfl_failed = st->dwfl == NULL;
	return st->dwfl;
}

/*
 * A dwz file (.gnu_debugaltlink: the DWARF that several debug files share),
 * found and read here before libdw looks for it: libdw would keep its
 * descriptor open. By build ID under /usr/lib/debug/.build-id, else by the
 * path the link names (relative to the debug file's folder).
 */
static void set_alt(struct pp_symtab *st, Dwarf *dw, const char *dwfile)
{
	const char *name;
	const void *id;
	int inserted;
	ssize_t idlen = dwelf_dwarf_gnu_debugaltlink(dw, &name, &id);
	if (idlen <= 0 ||
	    !pp_u64map_put(&st->alt_done, (uintptr_t)dw, &inserted) ||
	    !inserted)
		return;
	if (st->nalts == st->alts_cap) {
		size_t cap = st->alts_cap ? st->alts_cap * 2 : 8;
		struct alt *v = realloc(st->alts, cap * sizeof *v);
		if (!v)
			return;
		st->alts = v;
		st->alts_cap = cap;
	}
	char path[4096], *found = NULL;
	build_id_path(path, sizeof path, id, (int)idlen);
	Elf *elf = try_debug_file(path, id, (int)idlen, 0, &found);
	if (!elf) {
		const char *slash = dwfile ? strrchr(dwfile, '/') : NULL;
		if (name[0] == '/' || !slash)
			snprintf(path, sizeof path, "%s", name);
		else
			snprintf(path, sizeof path, "%.*s/%s",
			         (int)(slash - dwfile), dwfile, name);
		elf = try_debug_file(path, id, (int)idlen, 0, &found);
	}
	free(found);
	Dwarf *alt = elf ? dwarf_begin_elf(elf, DWARF_C_READ, NULL) : NULL;
	if (!alt) {
		if (elf)
			elf_end(elf);
		return;
	}
	dwarf_setalt(dw, alt);
	st->alts[st->nalts++] = (struct alt){alt, elf};
}

/* The module's DWARF (with its dwz file), or NULL. */
static Dwarf *module_dwarf(struct pp_symtab *st, Dwfl_Module *mod,
                           Dwarf_Addr *bias)
{
	Dwarf *dw = dwfl_module_getdwarf(mod, bias);
	if (dw) {
		const char *mainfile = NULL;
		dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, &mainfile,
		                 NULL);
		set_alt(st, dw, mainfile);
	}
	return dw;
}

/* A file libdwfl asked for since the last look could not be opened for
 * want of descriptors: the request fails (pp_symtab_shortage). */
static void take_shortage(struct pp_symtab *st)
{
	if (fd_shortage && !st->shortage)
		st->shortage = fd_shortage;
	fd_shortage = 0;
}

int pp_symtab_module_info(struct pp_symtab *st, const struct pp_mapping *mp,
                          struct pp_module_info *out)
{
	Dwfl *dwfl = get_dwfl(st);
	Dwfl_Module *mod = dwfl ? dwfl_addrmodule(dwfl, mp->start) : NULL;
	const char *mainfile = NULL, *debugfile = NULL;
	Dwarf_Addr bias;

	out->symbols = "none";
	out->debug_file = NULL;
	out->elf_file = NULL;
	if (!mod)
		return 0;
	if (module_dwarf(st, mod, &bias))
		out->symbols = "dwarf";
	else if (dwfl_module_getsymtab(mod) > 0)
		out->symbols = "symtab";
	take_shortage(st);
	dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, &mainfile,
	                 &debugfile);
	out->elf_file = mainfile;
	if (debugfile && (!mainfile || strcmp(debugfile, mainfile) != 0))
		out->debug_file = debugfile;
	/* A separate debug file that find_elf gave libdwfl in the place of
	 * the mapped file (its module name): the mapped file was read for
	 * its build ID and debug link. */
	const char *modname =
	    dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
	if (!st->given && mainfile && modname && modname[0] == '/' &&
	    strcmp(mainfile, modname) != 0) {
		out->debug_file = mainfile;
		out->elf_file = modname;
	}
	return 0;
}

static const char *str(struct pp_symtab *st, const char *s)
{
	int64_t i = pp_strtab_add(&st->strings, s ? s : "");
	return i < 0 ? NULL : pp_strtab_get(&st->strings, (size_t)i);
}

/* name (demangled) and system_name (as in the binary) of a symbol. */
static int set_names(struct pp_symtab *st, struct pp_frame *f, const char *sys,
                     const char *plain)
{
	const char *name = plain ? plain : sys;
	char *dem = NULL;

	if (sys && sys[0] == '_' && sys[1] == 'Z' && demangler()) {
		int status = 0;
		dem = demangler()(sys, NULL, NULL, &status);
		if (status != 0) {
			free(dem);
			dem = NULL;
		}
	}
	f->name = str(st, dem ? dem : name);
	f->system_name = str(st, sys ? sys : name);
	free(dem);
	return f->name && f->system_name ? 0 : -ENOMEM;
}

static const char *die_string(Dwarf_Die *die, int at)
{
	Dwarf_Attribute attr;
	return dwarf_formstring(dwarf_attr_integrate(die, at, &attr));
}

static int die_int(Dwarf_Die *die, int at, Dwarf_Word *out)
{
	Dwarf_Attribute attr;
	return dwarf_formudata(dwarf_attr_integrate(die, at, &attr), out);
}

/* One frame from a subprogram or inlined_subroutine DIE, at file:line. */
static int die_frame(struct pp_symtab *st, Dwarf_Die *d, const char *file,
                     int line, struct pp_frame *f)
{
	const char *link = die_string(d, DW_AT_linkage_name);
	if (!link)
		link = die_string(d, DW_AT_MIPS_linkage_name);
	const char *plain = die_string(d, DW_AT_name);
	if (!link && !plain)
		plain = "??";
	if (set_names(st, f, link, plain))
		return -ENOMEM;
	int start = 0;
	dwarf_decl_line(d, &start);
	f->start_line = start;
	/* Function.filename is where the function is, which for an inlined
	 * one is where it was written, not the caller. */
	const char *decl = dwarf_decl_file(d);
	f->file = str(st, file ? file : decl ? decl : "");
	f->line = line;
	return f->file ? 0 : -ENOMEM;
}

/* The call site of an inlined_subroutine: file and line in its caller. */
static void call_site(Dwarf_Die *d, Dwarf_Files *files, const char **file,
                      int *line)
{
	Dwarf_Word cf = 0, cl = 0;
	*file = NULL;
	if (die_int(d, DW_AT_call_file, &cf) == 0 && files)
		*file = dwarf_filesrc(files, cf, NULL, NULL);
	*line = die_int(d, DW_AT_call_line, &cl) == 0 ? (int)cl : 0;
}

/* ---- per-CU index of function address ranges ---------------------------
 * dwarf_getscopes walks a compilation unit from its root for every
 * address; the index (built once per CU) finds the function by binary
 * search, and only that function's subtree is walked for inline frames. */

static void index_add(struct cu_index *ix, Dwarf_Addr lo, Dwarf_Addr hi,
                      Dwarf_Off off)
{
	if (ix->n == ix->cap) {
		size_t cap = ix->cap ? ix->cap * 2 : 64;
		struct fn_range *v = realloc(ix->v, cap * sizeof *v);
		if (!v) {
			ix->failed = 1;
			return;
		}
		ix->v = v;
		ix->cap = cap;
	}
	ix->v[ix->n++] = (struct fn_range){lo, hi, off};
}

static void index_collect(Dwarf_Die *parent, struct cu_index *ix, int level)
{
	Dwarf_Die child;
	if (level > 16 || dwarf_child(parent, &child) != 0)
		return;
	do {
		int tag = dwarf_tag(&child);
		if (tag == DW_TAG_subprogram) {
			Dwarf_Addr base, lo, hi;
			ptrdiff_t off = 0;
			while ((off = dwarf_ranges(&child, off, &base, &lo,
			                           &hi)) > 0)
				index_add(ix, lo, hi, dwarf_dieoffset(&child));
		} else if (tag == DW_TAG_namespace ||
		           tag == DW_TAG_class_type ||
		           tag == DW_TAG_structure_type ||
		           tag == DW_TAG_union_type || tag == DW_TAG_module) {
			index_collect(&child, ix, level + 1);
		}
	} while (dwarf_siblingof(&child, &child) == 0);
}

static int cmp_range(const void *a, const void *b)
{
	const struct fn_range *x = a, *y = b;
	/* Equal starts (aliases: memcpy and memmove sharing code) keep the
	 * order of the DWARF, which is what dwarf_getscopes would pick. */
	if (x->lo != y->lo)
		return (x->lo > y->lo) - (x->lo < y->lo);
	return (x->off > y->off) - (x->off < y->off);
}

static struct cu_index *cu_index_get(struct pp_symtab *st, Dwarf_Die *cu)
{
	Dwarf *dw = dwarf_cu_getdwarf(cu->cu);
	Dwarf_Off off = dwarf_dieoffset(cu);
	uint64_t key = pp_hash_mix((uintptr_t)dw, off);
	int inserted;
	uint64_t *slot = pp_u64map_put(&st->cu_map, key, &inserted);

	if (!slot)
		return NULL;
	if (!inserted) {
		struct cu_index *ix = &st->cus[*slot];
		return ix->dw == dw && ix->cu_off == off && !ix->failed ? ix
		                                                        : NULL;
	}
	if (st->ncus == st->cus_cap) {
		size_t cap = st->cus_cap ? st->cus_cap * 2 : 64;
		struct cu_index *v = realloc(st->cus, cap * sizeof *v);
		if (!v)
			return NULL;
		st->cus = v;
		st->cus_cap = cap;
	}
	struct cu_index *ix = &st->cus[st->ncus];
	memset(ix, 0, sizeof *ix);
	ix->dw = dw;
	ix->cu_off = off;
	index_collect(cu, ix, 0);
	qsort(ix->v, ix->n, sizeof ix->v[0], cmp_range);
	*slot = st->ncus++;
	return ix->failed ? NULL : ix;
}

/* The inlined_subroutine directly (through lexical blocks) inside d that
 * holds pc. */
static int inlined_at(Dwarf_Die *d, Dwarf_Addr pc, Dwarf_Die *out, int level)
{
	Dwarf_Die child;
	if (level > 64 || dwarf_child(d, &child) != 0)
		return 0;
	do {
		int tag = dwarf_tag(&child);
		if (tag == DW_TAG_inlined_subroutine) {
			if (dwarf_haspc(&child, pc) == 1) {
				*out = child;
				return 1;
			}
		} else if (tag == DW_TAG_lexical_block ||
		           tag == DW_TAG_try_block ||
		           tag == DW_TAG_catch_block) {
			/* Blocks without addresses can still hold inlined
			 * code in their children. */
			int has = dwarf_haspc(&child, pc);
			if (has != 0 && inlined_at(&child, pc, out, level + 1))
				return 1;
		}
	} while (dwarf_siblingof(&child, &child) == 0);
	return 0;
}

/* The chain function, inlined, inlined... (outermost first) at pc, from
 * the index; 0 when the index has no function there. */
static int chain_from_index(struct pp_symtab *st, Dwarf_Die *cu, Dwarf_Addr pc,
                            Dwarf_Die *chain)
{
	struct cu_index *ix = cu_index_get(st, cu);
	if (!ix || !ix->n)
		return 0;
	size_t lo = 0, hi = ix->n;
	while (lo < hi) { /* the last range starting at or before pc */
		size_t mid = lo + (hi - lo) / 2;
		if (ix->v[mid].lo <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return 0;
	size_t i = lo - 1;
	while (i > 0 && ix->v[i - 1].lo == ix->v[i].lo)
		i--;
	if (pc >= ix->v[i].hi || !dwarf_offdie(ix->dw, ix->v[i].off, &chain[0]))
		return 0;
	int n = 1;
	while (n < MAX_INLINE && inlined_at(&chain[n - 1], pc, &chain[n], 0))
		n++;
	return n;
}

/* The same chain with dwarf_getscopes, for what the index does not cover. */
static int chain_from_scopes(Dwarf_Die *cu, Dwarf_Addr pc, Dwarf_Die *chain)
{
	Dwarf_Die *scopes = NULL, rev[MAX_INLINE];
	int n = dwarf_getscopes(cu, pc, &scopes), k = 0;

	for (int i = 0; i < n && k < MAX_INLINE; i++) {
		int tag = dwarf_tag(&scopes[i]);
		if (tag != DW_TAG_subprogram &&
		    tag != DW_TAG_inlined_subroutine)
			continue;
		rev[k++] = scopes[i];
		if (tag == DW_TAG_subprogram)
			break;
		/* dwarf_getscopes continues an inlined instance with the
		 * lexical scopes of its abstract origin, not with the function
		 * it was inlined into: find the latter as the concrete parents
		 * of this DIE. */
		Dwarf_Die inl = scopes[i], *outer = NULL;
		int m = dwarf_getscopes_die(&inl, &outer);
		free(scopes);
		scopes = outer;
		n = m;
		i = 0; /* outer[0] is the inlined DIE itself; go on from [1] */
	}
	free(scopes);
	for (int i = 0; i < k; i++)
		chain[i] = rev[k - 1 - i];
	return k;
}

static int symbolize_dwarf(struct pp_symtab *st, Dwfl_Module *mod,
                           uintptr_t addr, struct pp_frame *frames,
                           uint32_t *nframes)
{
	Dwarf_Addr bias = 0;
	Dwarf_Die *cu = dwfl_module_addrdie(mod, addr, &bias);
	Dwarf_Die chain[MAX_INLINE];

	*nframes = 0;
	if (!cu)
		return 0;
	int n = chain_from_index(st, cu, addr - bias, chain);
	if (n == 0)
		n = chain_from_scopes(cu, addr - bias, chain);
	if (n <= 0)
		return 0;
	Dwarf_Files *files = NULL;
	size_t nfiles = 0;
	dwarf_getsrcfiles(cu, &files, &nfiles);

	/* Innermost frame: file:line from the line table; each frame out: the
	 * call site recorded on the inlined DIE inside it. */
	const char *file = NULL;
	int line = 0;
	Dwfl_Line *l = dwfl_module_getsrc(mod, addr);
	if (l)
		file = dwfl_lineinfo(l, NULL, &line, NULL, NULL, NULL);
	for (int i = n - 1; i >= 0; i--) {
		if (die_frame(st, &chain[i], file, line, &frames[n - 1 - i]))
			return -ENOMEM;
		if (i > 0)
			call_site(&chain[i], files, &file, &line);
	}
	*nframes = (uint32_t)n;
	return 0;
}

int pp_symtab_lookup(struct pp_symtab *st, uintptr_t addr,
                     struct pp_symbol *out)
{
	int inserted;
	struct pp_frame frames[MAX_INLINE];
	uint32_t n = 0;
	unsigned flags = 0;

	st->lookups++;
	uint64_t *slot = pp_u64map_get(&st->cache, addr);
	if (slot) {
		st->hits++;
		*out = st->results[*slot];
		return 0;
	}
	memset(out, 0, sizeof *out);

	Dwfl *dwfl = get_dwfl(st);
	Dwfl_Module *mod = dwfl ? dwfl_addrmodule(dwfl, addr) : NULL;
	if (mod) {
		Dwarf_Addr bias;
		if (module_dwarf(st, mod, &bias)) {
			if (symbolize_dwarf(st, mod, addr, frames, &n))
				return -ENOMEM;
			if (n > 0)
				flags |= PP_SYM_INLINES;
		}
		if (n == 0) {
			/* No DWARF for this address: the ELF symbol table. */
			GElf_Off off;
			GElf_Sym sym;
			const char *name = dwfl_module_addrinfo(
			    mod, addr, &off, &sym, NULL, NULL, NULL);
			if (name) {
				memset(&frames[0], 0, sizeof frames[0]);
				if (set_names(st, &frames[0], name, NULL))
					return -ENOMEM;
				frames[0].file = str(st, "");
				n = 1;
			}
		}
		take_shortage(st);
	}
	if (n > 0) {
		flags |= PP_SYM_FUNCTIONS | PP_SYM_FILENAMES | PP_SYM_LINES;
		for (uint32_t i = 0; i < n; i++) {
			if (!frames[i].file[0])
				flags &= ~(unsigned)PP_SYM_FILENAMES;
			if (frames[i].line <= 0)
				flags &= ~(unsigned)PP_SYM_LINES;
		}
	}

	if (st->nresults == st->results_cap) {
		size_t cap = st->results_cap ? st->results_cap * 2 : 1024;
		struct pp_symbol *r = realloc(st->results, cap * sizeof *r);
		if (!r)
			return -ENOMEM;
		st->results = r;
		st->results_cap = cap;
	}
	out->frames =
	    n ? pp_arena_memdup(&st->arena, frames, n * sizeof *frames) : NULL;
	out->nframes = n;
	out->flags = flags;
	slot = pp_u64map_put(&st->cache, addr, &inserted);
	if ((n && !out->frames) || !slot)
		return -ENOMEM;
	*slot = st->nresults;
	st->results[st->nresults++] = *out;
	return 0;
}

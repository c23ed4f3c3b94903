/*
 * In-process symbolization with elfutils libdwfl/libdw, and its cache
 * (symbols.h): the symbolizer of this process or of given mappings, the
 * modules it reports to libdwfl, the results it keeps per address, the
 * names it gives them. Where the files come from is debuginfo.c's, what
 * the DWARF says of an address dwarf.c's. One lock around everything,
 * held from acquire to release.
 * Context: agent.
 *
 * For an address: the module (dwfl_addrmodule); with DWARF, the chain of
 * scopes at the address (dwarf_getscopes) gives the innermost function and
 * every function it was inlined into, the line table gives the innermost
 * file:line and each inlined_subroutine's DW_AT_call_file/line the caller's;
 * without DWARF, the ELF symbol table gives the function name only.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>

#include "debuginfo.h"
#include "symtab_int.h"
#include "unloaded.h"
#include "util/fds.h"

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
	/* Images unloaded since (unloaded.h) follow the process's own:
	 * another recorded is a change too. */
	uint64_t unloads = pp_unloaded_count();
	int rc =
	    pp_mappings_read(&fresh, unloads == st->unloads ? &st->maps : NULL);

	if (rc == 1)
		return 0; /* unchanged: keep the cache */
	if (!rc && (rc = pp_unloaded_append_mappings(&fresh)) != 0)
		pp_mappings_free(&fresh);
	if (rc)
		return rc;
	st->unloads = unloads;
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
	pp_debuginfo_take_shortage(); /* a previous holder's */
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
	pp_unloaded_forget_in_child();
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

/* Images unloaded since, each at its ghost range (unloaded.h): the file
 * at its path, when it is still the one that was loaded, found and read
 * as the process's own are (find_elf in debuginfo.c). */
static void report_unloaded(struct pp_symtab *st)
{
	const struct pp_mappings *m = &st->maps;
	uintptr_t last = 0;
	for (size_t i = 0; i < m->n; i++) {
		const struct pp_mapping *mp = &m->v[i];
		if (!mp->unloaded || mp->ghost_bias == last)
			continue;
		last = mp->ghost_bias;
		if (mp->is_file && !mp->file_changed)
			dwfl_report_module(st->dwfl, mp->path, mp->ghost_lo,
			                   mp->ghost_hi);
	}
}

static Dwfl *get_dwfl(struct pp_symtab *st)
{
	if (st->dwfl || st->dwfl_failed)
		return st->dwfl;
	st->dwfl = dwfl_begin(st->given ? &pp_debuginfo_file_callbacks
	                                : &pp_debuginfo_self_callbacks);
	if (st->dwfl) {
		dwfl_report_begin(st->dwfl);
		if (st->given)
			report_files(st);
		int rc = st->given ? 0 : report_self(st->dwfl);
		if (!rc && !st->given)
			report_unloaded(st);
		if (rc != 0 || dwfl_report_end(st->dwfl, NULL, NULL) != 0) {
			dwfl_end(st->dwfl);
			st->dwfl = NULL;
		}
	}
	st->dwfl_failed = st->dwfl == NULL;
	return st->dwfl;
}

/*
 * The dwz file of dw (.gnu_debugaltlink: the DWARF that several debug
 * files share), looked for once per Dwarf (pp_debuginfo_open_alt) and
 * kept until the cache is dropped: libdw would otherwise look for it
 * itself and keep its descriptor open.
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
	Elf *elf = pp_debuginfo_open_alt(name, id, (int)idlen, dwfile);
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
	int e = pp_debuginfo_take_shortage();
	if (e && !st->shortage)
		st->shortage = e;
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

const char *pp_symtab_str(struct pp_symtab *st, const char *s)
{
	int64_t i = pp_strtab_add(&st->strings, s ? s : "");
	return i < 0 ? NULL : pp_strtab_get(&st->strings, (size_t)i);
}

/* name (demangled) and system_name (as in the binary) of a symbol. */
int pp_symtab_set_names(struct pp_symtab *st, struct pp_frame *f,
                        const char *sys, const char *plain)
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
	f->name = pp_symtab_str(st, dem ? dem : name);
	f->system_name = pp_symtab_str(st, sys ? sys : name);
	free(dem);
	return f->name && f->system_name ? 0 : -ENOMEM;
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
			if (pp_symtab_dwarf_frames(st, mod, addr, frames, &n))
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
				if (pp_symtab_set_names(st, &frames[0], name,
				                        NULL))
					return -ENOMEM;
				frames[0].file = pp_symtab_str(st, "");
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

/*
 * Where symbols are read from (debuginfo.h): the ELF file of a module and
 * its separate debug information (by build ID, .gnu_debuglink, the dwz
 * file), searched on this machine only, each file read into memory with no
 * descriptor held; and libdwfl's callbacks that use them. Apart from
 * symtab.c (the symbolizer and its cache) and dwarf.c (what the DWARF
 * says of an address): this is the part that opens files, and answers for
 * the descriptors and the network a host must not lose to a profiler.
 * Context: agent.
 */
#include "debuginfo.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>

#include "symbols.h"
#include "util/fds.h"

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

const Dwfl_Callbacks pp_debuginfo_self_callbacks = {
    .find_elf = find_elf,
    .find_debuginfo = no_debuginfo,
    .debuginfo_path = &debuginfo_path,
};

/* Files given by path (pp_symtab_new): libdwfl opens them itself. */
const Dwfl_Callbacks pp_debuginfo_file_callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = find_debuginfo,
    .debuginfo_path = &debuginfo_path,
};

int pp_debuginfo_take_shortage(void)
{
	int e = fd_shortage;
	fd_shortage = 0;
	return e;
}

/*
 * A dwz file (.gnu_debugaltlink: the DWARF that several debug files share),
 * found and read here before libdw looks for it: libdw would keep its
 * descriptor open. By build ID under /usr/lib/debug/.build-id, else by the
 * path the link names (relative to the debug file's folder).
 */
Elf *pp_debuginfo_open_alt(const char *name, const void *id, int idlen,
                           const char *dwfile)
{
	char path[4096], *found = NULL;
	build_id_path(path, sizeof path, id, idlen);
	Elf *elf = try_debug_file(path, id, idlen, 0, &found);
	if (!elf) {
		const char *slash = dwfile ? strrchr(dwfile, '/') : NULL;
		if (name[0] == '/' || !slash)
			snprintf(path, sizeof path, "%s", name);
		else
			snprintf(path, sizeof path, "%.*s/%s",
			         (int)(slash - dwfile), dwfile, name);
		elf = try_debug_file(path, id, idlen, 0, &found);
	}
	free(found);
	return elf;
}

/*
 * The process's executable mappings (from /proc/self/maps, with GNU build
 * IDs) and in-process symbolization (elfutils libdw: function, file, line,
 * inline chains; ELF symbol tables when there is no DWARF), with a cache
 * that lives across requests and is dropped when the mappings change.
 * Never in a signal handler or a wrapper: it reads files, allocates and
 * takes a lock.
 * Context: agent.
 */
#ifndef PP_SYMBOLS_H
#define PP_SYMBOLS_H

#include <stddef.h>
#include <stdint.h>

struct pp_mapping {
	uintptr_t start, limit;
	uint64_t offset;
	const char *path;     /* as /proc/self/maps names it ("[vdso]", "" when
	                         anonymous), without " (deleted)" */
	const char *name;     /* path as UTF-8 text, what every answer shows:
	                         path itself when valid, else its repair
	                         (util/utf8.h); path stays the bytes to open */
	const char *build_id; /* lowercase hex, "" when unknown */
	unsigned id; /* 1-based, pprof order: the main executable is 1 */
	unsigned is_file : 1; /* backed by a file (not [vdso], not anon) */
	unsigned is_main : 1;
	unsigned deleted : 1; /* the file was replaced or removed */
	/* An image unloaded since (symbols/unloaded.h): start and limit are
	 * its ghost range, not where it was loaded; its file's addresses
	 * start at ghost_bias. */
	unsigned unloaded : 1;
	uintptr_t ghost_bias, ghost_lo, ghost_hi;
	/* NULL, or why the file is no longer what was loaded although the
	 * kernel still names it (truncated, written over in place): its
	 * symbols are not read from it. A static string. */
	const char *file_changed;
};

struct pp_mappings {
	struct pp_mapping *v; /* sorted by start */
	size_t n;
	uint64_t signature; /* changes when any executable mapping does */
	char *strings;      /* storage for paths and names */
	char *ids;          /* storage for build IDs */
};

/* Read the executable mappings of this process: 0, or a negative errno.
 * With prev, returns 1 (and leaves m empty) when nothing changed since prev,
 * before the costlier part (build IDs). */
int pp_mappings_read(struct pp_mappings *m, const struct pp_mappings *prev);

enum {
	/* A line that starts like a mapping (a hex digit) but is not a
	 * well-formed one, a NUL byte, or overlapping executable mappings
	 * are errors; without it such lines are skipped. Lines that do not
	 * start with a hex digit are ignored either way. */
	PP_MAPS_STRICT = 1,
};

/*
 * Parse text in the /proc/PID/maps format (as also found at the end of a
 * legacy CPU profile) into m: its executable mappings, sorted, with empty
 * build IDs. The mapping whose path is main_path gets ID 1; with main_path
 * NULL, the first file-backed executable mapping of the text does. Pure:
 * no I/O. 0, -ENOMEM, or -EINVAL with the reason in err ("maps text line
 * 3: ...") and the byte where the bad line starts in *err_at; err and
 * err_at may be NULL.
 */
int pp_mappings_parse(const char *text, size_t len, const char *main_path,
                      unsigned flags, struct pp_mappings *m, char *err,
                      size_t errlen, size_t *err_at);
/* Fill in the build IDs of m's file mappings from the files on disk (files
 * that are missing keep ""). 0 or -ENOMEM. */
int pp_mappings_read_build_ids(struct pp_mappings *m);
/* The GNU build ID, in hex, among the notes of a PT_NOTE segment's copy
 * (p, len); out unchanged when there is none. */
void pp_note_build_id(const unsigned char *p, size_t len, char *out,
                      size_t outlen);
/* The GNU build ID of the ELF file at path, lowercase hex: 0, or a negative
 * errno (-ENOENT also when the file has none). */
int pp_mappings_file_build_id(const char *path, char *out, size_t outlen);
void pp_mappings_free(struct pp_mappings *m);
/* Was the file at path changed under its mapping, as of the last
 * pp_mappings_read? */
int pp_mappings_path_changed(const char *path);
/* Loaded files found changed under their mappings since start (status). */
uint64_t pp_mappings_changed_count(void);
/* Host context, after a dlclose returned: forget the remembered images
 * the loader no longer lists. Never waits for the agent. */
void pp_mappings_after_unload(void);
/* In a forked child: the images remembered are the parent's (a parent
 * thread may have held their lock at fork time); start over. */
void pp_mappings_forget_in_child(void);
/* The mapping that holds pc, or NULL. */
const struct pp_mapping *pp_mappings_find(const struct pp_mappings *m,
                                          uintptr_t pc);

/* One function of a location, innermost first. */
struct pp_frame {
	const char *name;        /* demangled */
	const char *system_name; /* as in the binary (mangled) */
	const char *file;        /* "" when unknown */
	int64_t line;            /* 0 when unknown */
	int64_t start_line; /* first line of the function, 0 when unknown */
};

enum {
	PP_SYM_FUNCTIONS = 1, /* names found */
	PP_SYM_FILENAMES = 2,
	PP_SYM_LINES = 4,
	PP_SYM_INLINES = 8, /* debug info was searched for inline frames */
};

struct pp_symbol {
	const struct pp_frame *frames; /* innermost first */
	uint32_t nframes;              /* 0: unknown address */
	unsigned flags;
};

struct pp_symtab;

/*
 * The process-wide symbolizer, locked for the caller until release. It
 * re-reads the mappings and drops its cache when they changed (dlopen,
 * dlclose). It holds no file descriptor between calls: each ELF or debug
 * file is read into memory and closed. 0, or a negative errno (-ENOMEM;
 * -EMFILE or -ENFILE when /proc/self/maps could not be opened).
 */
int pp_symtab_acquire(struct pp_symtab **out);
/* -EMFILE or -ENFILE when a file the lookups since acquire needed could
 * not be opened for want of descriptors (what they answered is then
 * incomplete; release drops the cache so that the next request tries
 * again), else 0. */
int pp_symtab_shortage(const struct pp_symtab *st);
void pp_symtab_release(struct pp_symtab *st);

/*
 * A symbolizer for given mappings (another process's, those of a profile
 * file): each file-backed mapping is symbolized from the ELF file at its
 * path, loaded where the mapping says. It takes m over (m is left empty).
 * Not shared and not locked: free it with pp_symtab_free. NULL on ENOMEM.
 */
struct pp_symtab *pp_symtab_new(struct pp_mappings *m);
void pp_symtab_free(struct pp_symtab *st);

/* What the symbolizer found for one mapping of pp_symtab_mappings(st). */
struct pp_module_info {
	const char *symbols;    /* "dwarf", "symtab" (ELF symbols only) or
	                           "none" */
	const char *debug_file; /* a separate debug file that was used, or
	                           NULL */
	const char *elf_file;   /* the ELF file read, or NULL when none was */
};
/* The strings stay valid while st is held. 0 or a negative errno. */
int pp_symtab_module_info(struct pp_symtab *st, const struct pp_mapping *mp,
                          struct pp_module_info *out);
/* Free the symbolizer and its cache (pullprof_stop). */
void pp_symtab_shutdown(void);

const struct pp_mappings *pp_symtab_mappings(const struct pp_symtab *st);
/* Symbolize addr, an exact code address: for a return address pass pc - 1.
 * The result stays valid until release. 0 or -ENOMEM. */
int pp_symtab_lookup(struct pp_symtab *st, uintptr_t addr,
                     struct pp_symbol *out);

/* Counters for status and benchmarks, as of the last release (lock-free:
 * a long lookup holding the symbolizer never delays /status). All zero
 * before the first use. */
struct pp_symtab_stats {
	uint64_t lookups, hits, refreshes;
	size_t cached, mappings;
};
void pp_symtab_stats(struct pp_symtab_stats *out);

/* In a forked child (from the agent's atfork handler): forget the
 * process symbolizer and its lock, which a parent thread may have held. */
void pp_symtab_forget_in_child(void);

#endif

/*
 * The process's executable mappings (from /proc/self/maps, with GNU build
 * IDs) and in-process symbolization (elfutils libdw: function, file, line,
 * inline chains; ELF symbol tables when there is no DWARF), with a cache
 * that lives across requests and is dropped when the mappings change.
 * Agent context only: it reads files, allocates and takes a lock.
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
	const char *build_id; /* lowercase hex, "" when unknown */
	unsigned id; /* 1-based, pprof order: the main executable is 1 */
	unsigned is_file : 1; /* backed by a file (not [vdso], not anon) */
	unsigned is_main : 1;
	unsigned deleted : 1; /* the file was replaced or removed */
};

struct pp_mappings {
	struct pp_mapping *v; /* sorted by start */
	size_t n;
	uint64_t signature; /* changes when any executable mapping does */
	char *strings;      /* storage for paths and build IDs */
};

/* Read the executable mappings of this process: 0, or a negative errno.
 * With prev, returns 1 (and leaves m empty) when nothing changed since prev,
 * before the costlier part (build IDs). */
int pp_mappings_read(struct pp_mappings *m, const struct pp_mappings *prev);
void pp_mappings_free(struct pp_mappings *m);
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
 * dlclose). NULL on ENOMEM.
 */
struct pp_symtab *pp_symtab_acquire(void);
void pp_symtab_release(struct pp_symtab *st);
/* Free the symbolizer and its cache (pullprof_stop). */
void pp_symtab_shutdown(void);

const struct pp_mappings *pp_symtab_mappings(const struct pp_symtab *st);
/* Symbolize addr, an exact code address: for a return address pass pc - 1.
 * The result stays valid until release. 0 or -ENOMEM. */
int pp_symtab_lookup(struct pp_symtab *st, uintptr_t addr,
                     struct pp_symbol *out);

/* Counters for status and benchmarks (takes the lock: not while acquired).
 * All zero before the first use. */
struct pp_symtab_stats {
	uint64_t lookups, hits, refreshes;
	size_t cached, mappings;
};
void pp_symtab_stats(struct pp_symtab_stats *out);

#endif

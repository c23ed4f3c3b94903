/*
 * What the symbolizer's files share (symtab.c: the symbolizer, its cache
 * and the names it hands out; dwarf.c: an address's functions from the
 * DWARF): the symbolizer itself and its per-CU index of functions. Not for
 * the rest of the agent, which has symbols.h.
 * Context: agent.
 */
#ifndef PP_SYMTAB_INT_H
#define PP_SYMTAB_INT_H

#include <stddef.h>
#include <stdint.h>

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

#include "symbols.h"
#include "util/arena.h"
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
	uint64_t unloads; /* pp_unloaded_count() when maps were read */
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

/* s kept in st's strings ("" for NULL); NULL on ENOMEM. */
const char *pp_symtab_str(struct pp_symtab *st, const char *s);
/* f's name (demangled) and system_name (as in the binary) from sys (the
 * linkage name), else plain. 0 or -ENOMEM. */
int pp_symtab_set_names(struct pp_symtab *st, struct pp_frame *f,
                        const char *sys, const char *plain);
/* The frames at addr in mod from its DWARF, innermost first (MAX_INLINE at
 * most): the function, those inlined into it and their file:line; none
 * when the DWARF does not cover addr. 0 or -ENOMEM. dwarf.c. */
int pp_symtab_dwarf_frames(struct pp_symtab *st, Dwfl_Module *mod,
                           uintptr_t addr, struct pp_frame *frames,
                           uint32_t *nframes);

#endif

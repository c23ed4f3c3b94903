/*
 * What the DWARF says of an address (symtab_int.h): the function that
 * holds it, the functions inlined into it there, innermost first, and each
 * one's file:line (the line table for the innermost, each inlined call's
 * DW_AT_call_file/line for the one outside it); found through an index of
 * each compilation unit's function ranges built once. Apart from symtab.c
 * (the symbolizer, its cache and the files it reads): only libdw's DWARF
 * reading is here.
 * Context: agent.
 */
#include <dwarf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "symtab_int.h"
#include "util/hash.h"

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
	if (pp_symtab_set_names(st, f, link, plain))
		return -ENOMEM;
	int start = 0;
	dwarf_decl_line(d, &start);
	f->start_line = start;
	/* Function.filename is where the function is, which for an inlined
	 * one is where it was written, not the caller. */
	const char *decl = dwarf_decl_file(d);
	f->file = pp_symtab_str(st, file ? file : decl ? decl : "");
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

int pp_symtab_dwarf_frames(struct pp_symtab *st, Dwfl_Module *mod,
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

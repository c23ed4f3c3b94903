/*
 * The symbolized view of a profile model: what every renderer that names
 * functions reads. Each distinct (pc, leaf-or-return) of the samples becomes
 * one location, numbered in order of first appearance; each location has the
 * symbolizer's frames (innermost first), each distinct function one number.
 * Built while the caller holds the symbol table (the frames' strings live
 * there): render, then free the view, then release the table.
 * Context: agent.
 */
#ifndef PP_VIEW_H
#define PP_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "symbols/symbols.h"

struct pp_view_loc {
	uintptr_t pc;
	int is_return;         /* a caller's frame: looked up at pc - 1 */
	const char *synthetic; /* the name of a synthetic frame, or NULL */
	const struct pp_mapping *mapping; /* NULL when none */
	const struct pp_frame *frames;    /* innermost first */
	uint32_t nframes;                 /* 0: an unknown address */
	uint32_t first_func; /* funcs of frames: func_of[first_func..] */
};

struct pp_view {
	const struct pp_profile *p;
	const struct pp_mappings *maps; /* NULL without a symbol table */
	struct pp_view_loc *locs;
	size_t nlocs;
	uint32_t *func_of; /* for each location's frames, the function index */
	const struct pp_frame *
	    *funcs; /* one representative frame per function */
	size_t nfuncs;
	uint32_t *stacks; /* each sample's location indices, leaf first */
	size_t *
	    stack_at; /* sample i's stack: stacks[stack_at[i]..stack_at[i+1]] */
	const struct pp_sample **samples; /* in model order */
	size_t nsamples;
	unsigned
	    *mapping_flags; /* by mapping index: PP_SYM_* every location had */
	unsigned char *mapping_used; /* by mapping index */
	struct pp_frame *synthetic;  /* frames of the model's synthetic PCs */
	/* Some location is a synthetic frame; some is a real address in no
	 * known mapping. */
	int synthetic_used, unmapped_used;
	int default_type; /* the model's, unless the request named another */
	/* By mapping index: its ID in the profile, 0 when not shown (an
	 * image unloaded since that no location is in); the process's own
	 * keep theirs (1..), the unloaded ones used follow. */
	unsigned *map_id;
	size_t nshown; /* mappings shown: IDs 1..nshown */
};

/* Build the view of p; st (locked by the caller) may be NULL: locations
 * then carry addresses only. 0 or -ENOMEM. */
int pp_view_build(struct pp_view *v, const struct pp_profile *p,
                  struct pp_symtab *st);
void pp_view_free(struct pp_view *v);

/* A note on mapping i of the view when a location of the profile is in it
 * and its file changed under it (pp_mapping.file_changed): why its
 * addresses are not symbolized. 1 with the note in buf, else 0. */
int pp_view_mapping_note(const struct pp_view *v, size_t i, char *buf,
                         size_t len);

/* The index of the mapping whose ID is id, or -1. */
long pp_view_mapping_by_id(const struct pp_view *v, size_t id);

/* The index of the sample type to show: want when in range, else the
 * view's default, else the last (as pprof chooses). */
size_t pp_view_sample_index(const struct pp_view *v, int want);

#endif

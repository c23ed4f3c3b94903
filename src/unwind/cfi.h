/*
 * Context: agent.
 *
 * The compact frame tables' builder (cfi.c): an image's DWARF call-frame
 * information (.eh_frame, found through .eh_frame_hdr) turned once into
 * the sorted rows of unwind/frames.h, which the sampling signal's handler
 * walks. The CFA programs are run here; which rows the walk can follow is
 * the architecture's to say (arch/arch.h: pp_arch_cfi_rule).
 */
#ifndef PP_CFI_H
#define PP_CFI_H

#include <stddef.h>
#include <stdint.h>

#include "arch/rules.h"
#include "unwind/frames.h"

/* The pieces of .eh_frame_hdr the tables rely on, from a copy of its first
 * 16 bytes h, which were at addr: the search table's address and its
 * number of entries. 0, or -1 for a header not understood. */
int pp_cfi_parse_hdr(const unsigned char h[16], uintptr_t addr,
                     uintptr_t *table, size_t *count);

/* Build the table of an image from its .eh_frame_hdr at `hdr` (search
 * table at `table`, `count` entries), code in [lo, hi): addresses in this
 * process, a loaded image (or a file's PT_LOAD segments laid out at their
 * addresses, as tests/unit/test_cfi.c does). The image's memory is read
 * with checked copies: an image unloaded meanwhile gives NULL, never a
 * fault. NULL also when the tables are not understood (the image is then
 * left to libunwind). Free with pp_cfi_free(). The registry calls both
 * with its lock held (which fork takes). */
struct pp_frame_table *pp_cfi_build(uintptr_t hdr, uintptr_t table,
                                    size_t count, uintptr_t lo, uintptr_t hi);
/* The table of an image with no .eh_frame_hdr at all (arm64's vDSO): the
 * rows of a signal trampoline the architecture finds in its code
 * (pp_arch_cfi_trampoline), NULL when there is none. */
struct pp_frame_table *pp_cfi_build_bare(uintptr_t lo, uintptr_t hi);
void pp_cfi_free(struct pp_frame_table *t);

#endif

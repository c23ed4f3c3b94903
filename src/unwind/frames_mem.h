/*
 * Context: agent.
 *
 * A walk of another thread's stack through the compact frame tables, from
 * outside (frames_mem.c): the thread is not interrupted (it is blocked in
 * a system call, or a perf_event sample copied its stack).
 */
#ifndef PP_FRAMES_MEM_H
#define PP_FRAMES_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "arch/arch.h"

/* The copy of the stack: buf[0..len) holds the words at base..; the
 * caller's buffer has room for cap bytes. With `live`, loads past len read
 * more of the process's memory (process_vm_readv, which fails rather than
 * faults on a page gone meanwhile) into the rest of buf, and loads outside
 * buf read single words, at most `reads` of them. */
struct pp_frames_mem {
	uintptr_t base;
	unsigned char *buf;
	size_t len, cap;
	int live;
	unsigned reads;
};
int pp_frames_mem_load(struct pp_frames_mem *m, uintptr_t addr, uintptr_t *out);

/* Walk a thread's stack from r's pc and sp (and its frame pointer and
 * link register when regs_known), reading it through m. The depth; *why
 * PP_UNWIND_NO_TABLE where a frame the tables cannot describe ended it. */
int pp_frames_walk_mem(struct pp_frames_mem *m, const struct pp_arch_regs *r,
                       int regs_known, uintptr_t *pcs, unsigned max, int *why);

#endif

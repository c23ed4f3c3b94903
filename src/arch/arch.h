/*
 * Context: signal.
 *
 * The architecture layer: everything the processor decides, behind one
 * interface, one file (and header) per architecture. The unwinder's table
 * builder (unwind/cfi.c) and walks (unwind/frames.c, frames_mem.c), the
 * thread looks (threads/look.c) and the capture paths (unwind/capture.c,
 * cpu/thread_start.c) name no register and decode no instruction: they ask
 * here. x86_64 is arch/x86_64.h (the inline hooks the handler's walk uses
 * per frame) and arch/x86_64.c (the rest). A port is arch/<name>.h and
 * arch/<name>.c, the #if below, and its tests (tests/unit/test_cfi.c reads
 * the port's tables against readelf). What each hook must do is written
 * here, with what arm64 (aarch64) needs of it; arch/aarch64.[ch] is
 * that port.
 *
 * Everything here is async-signal-safe (no allocation, no lock, no
 * system call) unless its comment says it reads memory.
 *
 * Registers. struct pp_arch_regs holds the registers a walk starts from:
 * pc, sp, the frame pointer (x86_64 rbp; arm64 x29), and the link register
 * (arm64 x30, where a call leaves the return address; x86_64 has none and
 * leaves it 0: the call pushes it).
 *
 * Constants each architecture's header defines:
 *   PP_ARCH_NAME               "x86_64", "aarch64"
 *   PP_ARCH_STACK_GROWS_DOWN   1 (both): the walks climb to higher addresses
 *                              (a caller's CFA is above its callee's sp);
 *                              the walks assert it
 *   PP_ARCH_RED_ZONE           bytes below sp a leaf function may use
 *                              without moving sp (x86_64 128, arm64 0): no
 *                              walk reads below sp, so it only says what a
 *                              stack copy taken from sp leaves out
 *   PP_ARCH_HAS_LINK_REGISTER  0 on x86_64; 1 on arm64, where a frame's
 *                              return address may still be in the link
 *                              register (a leaf, a prologue before its
 *                              store): see PP_ARCH_RULE_RA
 *   PP_ARCH_DW_SP, PP_ARCH_DW_FP, PP_ARCH_DW_RA
 *                              DWARF register numbers of sp, the frame
 *                              pointer and the return-address column
 *                              (x86_64 7, 6, 16; arm64 31, 29, 30)
 *   PP_ARCH_FRAME_RECORD_RA, PP_ARCH_FRAME_RECORD_SIZE
 *                              a frame record at fp holds the caller's fp
 *                              at fp and the return address at fp +
 *                              RECORD_RA; the caller's sp is fp +
 *                              RECORD_SIZE (both: 8 and 16; arm64's record
 *                              is the stp x29, x30 pair)
 *   PP_ARCH_SIGFRAME_PC, _SP, _FP, _LR
 *                              where the kernel saved the interrupted
 *                              registers, as offsets from the sp at the
 *                              signal trampoline (a PP_FRAME_SIGNAL row):
 *                              x86_64 the ucontext_t is at sp (gregs
 *                              REG_RIP, REG_RSP, REG_RBP; _LR unused);
 *                              arm64 the rt_sigframe's siginfo_t comes
 *                              first, then the ucontext_t with
 *                              uc_mcontext.pc, .sp, .regs[29], .regs[30]
 *   PP_ARCH_GLIBC_BASE         the C library's oldest symbol version
 *                              on the processor (x86_64 "GLIBC_2.2.5",
 *                              arm64 "GLIBC_2.17"): the lock wrappers bind
 *                              two names of that version
 *   PP_ARCH_PERF_REGS, PP_ARCH_PERF_NREGS
 *                              perf_event's sample_regs_user mask for the
 *                              registers a walk starts from, and how many
 *                              it selects (x86_64 bp, sp, ip: 3; arm64
 *                              x29, lr, sp, pc: 4)
 *
 * The compact rows' rule (unwind/frames.h): 32 bits whose low 3 bits are
 * the kind (enum pp_frame_kind, the same everywhere); the rest is laid out
 * by the architecture:
 *   PP_ARCH_RULE(kind, fp, ra, off)  make one
 *   PP_ARCH_RULE_OFF(r)   the CFA offset from sp or fp (at most
 *                         PP_ARCH_RULE_MAX_OFF)
 *   PP_ARCH_RULE_FP(r)    where the frame pointer was saved: at CFA - 8 *
 *                         k (0: unchanged; at most PP_ARCH_RULE_MAX_FP);
 *                         for a PLT row the architecture's own datum
 *   PP_ARCH_RULE_RA(r)    where the return address is: at CFA - 8 * k, or
 *                         0: in the link register. x86_64 stores nothing
 *                         (always 1: CFA - 8, so the compiler drops the
 *                         other branch); arm64 stores it (x30 saved at
 *                         CFA - 8 by stp x29, x30, [sp, -16]!, elsewhere in
 *                         bigger frames; 0 in a leaf or before the store;
 *                         at most PP_ARCH_RULE_MAX_RA)
 *
 * Inline hooks (the handler's walk calls them per frame):
 *   pp_arch_regs_of_ucontext(uc, r)  pc, sp, fp (and lr) of a signal's
 *                         ucontext_t (arm64: uc_mcontext.pc, .sp,
 *                         .regs[29], .regs[30])
 *   pp_arch_regs_of_perf(v, r)  the same from a perf sample's user
 *                         registers, v[] in the order of the mask's bits
 *   pp_arch_plt_cfa(rule, pc, sp)  the CFA of a PP_FRAME_PLT row (x86_64:
 *                         the lazy-binding PLT's expression, see
 *                         x86_64.c); an architecture whose PLT has no CFA
 *                         expression (arm64's stubs move neither sp nor
 *                         x30) never emits such rows and returns sp + off
 *   pp_arch_strip_ra(ra)  a return address as code: x86_64 as it is;
 *                         arm64 strips the pointer-authentication bits a
 *                         PAC-signed x30 carries (xpaclri, or the mask of
 *                         the user address bits) before any lookup
 *   pp_arch_after_syscall(w)  do the 8 bytes w that end at pc end with the
 *                         system-call instruction (a thread stopped in a
 *                         call stands just past it)? x86_64 syscall
 *                         (0f 05); arm64 svc #0 (d4000001)
 *   pp_arch_spin_pause()  the pause of a spin-wait loop (x86_64 pause;
 *                         arm64 isb)
 *   pp_arch_here(r)       always inlined: pc, sp and fp (and lr) of the
 *                         function it is written in, for a walk from here
 *   pp_arch_call_on_stack(fn, arg, top)  call fn(arg) with sp = top (the
 *                         top of a stack of the pool, 16-byte aligned),
 *                         back on the caller's stack after (arm64: mov to
 *                         sp, blr, restore from a callee-saved register)
 *
 * Out of line (x86_64.c), for the table builder and the walks from
 * outside (agent context: pure functions, or reads through a checked copy
 * the caller passes):
 *   pp_arch_cfi_rule(s)   the compact rule of a row of CFI, from the
 *                         register rules the builder tracked (struct
 *                         pp_cfi_state, arch/rules.h; signal and outermost
 *                         rows are the builder's own): the CFA as sp or fp
 *                         plus an offset, where the frame pointer and the
 *                         return address are; PP_FRAME_UNSUPPORTED for
 *                         what a row cannot say (libunwind then unwinds)
 *   pp_arch_cfa_expression(e, len, s)  a CFA expression the architecture
 *                         knows (x86_64: the PLT's); 1 when it set s's CFA
 *                         (cfa_kind PP_CFI_CFA_PLT), 0 otherwise (the row
 *                         is then UNSUPPORTED). arm64: none
 *   pp_arch_after_call(code)  do the PP_ARCH_CALL_BYTES bytes before a
 *                         return address end with a call instruction?
 *                         (arm64: bl or blr, the 4 bytes before it)
 *   pp_arch_call_target(ra, copy)  where the call just before ra went,
 *                         through a PLT stub or GOT slot to the function
 *                         itself, reading code with copy; 0 when it cannot
 *                         be told (arm64: bl's imm26, the stub's adrp/ldr
 *                         pair)
 *
 * Signal trampolines. The walks unwind through a signal frame where a
 * PP_FRAME_SIGNAL row covers the handler's return address: the builder
 * makes one where the trampoline's CFI says so (the 'S' augmentation), and
 * where the architecture's hook says a trampoline without CFI is:
 *   pp_arch_cfi_trampoline(lo, hi, copy, &at, &len)  1 with the code range
 *                         [at, at + len) of a signal trampoline that has no
 *                         CFI in an image's code [lo, hi) (read with copy),
 *                         0 when none. x86_64: none, glibc's __restore_rt
 *                         (mov $15, %rax; syscall) carries CFI. arm64: the
 *                         vDSO's __kernel_rt_sigreturn (mov x8, #139; svc
 *                         #0) has none on purpose (the kernel's
 *                         sigreturn.S says why): found by those two
 *                         instructions in the vDSO (a small image), the nop
 *                         before it included (a handler returns to the
 *                         trampoline itself, looked up at ra - 1). The
 *                         hook is also asked about an image with no
 *                         .eh_frame_hdr at all (Debian 12's arm64 vDSO
 *                         has none): its table is then those rows, and
 *   pp_arch_bare_rule(lo, hi, copy)  the rule of the rest of such an
 *                         image's code, 0 when it cannot be told.
 *                         x86_64: 0 (its vDSO has CFI). arm64: the vDSO's
 *                         functions (clock_gettime, gettimeofday, ...) are
 *                         leaves that never move sp nor store x30, and a
 *                         busy thread is often caught in one: when no
 *                         instruction of [lo, hi) moves sp, stores x30 or
 *                         calls, every pc there is a leaf's (CFA = sp, the
 *                         return address in x30); otherwise 0 and the walk
 *                         stops there as before.
 *
 * Walks from outside (threads/look.c) start from what the kernel shows: a
 * blocked thread's /proc/self/task/TID/syscall gives sp and pc only (the
 * file's layout, "nr args[6] sp pc", is the same on every architecture);
 * fp and lr are unknown then. On arm64 a frame whose return address is
 * still in x30 (PP_ARCH_RULE_RA 0) ends such a walk.
 */
#ifndef PP_ARCH_H
#define PP_ARCH_H

#include <stddef.h>
#include <stdint.h>

struct pp_arch_regs {
	uintptr_t pc, sp, fp;
	uintptr_t lr; /* the link register; 0 where there is none */
};

struct pp_cfi_state;

#if defined(__x86_64__) && !defined(PP_ARCH_TABLES_AARCH64)
#include "arch/x86_64.h"
#elif defined(__aarch64__) || defined(PP_ARCH_TABLES_AARCH64)
/* PP_ARCH_TABLES_AARCH64: the table builder alone, for AArch64 binaries
 * read on another processor (tests/unit/test_cfi_aarch64.c). */
#include "arch/aarch64.h"
#else
#error                                                                         \
    "pullprof has no architecture layer for this processor: see src/arch/arch.h"
#endif

uint32_t pp_arch_cfi_rule(const struct pp_cfi_state *s);
int pp_arch_cfa_expression(const unsigned char *e, size_t len,
                           struct pp_cfi_state *s);
int pp_arch_after_call(const unsigned char code[PP_ARCH_CALL_BYTES]);
/* copy(addr, out, n): the bytes that could be read (0 when none). */
typedef size_t (*pp_arch_copy_fn)(uintptr_t addr, void *out, size_t n);
uintptr_t pp_arch_call_target(uintptr_t ra, pp_arch_copy_fn copy);
int pp_arch_cfi_trampoline(uintptr_t lo, uintptr_t hi, pp_arch_copy_fn copy,
                           uintptr_t *at, size_t *len);
uint32_t pp_arch_bare_rule(uintptr_t lo, uintptr_t hi, pp_arch_copy_fn copy);

#endif

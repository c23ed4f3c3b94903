/* The unwind-table registry (see unwind.h): its readers
 * (registry_read.c), which the sampling signal's handler calls, and the
 * agent's side (registry.c).
 * Context: signal.
 */
#ifndef PP_REGISTRY_H
#define PP_REGISTRY_H

#include <stdint.h>

/* Bracket every use of the published ranges, so the agent knows when an
 * old snapshot has no reader left. */
void pp_registry_enter(void);
void pp_registry_leave(void);
/* Hot context: n readers that were left inside without returning (a
 * handler left on its thread, shim/cpu_hot.h) count out. */
void pp_registry_forget_readers(int n);
/* Is ip in the code of an image whose unwind table libunwind has? */
int pp_registry_covers(uintptr_t ip);
/* The same question, and that image's compact frame table (NULL when it
 * has none: libunwind must unwind there). */
struct pp_frame_table;
const struct pp_frame_table *pp_registry_table(uintptr_t ip, int *covered);
/* The same, remembering the image found in *near: a walk's next frame is
 * most often in the same image, and then costs no search. *near starts
 * zeroed and lives no longer than the walk's pp_registry_enter. */
struct pp_registry_near {
	uintptr_t lo, hi;
	const struct pp_frame_table *frames;
};
const struct pp_frame_table *
pp_registry_table_near(uintptr_t ip, int *covered,
                       struct pp_registry_near *near);
/* Agent or host context: an image is about to be unloaded (dlclose); until
 * the next refresh no unwind table is trusted. */
void pp_registry_unloading(void);
/* Host context, after the real dlclose returned: catch up now if the
 * registry is free (else the agent's next refresh will). */
void pp_unwind_refresh_after_unload(void);
/* Hot context. May libunwind's cached fast trace be used? Not once any
 * image was unloaded (its cache cannot be flushed), nor before the first
 * snapshot. */
int pp_registry_trace_safe(void);

/* Set by a capture on its own thread: our dl_iterate_phdr (dlclose.c) then
 * answers "no images" instead of taking the loader lock. */
extern __thread int pp_unwind_guard __attribute__((tls_model("initial-exec")));
/* Agent context: does libunwind's dl_iterate_phdr reach ours? */
int pp_unwind_guard_works(void);

/* In a forked child: the stacks parent threads were unwinding on at fork
 * time are free (those threads do not exist here). */
void pp_unwind_stacks_forget_in_child(void);

/* Agent context: registers the registry's fork handlers (once); the agent
 * calls it before registering its own, so that fork() takes the locks in
 * the agent's order (lifecycle, then registry). */
void pp_registry_register_atfork(void);

#endif

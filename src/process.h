/*
 * Facts about the process every layer may ask: whose agent state this
 * memory is (a copy made without fork()'s handlers is not), and what such
 * a copy drops of the agent's descriptors. The ground floor: it calls
 * nothing above util/.
 * Context: signal.
 */
#ifndef PP_PROCESS_H
#define PP_PROCESS_H

#include <sys/types.h>

struct pp_fd_id;

/* This process owns the agent state in its memory: called when an agent
 * starts, and by fork()'s child handler once the handlers made the copy
 * the child's own. */
void pp_process_own(void);

/* Is this process a copy of the agent's made without fork()'s handlers
 * (_Fork(), a raw clone)? Then nothing of the agent may be stopped,
 * joined, waited for, written to or recorded into here: its threads are
 * not in this process, its locks may be held for good, its descriptors
 * are shared with the process that runs it. The first call that finds it
 * so closes this process's copies of the descriptors registered with
 * pp_process_drop_in_copies (process.c says when). Async-signal-safe,
 * keeps errno; one getpid(). */
int pp_process_foreign(void);

/* A descriptor (the listening socket of a server) that a foreign copy
 * closes: a child that lives on would otherwise keep the port bound after
 * the agent's process ended. id stays valid until it is taken back with
 * pp_process_keep(id); at most 4 at a time (more are not dropped).
 * Agent threads, under the agent's lifecycle. */
void pp_process_drop_in_copies(const struct pp_fd_id *id);
void pp_process_keep(const struct pp_fd_id *id);

#endif

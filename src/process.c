/*
 * The process's own facts (process.h).
 *
 * Copies made without fork(): _Fork() (glibc 2.34's async-signal-safe
 * fork) and the raw clone call run none of fork()'s handlers. The child
 * has a copy of the agent's memory as it was (the agent marked running,
 * locks perhaps held by threads that are not in it), none of its threads,
 * and copies of its descriptors, which it shares with the process that
 * runs the agent. Stopping there (the exit of such a child runs our
 * destructor) waited forever for threads that do not exist; writing the
 * wake-up descriptors would wake the parent's. So every path that stops,
 * joins, serves or records first asks pp_process_foreign(), and does
 * nothing of the agent's in such a process.
 * Context: signal.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "process.h"

#include <errno.h>
#include <linux/kcmp.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/fds.h"
#include "util/seccomp.h"

/* The process whose agent state this memory is. 0: no agent ever
 * started. */
static _Atomic pid_t owner;
static _Atomic pid_t dropped_in;

#define DROP_SLOTS 4
static const struct pp_fd_id *_Atomic drops[DROP_SLOTS];

void pp_process_own(void)
{
	atomic_store(&owner, getpid());
}

void pp_process_drop_in_copies(const struct pp_fd_id *id)
{
	for (int i = 0; i < DROP_SLOTS; i++) {
		const struct pp_fd_id *none = NULL;
		if (atomic_compare_exchange_strong(&drops[i], &none, id))
			return;
	}
}

void pp_process_keep(const struct pp_fd_id *id)
{
	for (int i = 0; i < DROP_SLOTS; i++) {
		const struct pp_fd_id *was = id;
		atomic_compare_exchange_strong(&drops[i], &was, NULL);
	}
}

/* A foreign copy closes its copies of the registered descriptors, once.
 * Not when the descriptor table is shared with the agent's process (clone
 * with CLONE_FILES), nor when that cannot be told: those are its own.
 * Async-signal-safe; writes nothing the agent's process reads (a child
 * sharing its memory, vfork, would be writing the parent's). */
static void drop_copies(pid_t self, pid_t agent_pid)
{
	if (atomic_exchange(&dropped_in, self) == self)
		return;
	int saved = errno;
	/* Under a seccomp filter, kcmp is not made (a filter may kill for
	 * it, and a child like this one may not probe: util/seccomp.h):
	 * the table's sharing cannot be told, and the descriptors are
	 * left. */
	long same = -1;
	errno = EPERM;
	if (pp_seccomp_mode_raw() == 0)
		same = syscall(SYS_kcmp, self, agent_pid, KCMP_FILES, 0, 0);
	/* The descriptors as this copy of the memory knows them, with the
	 * file each was (the host may have closed the number and opened
	 * something else under it; the server keeps the identity current
	 * when it sets itself up again, server/loop.c). Nothing else runs here
	 * to change them: the copy has no agent thread. */
	if (same > 0 || (same < 0 && errno == ESRCH)) {
		for (int i = 0; i < DROP_SLOTS; i++) {
			const struct pp_fd_id *id = atomic_load(&drops[i]);
			if (id && id->fd >= 0 && pp_fd_id_ours(id))
				close(id->fd);
		}
	}
	errno = saved;
}

int pp_process_foreign(void)
{
	pid_t o = atomic_load_explicit(&owner, memory_order_relaxed);
	if (!o)
		return 0;
	pid_t self = getpid();
	if (o == self)
		return 0;
	drop_copies(self, o);
	return 1;
}

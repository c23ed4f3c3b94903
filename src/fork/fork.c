/*
 * The agent across fork(), on the host's side: fork's handlers (the state
 * a child inherits), and what a child does once fork or daemon has
 * returned to the host (wrap.c): bind its member socket, start its
 * watcher (watch.c) or note that it may have to. See fork.h.
 * Context: host.
 * (pp_fork_stats is the agent's, on plain data.)
 *
 * What a child knows of its parent it knows from memory fork copied: the
 * parent's settings (its resolved configuration, whose strings are never
 * freed here), the address it served, the tree's directory.
 */
#include "fork.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent_threads.h"
#include "internal.h"
#include "process.h"
#include "shim/heap_hot.h"

/* ---- across fork (async-signal-safe: in fork's handlers) -------------- */

static pid_t forking_pid; /* the parent's pid, noted before each fork */

struct pp_fork_inherited pp_fork_inherited;
_Atomic int pp_fork_watch_fd = -1;
int pp_fork_early_fd = -1;
static atomic_ulong watchers; /* watcher threads started here */

const struct pp_fork_agent *pp_fork_agent;

void pp_fork_set_agent(const struct pp_fork_agent *a)
{
	pp_fork_agent = a;
}

void pp_fork_prepare(void)
{
	forking_pid = getpid();
}

void pp_fork_child(const struct pp_agent_facts *a, const char *bound)
{
	/* A child of an armed child that has not taken over yet (a double
	 * fork: the daemon is the grandchild) is armed in turn. */
	if (a && a->cfg->serve && pp_fork_mode_of(a->cfg) != PP_FORK_OFF) {
		pp_fork_inherited.armed = 1;
		pp_fork_inherited.follow =
		    pp_fork_mode_of(a->cfg) == PP_FORK_FOLLOW;
		pp_fork_inherited.autostarted = a->autostarted;
		pp_fork_inherited.v = a->cfg->v;
		/* The address served, port included (it may have been 0,
		 * "any free one", in the settings). A member that does not
		 * serve it has its parent's. */
		if (bound) {
			size_t n =
			    strnlen(bound, sizeof pp_fork_inherited.listen - 1);
			memcpy(pp_fork_inherited.listen, bound, n);
			pp_fork_inherited.listen[n] = 0;
			pp_fork_inherited.server = forking_pid;
		}
	} else if (!pp_fork_inherited.armed) {
		return;
	}
	int fd = atomic_exchange(&pp_fork_watch_fd, -1);
	if (fd >= 0)
		close(fd);
	pp_fork_inherited.parent = forking_pid;
	if (!pp_fork_inherited.follow) {
		/* Adopt mode: the child is in no tree. */
		pp_fork_tree.dir[0] = 0;
	}
}

int pp_fork_child_follows(void)
{
	return pp_fork_inherited.armed && pp_fork_inherited.follow;
}

int pp_fork_parent_gone(void)
{
	return getppid() != pp_fork_inherited.parent;
}

/* The tree's directory, made again if a process that left removed it (a
 * daemon's first parent removes it as it exits, while the children it left
 * to the daemon are about to bind in it): a directory of this user's that
 * no one else may enter, or -1. */
int pp_fork_ensure_dir(const char *dir)
{
	struct stat st;
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return -1;
	if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) ||
	    st.st_uid != geteuid() || (st.st_mode & 077))
		return -1;
	return 0;
}

static int bind_member(const char *path)
{
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof un.sun_path)
		return -1;
	strcpy(un.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	unlink(path); /* named after this pid: left by a process gone */
	/* The directory may go between the two (see ensure_dir). */
	for (int tries = 0; tries < 3; tries++) {
		if (pp_fork_ensure_dir(pp_fork_tree.dir) != 0)
			break;
		if (bind(fd, (struct sockaddr *)&un, sizeof un) == 0) {
			if (chmod(path, 0600) == 0 && listen(fd, 64) == 0)
				return fd;
			break;
		}
		if (errno != ENOENT)
			break;
	}
	close(fd);
	return -1;
}

static void start_watcher(void)
{
	pthread_t t;
	if (pp_agent_thread_create(&t, "pullprof-fork", pp_fork_watch, NULL) ==
	    0) {
		pthread_detach(t);
		atomic_fetch_add(&watchers, 1);
	}
}

/* An adopt-mode child that has not started its watcher yet. */
static _Atomic int lazy;

void pp_fork_returned(int event)
{
	/* A copy made without fork() (and its forked children) follows
	 * nothing and starts no thread: the state it copied is not its. */
	if (pp_process_foreign())
		return;
	if (event == PP_FORKED_PARENT) {
		/* A child that forks children of its own (a daemon's master
		 * forking its workers) may be the one to serve. */
		if (atomic_exchange(&lazy, 0))
			start_watcher();
		return;
	}
	atomic_store(&lazy, 0);
	if (!pp_fork_inherited.armed)
		return;
	char path[160];
	if (pp_fork_inherited.follow && pp_fork_tree.dir[0] &&
	    pp_tree_socket(getpid(), path, sizeof path) == 0)
		pp_fork_early_fd = bind_member(path);
#ifndef PP_NO_HEAP_INTERPOSE
	/* Sanitizer builds have no heap slow path to poke: they start it at
	 * once. */
	if (!pp_fork_inherited.follow && event == PP_FORKED_CHILD) {
		atomic_store(&lazy, 1);
		return;
	}
#endif
	start_watcher();
}

void pp_fork_poke(void)
{
	if (!atomic_load_explicit(&lazy, memory_order_relaxed) ||
	    !pp_fork_parent_gone() || pp_process_foreign())
		return;
	if (!atomic_exchange(&lazy, 0))
		return;
	/* pthread_create allocates: this thread's allocations meanwhile
	 * pass by, unsampled, and poke no more. */
	int hidden = pp_heap_hide();
	start_watcher();
	pp_heap_unhide(hidden);
}

void pp_fork_stats(struct pp_fork_stats *out)
{
	out->takeovers = atomic_load(&pp_fork_takeovers);
	out->watchers = atomic_load(&watchers);
}

/*
 * What the parts of src/fork/ share (fork.c, watch.c, members.c): the state
 * a child inherits, the tree's place, and the few functions one calls in
 * another. Only they include it.
 * Context: agent.
 * (The state is written in fork's handlers, on the host's thread: fork.c.)
 */
#ifndef PP_FORK_INTERNAL_H
#define PP_FORK_INTERNAL_H

#include <stdatomic.h>
#include <sys/types.h>

#include "config.h"

/* What a child inherited: set in the child's fork handler. */
struct pp_fork_inherited {
	int armed;  /* watch the parent (it served, or was itself armed) */
	int follow; /* and run an agent of our own in its tree */
	int autostarted;
	pid_t parent;
	pid_t server;             /* the process that served the address */
	struct pullprof_config v; /* the parent's settings (its memory) */
	char listen[160];         /* the address it served, "host:port" */
};
extern struct pp_fork_inherited pp_fork_inherited;

/* The tree this process is in (members.c). */
struct pp_fork_tree {
	char dir[96]; /* "": in no tree */
	pid_t root;
};
extern struct pp_fork_tree pp_fork_tree;

/* The watcher's pidfd, while it has one open: a child forked meanwhile
 * closes its copy (it knows nothing of it). */
extern _Atomic int pp_fork_watch_fd;

/* Follow mode: the child's socket, bound as fork returns (before the host
 * can drop its privileges: nginx's workers change user at once, and could
 * then not enter the directory), served once its agent starts
 * (pp_tree_join takes it). */
extern int pp_fork_early_fd;

/* Times this process took the address over (watch.c). */
extern atomic_ulong pp_fork_takeovers;

/* fork.c: has the parent we watch exited? The tree's directory, made
 * again when gone: 0, or -1 when it is not a directory of ours alone. */
int pp_fork_parent_gone(void);
int pp_fork_ensure_dir(const char *dir);

/* watch.c: the watcher thread's function. */
void *pp_fork_watch(void *arg);

/* members.c: is pid alive (ours to signal or not)? */
int pp_fork_pid_alive(pid_t pid);

/* The agent's side (fork.h, pp_fork_set_agent). */
extern const struct pp_fork_agent *pp_fork_agent;

#endif

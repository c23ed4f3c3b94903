/*
 * The agent across fork(): daemons that keep it, and the trees of
 * PULLPROF_FORK=follow (every forked child an agent on a private Unix
 * socket, the configured address answering for all of them).
 * Context: agent.
 * (Except where marked: fork's handlers, pp_fork_returned, pp_fork_poke.)
 * The files: fork.c, fork's handlers and what a child does as fork
 * returns (host context); watch.c, the watcher thread and the takeover;
 * members.c, the tree's directory, member sockets and member list; wrap.c,
 * the interposed fork and daemon (in the light object); ask.c, the HTTP
 * client over the members' sockets; gather.c, the tree's answer made of
 * theirs.
 *
 * A child of a process that serves (or that was itself waiting to take
 * over) gets one agent thread, "pullprof-fork", started once fork() has
 * returned to the host, never inside fork's handlers. It watches the
 * parent; in follow mode it first starts the child's agent on its socket.
 * When the parent exits, the child takes the address over.
 */
#ifndef PP_FORK_H
#define PP_FORK_H

#include <stddef.h>
#include <sys/types.h>

#include "config.h"

/* What the fork watcher (watch.c) asks of the agent: start this process's
 * agent as a member of its parent's tree (follow mode), quietly, with the
 * parent's settings cfg; take the address over (listen: the one the
 * parent served) once the parent has exited. 0 or a negative errno. Given
 * once by the agent, before any fork it follows. */
struct pp_fork_agent {
	int (*start_member)(const struct pullprof_config *cfg, int autostarted);
	int (*take_over)(const struct pullprof_config *cfg, const char *listen,
	                 int autostarted);
};
void pp_fork_set_agent(const struct pp_fork_agent *a);

/* fork's handlers (agent.c), async-signal-safe: the parent notes its pid
 * before the fork; the child notes what it needs of the parent's running
 * agent before that agent is forgotten: its facts (NULL: none runs) and
 * the address its server is bound to (NULL: it serves none). */
void pp_fork_prepare(void);
void pp_fork_child(const struct pp_agent_facts *parent, const char *bound);
/* After pp_fork_child: will this child run an agent (follow mode)? */
int pp_fork_child_follows(void);
/* Once fork() or daemon() has returned to the host (wrap.c; host
 * context). In a
 * child of a serving parent (follow mode: every child; adopt: a daemon()
 * child) the watcher starts at once; an adopt-mode child of a plain fork
 * only notes that it may have to take over, and starts its watcher when
 * it is poked and its parent has gone, or when it forks children itself
 * (a daemon's master): a child that lives and dies under its parent (a
 * PostgreSQL backend, a worker) never pays for a thread. */
enum { PP_FORKED_CHILD, PP_FORKED_DAEMON, PP_FORKED_PARENT };
void pp_fork_returned(int event);
/* The heap sampler's slow path while nothing samples (HOST CONTEXT, inside
 * an allocation; every 64 KiB a thread allocates): an adopt-mode child
 * whose parent has gone starts its watcher. One load when nothing is
 * pending. */
void pp_fork_poke(void);

/* The tree of follow mode. Join: make the directory (serves: this process
 * serves the address; a directory is made when none is inherited) and set
 * *member up, from cfg, as the settings of this process's member socket
 * in it, which the caller serves (pp_config_free it if that fails). 0 or a
 * negative errno with a sentence in err. Leave, once that server has
 * stopped: remove the socket (and the directory, when empty). */
int pp_tree_join(const struct pp_config *cfg, int serves,
                 struct pp_config *member, char *err, size_t errlen);
void pp_tree_leave(void);
/* A member that took the address over is the tree's root from now on. */
void pp_tree_own(void);

/* The tree's directory ("" when this process is in none) and its root
 * (the pid that serves the address). */
const char *pp_tree_dir(void);
pid_t pp_tree_root(void);

/* The live members' pids, sorted, at most max (their count is returned,
 * which may exceed max). Sockets of processes gone are removed. */
size_t pp_tree_members(pid_t *out, size_t max);
/* The socket path of member pid into buf; 0 or -ENAMETOOLONG. */
int pp_tree_socket(pid_t pid, char *buf, size_t len);

/* Counters for /status. */
struct pp_fork_stats {
	unsigned long takeovers; /* this process took the address over */
	unsigned long watchers;  /* watcher threads started here */
};
void pp_fork_stats(struct pp_fork_stats *out);

#endif

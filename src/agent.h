/* The agent's lifecycle state.
 * Context: agent.
 */
#ifndef PP_AGENT_H
#define PP_AGENT_H

#include <pthread.h>
#include <sys/types.h>
#include <time.h>

#include "config.h"

struct pp_server;

struct pp_agent {
	struct pp_config cfg;
	/* The configured address's server. NULL with listen "none", and in
	 * a member of a follow-mode tree that does not serve it (fork.h). */
	struct pp_server *srv;
	/* Follow mode: this process's socket in the tree, and its settings
	 * (cfg's, listening there); NULL otherwise. */
	struct pp_server *member;
	struct pp_config member_cfg;
	struct pp_agent_facts facts; /* facts.cfg: &cfg */
};

/* The running agent. Valid on the agent's threads (stop joins them before it
 * frees anything) and under the lifecycle lock; NULL when stopped. */
const struct pp_agent *pp_agent_get(void);

/* Run fn on the running agent with the lifecycle lock held: the agent
 * neither stops nor starts meanwhile, so what fn opens (a CPU window, a
 * heap job) is either cancelled by a later stop or never opened. fn must
 * be quick: start and stop wait for it. Returns what fn returns, or -ESRCH
 * when the agent is not running. */
int pp_agent_locked(int (*fn)(const struct pp_agent *a, void *arg), void *arg);

/* Start from the environment at load time (src/shim/shim.c decides when):
 * 0 and the address served in *url ("none": no server), or an error, said
 * on stderr. before: the URL this process served before a wrapper exec'd
 * this program, or NULL (see agent.c). */
int pp_agent_autostart(const char *before, char *url, size_t n);

#endif

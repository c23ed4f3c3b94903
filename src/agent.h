/* The agent's lifecycle state. Agent context. */
#ifndef PP_AGENT_H
#define PP_AGENT_H

#include <time.h>

#include "config.h"

struct pp_server;

struct pp_agent {
	struct pp_config cfg;
	struct pp_server *srv; /* NULL with listen "none" */
	double start_time;     /* seconds since the epoch */
	struct timespec start_mono;
	int autostarted;
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

/* Seconds elapsed on the monotonic clock since *since. */
double pp_seconds_since(const struct timespec *since);

#endif

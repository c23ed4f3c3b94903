/* The agent's own threads and the registry of their tids (agent_threads.c).
 * Context: agent.
 */
#ifndef PP_AGENT_THREADS_H
#define PP_AGENT_THREADS_H

#include <pthread.h>
#include <sys/types.h>

/* Each agent thread's stack: the deepest measured (a /profile's
 * symbolization through libdw, /heap, /goroutine, /wall, /record, gzip,
 * json-c) used 140 KiB of it; RLIMIT_STACK's default was 8 MiB a thread. */
#define PP_AGENT_STACK ((size_t)512 << 10)

/* The agent's own threads. Create one: every signal blocked in it (they are
 * the host's), named (pthread_setname_np). 0 or a negative errno. */
int pp_agent_thread_create(pthread_t *t, const char *name, void *(*fn)(void *),
                           void *arg);
/* The first call of every agent thread: its allocations are never heap
 * samples, and pp_on_agent_thread() is true on it. With PP_AGENT_UNSAMPLED
 * its CPU time is not sampled either (the threads that make and render
 * profiles: their work would show in the profiles beside them); every agent
 * thread calls pp_agent_thread_leave() when it ends. */
#define PP_AGENT_UNSAMPLED 1
void pp_agent_thread_enter(int flags);
void pp_agent_thread_leave(void);
/* Is tid one of the agent's threads (between its enter and leave)? */
int pp_agent_thread_is(pid_t tid);
/* Is the calling thread one of the agent's? */
int pp_on_agent_thread(void);
/* Is it inside pp_agent_thread_create (the thread being made is the
 * agent's, whichever thread makes it)? */
int pp_creating_agent_thread(void);

/* Is tid an agent thread the CPU profiler leaves out? Any thread. */
int pp_agent_thread_unsampled(pid_t tid);

/* How many agent threads are between their enter and leave now (each
 * holds a PP_AGENT_STACK stack). */
int pp_agent_threads_running(void);

/* fork()'s child: none of the parent's threads are in it. */
void pp_agent_threads_forget_in_child(void);

#endif

/*
 * fork() and daemon(), interposed: called by the host, on any of its
 * threads. In the light object (SHIM_SOURCES).
 * Context: host.
 *
 * Each forwards to the next definition, then, in the child, once fork and
 * all of its handlers are done, lets the agent (when one was loaded: a
 * process that never started one has nothing to follow) start its
 * watcher (fork.c): a thread is
 * started there as the host itself could start one, never from inside
 * fork's handlers (where a later-registered allocator's locks may still be
 * held). glibc's daemon() forks without going through the fork symbol, so
 * it is interposed too: it returns in the child.
 *
 * ThreadSanitizer wraps fork() itself and runs the next definition (this
 * one) with its own state locked: a thread started here would be unknown
 * to it. TSan builds leave both wrappers out (the children of such a build
 * are neither followed nor take an address over).
 */
#include <dlfcn.h>
#include <unistd.h>

#include "fork/fork.h"
#include "pullprof.h"
#include "shim/shim.h"

#if !defined(__SANITIZE_THREAD__)

typedef pid_t (*fork_fn)(void);
typedef int (*daemon_fn)(int, int);

PULLPROF_API pid_t fork(void)
{
	static fork_fn next;
	fork_fn f = __atomic_load_n(&next, __ATOMIC_ACQUIRE);
	if (!f) {
		f = (fork_fn)dlsym(RTLD_NEXT, "fork");
		if (!f)
			return -1;
		__atomic_store_n(&next, f, __ATOMIC_RELEASE);
	}
	pid_t pid = f();
	const struct pp_agent_ops *ops;
	if (pid >= 0 && (ops = PP_AGENT_OPS()))
		ops->fork_returned(pid == 0 ? PP_FORKED_CHILD
		                            : PP_FORKED_PARENT);
	return pid;
}

PULLPROF_API int daemon(int nochdir, int noclose)
{
	static daemon_fn next;
	daemon_fn f = __atomic_load_n(&next, __ATOMIC_ACQUIRE);
	if (!f) {
		f = (daemon_fn)dlsym(RTLD_NEXT, "daemon");
		if (!f)
			return -1;
		__atomic_store_n(&next, f, __ATOMIC_RELEASE);
	}
	int rc = f(nochdir, noclose);
	const struct pp_agent_ops *ops;
	if (rc == 0 && (ops = PP_AGENT_OPS()))
		ops->fork_returned(PP_FORKED_DAEMON);
	return rc;
}

#endif

/*
 * The agent's own threads: made with every signal blocked, named, never
 * heap-sampled, some never CPU-sampled; and the registry that tells any
 * thread whether a tid is one of them (the thread dump marks them, the CPU
 * sampler leaves the unsampled ones out). A utility of every agent thread
 * (the jobs thread, the server, lookups, wall, the collector, fork's
 * watcher), apart from the lifecycle that starts them.
 * Context: agent.
 */
#include "agent_threads.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "heap/detect.h"
#include "shim/agentmem.h"
#include "shim/heap_hot.h"
#include "shim/shim.h"

#define MAX_UNSAMPLED 4

static __thread int on_agent_thread __attribute__((tls_model("initial-exec")));
static __thread int creating_agent_thread
    __attribute__((tls_model("initial-exec")));
static _Atomic pid_t unsampled[MAX_UNSAMPLED];
/* Every agent thread's tid, for the thread dump to mark them. */
#define MAX_AGENT_TIDS 32
static _Atomic pid_t agent_tids[MAX_AGENT_TIDS];

static _Atomic int stacks_now;

int pp_agent_thread_create(pthread_t *t, const char *name, void *(*fn)(void *),
                           void *arg)
{
	sigset_t all, old;
	pthread_attr_t attr;
	int with_attr = pthread_attr_init(&attr) == 0;
	/* A stack of PP_AGENT_STACK (glibc takes its guard page out of it)
	 * instead of RLIMIT_STACK's 8 MiB; a sanitizer's runtime wants more
	 * (its frames are larger, ASan's redzones): the default there. */
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
	if (with_attr)
		pthread_attr_setstacksize(&attr, PP_AGENT_STACK);
#endif
	/* What the thread allocates comes from one heap of the agent's
	 * (shim/agentmem.c), not from an arena glibc would reserve for it. */
	if (pp_shim.agentmem_enable)
		pp_shim.agentmem_enable();
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	/* pthread_create as the program sees it: a sanitizer's interceptor
	 * (which must know every thread) comes before ours, which lets an
	 * agent thread through untouched. */
	creating_agent_thread = 1;
	int rc = -pthread_create(t, with_attr ? &attr : NULL, fn, arg);
	creating_agent_thread = 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (with_attr)
		pthread_attr_destroy(&attr);
	if (!rc)
		pthread_setname_np(*t, name);
	return rc;
}

static void tid_add(_Atomic pid_t *slots, size_t n, pid_t tid)
{
	for (size_t i = 0; i < n; i++) {
		pid_t free_slot = 0;
		if (atomic_compare_exchange_strong(&slots[i], &free_slot, tid))
			return;
	}
}

void pp_agent_thread_enter(int flags)
{
	on_agent_thread = 1;
	atomic_fetch_add(&stacks_now, 1);
	pp_heap_exclude_thread();
	pp_heap_allocator_exclude_thread();
	pid_t self = (pid_t)syscall(SYS_gettid);
	tid_add(agent_tids, MAX_AGENT_TIDS, self);
	if (!(flags & PP_AGENT_UNSAMPLED))
		return;
	for (size_t i = 0; i < MAX_UNSAMPLED; i++) {
		pid_t free_slot = 0;
		if (atomic_compare_exchange_strong(&unsampled[i], &free_slot,
		                                   self))
			return;
	}
}

void pp_agent_thread_leave(void)
{
	pid_t self = (pid_t)syscall(SYS_gettid);
	atomic_fetch_sub(&stacks_now, 1);
	for (size_t i = 0; i < MAX_UNSAMPLED; i++) {
		pid_t mine = self;
		atomic_compare_exchange_strong(&unsampled[i], &mine, 0);
	}
	for (size_t i = 0; i < MAX_AGENT_TIDS; i++) {
		pid_t mine = self;
		atomic_compare_exchange_strong(&agent_tids[i], &mine, 0);
	}
}

int pp_agent_thread_is(pid_t tid)
{
	for (size_t i = 0; i < MAX_AGENT_TIDS; i++)
		if (atomic_load(&agent_tids[i]) == tid)
			return 1;
	return 0;
}

int pp_on_agent_thread(void)
{
	return on_agent_thread;
}

int pp_creating_agent_thread(void)
{
	return creating_agent_thread;
}

int pp_agent_thread_unsampled(pid_t tid)
{
	for (size_t i = 0; i < MAX_UNSAMPLED; i++)
		if (atomic_load(&unsampled[i]) == tid)
			return 1;
	return 0;
}

int pp_agent_threads_running(void)
{
	return atomic_load(&stacks_now);
}

void pp_agent_threads_forget_in_child(void)
{
	atomic_store(&stacks_now, 0);
	/* The parent's threads are not in the child. */
	for (size_t i = 0; i < MAX_AGENT_TIDS; i++)
		atomic_store(&agent_tids[i], 0);
	for (size_t i = 0; i < MAX_UNSAMPLED; i++)
		atomic_store(&unsampled[i], 0);
}

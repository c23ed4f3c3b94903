/*
 * pthread_create, interposed by the light object. Every thread
 * the program starts comes through here. Until the agent is loaded the call
 * goes straight to the C library's; then the agent's pp_thread_create
 * (cpu/thread_start.c) does the work: a prologue for threads started while
 * a CPU window samples, and the threadcreate profile.
 * Context: host.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>

#include "pullprof.h"
#include "shim/shim.h"

static pp_create_fn resolve(void)
{
	pp_create_fn f =
	    __atomic_load_n(&pp_shim.real_create, __ATOMIC_ACQUIRE);
	if (!f) {
		f = (pp_create_fn)dlsym(RTLD_NEXT, "pthread_create");
		__atomic_store_n(&pp_shim.real_create, f, __ATOMIC_RELEASE);
	}
	return f;
}

/* At load: the agent's own threads are made with it (pp_real_pthread_create)
 * and it never calls dlsym(RTLD_NEXT) itself, which from a dlopen'ed object
 * would look in the wrong place. */
__attribute__((constructor(101))) static void resolve_at_load(void)
{
	resolve();
}

PULLPROF_API int pthread_create(pthread_t *t, const pthread_attr_t *attr,
                                void *(*fn)(void *), void *arg)
{
	const struct pp_agent_ops *ops = PP_AGENT_OPS();
	if (ops)
		return ops->thread_create(
		    t, attr, fn, arg, (uintptr_t)__builtin_return_address(0));
	pp_create_fn f = resolve();
	return f ? f(t, attr, fn, arg) : EAGAIN;
}

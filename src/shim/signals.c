/*
 * The C library's calls that set a signal's disposition, interposed by
 * the light object: sigaction (and __sigaction), signal with its aliases
 * bsd_signal and ssignal, sysv_signal and __sysv_signal, sigset. glibc's
 * signal() calls its sigaction internally, never through the symbol, so
 * each is interposed on its own. A host that sets the disposition of
 * SIGURG or SIGPROF while pullprof samples with it (a handler installed in
 * main() after the agent started, a Go c-shared library loaded late: cgo
 * sets its handlers through the C library's sigaction) would receive
 * pullprof's signals until the collector's next check: here the agent
 * moves off the signal first (cpu/takeover.c), then the call goes on.
 * Every other call goes straight to the next definition. A raw
 * rt_sigaction system call passes none of this (takeover.c says what
 * then).
 *
 * sigaction is async-signal-safe, and a host may call it from a handler:
 * the next definitions are found at load (dlsym is not), and the agent's
 * side only waits with nanosleep.
 * Context: host.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>

#include "pullprof.h"
#include "shim/cpu_hot.h"
#include "shim/shim.h"

/* Not instrumented by ThreadSanitizer: its runtime installs its own
 * handlers while it initialises, before any thread state exists, through
 * its sigaction interceptor, whose "real" one (the next in the lookup
 * order) is this definition; an instrumented entry crashed every program
 * at start (SEGV in __tsan_func_entry, as dl_iterate_phdr once did:
 * shim/dlclose.c). Nothing here needs TSan's eyes: a TLS flag and
 * pointers published with release/acquire; the agent's side it calls is
 * instrumented, and runs only once the agent does. */
#if defined(__SANITIZE_THREAD__)
#define PP_NO_TSAN __attribute__((no_sanitize_thread))
#else
#define PP_NO_TSAN
#endif

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef sighandler_t (*signal_fn)(int, sighandler_t);

enum {
	F_SIGACTION,
	F___SIGACTION,
	F_SIGNAL,
	F_BSD_SIGNAL,
	F_SSIGNAL,
	F_SYSV_SIGNAL,
	F___SYSV_SIGNAL,
	F_SIGSET,
	F_COUNT
};

static const char *const names[F_COUNT] = {
    "sigaction", "__sigaction", "signal",        "bsd_signal",
    "ssignal",   "sysv_signal", "__sysv_signal", "sigset"};
static void *next[F_COUNT];

PP_NO_TSAN static void *resolve(int f)
{
	void *p = __atomic_load_n(&next[f], __ATOMIC_ACQUIRE);
	if (!p) {
		p = dlsym(RTLD_NEXT, names[f]);
		__atomic_store_n(&next[f], p, __ATOMIC_RELEASE);
	}
	return p;
}

PP_NO_TSAN __attribute__((constructor(101))) static void resolve_at_load(void)
{
	for (int f = 0; f < F_COUNT; f++)
		resolve(f);
}

/* The host is about to set sig's disposition: handler (SIG_DFL, SIG_IGN
 * or its own), siginfo when it is an sa_sigaction. */
PP_NO_TSAN static void taking(int sig, sighandler_t handler, int siginfo)
{
	if (sig != SIGURG && sig != SIGPROF)
		return;
	const struct pp_agent_ops *ops = PP_AGENT_OPS();
	if (!ops || pp_cpu_tls.own_sigaction)
		return;
	ops->signal_taking(sig, siginfo              ? PP_SIGNAL_HANDLER
	                        : handler == SIG_DFL ? PP_SIGNAL_DFL
	                        : handler == SIG_IGN ? PP_SIGNAL_IGN
	                                             : PP_SIGNAL_HANDLER);
}

PP_NO_TSAN static int call_sigaction(int f, int sig,
                                     const struct sigaction *act,
                                     struct sigaction *old)
{
	if (act)
		taking(sig, act->sa_handler, act->sa_flags & SA_SIGINFO);
	sigaction_fn next_fn = (sigaction_fn)resolve(f);
	if (!next_fn)
		next_fn = (sigaction_fn)resolve(F_SIGACTION);
	if (!next_fn) {
		errno = ENOSYS;
		return -1;
	}
	return next_fn(sig, act, old);
}

PP_NO_TSAN PULLPROF_API int sigaction(int sig, const struct sigaction *act,
                                      struct sigaction *old)
{
	return call_sigaction(F_SIGACTION, sig, act, old);
}

PULLPROF_API int __sigaction(int sig, const struct sigaction *act,
                             struct sigaction *old);
PP_NO_TSAN PULLPROF_API int __sigaction(int sig, const struct sigaction *act,
                                        struct sigaction *old)
{
	return call_sigaction(F___SIGACTION, sig, act, old);
}

PP_NO_TSAN static sighandler_t call_signal(int f, int sig, sighandler_t handler)
{
	taking(sig, handler, 0);
	signal_fn next_fn = (signal_fn)resolve(f);
	if (!next_fn) {
		errno = ENOSYS;
		return SIG_ERR;
	}
	return next_fn(sig, handler);
}

PP_NO_TSAN PULLPROF_API sighandler_t signal(int sig, sighandler_t handler)
{
	return call_signal(F_SIGNAL, sig, handler);
}

PULLPROF_API sighandler_t bsd_signal(int sig, sighandler_t handler);
PP_NO_TSAN PULLPROF_API sighandler_t bsd_signal(int sig, sighandler_t handler)
{
	return call_signal(F_BSD_SIGNAL, sig, handler);
}

PP_NO_TSAN PULLPROF_API sighandler_t ssignal(int sig, sighandler_t handler)
{
	return call_signal(F_SSIGNAL, sig, handler);
}

PP_NO_TSAN PULLPROF_API sighandler_t sysv_signal(int sig, sighandler_t handler)
{
	return call_signal(F_SYSV_SIGNAL, sig, handler);
}

PULLPROF_API sighandler_t __sysv_signal(int sig, sighandler_t handler);
PP_NO_TSAN PULLPROF_API sighandler_t __sysv_signal(int sig,
                                                   sighandler_t handler)
{
	return call_signal(F___SYSV_SIGNAL, sig, handler);
}

/* SIG_HOLD adds sig to the thread's mask and leaves its disposition. */
PP_NO_TSAN PULLPROF_API sighandler_t sigset(int sig, sighandler_t disp)
{
	if (disp == SIG_HOLD) {
		signal_fn next_fn = (signal_fn)resolve(F_SIGSET);
		if (!next_fn) {
			errno = ENOSYS;
			return SIG_ERR;
		}
		return next_fn(sig, disp);
	}
	return call_signal(F_SIGSET, sig, disp);
}

/*
 * The signal sampling uses and its disposition (disposition.h): which
 * signal (SIGURG, else SIGPROF: why below), whether the host's handler or
 * ITIMER_PROF stands in the way, the handler installed, checked and given
 * back exactly as the host had it. Apart from timers.c, which keeps the
 * thread table and the timers, because this is the one place that reads
 * and writes the host's dispositions: what it may and may not take is
 * decided here alone. No state of its own: the dispositions to give back
 * are the callers'.
 * Context: agent.
 */
#include "cpu/disposition.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#include "cpu/sampler.h"
#include "cpu/timers.h"
#include "shim/cpu_hot.h"

/* ---- the signal ----------------------------------------------------------
 *
 * Why SIGURG, and not SIGPROF or a realtime signal: the per-thread timers
 * (SIGEV_THREAD_ID) may raise any signal, and what matters is what happens
 * to one that arrives when pullprof's handler is not installed. A host may
 * reset every disposition to SIG_DFL at any moment (daemons do, at start),
 * and pullprof only notices at its next check: an expiry between the reset
 * and the check is delivered with the default action. For SIGPROF and for
 * every realtime signal that action is to terminate the process; for
 * SIGURG it is to ignore the signal. No check before each arm can close
 * that gap (the timers are periodic, and a one-shot re-armed from the
 * handler still leaves a period between the arm and the expiry); only a
 * signal whose default action is harmless does. SIGURG is also the signal
 * the Go runtime chose for the same reason (its preemption signal):
 * out-of-band TCP data is almost never used, and a program that uses it
 * must already expect a SIGURG that says nothing. And SIGPROF stays the
 * host's: its own profiler (a handler and setitimer(ITIMER_PROF),
 * gperftools) runs beside pullprof's windows untouched, neither receiving
 * the other's signals.
 *
 * The same holds for a host that execs during a window: a signal still
 * pending on the thread that execs goes to the new program, which ignores
 * a SIGURG and is killed by a SIGPROF.
 *
 * When the host handles SIGURG itself (a Go runtime, a program using
 * out-of-band data) pullprof falls back to SIGPROF, when the host neither
 * handles SIGPROF nor has armed ITIMER_PROF; otherwise the window is
 * refused (409). The process-wide timer of setitimer mode (no per-thread
 * timers here) can only raise SIGPROF, under the same conditions. With
 * SIGPROF the gap above is back: a host that resets its dispositions may
 * be killed by an expiry in the 10 ms before the collector's check (what
 * the collector does then is the same).
 *
 * The signal is chosen per thread. A thread that blocks SIGURG gets no
 * SIGURG timer (what it does not receive, the host's signalfd or sigwait
 * would read), and some hosts block exactly SIGURG: PostgreSQL 14+ on
 * Linux blocks it in every backend and reads it from a signalfd (its
 * latches: WAIT_USE_SIGNALFD), and other latch-style programs do the
 * same. With SIGURG alone every backend's CPU went to the "blocks the
 * signal" frame. So a thread that blocks SIGURG but not SIGPROF gets a
 * timer raising SIGPROF (signal_for, timers.c), under the conditions of
 * the fallback above (the host neither handles SIGPROF nor has armed
 * ITIMER_PROF): the handler is installed for SIGPROF the first time a
 * thread needs it, both dispositions are re-checked every 10 ms
 * (pp_timers_check: a host that takes SIGPROF, or arms ITIMER_PROF, stops
 * the window with a note, as for SIGURG), and both are given back exactly
 * when sampling stops. A thread's SigBlk is looked at again when its
 * timer gives CPU without samples (it blocked its signal since: it moves
 * to the other one if that is free, else it is charged to the frame) and
 * once a second for a thread on SIGPROF (SIGURG unblocked: back to it)
 * or one not sampled. A thread that starts with SIGURG blocked uses
 * SIGPROF at once if the collector took it already (pp_sampler.alt_signo),
 * else it waits for the scan. Only threads that block both, or block
 * SIGURG while SIGPROF is the host's, are not sampled.
 *
 * A host that sets either disposition through the C library (sigaction,
 * signal and their kin, interposed: src/shim/signals.c) is seen before its
 * call takes effect, and sampling moves off first (takeover.c): no gap at
 * all then. The gaps above are those of a raw rt_sigaction system call.
 *
 * The residual risk is the one of SIGPROF above, limited to the threads
 * that block SIGURG: a host that resets SIGPROF to SIG_DFL while a SIGPROF
 * timer is armed on one of its threads is killed by an expiry before the
 * collector's next check (10 ms). Such a thread blocks SIGURG and reads
 * it, so it is a host that manages its signals (PostgreSQL resets its
 * dispositions at a backend's start, before it blocks SIGURG: no timer of
 * ours is on that thread then).
 */
/* pullprof's own sigaction calls, which the interposed sigaction
 * (src/shim/signals.c) must not take for the host's: marked per thread. */
int pp_timers_sigaction(int sig, const struct sigaction *act,
                        struct sigaction *old)
{
	int was = pp_cpu_tls.own_sigaction;
	pp_cpu_tls.own_sigaction = 1;
	int rc = sigaction(sig, act, old);
	pp_cpu_tls.own_sigaction = was;
	return rc;
}

int pp_timers_is_ours(const struct sigaction *a)
{
	return (a->sa_flags & SA_SIGINFO) &&
	       a->sa_sigaction == pp_sampler_handler;
}

/* Is a a handler of the host's (not a default, not SIG_IGN, not ours)? */
static int is_hosts(const struct sigaction *a)
{
	return !pp_timers_is_ours(a) &&
	       ((a->sa_flags & SA_SIGINFO) ||
	        (a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN));
}

/* The host's handler, not a default or SIG_IGN (nor ours). */
static int host_handles(int sig)
{
	struct sigaction cur;
	return pp_timers_sigaction(sig, NULL, &cur) == 0 && is_hosts(&cur);
}

/* Is ITIMER_PROF armed (by the host, when not in setitimer mode)? */
static int prof_timer_armed(void)
{
	struct itimerval it;
	return getitimer(ITIMER_PROF, &it) == 0 &&
	       (it.it_value.tv_sec || it.it_value.tv_usec);
}

/* Can SIGPROF be taken? 0, or -EEXIST with err saying why not. */
int pp_timers_prof_free(const char *first, char *err, size_t errlen)
{
	const char *why = host_handles(SIGPROF)
	                      ? "its own SIGPROF handler (another profiler?)"
	                  : prof_timer_armed()
	                      ? "its ITIMER_PROF timer armed (setitimer: "
	                        "another profiler?)"
	                      : NULL;
	if (!why)
		return 0;
	if (err)
		snprintf(err, errlen,
		         "this process has %s and %s: pullprof samples with "
		         "SIGURG or else SIGPROF, and replaces neither the "
		         "host's handler nor its timer",
		         first, why);
	return -EEXIST;
}

int pp_timers_choose_signal(char *err, size_t errlen)
{
	if (!host_handles(SIGURG))
		return SIGURG;
	int rc = pp_timers_prof_free("its own SIGURG handler", err, errlen);
	return rc ? rc : SIGPROF;
}

int pp_timers_install(int sig, struct sigaction *old)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = pp_sampler_handler;
	/* SA_RESTART: the host's interrupted system calls resume by
	 * themselves where the kernel allows. SA_ONSTACK: a thread that has
	 * an alternate signal stack takes the signal there. The Go runtime
	 * gives each of its threads one and runs goroutines on stacks of a
	 * few KiB with no room below them: the kernel's signal frame (3 KiB
	 * and more with the AVX state) and the handler's pushed there
	 * overwrote the next goroutine's stack, and a Go c-shared host died
	 * at its next garbage collection ("unexpected return pc", "unknown
	 * caller pc") within seconds of a /profile. Go requires SA_ONSTACK
	 * of every handler in its process (os/signal). A thread without an
	 * alternate stack is unchanged. */
	sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
	/* Every signal blocked while the handler runs (the C library's
	 * sigfillset leaves out its own two, cancellation and setxid: set
	 * here too, as the kernel takes them), but those a fault raises: a
	 * host's handler that interrupted ours and siglongjmp'd out of it
	 * (timeouts, interpreters, coroutine libraries do) left it unfinished,
	 * its ring slot and its count taken for ever (shim/cpu_hot.h). And the
	 * handler may move to a stack of the agent's to unwind
	 * (unwind/capture.c): a signal arriving there finds the thread off
	 * its alternate stack, so the kernel put the next handler's frame at
	 * that stack's top, over the frames of ours still on it (Go's SIGURG,
	 * its preemption signal: a Go host died at its first preemption
	 * inside a sample). The host's signals wait for the handler, about a
	 * microsecond. A fault raised in the handler with its signal blocked
	 * would kill the process instead of reaching the host's handler. */
	memset(&sa.sa_mask, 0xff, sizeof sa.sa_mask);
	static const int faults[] = {SIGSEGV, SIGBUS,  SIGILL,
	                             SIGFPE,  SIGTRAP, SIGSYS};
	for (size_t i = 0; i < sizeof faults / sizeof *faults; i++)
		sigdelset(&sa.sa_mask, faults[i]);
	if (pp_timers_sigaction(sig, &sa, old) != 0)
		return -errno;
	/* The host installed a handler between the check and this call (its
	 * sigaction ran before ours: src/shim/signals.c had nothing of ours
	 * to move off): it goes back at once, and sig is not taken. */
	if (is_hosts(old)) {
		pp_timers_sigaction(sig, old, NULL);
		return -EEXIST;
	}
	return 0;
}

/* The timers are deleted: SIG_IGN first, which discards every instance
 * still pending on any thread (one blocked in a thread stays pending for
 * ever, and the host's sigwait or signalfd would read it, or a restored
 * SIG_DFL of SIGPROF terminate the host when it unblocks it); then exactly
 * the disposition (handler, flags, mask) the host had. A disposition the
 * host set since the last check is its choice: it stays. */
void pp_timers_restore(int sig, const struct sigaction *old)
{
	struct sigaction ign, cur;
	memset(&ign, 0, sizeof ign);
	ign.sa_handler = SIG_IGN;
	sigemptyset(&ign.sa_mask);
	if (pp_timers_sigaction(sig, &ign, &cur) != 0)
		return;
	pp_timers_sigaction(sig, pp_timers_is_ours(&cur) ? old : &cur, NULL);
}

/* The host took sig: what it put there, for the note. */
static const char *describe(const struct sigaction *a)
{
	if (!(a->sa_flags & SA_SIGINFO) && a->sa_handler == SIG_DFL)
		return "reset it to SIG_DFL";
	if (!(a->sa_flags & SA_SIGINFO) && a->sa_handler == SIG_IGN)
		return "set it to SIG_IGN";
	return "installed a handler of its own";
}

int pp_timers_check_signals(int signo, int prof_taken, int setitimer_mode,
                            char *why, size_t len)
{
	struct sigaction cur;
	int sigs[2] = {signo, prof_taken ? SIGPROF : 0};

	for (int i = 0; i < 2; i++) {
		if (!sigs[i] || pp_timers_sigaction(sigs[i], NULL, &cur) != 0 ||
		    pp_timers_is_ours(&cur))
			continue;
		snprintf(why, len,
		         "the host %s for %s, the signal pullprof samples "
		         "with",
		         describe(&cur),
		         sigs[i] == SIGURG ? "SIGURG" : "SIGPROF");
		return 1;
	}
	/* Its own ITIMER_PROF: its SIGPROFs would come to pullprof's handler
	 * (which drops them) instead of its own profiler's. */
	if ((signo == SIGPROF || prof_taken) && !setitimer_mode &&
	    prof_timer_armed()) {
		snprintf(why, len,
		         "the host armed ITIMER_PROF (a profiler of its own?) "
		         "while pullprof sampled with SIGPROF");
		return 1;
	}
	return 0;
}

/* The host's new disposition stays. Pending signals of ours are discarded
 * only where the host would discard them anyway (SIG_DFL of SIGURG,
 * SIG_IGN): never by touching a handler the host installed. A SIG_DFL of
 * SIGPROF must lose them (it would terminate the host): SIG_IGN, then the
 * host's SIG_DFL back. */
void pp_timers_let_go(int sig)
{
	struct sigaction cur, ign;
	if (pp_timers_sigaction(sig, NULL, &cur) != 0 ||
	    (cur.sa_flags & SA_SIGINFO) ||
	    (cur.sa_handler != SIG_DFL && cur.sa_handler != SIG_IGN))
		return;
	memset(&ign, 0, sizeof ign);
	ign.sa_handler = SIG_IGN;
	sigemptyset(&ign.sa_mask);
	if (pp_timers_sigaction(sig, &ign, &cur) == 0 &&
	    !pp_timers_is_ours(&cur))
		pp_timers_sigaction(sig, &cur, NULL);
}

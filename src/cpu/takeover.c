/*
 * A host that takes a signal pullprof samples with, seen as it happens:
 * the interposed sigaction family (src/shim/signals.c) calls
 * pp_cpu_host_takes before the real call, on the host's thread, and the
 * collector moves off the signal (pp_cpu_handle_takes) before the host's
 * disposition is in place: no timer of ours left to raise it, what they
 * left pending discarded (SIG_IGN, disposition.c), the host's former
 * disposition back, the windows cut, the record paused; then the host's
 * call goes on. So a host that installs a SIGURG handler after the agent
 * started, however late, receives none of pullprof's signals, and the
 * record samples on with SIGPROF where that is free (collector.c).
 *
 * What no interposer sees: a raw rt_sigaction system call. A Go
 * c-shared or c-archive library on linux/amd64, arm64 or ppc64le installs
 * its handlers through cgo's x_cgo_sigaction, which calls the C library's
 * sigaction (seen here); a Go runtime without cgo, or other code making
 * the system call itself, is found by the collector's check instead
 * (pp_timers_check: within 10 ms while a window samples, within
 * RECORD_DRAIN_NS with the record alone), and until then gets pullprof's
 * signals (they carry pullprof's mark, PP_TIMER_MARK, in si_value).
 *
 * Any thread, in a signal handler too (sigaction is async-signal-safe):
 * atomics, sigaction queries, a condition variable no host thread waits
 * on, and nanosleep. The collector's side is pp_cpu_handle_takes
 * (collector.c).
 * Context: host.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>

#include "cpu/disposition.h"
#include "cpu/producer.h"
#include "cpu/timers.h"
#include "shim/cpu_hot.h"
#include "util/clock.h"

/* How long a host's sigaction waits for the collector at most: it moves
 * off in well under a millisecond, but a collector that cannot run (a
 * lock the calling thread holds, a stopped process) must not hold the
 * host's call for long. Then the collector's check finds the host's
 * disposition later, as for a raw system call. */
#define TAKE_WAIT_NS 1000000000ull

static unsigned bit_of(int sig)
{
	return sig == SIGURG ? 1u : 2u;
}

void pp_cpu_host_takes(int sig, int what)
{
	struct sigaction cur;
	if ((sig != SIGURG && sig != SIGPROF) || pp_cpu_tls.own_sigaction)
		return;
	if (!__atomic_load_n(&pp_cpu.collector_up, __ATOMIC_ACQUIRE))
		return;
	/* Only while pullprof's handler is sig's disposition. */
	if (pp_timers_sigaction(sig, NULL, &cur) != 0 ||
	    !pp_timers_is_ours(&cur))
		return;
	atomic_store(&pp_cpu.take_what[sig == SIGPROF], what);
	atomic_fetch_or(&pp_cpu.take_req, bit_of(sig));
	unsigned ticket = atomic_fetch_add(&pp_cpu.take_asked, 1) + 1;
	pthread_cond_broadcast(&pp_cpu.wake);
	uint64_t until = pp_clock_ns(CLOCK_MONOTONIC) + TAKE_WAIT_NS;
	while ((int)(atomic_load(&pp_cpu.take_done) - ticket) < 0 &&
	       pp_clock_ns(CLOCK_MONOTONIC) < until) {
		struct timespec ts = {0, 50000};
		nanosleep(&ts, NULL);
	}
}

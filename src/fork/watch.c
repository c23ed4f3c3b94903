/*
 * The watcher: the thread "pullprof-fork" a forked child starts (fork.c).
 * It watches the parent (a pidfd, else a poll of getppid); in follow mode
 * it first starts the child's agent on its member socket; when the parent
 * exits it takes the configured address over (the agent's take_over, fork.h),
 * after the process that served it when that is not the parent (a double fork).
 * Context: agent.
 */
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent_threads.h"
#include "fork.h"
#include "internal.h"
#include "util/fds.h"
#include "util/seccomp.h"

/* A follow-mode child waits this long before it starts its agent: a child
 * that execs (fork, then exec) is gone by then, and costs nothing. */
#define FOLLOW_SETTLE_MS 50
/* Without a pidfd (or once the host closed it), the parent is looked for
 * this often. */
#define PARENT_POLL_MS 1000

atomic_ulong pp_fork_takeovers;

/* Is fd still the pidfd we opened? The host may close every descriptor
 * after fork and reuse the number. */
static int is_pidfd(int fd)
{
	char path[32], link[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(path, link, sizeof link - 1);
	if (n <= 0)
		return 0;
	link[n] = 0;
	return strcmp(link, "anon_inode:[pidfd]") == 0;
}

/* Wait until the parent has exited, or ms have passed (-1: no bound).
 * Returns 1 when it has exited. *pfd turns -1 when the descriptor is no
 * longer ours. */
static int wait_parent(int *pfd, int ms)
{
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (pp_fork_parent_gone())
			return 1;
		int left = -1;
		if (ms >= 0) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			long spent = (now.tv_sec - t0.tv_sec) * 1000 +
			             (now.tv_nsec - t0.tv_nsec) / 1000000;
			if (spent >= ms)
				return 0;
			left = (int)(ms - spent);
		}
		if (*pfd < 0) {
			int slice = left >= 0 && left < PARENT_POLL_MS
			                ? left
			                : PARENT_POLL_MS;
			struct timespec ts = {slice / 1000,
			                      (slice % 1000) * 1000000L};
			nanosleep(&ts, NULL);
			continue;
		}
		struct pollfd p = {.fd = *pfd, .events = POLLIN};
		int n = poll(&p, 1, left);
		if (n > 0 && !pp_fork_parent_gone() &&
		    ((p.revents & POLLNVAL) || !is_pidfd(*pfd))) {
			/* Closed, or another file now: not ours to close. */
			*pfd = -1;
			pp_fds_add(-1);
		}
	}
}

void *pp_fork_watch(void *arg)
{
	(void)arg;
	pp_agent_thread_enter(PP_AGENT_UNSAMPLED);
	int pfd = -1;
	/* pidfd_open under a filter that kills for it (util/seccomp.h):
	 * not made; the parent is looked for by polling getppid. */
	if (!pp_fork_parent_gone() && pp_seccomp_allowed(PP_SC_PIDFD_OPEN)) {
		pfd = (int)syscall(SYS_pidfd_open, pp_fork_inherited.parent, 0);
		if (pfd >= 0) {
			pp_fds_add(1);
			atomic_store(&pp_fork_watch_fd, pfd);
		}
	}
	int gone = 0;
	if (pp_fork_inherited.follow) {
		gone = wait_parent(&pfd, FOLLOW_SETTLE_MS);
		if (!gone)
			pp_fork_agent->start_member(
			    &pp_fork_inherited.v,
			    pp_fork_inherited.autostarted);
	}
	if (!gone)
		wait_parent(&pfd, -1);
	/* Closed only while it is still ours: the host may have closed it
	 * and opened a file of its own under the number. */
	atomic_store(&pp_fork_watch_fd, -1);
	if (pfd >= 0 && is_pidfd(pfd))
		close(pfd);
	if (pfd >= 0)
		pp_fds_add(-1);
	/* The parent exited: this process serves the address now, unless
	 * another took it first (a sibling). While the process that served
	 * it lives on (a double fork: the grandparent is still exiting, or
	 * runs on), wait for it, then try again. */
	while (pp_fork_inherited.listen[0]) {
		int rc = pp_fork_agent->take_over(
		    &pp_fork_inherited.v, pp_fork_inherited.listen,
		    pp_fork_inherited.autostarted);
		if (rc == 0)
			atomic_fetch_add(&pp_fork_takeovers, 1);
		if (rc != -EADDRINUSE ||
		    pp_fork_inherited.server == pp_fork_inherited.parent ||
		    !pp_fork_pid_alive(pp_fork_inherited.server))
			break;
		int sfd = pp_seccomp_allowed(PP_SC_PIDFD_OPEN)
		              ? (int)syscall(SYS_pidfd_open,
		                             pp_fork_inherited.server, 0)
		              : -1;
		if (sfd < 0) {
			while (pp_fork_pid_alive(pp_fork_inherited.server))
				sleep(1);
		} else {
			pp_fds_add(1);
			atomic_store(&pp_fork_watch_fd, sfd);
			struct pollfd p = {.fd = sfd, .events = POLLIN};
			while (poll(&p, 1, 1000) == 0 &&
			       pp_fork_pid_alive(pp_fork_inherited.server))
				;
			atomic_store(&pp_fork_watch_fd, -1);
			if (is_pidfd(sfd))
				close(sfd);
			pp_fds_add(-1);
		}
		pp_fork_inherited.parent =
		    pp_fork_inherited.server; /* not again */
	}
	pp_agent_thread_leave();
	return NULL;
}

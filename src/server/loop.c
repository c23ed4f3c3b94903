/*
 * The HTTP thread (loop.h): its loop drives libmicrohttpd in external epoll
 * mode, and before every use that matters checks that each descriptor of
 * the server is still the file it opened; when the host closed one, the
 * daemon is abandoned and a new one set up on the same address. Apart from
 * server.c (setting the daemon up and stopping it) and conns.c (what each
 * connection may do): this is what runs between the two, and what answers
 * for a host that closes descriptors it did not open.
 * Context: agent.
 *
 * The descriptors are the host's to close: a daemon calls closefrom(3) at
 * start-up, and the numbers then name its own files. Before every use that
 * matters (a run of libmicrohttpd, which reads its epoll set and the
 * sockets; a wake-up write; a close) the loop checks that each is still the
 * file it opened (pp_server_lost_fd). When one is not, libmicrohttpd's
 * daemon is abandoned — never run, resumed or stopped again, since each of
 * those touches its descriptors — and a new one is set up on the same
 * address; /status counts it and stderr says it once. The loop waits at
 * most PP_FD_CHECK_MS, so a stop never waits on a wake-up that went
 * nowhere.
 */
#include "loop.h"

#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_threads.h"
#include "conns.h"
#include "error.h"
#include "request.h"
#include "server.h"
#include "util/clock.h"
#include "util/fds.h"
#include "util/seccomp.h"

/* ---- the descriptors the server owns ---------------------------------- */

/* Which descriptor of the server is no longer the file it opened (said in
 * buf); NULL when all are. libmicrohttpd's epoll set is an anonymous inode
 * like any other epoll set: that it is still an epoll set is all that can
 * be checked without reading /proc. */
const char *pp_server_lost_fd(struct pp_server *s, char *buf, size_t len)
{
	const struct {
		const struct pp_fd_id *id;
		const char *what;
	} own[] = {
	    {&s->listen_id, "the listening socket"},
	    {&s->wake_rd_id, "the wake-up pipe"},
	    {&s->wake_wr_id, "the wake-up pipe"},
	    {&s->mhd_epoll_id, "libmicrohttpd's epoll set"},
	};
	for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
		if (!pp_fd_id_ours(own[i].id)) {
			snprintf(buf, len, "%s, descriptor %d", own[i].what,
			         own[i].id->fd);
			return buf;
		}
	for (unsigned i = 0; i < s->conn_slots; i++) {
		const struct pp_conn *k = &s->conns[i];
		if (k->fd >= 0 && !pp_fd_id_ours(&k->id)) {
			snprintf(buf, len,
			         "a client's connection, descriptor %d", k->fd);
			return buf;
		}
	}
	return NULL;
}

/* Write to the wake-up pipe if it is still ours (mhd_mu held, or the HTTP
 * thread). Non-blocking: a full pipe wakes the loop already. */
void pp_server_wake_locked(struct pp_server *s)
{
	if (s->mhd && pp_fd_id_ours(&s->wake_wr_id)) {
		ssize_t w = write(s->wake_wr, "w", 1);
		(void)w;
	}
}

static void drain_wake(struct pp_server *s)
{
	char buf[64];
	if (!pp_fd_id_ours(&s->wake_rd_id))
		return;
	while (read(s->wake_rd, buf, sizeof buf) == (ssize_t)sizeof buf)
		;
}

/*
 * The host closed a descriptor of the server (and may have its number for a
 * file of its own). libmicrohttpd's daemon cannot be told to forget a
 * descriptor without closing it, and every run, resume or stop of it reads,
 * writes or closes them: it is abandoned as it is (its memory is left) and
 * never called again. What is still ours is closed (the sockets and the pipe,
 * whose inodes are their own; its epoll set, which could be the host's, only
 * with the listening socket);
 * the requests it suspended let go of their jobs; a new daemon is set up by
 * the loop.
 */
void pp_server_abandon(struct pp_server *s, const char *what)
{
	pthread_mutex_lock(&s->mhd_mu);
	s->mhd = NULL; /* leaked: see above */
	pthread_mutex_unlock(&s->mhd_mu);
	pp_routes_forget_all(s);
	long held = 4;
	for (unsigned i = 0; i < s->conn_slots; i++) {
		struct pp_conn *k = &s->conns[i];
		if (k->fd < 0)
			continue;
		pp_fd_id_close(&k->id);
		k->fd = -1;
		held++;
		atomic_fetch_sub_explicit(&s->stats.connections_active, 1,
		                          memory_order_relaxed);
	}
	/* The epoll set only along with the listening socket it was made
	 * with: a host that left that socket alone did not close everything
	 * (one connection lost), and the set is then still libmicrohttpd's. */
	if (pp_fd_id_ours(&s->listen_id))
		pp_fd_id_close(&s->mhd_epoll_id);
	pp_fd_id_close(&s->listen_id);
	pp_fd_id_close(&s->wake_rd_id);
	pp_fd_id_close(&s->wake_wr_id);
	s->mhd_epoll_id.fd = -1;
	s->listen_fd = s->mhd_epoll_fd = s->wake_rd = s->wake_wr = -1;
	pp_fds_add(-held);
	/* The answers it held are never sent nor freed now. */
	atomic_store(&s->answers_bytes, 0);
	atomic_fetch_add(&s->fds_lost, 1);
	snprintf(s->lost_what, sizeof s->lost_what, "%s", what);
}

/* After abandon: a new daemon on the same address. Its port may be held a
 * moment longer (the host's closing of the old connections still under
 * way): tried every 100 ms for two seconds, then every second. Said on
 * stderr once, as the loss is: when it serves again, or when it has not
 * for those two seconds. */
#define PP_RESTART_QUICK 20
static int restart(struct pp_server *s)
{
	char err[300];
	err[0] = 0;
	int rc = pp_server_open_daemon(s, 1, err, sizeof err);
	if (!rc) {
		atomic_fetch_add(&s->restarts, 1);
		s->restart_failures = 0;
	} else if (++s->restart_failures < PP_RESTART_QUICK) {
		return rc;
	}
	if (!s->lost_said) {
		s->lost_said = 1;
		if (!rc)
			pp_log("the host closed descriptors the agent had open "
			       "(%s): the HTTP server was set up again on %s",
			       s->lost_what, s->bound);
		else
			pp_log("the host closed descriptors the agent had open "
			       "(%s): the HTTP server cannot be set up again "
			       "(%s); trying every second",
			       s->lost_what, err);
	}
	return rc;
}

/* ---- libmicrohttpd's panics -------------------------------------------- */

/*
 * The check before MHD_run leaves a window of microseconds: a host that
 * closes its descriptors then makes libmicrohttpd's own calls fail, and
 * libmicrohttpd ends the process on some failures it deems impossible
 * (MHD_PANIC: close() answering EBADF, epoll_ctl() refusing to remove a
 * socket), through a panic function that must not return. Ours leaves the
 * run by a jump back into the loop when the panic comes from the HTTP
 * thread's MHD_run, and the daemon is abandoned as for a lost descriptor;
 * whatever libmicrohttpd held then (its own mutexes, its memory) belongs
 * to that daemon, never touched again. Nothing of ours is held across a
 * call into libmicrohttpd on that thread that can panic (lookup.c suspends
 * outside its lock). Anywhere else the panic does what libmicrohttpd's own
 * does: a line on stderr and abort().
 *
 * The panic function is the process's (MHD_set_panic_func): a host that
 * uses libmicrohttpd too and sets its own after the agent started replaces
 * ours, and then the window above ends the process as before.
 */
/* Not thread-local: the agent's own TLS comes out of glibc's small static
 * surplus (HACKING.md). A slot per HTTP thread (the server's, and a
 * forked tree's member server beside it): each arms its own around each
 * run, and a panic jumps back into the run of the thread it came from. */
#define PANIC_SLOTS 4
static struct panic_slot {
	_Atomic unsigned long thread; /* pthread_t; 0: free */
	_Atomic(sigjmp_buf *) exit;
	char reason[64];
} panic_slots[PANIC_SLOTS];

static struct panic_slot *panic_slot_of(pthread_t self)
{
	for (int i = 0; i < PANIC_SLOTS; i++)
		if (atomic_load(&panic_slots[i].thread) == (unsigned long)self)
			return &panic_slots[i];
	return NULL;
}

/* The calling HTTP thread's slot, taken at its start; NULL when all are
 * taken (its panics then abort, as libmicrohttpd's own do). */
static struct panic_slot *panic_slot_take(void)
{
	unsigned long self = (unsigned long)pthread_self();
	for (int i = 0; i < PANIC_SLOTS; i++) {
		unsigned long none = 0;
		if (atomic_compare_exchange_strong(&panic_slots[i].thread,
		                                   &none, self))
			return &panic_slots[i];
	}
	return NULL;
}

static void on_mhd_panic(void *cls, const char *file, unsigned int line,
                         const char *reason)
{
	(void)cls;
	struct panic_slot *slot = panic_slot_of(pthread_self());
	sigjmp_buf *to = slot ? atomic_load(&slot->exit) : NULL;
	if (to) {
		snprintf(slot->reason, sizeof slot->reason,
		         "libmicrohttpd stopped on one: %s",
		         reason ? reason : "");
		/* Its messages end in a newline, or a full stop and one. */
		size_t n = strcspn(slot->reason, "\n");
		while (n && slot->reason[n - 1] == '.')
			n--;
		slot->reason[n] = 0;
		atomic_store(&slot->exit, NULL);
		siglongjmp(*to, 1);
	}
	fprintf(stderr, "Fatal error in GNU libmicrohttpd %s:%u: %s",
	        file ? file : "?", line, reason ? reason : "\n");
	abort();
}

void pp_server_panics_forget_in_child(void)
{
	/* The parent's HTTP threads are not here; a new one may get the
	 * pthread_t of one of them. */
	memset(panic_slots, 0, sizeof panic_slots);
}

void pp_server_catch_panics(void)
{
	MHD_set_panic_func(on_mhd_panic, NULL);
}

/* ---- accepting ----------------------------------------------------------
 *
 * The loop accepts, not libmicrohttpd: the kernel gives a new connection
 * the lowest free number, the very one a host's code may have just closed
 * and may close again (bash closes a pipe end twice after it forks), which
 * would cut the connection mid-answer. Each is moved far above the host's
 * numbers (pp_fd_move_high) before libmicrohttpd sees it; conns.c's
 * on_accept still decides on it, called by MHD_add_connection.
 *
 * When accept() fails for want of descriptors or memory (the host used them
 * all), the socket stays ready: the loop then stops waiting on it and tries
 * again every quarter of a second until one is accepted.
 */
#define PP_ACCEPT_BATCH 16

/* Port of a socket address (IPv4 or IPv6), or -1. */
static int port_of(const struct sockaddr_storage *a)
{
	if (a->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)a)->sin_port);
	if (a->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)a)->sin6_port);
	return -1;
}

/*
 * Is the socket taken as id the connection accept() just gave? Between
 * accept() and the look at the number, a host that closed it (a stray
 * close, a second close of its own) may have a socket of its own there:
 * a connection of the host has another peer or another local port, and
 * the agent must not move it away from under the host (its number would
 * be closed). The identity is looked at again after the addresses, so
 * that the addresses read are those of the file taken.
 */
static int accepted_here(const struct pp_server *s, const struct pp_fd_id *id,
                         const struct sockaddr_storage *peer, socklen_t pl)
{
	struct sockaddr_storage got, mine, here;
	socklen_t gl = sizeof got, ml = sizeof mine, hl = sizeof here;
	/* A client that reset at once has no peer any more (ENOTCONN): the
	 * local address says enough then, and the socket must not stay. */
	if (getpeername(id->fd, (struct sockaddr *)&got, &gl) != 0
	        ? errno != ENOTCONN
	        : gl != pl || memcmp(&got, peer, pl) != 0)
		return 0;
	if (getsockname(s->listen_fd, (struct sockaddr *)&mine, &ml) != 0 ||
	    getsockname(id->fd, (struct sockaddr *)&here, &hl) != 0 ||
	    here.ss_family != mine.ss_family)
		return 0;
	/* TCP: the listening port (a wildcard listen's connections have
	 * their own local address); a Unix socket: the listening path. */
	if (mine.ss_family == AF_UNIX
	        ? hl != ml || memcmp(&here, &mine, ml) != 0
	        : port_of(&here) < 0 || port_of(&here) != port_of(&mine))
		return 0;
	return pp_fd_id_ours(id);
}

static void accept_some(struct pp_server *s)
{
	for (int i = 0; i < PP_ACCEPT_BATCH; i++) {
		struct sockaddr_storage a;
		socklen_t al = sizeof a;
		int fd = accept4(s->listen_fd, (struct sockaddr *)&a, &al,
		                 SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOBUFS || errno == ENOMEM) {
				pp_fds_note_error(errno);
				atomic_store(&s->accept_starved, 1);
			}
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return;
		}
		/* The file is taken at once: the host may close the number
		 * (and have it for a file of its own) before the move. */
		struct pp_fd_id id;
		if (pp_fd_id_take(fd, &id) != 0 || !S_ISSOCK(id.mode) ||
		    !accepted_here(s, &id, &a, al) ||
		    (fd = pp_fd_move_high_id(&id)) < 0) {
			atomic_fetch_add_explicit(&s->stats.connections_lost, 1,
			                          memory_order_relaxed);
			continue;
		}
		/* libmicrohttpd closes it when it refuses it. */
		MHD_add_connection(s->mhd, fd, (struct sockaddr *)&a, al);
	}
}

/* Accept (when asked) and MHD_run, or -1 (the reason in panic_reason) when
 * libmicrohttpd panicked in either. On its own, so that no variable of the
 * loop lives across the jump. */
static __attribute__((noinline)) int run_once(struct pp_server *s, int accept,
                                              struct panic_slot *slot)
{
	sigjmp_buf here;
	if (sigsetjmp(here, 0))
		return -1;
	if (slot)
		atomic_store(&slot->exit, &here);
	if (accept)
		accept_some(s);
	MHD_run(s->mhd);
	if (slot)
		atomic_store(&slot->exit, NULL);
	return 0;
}

void *pp_server_loop(void *arg)
{
	struct pp_server *s = arg;
	char buf[96];
	const char *lost;

	pp_agent_thread_enter(0);
	struct panic_slot *slot = panic_slot_take();
	while (!atomic_load(&s->stopping)) {
		if (!s->mhd && restart(s) != 0) {
			poll(NULL, 0,
			     s->restart_failures < PP_RESTART_QUICK
			         ? 100
			         : PP_FD_CHECK_MS);
			continue;
		}
		/* Before anything touches a descriptor (the deadlines shut
		 * connections down). */
		if ((lost = pp_server_lost_fd(s, buf, sizeof buf))) {
			pp_server_abandon(s, lost);
			continue;
		}
		/* A seccomp filter the host put on later that kills for the
		 * checked reads' process_vm_readv (util/seccomp.h): found
		 * within about a second even with no request, before the
		 * heap sampler meets it on a host thread. */
		uint64_t now = pp_clock_ns(CLOCK_MONOTONIC);
		if (now - s->seccomp_looked_ns >= PP_FD_CHECK_MS * 1000000ull) {
			s->seccomp_looked_ns = now;
			pp_seccomp_refresh_vm_readv();
		}
		MHD_UNSIGNED_LONG_LONG to = 0;
		int timeout = pp_server_enforce_deadlines(s);
		if (MHD_get_timeout(s->mhd, &to) == MHD_YES &&
		    (timeout < 0 || to < (MHD_UNSIGNED_LONG_LONG)timeout))
			timeout =
			    (int)(to > PP_FD_CHECK_MS ? PP_FD_CHECK_MS : to);
		if (timeout < 0 || timeout > PP_FD_CHECK_MS)
			timeout = PP_FD_CHECK_MS;
		int starved = atomic_load(&s->accept_starved);
		if (starved && timeout > 250)
			timeout = 250;
		/* poll holds no descriptor of ours between two turns, and
		 * closing the pipe's write end wakes it (POLLHUP). */
		struct pollfd pf[3] = {{s->wake_rd, POLLIN, 0},
		                       {s->mhd_epoll_fd, POLLIN, 0},
		                       {s->listen_fd, POLLIN, 0}};
		int n = poll(pf, starved ? 2 : 3, timeout);
		if (n > 0 && (pf[0].revents & POLLIN))
			drain_wake(s);
		if (atomic_load(&s->stopping))
			break;
		if ((lost = pp_server_lost_fd(s, buf, sizeof buf))) {
			pp_server_abandon(s, lost);
			continue;
		}
		/* What is not closed: the host may reuse a number between that
		 * look and libmicrohttpd's use of it, microseconds later (see
		 * on_mhd_panic). */
		if (run_once(s, starved || (n > 0 && pf[2].revents), slot))
			pp_server_abandon(s, slot->reason);
	}
	if (slot)
		atomic_store(&slot->thread, 0);
	pp_agent_thread_leave();
	return NULL;
}

/*
 * The embedded HTTP server. Agent context.
 *
 * libmicrohttpd runs in external epoll mode and one thread of ours drives it:
 * we own the thread (named, all signals blocked so the host's SIGPROF, SIGINT
 * and friends never land here) and we can wake it through a pipe to stop.
 * We bind the listening socket ourselves, so a taken port is reported with
 * its real errno and the socket is close-on-exec.
 *
 * The descriptors are the host's to close: a daemon calls closefrom(3) at
 * start-up, and the numbers then name its own files. Before every use that
 * matters (a run of libmicrohttpd, which reads its epoll set and the
 * sockets; a wake-up write; a close) the loop checks that each is still the
 * file it opened (lost_fd). When one is not, libmicrohttpd's daemon is
 * abandoned — never run, resumed or stopped again, since each of those
 * touches its descriptors — and a new one is set up on the same address;
 * /status counts it and stderr says it once. The loop waits at most
 * PP_FD_CHECK_MS, so a stop never waits on a wake-up that went nowhere.
 */
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent.h"
#include "args.h"
#include "error.h"
#include "fork/fork.h"
#include "lookup.h"
#include "respond.h"
#include "routes.h"
#include "util/cidr.h"
#include "util/fds.h"
#include "util/proc.h"
#include <time.h>

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct pp_server *s = cls;
	/* libmicrohttpd reports client misbehaviour (resets, bad requests)
	 * here. A host's stderr is not ours to fill: count, do not print; the
	 * last one is kept for the start error (a certificate it refused). */
	vsnprintf(s->last_log, sizeof s->last_log, fmt, ap);
	size_t n = strlen(s->last_log);
	while (n && (s->last_log[n - 1] == '\n' || s->last_log[n - 1] == '.'))
		s->last_log[--n] = 0;
	atomic_fetch_add_explicit(&s->stats.server_errors, 1,
	                          memory_order_relaxed);
	/* "Hit process or system resource limit at FIRST connection" or "at
	 * N connections": accept() failed with EMFILE or ENFILE (or ENOMEM,
	 * ENOBUFS); see loop. */
	if (strstr(s->last_log, "resource limit"))
		atomic_store(&s->accept_starved,
		             strstr(s->last_log, "FIRST") ? 2 : 1);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Close a connection under libmicrohttpd's feet: shutdown() makes its next
 * read see the end, and it closes the connection the usual way (the
 * descriptor stays its to close). */
static void close_conn(struct pp_conn *k)
{
	shutdown(k->fd, SHUT_RDWR);
	k->closing = 1;
}

/* The oldest connection still waiting for (part of) a request, of client
 * `who` when given, on a kept place or not (`reserved`), that has waited at
 * least PP_EVICT_AFTER_NS: the one to close when a newcomer needs its
 * place. NULL if none. */
#define PP_EVICT_AFTER_NS 1000000000ull
static struct pp_conn *evictable(struct pp_server *s,
                                 const struct sockaddr *who, int reserved,
                                 uint64_t now)
{
	struct pp_conn *best = NULL;
	for (unsigned i = 0; i < s->conn_slots; i++) {
		struct pp_conn *k = &s->conns[i];
		if (k->fd < 0 || k->closing || k->answering ||
		    k->reserved != reserved ||
		    now - k->since < PP_EVICT_AFTER_NS)
			continue;
		if (who &&
		    !pp_cidr_same_host((const struct sockaddr *)&k->addr, who))
			continue;
		if (!best || k->since < best->since)
			best = k;
	}
	return best;
}

static void on_connection(void *cls, struct MHD_Connection *c,
                          void **socket_ctx,
                          enum MHD_ConnectionNotificationCode code)
{
	struct pp_server *s = cls;

	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
		    c, MHD_CONNECTION_INFO_CONNECTION_FD);
		const union MHD_ConnectionInfo *ai = MHD_get_connection_info(
		    c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		atomic_fetch_add_explicit(&s->stats.connections_active, 1,
		                          memory_order_relaxed);
		pp_fds_add(1);
		atomic_fetch_add_explicit(&s->stats.connections_total, 1,
		                          memory_order_relaxed);
		*socket_ctx = NULL;
		if (!ci)
			return;
		for (unsigned i = 0; i < s->conn_slots; i++) {
			struct pp_conn *k = &s->conns[i];
			if (k->fd >= 0)
				continue;
			memset(k, 0, sizeof *k);
			k->fd = ci->connect_fd;
			pp_fd_id_take(k->fd, &k->id);
			k->since = now_ns();
			k->reserved = s->accept_reserved;
			s->accept_reserved = 0;
			/* A tree member's Unix socket gives a bare family
			 * (fork.h): only IP addresses are kept. */
			if (ai && ai->client_addr) {
				sa_family_t fam = ai->client_addr->sa_family;
				if (fam == AF_INET6 || fam == AF_INET)
					memcpy(
					    &k->addr, ai->client_addr,
					    fam == AF_INET6
					        ? sizeof(struct sockaddr_in6)
					        : sizeof(struct sockaddr_in));
				else
					k->addr.ss_family = fam;
			}
			*socket_ctx = k;
			return;
		}
		/* No slot (cannot happen: accept keeps one free). */
		shutdown(ci->connect_fd, SHUT_RDWR);
	} else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
		atomic_fetch_sub_explicit(&s->stats.connections_active, 1,
		                          memory_order_relaxed);
		pp_fds_add(-1);
		if (*socket_ctx)
			((struct pp_conn *)*socket_ctx)->fd = -1;
	}
}

static struct pp_conn *conn_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

void pp_server_answering(struct pp_server *s, struct MHD_Connection *c)
{
	struct pp_conn *k = conn_of(c);
	(void)s;
	if (k)
		k->answering = 1;
}

void pp_server_answered(struct pp_server *s, struct MHD_Connection *c)
{
	struct pp_conn *k = conn_of(c);
	(void)s;
	if (k) {
		k->answering = 0;
		k->waiting = 0;
		k->since = now_ns();
	}
}

void pp_server_waiting(struct pp_server *s, struct MHD_Connection *c,
                       int waiting, unsigned seconds)
{
	struct pp_conn *k = conn_of(c);
	(void)s;
	if (!k)
		return;
	k->waiting = waiting;
	k->until =
	    waiting && seconds ? now_ns() + (uint64_t)seconds * 1000000000u : 0;
}

/*
 * libmicrohttpd 0.9.75 splits the request line in place: the target ends
 * where it writes a NUL over the space before the version, which follows
 * at once. A raw NUL byte sent inside the target ends the C string there
 * instead, and the rest of the target was silently dropped ("/status\0junk"
 * served /status): when the version does not start right after the string
 * the URI callback saw, the target held one.
 */
int pp_server_target_has_nul(struct pp_server *s, struct MHD_Connection *c,
                             const char *version)
{
	struct pp_conn *k = conn_of(c);
	(void)s;
	if (!k || !k->target || !version || !*version)
		return 0;
	return version != k->target + k->target_len + 1;
}

unsigned pp_server_waiting_count(const struct pp_server *s)
{
	unsigned n = 0;
	for (unsigned i = 0; i < s->conn_slots; i++)
		n += s->conns[i].fd >= 0 && !s->conns[i].closing &&
		     s->conns[i].waiting;
	return n;
}

int pp_server_is_reserved(struct pp_server *s, struct MHD_Connection *c)
{
	struct pp_conn *k = conn_of(c);
	(void)s;
	return k && k->reserved;
}

/* Seconds until the first of the waiting connections (of client `who`, or
 * all) is expected to be answered: a Retry-After; at least 1. */
static unsigned first_end(const struct pp_server *s, const struct sockaddr *who,
                          uint64_t now)
{
	uint64_t first = UINT64_MAX;
	for (unsigned i = 0; i < s->conn_slots; i++) {
		const struct pp_conn *k = &s->conns[i];
		if (k->fd < 0 || k->closing || !k->waiting || !k->until)
			continue;
		if (who &&
		    !pp_cidr_same_host((const struct sockaddr *)&k->addr, who))
			continue;
		if (k->until < first)
			first = k->until;
	}
	if (first == UINT64_MAX || first <= now)
		return 1;
	return (unsigned)((first - now + 999999999u) / 1000000000u);
}

/*
 * A connection waiting for a profile window is busy, not idle: it cannot
 * be evicted, and a client could fill its connection limit (or all
 * clients the total one) with windows, after which even /healthz from
 * that address was closed unanswered. So windows (requests that wait
 * `seconds`) take at most all but one place of either limit (with a limit
 * of 1, that one); requests that wait only for their work (a heap
 * snapshot, a lookup: bounded by their own settings) are not held to that
 * share. None of them is served on the places kept past the limits
 * (on_accept), which serve only requests answered at once. The one over
 * is answered 429 with Retry-After: when the first of the windows in the
 * way should end.
 */
unsigned pp_server_may_wait(struct pp_server *s, struct MHD_Connection *c,
                            int window, char *why, size_t whylen,
                            unsigned *retry)
{
	struct pp_conn *me = conn_of(c);
	const struct pp_config *cfg = s->cfg;
	unsigned max = cfg->v.max_connections,
	         max_mine = cfg->v.max_client_connections;
	unsigned cap = max > 1 ? max - 1 : 1,
	         cap_mine = max_mine > 1 ? max_mine - 1 : 1;
	unsigned all = 0, mine = 0;
	uint64_t now = now_ns();
	char who[80] = "this client";

	if (!me)
		return 0;
	const struct sockaddr *addr = (const struct sockaddr *)&me->addr;
	if (addr->sa_family == AF_INET || addr->sa_family == AF_INET6)
		pp_format_sockaddr(addr, who, sizeof who);
	else
		addr = NULL;
	for (unsigned i = 0; i < s->conn_slots; i++) {
		const struct pp_conn *k = &s->conns[i];
		if (k == me || k->fd < 0 || k->closing || !k->waiting ||
		    !k->until)
			continue;
		all++;
		/* Connections without an IP address (a tree's member socket)
		 * are under the total limit only, as at accept. */
		mine += addr && pp_cidr_same_host(
		                    (const struct sockaddr *)&k->addr, addr);
	}
	if (me->reserved) {
		*retry = first_end(s, addr, now);
		snprintf(why, whylen,
		         "%s holds every connection it may open "
		         "(PULLPROF_MAX_CLIENT_CONNECTIONS=%u, "
		         "PULLPROF_MAX_CONNECTIONS=%u in all), %u of them "
		         "waiting for profiles; this one was let in on a place "
		         "kept for requests answered at once (healthz, status, "
		         "metrics, the index): retry when a profile is done",
		         who, max_mine, max, mine);
	} else if (!window) {
		return 0;
	} else if (mine >= cap_mine) {
		*retry = first_end(s, addr, now);
		snprintf(why, whylen,
		         "%s has %u requests waiting for profiles or lookups, "
		         "the most one client may have: one less than "
		         "PULLPROF_MAX_CLIENT_CONNECTIONS (%u), so that a "
		         "connection is left for /healthz and /status; retry "
		         "when one is done, or raise the setting",
		         who, mine, max_mine);
	} else if (all >= cap) {
		*retry = first_end(s, NULL, now);
		snprintf(why, whylen,
		         "%u requests are waiting for profiles or lookups, the "
		         "most there may be: one less than "
		         "PULLPROF_MAX_CONNECTIONS (%u), so that a connection "
		         "is left for /healthz and /status; retry when one is "
		         "done, or raise the setting",
		         all, max);
	} else {
		return 0;
	}
	atomic_fetch_add_explicit(&s->stats.windows_refused, 1,
	                          memory_order_relaxed);
	return 429;
}

/*
 * The connection limits are enforced here, at accept, in total
 * (PULLPROF_MAX_CONNECTIONS) and per client address
 * (PULLPROF_MAX_CLIENT_CONNECTIONS). At a limit, the oldest connection that
 * has been waiting over a second for its request (of that client, for the
 * per-client limit) is closed to make room: connections that send nothing,
 * or a byte at a time, cannot lock others out, and answers in progress are
 * never cut. With none to close and the limit held (in part) by requests
 * being answered, profile windows most often, the newcomer goes on one of a few
 * places kept past the limits (PP_RESERVED_CONNECTIONS, two a client): what
 * it may ask is known only once its request is read, and there only
 * requests answered at once are served (pp_server_may_wait), then the
 * connection is closed. With those full too, a kept place waiting over a
 * second for its request is closed for it, else the newcomer is closed at
 * once. libmicrohttpd's own limits are not used: at its total limit it
 * stops accepting and in external epoll mode (0.9.75) never resumes (its
 * limit is set above our slots), and its per-address limit (off: the
 * default) refuses before this callback can make room.
 */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr,
                                 socklen_t addrlen)
{
	struct pp_server *s = cls;
	unsigned total = 0, mine = 0, kept = 0, kept_mine = 0, busy = 0,
	         busy_mine = 0, max = s->cfg->v.max_connections,
	         max_mine = s->cfg->v.max_client_connections;
	uint64_t now = now_ns();
	(void)addrlen;

	atomic_store(&s->accept_starved, 0);
	s->accept_reserved = 0;
	unsigned used = 0; /* slots: closing connections hold theirs */
	for (unsigned i = 0; i < s->conn_slots; i++) {
		struct pp_conn *k = &s->conns[i];
		if (k->fd < 0)
			continue;
		used++;
		if (k->closing)
			continue;
		int same =
		    pp_cidr_same_host((const struct sockaddr *)&k->addr, addr);
		if (k->reserved) {
			kept++;
			kept_mine += same;
			continue;
		}
		total++;
		mine += same;
		busy += k->answering;
		busy_mine += same && k->answering;
	}
	struct pp_conn *victim = NULL;
	int over = mine >= max_mine || total >= max, reserved = 0;
	if (over)
		victim = evictable(s, mine >= max_mine ? addr : NULL, 0, now);
	/* Kept places are for a limit held by answers in progress: one held
	 * by connections that have sent nothing yet is theirs to wait out
	 * (they are closed for newcomers after a second). */
	if (over && !victim && !(mine >= max_mine ? busy_mine : busy)) {
		atomic_fetch_add_explicit(&s->stats.connections_refused, 1,
		                          memory_order_relaxed);
		return MHD_NO;
	}
	if (over && !victim) {
		reserved = 1;
		if (kept_mine >= PP_RESERVED_PER_CLIENT)
			victim = evictable(s, addr, 1, now);
		else if (kept >= PP_RESERVED_CONNECTIONS)
			victim = evictable(s, NULL, 1, now);
		if ((kept_mine >= PP_RESERVED_PER_CLIENT ||
		     kept >= PP_RESERVED_CONNECTIONS) &&
		    !victim) {
			atomic_fetch_add_explicit(&s->stats.connections_refused,
			                          1, memory_order_relaxed);
			return MHD_NO;
		}
	}
	if (victim) {
		close_conn(victim);
		atomic_fetch_add_explicit(&s->stats.connections_evicted, 1,
		                          memory_order_relaxed);
	}
	/* Slots full, or the agent's share of descriptors (util/fds.h; 16
	 * at `ulimit -n 64`) used: the rest are the host's. */
	if (used >= s->conn_slots || !pp_fds_room()) {
		atomic_fetch_add_explicit(&s->stats.connections_refused, 1,
		                          memory_order_relaxed);
		return MHD_NO;
	}
	if (reserved) {
		atomic_fetch_add_explicit(&s->stats.connections_reserved, 1,
		                          memory_order_relaxed);
		s->accept_reserved = 1;
	}
	return MHD_YES;
}

/* Close connections past their request deadline; returns the milliseconds
 * until the next one falls due (-1: none). */
static int enforce_deadlines(struct pp_server *s)
{
	uint64_t now = now_ns(),
	         limit = (uint64_t)s->cfg->v.request_timeout * 1000000000u,
	         next = UINT64_MAX;
	for (unsigned i = 0; i < s->conn_slots; i++) {
		struct pp_conn *k = &s->conns[i];
		if (k->fd < 0 || k->closing || k->answering)
			continue;
		if (now - k->since >= limit) {
			close_conn(k);
			atomic_fetch_add_explicit(
			    &s->stats.connections_timed_out, 1,
			    memory_order_relaxed);
		} else if (k->since + limit < next) {
			next = k->since + limit;
		}
	}
	if (next == UINT64_MAX)
		return -1;
	return (int)((next - now) / 1000000u) + 1;
}

/*
 * Query strings with more parameters than any endpoint takes are refused
 * before libmicrohttpd parses them: it keeps each parameter in the
 * connection's memory (PULLPROF_MAX_HEADER_BYTES), and when they fill it
 * (about 470 short ones) 0.9.75 neither answers nor closes. Called with the
 * request target before anything of it is parsed; the parameters are then
 * hidden from libmicrohttpd (the query is cut at its first byte) and the
 * request is answered 414 (routes.c).
 */
char pp_server_too_many_params;
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
	struct pp_server *s = cls;
	struct pp_conn *k = conn_of(c);
	(void)s;
	if (k) {
		k->target = uri;
		k->target_len = strlen(uri);
	}
	const char *q = strchr(uri, '?');
	if (!q)
		return NULL;
	unsigned n = 1;
	for (const char *p = q + 1; *p && *p != ' '; p++)
		n += *p == '&';
	if (n <= PP_MAX_QUERY_PARAMS)
		return NULL;
	/* libmicrohttpd passes its own buffer here and splits the query at
	 * the '?' after this returns: the query it then parses is empty. */
	((char *)q)[1] = 0;
	return &pp_server_too_many_params;
}

/* The decoding rule is args.c's, where the fuzz target reaches it. */
static size_t unescape(void *cls, struct MHD_Connection *c, char *str)
{
	(void)cls;
	(void)c;
	return pp_args_unescape(str);
}

/* Bind cfg's address; again (after the host closed the first socket): the
 * address served before, the port included when the configured one was 0
 * (any): clients know it, and it is never changed under them. */
static int bind_listener(struct pp_server *s, int again, char *err,
                         size_t errlen)
{
	const struct pp_config *cfg = s->cfg;
	if (cfg->have_bound_fd && !again) {
		s->listen_fd = cfg->bound_fd;
		snprintf(s->bound, sizeof s->bound, "%s", cfg->v.listen);
		return 0;
	}
	struct sockaddr_storage addr = cfg->addr;
	if (again && s->port && addr.ss_family == AF_INET &&
	    !((struct sockaddr_in *)&addr)->sin_port)
		((struct sockaddr_in *)&addr)->sin_port = htons(s->port);
	else if (again && s->port && addr.ss_family == AF_INET6 &&
	         !((struct sockaddr_in6 *)&addr)->sin6_port)
		((struct sockaddr_in6 *)&addr)->sin6_port = htons(s->port);
	int fd = socket(cfg->addr.ss_family,
	                SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int one = 1, e;

	if (fd < 0) {
		e = errno;
		snprintf(err, errlen, "cannot create a socket for %s: %s",
		         cfg->v.listen, strerror(e));
		return -e;
	}
	/* Lets a restarted host rebind while old connections sit in TIME_WAIT;
	 * on Linux it never lets two listeners share a port. */
	if (cfg->addr.ss_family != AF_UNIX)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	else /* a tree's member socket (fork.c): named after this pid, so
	        what is there was left by a process gone */
		unlink(((const struct sockaddr_un *)&cfg->addr)->sun_path);
	if (bind(fd, (const struct sockaddr *)&addr, cfg->addrlen) < 0) {
		e = errno;
		close(fd);
		if (e == EADDRINUSE)
			snprintf(
			    err, errlen,
			    "cannot listen on %s: address already in use "
			    "(set PULLPROF_LISTEN to another port, or port 0 "
			    "for any free one)",
			    cfg->v.listen);
		else if (e == EADDRNOTAVAIL)
			snprintf(
			    err, errlen,
			    "cannot listen on %s: no such address on this host",
			    cfg->v.listen);
		else
			snprintf(err, errlen, "cannot listen on %s: %s",
			         cfg->v.listen, strerror(e));
		return -e;
	}
	if (listen(fd, 64) < 0) {
		e = errno;
		close(fd);
		snprintf(err, errlen, "cannot listen on %s: %s", cfg->v.listen,
		         strerror(e));
		return -e;
	}
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	if (cfg->addr.ss_family == AF_UNIX) {
		/* Only the owner may connect (its directory says so too). */
		chmod(((const struct sockaddr_un *)&cfg->addr)->sun_path, 0600);
		if (!again)
			snprintf(s->bound, sizeof s->bound, "%s",
			         cfg->v.listen);
	} else if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
		/* Again, the same address: left as it is (other threads read
		 * it without a lock: pullprof_port, the start-up line). */
		if (!again) {
			pp_format_sockaddr((struct sockaddr *)&ss, s->bound,
			                   sizeof s->bound);
			s->port =
			    ntohs(ss.ss_family == AF_INET6
			              ? ((struct sockaddr_in6 *)&ss)->sin6_port
			              : ((struct sockaddr_in *)&ss)->sin_port);
		}
	}
	s->listen_fd = fd;
	return 0;
}

/* ---- the descriptors the server owns ---------------------------------- */

/* The longest the loop waits without looking at its descriptors (and at a
 * stop whose wake-up could not be written). */
#define PP_FD_CHECK_MS 1000

/* Which descriptor of the server is no longer the file it opened (said in
 * buf); NULL when all are. libmicrohttpd's epoll set is an anonymous inode
 * like any other epoll set: that it is still an epoll set is all that can
 * be checked without reading /proc. */
static const char *lost_fd(struct pp_server *s, char *buf, size_t len)
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
static void wake_locked(struct pp_server *s)
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
static void abandon(struct pp_server *s, const char *what)
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

static int open_daemon(struct pp_server *s, int again, char *err,
                       size_t errlen);

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
	int rc = open_daemon(s, 1, err, sizeof err);
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

/*
 * When accept() fails for want of descriptors (the host used them all),
 * libmicrohttpd drops its listening socket from its epoll set until a
 * connection closes, and puts it back at its next run, which nothing would
 * cause: the agent went deaf for good. With no connection open it keeps the
 * socket instead, ready, and each run fails again: a spinning loop. So,
 * until a connection is accepted again, the loop runs libmicrohttpd every
 * quarter of a second, and in the second case does not wait on its epoll set
 * meanwhile.
 */
static void *loop(void *arg)
{
	struct pp_server *s = arg;
	char buf[96];
	const char *lost;

	pp_agent_thread_enter(0);
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
		if ((lost = lost_fd(s, buf, sizeof buf))) {
			abandon(s, lost);
			continue;
		}
		MHD_UNSIGNED_LONG_LONG to = 0;
		int timeout = enforce_deadlines(s);
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
		struct pollfd pf[2] = {{s->wake_rd, POLLIN, 0},
		                       {s->mhd_epoll_fd, POLLIN, 0}};
		int n = poll(pf, starved == 2 ? 1 : 2, timeout);
		if (n > 0 && (pf[0].revents & POLLIN))
			drain_wake(s);
		if (atomic_load(&s->stopping))
			break;
		if ((lost = lost_fd(s, buf, sizeof buf))) {
			abandon(s, lost);
			continue;
		}
		/* What is not closed: the host may reuse a number between that
		 * look and libmicrohttpd's use of it, microseconds later. */
		MHD_run(s->mhd);
	}
	pp_agent_thread_leave();
	return NULL;
}

/*
 * A TLS file into memory, at start, in the host's thread before its main
 * perhaps: only a regular file, opened without blocking, so a FIFO cannot
 * hang the host and /dev/stdin cannot eat its input.
 */
static int read_regular(const char *path, size_t max, char **out, char *why,
                        size_t whylen)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		int e = errno;
		snprintf(why, whylen, "cannot read %s: %s", path, strerror(e));
		return -e;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		snprintf(why, whylen,
		         "%s is not a regular file (%s): name a PEM file", path,
		         S_ISFIFO(st.st_mode)   ? "a FIFO"
		         : S_ISCHR(st.st_mode)  ? "a character device"
		         : S_ISDIR(st.st_mode)  ? "a directory"
		         : S_ISSOCK(st.st_mode) ? "a socket"
		                                : "not a file");
		return -EINVAL;
	}
	if ((size_t)st.st_size > max) {
		close(fd);
		snprintf(why, whylen, "%s is over %zu bytes: not a PEM file",
		         path, max);
		return -EINVAL;
	}
	char *buf = malloc((size_t)st.st_size + 1);
	size_t n = 0;
	if (!buf) {
		close(fd);
		snprintf(why, whylen, "cannot read %s: out of memory", path);
		return -ENOMEM;
	}
	while (n < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + n, (size_t)st.st_size - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			int e = r < 0 ? errno : EIO;
			close(fd);
			free(buf);
			snprintf(why, whylen, "cannot read %s: %s", path,
			         strerror(e));
			return -e;
		}
		n += (size_t)r;
	}
	close(fd);
	buf[n] = 0;
	*out = buf;
	return 0;
}

/* GnuTLS priorities: its defaults, but TLS 1.2 and 1.3 only (1.0 and 1.1
 * are deprecated by RFC 8996, SSL 3 long gone). */
#define PP_TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

/* PULLPROF_TLS_CERT/KEY into memory (libmicrohttpd takes PEM text). */
static int read_tls(struct pp_server *s, const struct pp_config *cfg, char *err,
                    size_t errlen)
{
	if (!cfg->v.tls_cert)
		return 0;
	if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
		snprintf(err, errlen,
		         "PULLPROF_TLS_CERT is set but this libmicrohttpd was "
		         "built without TLS");
		return -EPROTONOSUPPORT;
	}
	const char *names[2] = {"PULLPROF_TLS_CERT", "PULLPROF_TLS_KEY"};
	const char *paths[2] = {cfg->v.tls_cert, cfg->v.tls_key};
	char **bufs[2] = {&s->tls_cert, &s->tls_key};
	for (int i = 0; i < 2; i++) {
		char why[300];
		int rc =
		    read_regular(paths[i], 1u << 20, bufs[i], why, sizeof why);
		if (rc) {
			snprintf(err, errlen, "%s: %s", names[i], why);
			return rc;
		}
		if (!strstr(*bufs[i], "-----BEGIN ")) {
			snprintf(
			    err, errlen,
			    "%s: %s is not a PEM file (no -----BEGIN line)",
			    names[i], paths[i]);
			return -EINVAL;
		}
	}
	return 0;
}

static void free_tls(struct pp_server *s)
{
	if (s->tls_key) {
		/* The private key does not outlive its use in freed memory. */
		explicit_bzero(s->tls_key, strlen(s->tls_key));
		free(s->tls_key);
	}
	free(s->tls_cert);
	s->tls_key = s->tls_cert = NULL;
}

/* The listening socket, libmicrohttpd's daemon and the wake-up pipe, and
 * what each is (lost_fd). On failure nothing is left open. */
static int open_daemon(struct pp_server *s, int again, char *err, size_t errlen)
{
	const struct pp_config *cfg = s->cfg;
	int rc = bind_listener(s, again, err, errlen);
	if (rc)
		return rc;
	pp_fd_id_take(s->listen_fd, &s->listen_id);

	unsigned flags =
	    MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
	if (cfg->addr.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	if (s->tls_cert)
		flags |= MHD_USE_TLS;
	/* Options past MHD_OPTION_END are not read: without TLS the list
	 * ends before the certificate. */
	/* The logger first: libmicrohttpd logs with its own (to stderr)
	 * until it reads this option, and warns when it comes later. */
	struct MHD_Daemon *d = MHD_start_daemon(
	    flags, 0, on_accept, s, pp_routes_dispatch, s,
	    MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
	    /* Above every slot of ours: on_accept always decides first. */
	    MHD_OPTION_CONNECTION_LIMIT, s->conn_slots + 8,
	    MHD_OPTION_LISTEN_SOCKET, (MHD_socket)s->listen_fd,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->v.idle_timeout,
	    MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)cfg->v.max_header_bytes,
	    MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
	    MHD_OPTION_NOTIFY_COMPLETED, pp_routes_completed, s,
	    MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
	    s->tls_cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END,
	    s->tls_cert, MHD_OPTION_HTTPS_MEM_KEY, s->tls_key,
	    MHD_OPTION_HTTPS_PRIORITIES, PP_TLS_PRIORITIES, MHD_OPTION_END);
	if (!d) {
		if (s->tls_cert)
			snprintf(err, errlen,
			         "cannot start HTTPS on %s with %s and %s: %s",
			         s->bound, cfg->v.tls_cert, cfg->v.tls_key,
			         s->last_log[0] ? s->last_log
			                        : "the certificate or key was "
			                          "refused");
		else
			snprintf(err, errlen,
			         "cannot start the HTTP server on %s%s%s",
			         s->bound, s->last_log[0] ? ": " : "",
			         s->last_log);
		close(s->listen_fd);
		s->listen_fd = s->listen_id.fd = -1;
		return s->tls_cert ? -EINVAL : -EIO;
	}
	const union MHD_DaemonInfo *di =
	    MHD_get_daemon_info(d, MHD_DAEMON_INFO_EPOLL_FD);
	int p[2] = {-1, -1};
	if (!di) {
		snprintf(err, errlen, "libmicrohttpd was built without epoll");
		rc = -ENOSYS;
	} else if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot set up the HTTP event loop: %s",
		         strerror(errno));
	}
	if (rc) {
		MHD_stop_daemon(d); /* closes the listening socket */
		s->listen_fd = s->listen_id.fd = -1;
		return rc;
	}
	s->mhd_epoll_fd = di->epoll_fd;
	pp_fd_id_take(s->mhd_epoll_fd, &s->mhd_epoll_id);
	s->wake_rd = p[0];
	s->wake_wr = p[1];
	pp_fd_id_take(p[0], &s->wake_rd_id);
	pp_fd_id_take(p[1], &s->wake_wr_id);
	/* The listening socket, libmicrohttpd's epoll set and the pipe. */
	pp_fds_add(4);
	pthread_mutex_lock(&s->mhd_mu);
	s->mhd = d;
	pthread_mutex_unlock(&s->mhd_mu);
	return 0;
}

/* Stop a daemon whose descriptors are all still ours. */
static void close_daemon(struct pp_server *s)
{
	/* Every suspended request answered before libmicrohttpd stops: it
	 * aborts the process otherwise. Should one never come back (a bug),
	 * the daemon is left as is — leaked, its sockets closed — rather than
	 * take the host down. */
	unsigned left = pp_routes_resume_all(s);
	if (!left) {
		MHD_stop_daemon(s->mhd);
	} else {
		pp_log(
		    "stop: %u requests could not be ended; the HTTP server's "
		    "memory is left behind",
		    left);
		pp_fd_id_close(&s->listen_id);
		for (unsigned i = 0; i < s->conn_slots; i++)
			if (s->conns[i].fd >= 0) {
				pp_fd_id_close(&s->conns[i].id);
				pp_fds_add(-1);
			}
	}
	pp_fd_id_close(&s->wake_rd_id);
	pp_fd_id_close(&s->wake_wr_id);
	pp_fds_add(-4);
	pthread_mutex_lock(&s->mhd_mu);
	s->mhd = NULL;
	pthread_mutex_unlock(&s->mhd_mu);
}

int pp_server_start(const struct pp_config *cfg, struct pp_server **out,
                    char *err, size_t errlen)
{
	struct pp_server *s = calloc(1, sizeof *s);
	int rc;

	if (!s)
		return -ENOMEM;
	s->cfg = cfg;
	s->listen_fd = s->wake_rd = s->wake_wr = s->mhd_epoll_fd = -1;
	s->listen_id.fd = s->wake_rd_id.fd = s->wake_wr_id.fd =
	    s->mhd_epoll_id.fd = -1;
	pthread_mutex_init(&s->mhd_mu, NULL);
	/* Twice the places, kept ones included: a connection closed for a
	 * newcomer holds its slot until libmicrohttpd lets it go. */
	s->conn_slots = 2 * (cfg->v.max_connections + PP_RESERVED_CONNECTIONS);
	s->conns = calloc(s->conn_slots, sizeof *s->conns);
	if (!s->conns) {
		free(s);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < s->conn_slots; i++)
		s->conns[i].fd = s->conns[i].id.fd = -1;
	if (gethostname(s->hostname, sizeof s->hostname - 1) != 0)
		s->hostname[0] = 0;
	pp_respond_note_root();

	rc = read_tls(s, cfg, err, errlen);
	if (rc) {
		/* The early socket is the server's to close (fork.c). */
		if (cfg->have_bound_fd)
			close(cfg->bound_fd);
		goto fail;
	}
	rc = open_daemon(s, 0, err, errlen);
	if (rc)
		goto fail;
	const struct pp_lookups_spec lookups = {
	    .thread_name = "pullprof-lookup",
	    .threads = 1,
	    .max = cfg->v.max_lookups,
	    .what = "symbol and mapping lookups",
	    .setting = "PULLPROF_MAX_LOOKUPS",
	};
	rc = pp_lookups_start(s, &lookups, &s->lookups);
	if (rc) {
		snprintf(err, errlen, "cannot start the lookup thread: %s",
		         strerror(-rc));
		goto fail;
	}
	/* Follow mode: the address answers for the whole tree (tree.c),
	 * gathering from the members on threads of their own. */
	if (pp_fork_mode_of(cfg) == PP_FORK_FOLLOW &&
	    cfg->addr.ss_family != AF_UNIX) {
		const struct pp_lookups_spec tree = {
		    .thread_name = "pullprof-tree",
		    .threads = PP_TREE_REQUESTS,
		    .max = PP_TREE_REQUESTS,
		    .what = "requests for the whole tree of processes",
		};
		rc = pp_lookups_start(s, &tree, &s->tree);
		if (rc) {
			snprintf(err, errlen,
			         "cannot start the tree's threads: %s",
			         strerror(-rc));
			goto fail;
		}
	}

	/* Named at creation, so the name is there when start returns. */
	rc = pp_agent_thread_create(&s->thread, "pullprof-http", loop, s);
	if (rc) {
		snprintf(err, errlen, "cannot start the HTTP thread: %s",
		         strerror(-rc));
		goto fail;
	}
	*out = s;
	return 0;

fail:
	pp_lookups_stop(s->tree);
	pp_lookups_free(s->tree);
	pp_lookups_stop(s->lookups);
	pp_lookups_free(s->lookups);
	if (s->mhd)
		close_daemon(s);
	free_tls(s);
	pthread_mutex_destroy(&s->mhd_mu);
	free(s->conns);
	free(s);
	return rc;
}

void pp_server_stop(struct pp_server *s)
{
	if (!s)
		return;
	/* Lookups first: what they cancel is answered through the loop. */
	pp_lookups_stop(s->tree);
	pp_lookups_stop(s->lookups);
	atomic_store(&s->stopping, 1);
	pthread_mutex_lock(&s->mhd_mu);
	wake_locked(s);
	pthread_mutex_unlock(&s->mhd_mu);
	/* The loop looks at least every PP_FD_CHECK_MS: a wake-up the host's
	 * closing took away delays this by that much at most. */
	pthread_join(s->thread, NULL);
	char buf[96];
	const char *lost = s->mhd ? lost_fd(s, buf, sizeof buf) : NULL;
	if (lost)
		abandon(s, lost);
	if (s->mhd)
		close_daemon(s);
	else
		pp_routes_forget_all(s); /* none: forgotten at abandon */
	pp_lookups_free(s->lookups);
	pp_lookups_free(s->tree);
	free_tls(s);
	pthread_mutex_destroy(&s->mhd_mu);
	free(s->conns);
	free(s);
}

/* Async-signal-safe: fstat and close only, and only what is still ours
 * (libmicrohttpd's epoll set, whose identity is weak, only along with the
 * listening socket it was made with). */
void pp_server_forget_in_child(struct pp_server *s)
{
	if (!s)
		return;
	for (unsigned i = 0; i < s->conn_slots; i++)
		if (s->conns[i].fd >= 0)
			pp_fd_id_close(&s->conns[i].id);
	if (!s->mhd)
		return;
	if (pp_fd_id_ours(&s->listen_id))
		pp_fd_id_close(&s->mhd_epoll_id);
	pp_fd_id_close(&s->listen_id);
	pp_fd_id_close(&s->wake_rd_id);
	pp_fd_id_close(&s->wake_wr_id);
}

static struct MHD_Daemon *daemon_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_DAEMON);
	return ci ? ci->daemon : NULL;
}

void pp_server_resume(struct pp_server *s, struct MHD_Connection *c)
{
	/* A connection of an abandoned daemon is left alone: resuming it
	 * would wake that daemon, whose descriptors are gone. */
	pthread_mutex_lock(&s->mhd_mu);
	if (s->mhd && daemon_of(c) == s->mhd) {
		MHD_resume_connection(c);
		wake_locked(s);
	}
	pthread_mutex_unlock(&s->mhd_mu);
}

int pp_server_is_own_thread(const struct pp_server *s)
{
	return s && pthread_equal(pthread_self(), s->thread);
}

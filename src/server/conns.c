/*
 * A slot per connection (conns.h): what each open connection is doing (its
 * client, reading its request, answering, waiting for a profile window),
 * and what the server decides from that: the connection limits at accept
 * and the room made for a newcomer, the places kept past them, the share
 * of either limit that waiting requests may hold, the request deadline,
 * the cap on query parameters. Apart from server.c (the daemon's set-up
 * and teardown) and loop.c (the HTTP thread and the descriptors it checks):
 * every callback here runs on the HTTP thread, inside libmicrohttpd.
 * Context: agent.
 */
#include "conns.h"

#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "server.h"
#include "util/cidr.h"
#include "util/fds.h"
#include "util/proc.h"

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

void pp_server_on_connection(void *cls, struct MHD_Connection *c,
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
	if (me->reserved == PP_KEPT_PAST_SHARE) {
		struct pp_fds_stats fs;
		pp_fds_stats(&fs);
		*retry = 60;
		snprintf(
		    why, whylen,
		    "RLIMIT_NOFILE %zu leaves the agent %zu descriptors and "
		    "its server keeps %zu: too few for connections; this "
		    "one was let in past the share for requests answered "
		    "at once (healthz, status, metrics, the index): a "
		    "limit of %zu or more serves everything",
		    fs.limit, fs.share, fs.base, fs.needed);
	} else if (me->reserved) {
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
enum MHD_Result pp_server_on_accept(void *cls, const struct sockaddr *addr,
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
	if (used < s->conn_slots && !pp_fds_room() && used == 0 &&
	    pp_fds_share_too_small()) {
		/* A share too small for any connection (RLIMIT_NOFILE of 16
		 * to 32): one at a time past it, on a kept place (answered
		 * at once: /healthz, /status), rather than none at all. */
		reserved = PP_KEPT_PAST_SHARE;
	} else if (used >= s->conn_slots || !pp_fds_room()) {
		atomic_fetch_add_explicit(&s->stats.connections_refused, 1,
		                          memory_order_relaxed);
		return MHD_NO;
	}
	if (reserved) {
		atomic_fetch_add_explicit(&s->stats.connections_reserved, 1,
		                          memory_order_relaxed);
		s->accept_reserved = reserved;
	}
	return MHD_YES;
}

/* Close connections past their request deadline; returns the milliseconds
 * until the next one falls due (-1: none). */
int pp_server_enforce_deadlines(struct pp_server *s)
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
void *pp_server_on_uri(void *cls, const char *uri, struct MHD_Connection *c)
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

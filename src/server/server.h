/*
 * The embedded HTTP server: the listening socket, libmicrohttpd in external
 * epoll mode driven by one named agent thread ("pullprof-http"), counters.
 * Set up and stopped in server.c, driven by loop.c; the connections' slots
 * and limits are conns.c's.
 * Context: agent.
 */
#ifndef PP_SERVER_H
#define PP_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "config.h"
#include "util/fds.h"

struct MHD_Connection;

/* Status classes counted per route: 1xx..5xx. */
#define PP_STATUS_CLASSES 5
/* Routes fit in this many counter rows; the last row counts unrouted paths. */
#define PP_MAX_ROUTES 32

struct pp_server_stats {
	atomic_ulong requests[PP_MAX_ROUTES + 1][PP_STATUS_CLASSES];
	atomic_ulong connections_active;
	atomic_ulong connections_total;
	atomic_ulong connections_refused;   /* over max_connections */
	atomic_ulong server_errors;         /* messages libmicrohttpd logged */
	atomic_ulong connections_timed_out; /* past PULLPROF_REQUEST_TIMEOUT */
	atomic_ulong connections_evicted;   /* closed to make room */
	atomic_ulong answers_refused;       /* over PULLPROF_MAX_ANSWERS_MB */
	atomic_ulong connections_reserved;  /* accepted on a kept place */
	atomic_ulong windows_refused;       /* 429: long requests' share */
	atomic_ulong connections_lost;      /* closed by the host at accept */
};

/* A connection's slot. Touched by the HTTP thread only (and by a forked
 * child, which reads fd). */
#define PP_KEPT_PAST_SHARE 2

struct pp_conn {
	int fd;             /* -1: a free slot */
	struct pp_fd_id id; /* the socket accepted (util/fds.h) */
	int answering;      /* its request is complete: being answered */
	int closing; /* shut down by us; libmicrohttpd has yet to see it */
	/* Accepted past a connection limit, on a place kept for requests
	 * answered at once (conns.c, on_accept); closed after its answer.
	 * PP_KEPT_PAST_SHARE: past the agent's share of descriptors, which
	 * holds no connection at all (util/fds.h). */
	int reserved;
	/* Its request waits for something (a profile window, a lookup);
	 * until: when a window is expected to end (CLOCK_MONOTONIC ns; 0:
	 * not a window). */
	int waiting;
	uint64_t until;
	uint64_t since; /* CLOCK_MONOTONIC ns: opened, or last answered */
	/* The request target as libmicrohttpd handed it to the URI callback
	 * and its length then: a NUL inside it shows in the access handler
	 * (pp_server_target_has_nul). */
	const char *target;
	size_t target_len;
	struct sockaddr_storage addr;
};

struct pp_server {
	/* Its own settings (a member's socket has no token: fork/members.c)
	 * and the agent's, which its handlers answer with (r->cfg). */
	const struct pp_config *cfg;
	const struct pp_agent_facts *facts;
	/* libmicrohttpd's daemon; NULL while there is none (its descriptors
	 * were closed by the host and a new one is not set up yet). Set and
	 * cleared by the HTTP thread under mhd_mu, which other threads hold
	 * to resume a connection and to wake the loop. */
	struct MHD_Daemon *mhd;
	pthread_mutex_t mhd_mu;
	int listen_fd;
	int mhd_epoll_fd;
	/* A pipe: wakes the loop (stop, resumed connections). A pipe rather
	 * than an eventfd: its inode is its own, so it can be told from a
	 * host's pipe or eventfd that took its number. */
	int wake_rd, wake_wr;
	/* What each descriptor was when opened (loop.c, lost_fd). */
	struct pp_fd_id listen_id, mhd_epoll_id, wake_rd_id, wake_wr_id;
	uint16_t port;
	/* The address actually bound, "host:port", or "unix:PATH" for a
	 * tree's member socket (fork/members.c). */
	char bound[160];
	pthread_t thread;
	atomic_int stopping;
	/* The last accept failed for want of descriptors or memory: the
	 * loop tries again every quarter of a second instead of waiting on
	 * the socket, which stays ready; 0 again once one is accepted
	 * (loop.c). */
	atomic_int accept_starved;
	/* on_accept's verdict for the connection libmicrohttpd is about to
	 * announce (on_connection): it goes on a kept place. */
	int accept_reserved;
	/* Open connections: their descriptors (so a forked child can close
	 * its copies, pp_server_forget_in_child), client addresses and
	 * deadlines. Twice max_connections slots: a connection closed for
	 * a newcomer keeps its slot until libmicrohttpd lets it go. */
	struct pp_conn *conns;
	unsigned conn_slots;
	char hostname[256];          /* gethostname(), for the Host check */
	atomic_size_t answers_bytes; /* answer bodies held (respond.c) */
	atomic_size_t answers_freed; /* freed since the last trim */
	struct pp_server_stats stats;
	struct pp_lookups *lookups;   /* /symbol and /maps (lookup.h) */
	struct pp_lookups *tree;      /* follow mode's whole-tree requests */
	struct pp_request *suspended; /* requests waiting (routes.h) */
	char *tls_cert, *tls_key;     /* PEM text, while the daemon runs */
	char last_log[256];           /* libmicrohttpd's last message */
	/* The host closed descriptors of the server (HTTP thread): how often,
	 * the last one found, how often the server was set up again, and
	 * whether that was said on stderr. */
	atomic_ulong fds_lost, restarts;
	char lost_what[96];
	int lost_said;
	int restart_failures;       /* in a row, since the last loss */
	uint64_t seccomp_looked_ns; /* loop.c: the last seccomp look */
};

/* Places kept past the connection limits for requests answered at once
 * (liveness, status, metrics, the index), in all and per client: a limit
 * held by connections waiting for profile windows does not shut those
 * out. */
#define PP_RESERVED_CONNECTIONS 4
#define PP_RESERVED_PER_CLIENT 2

/* Requests for the whole tree of processes (follow mode, tree.c) running
 * at once; one more gets 429. */
#define PP_TREE_REQUESTS 4

/* Most query parameters a request may carry (no endpoint takes more than
 * a dozen); more get 414. */
#define PP_MAX_QUERY_PARAMS 64
/* The request context of a request with more (routes.c answers it). */
extern char pp_server_too_many_params;

/* Bind, start libmicrohttpd and the loop thread; facts are the running
 * agent's (kept by the caller while the server runs). On failure returns a
 * negative errno and one sentence in err. */
int pp_server_start(const struct pp_config *cfg,
                    const struct pp_agent_facts *facts, struct pp_server **out,
                    char *err, size_t errlen);
/* Stop the loop, close every connection and free the server. Never
 * blocks on, writes to or closes a descriptor the host closed and perhaps
 * reused; with its descriptors gone, libmicrohttpd's daemon is left as it
 * is (its memory), since stopping it would close them. */
void pp_server_stop(struct pp_server *s);
/* In a forked child: close the descriptors inherited from the parent's
 * server without touching its (possibly locked) state. Async-signal-safe. */
void pp_server_forget_in_child(struct pp_server *s);
/* Resume a suspended connection (from any thread) and wake the loop to
 * serve it: libmicrohttpd's own wake-up does not reach our epoll loop. */
void pp_server_resume(struct pp_server *s, struct MHD_Connection *c);
/* The request on c is complete and being answered: its connection no
 * longer runs against the request deadline (HTTP thread). */
void pp_server_answering(struct pp_server *s, struct MHD_Connection *c);
/* c's answer was sent: the deadline for its next request starts now. */
void pp_server_answered(struct pp_server *s, struct MHD_Connection *c);
/* c's request waits (suspended) until about `seconds` from now (0:
 * unknown), or no longer (waiting 0). HTTP thread. */
void pp_server_waiting(struct pp_server *s, struct MHD_Connection *c,
                       int waiting, unsigned seconds);
/* May c's request wait (for a window when `window`, else for its work)?
 * 0 if so; else an HTTP status (429) with one sentence in why and the
 * seconds to retry after in *retry. Windows take at most all but one
 * place of their client's connection limit and of the total one; nothing
 * that waits is served on the kept places. HTTP thread. */
unsigned pp_server_may_wait(struct pp_server *s, struct MHD_Connection *c,
                            int window, char *why, size_t whylen,
                            unsigned *retry);
/* Did c's request target hold a raw NUL byte, which libmicrohttpd's C
 * strings cut it at? version: the access handler's. */
int pp_server_target_has_nul(struct pp_server *s, struct MHD_Connection *c,
                             const char *version);
/* Connections whose request waits now (HTTP thread). */
unsigned pp_server_waiting_count(const struct pp_server *s);
/* Is c on a kept place (answered, then closed)? */
int pp_server_is_reserved(struct pp_server *s, struct MHD_Connection *c);
/* True when called on the server's own thread. */
int pp_server_is_own_thread(const struct pp_server *s);

#endif

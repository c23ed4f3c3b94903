/*
 * The embedded HTTP server: the listening socket, libmicrohttpd in external
 * epoll mode driven by one named agent thread ("pullprof-http"), counters.
 * Agent context.
 */
#ifndef PP_SERVER_H
#define PP_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

struct MHD_Connection;

/* Status classes counted per route: 1xx..5xx. */
#define PP_STATUS_CLASSES 5
/* Routes fit in this many counter rows; the last row counts unrouted paths. */
#define PP_MAX_ROUTES 32

struct pp_server_stats {
	atomic_ulong requests[PP_MAX_ROUTES + 1][PP_STATUS_CLASSES];
	atomic_ulong connections_active;
	atomic_ulong connections_total;
	atomic_ulong connections_refused; /* over max_connections */
	atomic_ulong server_errors;       /* messages libmicrohttpd logged */
};

struct pp_server {
	const struct pp_config *cfg;
	struct MHD_Daemon *mhd;
	int listen_fd;
	int epoll_fd;
	int mhd_epoll_fd;
	int wake_fd; /* eventfd: wakes the loop (stop, resumed connections) */
	uint16_t port;
	char bound[80]; /* the address actually bound, "host:port" */
	pthread_t thread;
	atomic_int stopping;
	/* Descriptors of open connections, so a forked child can close its
	 * copies (see pp_server_forget_in_child). -1 = free slot. */
	int *conn_fds;
	unsigned conn_slots;
	struct pp_server_stats stats;
	struct pp_lookups *lookups;   /* /symbol and /maps (lookup.h) */
	struct pp_request *suspended; /* requests waiting (routes.h) */
	char *tls_cert, *tls_key;     /* PEM text, while the daemon runs */
	char last_log[256];           /* libmicrohttpd's last message */
};

/* Bind, start libmicrohttpd and the loop thread. On failure returns a
 * negative errno and one sentence in err. */
int pp_server_start(const struct pp_config *cfg, struct pp_server **out,
                    char *err, size_t errlen);
/* Stop the loop, close every connection and free the server. */
void pp_server_stop(struct pp_server *s);
/* In a forked child: close the descriptors inherited from the parent's
 * server without touching its (possibly locked) state. Async-signal-safe. */
void pp_server_forget_in_child(struct pp_server *s);
/* Resume a suspended connection (from any thread) and wake the loop to
 * serve it: libmicrohttpd's own wake-up does not reach our epoll loop. */
void pp_server_resume(struct pp_server *s, struct MHD_Connection *c);
/* True when called on the server's own thread. */
int pp_server_is_own_thread(const struct pp_server *s);

#endif

/*
 * The connections' slots (conns.c), for server.c and loop.c: the callbacks
 * libmicrohttpd is started with that keep them, and the request deadline
 * the loop enforces. The calls the handlers make about their connection
 * (pp_server_waiting, pp_server_may_wait, ...) are in server.h.
 * Context: agent.
 */
#ifndef PP_CONNS_H
#define PP_CONNS_H

#include <microhttpd.h>
#include <sys/socket.h>

struct pp_server;

/* MHD_OPTION_NOTIFY_CONNECTION: a connection takes a slot, or leaves it. */
void pp_server_on_connection(void *cls, struct MHD_Connection *c,
                             void **socket_ctx,
                             enum MHD_ConnectionNotificationCode code);
/* The accept policy callback: the connection limits, the room made for a
 * newcomer, the places kept past the limits. */
enum MHD_Result pp_server_on_accept(void *cls, const struct sockaddr *addr,
                                    socklen_t addrlen);
/* MHD_OPTION_URI_LOG_CALLBACK: notes the request target; caps the query's
 * parameters at PP_MAX_QUERY_PARAMS (server.h). */
void *pp_server_on_uri(void *cls, const char *uri, struct MHD_Connection *c);
/* Close connections past their request deadline; the milliseconds until
 * the next one falls due (-1: none). HTTP thread. */
int pp_server_enforce_deadlines(struct pp_server *s);

#endif

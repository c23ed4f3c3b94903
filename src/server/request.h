/*
 * A route (what the server answers at a path, and with what) and the
 * request object handlers receive; the request's life (request.c). The
 * table itself is made above the server (src/routes.c) and handed to it
 * in the agent's facts: the core names no endpoint.
 * Context: agent.
 */
#ifndef PP_REQUEST_H
#define PP_REQUEST_H

#include <microhttpd.h>
#include <stddef.h>

#include "profile/render.h"

#include "util/buf.h"

struct pp_server;
struct pp_request;
struct pp_job;
struct pp_endpoint;

/* What kind of answer an endpoint gives decides how its errors look
 * (DESIGN.md): profile and page endpoints answer text/plain with
 * X-Go-Pprof: 1, JSON endpoints answer {"error": ..., "status": N}. */
enum pp_route_kind { PP_ROUTE_PROFILE, PP_ROUTE_PAGE, PP_ROUTE_JSON };

typedef enum MHD_Result (*pp_handler)(struct pp_request *r);

struct pp_route {
	const char *path;    /* below the prefix: "/", "/status", ... */
	const char *name;    /* key in counters and status */
	const char *methods; /* the Allow header value */
	enum pp_route_kind kind;
	pp_handler handler;
	const char *link; /* what the index links to (path plus query) */
	const char *help; /* one line for the index */
	int takes_body;   /* reads a body (up to PULLPROF_MAX_BODY_BYTES) */
	/* Also answers every path below it ("/ui" takes "/ui/", "/ui/x.js",
	 * ...): the handler reads r->rest and decides what exists there. */
	int subtree;
	/* Answers without the token (PULLPROF_TOKEN): healthz only. */
	int open;
	/* Answered at once on the HTTP thread, never waits: served on the
	 * places kept past the connection limits (server.h). */
	int quick;
	/* A window's length when ?seconds is not given (the handler's
	 * default, and how long a forked tree waits for its members); 0: a
	 * snapshot. */
	unsigned window;
	/* Also answered at <p>/debug/NAME when the prefix is <p>/debug/pprof
	 * (fgprof's path beside Go's). */
	int beside_go;
	/* A kind's endpoint (ask/ask.h), which the route is made from and
	 * pp_h_kind answers; NULL for the routes of no kind. */
	const struct pp_endpoint *endpoint;
};

/* One per request, from its first header to its completion. */
struct pp_request {
	struct pp_server *srv;
	/* The running agent's settings, which the handlers answer with. */
	const struct pp_config *cfg;
	struct MHD_Connection *conn;
	const char *url;
	const char *method;
	/* The Host header, or the authority of an absolute-form target
	 * (RFC 9112 3.2.2: it replaces the header); NULL: neither. */
	const char *host;
	char authority[256];
	const char *rest; /* url below the prefix; NULL when outside it */
	const struct pp_route *route; /* NULL when no route matched */
	unsigned counter;             /* row in srv->stats.requests */
	enum pp_route_kind kind;
	int has_body, answered;
	unsigned long long declared_len; /* Content-Length, 0 if none */
	unsigned long long received;     /* body bytes so far */
	struct pp_buf body; /* the body, for routes that take one */
	/* A handler that suspended the connection sets resume (called when
	 * libmicrohttpd resumes it) and cleanup (called when the request
	 * ends, however it ends); state is theirs. */
	pp_handler resume;
	void (*cleanup)(struct pp_request *r);
	void *state;
	struct pp_job *job; /* a profile request's (pp_respond_job) */
	/* In srv->suspended while the connection is suspended. */
	struct pp_request *susp_next, *susp_prev;
	int suspended;
	struct pp_render_opts render; /* a profile's format */
	/* Extra response headers, name/value pairs, for the next answer. */
	const char *headers[6][2];
	char retry_text[16]; /* Retry-After's value, when one is set */
};

/* The libmicrohttpd access handler; cls is the struct pp_server. */
enum MHD_Result pp_routes_dispatch(void *cls, struct MHD_Connection *c,
                                   const char *url, const char *method,
                                   const char *version, const char *upload,
                                   size_t *upload_size, void **req_cls);

/* Suspend r's connection (HTTP thread, from a handler) until something
 * resumes it (pp_server_resume); r->resume answers then. The server keeps
 * the suspended requests: it must resume every one before libmicrohttpd
 * stops (pp_routes_resume_all). */
void pp_request_suspend(struct pp_request *r);
/* At the server's stop, with its loop thread gone: resume every request
 * still suspended and run libmicrohttpd until each has been answered (their
 * jobs were cancelled: 503). Returns how many could not be (0 when all). */
unsigned pp_routes_resume_all(struct pp_server *s);
/* The daemon is abandoned (its descriptors are gone, loop.c): let go of
 * what its suspended requests hold (jobs, lookups) without libmicrohttpd.
 * The requests themselves are left (a job may be on its way to resume
 * one). Returns how many there were. */
unsigned pp_routes_forget_all(struct pp_server *s);

/* libmicrohttpd's completion callback: frees the request. */
void pp_routes_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe);

#endif

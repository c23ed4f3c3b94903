/* A request's life: from its first header (checks, the route it takes,
 * the token and the network list, its body) to its answer and completion,
 * and the suspended ones' resumption, through the routing table the
 * agent hands the server (struct pp_agent_facts).
 * Context: agent.
 */
#include "request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "auth.h"
#include "profile/job.h"
#include "respond.h"
#include "server.h"

static int method_allowed(const struct pp_route *rt, const char *method)
{
	size_t n = strlen(method);
	const char *p = rt->methods;

	/* methods is a ", "-separated list. */
	while ((p = strstr(p, method)) != NULL) {
		int starts = p == rt->methods || p[-1] == ' ';
		int ends = p[n] == 0 || p[n] == ',';
		if (starts && ends)
			return 1;
		p += n;
	}
	return 0;
}

/* The route named name (only one answered beside Go's paths, with
 * beside_go): 1 with r->route and friends set, else 0. */
static int set_route(struct pp_request *r, const char *name, int beside_go)
{
	const struct pp_route *routes = r->srv->facts->routes;
	for (size_t i = 0; i < r->srv->facts->nroutes; i++) {
		if (strcmp(routes[i].name, name) == 0 &&
		    (!beside_go || routes[i].beside_go)) {
			r->route = &routes[i];
			r->counter = (unsigned)i;
			r->kind = routes[i].kind;
			return 1;
		}
	}
	return 0;
}

/* Match r->url against the table: sets r->route and friends; returns the
 * path below the prefix, or NULL when the url is outside the prefix. */
static const char *match(struct pp_request *r, const char *prefix)
{
	size_t plen = strlen(prefix);
	const char *url = r->url;
	const char *metrics = r->srv->cfg->v.metrics_path;

	if (metrics && strcmp(url, metrics) == 0) {
		/* PULLPROF_METRICS_PATH: outside the prefix (config.c makes
		 * sure), the metrics route under another name. */
		set_route(r, "metrics", 0);
		return url;
	}
	if (plen >= 6 && strcmp(prefix + plen - 6, "/pprof") == 0 &&
	    strncmp(url, prefix, plen - 6) == 0 && url[plen - 6] == '/' &&
	    set_route(r, url + plen - 5, 1))
		/* <p>/debug/NAME for the prefix <p>/debug/pprof, for the
		 * routes also answered beside Go's (fgprof's, where the
		 * scrapers' fgprof job asks). */
		return url + plen - 6;
	if (strncmp(url, prefix, plen) != 0 ||
	    (url[plen] != 0 && url[plen] != '/'))
		return NULL;
	const struct pp_route *routes = r->srv->facts->routes;
	for (size_t i = 0; i < r->srv->facts->nroutes; i++) {
		const char *path = routes[i].path;
		size_t n = strlen(path);
		if (strcmp(path, url + plen) == 0 ||
		    (routes[i].subtree && strncmp(path, url + plen, n) == 0 &&
		     url[plen + n] == '/')) {
			r->route = &routes[i];
			r->counter = (unsigned)i;
			r->kind = routes[i].kind;
			break;
		}
	}
	return url + plen;
}

/* The largest body r's route reads (PULLPROF_MAX_BODY_BYTES); 0: none. */
static size_t max_body(const struct pp_request *r)
{
	return r->route && r->route->takes_body ? r->srv->cfg->v.max_body_bytes
	                                        : 0;
}

/* Profiles a Go program serves that a C or C++ process does not have: a
 * scraper or a user that asks gets a 404 that says so, not "unknown
 * endpoint". */
static const struct {
	const char *path, *why;
} go_only[] = {
    {"/delta_heap", "godeltaprof's delta profiles are Go-only; ask /allocs "
                    "and let the scraper compute deltas"},
    {"/delta_mutex", "godeltaprof's delta profiles are Go-only; ask /mutex "
                     "and let the scraper compute deltas"},
    {"/delta_block", "godeltaprof's delta profiles are Go-only; ask /block "
                     "and let the scraper compute deltas"},
};

static enum MHD_Result not_here(struct pp_request *r)
{
	for (size_t i = 0; i < sizeof go_only / sizeof go_only[0]; i++) {
		if (strcmp(r->rest, go_only[i].path) != 0)
			continue;
		/* Answered like a profile endpoint (text, X-Go-Pprof). */
		r->kind = PP_ROUTE_PROFILE;
		return pp_respond_error(r, MHD_HTTP_NOT_FOUND, "%s: %s", r->url,
		                        go_only[i].why);
	}
	return pp_respond_error(r, MHD_HTTP_NOT_FOUND,
	                        "unknown endpoint %s (the list is at %s/)",
	                        r->url, r->srv->cfg->v.prefix);
}

/* Everything that can be said about a request once it is complete (or at
 * once, when it comes with a body we will not read). */

static enum MHD_Result answer(struct pp_request *r)
{
	const char *prefix = r->srv->cfg->v.prefix;
	char loc[256];

	if ((!r->rest && strcmp(r->url, "/") == 0) || (r->rest && !*r->rest)) {
		/* "/" and the bare prefix lead to the index. */
		snprintf(loc, sizeof loc, "%s/", prefix);
		return pp_respond_redirect(r, loc);
	}
	if (!r->rest)
		return pp_respond_error(
		    r, MHD_HTTP_NOT_FOUND,
		    "404 page not found: pullprof serves its "
		    "endpoints under %s/",
		    prefix);
	if (!r->route)
		return not_here(r);
	if (!method_allowed(r->route, r->method))
		return pp_respond_error(
		    r, MHD_HTTP_METHOD_NOT_ALLOWED,
		    "method %s not allowed on %s; allowed: %s", r->method,
		    r->url, r->route->methods);
	if (r->has_body && !max_body(r))
		/* Refused rather than read; the answer comes before the body,
		 * so the connection closes. */
		return pp_respond_error(r, MHD_HTTP_CONTENT_TOO_LARGE,
		                        "%s %s takes no request body",
		                        r->method, r->url);
	if (r->has_body &&
	    (r->declared_len > max_body(r) || r->received > max_body(r)))
		return pp_respond_error(
		    r, MHD_HTTP_CONTENT_TOO_LARGE,
		    "request body over the limit of %zu bytes "
		    "for %s (PULLPROF_MAX_BODY_BYTES)",
		    max_body(r), r->url);
	/* Nothing that waits is served on a place kept past the connection
	 * limits for liveness and status (conns.c, pp_server_may_wait). */
	enum MHD_Result ret;
	if (!r->route->quick && pp_respond_may_wait(r, 0, &ret))
		return ret;
	/* The agent is stopping: its jobs are cancelled first, then its
	 * kinds stop, then this server. A profile asked for in between
	 * (its request read late, on a loaded machine or under valgrind)
	 * would meet a stopped kind and be told it is off ("start it with
	 * PULLPROF_HEAP_RATE greater than 0"): it is told the truth. */
	if (r->route->kind == PP_ROUTE_PROFILE && !r->route->quick &&
	    !pp_jobs_accepting())
		return pp_respond_error(r, MHD_HTTP_SERVICE_UNAVAILABLE,
		                        "the agent is stopping");
	/* Follow mode: the whole tree, or another process of it (the
	 * agent's hook, tree/tree.h). */
	int taken = r->srv->facts->intercept ? r->srv->facts->intercept(r) : -1;
	if (taken >= 0)
		return (enum MHD_Result)taken;
	return r->route->handler(r);
}

static enum MHD_Result deny(struct pp_request *r, unsigned status,
                            const char *why)
{
	if (status == MHD_HTTP_UNAUTHORIZED) {
		/* Bearer for programs; Basic makes a browser ask for it (the
		 * token as the password), then send it with every request of
		 * the page. */
		r->headers[0][0] = MHD_HTTP_HEADER_WWW_AUTHENTICATE;
		r->headers[0][1] = "Bearer realm=\"pullprof\"";
		r->headers[1][0] = MHD_HTTP_HEADER_WWW_AUTHENTICATE;
		r->headers[1][1] =
		    "Basic realm=\"pullprof\", charset=\"UTF-8\"";
	}
	return pp_respond_error(r, status, "%s", why);
}

static void unlink_suspended(struct pp_request *r);

static enum MHD_Result count_host(void *cls, enum MHD_ValueKind kind,
                                  const char *key, const char *value)
{
	unsigned *n = cls;
	(void)kind;
	(void)value;
	*n += key && strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0;
	return MHD_YES;
}

/*
 * What libmicrohttpd 0.9.75 passes on that HTTP forbids, answered 400
 * before anything else (and the connection closed: what follows such a
 * request cannot be trusted to be the next one):
 * - a raw NUL byte in the target, which its C strings cut the target at;
 * - more than one Host header (it hands the first on), or none in an
 *   HTTP/1.1 request (RFC 9110 7.2, RFC 9112 3.2);
 * and the absolute-form target (`GET http://host:port/path`, what a client
 * sends to a proxy), which RFC 9112 3.2.2 says a server must accept, is
 * taken apart here: the path is routed, its authority replaces the Host
 * header. Returns 0, or the status with one sentence in why.
 */
static unsigned malformed(struct pp_request *r, const char *version, char *why,
                          size_t whylen)
{
	unsigned hosts = 0;

	if (pp_server_target_has_nul(r->srv, r->conn, version)) {
		snprintf(why, whylen,
		         "the request target holds a raw NUL byte (a path "
		         "carries one as %%00)");
		return MHD_HTTP_BAD_REQUEST;
	}
	MHD_get_connection_values(r->conn, MHD_HEADER_KIND, count_host, &hosts);
	if (hosts > 1) {
		snprintf(why, whylen,
		         "the request has %u Host headers; HTTP allows one "
		         "(RFC 9110 section 7.2)",
		         hosts);
		return MHD_HTTP_BAD_REQUEST;
	}
	if (!hosts && version && strncmp(version, "HTTP/1.", 7) == 0 &&
	    strcmp(version, "HTTP/1.0") != 0) {
		snprintf(why, whylen,
		         "an %s request must carry a Host header (RFC 9112 "
		         "section 3.2)",
		         version);
		return MHD_HTTP_BAD_REQUEST;
	}
	r->host = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
	                                      MHD_HTTP_HEADER_HOST);
	const char *u = r->url;
	if (u[0] == '/' || strcmp(u, "*") == 0)
		return 0;
	size_t scheme = strspn(u, "abcdefghijklmnopqrstuvwxyz"
	                          "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-");
	if (!scheme || strncmp(u + scheme, "://", 3) != 0)
		return 0; /* not absolute-form: routed, and not found */
	if (!((scheme == 4 && strncasecmp(u, "http", 4) == 0) ||
	      (scheme == 5 && strncasecmp(u, "https", 5) == 0))) {
		snprintf(why, whylen,
		         "the target %.80s is not an http or https URL", u);
		return MHD_HTTP_BAD_REQUEST;
	}
	const char *auth = u + scheme + 3;
	size_t n = strcspn(auth, "/");
	if (!n || n >= sizeof r->authority || memchr(auth, '@', n)) {
		snprintf(why, whylen,
		         "the target %.80s names no host, or user information "
		         "with it: send GET /path with a Host header",
		         u);
		return MHD_HTTP_BAD_REQUEST;
	}
	memcpy(r->authority, auth, n);
	r->authority[n] = 0;
	r->host = r->authority;
	r->url = auth[n] ? auth + n : "/";
	return 0;
}

enum MHD_Result pp_routes_dispatch(void *cls, struct MHD_Connection *c,
                                   const char *url, const char *method,
                                   const char *version, const char *upload,
                                   size_t *upload_size, void **req_cls)
{
	struct pp_server *s = cls;
	struct pp_request *r = *req_cls;

	int too_many = 0;
	if (*req_cls == &pp_server_too_many_params) {
		/* Set by the URI callback (conns.c): a query it hid. */
		too_many = 1;
		r = *req_cls = NULL;
	}
	if (r && r->resume) {
		pp_handler resume = r->resume;
		r->resume = NULL;
		unlink_suspended(r);
		pp_server_waiting(s, c, 0, 0);
		return resume(r);
	}
	if (!r) {
		r = calloc(1, sizeof *r);
		if (!r)
			return MHD_NO;
		*req_cls = r; /* freed by pp_routes_completed */
		r->srv = s;
		r->cfg = s->facts->cfg;
		r->conn = c;
		r->url = url;
		r->method = method;
		r->counter = PP_MAX_ROUTES;
		r->kind = PP_ROUTE_PROFILE;
		char why[300];
		unsigned bad = malformed(r, version, why, sizeof why);
		if (bad) {
			r->answered = 1;
			pp_server_answering(s, c);
			r->headers[0][0] = MHD_HTTP_HEADER_CONNECTION;
			r->headers[0][1] = "close";
			return pp_respond_error(r, bad, "%s", why);
		}
		r->rest = match(r, s->cfg->v.prefix);
		unsigned denied = pp_auth_check(r, why, sizeof why);
		if (denied) {
			/* Before anything else, body or not: nothing of the
			 * request is read further. */
			r->answered = 1;
			pp_server_answering(s, c);
			return deny(r, denied, why);
		}
		if (too_many) {
			r->answered = 1;
			pp_server_answering(s, c);
			return pp_respond_error(
			    r, MHD_HTTP_URI_TOO_LONG,
			    "the query has more than %d parameters; no "
			    "endpoint takes that many",
			    PP_MAX_QUERY_PARAMS);
		}
		const char *len = MHD_lookup_connection_value(
		    c, MHD_HEADER_KIND, "Content-Length");
		r->declared_len = len ? strtoull(len, NULL, 10) : 0;
		r->has_body = r->declared_len > 0 ||
		              MHD_lookup_connection_value(c, MHD_HEADER_KIND,
		                                          "Transfer-Encoding");
		/* Without a body, answer once the request is complete, so the
		 * connection can be kept alive. With one, read it only for
		 * an endpoint that takes it, within its limit. */
		if (!r->has_body ||
		    (max_body(r) && method_allowed(r->route, method) &&
		     r->declared_len <= max_body(r)))
			return MHD_YES;
		r->answered = 1;
		pp_server_answering(s, c);
		return answer(r);
	}
	if (r->answered) {
		*upload_size = 0; /* late body bytes after our answer: drop */
		return MHD_YES;
	}
	if (*upload_size) {
		/* A chunked body over the limit: libmicrohttpd cannot answer in
		 * the middle of an upload, so the rest is read and dropped and
		 * the 413 comes at the end; past 16 times the limit the
		 * connection is closed instead. */
		r->received += *upload_size;
		if (r->received > max_body(r)) {
			*upload_size = 0;
			return r->received / 16 > max_body(r) ? MHD_NO
			                                      : MHD_YES;
		}
		pp_buf_append(&r->body, upload, *upload_size);
		*upload_size = 0;
		return r->body.failed ? MHD_NO : MHD_YES;
	}
	r->answered = 1;
	pp_server_answering(s, c);
	return answer(r);
}

/* The list of suspended requests is touched by the HTTP thread only (and by
 * the stopping thread once the HTTP thread is gone). */
void pp_request_suspend(struct pp_request *r)
{
	struct pp_server *s = r->srv;
	r->susp_prev = NULL;
	r->susp_next = s->suspended;
	if (s->suspended)
		s->suspended->susp_prev = r;
	s->suspended = r;
	r->suspended = 1;
	pp_server_waiting(s, r->conn, 1, 0);
	MHD_suspend_connection(r->conn);
}

static void unlink_suspended(struct pp_request *r)
{
	if (!r->suspended)
		return;
	if (r->susp_prev)
		r->susp_prev->susp_next = r->susp_next;
	else
		r->srv->suspended = r->susp_next;
	if (r->susp_next)
		r->susp_next->susp_prev = r->susp_prev;
	r->susp_next = r->susp_prev = NULL;
	r->suspended = 0;
}

unsigned pp_routes_resume_all(struct pp_server *s)
{
	/* libmicrohttpd aborts the process when it is stopped with a
	 * connection still suspended, and a resume only raises a flag that
	 * its next run acts on: the loop may have ended before that run
	 * (found under valgrind, where stop comes long before the loop sees
	 * the wake-up). Each run answers the resumed requests, which leave
	 * the list. */
	for (int round = 0; s->suspended && round < 200; round++) {
		for (struct pp_request *r = s->suspended; r; r = r->susp_next)
			MHD_resume_connection(r->conn);
		MHD_run(s->mhd);
		if (s->suspended)
			usleep(5000);
	}
	unsigned left = 0;
	for (struct pp_request *r = s->suspended; r; r = r->susp_next)
		left++;
	return left;
}

unsigned pp_routes_forget_all(struct pp_server *s)
{
	unsigned n = 0;
	while (s->suspended) {
		struct pp_request *r = s->suspended;
		unlink_suspended(r);
		if (r->cleanup)
			r->cleanup(r);
		r->cleanup = NULL;
		n++;
	}
	return n;
}

void pp_routes_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
	struct pp_request *r = *req_cls;
	(void)toe;
	pp_server_answered(cls, c);
	if (r == (void *)&pp_server_too_many_params) {
		*req_cls = NULL; /* ended before its headers were complete */
	} else if (r) {
		unlink_suspended(r);
		if (r->cleanup)
			r->cleanup(r);
		pp_buf_free(&r->body);
		free(r);
		*req_cls = NULL;
	}
}

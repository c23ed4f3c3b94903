/* The routing table and dispatch. Agent context. */
#include "routes.h"

#include <stdio.h>
#include <string.h>

#include "handlers.h"
#include "respond.h"
#include "server.h"

#define GET_HEAD "GET, HEAD"

/* Every endpoint, in the order the index lists them. */
const struct pp_route pp_routes[] = {
    {"/", "index", GET_HEAD, PP_ROUTE_PAGE, pp_h_index, "./",
     "this page: every endpoint with a short description"},
    {"/status", "status", GET_HEAD, PP_ROUTE_JSON, pp_h_status, "status",
     "agent and process status as JSON: version, pid, uptime, "
     "configuration, request counters"},
    {"/cmdline", "cmdline", GET_HEAD, PP_ROUTE_PROFILE, pp_h_cmdline, "cmdline",
     "the command line of this process, arguments separated by NUL bytes "
     "(as Go's net/http/pprof)"},
};
const size_t pp_routes_count = sizeof pp_routes / sizeof pp_routes[0];

_Static_assert(sizeof pp_routes / sizeof pp_routes[0] <= PP_MAX_ROUTES,
               "raise PP_MAX_ROUTES");

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

static int has_request_body(struct MHD_Connection *c)
{
	const char *len =
	    MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
	return MHD_lookup_connection_value(c, MHD_HEADER_KIND,
	                                   "Transfer-Encoding") != NULL ||
	       (len && strcmp(len, "0") != 0);
}

/* Match url against the table: sets r->route and friends; returns the
 * path below the prefix, or NULL when url is outside the prefix. */
static const char *match(struct pp_request *r, const char *prefix)
{
	size_t plen = strlen(prefix);
	const char *url = r->url;

	if (strncmp(url, prefix, plen) != 0 ||
	    (url[plen] != 0 && url[plen] != '/'))
		return NULL;
	for (size_t i = 0; i < pp_routes_count; i++) {
		if (strcmp(pp_routes[i].path, url + plen) == 0) {
			r->route = &pp_routes[i];
			r->counter = (unsigned)i;
			r->kind = pp_routes[i].kind;
			break;
		}
	}
	return url + plen;
}

enum MHD_Result pp_routes_dispatch(void *cls, struct MHD_Connection *c,
                                   const char *url, const char *method,
                                   const char *version, const char *upload,
                                   size_t *upload_size, void **req_cls)
{
	static int seen, answered;
	struct pp_server *s = cls;
	const char *prefix = s->cfg->v.prefix;
	struct pp_request r = {
	    .srv = s,
	    .conn = c,
	    .url = url,
	    .method = method,
	    .counter = PP_MAX_ROUTES,
	    .kind = PP_ROUTE_PROFILE,
	};
	char loc[256];

	(void)version;
	(void)upload;
	if (*req_cls == &answered) {
		*upload_size = 0; /* late body bytes after our answer: drop */
		return MHD_YES;
	}
	int has_body = has_request_body(c);
	if (*req_cls == NULL && !has_body) {
		/* Answer once the request is complete, so the connection can be
		 * kept alive (an answer queued earlier makes it close). */
		*req_cls = &seen;
		return MHD_YES;
	}
	*req_cls = &answered;

	const char *rest = match(&r, prefix);
	if ((!rest && strcmp(url, "/") == 0) || (rest && *rest == 0)) {
		/* "/" and the bare prefix lead to the index. */
		snprintf(loc, sizeof loc, "%s/", prefix);
		return pp_respond_redirect(&r, loc);
	}
	if (!rest)
		return pp_respond_error(
		    &r, MHD_HTTP_NOT_FOUND,
		    "404 page not found: pullprof serves its "
		    "endpoints under %s/",
		    prefix);
	if (!r.route)
		return pp_respond_error(
		    &r, MHD_HTTP_NOT_FOUND,
		    "unknown endpoint %s (the list is at %s/)", url, prefix);
	if (!method_allowed(r.route, method))
		return pp_respond_error(
		    &r, MHD_HTTP_METHOD_NOT_ALLOWED,
		    "method %s not allowed on %s; allowed: %s", method, url,
		    r.route->methods);
	if (has_body) {
		/* No endpoint takes a body: refuse it rather than read it (the
		 * answer comes before the body, so the connection closes). */
		return pp_respond_error(&r, MHD_HTTP_CONTENT_TOO_LARGE,
		                        "%s %s takes no request body", method,
		                        url);
	}
	return r.route->handler(&r);
}

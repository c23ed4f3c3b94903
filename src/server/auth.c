/*
 * Access control, checked before any handler runs: the client's address
 * against PULLPROF_ALLOW, then the token (PULLPROF_TOKEN) as a Bearer token
 * or as the password of HTTP Basic authentication (what a URL with
 * user:password@ makes go tool pprof, curl and browsers send). Only routes
 * marked open (healthz) skip the token.
 * Context: agent.
 */
#include "auth.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <microhttpd.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "server.h"

int pp_auth_equal(const char *given, size_t given_len, const char *want)
{
	size_t n = strlen(want);
	/* Every byte of want is looked at whatever given holds; only the
	 * comparison's result depends on it. */
	volatile unsigned char diff = (unsigned char)(given_len != n);
	for (size_t i = 0; i < n; i++) {
		unsigned char g = i < given_len ? (unsigned char)given[i] : 0;
		diff |= (unsigned char)(g ^ (unsigned char)want[i]);
	}
	return diff == 0;
}

/* The token from "Authorization: Bearer TOKEN"; NULL when the header is
 * absent or of another scheme. */
static const char *bearer(struct pp_request *r, size_t *len)
{
	const char *h = MHD_lookup_connection_value(
	    r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	if (!h || strncasecmp(h, "Bearer", 6) != 0 ||
	    (h[6] != ' ' && h[6] != '\t'))
		return NULL;
	h += 6;
	while (*h == ' ' || *h == '\t')
		h++;
	size_t n = strlen(h);
	while (n && (h[n - 1] == ' ' || h[n - 1] == '\t'))
		n--;
	*len = n;
	return h;
}

static int token_ok(struct pp_request *r, const char *want, int *presented)
{
	size_t n = 0;
	const char *t = bearer(r, &n);
	if (t) {
		*presented = 1;
		return pp_auth_equal(t, n, want);
	}
	char *password = NULL;
	char *user = MHD_basic_auth_get_username_password(r->conn, &password);
	int ok = 0;
	if (user || password) {
		*presented = 1;
		ok =
		    password && pp_auth_equal(password, strlen(password), want);
	}
	if (password) {
		/* It is a secret: not left behind in freed memory. */
		explicit_bzero(password, strlen(password));
		MHD_free(password);
	}
	if (user)
		MHD_free(user);
	return ok;
}

/* Is name (lower-cased, no port, no trailing dot) one of the
 * comma-separated list's? An item "*" takes any name, "*.example.com" any
 * name under example.com. */
static int listed(const char *list, const char *name)
{
	size_t n = strlen(name);
	while (*list) {
		while (*list == ',' || *list == ' ')
			list++;
		size_t k = strcspn(list, ", ");
		if (k == 1 && list[0] == '*')
			return 1;
		if (k > 2 && list[0] == '*' && list[1] == '.' && n > k - 1 &&
		    strncasecmp(name + n - (k - 1), list + 1, k - 1) == 0)
			return 1;
		if (k == n && strncasecmp(list, name, k) == 0)
			return 1;
		list += k;
	}
	return 0;
}

int pp_auth_host_ok(const char *host, const char *hosts, int has_token,
                    const char *own_name)
{
	char name[256];
	if (!host)
		return 1; /* HTTP/1.0 without Host: no browser sends that */
	if (host[0] == '[') {
		/* An IPv6 literal, with or without a port. */
		const char *end = strchr(host, ']');
		unsigned char a[16];
		size_t n = end ? (size_t)(end - host - 1) : 0;
		if (!end || n >= sizeof name || (end[1] && end[1] != ':'))
			return 0;
		memcpy(name, host + 1, n);
		name[n] = 0;
		return inet_pton(AF_INET6, name, a) == 1;
	}
	size_t n = strcspn(host, ":");
	if (n == 0 || n >= sizeof name ||
	    (host[n] == ':' && strchr(host + n + 1, ':')))
		return 0;
	for (size_t i = 0; i < n; i++)
		name[i] = (char)tolower((unsigned char)host[i]);
	name[n] = 0;
	if (n > 1 && name[n - 1] == '.')
		name[--n] = 0;
	unsigned char a[4];
	if (inet_pton(AF_INET, name, a) == 1)
		return 1;
	if (strcmp(name, "localhost") == 0 ||
	    (n > 10 && strcmp(name + n - 10, ".localhost") == 0))
		return 1;
	if (hosts)
		return listed(hosts, name);
	if (has_token)
		return 1;
	if (own_name && *own_name) {
		/* This machine's name, and its first label. */
		size_t k = strcspn(own_name, ".");
		if (strcasecmp(name, own_name) == 0 ||
		    (strlen(name) == k && strncasecmp(name, own_name, k) == 0))
			return 1;
	}
	return 0;
}

static const char *header(struct pp_request *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

static const char *arg(struct pp_request *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND,
	                                   name);
}

int pp_auth_same_origin(const char *url, const char *host, int tls)
{
	/* url: scheme://authority[/path...] (an Origin, or a Referer: a
	 * browser strips user information from both). The origin is the
	 * scheme, the host and the port (RFC 6454): the agent's scheme is
	 * https with a certificate, else http; Host's port, when it has
	 * none, that scheme's default. */
	const char *scheme = tls ? "https" : "http";
	size_t sn = strlen(scheme);
	if (!host || strncasecmp(url, scheme, sn) ||
	    strncmp(url + sn, "://", 3))
		return 0; /* another scheme, null, file:, a page over http
		             when this is https ... */
	const char *auth = url + sn + 3;
	size_t n = strcspn(auth, "/?#");
	/* The default port written out or not, on either side. */
	const char *dflt = tls ? ":443" : ":80";
	size_t k = strlen(dflt);
	if (n > k && !memcmp(auth + n - k, dflt, k))
		n -= k;
	size_t h = strlen(host);
	if (h > k && !memcmp(host + h - k, dflt, k))
		h -= k;
	return n && n == h && !strncasecmp(auth, host, n);
}

static int resets_peak(struct pp_request *r)
{
	const char *peak = arg(r, "peak");
	return peak && !strcmp(peak, "reset");
}

/* Would the request cost the host something, or change what the agent
 * keeps: a method other than GET and HEAD (POST /record/save, /symbol),
 * a sampling window (seconds=N, or a route that opens one by default and
 * is not reading the record or a kept profile), or the heap peak's reset.
 * HEAD opens no window (routes.c). */
static int costly(struct pp_request *r)
{
	if (!strcmp(r->method, "HEAD"))
		return 0;
	if (strcmp(r->method, "GET"))
		return 1;
	if (resets_peak(r))
		return 1;
	const char *sec = arg(r, "seconds");
	if (sec)
		return strspn(sec, "0") != strlen(sec);
	if (!r->route || !r->route->window)
		return 0;
	return !arg(r, "last") && !arg(r, "start") && !arg(r, "end") &&
	       !arg(r, "recording") && !arg(r, "id");
}

/* What a page of another site can make a browser send here: an image, a
 * form, a fetch() it cannot read the answer of. It cannot read answers
 * (no CORS here; a DNS name rebound to this machine fails the Host
 * check), but a GET opens a window at up to 1000 Hz for up to
 * PULLPROF_MAX_SECONDS, a POST keeps a saving (pushing another out).
 * Clients that are not browsers send none of Origin, Sec-Fetch-* and a
 * browser's User-Agent. In order:
 *  1. An Origin that is not this request's own origin (scheme://Host) is
 *     refused, whatever the request: a cross-origin fetch() or form POST,
 *     "null" from a sandboxed frame or a data: URL.
 *  2. Sec-Fetch-Site (sent to potentially trustworthy URLs: 127.0.0.1,
 *     localhost, https) is believed: same-origin and none (typed, a
 *     bookmark) are served, cross-site and same-site only as a top-level
 *     GET the user followed (a link), never a POST.
 *  3. Without it (http://NAME:PORT, NAME this machine's name or another
 *     not trustworthy one: browsers send no Sec-Fetch-* there, and a GET
 *     of an <img> or a no-cors fetch() no Origin), a request a browser
 *     made (its User-Agent says Mozilla/, which a page cannot change) and
 *     that costs (costly()) is served only when it shows it comes from
 *     this origin: its Origin, or its Referer. The index's links and the
 *     viewer's fetches carry their Referer; a typed URL carries none and
 *     is refused too (open it from the index, or on 127.0.0.1). */
static int cross_site(struct pp_request *r, char *why, size_t whylen)
{
	int tls = r->srv->tls_cert != NULL;
	const char *origin = header(r, "Origin");
	if (origin && !pp_auth_same_origin(origin, r->host, tls)) {
		snprintf(why, whylen,
		         "a request from another origin (Origin: %.80s) is "
		         "refused: this agent answers its own pages and "
		         "programs, not other sites' pages",
		         origin);
		return 1;
	}
	const char *site = header(r, "Sec-Fetch-Site");
	if (site) {
		if (!strcasecmp(site, "same-origin") ||
		    !strcasecmp(site, "none"))
			return 0;
		const char *mode = header(r, "Sec-Fetch-Mode");
		const char *user = header(r, "Sec-Fetch-User");
		int get =
		    !strcmp(r->method, "GET") || !strcmp(r->method, "HEAD");
		if (get && mode && !strcasecmp(mode, "navigate") && user &&
		    !strcmp(user, "?1"))
			return 0;
		snprintf(why, whylen,
		         "a request made by a page of another site "
		         "(Sec-Fetch-Site: %.32s) is refused%s; open the URL "
		         "yourself, or fetch it outside the browser",
		         site, get ? "" : " (a POST from another site always)");
		return 1;
	}
	if (origin)
		return 0; /* this origin's own (rule 1) */
	const char *ua = header(r, MHD_HTTP_HEADER_USER_AGENT);
	if (!ua || !strstr(ua, "Mozilla/") || !costly(r))
		return 0;
	const char *ref = header(r, MHD_HTTP_HEADER_REFERER);
	if (ref && pp_auth_same_origin(ref, r->host, tls))
		return 0;
	snprintf(why, whylen,
	         "a browser's request that %s and does not show it comes "
	         "from this agent's own pages (%s%.80s) is refused: a page of "
	         "another site can make a browser send it, and a browser "
	         "says where a request comes from only to 127.0.0.1 and "
	         "localhost; open it from the index (%s://%.80s%s/), on "
	         "http://127.0.0.1, or fetch it outside the browser",
	         strcmp(r->method, "GET") ? "changes what the agent keeps"
	         : resets_peak(r)         ? "resets the heap peak"
	                                  : "opens a sampling window",
	         ref ? "it comes from " : "no Referer", ref ? ref : "",
	         tls ? "https" : "http", r->host ? r->host : "HOST",
	         r->srv->cfg->v.prefix);
	return 1;
}

unsigned pp_auth_check(struct pp_request *r, char *why, size_t whylen)
{
	const struct pp_config *cfg = r->srv->cfg;

	if (cfg->allow.n) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
		    r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		if (!ci || !pp_cidr_match(&cfg->allow, ci->client_addr)) {
			char who[80] = "this client";
			if (ci)
				pp_format_sockaddr(ci->client_addr, who,
				                   sizeof who);
			snprintf(why, whylen,
			         "%s is not in the networks this agent serves "
			         "(PULLPROF_ALLOW)",
			         who);
			return MHD_HTTP_FORBIDDEN;
		}
	}
	if (r->route && r->route->open)
		return 0;
	const char *host =
	    r->host; /* or an absolute-form target's (routes.c) */
	if (!pp_auth_host_ok(host, cfg->v.hosts, cfg->v.token != NULL,
	                     r->srv->hostname)) {
		snprintf(
		    why, whylen,
		    "Host \"%.80s\" is not a name of this agent: it answers "
		    "to IP addresses, localhost%s%s and the names in "
		    "PULLPROF_HOSTS (a web page could otherwise reach it "
		    "through a DNS name rebound to this machine)",
		    host, r->srv->hostname[0] && !cfg->v.hosts ? ", " : "",
		    cfg->v.hosts ? "" : r->srv->hostname);
		return MHD_HTTP_FORBIDDEN;
	}
	if (cross_site(r, why, whylen))
		return MHD_HTTP_FORBIDDEN;
	if (!cfg->v.token)
		return 0;
	int presented = 0;
	if (token_ok(r, cfg->v.token, &presented))
		return 0;
	snprintf(
	    why, whylen,
	    "%s: send \"Authorization: Bearer TOKEN\" (curl -H), or put it "
	    "in the URL as the password, %s://pullprof:TOKEN@HOST:PORT%s/ "
	    "(go tool pprof, browsers)",
	    presented ? "the token does not match this agent's "
	                "PULLPROF_TOKEN"
	              : "this agent needs its token (PULLPROF_TOKEN)",
	    r->srv->tls_cert ? "https" : "http", cfg->v.prefix);
	return MHD_HTTP_UNAUTHORIZED;
}

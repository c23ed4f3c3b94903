/*
 * Access control, checked before any handler runs: the client's address
 * against PULLPROF_ALLOW, then the token (PULLPROF_TOKEN) as a Bearer token
 * or as the password of HTTP Basic authentication (what a URL with
 * user:password@ makes go tool pprof, curl and browsers send). Only routes
 * marked open (healthz) skip the token. Agent context.
 */
#include "auth.h"

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
	if (!cfg->v.token || (r->route && r->route->open))
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

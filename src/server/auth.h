/* Who may ask: the allow-list of client networks and the token.
 * Context: agent.
 */
#ifndef PP_AUTH_H
#define PP_AUTH_H

#include <stddef.h>

#include "request.h"

/* 0 when r may be served; else the status to answer — 403 (client network
 * not allowed, a Host that is not this agent's, a request from another
 * origin or that a page of another site made: auth.c's cross_site()) or 401
 * (token missing or wrong) — with a sentence in why. */
unsigned pp_auth_check(struct pp_request *r, char *why, size_t whylen);

/* May a request with this Host header (NULL: none) be served? IP literals,
 * localhost and *.localhost always; then the names of hosts
 * (PULLPROF_HOSTS: comma-separated, "*" any, "*.domain" under domain) when
 * set; else any name when a token is set, or own_name (this machine's name,
 * or its first label). */
int pp_auth_host_ok(const char *host, const char *hosts, int has_token,
                    const char *own_name);

/* Is url (an Origin or a Referer: scheme://host[:port][/...]) of the origin
 * a request with this Host header was sent to, the agent speaking https
 * when tls, else http? Host names compare without case; the scheme's
 * default port may be written on either side or left out; "null", no
 * Host, or another scheme: no. */
int pp_auth_same_origin(const char *url, const char *host, int tls);

/* Compare a presented secret with the expected one in time that depends on
 * the expected one's length only. */
int pp_auth_equal(const char *given, size_t given_len, const char *want);

#endif

/* Who may ask: the allow-list of client networks and the token.
 * Agent context. */
#ifndef PP_AUTH_H
#define PP_AUTH_H

#include <stddef.h>

#include "routes.h"

/* 0 when r may be served; else the status to answer — 403 (client network
 * not allowed) or 401 (token missing or wrong) — with a sentence in why. */
unsigned pp_auth_check(struct pp_request *r, char *why, size_t whylen);

/* Compare a presented secret with the expected one in time that depends on
 * the expected one's length only. */
int pp_auth_equal(const char *given, size_t given_len, const char *want);

#endif

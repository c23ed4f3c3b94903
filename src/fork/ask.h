/*
 * The client that asks the members of a follow-mode tree (fork.h): one
 * HTTP/1.0 request, the same for all, written to each member's Unix socket
 * at once, and each answer read until the member closes its end, then
 * parsed into its status, body and the headers a relay keeps. Bounded:
 * a deadline for all, a size for each answer, a cancel flag.
 * Context: agent.
 */
#ifndef PP_ASK_H
#define PP_ASK_H

#include <stdatomic.h>
#include <stddef.h>
#include <sys/types.h>

#include "util/buf.h"

/* One member asked. The caller sets pid and path (and zeroes the rest);
 * pp_ask_all fills in the rest. */
struct pp_ask {
	pid_t pid;      /* the member, for notes */
	char path[108]; /* its socket ("": its path was too long) */
	int fd;
	size_t sent;
	struct pp_buf in;
	int done;
	char err[160]; /* why there is no answer (status 0) */
	/* The answer, parsed: status 0 when there is none. */
	unsigned status;
	const char *body; /* into in */
	size_t body_len;
	char ctype[128], encoding[32], disposition[128], id[32], retry[16];
};

/* What every member is asked, and the bounds. */
struct pp_ask_request {
	const char *data; /* the HTTP request, whole */
	size_t len;
	unsigned timeout_s; /* for all the answers */
	size_t max_body;    /* per answer (its headers may add 4 KiB) */
};

/* Ask each of n members at once; return once every answer is in, the
 * deadline has passed, or *cancel turned non-zero. Every ask is done
 * then: with a status, or with err saying why not. */
void pp_ask_all(struct pp_ask *asks, size_t n, const struct pp_ask_request *q,
                const atomic_int *cancel);
/* Parse what a member said (the bytes in a->in): sets status, body and
 * headers, or err. pp_ask_all calls it; tests feed it answers. */
void pp_ask_parse(struct pp_ask *a);
/* The memory of an ask's answer. */
void pp_ask_free(struct pp_ask *a);

#endif

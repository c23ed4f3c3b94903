/*
 * A follow-mode tree's answer (fork.h): every member asked (ask.h) and
 * their answers made one — the pprof profiles merged (profile/merge.h),
 * each sample labelled with its pid; the goroutine dump's texts one after
 * the other under a line naming each process; what went wrong with a
 * member said in a comment — or, for ?pid=N, one member's answer relayed
 * as it is. Runs on the server's "pullprof-tree" threads (a lookup job,
 * server/lookup.h), never on the HTTP thread.
 * Context: agent.
 */
#ifndef PP_GATHER_H
#define PP_GATHER_H

#include <stdatomic.h>
#include <stddef.h>
#include <sys/types.h>

#include "fork/ask.h"
#include "server/lookup.h"

/* Most members one request gathers from; more are named in a comment. */
#define PP_GATHER_MAX_MEMBERS 1024

/* One gathering, built by the HTTP side (tree.c) from the request. */
struct pp_gather {
	char *request; /* the HTTP request every member is asked, whole */
	size_t request_len;
	unsigned timeout_s;
	size_t max_body;  /* per member */
	size_t max_bytes; /* the merged profile's bound */
	pid_t only;       /* ?pid=N: that one, relayed; 0: every member */
	int text;         /* goroutine debug=1|2: the texts in a row */
	const char *route;
};

/* The lookup job (pp_lookup_fn): ask the members, answer into out. */
void pp_gather_run(void *arg, const atomic_int *cancel,
                   struct pp_lookup_answer *out);
/* Its free_arg: the gathering and its request. */
void pp_gather_free(void *arg);

/* The answer of the whole tree from n members' answers (the asks done;
 * total: how many members the tree has, n or more, the rest left out).
 * Separate from the asking so that tests feed it answers. */
void pp_gather_answer(const struct pp_gather *g, const struct pp_ask *asks,
                      size_t n, size_t total, struct pp_lookup_answer *out);
/* ?pid=N: one member's answer, as it is (or 502 saying why there is none). */
void pp_gather_relay(const struct pp_ask *a, struct pp_lookup_answer *out);

/* The command line of pid as ps shows it (NULs as spaces), into out. */
void pp_gather_command_of(pid_t pid, char *out, size_t len);

#endif

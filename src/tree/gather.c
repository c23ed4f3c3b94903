/*
 * A tree's answer from its members' answers (gather.h).
 * Context: agent.
 *
 * The steps: the members to ask (members_to_ask), asked at once
 * (ask.c), then either one relayed (?pid=N) or all sorted into the
 * profiles that count and a note for each that does not (sort_answers),
 * and answered: an error when none counts (answer_none), the texts in a
 * row (answer_texts), or the profiles merged, a member whose answer is
 * not a profile left out with a note (answer_merged).
 */
#include "gather.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fork/fork.h"
#include "profile/merge.h"
#include "server/respond.h"
#include "util/buf.h"
#include "util/proc.h"

static void no_memory(struct pp_lookup_answer *out)
{
	out->status = MHD_HTTP_SERVICE_UNAVAILABLE;
	snprintf(out->msg, sizeof out->msg, "out of memory");
}

/* What went wrong with one member, for a comment or an error. */
static void describe(const struct pp_ask *f, char *out, size_t len)
{
	if (f->status) {
		/* Its error's first line. */
		size_t n = strcspn(f->body ? f->body : "", "\n");
		if (n > 200)
			n = 200;
		snprintf(out, len, "pid %d: %u %.*s", (int)f->pid, f->status,
		         (int)n, f->body ? f->body : "");
	} else {
		snprintf(out, len, "pid %d: %s", (int)f->pid, f->err);
	}
}

static void set_header(struct pp_lookup_answer *a, size_t i, const char *name,
                       const char *value)
{
	if (!value[0])
		return;
	snprintf(a->headers[i][0], sizeof a->headers[i][0], "%s", name);
	snprintf(a->headers[i][1], sizeof a->headers[i][1], "%s", value);
}

void pp_gather_relay(const struct pp_ask *f, struct pp_lookup_answer *out)
{
	if (!f->status) {
		out->status = MHD_HTTP_BAD_GATEWAY;
		snprintf(out->msg, sizeof out->msg,
		         "process %d did not answer: %s", (int)f->pid, f->err);
		return;
	}
	out->verbatim = 1;
	out->status = f->status;
	snprintf(out->ctype, sizeof out->ctype, "%s",
	         f->ctype[0] ? f->ctype : "application/octet-stream");
	set_header(out, 0, "Content-Encoding", f->encoding);
	set_header(out, 1, "Content-Disposition", f->disposition);
	set_header(out, 2, "X-Pullprof-Profile-Id", f->id);
	set_header(out, 3, "Retry-After", f->retry);
	out->len = f->body_len;
	out->body = malloc(f->body_len ? f->body_len : 1);
	if (!out->body) {
		out->verbatim = 0;
		out->status = MHD_HTTP_SERVICE_UNAVAILABLE;
		snprintf(out->msg, sizeof out->msg, "out of memory");
		return;
	}
	memcpy(out->body, f->body, f->body_len);
}

void pp_gather_command_of(pid_t pid, char *out, size_t len)
{
	char path[40], *data = NULL;
	size_t n = 0;
	snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
	out[0] = 0;
	if (pp_proc_read_file(path, 4096, &data, &n) != 0)
		return;
	while (n && data[n - 1] == 0)
		n--;
	for (size_t i = 0; i < n; i++)
		if (data[i] == 0 || data[i] == '\n')
			data[i] = ' ';
	snprintf(out, len, "%.*s", (int)n, data);
	free(data);
}

/* The comments of a merged answer (lines of a text one). */
struct notes {
	char **v;
	size_t n;
};

/* The answers that count (the profiles, in parts), and a note for each
 * that does not. */
struct sorted {
	struct pp_merge_part *parts;
	size_t nparts;
	struct notes notes;
	const struct pp_ask *first_error; /* a member's refusal, if any */
};

static void sorted_free(struct sorted *s)
{
	for (size_t i = 0; s->notes.v && i < s->notes.n; i++)
		free(s->notes.v[i]);
	free(s->notes.v);
	free(s->parts);
}

static int sort_answers(const struct pp_ask *asks, size_t n, size_t total,
                        struct sorted *s)
{
	s->parts = calloc(n ? n : 1, sizeof *s->parts);
	/* A note per member at most, twice for one whose answer is no
	 * profile, and the one about members left out. */
	s->notes.v = calloc(2 * n + 2, sizeof *s->notes.v);
	if (!s->parts || !s->notes.v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct pp_ask *f = &asks[i];
		if (f->status == MHD_HTTP_OK) {
			s->parts[s->nparts].pid = (int)f->pid;
			s->parts[s->nparts].data = f->body;
			s->parts[s->nparts].len = f->body_len;
			s->nparts++;
			continue;
		}
		/* The root's own refusal (a bad parameter) speaks for all. */
		if (f->status && (!s->first_error || f->pid == getpid()))
			s->first_error = f;
		char line[320];
		describe(f, line, sizeof line);
		s->notes.v[s->notes.n++] = strdup(line);
	}
	if (total > n) {
		char line[160];
		snprintf(line, sizeof line,
		         "%zu processes of the tree were left out: at most %d "
		         "are gathered",
		         total - n, PP_GATHER_MAX_MEMBERS);
		s->notes.v[s->notes.n++] = strdup(line);
	}
	return 0;
}

/* No answer counts: the root's refusal speaks for all, else 503. */
static void answer_none(const struct sorted *s, struct pp_lookup_answer *out)
{
	if (s->first_error) {
		pp_gather_relay(s->first_error, out);
		return;
	}
	out->status = MHD_HTTP_SERVICE_UNAVAILABLE;
	snprintf(out->msg, sizeof out->msg,
	         "no process of the tree answered%s%s", s->notes.n ? ": " : "",
	         s->notes.n && s->notes.v[0] ? s->notes.v[0] : "");
}

/* The dumps one after the other, each under its process. */
static void answer_texts(const struct pp_ask *asks, size_t n,
                         const struct sorted *s, struct pp_lookup_answer *out)
{
	struct pp_buf b = {0};
	for (size_t i = 0; i < n; i++) {
		const struct pp_ask *f = &asks[i];
		if (f->status != MHD_HTTP_OK)
			continue;
		char cmd[256];
		pp_gather_command_of(f->pid, cmd, sizeof cmd);
		pp_buf_printf(&b, "=== pid %d: %s\n\n", (int)f->pid, cmd);
		pp_buf_append(&b, f->body, f->body_len);
		pp_buf_append(&b, "\n", 1);
	}
	for (size_t i = 0; i < s->notes.n; i++)
		if (s->notes.v[i])
			pp_buf_printf(&b, "=== %s\n", s->notes.v[i]);
	out->body = pp_buf_take(&b, &out->len);
	if (!out->body) {
		no_memory(out);
		return;
	}
	out->status = MHD_HTTP_OK;
	out->verbatim = 1;
	snprintf(out->ctype, sizeof out->ctype, "text/plain; charset=utf-8");
}

/* A member answered something that is not a profile: it is left out, with
 * a note, and the others kept. Returns how many are kept. */
static size_t leave_out_non_profiles(struct sorted *s)
{
	size_t kept = 0;
	for (size_t i = 0; i < s->nparts; i++) {
		struct pp_pprof_decoded d = {0};
		char why[200] = "";
		int bad = pp_pprof_read(s->parts[i].data, s->parts[i].len, &d,
		                        why, sizeof why);
		pp_pprof_read_free(&d);
		if (bad == -EINVAL) {
			char line[300];
			snprintf(line, sizeof line,
			         "pid %d: left out, its answer is not a "
			         "profile: %s",
			         s->parts[i].pid, why);
			s->notes.v[s->notes.n++] = strdup(line);
			continue;
		}
		s->parts[kept++] = s->parts[i];
	}
	return kept;
}

/* The profiles merged into one, the notes as its comments. */
static void answer_merged(const struct pp_gather *g, struct sorted *s,
                          struct pp_lookup_answer *out)
{
	struct pp_merge_opts mo = {
	    .max_bytes = g->max_bytes,
	    .notes = (const char *const *)s->notes.v,
	    .nnotes = s->notes.n,
	};
	char err[300] = "";
	char *body = NULL;
	size_t len = 0;
	int rc = pp_merge_pprof(s->parts, s->nparts, &mo, &body, &len, err,
	                        sizeof err);
	if (rc == -EINVAL && s->nparts > 1) {
		size_t kept = leave_out_non_profiles(s);
		if (kept && kept < s->nparts) {
			mo.nnotes = s->notes.n;
			err[0] = 0;
			rc = pp_merge_pprof(s->parts, kept, &mo, &body, &len,
			                    err, sizeof err);
		}
	}
	if (rc) {
		out->status = rc == -ENOMEM ? MHD_HTTP_SERVICE_UNAVAILABLE
		                            : MHD_HTTP_BAD_GATEWAY;
		snprintf(out->msg, sizeof out->msg,
		         "the tree's profiles could not be merged: %s",
		         err[0] ? err : strerror(-rc));
		return;
	}
	out->status = MHD_HTTP_OK;
	out->verbatim = 1;
	snprintf(out->ctype, sizeof out->ctype, "%s",
	         pp_format_content_type(PP_FORMAT_PPROF));
	out->body = body;
	out->len = len;
}

void pp_gather_answer(const struct pp_gather *g, const struct pp_ask *asks,
                      size_t n, size_t total, struct pp_lookup_answer *out)
{
	struct sorted s = {0};
	if (sort_answers(asks, n, total, &s))
		no_memory(out);
	else if (!s.nparts)
		answer_none(&s, out);
	else if (g->text)
		answer_texts(asks, n, &s, out);
	else
		answer_merged(g, &s, out);
	sorted_free(&s);
}

/* The members to ask, each with its socket: the one of ?pid=N, or every
 * member of the tree (at most PP_GATHER_MAX_MEMBERS; *total says how many
 * there are). NULL on ENOMEM. */
static struct pp_ask *members_to_ask(const struct pp_gather *g, size_t *n,
                                     size_t *total)
{
	pid_t *pids = calloc(PP_GATHER_MAX_MEMBERS, sizeof *pids);
	if (!pids)
		return NULL;
	*total = *n = 1;
	if (g->only)
		pids[0] = g->only;
	else
		*n = *total = pp_tree_members(pids, PP_GATHER_MAX_MEMBERS);
	if (*n > PP_GATHER_MAX_MEMBERS)
		*n = PP_GATHER_MAX_MEMBERS;
	struct pp_ask *asks = calloc(*n ? *n : 1, sizeof *asks);
	for (size_t i = 0; asks && i < *n; i++) {
		asks[i].pid = pids[i];
		if (pp_tree_socket(pids[i], asks[i].path, sizeof asks[i].path))
			asks[i].path[0] = 0; /* too long: ask.c says so */
	}
	free(pids);
	return asks;
}

void pp_gather_run(void *arg, const atomic_int *cancel,
                   struct pp_lookup_answer *out)
{
	const struct pp_gather *g = arg;
	size_t n, total;
	struct pp_ask *asks = members_to_ask(g, &n, &total);
	if (!asks) {
		no_memory(out);
		return;
	}
	struct pp_ask_request q = {g->request, g->request_len, g->timeout_s,
	                           g->max_body};
	pp_ask_all(asks, n, &q, cancel);
	if (g->only)
		pp_gather_relay(&asks[0], out);
	else
		pp_gather_answer(g, asks, n, total, out);
	for (size_t i = 0; i < n; i++)
		pp_ask_free(&asks[i]);
	free(asks);
}

void pp_gather_free(void *arg)
{
	struct pp_gather *g = arg;
	free(g->request);
	free(g);
}

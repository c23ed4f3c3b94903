/*
 * Follow mode's answers for the whole tree of processes (fork.h). Agent
 * context.
 *
 * The configured address belongs to the tree's root. A profile asked of it
 * is asked of every member — the root included, through its own socket —
 * with the same path and query, at once; the pprof answers are merged into
 * one (profile/merge.h), each sample labelled with its pid, and the
 * goroutine dump's texts (debug=1, 2) are put one after the other under a
 * line naming each process. ?pid=N asks one process and relays its answer
 * as it is, whatever the endpoint and format. The fetching runs on the
 * server's "pullprof-tree" threads, never on the HTTP thread.
 */
#include "tree.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "fork.h"
#include "handlers.h"
#include "lookup.h"
#include "profile/merge.h"
#include "respond.h"
#include "server.h"
#include "util/buf.h"
#include "util/fds.h"
#include "util/proc.h"

/* Most members one request gathers from; more are named in a comment. */
#define MAX_MEMBERS 1024
/* Past the profile's own seconds, how long a member may take to answer. */
#define GRACE_SECONDS 30

/* The endpoints whose profiles merge. */
static const char *const mergeable[] = {
    "profile", "heap",  "allocs", "goroutine", "threadcreate",
    "mutex",   "block", "wall",   "fgprof",
};

static int is_mergeable(const struct pp_route *rt)
{
	for (size_t i = 0; i < sizeof mergeable / sizeof mergeable[0]; i++)
		if (strcmp(rt->name, mergeable[i]) == 0)
			return 1;
	return 0;
}

/* ---- the request to relay ------------------------------------------------ */

static int unreserved(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	       c == '~';
}

static void put_escaped(struct pp_buf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (unreserved(c)) {
			pp_buf_append(b, s, 1);
		} else {
			char e[3] = {'%', hex[c >> 4], hex[c & 15]};
			pp_buf_append(b, e, 3);
		}
	}
}

struct query_copy {
	struct pp_buf *b;
	int n;
};

static enum MHD_Result copy_arg(void *cls, enum MHD_ValueKind kind,
                                const char *key, const char *value)
{
	struct query_copy *q = cls;
	(void)kind;
	if (strcmp(key, "pid") == 0)
		return MHD_YES;
	pp_buf_append(q->b, q->n++ ? "&" : "?", 1);
	put_escaped(q->b, key);
	if (value) {
		pp_buf_append(q->b, "=", 1);
		put_escaped(q->b, value);
	}
	return MHD_YES;
}

/* One fetch, the same for every member. */
struct gather {
	char *request; /* the HTTP request, whole */
	size_t request_len;
	unsigned timeout_s;
	size_t max_body;  /* per member */
	size_t max_bytes; /* the merged profile's bound */
	pid_t only;       /* ?pid=N: that one, relayed; 0: every member */
	int text;         /* goroutine debug=1|2: the texts in a row */
	const char *route;
	enum pp_format format;
};

static void gather_free(void *arg)
{
	struct gather *g = arg;
	free(g->request);
	free(g);
}

/* ---- fetching ---------------------------------------------------------- */

struct fetch {
	pid_t pid;
	int fd;
	size_t sent;
	struct pp_buf in;
	int done;
	char err[160];
	/* The answer, parsed. */
	unsigned status;
	const char *body;
	size_t body_len;
	char ctype[128], encoding[32], disposition[128], id[32], retry[16];
};

static int open_member(struct fetch *f)
{
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	if (pp_tree_socket(f->pid, un.sun_path, sizeof un.sun_path)) {
		snprintf(f->err, sizeof f->err, "its socket path is too long");
		return -1;
	}
	if (!pp_fds_room()) {
		snprintf(f->err, sizeof f->err,
		         "no descriptor left in the agent's share");
		return -1;
	}
	f->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (f->fd < 0) {
		snprintf(f->err, sizeof f->err, "socket: %s", strerror(errno));
		return -1;
	}
	pp_fds_add(1);
	if (connect(f->fd, (struct sockaddr *)&un, sizeof un) < 0 &&
	    errno != EINPROGRESS && errno != EAGAIN) {
		snprintf(f->err, sizeof f->err, "cannot connect: %s",
		         strerror(errno));
		return -1;
	}
	return 0;
}

static void close_member(struct fetch *f)
{
	if (f->fd >= 0) {
		close(f->fd);
		pp_fds_add(-1);
		f->fd = -1;
	}
	f->done = 1;
}

static void header_value(const char *h, size_t n, const char *name, char *out,
                         size_t outlen)
{
	size_t k = strlen(name);
	if (n <= k + 1 || strncasecmp(h, name, k) != 0 || h[k] != ':')
		return;
	const char *v = h + k + 1;
	while (v < h + n && *v == ' ')
		v++;
	size_t len = (size_t)(h + n - v);
	if (len >= outlen)
		len = outlen - 1;
	memcpy(out, v, len);
	out[len] = 0;
}

/* The member closed its end: parse what it said. */
static void parse_answer(struct fetch *f)
{
	const char *p = f->in.data, *end = p + f->in.len;
	const char *head_end =
	    f->in.len ? memmem(p, f->in.len, "\r\n\r\n", 4) : NULL;
	unsigned status = 0;
	if (!head_end || sscanf(p, "HTTP/1.%*c %u", &status) != 1 ||
	    status < 100 || status > 599) {
		snprintf(f->err, sizeof f->err,
		         f->in.len ? "not an HTTP answer" : "no answer");
		return;
	}
	const char *line = memchr(p, '\n', (size_t)(head_end - p));
	while (line && line < head_end) {
		line++;
		const char *eol = memchr(line, '\r', (size_t)(end - line));
		if (!eol || eol > head_end)
			eol = head_end;
		size_t n = (size_t)(eol - line);
		header_value(line, n, "Content-Type", f->ctype,
		             sizeof f->ctype);
		header_value(line, n, "Content-Encoding", f->encoding,
		             sizeof f->encoding);
		header_value(line, n, "Content-Disposition", f->disposition,
		             sizeof f->disposition);
		header_value(line, n, "X-Pullprof-Profile-Id", f->id,
		             sizeof f->id);
		header_value(line, n, "Retry-After", f->retry, sizeof f->retry);
		line = memchr(eol, '\n', (size_t)(end - eol));
	}
	f->status = status;
	f->body = head_end + 4;
	f->body_len = (size_t)(end - f->body);
}

/* Ask each of n members at once; wait for every answer, the deadline, or
 * the cancel flag. */
static void fetch_all(struct fetch *fs, size_t n, const struct gather *g,
                      const atomic_int *cancel)
{
	struct pollfd *pfd = calloc(n ? n : 1, sizeof *pfd);
	if (!pfd) {
		for (size_t i = 0; i < n; i++) {
			snprintf(fs[i].err, sizeof fs[i].err, "out of memory");
			fs[i].done = 1;
		}
		return;
	}
	for (size_t i = 0; i < n; i++) {
		fs[i].fd = -1;
		if (open_member(&fs[i]))
			close_member(&fs[i]);
	}
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		size_t np = 0;
		for (size_t i = 0; i < n; i++) {
			if (fs[i].done)
				continue;
			pfd[np].fd = fs[i].fd;
			pfd[np].events =
			    fs[i].sent < g->request_len ? POLLOUT : POLLIN;
			pfd[np].revents = 0;
			np++;
		}
		if (!np || atomic_load(cancel))
			break;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - t0.tv_sec >= (time_t)g->timeout_s)
			break;
		if (poll(pfd, np, 100) < 0 && errno != EINTR)
			break;
		size_t k = 0;
		for (size_t i = 0; i < n; i++) {
			if (fs[i].done)
				continue;
			struct pollfd *p = &pfd[k++];
			struct fetch *f = &fs[i];
			if (!p->revents)
				continue;
			if (f->sent < g->request_len) {
				ssize_t w = send(f->fd, g->request + f->sent,
				                 g->request_len - f->sent,
				                 MSG_NOSIGNAL);
				if (w > 0) {
					f->sent += (size_t)w;
				} else if (w < 0 && errno != EAGAIN) {
					snprintf(f->err, sizeof f->err,
					         "cannot send: %s",
					         strerror(errno));
					close_member(f);
				}
				continue;
			}
			char buf[65536];
			ssize_t r = recv(f->fd, buf, sizeof buf, 0);
			if (r > 0) {
				if (f->in.len + (size_t)r >
				    g->max_body + 4096) {
					snprintf(f->err, sizeof f->err,
					         "its answer is over %zu MiB",
					         g->max_body >> 20);
					close_member(f);
				} else {
					pp_buf_append(&f->in, buf, (size_t)r);
					if (f->in.failed) {
						snprintf(f->err, sizeof f->err,
						         "out of memory");
						close_member(f);
					}
				}
			} else if (r == 0) {
				close_member(f);
				parse_answer(f);
			} else if (errno != EAGAIN && errno != EINTR) {
				snprintf(f->err, sizeof f->err,
				         "cannot read: %s", strerror(errno));
				close_member(f);
			}
		}
	}
	for (size_t i = 0; i < n; i++)
		if (!fs[i].done) {
			snprintf(fs[i].err, sizeof fs[i].err,
			         atomic_load(cancel) ? "cancelled"
			                             : "no answer within %u s",
			         g->timeout_s);
			close_member(&fs[i]);
		}
	free(pfd);
}

/* What went wrong with one member, for a comment or an error. */
static void describe(const struct fetch *f, char *out, size_t len)
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

/* ?pid=N: that member's answer, as it is. */
static void relay(struct fetch *f, struct pp_lookup_answer *out)
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

/* The command line of pid as ps shows it (NULs as spaces), into out. */
static void command_of(pid_t pid, char *out, size_t len)
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

static void gather(void *arg, const atomic_int *cancel,
                   struct pp_lookup_answer *out)
{
	struct gather *g = arg;
	pid_t *pids = calloc(MAX_MEMBERS, sizeof *pids);
	if (!pids) {
		out->status = MHD_HTTP_SERVICE_UNAVAILABLE;
		snprintf(out->msg, sizeof out->msg, "out of memory");
		return;
	}
	size_t total = 1, n = 1;
	if (g->only)
		pids[0] = g->only;
	else
		n = total = pp_tree_members(pids, MAX_MEMBERS);
	if (n > MAX_MEMBERS)
		n = MAX_MEMBERS;
	struct fetch *fs = calloc(n ? n : 1, sizeof *fs);
	if (!fs) {
		free(pids);
		out->status = MHD_HTTP_SERVICE_UNAVAILABLE;
		snprintf(out->msg, sizeof out->msg, "out of memory");
		return;
	}
	for (size_t i = 0; i < n; i++)
		fs[i].pid = pids[i];
	fetch_all(fs, n, g, cancel);

	if (g->only) {
		relay(&fs[0], out);
		goto done;
	}
	/* The answers that count, and a note for each that does not. */
	struct pp_merge_part *parts = calloc(n ? n : 1, sizeof *parts);
	/* A note per member at most, twice for one whose answer is no
	 * profile, and the one about members left out. */
	char **notes = calloc(2 * n + 2, sizeof *notes);
	size_t nparts = 0, nnotes = 0;
	struct fetch *first_error = NULL;
	if (!parts || !notes) {
		out->status = MHD_HTTP_SERVICE_UNAVAILABLE;
		snprintf(out->msg, sizeof out->msg, "out of memory");
		goto merged;
	}
	for (size_t i = 0; i < n; i++) {
		struct fetch *f = &fs[i];
		if (f->status == MHD_HTTP_OK) {
			parts[nparts].pid = (int)f->pid;
			parts[nparts].data = f->body;
			parts[nparts].len = f->body_len;
			nparts++;
			continue;
		}
		/* The root's own refusal (a bad parameter) speaks for all. */
		if (f->status && (!first_error || f->pid == getpid()))
			first_error = f;
		char line[320];
		describe(f, line, sizeof line);
		notes[nnotes++] = strdup(line);
	}
	if (total > n) {
		char line[160];
		snprintf(line, sizeof line,
		         "%zu processes of the tree were left out: at most %d "
		         "are gathered",
		         total - n, MAX_MEMBERS);
		notes[nnotes++] = strdup(line);
	}
	if (!nparts) {
		if (first_error) {
			relay(first_error, out);
		} else {
			out->status = MHD_HTTP_SERVICE_UNAVAILABLE;
			snprintf(out->msg, sizeof out->msg,
			         "no process of the tree answered%s%s",
			         nnotes ? ": " : "",
			         nnotes && notes[0] ? notes[0] : "");
		}
		goto merged;
	}
	if (g->text) {
		/* The dumps one after the other, each under its process. */
		struct pp_buf b = {0};
		for (size_t i = 0; i < n; i++) {
			struct fetch *f = &fs[i];
			if (f->status != MHD_HTTP_OK)
				continue;
			char cmd[256];
			command_of(f->pid, cmd, sizeof cmd);
			pp_buf_printf(&b, "=== pid %d: %s\n\n", (int)f->pid,
			              cmd);
			pp_buf_append(&b, f->body, f->body_len);
			pp_buf_append(&b, "\n", 1);
		}
		for (size_t i = 0; i < nnotes; i++)
			if (notes[i])
				pp_buf_printf(&b, "=== %s\n", notes[i]);
		out->body = pp_buf_take(&b, &out->len);
		if (!out->body) {
			out->status = MHD_HTTP_SERVICE_UNAVAILABLE;
			snprintf(out->msg, sizeof out->msg, "out of memory");
			goto merged;
		}
		out->status = MHD_HTTP_OK;
		out->verbatim = 1;
		snprintf(out->ctype, sizeof out->ctype,
		         "text/plain; charset=utf-8");
		goto merged;
	}
	struct pp_merge_opts mo = {
	    .max_bytes = g->max_bytes,
	    .notes = (const char *const *)notes,
	    .nnotes = nnotes,
	};
	char err[300] = "";
	char *body = NULL;
	size_t len = 0;
	int rc =
	    pp_merge_pprof(parts, nparts, &mo, &body, &len, err, sizeof err);
	if (rc == -EINVAL && nparts > 1) {
		/* A member answered something that is not a profile: it is
		 * left out, with a note, and the others merged. */
		size_t kept = 0;
		for (size_t i = 0; i < nparts; i++) {
			struct pp_pprof_decoded d = {0};
			char why[200] = "";
			int bad = pp_pprof_read(parts[i].data, parts[i].len, &d,
			                        why, sizeof why);
			pp_pprof_read_free(&d);
			if (bad == -EINVAL) {
				char line[300];
				snprintf(
				    line, sizeof line,
				    "pid %d: left out, its answer is not a "
				    "profile: %s",
				    parts[i].pid, why);
				notes[nnotes++] = strdup(line);
				continue;
			}
			parts[kept++] = parts[i];
		}
		if (kept && kept < nparts) {
			mo.nnotes = nnotes;
			err[0] = 0;
			rc = pp_merge_pprof(parts, kept, &mo, &body, &len, err,
			                    sizeof err);
		}
	}
	if (rc) {
		out->status = rc == -ENOMEM ? MHD_HTTP_SERVICE_UNAVAILABLE
		                            : MHD_HTTP_BAD_GATEWAY;
		snprintf(out->msg, sizeof out->msg,
		         "the tree's profiles could not be merged: %s",
		         err[0] ? err : strerror(-rc));
		goto merged;
	}
	out->status = MHD_HTTP_OK;
	out->verbatim = 1;
	snprintf(out->ctype, sizeof out->ctype, "%s",
	         pp_format_content_type(PP_FORMAT_PPROF));
	out->body = body;
	out->len = len;
merged:
	for (size_t i = 0; notes && i < nnotes; i++)
		free(notes[i]);
	free(notes);
	free(parts);
done:
	for (size_t i = 0; i < n; i++)
		pp_buf_free(&fs[i].in);
	free(fs);
	free(pids);
}

/* ---- dispatch ----------------------------------------------------------- */

static int parse_pid(const char *s, pid_t *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v <= 0 || v > 0x7fffffff ||
	    s[0] == '+' || s[0] == ' ')
		return -EINVAL;
	*out = (pid_t)v;
	return 0;
}

static int is_member(pid_t pid)
{
	pid_t pids[MAX_MEMBERS];
	size_t n = pp_tree_members(pids, MAX_MEMBERS);
	for (size_t i = 0; i < n && i < MAX_MEMBERS; i++)
		if (pids[i] == pid)
			return 1;
	return 0;
}

static struct gather *new_gather(struct pp_request *r, pid_t only)
{
	struct gather *g = calloc(1, sizeof *g);
	struct pp_buf b = {0};
	if (!g)
		return NULL;
	const struct pp_config *cfg = r->srv->cfg;
	pp_buf_printf(&b, "GET %s", r->url);
	struct query_copy q = {&b, 0};
	MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, copy_arg, &q);
	pp_buf_printf(&b, " HTTP/1.0\r\nHost: localhost\r\n");
	/* Relayed as asked: the member decides on gzip. Gathered: plain
	 * text, to be put together. */
	const char *ae = MHD_lookup_connection_value(
	    r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING);
	if (only && ae && strlen(ae) < 200)
		pp_buf_printf(&b, "Accept-Encoding: %s\r\n", ae);
	pp_buf_printf(&b, "Connection: close\r\n\r\n");
	if (b.failed) {
		pp_buf_free(&b);
		free(g);
		return NULL;
	}
	g->request = pp_buf_take(&b, &g->request_len);
	unsigned seconds = 0;
	const char *sec = MHD_lookup_connection_value(
	    r->conn, MHD_GET_ARGUMENT_KIND, "seconds");
	if (sec) {
		char *end;
		unsigned long v = strtoul(sec, &end, 10);
		if (!*end && v < 100000)
			seconds = (unsigned)v;
	} else if (strcmp(r->route->name, "profile") == 0 ||
	           strcmp(r->route->name, "wall") == 0 ||
	           strcmp(r->route->name, "fgprof") == 0) {
		seconds = 30; /* their default */
	}
	g->timeout_s = seconds + GRACE_SECONDS;
	g->max_bytes = (size_t)cfg->v.max_profile_mb << 20;
	g->max_body = g->max_bytes;
	g->only = only;
	g->route = r->route->name;
	return g;
}

int pp_tree_dispatch(struct pp_request *r, enum MHD_Result *ret)
{
	const char *pid_text =
	    MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "pid");
	struct pp_lookups *pool = r->srv->tree;
	pid_t pid = 0;

	if (pid_text) {
		if (parse_pid(pid_text, &pid)) {
			*ret = pp_respond_error(
			    r, MHD_HTTP_BAD_REQUEST,
			    "pid: \"%.32s\" is not a process id", pid_text);
			return 1;
		}
		if (pid == getpid())
			return 0; /* this process: answered here */
		if (!pool) {
			*ret = pp_respond_error(
			    r, MHD_HTTP_NOT_FOUND,
			    "pid %d: this agent answers for its own process "
			    "only (pid %d)%s",
			    (int)pid, (int)getpid(),
			    pp_tree_dir()[0] ? ""
			                     : "; PULLPROF_FORK=follow "
			                       "makes it answer for its "
			                       "forked children");
			return 1;
		}
		if (!is_member(pid)) {
			*ret = pp_respond_error(
			    r, MHD_HTTP_NOT_FOUND,
			    "pid %d is not a live process of this tree; "
			    "%s/children lists them",
			    (int)pid, r->srv->cfg->v.prefix);
			return 1;
		}
		if (strcmp(r->method, "GET") != 0 &&
		    strcmp(r->method, "HEAD") != 0) {
			*ret = pp_respond_error(
			    r, MHD_HTTP_BAD_REQUEST,
			    "pid: only GET and HEAD requests are relayed to "
			    "another process");
			return 1;
		}
	} else {
		if (!pool || !is_mergeable(r->route))
			return 0;
		const char *format = MHD_lookup_connection_value(
		    r->conn, MHD_GET_ARGUMENT_KIND, "format");
		const char *debug = MHD_lookup_connection_value(
		    r->conn, MHD_GET_ARGUMENT_KIND, "debug");
		const char *id = MHD_lookup_connection_value(
		    r->conn, MHD_GET_ARGUMENT_KIND, "id");
		int dump = strcmp(r->route->name, "goroutine") == 0 && debug &&
		           (strcmp(debug, "1") == 0 || strcmp(debug, "2") == 0);
		int pprof = (!format || strcmp(format, "pprof") == 0) &&
		            (!debug || strcmp(debug, "0") == 0);
		if (id) {
			*ret = pp_respond_error(
			    r, MHD_HTTP_BAD_REQUEST,
			    "id: a kept profile belongs to one process; add "
			    "pid=N (%s/children lists them)",
			    r->srv->cfg->v.prefix);
			return 1;
		}
		if (!pprof && !dump) {
			*ret = pp_respond_error(
			    r, MHD_HTTP_BAD_REQUEST,
			    "%s%s%s%s%s: this address answers for the whole "
			    "tree of processes (PULLPROF_FORK=follow) with "
			    "their profiles merged, in pprof only (and "
			    "goroutine's debug=1 and 2 texts); add pid=N for "
			    "one process's in any format (%s/children lists "
			    "them)",
			    format ? "format=" : "", format ? format : "",
			    format && debug ? ", " : "", debug ? "debug=" : "",
			    debug ? debug : "", r->srv->cfg->v.prefix);
			return 1;
		}
		if (pp_respond_full(r)) {
			*ret = pp_respond_busy(r);
			return 1;
		}
		struct gather *g = new_gather(r, 0);
		if (!g) {
			*ret = pp_respond_error(r, MHD_HTTP_SERVICE_UNAVAILABLE,
			                        "%s: out of memory",
			                        r->route->name);
			return 1;
		}
		g->text = dump;
		*ret = pp_lookup_answer_on(pool, r, gather, g, gather_free);
		return 1;
	}
	if (pp_respond_full(r)) {
		*ret = pp_respond_busy(r);
		return 1;
	}
	struct gather *g = new_gather(r, pid);
	if (!g) {
		*ret = pp_respond_error(r, MHD_HTTP_SERVICE_UNAVAILABLE,
		                        "%s: out of memory", r->route->name);
		return 1;
	}
	*ret = pp_lookup_answer_on(pool, r, gather, g, gather_free);
	return 1;
}

/* ---- /children ---------------------------------------------------------- */

static struct json_object *process_json(pid_t pid, pid_t root)
{
	struct json_object *o = json_object_new_object();
	char path[48], *data = NULL;
	size_t n = 0;
	json_object_object_add(o, "pid", json_object_new_int(pid));
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (pp_proc_read_file(path, 4096, &data, &n) == 0) {
		/* "pid (comm) S ppid": comm may hold anything; the last ')'
		 * ends it. */
		const char *close = NULL;
		for (size_t i = 0; i < n; i++)
			if (data[i] == ')')
				close = data + i;
		const char *open = memchr(data, '(', n);
		int ppid = 0;
		if (open && close && close > open) {
			json_object_object_add(
			    o, "command",
			    pp_json_text(open + 1, (size_t)(close - open - 1)));
			if (sscanf(close + 1, " %*c %d", &ppid) == 1)
				json_object_object_add(
				    o, "ppid", json_object_new_int(ppid));
		}
		free(data);
	}
	char cmd[1024];
	command_of(pid, cmd, sizeof cmd);
	json_object_object_add(o, "cmdline", pp_json_text(cmd, strlen(cmd)));
	json_object_object_add(o, "root", json_object_new_boolean(pid == root));
	json_object_object_add(o, "self",
	                       json_object_new_boolean(pid == getpid()));
	return o;
}

enum MHD_Result pp_h_children(struct pp_request *r)
{
	const struct pp_agent *a = pp_agent_get();
	struct json_object *o = json_object_new_object();
	const char *mode =
	    a && a->cfg.v.fork_mode ? a->cfg.v.fork_mode : "adopt";
	json_object_object_add(o, "mode", json_object_new_string(mode));
	json_object_object_add(o, "pid", json_object_new_int(getpid()));
	struct json_object *list = json_object_new_array();
	if (pp_tree_dir()[0]) {
		json_object_object_add(o, "dir",
		                       json_object_new_string(pp_tree_dir()));
		json_object_object_add(o, "root",
		                       json_object_new_int(pp_tree_root()));
		pid_t *pids = calloc(MAX_MEMBERS, sizeof *pids);
		size_t n = pids ? pp_tree_members(pids, MAX_MEMBERS) : 0;
		json_object_object_add(o, "count", json_object_new_int((int)n));
		for (size_t i = 0; i < n && i < MAX_MEMBERS; i++)
			json_object_array_add(
			    list, process_json(pids[i], pp_tree_root()));
		free(pids);
	} else {
		json_object_object_add(o, "count", json_object_new_int(0));
	}
	json_object_object_add(o, "processes", list);
	return pp_respond_json(r, MHD_HTTP_OK, o);
}

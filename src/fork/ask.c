/*
 * Asking the members of a tree over their sockets (ask.h).
 * Context: agent.
 *
 * Every member's socket is non-blocking and all are polled together: one
 * slow member costs the others nothing, and the deadline bounds the whole.
 */
#include "ask.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "util/fds.h"

static int open_member(struct pp_ask *f)
{
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	if (!f->path[0] || strlen(f->path) >= sizeof un.sun_path) {
		snprintf(f->err, sizeof f->err, "its socket path is too long");
		return -1;
	}
	strcpy(un.sun_path, f->path);
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

static void close_member(struct pp_ask *f)
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
void pp_ask_parse(struct pp_ask *f)
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
void pp_ask_all(struct pp_ask *fs, size_t n, const struct pp_ask_request *g,
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
			pfd[np].events = fs[i].sent < g->len ? POLLOUT : POLLIN;
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
			struct pp_ask *f = &fs[i];
			if (!p->revents)
				continue;
			if (f->sent < g->len) {
				ssize_t w =
				    send(f->fd, g->data + f->sent,
				         g->len - f->sent, MSG_NOSIGNAL);
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
				pp_ask_parse(f);
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

void pp_ask_free(struct pp_ask *a)
{
	pp_buf_free(&a->in);
}

/* Responses: headers, error conventions, counters.
 * Context: agent.
 */
#include "respond.h"

#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "server.h"
#include "util/utf8.h"

static enum MHD_ResponseMemoryMode mem_mode(enum pp_body mode)
{
	switch (mode) {
	case PP_BODY_STATIC: return MHD_RESPMEM_PERSISTENT;
	case PP_BODY_FREE: return MHD_RESPMEM_MUST_FREE;
	default: return MHD_RESPMEM_MUST_COPY;
	}
}

static void count(struct pp_request *r, unsigned status)
{
	unsigned cls = status / 100;
	if (cls < 1 || cls > PP_STATUS_CLASSES)
		cls = PP_STATUS_CLASSES;
	atomic_fetch_add_explicit(&r->srv->stats.requests[r->counter][cls - 1],
	                          1, memory_order_relaxed);
}

/* Queue one more header for the next answer (the first free slot). */
static void add_header(struct pp_request *r, const char *name,
                       const char *value)
{
	for (size_t i = 0; i < sizeof r->headers / sizeof r->headers[0]; i++) {
		if (!r->headers[i][0]) {
			r->headers[i][0] = name;
			r->headers[i][1] = value;
			return;
		}
	}
}

int pp_respond_may_wait(struct pp_request *r, int window,
                        enum MHD_Result *answered)
{
	char why[400];
	unsigned retry = 1;
	unsigned st = pp_server_may_wait(r->srv, r->conn, window, why,
	                                 sizeof why, &retry);
	if (!st)
		return 0;
	/* The value outlives this call: the answer is built at once, but
	 * the header table holds pointers. */
	snprintf(r->retry_text, sizeof r->retry_text, "%u", retry);
	add_header(r, "Retry-After", r->retry_text);
	*answered = pp_respond_error(r, st, "%s", why);
	return 1;
}

void pp_respond_header(struct pp_request *r, const char *name,
                       const char *value)
{
	add_header(r, name, value);
}

static enum MHD_Result queue(struct pp_request *r, unsigned status,
                             struct MHD_Response *resp)
{
	enum MHD_Result ret;

	if (!resp)
		return MHD_NO; /* out of memory: libmicrohttpd drops the
		                  connection */
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	/* Profiles and status describe this instant: never cache them. */
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED && r->route)
		MHD_add_response_header(resp, "Allow", r->route->methods);
	/* A place kept past the connection limits serves one request and is
	 * given back (conns.c, on_accept). */
	if (pp_server_is_reserved(r->srv, r->conn))
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION,
		                        "close");
	for (size_t i = 0; i < sizeof r->headers / sizeof r->headers[0]; i++)
		if (r->headers[i][0])
			MHD_add_response_header(resp, r->headers[i][0],
			                        r->headers[i][1]);
	ret = MHD_queue_response(r->conn, status, resp);
	MHD_destroy_response(resp);
	if (ret == MHD_YES)
		count(r, status);
	return ret;
}

/*
 * The memory answers hold. A body handed to libmicrohttpd (PP_BODY_FREE) is
 * counted in srv->answers_bytes until it is sent (or its connection ends)
 * and freed; past PULLPROF_MAX_ANSWERS_MB a new one is refused (503), unless
 * nothing else is in flight (an answer alone over the bound still goes out)
 * or it is small (/status and errors are answered whatever happens).
 * Freed answers leave their pages in the C library's arenas, where a host
 * that allocates little would keep them for ever: after every 16 MiB freed,
 * and when the last answer in flight ends, the arenas are trimmed, giving
 * their free pages back to the system.
 */
#define PP_TRIM_EVERY (16u << 20)
/* Answers this small (status, errors) are counted but never refused. */
#define PP_ANSWER_SMALL (64u << 10)
#define PP_TRIM_LAST (1u << 20) /* when the last answer in flight ends */

struct held {
	struct pp_server *srv;
	void *body;
	size_t len;
};

static void release_answer(void *cls)
{
	struct held *h = cls;
	struct pp_server *s = h->srv;
	size_t len = h->len;
	free(h->body);
	free(h);
	size_t left = atomic_fetch_sub(&s->answers_bytes, len) - len;
	size_t freed = atomic_fetch_add(&s->answers_freed, len) + len;
	if (freed >= PP_TRIM_EVERY || (!left && freed >= PP_TRIM_LAST)) {
		atomic_store(&s->answers_freed, 0);
#ifdef __GLIBC__
		malloc_trim(0);
#endif
	}
}

int pp_respond_full(struct pp_request *r)
{
	const struct pp_server *s = r->srv;
	size_t max = (size_t)s->cfg->v.max_answers_mb << 20;
	return atomic_load(&s->answers_bytes) >= max;
}

static dev_t root_dev;
static ino_t root_ino;
static int root_known;

void pp_respond_note_root(void)
{
	struct stat st;
	if (stat("/", &st) == 0) {
		root_dev = st.st_dev;
		root_ino = st.st_ino;
		root_known = 1;
	}
}

/*
 * Every profile reads /proc/self (maps for the symbols, task for the
 * threads). A host that chroots into a tree without /proc took it away,
 * and the answer was a bare "No such file or directory": say which file,
 * why it is gone and what brings it back.
 */
int pp_respond_no_proc(char *why, size_t whylen)
{
	if (access("/proc/self/maps", R_OK) == 0)
		return 0;
	int e = errno;
	struct stat st;
	int moved = root_known && stat("/", &st) == 0 &&
	            (st.st_dev != root_dev || st.st_ino != root_ino);
	if (moved)
		snprintf(
		    why, whylen,
		    "cannot read /proc/self/maps (%s): the process chrooted "
		    "since the agent started and its new root has no /proc; "
		    "mount proc there (mount -t proc proc ROOT/proc) or "
		    "take profiles before the chroot",
		    strerror(e));
	else
		snprintf(why, whylen,
		         "cannot read /proc/self/maps (%s): /proc is not "
		         "mounted in this process's root directory; mount it "
		         "(mount -t proc proc /proc)",
		         strerror(e));
	return 1;
}

enum MHD_Result pp_respond_busy(struct pp_request *r)
{
	const struct pp_server *s = r->srv;
	atomic_fetch_add_explicit(&r->srv->stats.answers_refused, 1,
	                          memory_order_relaxed);
	r->headers[0][0] = "Retry-After";
	r->headers[0][1] = "1";
	return pp_respond_error(
	    r, MHD_HTTP_SERVICE_UNAVAILABLE,
	    "answers being sent hold %zu MiB, at the bound of %u MiB "
	    "(PULLPROF_MAX_ANSWERS_MB): try again when they are done",
	    atomic_load(&s->answers_bytes) >> 20, s->cfg->v.max_answers_mb);
}

enum MHD_Result pp_respond(struct pp_request *r, unsigned status,
                           const char *content_type, const void *body,
                           size_t len, enum pp_body mode)
{
	struct MHD_Response *resp;

	if (mode == PP_BODY_FREE) {
		struct pp_server *s = r->srv;
		size_t max = (size_t)s->cfg->v.max_answers_mb << 20;
		size_t before = atomic_fetch_add(&s->answers_bytes, len);
		struct held *h = NULL;
		if (before && before + len > max && len >= PP_ANSWER_SMALL) {
			atomic_fetch_sub(&s->answers_bytes, len);
			free((void *)body);
			return pp_respond_busy(r);
		}
		if (!(h = malloc(sizeof *h))) {
			atomic_fetch_sub(&s->answers_bytes, len);
			free((void *)body);
			return MHD_NO;
		}
		*h = (struct held){s, (void *)body, len};
		resp = MHD_create_response_from_buffer_with_free_callback_cls(
		    len, (void *)body, release_answer, h);
		if (!resp) {
			release_answer(h);
			return MHD_NO;
		}
	} else {
		resp = MHD_create_response_from_buffer(len, (void *)body,
		                                       mem_mode(mode));
	}

	if (!resp)
		return MHD_NO;
	if (content_type)
		MHD_add_response_header(resp, "Content-Type", content_type);
	return queue(r, status, resp);
}

struct json_object *pp_json_text(const char *s, size_t len)
{
	if (!s)
		return NULL;
	char *clean = pp_utf8_sanitize(s, len);
	struct json_object *v = clean ? json_object_new_string(clean) : NULL;
	free(clean);
	return v;
}

enum MHD_Result pp_respond_json(struct pp_request *r, unsigned status,
                                struct json_object *obj)
{
	size_t len = 0;
	const char *s = json_object_to_json_string_length(
	    obj, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE,
	    &len);
	enum MHD_Result ret;

	if (!s) {
		json_object_put(obj);
		return MHD_NO;
	}
	/* json-c copies a string's bytes as they are: one that is not UTF-8
	 * (a setting, a name no handler repaired) would make the whole answer
	 * invalid JSON. Repairing the text is safe: quotes, backslashes and
	 * every other byte JSON gives a meaning to are ASCII, and never part
	 * of an ill-formed sequence. Valid text, the rule, is copied. */
	struct pp_buf b = {0};
	if (pp_utf8_valid(s, len))
		pp_buf_append(&b, s, len);
	else
		pp_utf8_append(&b, s, len);
	json_object_put(obj);
	/* The newline curl users expect at the end. */
	pp_buf_append(&b, "\n", 1);
	char *body = pp_buf_take(&b, &len);
	if (!body)
		return MHD_NO;
	ret =
	    pp_respond(r, status, "application/json", body, len, PP_BODY_FREE);
	return ret;
}

enum MHD_Result pp_respond_error(struct pp_request *r, unsigned status,
                                 const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);

	if (r->kind == PP_ROUTE_JSON) {
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "error", json_object_new_string(msg));
		json_object_object_add(o, "status",
		                       json_object_new_int((int)status));
		return pp_respond_json(r, status, o);
	}

	/* As Go's net/http/pprof: the pprof tool prints the body of an answer
	 * that carries X-Go-Pprof instead of a bare status line. The message
	 * may name a path, or end in half a character where it was cut: it
	 * is sent repaired, as text. */
	struct pp_buf b = {0};
	pp_utf8_append(&b, msg, strlen(msg));
	pp_buf_append(&b, "\n", 1);
	add_header(r, "X-Go-Pprof", "1");
	enum MHD_Result ret =
	    b.failed ? MHD_NO
	             : pp_respond(r, status, "text/plain; charset=utf-8",
	                          b.data, b.len, PP_BODY_COPY);
	pp_buf_free(&b);
	return ret;
}

enum MHD_Result pp_respond_redirect(struct pp_request *r, const char *location)
{
	static const char body[] = "Found\n";
	add_header(r, "Location", location);
	return pp_respond(r, MHD_HTTP_FOUND, "text/plain; charset=utf-8", body,
	                  sizeof body - 1, PP_BODY_STATIC);
}

static void job_cleanup(struct pp_request *r)
{
	pp_job_release(r->job);
	r->job = NULL;
}

/* The headers a profile's format decides, for GET's answer and HEAD's:
 * text and JSON are gzipped for clients that take it (the answer then
 * depends on Accept-Encoding); binary formats are files to save, named
 * after the route. disposition holds that header's value until the
 * answer is queued. */
static void format_headers(struct pp_request *r, char *disposition, size_t n)
{
	const char *encoding = pp_format_encoding(&r->render);
	if (encoding)
		add_header(r, "Content-Encoding", encoding);
	if (r->render.format != PP_FORMAT_PPROF &&
	    r->render.format != PP_FORMAT_LEGACY)
		add_header(r, "Vary", "Accept-Encoding");
	const char *suffix = pp_format_attachment(r->render.format);
	if (suffix) {
		snprintf(disposition, n, "attachment; filename=\"%s%s\"",
		         r->route->name, suffix);
		add_header(r, "Content-Disposition", disposition);
	}
}

static enum MHD_Result job_answer(struct pp_request *r)
{
	char *body = NULL, disposition[96], id_text[24];
	size_t len = 0;
	uint64_t id = 0;
	int rc = pp_job_take(r->job, &body, &len, &id);

	if (rc == -ECANCELED)
		/* The client hung up (nobody reads this), or the agent is
		 * stopping. */
		return pp_respond_error(
		    r, MHD_HTTP_SERVICE_UNAVAILABLE,
		    "profile cancelled: the agent is stopping");
	char why[512];
	if (rc && pp_respond_no_proc(why, sizeof why))
		return pp_respond_error(r, MHD_HTTP_SERVICE_UNAVAILABLE,
		                        "could not build the profile: %s", why);
	if (rc)
		return pp_respond_error(r, MHD_HTTP_SERVICE_UNAVAILABLE,
		                        "could not build the profile: %s",
		                        pullprof_strerror(rc));
	if (id) {
		/* The same data in another format: ?id=N (profile/recent.h). */
		snprintf(id_text, sizeof id_text, "%llu",
		         (unsigned long long)id);
		add_header(r, "X-Pullprof-Profile-Id", id_text);
	}
	format_headers(r, disposition, sizeof disposition);
	return pp_respond(r, MHD_HTTP_OK,
	                  pp_format_content_type(r->render.format), body, len,
	                  PP_BODY_FREE);
}

/* The job's done callback: any agent thread, never blocks. */
static void job_done(void *request)
{
	struct pp_request *r = request;
	pp_server_resume(r->srv, r->conn);
}

/* No body at all: HEAD's answer, whose length is not known without making
 * the profile (RFC 9110 9.3.2: Content-Length is then left out). */
static ssize_t no_body(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)cls;
	(void)pos;
	(void)buf;
	(void)max;
	return MHD_CONTENT_READER_END_OF_STREAM;
}

/*
 * HEAD on a profile: the headers GET would get, at once, without opening a
 * window (which ran its whole length for an answer with no body) or
 * building anything. The parameters were checked by then. The length is
 * not known, so the connection is closed after it (HTTP/1.0 framing):
 * libmicrohttpd 0.9.75 would otherwise frame it chunked and send the last
 * chunk even for HEAD, which a client reads as the start of the next
 * answer; Content-Length: 0 would be false (RFC 9110 section 9.3.2).
 */
static enum MHD_Result job_head(struct pp_request *r,
                                const struct pp_job_request *rq)
{
	char disposition[96];
	r->render = rq->render;
	format_headers(r, disposition, sizeof disposition);
	struct MHD_Response *resp = MHD_create_response_from_callback(
	    MHD_SIZE_UNKNOWN, 4096, no_body, NULL, NULL);
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, "Content-Type",
	                        pp_format_content_type(r->render.format));
	MHD_set_response_options(resp, MHD_RF_HTTP_1_0_COMPATIBLE_STRICT,
	                         MHD_RO_END);
	return queue(r, MHD_HTTP_OK, resp);
}

enum MHD_Result pp_respond_job(struct pp_request *r, struct pp_job_request *rq)
{
	char err[300], retry_text[16];
	unsigned retry = 0;
	struct pp_job *job;

	if (strcmp(r->method, "HEAD") == 0)
		return job_head(r, rq);
	/* A window must leave a connection for liveness and status. */
	unsigned window = rq->id ? 0 : rq->seconds;
	enum MHD_Result refused;
	if (window && pp_respond_may_wait(r, 1, &refused))
		return refused;

	if (pp_respond_full(r))
		return pp_respond_busy(r);
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	rq->client_fd = ci ? ci->connect_fd : -1;
	rq->done = job_done;
	rq->arg = r;
	err[0] = 0;
	int rc = pp_job_open(rq, &job, &retry, err, sizeof err);
	switch (rc) {
	case 0: break;
	case -EBUSY:
		snprintf(retry_text, sizeof retry_text, "%u", retry);
		r->headers[0][0] = "Retry-After";
		r->headers[0][1] = retry_text;
		return pp_respond_error(r, MHD_HTTP_TOO_MANY_REQUESTS, "%s",
		                        err);
	case -ENOENT:
	case -ENOTSUP:
		return pp_respond_error(r, MHD_HTTP_NOT_FOUND, "%s", err);
	case -EEXIST: return pp_respond_error(r, MHD_HTTP_CONFLICT, "%s", err);
	case -ESHUTDOWN:
		return pp_respond_error(
		    r, MHD_HTTP_SERVICE_UNAVAILABLE,
		    "profile cancelled: the agent is stopping");
	default:
		return pp_respond_error(r, MHD_HTTP_SERVICE_UNAVAILABLE, "%s",
		                        err[0] ? err : pullprof_strerror(rc));
	}
	r->render = rq->render;
	r->job = job;
	r->cleanup = job_cleanup;
	r->resume = job_answer;
	pp_request_suspend(r);
	/* When it should end: a Retry-After for those it keeps out. */
	pp_server_waiting(r->srv, r->conn, 1, window);
	return MHD_YES;
}

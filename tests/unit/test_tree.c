/* Unit tests: a follow-mode tree's answer (src/fork/ask.c, gather.c)
 * without real processes: the client against members played by threads on
 * Unix sockets of a temporary directory (an answer, a hang-up, silence
 * until the deadline, an answer too large, no socket at all, a cancel),
 * and the gathering fed canned answers (merged, a member that failed, one
 * that did not answer, one whose answer is no profile, the texts in a row,
 * the relay of ?pid=N). Real members are test_fork.py's. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "fork/ask.h"
#include "profile/pb.h"
#include "profile/pprof.h"
#include "profile/pprof_read.h"
#include "profile/render.h"
#include "tree/gather.h"

/* ---- canned answers ------------------------------------------------------ */

/* A pprof profile of one sample type (samples/count) and one sample of
 * value v, without locations; gzipped as an agent answers it. */
static char *profile(int64_t v, size_t *len)
{
	struct pp_buf out = {0};
	struct pp_pb pb;
	static const char *const strs[] = {"", "samples", "count"};
	assert_int_equal(pp_pb_init(&pb, &out, 1), 0);
	size_t m = pp_pb_start(&pb);
	pp_pb_int64(&pb, VALUETYPE_TYPE, 1);
	pp_pb_int64(&pb, VALUETYPE_UNIT, 2);
	pp_pb_end(&pb, PROFILE_SAMPLE_TYPE, m);
	m = pp_pb_start(&pb);
	pp_pb_int64s(&pb, SAMPLE_VALUE, &v, 1);
	pp_pb_end(&pb, PROFILE_SAMPLE, m);
	for (size_t i = 0; i < 3; i++)
		pp_pb_bytes(&pb, PROFILE_STRING_TABLE, strs[i],
		            strlen(strs[i]));
	assert_int_equal(pp_pb_finish(&pb), 0);
	char *p = pp_buf_take(&out, len);
	assert_non_null(p);
	return p;
}

/* An ask as pp_ask_all leaves it: an answer with status and body, or
 * (status 0) the reason there is none. */
static struct pp_ask answered(pid_t pid, unsigned status, const char *body,
                              size_t len)
{
	struct pp_ask a = {.pid = pid, .fd = -1, .done = 1};
	a.status = status;
	a.body = body;
	a.body_len = len;
	return a;
}

static struct pp_ask unanswered(pid_t pid, const char *why)
{
	struct pp_ask a = {.pid = pid, .fd = -1, .done = 1};
	snprintf(a.err, sizeof a.err, "%s", why);
	return a;
}

/* The pid label of sample i of d (0: none). */
static int pid_of(const struct pp_pprof_decoded *d, size_t i)
{
	const struct pp_pprof_sample *s = &d->samples[i];
	for (uint32_t k = 0; k < s->nlabels; k++) {
		const struct pp_pprof_label *l = &d->labels[s->labels + k];
		const struct pp_pprof_str *key = &d->strs[l->key];
		if (key->len == 3 && memcmp(key->p, "pid", 3) == 0) {
			/* (strings of a decoded profile end without a NUL) */
			char v[16];
			snprintf(v, sizeof v, "%.*s", (int)d->strs[l->str].len,
			         (const char *)d->strs[l->str].p);
			return atoi(v);
		}
	}
	return 0;
}

/* Is there a comment that starts with prefix? */
static int has_comment(const struct pp_pprof_decoded *d, const char *prefix)
{
	for (size_t i = 0; i < d->ncomments; i++) {
		const struct pp_pprof_str *c = &d->strs[d->comments[i]];
		if (c->len >= strlen(prefix) &&
		    memcmp(c->p, prefix, strlen(prefix)) == 0)
			return 1;
	}
	return 0;
}

static void answer_free(struct pp_lookup_answer *a)
{
	free(a->body);
	memset(a, 0, sizeof *a);
}

/* ---- the gathering --------------------------------------------------------
 */

static void test_merged(void **state)
{
	(void)state;
	size_t l1, l2;
	char *p1 = profile(5, &l1), *p2 = profile(7, &l2);
	struct pp_ask asks[] = {
	    answered(11, 200, p1, l1),
	    answered(33, 500, "bad thing\nmore lines", 20),
	    unanswered(44, "no answer within 40 s"),
	    answered(22, 200, p2, l2),
	};
	struct pp_gather g = {.max_bytes = 1 << 20};
	struct pp_lookup_answer out = {0};
	/* Six members, four asked: two left out. */
	pp_gather_answer(&g, asks, 4, 6, &out);
	assert_int_equal(out.status, 200);
	assert_true(out.verbatim);
	assert_string_equal(out.ctype, pp_format_content_type(PP_FORMAT_PPROF));

	struct pp_pprof_decoded d;
	char err[200];
	assert_int_equal(pp_pprof_read(out.body, out.len, &d, err, sizeof err),
	                 0);
	assert_int_equal(d.nsamples, 2);
	int64_t by_pid[2] = {0};
	for (size_t i = 0; i < d.nsamples; i++) {
		int pid = pid_of(&d, i);
		assert_true(pid == 11 || pid == 22);
		by_pid[pid == 22] += d.vals[d.samples[i].vals];
	}
	assert_int_equal(by_pid[0], 5);
	assert_int_equal(by_pid[1], 7);
	/* The failed member's first line, the silent one's reason, the
	 * members left out. */
	assert_true(has_comment(&d, "pid 33: 500 bad thing"));
	assert_false(has_comment(&d, "pid 33: 500 bad thing\nmore"));
	assert_true(has_comment(&d, "pid 44: no answer within 40 s"));
	assert_true(has_comment(&d, "2 processes of the tree were left out"));
	pp_pprof_read_free(&d);
	answer_free(&out);
	free(p1);
	free(p2);
}

/* A member that answers 200 with something that is not a profile is left
 * out with a note; the others are merged. */
static void test_not_a_profile(void **state)
{
	(void)state;
	size_t l1;
	char *p1 = profile(3, &l1);
	struct pp_ask asks[] = {
	    answered(11, 200, p1, l1),
	    answered(55, 200, "<html>not a profile</html>", 26),
	};
	struct pp_gather g = {.max_bytes = 1 << 20};
	struct pp_lookup_answer out = {0};
	pp_gather_answer(&g, asks, 2, 2, &out);
	assert_int_equal(out.status, 200);
	struct pp_pprof_decoded d;
	char err[200];
	assert_int_equal(pp_pprof_read(out.body, out.len, &d, err, sizeof err),
	                 0);
	assert_int_equal(d.nsamples, 1);
	assert_int_equal(pid_of(&d, 0), 11);
	assert_true(
	    has_comment(&d, "pid 55: left out, its answer is not a profile"));
	pp_pprof_read_free(&d);
	answer_free(&out);

	/* Alone, it cannot be merged: 502 saying why. */
	pp_gather_answer(&g, &asks[1], 1, 1, &out);
	assert_int_equal(out.status, 502);
	assert_non_null(strstr(out.msg, "could not be merged"));
	answer_free(&out);
	free(p1);
}

/* No member's answer counts: a member's refusal is relayed, else 503. */
static void test_none(void **state)
{
	(void)state;
	struct pp_gather g = {.max_bytes = 1 << 20};
	struct pp_lookup_answer out = {0};
	struct pp_ask silent[] = {unanswered(44, "no answer within 40 s"),
	                          unanswered(45, "cannot connect: refused")};
	pp_gather_answer(&g, silent, 2, 2, &out);
	assert_int_equal(out.status, 503);
	assert_false(out.verbatim);
	assert_string_equal(
	    out.msg, "no process of the tree answered: pid 44: no answer "
	             "within 40 s");
	answer_free(&out);

	struct pp_ask refused[] = {
	    unanswered(44, "no answer within 40 s"),
	    answered(33, 400, "seconds: not a number\n", 22),
	};
	refused[1].ctype[0] = 0;
	pp_gather_answer(&g, refused, 2, 2, &out);
	assert_int_equal(out.status, 400);
	assert_true(out.verbatim);
	assert_int_equal(out.len, 22);
	assert_memory_equal(out.body, "seconds: not a number\n", 22);
	answer_free(&out);

	/* An empty tree. */
	pp_gather_answer(&g, NULL, 0, 0, &out);
	assert_int_equal(out.status, 503);
	assert_string_equal(out.msg, "no process of the tree answered");
	answer_free(&out);
}

/* goroutine?debug=1|2: the texts one after the other, the notes last. */
static void test_texts(void **state)
{
	(void)state;
	struct pp_ask asks[] = {
	    answered(11, 200, "goroutine 1 [running]:\n", 23),
	    unanswered(44, "cannot read: reset"),
	    answered(22, 200, "goroutine 2 [sleep]:\n", 21),
	};
	struct pp_gather g = {.text = 1};
	struct pp_lookup_answer out = {0};
	pp_gather_answer(&g, asks, 3, 3, &out);
	assert_int_equal(out.status, 200);
	assert_string_equal(out.ctype, "text/plain; charset=utf-8");
	char *text = strndup(out.body, out.len);
	char *a = strstr(text, "=== pid 11: "),
	     *b = strstr(text, "=== pid 22: ");
	assert_non_null(a);
	assert_non_null(b);
	assert_true(a < b);
	assert_non_null(strstr(a, "\n\ngoroutine 1 [running]:\n"));
	assert_non_null(strstr(b, "\n\ngoroutine 2 [sleep]:\n"));
	char *note = strstr(text, "=== pid 44: cannot read: reset\n");
	assert_non_null(note);
	assert_true(note > b);
	free(text);
	answer_free(&out);
}

/* ?pid=N: the answer as it is, its headers kept; none: 502. */
static void test_relay(void **state)
{
	(void)state;
	struct pp_ask a = answered(11, 429, "busy\n", 5);
	snprintf(a.ctype, sizeof a.ctype, "text/plain");
	snprintf(a.retry, sizeof a.retry, "3");
	struct pp_lookup_answer out = {0};
	pp_gather_relay(&a, &out);
	assert_int_equal(out.status, 429);
	assert_true(out.verbatim);
	assert_string_equal(out.ctype, "text/plain");
	assert_string_equal(out.headers[3][0], "Retry-After");
	assert_string_equal(out.headers[3][1], "3");
	assert_string_equal(out.headers[0][0], ""); /* no Content-Encoding */
	assert_memory_equal(out.body, "busy\n", 5);
	answer_free(&out);

	a = unanswered(12, "no answer within 31 s");
	pp_gather_relay(&a, &out);
	assert_int_equal(out.status, 502);
	assert_false(out.verbatim);
	assert_string_equal(out.msg, "process 12 did not answer: no answer "
	                             "within 31 s");
	answer_free(&out);
}

/* ---- the client ---------------------------------------------------------- */

static void feed(struct pp_ask *a, const char *bytes)
{
	memset(a, 0, sizeof *a);
	pp_buf_append(&a->in, bytes, strlen(bytes));
	pp_ask_parse(a);
}

static void test_parse(void **state)
{
	(void)state;
	struct pp_ask a;
	feed(&a, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
	         "content-encoding:   gzip\r\nX-Pullprof-Profile-Id: 7\r\n"
	         "Content-Disposition: attachment\r\n\r\nBODY");
	assert_int_equal(a.status, 200);
	assert_string_equal(a.ctype, "application/octet-stream");
	assert_string_equal(a.encoding, "gzip");
	assert_string_equal(a.id, "7");
	assert_string_equal(a.disposition, "attachment");
	assert_int_equal(a.body_len, 4);
	assert_memory_equal(a.body, "BODY", 4);
	pp_ask_free(&a);

	feed(&a, "HTTP/1.0 404 Not Found\r\n\r\n");
	assert_int_equal(a.status, 404);
	assert_int_equal(a.body_len, 0);
	pp_ask_free(&a);

	feed(&a, "SSH-2.0-OpenSSH\r\n\r\n");
	assert_int_equal(a.status, 0);
	assert_string_equal(a.err, "not an HTTP answer");
	pp_ask_free(&a);

	feed(&a, "HTTP/1.1 200 OK\r\nContent-Type: x\r\n"); /* no end */
	assert_int_equal(a.status, 0);
	assert_string_equal(a.err, "not an HTTP answer");
	pp_ask_free(&a);

	feed(&a, "HTTP/1.1 700 Odd\r\n\r\n");
	assert_int_equal(a.status, 0);
	pp_ask_free(&a);

	feed(&a, "");
	assert_int_equal(a.status, 0);
	assert_string_equal(a.err, "no answer");
	pp_ask_free(&a);
}

/* Members played by threads: each accepts one connection on its socket. */
enum play { ANSWER, HANGUP, SILENT, BIG };

struct member {
	enum play play;
	char path[108];
	int lfd;
	pthread_t thread;
	char request[512]; /* what it was asked */
	int stop[2];       /* SILENT: a byte here ends its silence */
};

static void *member_main(void *arg)
{
	struct member *m = arg;
	int fd = accept(m->lfd, NULL, NULL);
	if (fd < 0)
		return NULL;
	size_t got = 0;
	while (got < sizeof m->request - 1 && !strstr(m->request, "\r\n\r\n")) {
		ssize_t r =
		    read(fd, m->request + got, sizeof m->request - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
		m->request[got] = 0;
	}
	if (m->play == HANGUP) {
		/* Asked, it closes without a word (a member that died). */
	} else if (m->play == SILENT) {
		char c;
		(void)!read(m->stop[0], &c, 1);
	} else if (m->play == BIG) {
		static char chunk[65536];
		const char *head = "HTTP/1.1 200 OK\r\n\r\n";
		(void)!send(fd, head, strlen(head), MSG_NOSIGNAL);
		/* 4 MiB against a bound of 1 MiB: the client stops reading,
		 * and this send fails once it has closed (MSG_NOSIGNAL: no
		 * SIGPIPE for the test). */
		for (int i = 0; i < 64; i++)
			if (send(fd, chunk, sizeof chunk, MSG_NOSIGNAL) < 0)
				break;
	} else {
		const char *ans = "HTTP/1.1 200 OK\r\nContent-Type: text/plain"
		                  "\r\nConnection: close\r\n\r\nhello";
		(void)!send(fd, ans, strlen(ans), MSG_NOSIGNAL);
	}
	close(fd);
	return NULL;
}

static void member_start(struct member *m, const char *dir, int i,
                         enum play play)
{
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	memset(m, 0, sizeof *m);
	m->play = play;
	snprintf(m->path, sizeof m->path, "%s/%d.sock", dir, i);
	snprintf(un.sun_path, sizeof un.sun_path, "%s", m->path);
	m->lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(m->lfd >= 0);
	assert_int_equal(bind(m->lfd, (struct sockaddr *)&un, sizeof un), 0);
	assert_int_equal(listen(m->lfd, 4), 0);
	assert_int_equal(pipe(m->stop), 0);
	assert_int_equal(pthread_create(&m->thread, NULL, member_main, m), 0);
}

static void member_end(struct member *m)
{
	(void)!write(m->stop[1], "x", 1);
	/* A member never connected to stops waiting in accept. */
	shutdown(m->lfd, SHUT_RDWR);
	pthread_join(m->thread, NULL);
	close(m->lfd);
	close(m->stop[0]);
	close(m->stop[1]);
	unlink(m->path);
}

static const char request[] = "GET /debug/pprof/heap HTTP/1.0\r\n"
                              "Host: localhost\r\nConnection: close\r\n\r\n";

static void test_ask(void **state)
{
	(void)state;
	char dir[] = "/tmp/pp-test-tree-XXXXXX";
	assert_non_null(mkdtemp(dir));
	struct member ms[4];
	enum play plays[4] = {ANSWER, HANGUP, BIG, SILENT};
	for (int i = 0; i < 4; i++)
		member_start(&ms[i], dir, i, plays[i]);
	struct pp_ask asks[5] = {{0}};
	for (int i = 0; i < 3; i++) {
		asks[i].pid = 100 + i;
		snprintf(asks[i].path, sizeof asks[i].path, "%s", ms[i].path);
	}
	asks[3].pid = 103; /* no socket there */
	snprintf(asks[3].path, sizeof asks[3].path, "%s/none.sock", dir);
	asks[4].pid = 104; /* its path was too long */
	/* These all end at once: the deadline is never reached. */
	struct pp_ask_request q = {request, strlen(request), 30, 1 << 20};
	atomic_int cancel = 0;
	pp_ask_all(asks, 5, &q, &cancel);

	for (int i = 0; i < 5; i++) {
		assert_true(asks[i].done);
		assert_int_equal(asks[i].fd, -1);
	}
	assert_int_equal(asks[0].status, 200);
	assert_int_equal(asks[0].body_len, 5);
	assert_memory_equal(asks[0].body, "hello", 5);
	assert_string_equal(asks[0].ctype, "text/plain");
	assert_int_equal(asks[1].status, 0);
	assert_string_equal(asks[1].err, "no answer");
	assert_int_equal(asks[2].status, 0);
	assert_string_equal(asks[2].err, "its answer is over 1 MiB");
	assert_int_equal(asks[3].status, 0);
	assert_non_null(strstr(asks[3].err, "cannot connect"));
	assert_string_equal(asks[4].err, "its socket path is too long");
	for (int i = 0; i < 5; i++)
		pp_ask_free(&asks[i]);

	/* A member that never answers: given up at the deadline (counted
	 * in whole seconds of the monotonic clock, so it may come sooner). */
	struct pp_ask silent = {.pid = 105};
	snprintf(silent.path, sizeof silent.path, "%s", ms[3].path);
	q.timeout_s = 1;
	pp_ask_all(&silent, 1, &q, &cancel);
	assert_true(silent.done);
	assert_int_equal(silent.fd, -1);
	assert_int_equal(silent.status, 0);
	assert_string_equal(silent.err, "no answer within 1 s");
	pp_ask_free(&silent);

	for (int i = 0; i < 4; i++)
		member_end(&ms[i]);
	/* What the members were asked, read once their threads are joined
	 * (the socket that ordered it is invisible to ThreadSanitizer). */
	assert_string_equal(ms[0].request, request);
	assert_string_equal(ms[1].request, request);
	assert_int_equal(rmdir(dir), 0);
}

/* Nobody waits any more: the asking stops early. */
static void test_ask_cancel(void **state)
{
	(void)state;
	char dir[] = "/tmp/pp-test-tree-XXXXXX";
	assert_non_null(mkdtemp(dir));
	struct member m;
	member_start(&m, dir, 0, SILENT);
	struct pp_ask a = {.pid = 100};
	snprintf(a.path, sizeof a.path, "%s", m.path);
	struct pp_ask_request q = {request, strlen(request), 60, 1 << 20};
	atomic_int cancel = 1;
	pp_ask_all(&a, 1, &q, &cancel);
	assert_true(a.done);
	assert_int_equal(a.status, 0);
	assert_string_equal(a.err, "cancelled");
	pp_ask_free(&a);
	member_end(&m);
	assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_merged), cmocka_unit_test(test_not_a_profile),
	    cmocka_unit_test(test_none),   cmocka_unit_test(test_texts),
	    cmocka_unit_test(test_relay),  cmocka_unit_test(test_parse),
	    cmocka_unit_test(test_ask),    cmocka_unit_test(test_ask_cancel),
	};
	return cmocka_run_group_tests_name("tree", tests, NULL, NULL);
}

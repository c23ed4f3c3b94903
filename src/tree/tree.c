/*
 * Follow mode's answers for the whole tree of processes (fork/fork.h): the
 * HTTP side.
 * Context: agent.
 *
 * The configured address belongs to the tree's root. A profile asked of it
 * is asked of every member — the root included, through its own socket —
 * with the same path and query, at once, and their answers made one
 * (gather.h: the pprof profiles merged, the goroutine dump's texts
 * in a row). ?pid=N asks one process and relays its answer as it is,
 * whatever the endpoint and format. Here: which requests go to the tree,
 * the request the members are asked, the errors of what cannot be
 * gathered, and /children. The asking runs on the server's
 * "pullprof-tree" threads (gather.c), never on the HTTP thread.
 */
#include "tree.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fork/fork.h"
#include "gather.h"
#include "kinds.h"
#include "server/lookup.h"
#include "server/respond.h"
#include "server/server.h"
#include "util/buf.h"
#include "util/proc.h"

/* Past the profile's own seconds, how long a member may take to answer. */
#define GRACE_SECONDS 30

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
	pid_t pids[PP_GATHER_MAX_MEMBERS];
	size_t n = pp_tree_members(pids, PP_GATHER_MAX_MEMBERS);
	for (size_t i = 0; i < n && i < PP_GATHER_MAX_MEMBERS; i++)
		if (pids[i] == pid)
			return 1;
	return 0;
}

static struct pp_gather *new_gather(struct pp_request *r, pid_t only)
{
	struct pp_gather *g = calloc(1, sizeof *g);
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
	} else {
		seconds = r->route->window;
	}
	g->timeout_s = seconds + GRACE_SECONDS;
	g->max_bytes = (size_t)cfg->v.max_profile_mb << 20;
	g->max_body = g->max_bytes;
	g->only = only;
	g->route = r->route->name;
	return g;
}

static int tree_dispatch(struct pp_request *r, enum MHD_Result *ret)
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
		if (!pool || !pp_kinds_tree_merges(r->route->name))
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
		struct pp_gather *g = new_gather(r, 0);
		if (!g) {
			*ret = pp_respond_error(r, MHD_HTTP_SERVICE_UNAVAILABLE,
			                        "%s: out of memory",
			                        r->route->name);
			return 1;
		}
		g->text = dump;
		*ret = pp_lookup_answer_on(pool, r, pp_gather_run, g,
		                           pp_gather_free);
		return 1;
	}
	if (pp_respond_full(r)) {
		*ret = pp_respond_busy(r);
		return 1;
	}
	struct pp_gather *g = new_gather(r, pid);
	if (!g) {
		*ret = pp_respond_error(r, MHD_HTTP_SERVICE_UNAVAILABLE,
		                        "%s: out of memory", r->route->name);
		return 1;
	}
	*ret = pp_lookup_answer_on(pool, r, pp_gather_run, g, pp_gather_free);
	return 1;
}

/* ---- /children ---------------------------------------------------------- */

int pp_tree_intercept(struct pp_request *r)
{
	enum MHD_Result ret;
	return tree_dispatch(r, &ret) ? (int)ret : -1;
}

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
	pp_gather_command_of(pid, cmd, sizeof cmd);
	json_object_object_add(o, "cmdline", pp_json_text(cmd, strlen(cmd)));
	json_object_object_add(o, "root", json_object_new_boolean(pid == root));
	json_object_object_add(o, "self",
	                       json_object_new_boolean(pid == getpid()));
	return o;
}

enum MHD_Result pp_h_children(struct pp_request *r)
{
	struct json_object *o = json_object_new_object();
	const char *mode = r->cfg->v.fork_mode ? r->cfg->v.fork_mode : "adopt";
	json_object_object_add(o, "mode", json_object_new_string(mode));
	json_object_object_add(o, "pid", json_object_new_int(getpid()));
	struct json_object *list = json_object_new_array();
	if (pp_tree_dir()[0]) {
		json_object_object_add(o, "dir",
		                       json_object_new_string(pp_tree_dir()));
		json_object_object_add(o, "root",
		                       json_object_new_int(pp_tree_root()));
		pid_t *pids = calloc(PP_GATHER_MAX_MEMBERS, sizeof *pids);
		size_t n =
		    pids ? pp_tree_members(pids, PP_GATHER_MAX_MEMBERS) : 0;
		json_object_object_add(o, "count", json_object_new_int((int)n));
		for (size_t i = 0; i < n && i < PP_GATHER_MAX_MEMBERS; i++)
			json_object_array_add(
			    list, process_json(pids[i], pp_tree_root()));
		free(pids);
	} else {
		json_object_object_add(o, "count", json_object_new_int(0));
	}
	json_object_object_add(o, "processes", list);
	return pp_respond_json(r, MHD_HTTP_OK, o);
}

/*
 * The embedded HTTP server (server.h): its set-up and teardown, the daemon
 * libmicrohttpd runs and what it is started with. The connections' slots
 * and limits are conns.c's, the thread that drives the daemon and checks
 * its descriptors loop.c's.
 * Context: agent.
 *
 * libmicrohttpd runs in external epoll mode and one thread of ours drives it:
 * we own the thread (named, all signals blocked so the host's SIGPROF, SIGINT
 * and friends never land here) and we can wake it through a pipe to stop.
 * We bind the listening socket ourselves, so a taken port is reported with
 * its real errno and the socket is close-on-exec.
 */
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent_threads.h"
#include "ask/args.h"
#include "conns.h"
#include "error.h"
#include "lookup.h"
#include "loop.h"
#include "process.h"
#include "request.h"
#include "respond.h"
#include "util/fds.h"
#include "util/proc.h"

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct pp_server *s = cls;
	/* libmicrohttpd reports client misbehaviour (resets, bad requests)
	 * here. A host's stderr is not ours to fill: count, do not print; the
	 * last one is kept for the start error (a certificate it refused). */
	vsnprintf(s->last_log, sizeof s->last_log, fmt, ap);
	size_t n = strlen(s->last_log);
	while (n && (s->last_log[n - 1] == '\n' || s->last_log[n - 1] == '.'))
		s->last_log[--n] = 0;
	atomic_fetch_add_explicit(&s->stats.server_errors, 1,
	                          memory_order_relaxed);
}

/* The decoding rule is args.c's, where the fuzz target reaches it. */
static size_t unescape(void *cls, struct MHD_Connection *c, char *str)
{
	(void)cls;
	(void)c;
	return pp_args_unescape(str);
}

/* Bind cfg's address; again (after the host closed the first socket): the
 * address served before, the port included when the configured one was 0
 * (any): clients know it, and it is never changed under them. */
static int bind_listener(struct pp_server *s, int again, char *err,
                         size_t errlen)
{
	const struct pp_config *cfg = s->cfg;
	if (cfg->have_bound_fd && !again) {
		s->listen_fd = cfg->bound_fd;
		snprintf(s->bound, sizeof s->bound, "%s", cfg->v.listen);
		return 0;
	}
	struct sockaddr_storage addr = cfg->addr;
	if (again && s->port && addr.ss_family == AF_INET &&
	    !((struct sockaddr_in *)&addr)->sin_port)
		((struct sockaddr_in *)&addr)->sin_port = htons(s->port);
	else if (again && s->port && addr.ss_family == AF_INET6 &&
	         !((struct sockaddr_in6 *)&addr)->sin6_port)
		((struct sockaddr_in6 *)&addr)->sin6_port = htons(s->port);
	int fd = socket(cfg->addr.ss_family,
	                SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int one = 1, e;

	if (fd < 0) {
		e = errno;
		snprintf(err, errlen, "cannot create a socket for %s: %s",
		         cfg->v.listen, strerror(e));
		return -e;
	}
	/* Lets a restarted host rebind while old connections sit in TIME_WAIT;
	 * on Linux it never lets two listeners share a port. */
	if (cfg->addr.ss_family != AF_UNIX)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	else /* a tree's member socket (fork/members.c): named after this pid,
	        so what is there was left by a process gone */
		unlink(((const struct sockaddr_un *)&cfg->addr)->sun_path);
	if (bind(fd, (const struct sockaddr *)&addr, cfg->addrlen) < 0) {
		e = errno;
		close(fd);
		if (e == EADDRINUSE)
			snprintf(
			    err, errlen,
			    "cannot listen on %s: address already in use "
			    "(set PULLPROF_LISTEN to another port, or port 0 "
			    "for any free one)",
			    cfg->v.listen);
		else if (e == EADDRNOTAVAIL)
			snprintf(
			    err, errlen,
			    "cannot listen on %s: no such address on this host",
			    cfg->v.listen);
		else
			snprintf(err, errlen, "cannot listen on %s: %s",
			         cfg->v.listen, strerror(e));
		return -e;
	}
	if (listen(fd, 64) < 0) {
		e = errno;
		close(fd);
		snprintf(err, errlen, "cannot listen on %s: %s", cfg->v.listen,
		         strerror(e));
		return -e;
	}
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	if (cfg->addr.ss_family == AF_UNIX) {
		/* Only the owner may connect (its directory says so too). */
		chmod(((const struct sockaddr_un *)&cfg->addr)->sun_path, 0600);
		if (!again)
			snprintf(s->bound, sizeof s->bound, "%s",
			         cfg->v.listen);
	} else if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
		/* Again, the same address: left as it is (other threads read
		 * it without a lock: pullprof_port, the start-up line). */
		if (!again) {
			pp_format_sockaddr((struct sockaddr *)&ss, s->bound,
			                   sizeof s->bound);
			s->port =
			    ntohs(ss.ss_family == AF_INET6
			              ? ((struct sockaddr_in6 *)&ss)->sin6_port
			              : ((struct sockaddr_in *)&ss)->sin_port);
		}
	}
	s->listen_fd = pp_fd_move_high(fd);
	if (s->listen_fd < 0) {
		snprintf(
		    err, errlen,
		    "cannot listen on %s: the host closed the socket as it "
		    "was made",
		    cfg->v.listen);
		return -EBADF;
	}
	return 0;
}

/*
 * A TLS file into memory, at start, in the host's thread before its main
 * perhaps: only a regular file, opened without blocking, so a FIFO cannot
 * hang the host and /dev/stdin cannot eat its input.
 */
static int read_regular(const char *path, size_t max, char **out, char *why,
                        size_t whylen)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		int e = errno;
		snprintf(why, whylen, "cannot read %s: %s", path, strerror(e));
		return -e;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		snprintf(why, whylen,
		         "%s is not a regular file (%s): name a PEM file", path,
		         S_ISFIFO(st.st_mode)   ? "a FIFO"
		         : S_ISCHR(st.st_mode)  ? "a character device"
		         : S_ISDIR(st.st_mode)  ? "a directory"
		         : S_ISSOCK(st.st_mode) ? "a socket"
		                                : "not a file");
		return -EINVAL;
	}
	if ((size_t)st.st_size > max) {
		close(fd);
		snprintf(why, whylen, "%s is over %zu bytes: not a PEM file",
		         path, max);
		return -EINVAL;
	}
	char *buf = malloc((size_t)st.st_size + 1);
	size_t n = 0;
	if (!buf) {
		close(fd);
		snprintf(why, whylen, "cannot read %s: out of memory", path);
		return -ENOMEM;
	}
	while (n < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + n, (size_t)st.st_size - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			int e = r < 0 ? errno : EIO;
			close(fd);
			free(buf);
			snprintf(why, whylen, "cannot read %s: %s", path,
			         strerror(e));
			return -e;
		}
		n += (size_t)r;
	}
	close(fd);
	buf[n] = 0;
	*out = buf;
	return 0;
}

/* GnuTLS priorities: its defaults, but TLS 1.2 and 1.3 only (1.0 and 1.1
 * are deprecated by RFC 8996, SSL 3 long gone). */
#define PP_TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

/* PULLPROF_TLS_CERT/KEY into memory (libmicrohttpd takes PEM text). */
static int read_tls(struct pp_server *s, const struct pp_config *cfg, char *err,
                    size_t errlen)
{
	if (!cfg->v.tls_cert)
		return 0;
	if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
		snprintf(err, errlen,
		         "PULLPROF_TLS_CERT is set but this libmicrohttpd was "
		         "built without TLS");
		return -EPROTONOSUPPORT;
	}
	const char *names[2] = {"PULLPROF_TLS_CERT", "PULLPROF_TLS_KEY"};
	const char *paths[2] = {cfg->v.tls_cert, cfg->v.tls_key};
	char **bufs[2] = {&s->tls_cert, &s->tls_key};
	for (int i = 0; i < 2; i++) {
		char why[300];
		int rc =
		    read_regular(paths[i], 1u << 20, bufs[i], why, sizeof why);
		if (rc) {
			snprintf(err, errlen, "%s: %s", names[i], why);
			return rc;
		}
		if (!strstr(*bufs[i], "-----BEGIN ")) {
			snprintf(
			    err, errlen,
			    "%s: %s is not a PEM file (no -----BEGIN line)",
			    names[i], paths[i]);
			return -EINVAL;
		}
	}
	return 0;
}

static void free_tls(struct pp_server *s)
{
	if (s->tls_key) {
		/* The private key does not outlive its use in freed memory. */
		explicit_bzero(s->tls_key, strlen(s->tls_key));
		free(s->tls_key);
	}
	free(s->tls_cert);
	s->tls_key = s->tls_cert = NULL;
}

/* The listening socket, libmicrohttpd's daemon and the wake-up pipe, and
 * what each is (pp_server_lost_fd). On failure nothing is left open. */
int pp_server_open_daemon(struct pp_server *s, int again, char *err,
                          size_t errlen)
{
	const struct pp_config *cfg = s->cfg;
	int rc = bind_listener(s, again, err, errlen);
	if (rc)
		return rc;
	pp_fd_id_take(s->listen_fd, &s->listen_id);

	/* The listening socket is the loop's: it accepts, moves each
	 * connection's descriptor far from the host's (loop.c) and hands it
	 * to libmicrohttpd. */
	unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
	                 MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET;
	if (cfg->addr.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	if (s->tls_cert)
		flags |= MHD_USE_TLS;
	/* Options past MHD_OPTION_END are not read: without TLS the list
	 * ends before the certificate. */
	/* The logger first: libmicrohttpd logs with its own (to stderr)
	 * until it reads this option, and warns when it comes later. */
	struct MHD_Daemon *d = MHD_start_daemon(
	    flags, 0, pp_server_on_accept, s, pp_routes_dispatch, s,
	    MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
	    /* Above every slot of ours: conns.c's on_accept always decides
	     * first. */
	    MHD_OPTION_CONNECTION_LIMIT, s->conn_slots + 8,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->v.idle_timeout,
	    MHD_OPTION_URI_LOG_CALLBACK, pp_server_on_uri, s,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)cfg->v.max_header_bytes,
	    MHD_OPTION_NOTIFY_CONNECTION, pp_server_on_connection, s,
	    MHD_OPTION_NOTIFY_COMPLETED, pp_routes_completed, s,
	    MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
	    s->tls_cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END,
	    s->tls_cert, MHD_OPTION_HTTPS_MEM_KEY, s->tls_key,
	    MHD_OPTION_HTTPS_PRIORITIES, PP_TLS_PRIORITIES, MHD_OPTION_END);
	if (!d) {
		if (s->tls_cert)
			snprintf(err, errlen,
			         "cannot start HTTPS on %s with %s and %s: %s",
			         s->bound, cfg->v.tls_cert, cfg->v.tls_key,
			         s->last_log[0] ? s->last_log
			                        : "the certificate or key was "
			                          "refused");
		else
			snprintf(err, errlen,
			         "cannot start the HTTP server on %s%s%s",
			         s->bound, s->last_log[0] ? ": " : "",
			         s->last_log);
		close(s->listen_fd);
		s->listen_fd = s->listen_id.fd = -1;
		return s->tls_cert ? -EINVAL : -EIO;
	}
	const union MHD_DaemonInfo *di =
	    MHD_get_daemon_info(d, MHD_DAEMON_INFO_EPOLL_FD);
	int p[2] = {-1, -1};
	if (!di) {
		snprintf(err, errlen, "libmicrohttpd was built without epoll");
		rc = -ENOSYS;
	} else if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0 ||
	           (p[0] = pp_fd_move_high(p[0])) < 0 ||
	           (p[1] = pp_fd_move_high(p[1])) < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot set up the HTTP event loop: %s",
		         strerror(errno));
		for (int i = 0; i < 2; i++)
			if (p[i] >= 0)
				close(p[i]);
	}
	if (rc) {
		MHD_stop_daemon(d);
		close(s->listen_fd);
		s->listen_fd = s->listen_id.fd = -1;
		return rc;
	}
	s->mhd_epoll_fd = di->epoll_fd;
	pp_fd_id_take(s->mhd_epoll_fd, &s->mhd_epoll_id);
	s->wake_rd = p[0];
	s->wake_wr = p[1];
	pp_fd_id_take(p[0], &s->wake_rd_id);
	pp_fd_id_take(p[1], &s->wake_wr_id);
	/* The listening socket, libmicrohttpd's epoll set and the pipe. */
	pp_fds_add(4);
	pp_fds_note_base();
	if (pp_fds_share_too_small()) {
		struct pp_fds_stats fs;
		pp_fds_stats(&fs);
		pp_log("RLIMIT_NOFILE %zu leaves the agent %zu descriptors and "
		       "its server keeps %zu: too few for its connections; one "
		       "connection at a time is let in past the share, for "
		       "/healthz, /status, /metrics and the index only (a "
		       "limit of %zu or more serves everything)",
		       fs.limit, fs.share, fs.base, fs.needed);
	}
	pthread_mutex_lock(&s->mhd_mu);
	s->mhd = d;
	pthread_mutex_unlock(&s->mhd_mu);
	return 0;
}

/* Stop a daemon whose descriptors are all still ours. */
static void close_daemon(struct pp_server *s)
{
	/* Every suspended request answered before libmicrohttpd stops: it
	 * aborts the process otherwise. Should one never come back (a bug),
	 * the daemon is left as is — leaked, its sockets closed — rather than
	 * take the host down. */
	unsigned left = pp_routes_resume_all(s);
	if (!left) {
		MHD_stop_daemon(s->mhd);
	} else {
		pp_log(
		    "stop: %u requests could not be ended; the HTTP server's "
		    "memory is left behind",
		    left);
		for (unsigned i = 0; i < s->conn_slots; i++)
			if (s->conns[i].fd >= 0) {
				pp_fd_id_close(&s->conns[i].id);
				pp_fds_add(-1);
			}
	}
	pp_fd_id_close(&s->listen_id);
	pp_fd_id_close(&s->wake_rd_id);
	pp_fd_id_close(&s->wake_wr_id);
	pp_fds_add(-4);
	pthread_mutex_lock(&s->mhd_mu);
	s->mhd = NULL;
	pthread_mutex_unlock(&s->mhd_mu);
}

int pp_server_start(const struct pp_config *cfg,
                    const struct pp_agent_facts *facts, struct pp_server **out,
                    char *err, size_t errlen)
{
	int rc;
	struct pp_server *s = calloc(1, sizeof *s);

	if (!s)
		return -ENOMEM;
	s->cfg = cfg;
	s->facts = facts;
	s->listen_fd = s->wake_rd = s->wake_wr = s->mhd_epoll_fd = -1;
	s->listen_id.fd = s->wake_rd_id.fd = s->wake_wr_id.fd =
	    s->mhd_epoll_id.fd = -1;
	pthread_mutex_init(&s->mhd_mu, NULL);
	pp_server_catch_panics();
	/* Twice the places, kept ones included: a connection closed for a
	 * newcomer holds its slot until libmicrohttpd lets it go. */
	s->conn_slots = 2 * (cfg->v.max_connections + PP_RESERVED_CONNECTIONS);
	s->conns = calloc(s->conn_slots, sizeof *s->conns);
	if (!s->conns) {
		free(s);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < s->conn_slots; i++)
		s->conns[i].fd = s->conns[i].id.fd = -1;
	/* A copy of this process made without fork() closes it. */
	pp_process_drop_in_copies(&s->listen_id);
	if (gethostname(s->hostname, sizeof s->hostname - 1) != 0)
		s->hostname[0] = 0;
	pp_respond_note_root();

	rc = read_tls(s, cfg, err, errlen);
	if (rc) {
		/* The early socket is the server's to close (fork/members.c).
		 */
		if (cfg->have_bound_fd)
			close(cfg->bound_fd);
		goto fail;
	}
	rc = pp_server_open_daemon(s, 0, err, errlen);
	if (rc)
		goto fail;
	const struct pp_lookups_spec lookups = {
	    .thread_name = "pullprof-lookup",
	    .threads = 1,
	    .max = cfg->v.max_lookups,
	    .what = "symbol and mapping lookups",
	    .setting = "PULLPROF_MAX_LOOKUPS",
	};
	rc = pp_lookups_start(s, &lookups, &s->lookups);
	if (rc) {
		snprintf(err, errlen, "cannot start the lookup thread: %s",
		         strerror(-rc));
		goto fail;
	}
	/* Follow mode: the address answers for the whole tree (tree.c),
	 * gathering from the members on threads of their own. */
	if (pp_fork_mode_of(cfg) == PP_FORK_FOLLOW &&
	    cfg->addr.ss_family != AF_UNIX) {
		const struct pp_lookups_spec tree = {
		    .thread_name = "pullprof-tree",
		    .threads = PP_TREE_REQUESTS,
		    .max = PP_TREE_REQUESTS,
		    .what = "requests for the whole tree of processes",
		};
		rc = pp_lookups_start(s, &tree, &s->tree);
		if (rc) {
			snprintf(err, errlen,
			         "cannot start the tree's threads: %s",
			         strerror(-rc));
			goto fail;
		}
	}

	/* Named at creation, so the name is there when start returns. */
	rc = pp_agent_thread_create(&s->thread, "pullprof-http", pp_server_loop,
	                            s);
	if (rc) {
		snprintf(err, errlen, "cannot start the HTTP thread: %s",
		         strerror(-rc));
		goto fail;
	}
	*out = s;
	return 0;

fail:
	pp_lookups_stop(s->tree);
	pp_lookups_free(s->tree);
	pp_lookups_stop(s->lookups);
	pp_lookups_free(s->lookups);
	if (s->mhd)
		close_daemon(s);
	free_tls(s);
	pthread_mutex_destroy(&s->mhd_mu);
	pp_process_keep(&s->listen_id);
	free(s->conns);
	free(s);
	return rc;
}

void pp_server_stop(struct pp_server *s)
{
	if (!s)
		return;
	/* Lookups first: what they cancel is answered through the loop. */
	pp_lookups_stop(s->tree);
	pp_lookups_stop(s->lookups);
	atomic_store(&s->stopping, 1);
	pthread_mutex_lock(&s->mhd_mu);
	pp_server_wake_locked(s);
	pthread_mutex_unlock(&s->mhd_mu);
	/* The loop looks at least every PP_FD_CHECK_MS: a wake-up the host's
	 * closing took away delays this by that much at most. */
	pthread_join(s->thread, NULL);
	char buf[96];
	const char *lost =
	    s->mhd ? pp_server_lost_fd(s, buf, sizeof buf) : NULL;
	if (lost)
		pp_server_abandon(s, lost);
	if (s->mhd)
		close_daemon(s);
	else
		pp_routes_forget_all(
		    s); /* none: forgotten at abandon (loop.c) */
	pp_lookups_free(s->lookups);
	pp_lookups_free(s->tree);
	free_tls(s);
	pthread_mutex_destroy(&s->mhd_mu);
	pp_process_keep(&s->listen_id);
	free(s->conns);
	free(s);
}

/* Async-signal-safe: fstat and close only, and only what is still ours
 * (libmicrohttpd's epoll set, whose identity is weak, only along with the
 * listening socket it was made with). */
void pp_server_forget_in_child(struct pp_server *s)
{
	pp_server_panics_forget_in_child();
	if (!s)
		return;
	for (unsigned i = 0; i < s->conn_slots; i++)
		if (s->conns[i].fd >= 0)
			pp_fd_id_close(&s->conns[i].id);
	if (!s->mhd)
		return;
	if (pp_fd_id_ours(&s->listen_id))
		pp_fd_id_close(&s->mhd_epoll_id);
	pp_fd_id_close(&s->listen_id);
	pp_fd_id_close(&s->wake_rd_id);
	pp_fd_id_close(&s->wake_wr_id);
}

static struct MHD_Daemon *daemon_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_DAEMON);
	return ci ? ci->daemon : NULL;
}

void pp_server_resume(struct pp_server *s, struct MHD_Connection *c)
{
	/* A connection of an abandoned daemon is left alone: resuming it
	 * would wake that daemon, whose descriptors are gone. */
	pthread_mutex_lock(&s->mhd_mu);
	if (s->mhd && daemon_of(c) == s->mhd) {
		MHD_resume_connection(c);
		pp_server_wake_locked(s);
	}
	pthread_mutex_unlock(&s->mhd_mu);
}

int pp_server_is_own_thread(const struct pp_server *s)
{
	return s && pthread_equal(pthread_self(), s->thread);
}

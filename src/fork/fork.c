/*
 * The agent across fork(). See fork.h.
 * Context: agent.
 * (Except the functions fork.h marks: they run on the host's threads, in
 * fork's handlers and as fork returns.)
 *
 * What a child knows of its parent it knows from memory fork copied: the
 * parent's settings (its resolved configuration, whose strings are never
 * freed here), the address it served, the tree's directory.
 */
#include "fork.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "error.h"
#include "heap/heap.h"
#include "http/server.h"
#include "util/env.h"
#include "util/fds.h"

/* A follow-mode child waits this long before it starts its agent: a child
 * that execs (fork, then exec) is gone by then, and costs nothing. */
#define FOLLOW_SETTLE_MS 50
/* Without a pidfd (or once the host closed it), the parent is looked for
 * this often. */
#define PARENT_POLL_MS 1000

enum pp_fork_mode pp_fork_mode_of(const struct pp_config *c)
{
	const char *m = c->v.fork_mode;
	if (m && strcmp(m, "follow") == 0)
		return PP_FORK_FOLLOW;
	if (m && strcmp(m, "off") == 0)
		return PP_FORK_OFF;
	return PP_FORK_ADOPT;
}

/* ---- across fork (async-signal-safe) ------------------------------------ */

static pid_t forking_pid; /* the parent's pid, noted before each fork */

/* What a child inherited: set in the child's fork handler. */
static struct {
	int armed;  /* watch the parent (it served, or was itself armed) */
	int follow; /* and run an agent of our own in its tree */
	int autostarted;
	pid_t parent;
	pid_t server;             /* the process that served the address */
	struct pullprof_config v; /* the parent's settings (its memory) */
	char listen[160];         /* the address it served, "host:port" */
} inherited;

static struct {
	char dir[96]; /* "": in no tree */
	pid_t root;
} tree;

static atomic_ulong takeovers, watchers;

/* The watcher's pidfd, while it has one open: a child forked meanwhile
 * closes its copy (it knows nothing of it). */
static _Atomic int watch_fd = -1;

/* Follow mode: the child's socket, bound as fork returns (before the host
 * can drop its privileges: nginx's workers change user at once, and could
 * then not enter the directory), served once its agent starts. */
static int early_fd = -1;

void pp_fork_prepare(void)
{
	forking_pid = getpid();
}

void pp_fork_child(const struct pp_agent *a)
{
	/* A child of an armed child that has not taken over yet (a double
	 * fork: the daemon is the grandchild) is armed in turn. */
	if (a && a->cfg.serve && pp_fork_mode_of(&a->cfg) != PP_FORK_OFF) {
		inherited.armed = 1;
		inherited.follow = pp_fork_mode_of(&a->cfg) == PP_FORK_FOLLOW;
		inherited.autostarted = a->autostarted;
		inherited.v = a->cfg.v;
		/* The address served, port included (it may have been 0,
		 * "any free one", in the settings). A member that does not
		 * serve it has its parent's. */
		if (a->srv) {
			memcpy(inherited.listen, a->srv->bound,
			       sizeof inherited.listen);
			inherited.server = forking_pid;
		}
	} else if (!inherited.armed) {
		return;
	}
	int fd = atomic_exchange(&watch_fd, -1);
	if (fd >= 0)
		close(fd);
	inherited.parent = forking_pid;
	if (!inherited.follow) {
		/* Adopt mode: the child is in no tree. */
		tree.dir[0] = 0;
	}
}

int pp_fork_child_follows(void)
{
	return inherited.armed && inherited.follow;
}

/* ---- the watcher -------------------------------------------------------- */

static int parent_gone(void)
{
	return getppid() != inherited.parent;
}

/* Is fd still the pidfd we opened? The host may close every descriptor
 * after fork and reuse the number. */
static int is_pidfd(int fd)
{
	char path[32], link[64];
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(path, link, sizeof link - 1);
	if (n <= 0)
		return 0;
	link[n] = 0;
	return strcmp(link, "anon_inode:[pidfd]") == 0;
}

static int pid_alive(pid_t pid);

/* Wait until the parent has exited, or ms have passed (-1: no bound).
 * Returns 1 when it has exited. *pfd turns -1 when the descriptor is no
 * longer ours. */
static int wait_parent(int *pfd, int ms)
{
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (parent_gone())
			return 1;
		int left = -1;
		if (ms >= 0) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			long spent = (now.tv_sec - t0.tv_sec) * 1000 +
			             (now.tv_nsec - t0.tv_nsec) / 1000000;
			if (spent >= ms)
				return 0;
			left = (int)(ms - spent);
		}
		if (*pfd < 0) {
			int slice = left >= 0 && left < PARENT_POLL_MS
			                ? left
			                : PARENT_POLL_MS;
			struct timespec ts = {slice / 1000,
			                      (slice % 1000) * 1000000L};
			nanosleep(&ts, NULL);
			continue;
		}
		struct pollfd p = {.fd = *pfd, .events = POLLIN};
		int n = poll(&p, 1, left);
		if (n > 0 && !parent_gone() &&
		    ((p.revents & POLLNVAL) || !is_pidfd(*pfd))) {
			/* Closed, or another file now: not ours to close. */
			*pfd = -1;
			pp_fds_add(-1);
		}
	}
}

static void *watch(void *arg)
{
	(void)arg;
	pp_agent_thread_enter(PP_AGENT_UNSAMPLED);
	int pfd = -1;
	if (!parent_gone()) {
		pfd = (int)syscall(SYS_pidfd_open, inherited.parent, 0);
		if (pfd >= 0) {
			pp_fds_add(1);
			atomic_store(&watch_fd, pfd);
		}
	}
	int gone = 0;
	if (inherited.follow) {
		gone = wait_parent(&pfd, FOLLOW_SETTLE_MS);
		if (!gone)
			pp_agent_start_member(&inherited.v,
			                      inherited.autostarted);
	}
	if (!gone)
		wait_parent(&pfd, -1);
	/* Closed only while it is still ours: the host may have closed it
	 * and opened a file of its own under the number. */
	atomic_store(&watch_fd, -1);
	if (pfd >= 0 && is_pidfd(pfd))
		close(pfd);
	if (pfd >= 0)
		pp_fds_add(-1);
	/* The parent exited: this process serves the address now, unless
	 * another took it first (a sibling). While the process that served
	 * it lives on (a double fork: the grandparent is still exiting, or
	 * runs on), wait for it, then try again. */
	while (inherited.listen[0]) {
		int rc = pp_agent_take_over(&inherited.v, inherited.listen,
		                            inherited.autostarted);
		if (rc == 0)
			atomic_fetch_add(&takeovers, 1);
		if (rc != -EADDRINUSE || inherited.server == inherited.parent ||
		    !pid_alive(inherited.server))
			break;
		int sfd = (int)syscall(SYS_pidfd_open, inherited.server, 0);
		if (sfd < 0) {
			while (pid_alive(inherited.server))
				sleep(1);
		} else {
			pp_fds_add(1);
			atomic_store(&watch_fd, sfd);
			struct pollfd p = {.fd = sfd, .events = POLLIN};
			while (poll(&p, 1, 1000) == 0 &&
			       pid_alive(inherited.server))
				;
			atomic_store(&watch_fd, -1);
			if (is_pidfd(sfd))
				close(sfd);
			pp_fds_add(-1);
		}
		inherited.parent = inherited.server; /* not again */
	}
	pp_agent_thread_leave();
	return NULL;
}

/* The tree's directory, made again if a process that left removed it (a
 * daemon's first parent removes it as it exits, while the children it left
 * to the daemon are about to bind in it): a directory of this user's that
 * no one else may enter, or -1. */
static int ensure_dir(const char *dir)
{
	struct stat st;
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return -1;
	if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) ||
	    st.st_uid != geteuid() || (st.st_mode & 077))
		return -1;
	return 0;
}

static int bind_member(const char *path)
{
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof un.sun_path)
		return -1;
	strcpy(un.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	unlink(path); /* named after this pid: left by a process gone */
	/* The directory may go between the two (see ensure_dir). */
	for (int tries = 0; tries < 3; tries++) {
		if (ensure_dir(tree.dir) != 0)
			break;
		if (bind(fd, (struct sockaddr *)&un, sizeof un) == 0) {
			if (chmod(path, 0600) == 0 && listen(fd, 64) == 0)
				return fd;
			break;
		}
		if (errno != ENOENT)
			break;
	}
	close(fd);
	return -1;
}

/* Is fd still the socket bound at path? The host may close every
 * descriptor after fork. */
static int still_bound(int fd, const char *path)
{
	struct sockaddr_un un;
	socklen_t len = sizeof un;
	memset(&un, 0, sizeof un);
	return fd >= 0 && getsockname(fd, (struct sockaddr *)&un, &len) == 0 &&
	       un.sun_family == AF_UNIX &&
	       strncmp(un.sun_path, path, sizeof un.sun_path) == 0;
}

static void start_watcher(void)
{
	pthread_t t;
	if (pp_agent_thread_create(&t, "pullprof-fork", watch, NULL) == 0) {
		pthread_detach(t);
		atomic_fetch_add(&watchers, 1);
	}
}

/* An adopt-mode child that has not started its watcher yet. */
static _Atomic int lazy;

void pp_fork_returned(int event)
{
	/* A copy made without fork() (and its forked children) follows
	 * nothing and starts no thread: the state it copied is not its. */
	if (pp_agent_foreign())
		return;
	if (event == PP_FORKED_PARENT) {
		/* A child that forks children of its own (a daemon's master
		 * forking its workers) may be the one to serve. */
		if (atomic_exchange(&lazy, 0))
			start_watcher();
		return;
	}
	atomic_store(&lazy, 0);
	if (!inherited.armed)
		return;
	char path[160];
	if (inherited.follow && tree.dir[0] &&
	    pp_tree_socket(getpid(), path, sizeof path) == 0)
		early_fd = bind_member(path);
#ifndef PP_NO_HEAP_INTERPOSE
	/* Sanitizer builds have no heap slow path to poke: they start it at
	 * once. */
	if (!inherited.follow && event == PP_FORKED_CHILD) {
		atomic_store(&lazy, 1);
		return;
	}
#endif
	start_watcher();
}

void pp_fork_poke(void)
{
	if (!atomic_load_explicit(&lazy, memory_order_relaxed) ||
	    !parent_gone() || pp_agent_foreign())
		return;
	if (!atomic_exchange(&lazy, 0))
		return;
	/* pthread_create allocates: this thread's allocations meanwhile
	 * pass by, unsampled, and poke no more. */
	int hidden = pp_heap_hide();
	start_watcher();
	pp_heap_unhide(hidden);
}

void pp_fork_stats(struct pp_fork_stats *out)
{
	out->takeovers = atomic_load(&takeovers);
	out->watchers = atomic_load(&watchers);
}

/* ---- the tree ------------------------------------------------------------ */

const char *pp_tree_dir(void)
{
	return tree.dir;
}

pid_t pp_tree_root(void)
{
	return tree.root;
}

int pp_tree_socket(pid_t pid, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/%d.sock", tree.dir, (int)pid);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* A directory of our own for the sockets: under $XDG_RUNTIME_DIR when it
 * is set (a private, memory-backed place), else $TMPDIR or /tmp. mkdtemp
 * makes it 0700: only this user may reach the sockets in it. */
static int make_dir(char *err, size_t errlen)
{
	const char *base = pp_env_get("XDG_RUNTIME_DIR");
	struct stat st;
	if (!base || !*base || stat(base, &st) != 0 || !S_ISDIR(st.st_mode) ||
	    st.st_uid != geteuid())
		base = pp_env_get("TMPDIR");
	if (!base || !*base || strlen(base) > 48)
		base = "/tmp";
	char path[sizeof tree.dir];
	snprintf(path, sizeof path, "%s/pullprof-%d-XXXXXX", base,
	         (int)getpid());
	if (!mkdtemp(path)) {
		int e = errno;
		snprintf(err, errlen,
		         "cannot make a directory for the forked children's "
		         "sockets in %s: %s",
		         base, strerror(e));
		return -e;
	}
	memcpy(tree.dir, path, sizeof tree.dir);
	return 0;
}

int pp_tree_join(struct pp_agent *a, char *err, size_t errlen)
{
	int rc;
	if (a->srv) {
		/* This process serves the address: the tree is its own. A
		 * directory inherited from a parent that has exited (this
		 * process took over) is kept: the members are in it. */
		if (!tree.dir[0] || ensure_dir(tree.dir) != 0) {
			rc = make_dir(err, errlen);
			if (rc)
				return rc;
		}
		tree.root = getpid();
	} else if (!tree.dir[0]) {
		snprintf(err, errlen, "no tree to join");
		return -ENOENT;
	} else if (early_fd < 0 && ensure_dir(tree.dir) != 0) {
		snprintf(err, errlen, "cannot enter the tree's directory %s",
		         tree.dir);
		return -EACCES;
	}
	char path[160];
	rc = pp_tree_socket(getpid(), path, sizeof path);
	if (rc) {
		snprintf(err, errlen, "the socket path is too long");
		return rc;
	}
	rc = pp_config_member(&a->cfg, path, &a->member_cfg, err, errlen);
	if (rc)
		return rc;
	int early = early_fd;
	early_fd = -1;
	if (still_bound(early, path)) {
		a->member_cfg.have_bound_fd = 1;
		a->member_cfg.bound_fd = early;
	}
	rc = pp_server_start(&a->member_cfg, &a->member, err, errlen);
	if (rc) {
		/* The server closed the early socket, if it took it. */
		pp_config_free(&a->member_cfg);
		a->member = NULL;
	}
	return rc;
}

void pp_tree_own(void)
{
	tree.root = getpid();
}

static int pid_alive(pid_t pid)
{
	return kill(pid, 0) == 0 || errno == EPERM;
}

/* Every "<pid>.sock" in the directory: fn(pid, arg) for each. */
static void each_socket(void (*fn)(pid_t pid, void *arg), void *arg)
{
	DIR *d = opendir(tree.dir);
	if (!d)
		return;
	pp_fds_add(1);
	struct dirent *e;
	while ((e = readdir(d))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (pid > 0 && end != e->d_name && strcmp(end, ".sock") == 0)
			fn((pid_t)pid, arg);
	}
	closedir(d);
	pp_fds_add(-1);
}

static void remove_stale(pid_t pid, void *arg)
{
	(void)arg;
	char path[160];
	if (!pid_alive(pid) && pp_tree_socket(pid, path, sizeof path) == 0)
		unlink(path);
}

void pp_tree_leave(struct pp_agent *a)
{
	if (!a->member)
		return;
	pp_server_stop(a->member);
	a->member = NULL;
	char path[160];
	if (pp_tree_socket(getpid(), path, sizeof path) == 0)
		unlink(path);
	pp_config_free(&a->member_cfg);
	/* The last one out (the root, or the last member of a tree whose
	 * root is gone) takes the directory: rmdir fails while sockets of
	 * live members remain. */
	each_socket(remove_stale, NULL);
	rmdir(tree.dir);
}

struct collect {
	pid_t *out;
	size_t max, n;
};

static void collect_one(pid_t pid, void *arg)
{
	struct collect *c = arg;
	char path[160];
	if (!pid_alive(pid)) {
		if (pp_tree_socket(pid, path, sizeof path) == 0)
			unlink(path);
		return;
	}
	if (c->n < c->max)
		c->out[c->n] = pid;
	c->n++;
}

static int by_pid(const void *x, const void *y)
{
	pid_t a = *(const pid_t *)x, b = *(const pid_t *)y;
	return (a > b) - (a < b);
}

size_t pp_tree_members(pid_t *out, size_t max)
{
	struct collect c = {out, max, 0};
	if (!tree.dir[0])
		return 0;
	each_socket(collect_one, &c);
	qsort(out, c.n < max ? c.n : max, sizeof *out, by_pid);
	return c.n;
}

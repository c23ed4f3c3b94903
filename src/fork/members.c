/*
 * Follow mode's tree (fork.h): the private directory, each member's Unix
 * socket in it (served by the member's own server), the list of the live
 * members.
 * Context: agent.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fork.h"
#include "internal.h"
#include "util/env.h"
#include "util/fds.h"

struct pp_fork_tree pp_fork_tree;

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

/* Set (release) once dir holds the directory's name: the agent's threads
 * (a tree read, /status) look at dir only after they see it, since the
 * host's thread may be writing it at that moment (the first fork). A
 * forked child inherits both. */
static atomic_int published;

const char *pp_tree_dir(void)
{
	return atomic_load_explicit(&published, memory_order_acquire)
	           ? pp_fork_tree.dir
	           : "";
}

pid_t pp_tree_root(void)
{
	return pp_fork_tree.root;
}

int pp_tree_socket(pid_t pid, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/%d.sock", pp_fork_tree.dir, (int)pid);
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
	char path[sizeof pp_fork_tree.dir];
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
	atomic_store_explicit(&published, 0, memory_order_relaxed);
	memcpy(pp_fork_tree.dir, path, sizeof pp_fork_tree.dir);
	atomic_store_explicit(&published, 1, memory_order_release);
	return 0;
}

int pp_tree_join(const struct pp_config *cfg, int serves,
                 struct pp_config *member, char *err, size_t errlen)
{
	int rc;
	if (serves) {
		/* This process serves the address: the tree is its own. A
		 * directory pp_fork_inherited from a parent that has exited
		 * (this process took over) is kept: the members are in it. */
		if (!pp_fork_tree.dir[0] ||
		    pp_fork_ensure_dir(pp_fork_tree.dir) != 0) {
			rc = make_dir(err, errlen);
			if (rc)
				return rc;
		}
		pp_fork_tree.root = getpid();
	} else if (!pp_fork_tree.dir[0]) {
		snprintf(err, errlen, "no tree to join");
		return -ENOENT;
	} else if (pp_fork_early_fd < 0 &&
	           pp_fork_ensure_dir(pp_fork_tree.dir) != 0) {
		snprintf(err, errlen, "cannot enter the tree's directory %s",
		         pp_fork_tree.dir);
		return -EACCES;
	}
	char path[160];
	rc = pp_tree_socket(getpid(), path, sizeof path);
	if (rc) {
		snprintf(err, errlen, "the socket path is too long");
		return rc;
	}
	rc = pp_config_member(cfg, path, member, err, errlen);
	if (rc)
		return rc;
	int early = pp_fork_early_fd;
	pp_fork_early_fd = -1;
	if (still_bound(early, path)) {
		member->have_bound_fd = 1;
		member->bound_fd = early;
	}
	return 0;
}

void pp_tree_own(void)
{
	pp_fork_tree.root = getpid();
}

int pp_fork_pid_alive(pid_t pid)
{
	return kill(pid, 0) == 0 || errno == EPERM;
}

/* Every "<pid>.sock" in the directory: fn(pid, arg) for each. */
static void each_socket(void (*fn)(pid_t pid, void *arg), void *arg)
{
	DIR *d = opendir(pp_fork_tree.dir);
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
	if (!pp_fork_pid_alive(pid) &&
	    pp_tree_socket(pid, path, sizeof path) == 0)
		unlink(path);
}

void pp_tree_leave(void)
{
	char path[160];
	if (pp_tree_socket(getpid(), path, sizeof path) == 0)
		unlink(path);
	/* The last one out (the root, or the last member of a tree whose
	 * root is gone) takes the directory: rmdir fails while sockets of
	 * live members remain. */
	each_socket(remove_stale, NULL);
	rmdir(pp_fork_tree.dir);
}

struct collect {
	pid_t *out;
	size_t max, n;
};

static void collect_one(pid_t pid, void *arg)
{
	struct collect *c = arg;
	char path[160];
	if (!pp_fork_pid_alive(pid)) {
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
	if (!pp_tree_dir()[0])
		return 0;
	each_socket(collect_one, &c);
	qsort(out, c.n < max ? c.n : max, sizeof *out, by_pid);
	return c.n;
}

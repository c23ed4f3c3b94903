/*
 * The agent's descriptors: a count and a share of RLIMIT_NOFILE. The limit is
 * read at each reservation (the host may raise or lower it at any time;
 * getrlimit is one cheap system call next to the open it guards).
 * Context: agent.
 */
#include "fds.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static _Atomic long held, kept, base;
static _Atomic size_t refused;

static size_t limit_now(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return 1u << 20;
	return (size_t)rl.rlim_cur;
}

/* An eighth of the limit; at small limits (64) at least 16, so that the
 * server's four, libunwind's two, a few connections and a file being read
 * fit, but never more than a quarter. */
static size_t share_of(size_t limit)
{
	size_t s = limit / 8;
	if (s < 16)
		s = 16 < limit / 4 ? 16 : limit / 4;
	return s ? s : 1;
}

/* Take one place if fewer than share - keep are held. */
static int take(size_t keep)
{
	size_t share = share_of(limit_now());
	size_t most = share > keep ? share - keep : 1;
	long h = atomic_load_explicit(&held, memory_order_relaxed);
	do {
		if (h >= 0 && (size_t)h >= most) {
			atomic_fetch_add_explicit(&refused, 1,
			                          memory_order_relaxed);
			return -EMFILE;
		}
	} while (!atomic_compare_exchange_weak_explicit(
	    &held, &h, h + 1, memory_order_relaxed, memory_order_relaxed));
	return 0;
}

/* The places kept free: connections leave two to files (a request needs
 * its symbol file), perf events four (a thread dump may want sixteen;
 * connections and files come first). */
int pp_fds_room(void)
{
	size_t share = share_of(limit_now());
	long h = atomic_load_explicit(&held, memory_order_relaxed);
	return h < 0 || (size_t)h + 2 < share;
}

int pp_fds_reserve(void)
{
	return take(0);
}

int pp_fds_reserve_spare(void)
{
	return take(4);
}

void pp_fds_release(void)
{
	atomic_fetch_sub_explicit(&held, 1, memory_order_relaxed);
}

void pp_fds_add(long n)
{
	atomic_fetch_add_explicit(&held, n, memory_order_relaxed);
}

void pp_fds_add_kept(long n)
{
	atomic_fetch_add_explicit(&kept, n, memory_order_relaxed);
	atomic_fetch_add_explicit(&held, n, memory_order_relaxed);
}

void pp_fds_note_error(int err)
{
	if (err == EMFILE || err == ENFILE)
		atomic_fetch_add_explicit(&refused, 1, memory_order_relaxed);
}

/* An open that failed gives its reservation back, counts EMFILE and
 * ENFILE, and keeps errno. */
static void open_failed(void)
{
	int e = errno;
	pp_fds_release();
	pp_fds_note_error(e);
	errno = e;
}

int pp_fds_open(const char *path, int flags)
{
	if (pp_fds_reserve()) {
		errno = EMFILE;
		return -1;
	}
	int fd = open(path, flags | O_CLOEXEC);
	if (fd >= 0)
		fd = pp_fd_move_high(fd);
	if (fd < 0)
		open_failed();
	return fd;
}

void pp_fds_close(int fd)
{
	if (fd < 0)
		return;
	close(fd);
	pp_fds_release();
}

FILE *pp_fds_fopen(const char *path, const char *mode)
{
	char m[8];
	snprintf(m, sizeof m, "%.6se", mode);
	if (pp_fds_reserve()) {
		errno = EMFILE;
		return NULL;
	}
	/* Read-only files (all the agent reads) are opened here and moved
	 * before stdio takes them (pp_fd_move_high). */
	FILE *f;
	if (mode[0] == 'r' && !strchr(mode, '+')) {
		int fd = pp_fd_move_high(open(path, O_RDONLY | O_CLOEXEC));
		f = fd >= 0 ? fdopen(fd, m) : NULL;
		if (!f && fd >= 0) {
			int e = errno;
			close(fd);
			errno = e;
		}
	} else {
		f = fopen(path, m);
	}
	if (!f)
		open_failed();
	return f;
}

void pp_fds_fclose(FILE *f)
{
	if (!f)
		return;
	fclose(f);
	pp_fds_release();
}

DIR *pp_fds_opendir(const char *path)
{
	if (pp_fds_reserve()) {
		errno = EMFILE;
		return NULL;
	}
	int fd =
	    pp_fd_move_high(open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		errno = e;
		open_failed();
	}
	return d;
}

void pp_fds_closedir(DIR *d)
{
	if (!d)
		return;
	closedir(d);
	pp_fds_release();
}

void pp_fds_stats(struct pp_fds_stats *out)
{
	long h = atomic_load_explicit(&held, memory_order_relaxed);
	out->held = h > 0 ? (size_t)h : 0;
	out->limit = limit_now();
	out->share = share_of(out->limit);
	out->refused = atomic_load_explicit(&refused, memory_order_relaxed);
	out->base = (size_t)atomic_load(&base);
	out->too_small = pp_fds_share_too_small();
	out->needed = 0;
	if (out->too_small)
		for (size_t l = out->limit; l <= 4096 && !out->needed; l++)
			if (share_of(l) >= out->base + 3)
				out->needed = l;
}

void pp_fds_note_base(void)
{
	long h = atomic_load_explicit(&held, memory_order_relaxed);
	atomic_store(&base, h > 0 ? h : 0);
}

int pp_fds_share_too_small(void)
{
	long b = atomic_load(&base);
	return b > 0 && (size_t)b + 3 > share_of(limit_now());
}

void pp_fds_reset(void)
{
	atomic_store(&held, atomic_load(&kept));
}

/*
 * fstat as the system call itself. A sanitizer's interceptor would model
 * the look as a use of the descriptor, and ThreadSanitizer reports a race
 * with the host's open() that took the number: which is the very thing
 * the look is there to find out. The kernel's struct stat is the C
 * library's on x86-64 and arm64.
 */
static int fstat_raw(int fd, struct stat *st)
{
#ifdef SYS_fstat
	return (int)syscall(SYS_fstat, fd, st);
#else
	return (int)syscall(SYS_newfstatat, fd, "", st, AT_EMPTY_PATH);
#endif
}

int pp_fd_id_take(int fd, struct pp_fd_id *id)
{
	struct stat st;
	id->fd = -1;
	if (fd < 0 || fstat_raw(fd, &st) != 0)
		return fd < 0 ? -EBADF : -errno;
	*id = (struct pp_fd_id){fd, st.st_dev, st.st_ino, st.st_mode};
	return 0;
}

int pp_fd_id_ours(const struct pp_fd_id *id)
{
	struct stat st;
	int e = errno;
	int same = id->fd >= 0 && fstat_raw(id->fd, &st) == 0 &&
	           st.st_dev == id->dev && st.st_ino == id->ino;
	errno = e;
	return same;
}

int pp_fd_id_close(struct pp_fd_id *id)
{
	int mine = pp_fd_id_ours(id);
	if (mine)
		close(id->fd);
	id->fd = -1;
	return mine;
}

/* The first number the agent's descriptors move to (util/fds.h): the
 * agent's share below the soft limit, never above 1024. */
static int high_floor(void)
{
	size_t limit = limit_now();
	size_t share = share_of(limit);
	size_t floor = limit > share ? limit - share : 0;
	return floor > 1024 ? 1024 : (int)floor;
}

static int move_high(const struct pp_fd_id *id, int floor)
{
	if (id->fd < 0)
		return -1;
	if (id->fd >= floor)
		return id->fd;
	int e = errno;
	int hi = fcntl(id->fd, F_DUPFD_CLOEXEC, floor);
	struct pp_fd_id got = {.fd = -1};
	if (hi < 0) {
		/* EBADF: the host closed it already. */
		int gone = errno == EBADF;
		errno = e;
		return gone ? -1 : id->fd;
	}
	if (pp_fd_id_take(hi, &got) != 0 || got.dev != id->dev ||
	    got.ino != id->ino) {
		/* The number is a file of the host's now: its copy goes, the
		 * number stays the host's. */
		close(hi);
		errno = e;
		return -1;
	}
	struct pp_fd_id low = *id;
	pp_fd_id_close(&low);
	errno = e;
	return hi;
}

int pp_fd_move_high_id(const struct pp_fd_id *id)
{
	return move_high(id, high_floor());
}

int pp_fd_move_high(int fd)
{
	struct pp_fd_id id;
	int floor = high_floor();
	if (fd < 0 || fd >= floor)
		return fd;
	int hi = pp_fd_id_take(fd, &id) == 0 ? move_high(&id, floor) : -1;
	if (hi < 0)
		errno = EBADF;
	return hi;
}

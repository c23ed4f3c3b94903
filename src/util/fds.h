/*
 * The file descriptors the agent holds, counted, and kept to a share of the
 * process's RLIMIT_NOFILE: descriptors are the host's to use, so the agent
 * holds none it can do without (the symbolizer reads files into memory or
 * maps them and closes them at once) and opens no more at a time than its
 * share. Lock-free.
 * Context: agent.
 */
#ifndef PP_FDS_H
#define PP_FDS_H

#include <dirent.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* Count one descriptor about to be opened: 0, or -EMFILE when the agent
 * holds its share already (it is then not counted). */
int pp_fds_reserve(void);
/* The same for what can be done without (perf events): -EMFILE when
 * fewer than four places of the share are left, which stay for
 * connections and files. */
int pp_fds_reserve_spare(void);
/* Count a descriptor as closed (or a reservation that was not used). */
void pp_fds_release(void);
/* Count n descriptors opened or (n < 0) closed without asking for room:
 * the server's own, set up at start, and connections libmicrohttpd has
 * already accepted. */
void pp_fds_add(long n);
/* Count n descriptors held until the process ends (libunwind's), which a
 * forked child inherits. */
void pp_fds_add_kept(long n);
/* Is there room for one more connection, two places of the share left for
 * files? (At accept: a connection over it is closed at once.) */
int pp_fds_room(void);

/* open(2) with a reservation; O_CLOEXEC is added. The descriptor, or -1
 * with errno (EMFILE when the agent holds its share). */
int pp_fds_open(const char *path, int flags);
/* close(2) of a descriptor from pp_fds_open (or reserved). */
void pp_fds_close(int fd);
/* fopen and opendir with a reservation (mode gets "e", close-on-exec),
 * and their closes. NULL with errno as open's. */
FILE *pp_fds_fopen(const char *path, const char *mode);
void pp_fds_fclose(FILE *f);
DIR *pp_fds_opendir(const char *path);
void pp_fds_closedir(DIR *d);
/* Count a failed open(2): EMFILE or ENFILE from the kernel, or a
 * reservation refused. */
void pp_fds_note_error(int err);

/*
 * Is a descriptor number still the file the agent opened? A host may close
 * descriptors it did not open (closefrom(3) at start-up) and get the numbers
 * again for its own files: the agent then must neither read, write nor
 * close them. The identity is the file's (st_dev, st_ino): unique for a
 * socket (sockfs) and a pipe (pipefs), the same for every epoll set or
 * eventfd (one anonymous inode), so for those it proves only the kind.
 */
struct pp_fd_id {
	int fd; /* -1: none */
	dev_t dev;
	ino_t ino;
	mode_t mode; /* its type (S_ISSOCK ...), as taken */
};
/* Take fd's identity now: 0, or a negative errno (id->fd is -1 then). */
int pp_fd_id_take(int fd, struct pp_fd_id *id);
/* Is id->fd still that file? Async-signal-safe (one fstat). What is not
 * closed: the host may reuse the number between this check and the use. */
int pp_fd_id_ours(const struct pp_fd_id *id);
/* close(id->fd) if it is still ours; the id is forgotten either way.
 * Returns 1 when it was closed. */
int pp_fd_id_close(struct pp_fd_id *id);

struct pp_fds_stats {
	size_t held;    /* descriptors the agent holds now */
	size_t share;   /* the most it holds at once: an eighth of the soft
	                   RLIMIT_NOFILE (at least 16, at most a quarter) */
	size_t limit;   /* the soft RLIMIT_NOFILE now */
	size_t refused; /* opens refused at the share, or failed with
	                   EMFILE/ENFILE */
	size_t base;    /* what the server keeps open (pp_fds_note_base) */
	int too_small;  /* pp_fds_share_too_small() */
	size_t needed;  /* the least RLIMIT_NOFILE whose share fits the
	                   server, a connection and a file (when too_small) */
};
void pp_fds_stats(struct pp_fds_stats *out);
/* The server has set itself up: what the agent holds now is what it
 * keeps open while idle. */
void pp_fds_note_base(void);
/* The share cannot hold what the server keeps, a connection and a file
 * (RLIMIT_NOFILE of 16 to 32): the server then lets one connection in
 * past the share, for requests answered at once (conns.c). */
int pp_fds_share_too_small(void);

/*
 * Move a descriptor the agent just opened to a number far above the host's
 * and return that number (fd itself when it cannot move: the limit is too
 * low, or no number up there is free). The kernel gives the lowest free
 * number, which is the one a host's own code has just closed: a host that
 * closes a number twice (bash closes a pipe end a second time after
 * forking) or closes a stale one then closes the agent's file, and a
 * connection breaks in the middle of an answer. Up there (from the
 * agent's share below the soft RLIMIT_NOFILE, at most from 1024, where a
 * host using select(2) never goes) no such number comes. The low number is
 * closed only while it is still the same file. Returns -1 with EBADF when
 * the host closed the number meanwhile: never the number, which may then
 * be a file of the host's.
 */
int pp_fd_move_high(int fd);
/* The same for a descriptor whose file the host may have closed (and
 * replaced) since it was made: id is the file taken at once after it was
 * made. Returns the new number, fd when it stays, or -1 when fd is no longer
 * that file (nothing of the host's is closed then). */
int pp_fd_move_high_id(const struct pp_fd_id *id);

/* In a forked child: the parent's count is not the child's (but for what
 * pp_fds_add_kept counted). */
void pp_fds_reset(void);

#endif

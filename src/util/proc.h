/* Facts about this process (/proc/self) and its sockets. Agent context. */
#ifndef PP_PROC_H
#define PP_PROC_H

#include <stddef.h>

/* Read a whole /proc file (they report size 0) into a NUL-terminated malloc'd
 * buffer of at most max bytes. Returns 0 or a negative errno. */
int pp_proc_read_file(const char *path, size_t max, char **out, size_t *len);

/* /proc/self/cmdline: arguments separated by NULs, without the final NUL. */
int pp_proc_cmdline(char **out, size_t *len);

/* The executable's path (malloc'd), or NULL. */
char *pp_proc_exe(void);

/* Process start time as seconds since the epoch, or a negative errno. */
double pp_proc_start_time(void);

/* Has the peer of socket fd hung up (or the socket failed)? Does not
 * block; false for fd < 0. */
int pp_fd_hung_up(int fd);

#endif

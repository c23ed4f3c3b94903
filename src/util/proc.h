/* Facts about this process (/proc/self) and its sockets.
 * Context: agent.
 */
#ifndef PP_PROC_H
#define PP_PROC_H

#include <stddef.h>
#include <stdint.h>

/* Read a whole /proc file (they report size 0) into a NUL-terminated malloc'd
 * buffer of at most max bytes. Returns 0 or a negative errno. */
int pp_proc_read_file(const char *path, size_t max, char **out, size_t *len);

/* The command line, as /status, /cmdline and the Perfetto trace show it:
 * *argc arguments separated by NULs, without the final NUL, in *len bytes of
 * a malloc'd, NUL-terminated buffer. While /proc/self/cmdline still holds
 * the arguments the process started with, they are shown as they are (empty
 * ones included). A process that wrote a title over its argv area
 * (setproctitle, as redis, nginx and PostgreSQL do) leaves the title
 * followed by NUL padding, which would read as dozens of empty arguments:
 * then the trailing NULs are dropped, as ps drops them, and what is left is
 * shown (a title with spaces is one string, as ps prints it). */
int pp_proc_cmdline(char **out, size_t *len, size_t *argc);

/* That rule on n bytes read from a cmdline file: returns the length of the
 * arguments without the final NUL, and their count in *argc. `as_started`:
 * the bytes are the arguments the process started with. */
size_t pp_proc_cmdline_shape(const char *buf, size_t n, int as_started,
                             size_t *argc);

/* The executable's path (malloc'd), or NULL. */
char *pp_proc_exe(void);

/* Process start time as seconds since the epoch, or a negative errno. */
double pp_proc_start_time(void);

/* Copy n bytes of this process's memory at addr into out, with a checked
 * read (process_vm_readv on itself): a page that is unmapped, PROT_NONE or
 * a file page past the end of a file truncated under its mapping gives
 * -EFAULT instead of the SIGSEGV or SIGBUS a plain load would raise.
 * Returns 0 or a negative errno. Agent context. */
int pp_proc_copy_self(uintptr_t addr, void *out, size_t n);

/* Has the peer of socket fd hung up (or the socket failed)? Does not
 * block; false for fd < 0. */
int pp_fd_hung_up(int fd);

#endif

/*
 * The HTTP thread (loop.c) and the server's set-up (server.c): what each
 * calls of the other. The loop sets a daemon up again after the host
 * closed the server's descriptors; starting and stopping the server start
 * the loop, wake it and check the descriptors one last time.
 * Context: agent.
 */
#ifndef PP_LOOP_H
#define PP_LOOP_H

#include <stddef.h>

struct pp_server;

/* The longest the loop waits without looking at its descriptors (and at a
 * stop whose wake-up could not be written). */
#define PP_FD_CHECK_MS 1000

/* loop.c. The thread "pullprof-http". */
void *pp_server_loop(void *arg);
/* Which descriptor of the server is no longer the file it opened (said in
 * buf); NULL when all are. */
const char *pp_server_lost_fd(struct pp_server *s, char *buf, size_t len);
/* Let go of a daemon whose descriptors the host closed (what names what
 * was found); the loop sets a new one up. */
void pp_server_abandon(struct pp_server *s, const char *what);
/* Install the panic function that lets the HTTP thread leave a run of
 * libmicrohttpd that panicked (loop.c); before the first daemon starts. */
void pp_server_catch_panics(void);
/* In a forked child (async-signal-safe): forget the parent's HTTP threads'
 * panic slots. */
void pp_server_panics_forget_in_child(void);
/* Wake the loop, if the pipe is still ours (mhd_mu held, or the HTTP
 * thread). */
void pp_server_wake_locked(struct pp_server *s);

/* server.c. The listening socket, libmicrohttpd's daemon and the wake-up
 * pipe; again: after abandon, on the same address. 0, or a negative errno
 * with one sentence in err; on failure nothing is left open. */
int pp_server_open_daemon(struct pp_server *s, int again, char *err,
                          size_t errlen);

#endif

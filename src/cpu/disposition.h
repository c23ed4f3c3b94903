/*
 * The sampling signal's disposition (disposition.c), for timers.c: the
 * choice of signal, the handler installed and given back, the checks that
 * the host has not taken it. Each call reads or writes the process's
 * dispositions with sigaction(); none keeps state.
 * Context: agent.
 */
#ifndef PP_DISPOSITION_H
#define PP_DISPOSITION_H

#include <signal.h>
#include <stddef.h>

/* sigaction(), marked as pullprof's own (the interposed one passes it
 * through): every call pullprof makes. */
int pp_timers_sigaction(int sig, const struct sigaction *act,
                        struct sigaction *old);
/* Is a the sampling handler? */
int pp_timers_is_ours(const struct sigaction *a);
/* Can SIGPROF be taken (the host neither handles it nor has armed
 * ITIMER_PROF)? 0, or -EEXIST with err (may be NULL) saying why not:
 * "this process has <first> and <why>". */
int pp_timers_prof_free(const char *first, char *err, size_t errlen);
/* Install the sampling handler for sig; the disposition before in *old.
 * 0, or -EEXIST when the host had installed a handler of its own since
 * the check (it stays), or another negative errno. */
int pp_timers_install(int sig, struct sigaction *old);
/* Give sig back: its pending instances discarded, then old, unless the
 * host set a disposition of its own since (that one stays). */
void pp_timers_restore(int sig, const struct sigaction *old);
/* The host took sig: leave its disposition, discard what of ours is
 * pending only where the host's disposition would discard it anyway. */
void pp_timers_let_go(int sig);
/* While sampling with signo (and SIGPROF too when prof_taken): has the
 * host taken either, or armed ITIMER_PROF while SIGPROF is sampled with
 * (not in setitimer mode)? 0, or 1 with why set. */
int pp_timers_check_signals(int signo, int prof_taken, int setitimer_mode,
                            char *why, size_t len);

#endif

/*
 * Seccomp filters that kill (seccomp.h): the probe.
 *
 * A filter is the calling thread's (filters are per thread, inherited by
 * clone), so the probe is a child of the asking thread: glibc's clone()
 * with CLONE_VM (no copy of the host's page tables; the child runs on a
 * stack of its own here) and no exit signal (the host's SIGCHLD handler
 * and its waitpid(-1) never see it: only __WCLONE waits do). The child
 * sets SIGSYS to its default action in its own copy of the handlers (a
 * filter's SECCOMP_RET_TRAP would otherwise run the host's handler in
 * memory it shares), makes the call with arguments the kernel refuses at
 * once (an invalid clock, timer, pid or a NULL attribute: nothing is
 * created, nothing read or armed), and exits. Killed: forbidden. The child runs
 * nothing but system calls: no lock, no allocation, nothing of the host's
 * or the agent's.
 *
 * What is not probed: the clone itself. A filter that kills clone for a
 * new process (not a thread) kills the host at the first probe; such a
 * process cannot spawn anything (posix_spawn, system and popen make the
 * same call), and systemd's groups put clone with fork and vfork in
 * @process, which @system-service allows.
 * Context: agent.
 */
#define _GNU_SOURCE 1
#include "util/seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/proc.h"

_Atomic int pp_seccomp_vm_readv_off;

static const char *const names[PP_SC_COUNT] = {
    [PP_SC_PERF_EVENT_OPEN] = "perf_event_open",
    [PP_SC_TIMER_CREATE] = "timer_create",
    [PP_SC_TIMER_SETTIME] = "timer_settime",
    [PP_SC_TIMER_DELETE] = "timer_delete",
    [PP_SC_GETITIMER] = "getitimer",
    [PP_SC_SETITIMER] = "setitimer",
    [PP_SC_PROCESS_VM_READV] = "process_vm_readv",
    [PP_SC_PIDFD_OPEN] = "pidfd_open",
    [PP_SC_KCMP] = "kcmp",
    [PP_SC_MEMFD_CREATE] = "memfd_create",
};

static const long numbers[PP_SC_COUNT] = {
    [PP_SC_PERF_EVENT_OPEN] = SYS_perf_event_open,
    [PP_SC_TIMER_CREATE] = SYS_timer_create,
    [PP_SC_TIMER_SETTIME] = SYS_timer_settime,
    [PP_SC_TIMER_DELETE] = SYS_timer_delete,
    [PP_SC_GETITIMER] = SYS_getitimer,
    [PP_SC_SETITIMER] = SYS_setitimer,
    [PP_SC_PROCESS_VM_READV] = SYS_process_vm_readv,
    [PP_SC_PIDFD_OPEN] = SYS_pidfd_open,
    [PP_SC_KCMP] = SYS_kcmp,
    [PP_SC_MEMFD_CREATE] = SYS_memfd_create,
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct pp_seccomp_call calls[PP_SC_COUNT];
static _Atomic uint64_t probes, refusals;
static _Atomic int last_mode = -1, last_leader_mode = -1;
static _Atomic long last_filters = -1, last_leader_filters = -1;

const char *pp_seccomp_name(enum pp_sc c)
{
	return c < PP_SC_COUNT ? names[c] : "?";
}

const char *pp_seccomp_verdict_name(int v)
{
	switch (v) {
	case PP_SCV_ALLOWED: return "allowed";
	case PP_SCV_FORBIDDEN: return "forbidden";
	case PP_SCV_UNPROBED: return "not probed";
	default: return "not asked";
	}
}

static long field(const char *status, const char *name)
{
	size_t len = strlen(name);
	for (const char *p = status; p && *p; p = strchr(p, '\n')) {
		if (*p == '\n')
			p++;
		if (strncmp(p, name, len) == 0 && p[len] == ':')
			return strtol(p + len + 1, NULL, 10);
	}
	return -1;
}

static void read_status(const char *path, int *mode, long *filters)
{
	char *s = NULL;
	size_t n;
	*mode = -1;
	*filters = -1;
	if (pp_proc_read_file(path, 1 << 16, &s, &n) == 0) {
		*mode = (int)field(s, "Seccomp");
		*filters = field(s, "Seccomp_filters");
		free(s);
	}
}

void pp_seccomp_thread(int *mode, long *filters)
{
	read_status("/proc/thread-self/status", mode, filters);
	if (*mode < 0) {
		/* No /proc (a chroot): the thread's own mode from the kernel.
		 * prctl is a call the agent makes anyway (thread names), and
		 * PR_GET_SECCOMP kills only in strict mode, where the agent
		 * could not be running. */
		int m = prctl(PR_GET_SECCOMP, 0, 0, 0, 0);
		if (m >= 0)
			*mode = m;
	}
	atomic_store(&last_mode, *mode);
	atomic_store(&last_filters, *filters);
}

int pp_seccomp_mode_raw(void)
{
	char buf[4096];
	int saved = errno;
	int fd = open("/proc/thread-self/status", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		/* No /proc (a chroot): as pp_seccomp_thread does. */
		int m = prctl(PR_GET_SECCOMP, 0, 0, 0, 0);
		errno = saved;
		return m >= 0 ? m : -1;
	}
	size_t n = 0;
	for (;;) {
		ssize_t r = read(fd, buf + n, sizeof buf - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
		if (n == sizeof buf - 1)
			break;
	}
	close(fd);
	errno = saved;
	buf[n] = 0;
	static const char key[] = "\nSeccomp:";
	for (size_t i = 0; i + sizeof key - 1 < n; i++) {
		if (memcmp(buf + i, key, sizeof key - 1) != 0)
			continue;
		for (size_t j = i + sizeof key - 1; j < n; j++)
			if (buf[j] >= '0' && buf[j] <= '9')
				return buf[j] - '0';
			else if (buf[j] != ' ' && buf[j] != '\t')
				break;
		return -1;
	}
	return -1;
}

/* ---- the child ----------------------------------------------------------- */

struct probe {
	long nr;
	long a[6];
};

/* The probe's stack (probes run one at a time, under lock). */
static char child_stack[16384] __attribute__((aligned(64)));

/* Runs on child_stack, in memory it shares with the agent: nothing
 * instrumented (a sanitizer's bookkeeping is the parent's). */
__attribute__((no_sanitize("address", "undefined"),
               no_sanitize_thread)) static int
probe_child(void *arg)
{
	const struct probe *p = arg;
	/* The kernel's sigaction, all zero: SIG_DFL, no flags, empty mask,
	 * in the layout of every architecture. */
	unsigned long act[4] = {0, 0, 0, 0};
	syscall(SYS_rt_sigaction, SIGSYS, act, NULL, 8);
	long r = syscall(p->nr, p->a[0], p->a[1], p->a[2], p->a[3], p->a[4],
	                 p->a[5]);
	/* The errno comes back as the exit status (the thread's errno is
	 * shared with the waiting parent: not read from there). */
	return r < 0 ? (errno & 0x7f) : 0;
}

static void args_for(enum pp_sc c, struct probe *p)
{
	memset(p, 0, sizeof *p);
	p->nr = numbers[c];
	switch (c) {
	case PP_SC_PERF_EVENT_OPEN: /* NULL attribute: EFAULT */
		p->a[0] = 0;
		p->a[1] = 0;
		p->a[2] = -1;
		p->a[3] = -1;
		break;
	case PP_SC_TIMER_CREATE: /* no such clock: EINVAL */
		p->a[0] = 0x7ffffff0;
		break;
	case PP_SC_TIMER_SETTIME: /* no such timer: EINVAL */
	case PP_SC_TIMER_DELETE: p->a[0] = -1; break;
	case PP_SC_GETITIMER: /* no such timer: EINVAL */
	case PP_SC_SETITIMER: p->a[0] = 99; break;
	case PP_SC_MEMFD_CREATE: /* NULL name: EFAULT */ p->a[0] = 0; break;
	case PP_SC_PROCESS_VM_READV: /* nothing to copy from pid 0 */
		p->a[0] = 0;
		break;
	case PP_SC_PIDFD_OPEN: /* pid -1: EINVAL */ p->a[0] = -1; break;
	case PP_SC_KCMP: /* no such type: EINVAL */
		p->a[0] = getpid();
		p->a[1] = getpid();
		p->a[2] = -1;
		break;
	default: break;
	}
}

/* Make c in a child. Returns PP_SCV_* and the signal or errno. */
static int probe(enum pp_sc c, int *signo, int *err)
{
	struct probe p;
	args_for(c, &p);
	*signo = 0;
	*err = 0;
	atomic_fetch_add(&probes, 1);
	int saved = errno;
	pid_t pid =
	    clone(probe_child, child_stack + sizeof child_stack, CLONE_VM, &p);
	if (pid < 0) {
		*err = errno;
		errno = saved;
		return PP_SCV_UNPROBED;
	}
	int st = 0;
	pid_t got = 0;
	/* At most two seconds: a filter's supervisor (SECCOMP_RET_USER_NOTIF)
	 * or tracer may hold the child. */
	for (int i = 0; i < 2000; i++) {
		got = waitpid(pid, &st, __WCLONE | WNOHANG);
		if (got != 0)
			break;
		struct timespec ms = {0, i < 20 ? 50000 : 1000000};
		nanosleep(&ms, NULL);
	}
	if (got == 0) {
		kill(pid, SIGKILL);
		got = waitpid(pid, &st, __WCLONE);
		errno = saved;
		*err = ETIMEDOUT;
		return PP_SCV_UNPROBED;
	}
	errno = saved;
	if (got != pid)
		return PP_SCV_UNPROBED;
	if (WIFSIGNALED(st)) {
		*signo = WTERMSIG(st);
		return PP_SCV_FORBIDDEN;
	}
	*err = WIFEXITED(st) ? WEXITSTATUS(st) : 0;
	return PP_SCV_ALLOWED;
}

/* ---- asking -------------------------------------------------------------- */

int pp_seccomp_allowed(enum pp_sc c)
{
	if (c >= PP_SC_COUNT)
		return 0;
	int mode;
	long filters;
	/* No filter on this thread, the usual case: one system call, not a
	 * read of its status file (wall windows ask on every tick). */
	if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) == 0) {
		atomic_store(&last_mode, 0);
		atomic_store(&last_filters, 0);
		return 1;
	}
	pp_seccomp_thread(&mode, &filters);
	if (mode == 0)
		return 1;
	pthread_mutex_lock(&lock);
	struct pp_seccomp_call *k = &calls[c];
	k->name = names[c];
	int ok;
	k->mode = mode;
	if (mode != 2) {
		/* Strict mode (1) allows four calls; unknown: no /proc and
		 * no prctl. Nothing to probe with: not made. */
		k->verdict = PP_SCV_UNPROBED;
		k->err = 0;
		k->filters = filters;
		ok = 0;
	} else if (k->verdict == PP_SCV_FORBIDDEN) {
		ok = 0; /* filters are never taken away */
	} else if (k->verdict == PP_SCV_ALLOWED && filters >= 0 &&
	           k->filters == filters) {
		ok = 1;
	} else {
		k->verdict = probe(c, &k->signo, &k->err);
		k->filters = filters;
		k->probes++;
		ok = k->verdict == PP_SCV_ALLOWED;
	}
	pthread_mutex_unlock(&lock);
	if (!ok)
		atomic_fetch_add(&refusals, 1);
	return ok;
}

int pp_seccomp_refused(enum pp_sc c)
{
	if (c >= PP_SC_COUNT)
		return 0;
	pthread_mutex_lock(&lock);
	int v = calls[c].verdict;
	pthread_mutex_unlock(&lock);
	return v == PP_SCV_FORBIDDEN || v == PP_SCV_UNPROBED;
}

int pp_seccomp_allowed_all(const enum pp_sc *cs, int n, enum pp_sc *which)
{
	for (int i = 0; i < n; i++)
		if (!pp_seccomp_allowed(cs[i])) {
			if (which)
				*which = cs[i];
			return 0;
		}
	return 1;
}

void pp_seccomp_reason(enum pp_sc c, char *out, size_t n)
{
	pthread_mutex_lock(&lock);
	struct pp_seccomp_call k = calls[c < PP_SC_COUNT ? c : 0];
	pthread_mutex_unlock(&lock);
	const char *name = pp_seccomp_name(c);
	if (k.verdict == PP_SCV_FORBIDDEN)
		snprintf(
		    out, n,
		    "a seccomp filter kills the process for %s (its probe, "
		    "made in a child, was killed by %s; "
		    "/proc/thread-self/status: Seccomp: 2); pullprof does "
		    "not make that call",
		    name, k.signo == SIGSYS ? "SIGSYS" : strsignal(k.signo));
	else if (k.err == EXDEV)
		snprintf(
		    out, n,
		    "%s could not be probed: the process's first thread is "
		    "under a seccomp filter this thread does not share; "
		    "pullprof does not make a call a filter might kill the "
		    "process for",
		    name);
	else
		snprintf(out, n,
		         "%s could not be probed under the seccomp filter "
		         "(Seccomp: %d%s%s); pullprof does not make a call a "
		         "filter might kill the process for",
		         name, k.mode, k.err ? ", " : "",
		         k.err ? strerror(k.err) : "");
}

void pp_seccomp_forget_in_child(void)
{
	pthread_mutex_init(&lock, NULL);
}

int pp_seccomp_refresh_vm_readv(void)
{
	int mode, lmode;
	long filters, lfilters;
	pp_seccomp_thread(&mode, &filters);
	/* The first thread's (/proc/self/status): a filter installed on
	 * the host's main thread alone after the agent started is not the
	 * agent's, and the agent's probe cannot tell what it kills; the
	 * sampling handler runs on the host's threads. */
	read_status("/proc/self/status", &lmode, &lfilters);
	atomic_store(&last_leader_mode, lmode);
	atomic_store(&last_leader_filters, lfilters);
	int ok;
	if (mode == 0 && lmode <= 0) {
		ok = 1;
	} else if (lmode == 2 && (mode != 2 || lfilters != filters)) {
		pthread_mutex_lock(&lock);
		struct pp_seccomp_call *k = &calls[PP_SC_PROCESS_VM_READV];
		k->name = names[PP_SC_PROCESS_VM_READV];
		if (k->verdict != PP_SCV_FORBIDDEN) {
			k->verdict = PP_SCV_UNPROBED;
			k->err = EXDEV; /* another thread's filter */
			k->mode = mode;
		}
		pthread_mutex_unlock(&lock);
		ok = 0;
	} else {
		ok = pp_seccomp_allowed(PP_SC_PROCESS_VM_READV);
	}
	atomic_store(&pp_seccomp_vm_readv_off, !ok);
	return ok;
}

void pp_seccomp_stats(struct pp_seccomp_stats *o)
{
	memset(o, 0, sizeof *o);
	o->mode = atomic_load(&last_mode);
	o->filters = atomic_load(&last_filters);
	o->leader_mode = atomic_load(&last_leader_mode);
	o->leader_filters = atomic_load(&last_leader_filters);
	o->probes = atomic_load(&probes);
	o->refusals = atomic_load(&refusals);
	pthread_mutex_lock(&lock);
	for (int i = 0; i < PP_SC_COUNT; i++) {
		o->calls[i] = calls[i];
		o->calls[i].name = names[i];
	}
	pthread_mutex_unlock(&lock);
}

/* /proc/self/task readers (task.h).
 * Context: agent.
 */
#define _GNU_SOURCE 1
#include "threads/task.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/fds.h"

static int by_tid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return (x > y) - (x < y);
}

int pp_task_list(pid_t **tids, size_t *n)
{
	DIR *d = pp_fds_opendir("/proc/self/task");
	pid_t *v = NULL;
	size_t cap = 0, len = 0;
	struct dirent *e;

	*tids = NULL;
	*n = 0;
	if (!d)
		return -errno;
	while ((e = readdir(d)) != NULL) {
		long tid = atol(e->d_name);
		if (tid <= 0)
			continue;
		if (len == cap) {
			cap = cap ? cap * 2 : 64;
			pid_t *w = realloc(v, cap * sizeof *w);
			if (!w) {
				pp_fds_closedir(d);
				free(v);
				return -ENOMEM;
			}
			v = w;
		}
		v[len++] = (pid_t)tid;
	}
	pp_fds_closedir(d);
	if (len)
		qsort(v, len, sizeof *v, by_tid);
	*tids = v;
	*n = len;
	return 0;
}

/* A small /proc file of the thread, NUL-terminated; its length or a
 * negative errno (-ESRCH: the thread is gone). */
static ssize_t read_task_file(pid_t tid, const char *what, char *buf,
                              size_t len)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/self/task/%d/%s", (int)tid, what);
	int fd = pp_fds_open(path, O_RDONLY);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	ssize_t got;
	do
		got = read(fd, buf, len - 1);
	while (got < 0 && errno == EINTR);
	int e = errno;
	pp_fds_close(fd);
	if (got < 0)
		return e == ESRCH ? -ESRCH : -e;
	buf[got] = 0;
	return got;
}

int pp_task_stat(pid_t tid, struct pp_task_stat *st)
{
	char buf[1024];
	ssize_t got = read_task_file(tid, "stat", buf, sizeof buf);
	if (got < 0)
		return (int)got;
	/* "tid (comm) S ppid ...": comm may hold spaces and parentheses, so
	 * it ends at the last ')'. */
	char *open = strchr(buf, '('), *close = strrchr(buf, ')');
	if (!open || !close || close < open || close[1] != ' ')
		return -EINVAL;
	size_t nl = (size_t)(close - open - 1);
	if (nl >= sizeof st->name)
		nl = sizeof st->name - 1;
	memcpy(st->name, open + 1, nl);
	st->name[nl] = 0;
	st->state = close[2];
	/* After the state: ppid pgrp session tty tpgid flags minflt cminflt
	 * majflt cmajflt utime(10) stime(11) ... nice(15) ... processor(35). */
	long long f[36] = {0};
	int n = 0;
	for (char *p = close + 3; n < 36 && *p;) {
		char *end;
		f[n++] = strtoll(p, &end, 10);
		if (end == p)
			break;
		p = end;
	}
	if (n < 36)
		return -EINVAL;
	unsigned long long ut = (unsigned long long)f[10],
	                   stime = (unsigned long long)f[11];
	st->nice = (int)f[15];
	st->last_cpu = (int)f[35];
	long hz = sysconf(_SC_CLK_TCK);
	uint64_t tick = 1000000000ull / (uint64_t)(hz > 0 ? hz : 100);
	st->utime_ns = ut * tick;
	st->stime_ns = stime * tick;
	return 0;
}

int pp_task_call(pid_t tid, struct pp_task_call *c)
{
	char buf[256];
	ssize_t got = read_task_file(tid, "syscall", buf, sizeof buf);
	memset(c, 0, sizeof *c);
	if (got < 0)
		return (int)got;
	if (strncmp(buf, "running", 7) == 0) {
		c->nr = PP_TASK_RUNNING;
		return 0;
	}
	unsigned long long a[9];
	long nr;
	int k = sscanf(buf, "%ld %llx %llx %llx %llx %llx %llx %llx %llx", &nr,
	               &a[0], &a[1], &a[2], &a[3], &a[4], &a[5], &a[6], &a[7]);
	if (k == 3 && nr == -1) {
		c->nr = PP_TASK_NOT_IN_CALL;
		c->sp = (uintptr_t)a[0];
		c->pc = (uintptr_t)a[1];
		return 0;
	}
	if (k != 9 || nr < 0)
		return -EINVAL;
	c->nr = nr;
	for (int i = 0; i < 6; i++)
		c->args[i] = a[i];
	c->sp = (uintptr_t)a[6];
	c->pc = (uintptr_t)a[7];
	return 0;
}

int pp_task_call_same(const struct pp_task_call *a,
                      const struct pp_task_call *b)
{
	return a->nr == b->nr && a->sp == b->sp && a->pc == b->pc &&
	       memcmp(a->args, b->args, sizeof a->args) == 0;
}

void pp_task_wchan(pid_t tid, char *out, size_t len)
{
	char buf[128];
	out[0] = 0;
	if (read_task_file(tid, "wchan", buf, sizeof buf) > 0 &&
	    strcmp(buf, "0") != 0)
		snprintf(out, len, "%s", buf);
}

const char *pp_task_state_name(char state)
{
	switch (state) {
	case 'R': return "running";
	case 'S': return "sleeping";
	case 'D': return "disk-sleep";
	case 'T': return "stopped";
	case 't': return "tracing-stop";
	case 'Z': return "zombie";
	case 'X': return "dead";
	case 'I': return "idle";
	case 'P': return "parked";
	case 'W': return "waking";
	default: return "unknown";
	}
}

/* The calls a thread is found blocked in, and a few more: the rest are
 * shown by number. The numbers are the architecture's (<sys/syscall.h>);
 * the older calls (open, poll, select, pause, epoll_wait) only some
 * architectures have (arm64 has their *at, p* and pwait forms only). */
static const struct {
	long nr;
	const char *name;
} calls[] = {
    {SYS_read, "read"},
    {SYS_write, "write"},
#ifdef SYS_open
    {SYS_open, "open"},
#endif
    {SYS_close, "close"},
#ifdef SYS_poll
    {SYS_poll, "poll"},
#endif
#ifdef SYS_select
    {SYS_select, "select"},
#endif
    {SYS_sched_yield, "sched_yield"},
    {SYS_msync, "msync"},
#ifdef SYS_pause
    {SYS_pause, "pause"},
#endif
    {SYS_nanosleep, "nanosleep"},
    {SYS_readv, "readv"},
    {SYS_writev, "writev"},
    {SYS_pread64, "pread64"},
    {SYS_pwrite64, "pwrite64"},
    {SYS_ioctl, "ioctl"},
    {SYS_accept, "accept"},
    {SYS_accept4, "accept4"},
    {SYS_connect, "connect"},
    {SYS_sendto, "sendto"},
    {SYS_recvfrom, "recvfrom"},
    {SYS_sendmsg, "sendmsg"},
    {SYS_recvmsg, "recvmsg"},
    {SYS_recvmmsg, "recvmmsg"},
    {SYS_sendmmsg, "sendmmsg"},
    {SYS_wait4, "wait4"},
    {SYS_waitid, "waitid"},
    {SYS_semop, "semop"},
    {SYS_semtimedop, "semtimedop"},
    {SYS_msgrcv, "msgrcv"},
    {SYS_msgsnd, "msgsnd"},
    {SYS_flock, "flock"},
    {SYS_fcntl, "fcntl"},
    {SYS_fsync, "fsync"},
    {SYS_fdatasync, "fdatasync"},
    {SYS_futex, "futex"},
    {SYS_rt_sigsuspend, "rt_sigsuspend"},
    {SYS_rt_sigtimedwait, "rt_sigtimedwait"},
#ifdef SYS_epoll_wait
    {SYS_epoll_wait, "epoll_wait"},
#endif
    {SYS_epoll_pwait, "epoll_pwait"},
    {SYS_epoll_pwait2, "epoll_pwait2"},
    {SYS_clock_nanosleep, "clock_nanosleep"},
    {SYS_pselect6, "pselect6"},
    {SYS_ppoll, "ppoll"},
    {SYS_io_getevents, "io_getevents"},
    {SYS_io_uring_enter, "io_uring_enter"},
    {SYS_openat, "openat"},
    {SYS_mq_timedreceive, "mq_timedreceive"},
    {SYS_mq_timedsend, "mq_timedsend"},
    {SYS_inotify_init1, "inotify_init1"},
    {SYS_splice, "splice"},
    {SYS_sync_file_range, "sync_file_range"},
    {SYS_mmap, "mmap"},
    {SYS_munmap, "munmap"},
    {SYS_madvise, "madvise"},
    {SYS_getrandom, "getrandom"},
};

const char *pp_task_syscall_name(long nr)
{
	for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++)
		if (calls[i].nr == nr)
			return calls[i].name;
	return NULL;
}

/*
 * dropper: a server that gives up its privileges after start, as daemons
 * do once they have bound their ports (tests/integration/
 * test_hostile_privileges.py). Preloaded with libpullprof; the agent starts
 * before main, with the privileges the process had.
 *
 * Threads that wait in known places: "blocked-read" in read() on a pipe
 * (in wait_read), "blocked-sleep" in nanosleep (in wait_sleep), and
 * "spinner" burning CPU (in spin). It prints "ready", then obeys lines on
 * stdin:
 *
 *   setuid UID  setgroups(0), setgid(UID), setuid(UID)
 *   nodump      prctl(PR_SET_DUMPABLE, 0)
 *   killfor NR  a seccomp filter killing the process for system call NR,
 *               put on every thread (the agent's too) with
 *               SECCOMP_FILTER_FLAG_TSYNC, as a host sandboxing itself
 *               after start does (test_hostile_seccomp.py)
 *   quit        exit 0
 *
 * Each change answers "dropped UID DUMPABLE", or "err ..." when it failed;
 * DUMPABLE is prctl(PR_GET_DUMPABLE) after the change. killfor answers
 * "filtered".
 */
#define _GNU_SOURCE 1
#include <grp.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int pipe_fds[2];

__attribute__((noinline)) static void wait_read(void)
{
	char c;
	while (read(pipe_fds[0], &c, 1) > 0)
		;
}

__attribute__((noinline)) static void wait_sleep(void)
{
	for (;;) {
		struct timespec ts = {3600, 0};
		nanosleep(&ts, NULL);
	}
}

__attribute__((noinline)) static void spin(void)
{
	volatile unsigned long x = 1;
	for (;;)
		x = x * 6364136223846793005ul + 1;
}

static void *start(void *arg)
{
	const char *name = arg;
	pthread_setname_np(pthread_self(), name);
	if (strcmp(name, "blocked-read") == 0)
		wait_read();
	else if (strcmp(name, "blocked-sleep") == 0)
		wait_sleep();
	else
		spin();
	return NULL;
}

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#endif

static int kill_for(long nr)
{
#ifdef ARCH
	struct sock_filter f[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
	             offsetof(struct seccomp_data, arch)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
	             offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof f / sizeof f[0], f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -1;
	return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
	               SECCOMP_FILTER_FLAG_TSYNC, &prog) == 0
	           ? 0
	           : -1;
#else
	(void)nr;
	return -1;
#endif
}

int main(void)
{
	static const char *const names[] = {"blocked-read", "blocked-sleep",
	                                    "spinner"};
	char line[256];

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (pipe(pipe_fds) != 0)
		return 1;
	for (int i = 0; i < 3; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, start, (void *)names[i]) != 0)
			return 1;
	}
	printf("ready\n");
	while (fgets(line, sizeof line, stdin)) {
		int rc = 0;
		if (strncmp(line, "setuid ", 7) == 0) {
			uid_t uid = (uid_t)atol(line + 7);
			rc = setgroups(0, NULL) | setgid(uid) | setuid(uid);
		} else if (strncmp(line, "nodump", 6) == 0) {
			rc = prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
		} else if (strncmp(line, "killfor ", 8) == 0) {
			if (kill_for(atol(line + 8)))
				printf("err %m\n");
			else
				printf("filtered\n");
			continue;
		} else if (strncmp(line, "quit", 4) == 0) {
			return 0;
		} else {
			printf("err unknown command\n");
			continue;
		}
		if (rc)
			printf("err %m\n");
		else
			printf("dropped %d %d\n", (int)getuid(),
			       prctl(PR_GET_DUMPABLE, 0, 0, 0, 0));
	}
	return 0;
}

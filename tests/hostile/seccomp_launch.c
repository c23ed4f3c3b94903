/*
 * A launcher that puts a seccomp filter on a program, as systemd's
 * SystemCallFilter= does: PR_SET_NO_NEW_PRIVS, then a BPF filter that
 * answers the named system calls with ACTION and allows every other, then
 * execvp. The filter is inherited by the program and every thread it
 * starts.
 *
 *   seccomp_launch ACTION CALL[,CALL...] PROGRAM [ARG...]
 *
 * ACTION: kill (SECCOMP_RET_KILL_PROCESS, systemd's default), thread
 * (SECCOMP_RET_KILL_THREAD), trap (SECCOMP_RET_TRAP) or eperm
 * (SECCOMP_RET_ERRNO | EPERM). CALL: a name from the table below or a
 * number. A wrapper: it goes outside the preload
 * (`seccomp_launch kill perf_event_open env LD_PRELOAD=... host`).
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#else
#error "an architecture for the filter"
#endif

static const struct {
	const char *name;
	long nr;
} table[] = {
    {"perf_event_open", SYS_perf_event_open},
    {"timer_create", SYS_timer_create},
    {"timer_settime", SYS_timer_settime},
    {"timer_delete", SYS_timer_delete},
    {"process_vm_readv", SYS_process_vm_readv},
    {"pidfd_open", SYS_pidfd_open},
    {"kcmp", SYS_kcmp},
    {"ptrace", SYS_ptrace},
    {"memfd_create", SYS_memfd_create},
    {"getitimer", SYS_getitimer},
    {"setitimer", SYS_setitimer},
};

static long number(const char *s)
{
	for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
		if (strcmp(s, table[i].name) == 0)
			return table[i].nr;
	char *end;
	long n = strtol(s, &end, 10);
	if (*s && !*end)
		return n;
	fprintf(stderr, "seccomp_launch: unknown call %s\n", s);
	exit(2);
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: seccomp_launch kill|thread|trap|eperm "
		                "CALL[,CALL...] PROGRAM [ARG...]\n");
		return 2;
	}
	unsigned action;
	if (strcmp(argv[1], "kill") == 0)
		action = SECCOMP_RET_KILL_PROCESS;
	else if (strcmp(argv[1], "thread") == 0)
		action = SECCOMP_RET_KILL_THREAD;
	else if (strcmp(argv[1], "trap") == 0)
		action = SECCOMP_RET_TRAP;
	else if (strcmp(argv[1], "eperm") == 0)
		action = SECCOMP_RET_ERRNO | EPERM;
	else {
		fprintf(stderr, "seccomp_launch: unknown action %s\n", argv[1]);
		return 2;
	}
	long nrs[64];
	int n = 0;
	char *list = strdup(argv[2]);
	for (char *save, *t = strtok_r(list, ",", &save); t && n < 64;
	     t = strtok_r(NULL, ",", &save))
		nrs[n++] = number(t);

	/* Check the architecture, load the number, one compare per call. */
	struct sock_filter f[4 + 2 * 64 + 2];
	int k = 0;
	f[k++] = (struct sock_filter)BPF_STMT(
	    BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
	f[k++] =
	    (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
	                                      SECCOMP_RET_KILL_PROCESS);
	f[k++] = (struct sock_filter)BPF_STMT(
	    BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
	for (int i = 0; i < n; i++) {
		f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
		                                      (unsigned)nrs[i], 0, 1);
		f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, action);
	}
	f[k++] =
	    (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	struct sock_fprog prog = {(unsigned short)k, f};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
		perror("seccomp_launch: PR_SET_NO_NEW_PRIVS");
		return 1;
	}
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)) {
		perror("seccomp_launch: seccomp");
		return 1;
	}
	execvp(argv[3], argv + 3);
	perror("seccomp_launch: exec");
	return 127;
}

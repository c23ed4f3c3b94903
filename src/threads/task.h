/*
 * The process's threads as the kernel shows them in /proc/self/task: the
 * list, each one's name, state and CPU times, the system call it is blocked
 * in (with the user stack pointer and program counter the call left), its
 * wait channel.
 * Context: agent.
 */
#ifndef PP_TASK_H
#define PP_TASK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The tids of the process, sorted (malloc'd). 0 or a negative errno. */
int pp_task_list(pid_t **tids, size_t *n);

struct pp_task_stat {
	char name[16];
	char state; /* the kernel's letter: R S D T t Z X I ... */
	uint64_t utime_ns, stime_ns;
	int nice, last_cpu;
};
/* /proc/self/task/TID/stat. -ESRCH when the thread is gone. */
int pp_task_stat(pid_t tid, struct pp_task_stat *st);

/* /proc/self/task/TID/syscall. */
enum { PP_TASK_RUNNING = -2, PP_TASK_NOT_IN_CALL = -1 };
struct pp_task_call {
	long nr; /* the system call, PP_TASK_RUNNING or PP_TASK_NOT_IN_CALL
	          * (blocked outside a call: a page fault, a stop) */
	uint64_t args[6];
	uintptr_t sp, pc; /* user registers (not for PP_TASK_RUNNING) */
};
int pp_task_call(pid_t tid, struct pp_task_call *c);
/* Did the thread stay put between two reads (same call, same registers)? */
int pp_task_call_same(const struct pp_task_call *a,
                      const struct pp_task_call *b);

/* /proc/self/task/TID/wchan: the kernel function it sleeps in ("" when
 * none or hidden). */
void pp_task_wchan(pid_t tid, char *out, size_t len);

/* The word for a state letter, as /threads, the labels and the dumps show
 * it: "running", "sleeping", "disk-sleep", "stopped", ... */
const char *pp_task_state_name(char state);

/* The name of a system call number of this architecture ("epoll_wait"),
 * or NULL. */
const char *pp_task_syscall_name(long nr);

#endif

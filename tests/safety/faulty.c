/*
 * A host that misbehaves in the ways real programs do, for
 * tests/integration/test_safety.py. Driven line by line on stdin; every
 * command answers one line on stdout:
 *
 *   start                 pullprof_start on 127.0.0.1:0 (env applies)
 *                                                     -> "ok PORT" | "err .."
 *   stop                  pullprof_stop               -> "ok" | "err .."
 *   threads               how many threads the host has -> "threads N"
 *   workers N             N threads "worker-K" burn CPU and malloc/free
 *                         until quit                  -> "ok"
 *   blocked N             N threads "blocked-K" block SIGPROF, then burn
 *                         CPU in blocked_spin() until quit -> "ok"
 *   churn SECONDS         create and join short-lived threads (each burns a
 *                         little CPU) in a loop for SECONDS
 *                                                     -> "churned N"
 *   tiny SECONDS [PCT [SIZE]] a thread "tiny" with a PTHREAD_STACK_MIN
 *                         (or SIZE) stack
 *                         recurses over PCT% (50) of its free stack, burns
 *                         CPU and mallocs for SECONDS; its stack is
 *                         painted first, so the deepest use (ours and the
 *                         signal handler's) is measured
 *                         -> "tiny stack=S free=F deepest=D margin=M"
 *   badfp MODE SECONDS    a thread "badfp" spins in bad_fp_spin() with rbp
 *                         set to garbage: MODE is "garbage" (a constant),
 *                         "guard" (a PROT_NONE page just above a stack),
 *                         "freed" (a freed, unmapped block) or "loop" (a
 *                         frame chain that climbs with garbage return
 *                         addresses)                  -> "badfp done"
 *   fork FILE DLLIB       fork; the parent answers "child PID" at once. The
 *                         child (single-threaded, in the middle of whatever
 *                         the parent's threads were doing) writes its
 *                         progress to FILE:
 *                           "pending P" (SIGPROF pending at birth),
 *                           "worked sigprof=N malloc=M dlopen=0|1 port=P",
 *                         waits for FILE.go, starts pullprof on a new port
 *                         ("serving PORT"), waits for FILE.done, stops
 *                         ("stopped"), exits 0. Any failure: exit != 0.
 *   forks N               fork N children one after the other; each starts
 *                         and stops an agent and exits 0 (one not ended
 *                         in 30 s is killed, where its threads waited
 *                         said)                       -> "forks GOOD of N"
 *                         (under ASan, "; K stuck in libasan" too: below)
 *   stopped               fork a child that stops itself (SIGSTOP) at
 *                         once and exits 0 when continued, for a look at
 *                         what fork alone cost it     -> "child PID"
 *   wait PID              waitpid                     -> "exit N"
 *   quit                  exit 0 (threads are told to end and joined)
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pullprof.h>

static atomic_int quitting;
static pthread_t bg[256];
static int nbg;

static double thread_cpu(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static unsigned long mix(unsigned long x, int n)
{
	for (int i = 0; i < n; i++)
		x = x * 6364136223846793005ul + 1442695040888963407ul;
	return x;
}

/* ---- workers: CPU and the allocator ------------------------------------ */

__attribute__((noinline)) static void *worker(void *arg)
{
	char name[16];
	unsigned long x = (uintptr_t)arg;
	snprintf(name, sizeof name, "worker-%d", (int)(uintptr_t)arg);
	pthread_setname_np(pthread_self(), name);
	while (!atomic_load(&quitting)) {
		void *p[16];
		for (int i = 0; i < 16; i++) {
			p[i] = malloc(64 + (x & 4095));
			if (p[i])
				memset(p[i], 1, 64);
			x = mix(x, 1);
		}
		for (int i = 0; i < 16; i++)
			free(p[i]);
		x = mix(x, 20000);
	}
	return (void *)(uintptr_t)(x & 1);
}

/* ---- threads that block the sampling signals ----------------------------
 * SIGURG, or SIGPROF when the host handles SIGURG (src/cpu/disposition.c). */

__attribute__((noinline)) static unsigned long blocked_spin(unsigned long x)
{
	while (!atomic_load(&quitting))
		x = mix(x, 100000);
	return x;
}

static void *blocked(void *arg)
{
	char name[16];
	sigset_t s;
	snprintf(name, sizeof name, "blocked-%d", (int)(uintptr_t)arg);
	pthread_setname_np(pthread_self(), name);
	sigemptyset(&s);
	sigaddset(&s, SIGPROF);
	sigaddset(&s, SIGURG);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	return (void *)blocked_spin((uintptr_t)arg);
}

/* ---- short-lived threads ------------------------------------------------ */

static void *brief(void *arg)
{
	return (void *)mix((uintptr_t)arg,
	                   20000 + (int)((uintptr_t)arg % 50000));
}

static long churn(double seconds)
{
	long n = 0;
	double end = now() + seconds;
	while (now() < end) {
		pthread_t t[8];
		int made = 0;
		for (int i = 0; i < 8; i++)
			if (pthread_create(&t[i], NULL, brief,
			                   (void *)(uintptr_t)(n + i)) == 0)
				made++;
			else
				break;
		for (int i = 0; i < made; i++)
			pthread_join(t[i], NULL);
		n += made;
	}
	return n;
}

/* ---- a tiny stack ---------------------------------------------------------
 */

#define PAINT 0xa5u

struct tiny {
	double seconds;
	int percent; /* of the free stack to recurse over */
	int depth;
	size_t stack, free_at_start, deepest;
};

__attribute__((noinline)) static unsigned long tiny_recurse(int depth,
                                                            unsigned long x)
{
	volatile char pad[96]; /* about 150 bytes a frame */
	pad[0] = (char)x;
	if (depth > 0)
		x = tiny_recurse(depth - 1, x + (unsigned char)pad[0]);
	else {
		/* The allocator too, at the deepest point: the heap
		 * sampler unwinds from here now and then. */
		void *m = malloc(4096 + (x & 1023));
		if (m)
			((volatile char *)m)[0] = 1;
		free(m);
		x = mix(x, 200000);
	}
	pad[95] = (char)x;
	return x + (unsigned char)pad[95];
}

static void *tiny_main(void *arg)
{
	struct tiny *t = arg;
	pthread_attr_t a;
	void *lo;
	size_t size, guard = 0;
	volatile unsigned char *p;
	unsigned char *here = (unsigned char *)__builtin_frame_address(0);

	pthread_setname_np(pthread_self(), "tiny");
	if (pthread_getattr_np(pthread_self(), &a) != 0)
		return NULL;
	pthread_attr_getstack(&a, &lo, &size);
	pthread_attr_getguardsize(&a, &guard);
	pthread_attr_destroy(&a);
	/* glibc counts the guard page in the stack it reports. */
	unsigned char *bottom = (unsigned char *)lo + guard;
	unsigned char *top = here - 1024; /* well below this frame */
	t->stack = size - guard;
	t->free_at_start = (size_t)(top - bottom);
	/* Paint without calling anything (a call would use the stack being
	 * painted). */
	for (p = bottom; p < top; p++)
		*p = PAINT;
	/* Recurse over about half of what is free: the other half is the
	 * room left for a signal frame and the handler. */
	t->depth = (int)(t->free_at_start * (size_t)t->percent / 100 / 160);
	double end = thread_cpu() + t->seconds;
	unsigned long x = 1;
	while (thread_cpu() < end) {
		x = tiny_recurse(t->depth, x);
		x = mix(x, 1000);
	}
	for (p = bottom; p < top && *p == PAINT; p++)
		;
	t->deepest = (size_t)(top - (unsigned char *)p) + 1024;
	return (void *)(x & 1);
}

/* ---- a corrupt frame-pointer chain --------------------------------------- */

/* Spin `iters` rounds with rbp = bad. The asm steps below the red zone
 * before it pushes, and puts rbp back before the compiler sees it. */
__attribute__((noinline)) static void bad_fp_spin(uintptr_t bad,
                                                  unsigned long iters)
{
#if defined(__x86_64__)
	__asm__ volatile("lea -128(%%rsp), %%rsp\n\t"
	                 "push %%rbp\n\t"
	                 "mov %0, %%rbp\n\t"
	                 "1: imul $3, %%rcx, %%rcx\n\t"
	                 "sub $1, %1\n\t"
	                 "jnz 1b\n\t"
	                 "pop %%rbp\n\t"
	                 "lea 128(%%rsp), %%rsp\n\t"
	                 : "+S"(bad), "+D"(iters)
	                 :
	                 : "rcx", "memory", "cc");
#else
	(void)bad;
	(void)iters;
#endif
}

struct badfp {
	char mode[16];
	double seconds;
};

static void *badfp_main(void *arg)
{
	struct badfp *b = arg;
	long page = sysconf(_SC_PAGESIZE);
	uintptr_t bad = 0x4141414141414140ul;
	unsigned char *map = NULL;
	size_t maplen = 0;
	uintptr_t chain[64];

	pthread_setname_np(pthread_self(), "badfp");
	if (strcmp(b->mode, "guard") == 0) {
		/* A pointer just above this thread's stack... in a page that
		 * cannot be read: within reach of a frame-pointer walker's
		 * "above sp, not far" check. */
		maplen = 64 * (size_t)page;
		map = mmap(NULL, maplen, PROT_READ | PROT_WRITE,
		           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (map == MAP_FAILED)
			return NULL;
		mprotect(map + maplen - page, (size_t)page, PROT_NONE);
		bad = (uintptr_t)(map + maplen - page + 64);
	} else if (strcmp(b->mode, "freed") == 0) {
		/* Large enough to be its own mapping: free() unmaps it. */
		unsigned char *f = malloc(1 << 20);
		bad = (uintptr_t)(f + 4096);
		free(f);
	} else if (strcmp(b->mode, "loop") == 0) {
		/* A chain on this stack that climbs from frame to frame with
		 * return addresses that are no code at all. */
		for (int i = 0; i < 62; i += 2) {
			chain[i] = (uintptr_t)&chain[i + 2];
			chain[i + 1] = 0x5151515151515150ul + (uintptr_t)i;
		}
		chain[62] = (uintptr_t)&chain[0]; /* and back down: a cycle */
		chain[63] = 0x6161616161616160ul;
		bad = (uintptr_t)&chain[0];
	}
	double end = thread_cpu() + b->seconds;
	while (thread_cpu() < end)
		bad_fp_spin(bad, 20000000);
	if (map)
		munmap(map, maplen);
	__asm__ volatile("" : : "r"(chain) : "memory");
	return NULL;
}

/* ---- fork --------------------------------------------------------------- */

static atomic_long child_sigprofs;

static void count_sigprof(int sig)
{
	(void)sig;
	atomic_fetch_add(&child_sigprofs, 1);
}

static void note(const char *file, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note(const char *file, const char *fmt, ...)
{
	va_list ap;
	FILE *f = fopen(file, "a");
	if (!f)
		_exit(20);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	fclose(f);
}

static int wait_file(const char *base, const char *suffix, double seconds)
{
	char path[PATH_MAX];
	struct stat st;
	snprintf(path, sizeof path, "%s%s", base, suffix);
	for (double end = now() + seconds; now() < end; usleep(20000))
		if (stat(path, &st) == 0)
			return 0;
	return -1;
}

/* --- A child that does not end -----------------------------------------
 *
 * The ASan runtime of this toolchain (GCC 12's libsanitizer, LLVM 14's)
 * takes no lock of its allocator around fork: a child forked while another
 * thread of the parent refilled a size class (a lookup, the collector) gets
 * that class's lock copied held, and waits for ever the first time it
 * allocates from it (seen: a child stuck in SizeClassAllocator64::
 * GetFromAllocator, under pullprof_start's calloc, while the parent's
 * lookup thread symbolized). glibc's malloc takes its locks around fork;
 * LLVM's later runtimes do too.
 *
 * So the parent watches each child: one not ended after STUCK_S seconds
 * has each of its threads' place read from /proc/PID/task/TID/syscall
 * (the system call it waits in and the user PC that made it). A child
 * one of whose threads waits from inside libasan's code is counted apart
 * (the agent's thread that allocated first meets the lock; the main
 * thread then waits for it in pullprof_stop, in libc); any other is a
 * hang, and where each thread waits is said (dladdr of the PC, the
 * parent's mappings are the child's). Then the child is killed. */
#define STUCK_S 30

static int find_lib(struct dl_phdr_info *info, size_t size, void *arg)
{
	uintptr_t *range = arg;
	(void)size;
	if (!info->dlpi_name || !strstr(info->dlpi_name, "libasan"))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			range[0] = info->dlpi_addr + ph->p_vaddr;
			range[1] = range[0] + ph->p_memsz;
		}
	}
	return 1;
}

/* Waits up to STUCK_S s for pid. Returns 0 with *st set when it ended; 1
 * when it did not and one of its threads waits inside libasan; 2 when it
 * did not (where its threads wait in where[]). Either way it has ended on
 * return. */
static int watch_child(pid_t pid, int *st, char *where, size_t n)
{
	for (double end = now() + STUCK_S; now() < end; usleep(5000))
		if (waitpid(pid, st, WNOHANG) == pid)
			return 0;
	uintptr_t asan[2] = {0, 0};
	dl_iterate_phdr(find_lib, asan);
	int in_asan = 0;
	size_t len = 0;
	char dir[32];
	snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
	DIR *d = opendir(dir);
	struct dirent *e;
	where[0] = 0;
	while (d && (e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		char path[sizeof dir + 280], line[512] = "", comm[32] = "?";
		snprintf(path, sizeof path, "%s/%s/comm", dir, e->d_name);
		FILE *f = fopen(path, "r");
		if (f) {
			if (fgets(comm, sizeof comm, f))
				comm[strcspn(comm, "\n")] = 0;
			fclose(f);
		}
		snprintf(path, sizeof path, "%s/%s/syscall", dir, e->d_name);
		f = fopen(path, "r");
		if (f) {
			if (!fgets(line, sizeof line, f))
				line[0] = 0;
			fclose(f);
		}
		long nr = -1;
		unsigned long v[8] = {0};
		uintptr_t pc = 0;
		if (sscanf(line, "%ld %lx %lx %lx %lx %lx %lx %lx %lx", &nr,
		           &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
		           &v[7]) == 9)
			pc = v[7];
		if (pc && pc >= asan[0] && pc < asan[1])
			in_asan = 1;
		Dl_info di;
		const char *lib = "?", *fn = "?";
		if (pc && dladdr((void *)pc, &di)) {
			if (di.dli_fname)
				lib = strrchr(di.dli_fname, '/')
				          ? strrchr(di.dli_fname, '/') + 1
				          : di.dli_fname;
			if (di.dli_sname)
				fn = di.dli_sname;
		}
		if (len < n)
			len += (size_t)snprintf(
			    where + len, n - len, " [%s: %s]", comm,
			    pc ? "" : (line[0] ? "running" : "unread"));
		if (pc && len < n) {
			len--; /* over the ']' */
			len += (size_t)snprintf(where + len, n - len,
			                        "syscall %ld at %s %s]", nr,
			                        lib, fn);
		}
	}
	if (d)
		closedir(d);
	kill(pid, SIGKILL);
	waitpid(pid, st, 0);
	return in_asan ? 1 : 2;
}

static void child(const char *file, const char *dllib)
{
	sigset_t pend;
	sigpending(&pend);
	/* A sampling signal (SIGURG, or SIGPROF) pending at birth, or any
	 * later one, would come from a timer the child should not have. */
	note(file, "pending %d",
	     sigismember(&pend, SIGPROF) || sigismember(&pend, SIGURG));
	signal(SIGPROF, count_sigprof);
	signal(SIGURG, count_sigprof);

	/* Real work: CPU (timers on a CPU-time clock would fire), the
	 * allocator (its locks and the heap sampler's), the loader. */
	long mallocs = 0;
	double end = thread_cpu() + 0.5;
	unsigned long x = 7;
	while (thread_cpu() < end) {
		void *p[32];
		for (int i = 0; i < 32; i++) {
			p[i] = malloc(16 + (x & 8191));
			if (!p[i])
				_exit(21);
			x = mix(x, 100);
		}
		for (int i = 0; i < 32; i++)
			free(p[i]);
		mallocs += 32;
	}
	void *dl = dlopen(dllib, RTLD_NOW);
	int dl_ok = dl != NULL && dlclose(dl) == 0;
	note(file, "worked sigprof=%ld malloc=%ld dlopen=%d port=%d",
	     atomic_load(&child_sigprofs), mallocs, dl_ok, pullprof_port());
	signal(SIGPROF, SIG_DFL);
	signal(SIGURG, SIG_DFL);

	/* FILE.go: start an agent of its own; FILE.stop: exit now (a
	 * ThreadSanitizer build kills a child of a multi-threaded process
	 * that starts threads). */
	for (double until = now() + 120;;) {
		if (wait_file(file, ".go", 0.02) == 0)
			break;
		if (wait_file(file, ".stop", 0.02) == 0)
			_exit(0);
		if (now() >= until)
			_exit(22);
	}
	struct pullprof_config cfg;
	pullprof_config_init(&cfg);
	cfg.listen = "127.0.0.1:0";
	int rc = pullprof_start(&cfg);
	if (rc) {
		note(file, "start failed %d", rc);
		_exit(23);
	}
	note(file, "serving %d", pullprof_port());
	/* Busy while the test asks for a profile of the child. */
	end = now() + 120;
	while (now() < end) {
		x = mix(x, 100000);
		struct stat st;
		char path[PATH_MAX];
		snprintf(path, sizeof path, "%s.done", file);
		if (stat(path, &st) == 0)
			break;
	}
	if (now() >= end)
		_exit(24);
	rc = pullprof_stop();
	note(file, "stopped %d", rc);
	_exit(rc == 0 && (x | 1) ? 0 : 25);
}

/* ---- the command loop ------------------------------------------------------
 */

static int count_threads(void)
{
	char line[256];
	int n = -1;
	FILE *f = fopen("/proc/self/status", "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "Threads: %d", &n) == 1)
			break;
	fclose(f);
	return n;
}

static void spawn(void *(*fn)(void *), void *arg)
{
	if (nbg < (int)(sizeof bg / sizeof bg[0]) &&
	    pthread_create(&bg[nbg], NULL, fn, arg) == 0)
		nbg++;
}

int main(void)
{
	char line[PATH_MAX * 2 + 64];

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready %d\n", (int)getpid());
	while (fgets(line, sizeof line, stdin)) {
		char cmd[32] = "", a1[PATH_MAX] = "", a2[PATH_MAX] = "";
		char a3[32] = "";
		int n =
		    sscanf(line, "%31s %4095s %4095s %31s", cmd, a1, a2, a3);
		if (n < 1)
			continue;
		if (strcmp(cmd, "start") == 0) {
			struct pullprof_config cfg;
			pullprof_config_init(&cfg);
			cfg.listen = "127.0.0.1:0";
			int rc = pullprof_start(&cfg);
			if (rc == 0)
				printf("ok %d\n", pullprof_port());
			else
				printf("err %d %s\n", rc,
				       pullprof_strerror(rc));
		} else if (strcmp(cmd, "stop") == 0) {
			int rc = pullprof_stop();
			if (rc == 0)
				printf("ok\n");
			else
				printf("err %d %s\n", rc,
				       pullprof_strerror(rc));
		} else if (strcmp(cmd, "threads") == 0) {
			printf("threads %d\n", count_threads());
		} else if (strcmp(cmd, "workers") == 0 ||
		           strcmp(cmd, "blocked") == 0) {
			for (int i = 0; i < atoi(a1); i++)
				spawn(cmd[0] == 'w' ? worker : blocked,
				      (void *)(uintptr_t)(i + 1));
			printf("ok\n");
		} else if (strcmp(cmd, "churn") == 0) {
			printf("churned %ld\n", churn(atof(a1)));
		} else if (strcmp(cmd, "tiny") == 0) {
			struct tiny t = {.seconds = atof(a1),
			                 .percent = n >= 3 ? atoi(a2) : 50};
			pthread_attr_t a;
			pthread_t th;
			pthread_attr_init(&a);
			pthread_attr_setstacksize(
			    &a, n >= 4 ? (size_t)atol(a3) : PTHREAD_STACK_MIN);
			if (pthread_create(&th, &a, tiny_main, &t) == 0) {
				pthread_join(th, NULL);
				printf("tiny stack=%zu free=%zu depth=%d "
				       "deepest=%zu margin=%zd\n",
				       t.stack, t.free_at_start, t.depth,
				       t.deepest,
				       (ssize_t)t.stack - (ssize_t)t.deepest);
			} else {
				printf("err pthread_create\n");
			}
			pthread_attr_destroy(&a);
		} else if (strcmp(cmd, "badfp") == 0) {
			struct badfp b;
			pthread_t th;
			snprintf(b.mode, sizeof b.mode, "%s", a1);
			b.seconds = atof(a2);
			pthread_create(&th, NULL, badfp_main, &b);
			pthread_join(th, NULL);
			printf("badfp done\n");
		} else if (strcmp(cmd, "fork") == 0) {
			pid_t pid = fork();
			if (pid == 0)
				child(a1, a2);
			printf("child %d\n", (int)pid);
		} else if (strcmp(cmd, "forks") == 0) {
			/* N children, one after the other: each starts and
			 * stops an agent of its own and exits; a child stuck
			 * for 30 s is killed by its alarm. */
			int good = 0, in_asan = 0, total = atoi(a1);
			char why[1024] = "";
			for (int i = 0; i < total; i++) {
				pid_t pid = fork();
				if (pid == 0) {
					/* (A backstop, should this process
					 * die before it reaps the child.) */
					alarm(10 * STUCK_S);
					struct pullprof_config cfg;
					pullprof_config_init(&cfg);
					cfg.listen = "127.0.0.1:0";
					if (pullprof_start(&cfg) != 0)
						_exit(2);
					_exit(pullprof_stop() == 0 ? 0 : 3);
				}
				int st = 0;
				char where[768] = "";
				int w = pid > 0 ? watch_child(pid, &st, where,
				                              sizeof where)
				                : -1;
				if (w == 0 && WIFEXITED(st) &&
				    WEXITSTATUS(st) == 0)
					good++;
				else if (w == 1)
					in_asan++;
				else if (!why[0] && w == 2)
					snprintf(
					    why, sizeof why,
					    "; the first failure: child %d "
					    "not ended in %d s, its threads:%s",
					    i, STUCK_S, where);
				else if (!why[0])
					/* The first failure, for the diagnosis:
					 * 2 start failed, 3 stop failed. */
					snprintf(
					    why, sizeof why,
					    "; the first failure: child %d %s "
					    "%d",
					    i,
					    pid < 0 ? "not forked, errno"
					    : WIFEXITED(st) ? "exited"
					    : WIFSIGNALED(st)
					        ? "killed by signal"
					        : "status",
					    pid < 0           ? errno
					    : WIFEXITED(st)   ? WEXITSTATUS(st)
					    : WIFSIGNALED(st) ? WTERMSIG(st)
					                      : st);
			}
			if (in_asan)
				printf(
				    "forks %d of %d; %d stuck in libasan%s\n",
				    good, total, in_asan, why);
			else
				printf("forks %d of %d%s\n", good, total, why);
		} else if (strcmp(cmd, "stopped") == 0) {
			pid_t pid = fork();
			if (pid == 0) {
				raise(SIGSTOP);
				_exit(0);
			}
			printf("child %d\n", (int)pid);
		} else if (strcmp(cmd, "wait") == 0) {
			int st = 0;
			waitpid((pid_t)atoi(a1), &st, 0);
			printf("exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st)
			                    : WIFSIGNALED(st)
			                        ? 128 + WTERMSIG(st)
			                        : -1);
		} else if (strcmp(cmd, "quit") == 0) {
			break;
		} else {
			printf("err unknown command\n");
		}
	}
	atomic_store(&quitting, 1);
	for (int i = 0; i < nbg; i++)
		pthread_join(bg[i], NULL);
	return 0;
}

/*
 * A host process for the integration tests, driven line by line on stdin:
 *
 *   start [LISTEN [PREFIX]]   pullprof_start (env applies)  -> "ok PORT" | "err
 * RC MESSAGE" start-noenv LISTEN PREFIX pullprof_start, ignore_env=1  -> same
 *   stop                      pullprof_stop                 -> "ok" | "err RC
 * MESSAGE" port                      pullprof_port                 -> "port N"
 *   alive                     proves the host still works   -> "alive TICKS"
 *   mem                       glibc's mallinfo2: bytes in use (heap and
 *                             mmapped), free bytes it keeps -> "mem USED FREE"
 *   fork SECONDS              fork; the child sleeps, reports and exits
 *                                                           -> "child PID"
 *   dlopen PATH SYMBOL        dlopen PATH, print SYMBOL's address -> "addr
 * 0x..." dlclose                   dlclose the last one          -> "ok" quit
 * exit 0
 *   churn PATH N              a thread keeps N descriptors of PATH open,
 *                             closing and opening them again and again
 *                                                           -> "ok"
 *   churned                   stop it: its opens, and those that failed
 *                             (EMFILE and any other)  -> "churned OPENS FAILS"
 *   hold PATH N               open PATH up to N times and keep them
 *                                                     -> "holding K"
 *   unhold                    close them                    -> "ok"
 *   system CMD...             system(3) of the rest of the line
 *                                                    -> "system STATUS"
 *   spin SECONDS [NAME_AFTER_MS]  a thread "late-spinner" burns SECONDS
 *                             of its own CPU                -> "ok"
 *   unspin                    every spinner still running ends at its next
 *                             look at the clock (within a millisecond or so
 *                             of its CPU)                   -> "ok"
 *
 * A worker thread counts ticks all along, so "the host keeps running" is a
 * fact a test can check rather than assume. "-" as an argument means NULL,
 * '""' the empty string.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pullprof.h>

static unsigned long ticks; /* atomic: read by the main thread */

static void *ticker(void *arg)
{
	(void)arg;
	for (;;) {
		__atomic_fetch_add(&ticks, 1, __ATOMIC_RELAXED);
		usleep(1000);
	}
	return NULL;
}

/* Bumped by "unspin": a spinner that sees it change ends. Its CPU seconds
 * are the spinner's own, so on a loaded machine it may run for minutes of
 * wall time; a test that needs it gone says so rather than wait. */
static unsigned spin_gen;

static void *spinner(void *arg)
{
	/* The "unspin" count when it was asked for, above the rest. */
	unsigned gen = (unsigned)((uint64_t)(uintptr_t)arg >> 32);
	struct timespec start, now;
	/* The seconds in the low 16 bits, the milliseconds it sleeps before it
	 * names itself above them. */
	double limit = (double)((uintptr_t)arg & 0xffff);
	unsigned name_after_ms = (unsigned)(((uintptr_t)arg >> 16) & 0xffff);
	volatile unsigned long x = 1;

	if (name_after_ms)
		usleep(name_after_ms * 1000u);
	pthread_setname_np(pthread_self(), "late-spinner");
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
	do {
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005ul + 1;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
	} while ((double)(now.tv_sec - start.tv_sec) +
	                 (double)(now.tv_nsec - start.tv_nsec) / 1e9 <
	             limit &&
	         __atomic_load_n(&spin_gen, __ATOMIC_RELAXED) == gen);
	return NULL;
}

/* The churn thread: a host that uses its descriptors, and notices when it
 * cannot have one. */
static char churn_path[256];
static int churn_n, churn_stop;
static pthread_t churn_thread;
static int held[1024], nheld;
static unsigned long churn_opens, churn_fails;

static void *churner(void *arg)
{
	int fds[256];
	(void)arg;
	for (int i = 0; i < churn_n; i++)
		fds[i] = -1;
	while (!__atomic_load_n(&churn_stop, __ATOMIC_RELAXED)) {
		/* All closed, a moment, all opened again: descriptors that
		 * someone else took meanwhile are missed. */
		for (int i = 0; i < churn_n; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		usleep(100);
		for (int i = 0; i < churn_n; i++) {
			fds[i] = open(churn_path, O_RDONLY | O_CLOEXEC);
			__atomic_fetch_add(fds[i] >= 0 ? &churn_opens
			                               : &churn_fails,
			                   1, __ATOMIC_RELAXED);
		}
		usleep(200);
	}
	for (int i = 0; i < churn_n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return NULL;
}

static void on_sigprof(int sig)
{
	(void)sig;
}

static const char *arg_or_null(const char *s)
{
	if (strcmp(s, "\"\"") == 0)
		return "";
	return strcmp(s, "-") != 0 ? s : NULL;
}

static void report(int rc)
{
	if (rc == 0)
		printf("ok %d\n", pullprof_port());
	else
		printf("err %d %s\n", rc, pullprof_strerror(rc));
}

int main(void)
{
	char line[512];
	pthread_t t;
	void *dl = NULL;

	setvbuf(stdout, NULL, _IOLBF, 0);
	pthread_create(&t, NULL, ticker, NULL);
	printf("ready %d\n", (int)getpid());
	while (fgets(line, sizeof line, stdin)) {
		char cmd[32] = "", a1[256] = "", a2[256] = "";
		int n = sscanf(line, "%31s %255s %255s", cmd, a1, a2);
		if (n < 1)
			continue;
		if (strcmp(cmd, "start") == 0 ||
		    strcmp(cmd, "start-noenv") == 0) {
			struct pullprof_config cfg;
			pullprof_config_init(&cfg);
			if (n >= 2)
				cfg.listen = arg_or_null(a1);
			if (n >= 3)
				cfg.prefix = arg_or_null(a2);
			cfg.ignore_env = strcmp(cmd, "start-noenv") == 0;
			report(pullprof_start(&cfg));
		} else if (strcmp(cmd, "stop") == 0) {
			int rc = pullprof_stop();
			if (rc == 0)
				printf("ok\n");
			else
				report(rc);
		} else if (strcmp(cmd, "port") == 0) {
			printf("port %d\n", pullprof_port());
		} else if (strcmp(cmd, "mem") == 0) {
			struct mallinfo2 mi = mallinfo2();
			printf("mem %zu %zu\n", mi.uordblks + mi.hblkhd,
			       mi.fordblks);
		} else if (strcmp(cmd, "alive") == 0) {
			unsigned long before =
			    __atomic_load_n(&ticks, __ATOMIC_RELAXED);
			usleep(100 *
			       1000); /* progress, even on a loaded machine */
			printf("alive %lu\n",
			       __atomic_load_n(&ticks, __ATOMIC_RELAXED) -
			           before);
		} else if (strcmp(cmd, "fork") == 0) {
			pid_t pid = fork();
			if (pid == 0) {
				/* The child: no agent unless it starts one. */
				sleep((unsigned)atoi(a1));
				_exit(pullprof_port() == 0 ? 0 : 3);
			}
			printf("child %d\n", (int)pid);
		} else if (strcmp(cmd, "wait") == 0) {
			int st = 0;
			pid_t pid = (pid_t)atoi(a1);
			waitpid(pid, &st, 0);
			printf("exit %d\n",
			       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		} else if (strcmp(cmd, "dlopen") == 0) {
			dl = dlopen(a1, RTLD_NOW);
			void *sym = dl ? dlsym(dl, a2) : NULL;
			if (sym)
				printf("addr %p\n", sym);
			else
				printf("err %s\n", dlerror());
		} else if (strcmp(cmd, "system") == 0) {
			char *rest = strstr(line, "system") + strlen("system");
			rest[strcspn(rest, "\n")] = 0;
			int st = system(rest);
			printf("system %d\n",
			       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		} else if (strcmp(cmd, "dlclose") == 0) {
			printf(dl && dlclose(dl) == 0 ? "ok\n" : "err\n");
			dl = NULL;
		} else if (strcmp(cmd, "spin") == 0) {
			/* spin SECONDS [NAME_AFTER_MS]: a thread "late-spinner"
			 * burns SECONDS of its CPU; it first sleeps
			 * NAME_AFTER_MS, then names itself. -> "ok" */
			pthread_t sp;
			uintptr_t packed =
			    (uintptr_t)(atoi(a1) & 0xffff) |
			    (uintptr_t)(n > 2 ? atoi(a2) & 0xffff : 0) << 16 |
			    (uintptr_t)__atomic_load_n(&spin_gen,
			                               __ATOMIC_RELAXED)
			        << 32;
			pthread_create(&sp, NULL, spinner, (void *)packed);
			pthread_detach(sp);
			printf("ok\n");
		} else if (strcmp(cmd, "unspin") == 0) {
			__atomic_fetch_add(&spin_gen, 1, __ATOMIC_RELAXED);
			printf("ok\n");
		} else if (strcmp(cmd, "churn") == 0) {
			snprintf(churn_path, sizeof churn_path, "%s", a1);
			churn_n = atoi(a2) > 256 ? 256 : atoi(a2);
			churn_stop = 0;
			pthread_create(&churn_thread, NULL, churner, NULL);
			printf("ok\n");
		} else if (strcmp(cmd, "hold") == 0) {
			int want = atoi(a2);
			while (nheld < want && nheld < 1024 &&
			       (held[nheld] = open(a1, O_RDONLY | O_CLOEXEC)) >=
			           0)
				nheld++;
			printf("holding %d\n", nheld);
		} else if (strcmp(cmd, "unhold") == 0) {
			while (nheld > 0)
				close(held[--nheld]);
			printf("ok\n");
		} else if (strcmp(cmd, "churned") == 0) {
			__atomic_store_n(&churn_stop, 1, __ATOMIC_RELAXED);
			pthread_join(churn_thread, NULL);
			printf("churned %lu %lu\n",
			       __atomic_load_n(&churn_opens, __ATOMIC_RELAXED),
			       __atomic_load_n(&churn_fails, __ATOMIC_RELAXED));
		} else if (strcmp(cmd, "sigprof") == 0) {
			signal(SIGPROF, on_sigprof);
			printf("ok\n");
		} else if (strcmp(cmd, "quit") == 0) {
			return 0;
		} else {
			printf("unknown %s\n", cmd);
		}
	}
	return 0;
}

/*
 * A host that uses signals the way real servers do, to see what pullprof's
 * CPU sampler does to it (tests/integration/test_hostile_signals.py). Run
 * with libpullprof preloaded; driven by one command a line on stdin, each
 * answered by one line on stdout:
 *
 *   burn N          N threads "burn-K" burn CPU until the end
 *   prof            its own profiler: a SIGPROF handler counting ticks, and
 *                   setitimer(ITIMER_PROF) at 100 Hz
 *   ticks           "ticks T O": the SIGPROF ticks its handler counted so
 *                   far from its ITIMER_PROF (SI_KERNEL), and O others
 *                   (a timer's, a kill's: never its own)
 *   urg             a SIGURG handler of its own (as the Go runtime has)
 *   reset           every signal's disposition back to SIG_DFL (as daemons
 *                   do at start), at once
 *   exec FILE       fork and exec /bin/cat /proc/self/status > FILE, without
 *                   the preload: what a program it runs inherits
 *   blockall MODE   block every signal in every thread (the main thread
 *                   before it starts the burners: start it first) and
 *                   read them: MODE signalfd or sigwait, on a thread of
 *                   its own that also burns CPU between reads
 *   blocklater      the burners block every signal from now on, and each
 *                   reads its own with sigtimedwait between bursts
 *   latch N HOW     N threads "latch-K" that block SIGURG only and read it
 *                   from a signalfd between bursts in latch_work (as
 *                   PostgreSQL's backends do with their latch signal):
 *                   HOW self, each blocks it itself; inherit, they start
 *                   with it blocked (made by a thread that blocked it)
 *   both N          N threads "both-K" that block SIGURG and SIGPROF and
 *                   read them from a signalfd, burning in both_work
 *   urglater        the burners block SIGURG only from now on, and each
 *                   reads its own with sigtimedwait between bursts
 *   read            "read URG PROF OTHER": signals the readers consumed
 *   quit            exit 0
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static atomic_ulong ticks, prof_others, urgs, read_urg, read_prof, read_other;
static _Thread_local volatile unsigned long sink;
static atomic_int bursts;

/* A burst of CPU (~1 ms), then an atomic operation: under ThreadSanitizer,
 * which delivers asynchronous signals only at its own safe points, that is
 * where the signals that came during the burst are handled. */
static void burn_some(void)
{
	for (unsigned long i = 0; i < 200000; i++)
		sink += i * i;
	atomic_fetch_add(&bursts, 1);
}

static atomic_int block_later, urg_later;
static void count(int sig);

static void *burner(void *arg)
{
	char name[16];
	int blocked = 0;
	sigset_t all;
	struct timespec zero = {0, 0};
	snprintf(name, sizeof name, "burn-%d", (int)(long)arg);
	pthread_setname_np(pthread_self(), name);
	sigfillset(&all);
	for (;;) {
		burn_some();
		if (!blocked && atomic_load(&block_later)) {
			pthread_sigmask(SIG_BLOCK, &all, NULL);
			blocked = 1;
		}
		if (!blocked && atomic_load(&urg_later)) {
			sigemptyset(&all);
			sigaddset(&all, SIGURG);
			pthread_sigmask(SIG_BLOCK, &all, NULL);
			blocked = 1;
		}
		int sig;
		while (blocked && (sig = sigtimedwait(&all, NULL, &zero)) > 0)
			count(sig);
	}
	return NULL;
}

static void on_prof(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	atomic_fetch_add(si->si_code == SI_KERNEL ? &ticks : &prof_others, 1);
}

static void on_urg(int sig)
{
	(void)sig;
	atomic_fetch_add(&urgs, 1);
}

static void count(int sig)
{
	if (sig == SIGURG)
		atomic_fetch_add(&read_urg, 1);
	else if (sig == SIGPROF)
		atomic_fetch_add(&read_prof, 1);
	else
		atomic_fetch_add(&read_other, 1);
}

static void *reader_signalfd(void *arg)
{
	sigset_t all;
	struct signalfd_siginfo si;
	(void)arg;
	pthread_setname_np(pthread_self(), "sigreader");
	sigfillset(&all);
	int fd = signalfd(-1, &all, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0)
		return NULL;
	for (;;) {
		while (read(fd, &si, sizeof si) == sizeof si)
			count((int)si.ssi_signo);
		burn_some();
	}
	return NULL;
}

static void *reader_sigwait(void *arg)
{
	sigset_t all;
	struct timespec zero = {0, 0};
	(void)arg;
	pthread_setname_np(pthread_self(), "sigreader");
	sigfillset(&all);
	for (;;) {
		int sig;
		while ((sig = sigtimedwait(&all, NULL, &zero)) > 0)
			count(sig);
		burn_some();
	}
	return NULL;
}

/* A burst of CPU in a function of its own (the leaf of its samples). */
__attribute__((noinline)) static void latch_work(void)
{
	for (unsigned long i = 0; i < 200000; i++)
		sink += i * i;
	atomic_fetch_add(&bursts, 1);
}

__attribute__((noinline)) static void both_work(void)
{
	for (unsigned long i = 0; i < 200000; i++)
		sink += i * i;
	atomic_fetch_add(&bursts, 1);
}

/* arg: the signals to block (and read from a signalfd), SIGPROF's too
 * when non-zero; the name's prefix follows. */
struct blocker {
	int both;
	int self;
	int k;
};

static void *blocker(void *arg)
{
	struct blocker b = *(struct blocker *)arg;
	char name[16];
	sigset_t set;
	struct signalfd_siginfo si;
	free(arg);
	snprintf(name, sizeof name, "%s-%d", b.both ? "both" : "latch", b.k);
	pthread_setname_np(pthread_self(), name);
	sigemptyset(&set);
	sigaddset(&set, SIGURG);
	if (b.both)
		sigaddset(&set, SIGPROF);
	if (b.self)
		pthread_sigmask(SIG_BLOCK, &set, NULL);
	int fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0)
		return NULL;
	for (;;) {
		while (read(fd, &si, sizeof si) == sizeof si)
			count((int)si.ssi_signo);
		if (b.both)
			both_work();
		else
			latch_work();
	}
	return NULL;
}

static int nblockers;

static void start_blockers(int n, int both, int self)
{
	for (int i = 0; i < n; i++) {
		struct blocker *b = malloc(sizeof *b);
		pthread_t t;
		b->both = both;
		b->self = self;
		b->k = nblockers++;
		pthread_create(&t, NULL, blocker, b);
	}
}

/* Makes the latch threads with SIGURG blocked already (they start so). */
static void *spawner(void *arg)
{
	sigset_t urg;
	sigemptyset(&urg);
	sigaddset(&urg, SIGURG);
	pthread_sigmask(SIG_BLOCK, &urg, NULL);
	start_blockers((int)(long)arg, 0, 0);
	return NULL;
}

static int nburners;

static void start_burners(int n)
{
	for (int i = 0; i < n; i++) {
		pthread_t t;
		pthread_create(&t, NULL, burner, (void *)(long)nburners++);
	}
}

int main(void)
{
	char line[4200];
	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof line, stdin)) {
		char arg[4096] = "";
		int n = 0;
		line[strcspn(line, "\n")] = 0;
		if (sscanf(line, "burn %d", &n) == 1) {
			start_burners(n);
			printf("ok\n");
		} else if (strcmp(line, "prof") == 0) {
			struct sigaction sa;
			memset(&sa, 0, sizeof sa);
			sa.sa_sigaction = on_prof;
			sa.sa_flags = SA_RESTART | SA_SIGINFO;
			sigaction(SIGPROF, &sa, NULL);
			struct itimerval it = {{0, 10000}, {0, 10000}};
			setitimer(ITIMER_PROF, &it, NULL);
			printf("ok\n");
		} else if (strcmp(line, "ticks") == 0) {
			printf("ticks %lu %lu\n", atomic_load(&ticks),
			       atomic_load(&prof_others));
		} else if (strcmp(line, "urg") == 0) {
			struct sigaction sa;
			memset(&sa, 0, sizeof sa);
			sa.sa_handler = on_urg;
			sa.sa_flags = SA_RESTART;
			sigaction(SIGURG, &sa, NULL);
			printf("ok\n");
		} else if (strcmp(line, "urgs") == 0) {
			printf("urgs %lu\n", atomic_load(&urgs));
		} else if (strcmp(line, "reset") == 0) {
			for (int s = 1; s < NSIG; s++)
				if (s != SIGKILL && s != SIGSTOP)
					signal(s, SIG_DFL);
			printf("ok\n");
		} else if (sscanf(line, "exec %4095s", arg) == 1) {
			pid_t pid = fork();
			if (pid == 0) {
				int fd = open(arg, O_WRONLY | O_CREAT | O_TRUNC,
				              0644);
				if (fd < 0)
					_exit(126);
				dup2(fd, 1);
				char *argv[] = {"cat", "/proc/self/status",
				                NULL};
				char *envp[] = {"PATH=/usr/bin:/bin", NULL};
				execve("/bin/cat", argv, envp);
				_exit(127);
			}
			int st = 0;
			waitpid(pid, &st, 0);
			printf("exited %d\n", WIFEXITED(st)
			                          ? WEXITSTATUS(st)
			                          : 128 + WTERMSIG(st));
		} else if (sscanf(line, "blockall %4095s", arg) == 1) {
			sigset_t all;
			pthread_t t;
			sigfillset(&all);
			pthread_sigmask(SIG_BLOCK, &all, NULL);
			pthread_create(&t, NULL,
			               strcmp(arg, "sigwait") == 0
			                   ? reader_sigwait
			                   : reader_signalfd,
			               NULL);
			printf("ok\n");
		} else if (sscanf(line, "latch %d %4095s", &n, arg) == 2) {
			if (strcmp(arg, "inherit") == 0) {
				pthread_t t;
				pthread_create(&t, NULL, spawner,
				               (void *)(long)n);
				pthread_join(t, NULL);
			} else {
				start_blockers(n, 0, 1);
			}
			printf("ok\n");
		} else if (sscanf(line, "both %d", &n) == 1) {
			start_blockers(n, 1, 1);
			printf("ok\n");
		} else if (strcmp(line, "urglater") == 0) {
			atomic_store(&urg_later, 1);
			printf("ok\n");
		} else if (strcmp(line, "blocklater") == 0) {
			atomic_store(&block_later, 1);
			printf("ok\n");
		} else if (strcmp(line, "read") == 0) {
			printf("read %lu %lu %lu\n", atomic_load(&read_urg),
			       atomic_load(&read_prof),
			       atomic_load(&read_other));
		} else if (strcmp(line, "quit") == 0) {
			printf("bye\n");
			return 0;
		} else {
			printf("err unknown command\n");
		}
	}
	return 0;
}

/*
 * A host that siglongjmps out of its own signal handler, as timeouts,
 * interpreters and coroutine libraries do (tests/integration/
 * test_hostile_signals.py, test_siglongjmp_host): ITIMER_REAL every 200 us
 * on the main thread, whose SIGALRM handler (sa_mask empty) siglongjmps
 * back into the main thread's busy loop; a second thread "burn-1" burns
 * CPU too. Neither blocks pullprof's signals, so pullprof's handler runs on
 * the main thread among the alarms. Run with libpullprof preloaded; one
 * command a line on stdin, each answered by one line on stdout:
 *
 *   jumps   "jumps N": the siglongjmps so far
 *   quit    the alarms stop and main returns (the agent stops at exit)
 *
 * It prints "ready" once the alarms run.
 */
#define _GNU_SOURCE 1
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static sigjmp_buf back;
static volatile sig_atomic_t armed;
static atomic_ulong jumps;
static atomic_int quit;
static volatile unsigned long sink;

static void on_alarm(int sig)
{
	(void)sig;
	if (armed)
		siglongjmp(back, 1);
}

static void block_alarm(void)
{
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
}

static void *burner(void *arg)
{
	(void)arg;
	block_alarm();
	pthread_setname_np(pthread_self(), "burn-1");
	while (!atomic_load(&quit))
		for (unsigned long i = 0; i < 100000; i++)
			sink += i * i;
	return NULL;
}

static void *reader(void *arg)
{
	char line[64];
	(void)arg;
	block_alarm();
	pthread_setname_np(pthread_self(), "reader");
	while (fgets(line, sizeof line, stdin)) {
		line[strcspn(line, "\n")] = 0;
		if (strcmp(line, "jumps") == 0) {
			printf("jumps %lu\n", atomic_load(&jumps));
		} else if (strcmp(line, "quit") == 0) {
			printf("ok\n");
			fflush(stdout);
			break;
		} else {
			printf("?\n");
		}
		fflush(stdout);
	}
	atomic_store(&quit, 1);
	return NULL;
}

int main(void)
{
	pthread_t b, r;
	sigset_t alarm;
	sigemptyset(&alarm);
	sigaddset(&alarm, SIGALRM);
	/* The threads start with SIGALRM blocked (a thread not yet running
	 * its function would otherwise take an alarm and jump onto main's
	 * stack); main alone takes them. */
	pthread_sigmask(SIG_BLOCK, &alarm, NULL);
	pthread_create(&b, NULL, burner, NULL);
	pthread_create(&r, NULL, reader, NULL);
	pthread_sigmask(SIG_UNBLOCK, &alarm, NULL);

	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = {{0, 200}, {0, 200}};

	if (sigsetjmp(back, 1))
		atomic_fetch_add(&jumps, 1);
	if (!armed) {
		/* The alarms run before "ready", but jump only once it is
		 * printed: a jump out of printf would leave stdout's lock
		 * held by main for good, and the reader would never answer
		 * again (seen on a loaded machine: "jumps" unanswered). */
		setitimer(ITIMER_REAL, &it, NULL);
		printf("ready\n");
		fflush(stdout);
		armed = 1;
	}
	while (!atomic_load(&quit))
		for (unsigned long i = 0; i < 100000; i++)
			sink += i * i;
	armed = 0;
	struct itimerval off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &off, NULL);
	pthread_join(b, NULL);
	pthread_join(r, NULL);
	return 0;
}

/*
 * waiters: threads that wait in known places, for the thread dump and
 * wall-clock tests and benchmarks. Starts the agent on PULLPROF_LISTEN and
 * prints "port N".
 *
 *   waiters dump N      about N threads, each blocked in one of seven
 *                       functions (wait_condvar, wait_epoll, wait_pipe,
 *                       wait_nanosleep, wait_sem, wait_join, wait_mutex)
 *                       and one spinning in spin_forever, and one blocked
 *                       in a signal handler (in_handler) that interrupted
 *                       interrupted(); prints "line F L"
 *                       for each (F blocks at line L of this file), then
 *                       "ready".
 *   waiters eintr       threads looping on the calls signal(7) says a
 *                       handler interrupts even with SA_RESTART (nanosleep,
 *                       clock_nanosleep, usleep, poll, ppoll, select,
 *                       pselect, epoll_wait, epoll_pwait, recv, recvfrom,
 *                       recvmsg and accept with SO_RCVTIMEO, sem_timedwait,
 *                       semtimedop, msgrcv, sigtimedwait, io_getevents,
 *                       pthread_cond_timedwait, as libc gives them), each
 *                       checking
 *                       its result (no EINTR, no early return), and one
 *                       burning CPU; prints "ready". After a line on stdin:
 *                       "calls N bad M timer_early K" and a line per bad
 *                       return. SIGUSR2
 *                       has a do-nothing SA_RESTART handler: what a signal
 *                       does to these calls (the tests' control).
 *   waiters nap MS      one thread alternating nap() (sleeps MS ms) and
 *                       burn() (spins for MS ms of its CPU time); prints
 *                       "ready".
 *                       A line "times" on stdin prints "times N B": the
 *                       nanoseconds of wall time spent in each so far
 *                       (a busy machine makes the nap longer: its wake-up
 *                       waits for a CPU).
 *   waiters many N      N threads blocked on one condition variable (the
 *                       benchmark's hosts); prints "ready".
 *   waiters spawn       a line "A N" or "B N" on stdin starts and joins N
 *                       threads from spawn_a() or spawn_b(), one at a time,
 *                       and prints "spawned" (threadcreate's test).
 *
 * Every mode runs until its stdin is closed (main waits in read()).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/select.h>
#include <sys/sem.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <pullprof.h>

#define KEEP __attribute__((noinline, noclone, used))

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
static sem_t sem;
static int pipe_fds[2], epfd;
static atomic_int arrived;
static volatile uint64_t sink;

KEEP void wait_condvar(void);
KEEP void wait_epoll(void);
KEEP void wait_pipe(void);
KEEP void wait_nanosleep(void);
KEEP void wait_sem(void);
KEEP void wait_join(void);
KEEP void wait_mutex(void);
KEEP void spin_forever(void);
KEEP void nap(void);
KEEP void burn(void);
KEEP void wait_many(void);
KEEP void spawn_a(int n);
KEEP void spawn_b(int n);

/* Written by every thread of a kind (the same value), read by main. */
static atomic_int line_condvar, line_epoll, line_pipe, line_nanosleep, line_sem,
    line_join, line_mutex;

static void arrive(void)
{
	atomic_fetch_add(&arrived, 1);
}

KEEP void wait_condvar(void)
{
	pthread_mutex_lock(&mu);
	arrive();
	line_condvar = __LINE__ + 2;
	for (;;)
		pthread_cond_wait(&never, &mu);
}

KEEP void wait_epoll(void)
{
	struct epoll_event ev;
	arrive();
	line_epoll = __LINE__ + 2;
	for (;;)
		epoll_wait(epfd, &ev, 1, -1);
}

KEEP void wait_pipe(void)
{
	char c;
	arrive();
	line_pipe = __LINE__ + 2;
	for (;;)
		if (read(pipe_fds[0], &c, 1) <= 0)
			break;
}

KEEP void wait_nanosleep(void)
{
	struct timespec ts = {3600, 0};
	arrive();
	line_nanosleep = __LINE__ + 2;
	for (;;)
		nanosleep(&ts, NULL);
}

KEEP void wait_sem(void)
{
	arrive();
	line_sem = __LINE__ + 2;
	for (;;)
		sem_wait(&sem);
}

static void *joined_main(void *arg)
{
	(void)arg;
	wait_condvar();
	return NULL;
}

KEEP void wait_join(void)
{
	pthread_t t;
	pthread_create(&t, NULL, joined_main, NULL);
	arrive();
	line_join = __LINE__ + 1;
	pthread_join(t, NULL);
}

KEEP void wait_mutex(void)
{
	arrive();
	line_mutex = __LINE__ + 1;
	pthread_mutex_lock(&held);
	pthread_mutex_unlock(&held);
}

KEEP void spin_forever(void)
{
	for (;;)
		sink++;
}

/* A thread blocked inside a signal handler: its stack runs through the
 * kernel's signal frame (the rt_sigreturn trampoline) back to the code the
 * signal interrupted. */
static int handler_fds[2] = {-1, -1};
static atomic_int line_in_handler;

void in_handler(int sig);
void interrupted(void);

KEEP void in_handler(int sig)
{
	char c;
	(void)sig;
	arrive();
	line_in_handler = __LINE__ + 2;
	for (;;)
		if (read(handler_fds[0], &c, 1) <= 0)
			break;
}

static atomic_int in_interrupted;

KEEP void interrupted(void)
{
	atomic_store(&in_interrupted, 1);
	for (;;)
		pause();
}

static void *interrupted_main(void *arg)
{
	(void)arg;
	interrupted();
	return NULL;
}

static void *waiter_main(void *arg)
{
	switch ((int)(intptr_t)arg) {
	case 0: wait_condvar(); break;
	case 1: wait_epoll(); break;
	case 2: wait_pipe(); break;
	case 3: wait_nanosleep(); break;
	case 4: wait_sem(); break;
	case 5: wait_join(); break;
	case 6: wait_mutex(); break;
	default: spin_forever(); break;
	}
	return NULL;
}

static void start(void *(*fn)(void *), void *arg)
{
	pthread_t t;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 256 << 10);
	if (pthread_create(&t, &a, fn, arg)) {
		perror("pthread_create");
		exit(1);
	}
	pthread_attr_destroy(&a);
}

/* ---- eintr ----------------------------------------------------------------
 */

static atomic_int stopping;
static atomic_long calls, bad;
static pthread_mutex_t report_mu = PTHREAD_MUTEX_INITIALIZER;
static char reports[64][160];
static int nreports;

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The kernel keeps a socket's SO_RCVTIMEO in scheduler ticks (HZ may be
 * as low as 100): such a timeout may end up to a tick early, with EAGAIN;
 * more when the tick count lags the clock (a tickless CPU, a virtual CPU
 * the host did not run: seen once, three sockets ending 7.5 ms into 20 ms
 * at the same instant). A signal never ends these calls with EAGAIN: with
 * a finite timeout the kernel answers EINTR (sock_intr_errno), SA_RESTART
 * or not. So an EAGAIN is the timer's end whenever it comes; one earlier
 * than a tick's slack is counted apart (timer_early) and reported, not bad. */
#define TICK_SLACK_NS 10000000u
static atomic_long timer_early;

/* A call that said EINTR or failed otherwise, or took less than want_ns
 * (give or take slack_ns: a timer's granularity, never a signal's). */
static void check_slack(const char *what, int rc, int err, int expect_err,
                        uint64_t t0, uint64_t want_ns, uint64_t slack_ns)
{
	uint64_t took = now_ns() - t0;
	atomic_fetch_add(&calls, 1);
	int wrong = rc < 0 ? err != expect_err : expect_err != 0 && rc != 0;
	int early = took + slack_ns < want_ns;
	if (!wrong && early && slack_ns == TICK_SLACK_NS) {
		atomic_fetch_add(&timer_early, 1);
		early = 0;
		fprintf(stderr, "timer early: %s after %.3f ms (asked %.3f)\n",
		        what, (double)took / 1e6, (double)want_ns / 1e6);
	}
	if (wrong || early) {
		atomic_fetch_add(&bad, 1);
		pthread_mutex_lock(&report_mu);
		if (nreports < 64)
			snprintf(
			    reports[nreports++], sizeof reports[0],
			    "%s: rc %d errno %s after %.3f ms (asked %.3f)",
			    what, rc, rc < 0 ? strerror(err) : "-",
			    (double)took / 1e6, (double)want_ns / 1e6);
		pthread_mutex_unlock(&report_mu);
	}
}

static void check(const char *what, int rc, int err, int expect_err,
                  uint64_t t0, uint64_t want_ns)
{
	check_slack(what, rc, err, expect_err, t0, want_ns, 1000000u);
}

#define MS 20
#define MS_NS (MS * 1000000ull)

static void *eintr_main(void *arg)
{
	int kind = (int)(intptr_t)arg;
	int sv[2] = {-1, -1}, ep = -1, semid = -1, msqid = -1;
	sem_t s;
	pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;

	sem_init(&s, 0, 0);
	socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
	struct timeval tv = {0, MS * 1000};
	setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	ep = epoll_create1(0);
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = sv[0]};
	epoll_ctl(ep, EPOLL_CTL_ADD, sv[0], &ev);
	semid = semget(IPC_PRIVATE, 1, 0600);
	msqid = msgget(IPC_PRIVATE, 0600);
	/* A listening socket nobody connects to. */
	int lsock = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sin = {.sin_family = AF_INET,
	                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (lsock >= 0 &&
	    (bind(lsock, (struct sockaddr *)&sin, sizeof sin) ||
	     listen(lsock, 1) ||
	     setsockopt(lsock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv))) {
		close(lsock);
		lsock = -1;
	}
	/* SIGUSR1, blocked here, waited for and never sent. */
	sigset_t usr1;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, NULL);
	aio_context_t aio_ctx = 0;
	int aio = (int)syscall(SYS_io_setup, 1, &aio_ctx);

	while (!atomic_load(&stopping)) {
		uint64_t t0 = now_ns();
		int rc;
		errno = 0;
		switch (kind) {
		case 0: {
			struct timespec ts = {0, MS_NS};
			rc = nanosleep(&ts, NULL);
			check("nanosleep", rc, errno, 0, t0, MS_NS);
			break;
		}
		case 1: {
			struct timespec ts = {0, MS_NS};
			rc = -clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
			check("clock_nanosleep", rc ? -1 : 0, -rc, 0, t0,
			      MS_NS);
			break;
		}
		case 2:
			rc = usleep(MS * 1000);
			check("usleep", rc, errno, 0, t0, MS_NS);
			break;
		case 3: {
			struct pollfd p = {sv[0], POLLIN, 0};
			rc = poll(&p, 1, MS);
			check("poll", rc, errno, 0, t0, MS_NS);
			break;
		}
		case 4: {
			struct pollfd p = {sv[0], POLLIN, 0};
			struct timespec ts = {0, MS_NS};
			rc = ppoll(&p, 1, &ts, NULL);
			check("ppoll", rc, errno, 0, t0, MS_NS);
			break;
		}
		case 5: {
			fd_set r;
			FD_ZERO(&r);
			FD_SET(sv[0], &r);
			struct timeval t = {0, MS * 1000};
			rc = select(sv[0] + 1, &r, NULL, NULL, &t);
			check("select", rc, errno, 0, t0, MS_NS);
			break;
		}
		case 6: {
			fd_set r;
			FD_ZERO(&r);
			FD_SET(sv[0], &r);
			struct timespec t = {0, MS_NS};
			rc = pselect(sv[0] + 1, &r, NULL, NULL, &t, NULL);
			check("pselect", rc, errno, 0, t0, MS_NS);
			break;
		}
		case 7: {
			struct epoll_event e;
			rc = epoll_wait(ep, &e, 1, MS);
			check("epoll_wait", rc, errno, 0, t0, MS_NS);
			break;
		}
		case 8: {
			struct epoll_event e;
			rc = epoll_pwait(ep, &e, 1, MS, NULL);
			check("epoll_pwait", rc, errno, 0, t0, MS_NS);
			break;
		}
		case 9: {
			char c;
			rc = (int)recv(sv[0], &c, 1, 0);
			check_slack("recv with SO_RCVTIMEO", rc, errno, EAGAIN,
			            t0, MS_NS, TICK_SLACK_NS);
			break;
		}
		case 10: {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += (long)MS_NS;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			rc = sem_timedwait(&s, &ts);
			check("sem_timedwait", rc, errno, ETIMEDOUT, t0, MS_NS);
			break;
		}
		case 11: {
			struct sembuf op = {0, -1, 0};
			struct timespec ts = {0, MS_NS};
			rc = semid < 0 ? -1 : semtimedop(semid, &op, 1, &ts);
			check("semtimedop", rc, errno, EAGAIN, t0, MS_NS);
			break;
		}
		case 12: {
			/* msgrcv has no timeout: a non-blocking one between
			 * sleeps still must not fail with EINTR. */
			struct {
				long type;
				char text[8];
			} msg;
			rc = msqid < 0
			         ? -1
			         : (int)msgrcv(msqid, &msg, sizeof msg.text, 0,
			                       IPC_NOWAIT);
			check("msgrcv", rc, errno, ENOMSG, t0, 0);
			struct timespec ts = {0, MS_NS};
			t0 = now_ns();
			rc = nanosleep(&ts, NULL);
			check("nanosleep", rc, errno, 0, t0, MS_NS);
			break;
		}
		case 13: {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += (long)MS_NS;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_mutex_lock(&m);
			rc = pthread_cond_timedwait(&cv, &m, &ts);
			pthread_mutex_unlock(&m);
			/* 0 would be a wake-up no one sent. */
			check("pthread_cond_timedwait", rc ? -1 : 0, rc,
			      ETIMEDOUT, t0, MS_NS);
			break;
		}
		case 14: {
			/* Short sleeps: most of the time on the way in and
			 * out of the call, where a look finds it running. */
			struct timespec ts = {0, 50000};
			rc = nanosleep(&ts, NULL);
			check("nanosleep 50us", rc, errno, 0, t0, 50000);
			break;
		}
		case 15: {
			char c;
			rc = (int)recvfrom(sv[0], &c, 1, 0, NULL, NULL);
			check_slack("recvfrom with SO_RCVTIMEO", rc, errno,
			            EAGAIN, t0, MS_NS, TICK_SLACK_NS);
			break;
		}
		case 16: {
			char c;
			struct iovec iov = {&c, 1};
			struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
			rc = (int)recvmsg(sv[0], &mh, 0);
			check_slack("recvmsg with SO_RCVTIMEO", rc, errno,
			            EAGAIN, t0, MS_NS, TICK_SLACK_NS);
			break;
		}
		case 17:
			rc = lsock < 0 ? -1 : accept(lsock, NULL, NULL);
			check_slack("accept with SO_RCVTIMEO", rc, errno,
			            EAGAIN, t0, MS_NS, TICK_SLACK_NS);
			break;
		case 18: {
			struct timespec ts = {0, MS_NS};
			rc = sigtimedwait(&usr1, NULL, &ts);
			check("sigtimedwait", rc, errno, EAGAIN, t0, MS_NS);
			break;
		}
		case 19: {
			struct io_event evs[1];
			struct timespec ts = {0, MS_NS};
			rc = aio < 0 ? -1
			             : (int)syscall(SYS_io_getevents, aio_ctx,
			                            1, 1, evs, &ts);
			check("io_getevents", rc, errno, 0, t0, MS_NS);
			break;
		}
		default:
			for (int i = 0; i < 100000; i++)
				sink++;
			break;
		}
	}
	if (semid >= 0)
		semctl(semid, 0, IPC_RMID);
	if (msqid >= 0)
		msgctl(msqid, IPC_RMID, NULL);
	close(sv[0]);
	close(sv[1]);
	close(ep);
	if (lsock >= 0)
		close(lsock);
	if (aio >= 0)
		syscall(SYS_io_destroy, aio_ctx);
	return NULL;
}

/* The calls above, and a burner. */
#define EINTR_KINDS 21

static void on_usr2(int sig)
{
	(void)sig;
}

/* ---- nap ------------------------------------------------------------------
 */

static long nap_ms = 10;
/* The wall time each really took, for the test to compare with. */
static atomic_ullong nap_ns, burn_ns;

KEEP void nap(void)
{
	struct timespec ts = {nap_ms / 1000, (nap_ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static uint64_t cpu_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* MS ms of this thread's CPU: on an idle machine as much wall time, on a
 * busy one more, and the thread is in burn() all along (a burn bounded by
 * the wall clock would end preempted past its deadline, its last moments
 * spent waiting for a CPU only to return). */
KEEP void burn(void)
{
	uint64_t end = cpu_ns() + (uint64_t)nap_ms * 1000000u;
	while (cpu_ns() < end)
		for (int i = 0; i < 1000; i++)
			sink++;
}

/* This thread's time spent runnable, waiting for a CPU, in nanoseconds
 * (the scheduler's run_delay, schedstat's second field), or 0 without
 * schedstat. */
static uint64_t waited_ns(void)
{
	char buf[128];
	unsigned long long run = 0, wait = 0;
	int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	return sscanf(buf, "%llu %llu", &run, &wait) == 2 ? wait : 0;
}

/* Of the time in nap(), how much its thread was runnable, its wake-up
 * waiting for a CPU (a busy machine): the thread dump shows it running
 * then, and the test compares the profile's share with this. */
static atomic_ullong nap_wait_ns;

static void *nap_main(void *arg)
{
	(void)arg;
	arrive();
	uint64_t t = now_ns();
	for (;;) {
		uint64_t w = waited_ns();
		nap();
		atomic_fetch_add(&nap_wait_ns, waited_ns() - w);
		uint64_t u = now_ns();
		atomic_fetch_add(&nap_ns, u - t);
		burn();
		t = now_ns();
		atomic_fetch_add(&burn_ns, t - u);
	}
	return NULL;
}

/* ---- spawn ----------------------------------------------------------------
 */

static void *nothing(void *arg)
{
	return arg;
}

/* Start and join n threads, one at a time, from here. */
static void spawn_from_here(int n)
{
	for (int i = 0; i < n; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, nothing, NULL) == 0)
			pthread_join(t, NULL);
	}
}

KEEP void spawn_a(int n)
{
	spawn_from_here(n);
	sink++;
}

KEEP void spawn_b(int n)
{
	spawn_from_here(n);
	sink++;
}

/* ---- many -----------------------------------------------------------------
 */

KEEP void wait_many(void)
{
	pthread_mutex_lock(&mu);
	arrive();
	for (;;)
		pthread_cond_wait(&never, &mu);
}

static void *many_main(void *arg)
{
	(void)arg;
	wait_many();
	return NULL;
}

static void wait_arrived(int n)
{
	while (atomic_load(&arrived) < n)
		usleep(1000);
}

/* Reads stdin until it closes; 1 when a line came first. */
static int wait_stdin_line(void)
{
	char buf[256];
	return fgets(buf, sizeof buf, stdin) != NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: waiters dump N | eintr | nap MS | "
		                "many N\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	int rc = pullprof_start(NULL);
	if (rc) {
		fprintf(stderr, "waiters: %s\n", pullprof_strerror(rc));
		return 1;
	}
	printf("port %d\n", pullprof_port());

	if (!strcmp(argv[1], "dump") && argc == 3) {
		int n = atoi(argv[2]);
		sem_init(&sem, 0, 0);
		if (pipe(pipe_fds)) {
			perror("pipe");
			return 1;
		}
		epfd = epoll_create1(0);
		pthread_mutex_lock(&held); /* held by main forever */
		int joins = 0;
		for (int i = 0; i < n; i++) {
			joins += i % 7 == 5;
			start(waiter_main, (void *)(intptr_t)(i % 7));
		}
		start(waiter_main, (void *)(intptr_t)7);
		/* Each joiner's joined thread arrives in wait_condvar. */
		wait_arrived(n + joins);
		/* One thread waits in a SIGUSR1 handler, which found it in
		 * interrupted() (in pause(), or on its way there). */
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = in_handler;
		sigaction(SIGUSR1, &sa, NULL);
		pthread_t it;
		if (pipe(handler_fds) ||
		    pthread_create(&it, NULL, interrupted_main, NULL)) {
			perror("interrupted thread");
			return 1;
		}
		while (!atomic_load(&in_interrupted))
			usleep(1000);
		pthread_kill(it, SIGUSR1);
		wait_arrived(n + joins + 1);
		printf("line wait_condvar %d\nline wait_epoll %d\n"
		       "line wait_pipe %d\nline wait_nanosleep %d\n"
		       "line wait_sem %d\nline wait_join %d\n"
		       "line wait_mutex %d\nline in_handler %d\nready\n",
		       line_condvar, line_epoll, line_pipe, line_nanosleep,
		       line_sem, line_join, line_mutex, line_in_handler);
		char line[64];
		while (fgets(line, sizeof line, stdin)) {
			int more = 0;
			if (sscanf(line, "more %d", &more) != 1)
				continue;
			int before = atomic_load(&arrived);
			for (int i = 0; i < more; i++)
				start(waiter_main, (void *)(intptr_t)3);
			wait_arrived(before + more);
			printf("more ready\n");
		}
		return 0;
	}
	if (!strcmp(argv[1], "eintr")) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_usr2;
		sa.sa_flags = SA_RESTART;
		sigaction(SIGUSR2, &sa, NULL);
		pthread_t t[EINTR_KINDS];
		for (int i = 0; i < EINTR_KINDS; i++)
			pthread_create(&t[i], NULL, eintr_main,
			               (void *)(intptr_t)i);
		printf("ready\n");
		wait_stdin_line();
		atomic_store(&stopping, 1);
		for (int i = 0; i < EINTR_KINDS; i++)
			pthread_join(t[i], NULL);
		printf("calls %ld bad %ld timer_early %ld\n",
		       atomic_load(&calls), atomic_load(&bad),
		       atomic_load(&timer_early));
		for (int i = 0; i < nreports; i++)
			printf("bad: %s\n", reports[i]);
		printf("done\n");
		while (wait_stdin_line())
			;
		return 0;
	}
	if (!strcmp(argv[1], "nap") && argc == 3) {
		nap_ms = atol(argv[2]);
		start(nap_main, NULL);
		wait_arrived(1);
		printf("ready\n");
		char line[64];
		while (fgets(line, sizeof line, stdin))
			if (!strncmp(line, "times", 5))
				printf(
				    "times %llu %llu %llu\n",
				    (unsigned long long)atomic_load(&nap_ns),
				    (unsigned long long)atomic_load(&burn_ns),
				    (unsigned long long)atomic_load(
				        &nap_wait_ns));
		return 0;
	}
	if (!strcmp(argv[1], "spawn")) {
		printf("ready\n");
		char line[64];
		int n;
		while (fgets(line, sizeof line, stdin)) {
			if (sscanf(line, "A %d", &n) == 1)
				spawn_a(n);
			else if (sscanf(line, "B %d", &n) == 1)
				spawn_b(n);
			else
				continue;
			printf("spawned\n");
		}
		return 0;
	}
	if (!strcmp(argv[1], "many") && argc == 3) {
		int n = atoi(argv[2]);
		for (int i = 0; i < n; i++)
			start(many_main, NULL);
		wait_arrived(n);
		printf("ready\n");
		while (wait_stdin_line())
			;
		return 0;
	}
	fprintf(stderr, "waiters: unknown mode %s\n", argv[1]);
	return 2;
}

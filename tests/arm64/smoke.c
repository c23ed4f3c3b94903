/*
 * The emulated arm64 Debian's smoke program (tests/arm64/run.sh): what the
 * profiler relies on there, checked without the profiler.
 *
 *   smoke PORT WORD
 *
 * 1. Two threads each arm a timer on their own CPU clock
 *    (CLOCK_THREAD_CPUTIME_ID) that sends SIGPROF to them at 100 Hz, spin
 *    for 400 ms of that clock and print how many signals each got and how
 *    many expirations they stand for (1 + si_overrun each: a vCPU the host
 *    descheduled comes back with more CPU time than one period, and the
 *    kernel sends one signal for several). The sampler's mechanism:
 *    per-thread CPU timers inside the guest.
 * 2. Prints whether pointer authentication is on (HWCAP_PACA) and the
 *    PULLPROF_LISTEN it was given (the runner passes PULLPROF_*).
 * 3. Serves one HTTP request on 0.0.0.0:PORT (the runner's --port forwards
 *    a port of the x86_64 side to it) answering WORD.
 * 4. Writes a line on stderr and exits with status 3.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#ifndef HWCAP_PACA
#define HWCAP_PACA (1UL << 30)
#endif

static __thread volatile int signals, expirations;

static void on_prof(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	signals++;
	expirations += 1 + (si->si_code == SI_TIMER ? si->si_overrun : 0);
}

static double thread_cpu_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void *spin(void *arg)
{
	long id = (long)arg;
	struct sigevent sev = {0};
	timer_t timer;
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = SIGPROF;
	sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	if (timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, &timer) != 0) {
		printf("thread %ld: timer_create: %s\n", id, strerror(errno));
		return NULL;
	}
	struct itimerspec its = {{0, 10000000}, {0, 10000000}};
	timer_settime(timer, 0, &its, NULL);
	double start = thread_cpu_ms();
	volatile unsigned long x = 0;
	while (thread_cpu_ms() - start < 400)
		for (int i = 0; i < 10000; i++)
			x += i;
	timer_delete(timer);
	printf("thread %ld: %d signals, %d expirations in %.0f ms of CPU\n", id,
	       signals, expirations, thread_cpu_ms() - start);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: smoke PORT WORD\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct utsname u;
	uname(&u);
	printf("smoke: start on %s\n", u.machine);
	struct sigaction sa = {0};
	sa.sa_sigaction = on_prof;
	sa.sa_flags = SA_RESTART | SA_SIGINFO;
	sigaction(SIGPROF, &sa, NULL);
	pthread_t t[2];
	for (long i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, spin, (void *)i);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	printf("pac: %s\n", getauxval(AT_HWCAP) & HWCAP_PACA ? "on" : "off");
	const char *listen_env = getenv("PULLPROF_LISTEN");
	printf("PULLPROF_LISTEN=[%s]\n", listen_env ? listen_env : "(unset)");

	int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in a = {0};
	a.sin_family = AF_INET;
	a.sin_port = htons((unsigned short)atoi(argv[1]));
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    listen(s, 4) != 0) {
		printf("listen: %s\n", strerror(errno));
		return 1;
	}
	printf("smoke: listening on %s\n", argv[1]);
	alarm(120); /* the caller never came: end anyway */
	int c = accept(s, NULL, NULL);
	char buf[2048];
	ssize_t n = read(c, buf, sizeof(buf) - 1);
	printf("smoke: request of %zd bytes\n", n);
	char reply[512];
	int len = snprintf(reply, sizeof(reply),
	                   "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n"
	                   "%s from %s\n",
	                   argv[2], u.machine);
	if (write(c, reply, (size_t)len) != len)
		printf("smoke: short write\n");
	close(c);
	close(s);
	fprintf(stderr, "smoke: this line is on stderr\n");
	printf("smoke: done\n");
	return 3;
}

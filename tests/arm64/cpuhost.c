/*
 * cpuhost: the CPU test host of tests/arm64/test_cpu.py, run in the
 * emulated arm64 Debian (scripts/arm64-run.sh --preload: the agent is
 * preloaded, this program names no pullprof function). One process holds
 * every workload; the test drives it over TCP, one command line, one
 * answer line:
 *
 *   cpuhost PORT          listens on 0.0.0.0:PORT for one connection
 *
 *   pac                   "pac on|off SIGNED" (HWCAP_PACA; with PAC on,
 *                         whether pacia changed an address: keys are set)
 *   burn MS               two threads "burn-0", "burn-1" each loop over
 *                         burn_heavy (3 units) and burn_light (1 unit)
 *                         until MS ms of their own CPU clock; answers
 *                         "burned NS expirations E" (both threads' whole
 *                         CPU time; their own 100 Hz SIGPROF timers'
 *                         expirations) once they have ended
 *   spin DEPTH            starts the threads "deep-pac", "deep-nopac",
 *                         "deep-fp" (cpu_deep.c's variants, DEPTH frames
 *                         down), "leaf" (leaf_spin under leaf_caller),
 *                         "prologue" (prologue_spin under prologue_caller,
 *                         spinning in its prologue) and "cxx"
 *                         (cpu_cxx.cc), "vdso" (clock_gettime on its
 *                         CPU clock, under vdso_caller); answers "ready
 * prologue=ADDR" once all are spinning unspin                stops and joins
 * them: "ok" short US CONC MS MIN  keeps CONC threads alive for MS ms (and on
 * until MIN have ended), each doing about US us of work (calibrated first) in
 * short_work and exiting; answers "cpu_ns C threads N": the CPU those threads
 * used quit                  exits 0
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef HWCAP_PACA
#define HWCAP_PACA (1UL << 30)
#endif

#define KEEP __attribute__((noinline, noclone, used))

volatile int cpu_stop;
int cpu_depth = 30;
static int arrived_count;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static volatile uint64_t sink;

void cpu_arrived(void)
{
	pthread_mutex_lock(&lock);
	arrived_count++;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

void cpu_name_thread(const char *name)
{
	pthread_setname_np(pthread_self(), name);
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* --- burn: the 3:1 split ------------------------------------------------ */

KEEP uint64_t burn_heavy(uint64_t x);
KEEP uint64_t burn_light(uint64_t x);

uint64_t burn_heavy(uint64_t x)
{
	for (int k = 0; k < 3 * 2000; k++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	return x;
}

uint64_t burn_light(uint64_t x)
{
	for (int k = 0; k < 2000; k++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	return x;
}

static uint64_t burn_ns;
static _Atomic uint64_t burned_ns, burn_expirations;

/* The guest kernel's own count: a 100 Hz timer on each burner's CPU clock
 * sending SIGPROF (pullprof samples with another signal), its
 * expirations (1 + si_overrun a signal) summed. What the kernel delivered,
 * to tell a short profile from a short delivery. */
static void on_prof(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	burn_expirations += 1 + (si->si_code == SI_TIMER && si->si_overrun > 0
	                             ? (uint64_t)si->si_overrun
	                             : 0);
}

static timer_t own_timer(void)
{
	struct sigevent sev = {0};
	timer_t timer = 0;
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = SIGPROF;
	sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	if (timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, &timer) == 0) {
		struct itimerspec its = {{0, 10000000}, {0, 10000000}};
		timer_settime(timer, 0, &its, NULL);
	}
	return timer;
}

static void *burner(void *arg)
{
	char name[16];
	uint64_t x = (uintptr_t)arg + 88172645463325252ULL;
	snprintf(name, sizeof name, "burn-%d", (int)(uintptr_t)arg);
	pthread_setname_np(pthread_self(), name);
	timer_t timer = own_timer();
	/* The clock is read every 32 rounds: a thread's CPU clock is a
	 * system call, costly under emulation, and its samples stop in the
	 * vDSO (see test_cpu.py). */
	while (thread_cpu_ns() < burn_ns)
		for (int i = 0; i < 32; i++) {
			x = burn_heavy(x);
			x = burn_light(x);
		}
	sink += x;
	timer_delete(timer);
	/* Everything this thread used, its start included. */
	burned_ns += thread_cpu_ns();
	return NULL;
}

/* --- the leaf and the prologue ------------------------------------------ */

/* A leaf: no call, so GCC gives it no frame and x30 holds its return
 * address all along. */
KEEP uint64_t leaf_spin(uint64_t x);
KEEP uint64_t leaf_caller(uint64_t x);

uint64_t leaf_spin(uint64_t x)
{
	for (int k = 0; k < 20000; k++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	return x;
}

uint64_t leaf_caller(uint64_t x)
{
	while (!__atomic_load_n(&cpu_stop, __ATOMIC_RELAXED))
		x = leaf_spin(x) + 1;
	return x * 3;
}

static void *leaf_thread(void *arg)
{
	pthread_setname_np(pthread_self(), "leaf");
	cpu_arrived();
	sink += leaf_caller((uintptr_t)arg);
	return NULL;
}

/* A function that spends its time in its prologue: after paciasp (x30
 * signed), before sp moves (phase 1, offsets 8-15), and after sp moved but
 * before stp saves x29 and x30 (phase 2, offsets 24-31). Its return
 * address is in x30 (signed) throughout both: the first step of a walk
 * must take it from there, stripped. The CFI says so, as GCC's would. */
KEEP void prologue_body(void);
void prologue_body(void)
{
	__asm__ volatile("" ::: "memory");
}
uint64_t prologue_spin(uint64_t n);
__asm__(".text\n"
        ".globl prologue_spin\n"
        ".type prologue_spin, %function\n"
        ".p2align 4\n"
        "prologue_spin:\n"
        ".cfi_startproc\n"
        "hint #25\n" /* paciasp */
        ".cfi_negate_ra_state\n"
        "mov x9, x0\n"
        "1: subs x9, x9, #1\n"
        "b.ne 1b\n"
        "sub sp, sp, #32\n"
        ".cfi_def_cfa_offset 32\n"
        "mov x9, x0\n"
        "2: subs x9, x9, #1\n"
        "b.ne 2b\n"
        "stp x29, x30, [sp, #16]\n"
        ".cfi_offset 29, -16\n"
        ".cfi_offset 30, -8\n"
        "add x29, sp, #16\n"
        "bl prologue_body\n"
        "ldp x29, x30, [sp, #16]\n"
        ".cfi_restore 29\n"
        ".cfi_restore 30\n"
        "add sp, sp, #32\n"
        ".cfi_def_cfa_offset 0\n"
        "hint #29\n" /* autiasp */
        ".cfi_negate_ra_state\n"
        "ret\n"
        ".cfi_endproc\n"
        ".size prologue_spin, .-prologue_spin\n");

KEEP uint64_t prologue_caller(uint64_t x);
uint64_t prologue_caller(uint64_t x)
{
	while (!__atomic_load_n(&cpu_stop, __ATOMIC_RELAXED))
		x += prologue_spin(20000) + 1;
	return x * 3;
}

static void *prologue_thread(void *arg)
{
	pthread_setname_np(pthread_self(), "prologue");
	cpu_arrived();
	sink += prologue_caller((uintptr_t)arg);
	return NULL;
}

/* A thread whose CPU goes to clock_gettime on its CPU clock: a system
 * call made from the vDSO's __kernel_clock_gettime. */
KEEP uint64_t vdso_caller(void);
uint64_t vdso_caller(void)
{
	uint64_t x = 0;
	while (!__atomic_load_n(&cpu_stop, __ATOMIC_RELAXED))
		x += thread_cpu_ns();
	return x * 3;
}

static void *vdso_thread(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "vdso");
	cpu_arrived();
	sink += vdso_caller();
	return NULL;
}

/* --- short-lived threads ------------------------------------------------ */

/* Fixed work, not a loop on the thread's CPU clock: with a CPU clock,
 * clock_gettime is a system call made from the vDSO, and the samples
 * taken there would measure the vDSO's unwinding, not the threads'. */
static uint64_t short_iterations;
static _Atomic uint64_t short_cpu_ns, short_threads;

KEEP uint64_t short_work(uint64_t x, uint64_t n);
uint64_t short_work(uint64_t x, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	return x;
}

static void *short_thread(void *arg)
{
	sink += short_work((uintptr_t)arg + 1, short_iterations);
	short_cpu_ns += thread_cpu_ns();
	short_threads++;
	if ((uintptr_t)arg & 1)
		pthread_exit(NULL); /* half end so, half by returning */
	return NULL;
}

static void run_short(long us, int conc, long ms, uint64_t min, char *out,
                      size_t len)
{
	pthread_t t[64];
	struct timespec now, end;
	uintptr_t seq = 0;
	/* Iterations a microsecond, on this thread's clock. */
	uint64_t t0 = thread_cpu_ns();
	sink += short_work(t0, 4000000);
	short_iterations =
	    (uint64_t)us * 4000000u * 1000u / (thread_cpu_ns() - t0 + 1);
	short_cpu_ns = 0;
	short_threads = 0;
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += ms / 1000;
	end.tv_nsec += (ms % 1000) * 1000000;
	if (end.tv_nsec >= 1000000000) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000;
	}
	for (int i = 0; i < conc; i++)
		pthread_create(&t[i], NULL, short_thread, (void *)seq++);
	for (;;) {
		for (int i = 0; i < conc; i++) {
			pthread_join(t[i], NULL);
			clock_gettime(CLOCK_MONOTONIC, &now);
			if ((now.tv_sec > end.tv_sec ||
			     (now.tv_sec == end.tv_sec &&
			      now.tv_nsec >= end.tv_nsec)) &&
			    short_threads >= min) {
				for (int j = i + 1; j < conc; j++)
					pthread_join(t[j], NULL);
				snprintf(out, len, "cpu_ns %llu threads %llu",
				         (unsigned long long)short_cpu_ns,
				         (unsigned long long)short_threads);
				return;
			}
			pthread_create(&t[i], NULL, short_thread,
			               (void *)seq++);
		}
	}
}

/* --- pointer authentication --------------------------------------------- */

static void pac_state(char *out, size_t len)
{
	int on = (getauxval(AT_HWCAP) & HWCAP_PACA) != 0;
	uint64_t addr = (uintptr_t)&pac_state, signed_addr = addr;
	if (on) {
		/* pacia (not in the hint space: only run with PAC on). */
		register uint64_t x17 __asm__("x17") = addr;
		register uint64_t x16 __asm__("x16") = 42;
		__asm__ volatile("hint #8" /* pacia1716 */
		                 : "+r"(x17)
		                 : "r"(x16));
		signed_addr = x17;
	}
	snprintf(out, len, "pac %s %s 0x%llx 0x%llx", on ? "on" : "off",
	         signed_addr != addr ? "signed" : "unsigned",
	         (unsigned long long)addr, (unsigned long long)signed_addr);
}

/* --- the spinners --------------------------------------------------------- */

void *deep_descend_pac(void *);
void *deep_descend_nopac(void *);
void *deep_descend_fp(void *);
void *cpu_cxx_thread(void *);

static void *(*const spinners[])(void *) = {
    deep_descend_pac, deep_descend_nopac, deep_descend_fp, leaf_thread,
    prologue_thread,  cpu_cxx_thread,     vdso_thread,
};
#define NSPIN (sizeof spinners / sizeof spinners[0])
static pthread_t spin_threads[NSPIN];

static void command(const char *line, char *out, size_t len)
{
	long a, b, c, d;
	if (strcmp(line, "pac") == 0) {
		pac_state(out, len);
	} else if (sscanf(line, "burn %ld", &a) == 1 && a > 0) {
		pthread_t t[2];
		burn_ns = (uint64_t)a * 1000000u;
		burned_ns = 0;
		burn_expirations = 0;
		for (int i = 0; i < 2; i++)
			pthread_create(&t[i], NULL, burner,
			               (void *)(uintptr_t)i);
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
		snprintf(out, len, "burned %llu expirations %llu",
		         (unsigned long long)burned_ns,
		         (unsigned long long)burn_expirations);
	} else if (sscanf(line, "spin %ld", &a) == 1 && a > 0) {
		cpu_depth = (int)a;
		cpu_stop = 0;
		arrived_count = 0;
		for (size_t i = 0; i < NSPIN; i++)
			pthread_create(&spin_threads[i], NULL, spinners[i],
			               (void *)(uintptr_t)i);
		pthread_mutex_lock(&lock);
		while (arrived_count < (int)NSPIN)
			pthread_cond_wait(&cond, &lock);
		pthread_mutex_unlock(&lock);
		snprintf(out, len, "ready prologue=0x%llx",
		         (unsigned long long)(uintptr_t)prologue_spin);
	} else if (strcmp(line, "unspin") == 0) {
		cpu_stop = 1;
		for (size_t i = 0; i < NSPIN; i++)
			pthread_join(spin_threads[i], NULL);
		snprintf(out, len, "ok");
	} else if (sscanf(line, "short %ld %ld %ld %ld", &a, &b, &c, &d) == 4 &&
	           a > 0 && b > 0 && b <= 64 && c > 0 && d >= 0) {
		run_short(a, (int)b, c, (uint64_t)d, out, len);
	} else {
		snprintf(out, len, "err %.200s", line);
	}
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: cpuhost PORT\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct sigaction act = {0};
	act.sa_sigaction = on_prof;
	act.sa_flags = SA_RESTART | SA_SIGINFO;
	sigaction(SIGPROF, &act, NULL);
	int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	struct sockaddr_in sa = {0};
	sa.sin_family = AF_INET;
	sa.sin_port = htons((unsigned short)atoi(argv[1]));
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(s, (struct sockaddr *)&sa, sizeof sa) || listen(s, 1)) {
		perror("cpuhost: listen");
		return 1;
	}
	printf("cpuhost: listening on %s\n", argv[1]);
	for (;;) {
		int c = accept(s, NULL, NULL);
		if (c < 0)
			return 1;
		FILE *in = fdopen(c, "r");
		char line[256], out[256];
		while (fgets(line, sizeof line, in)) {
			line[strcspn(line, "\r\n")] = 0;
			if (strcmp(line, "quit") == 0) {
				printf("cpuhost: quit\n");
				return 0;
			}
			command(line, out, sizeof out);
			size_t n = strlen(out);
			out[n++] = '\n';
			if (write(c, out, n) != (ssize_t)n)
				break;
		}
		fclose(in);
	}
}

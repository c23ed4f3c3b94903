/*
 * A host that closes descriptors it did not open, as daemons do at
 * start-up (closefrom(3), close_range(3, ~0U, 0)), then uses the numbers
 * for files and pipes of its own (test_hostile_fds.py). Run with the agent
 * preloaded; driven line by line on stdin, one answer line each on stdout:
 *
 *   close            close_range(3, ~0U, 0): every descriptor but 0-2
 *                                                  -> "closed"
 *   closefd N        close(N): one descriptor (the test names a connection
 *                    of the agent's)                -> "closed N"
 *   reuse DIR N [AT] N files in DIR and N pipes, each with known contents
 *                    written through its descriptor (they take the lowest
 *                    free numbers: the ones just closed); with AT, the
 *                    first file is moved to number AT (dup2), as a host
 *                    that puts a file at a number of its choosing
 *                                                  -> "reused FD FD ..."
 *   check            each file read back through its descriptor (pread)
 *                    and each pipe drained: exactly what was written
 *                                                  -> "check ok" | "check bad
 * ..." alloc N          N malloc/free pairs of 1..4 KiB (heap-sampled when the
 * agent samples)            -> "alloc done ..." spin SECONDS     burn CPU
 * through a function without unwind tables (its callers cannot be found from
 * DWARF: libunwind falls back to its frame-chain heuristics and, in 1.6, to its
 *                    address validation)           -> "spun"
 *   losenext         the next close() of a connection's socket on the
 *                    agent's HTTP thread (the agent keeps those above
 *                    number 32; a low one closed there is the number an
 *                    accept left behind) closes it and answers EBADF, as
 *                    if the host had closed it a moment before
 *                    (libmicrohttpd's panic: "Close socket failed")
 *                                                  -> "armed"
 *   swapnext         the next connection the agent's HTTP thread accepts
 *                    is taken from it between accept4() and the agent's
 *                    first look at the number: the host closes it and puts
 *                    a socket of its own there (one end of a socketpair),
 *                    as a host's stray close then socket() would
 *                                                  -> "armed"
 *   sockcheck        bytes written to the other end of that socketpair
 *                    are read at that number: the host's socket is whole
 *                                                  -> "sock ok N" | "sock bad
 * ..." exit             return from main (the agent's destructor runs)
 *
 * The host defines close() and accept4() (exported: -rdynamic) for
 * losenext and swapnext; every other close is the system call.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAXN 16

static int files[MAXN], pipes[MAXN][2], n_reused;

static void content(char *buf, size_t len, const char *kind, int i)
{
	snprintf(buf, len, "%s %d: the host's own bytes, not pullprof's\n",
	         kind, i);
}

static void close_all(void)
{
#ifdef SYS_close_range
	if (syscall(SYS_close_range, 3u, ~0u, 0u) == 0)
		return;
#endif
	for (int fd = 3; fd < 65536; fd++)
		close(fd);
}

static void reuse(const char *dir, int n, int at)
{
	char path[4200], text[128];
	if (n > MAXN)
		n = MAXN;
	printf("reused");
	for (int i = 0; i < n; i++) {
		snprintf(path, sizeof path, "%s/file%d", dir, i);
		files[i] = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
		if (i == 0 && at >= 0 && files[i] >= 0 && files[i] != at) {
			if (dup2(files[i], at) == at) {
				syscall(SYS_close, files[i]);
				files[i] = at;
			}
		}
		content(text, sizeof text, "file", i);
		if (files[i] < 0 || write(files[i], text, strlen(text)) !=
		                        (ssize_t)strlen(text))
			printf(" file%d:%s", i, strerror(errno));
		else
			printf(" %d", files[i]);
		if (pipe(pipes[i]) != 0) {
			printf(" pipe%d:%s", i, strerror(errno));
			continue;
		}
		content(text, sizeof text, "pipe", i);
		if (write(pipes[i][1], text, strlen(text)) !=
		    (ssize_t)strlen(text))
			printf(" pipe%d:%s", i, strerror(errno));
		printf(" %d %d", pipes[i][0], pipes[i][1]);
	}
	n_reused = n;
	printf("\n");
}

/* Each file as written, and each pipe holding exactly its bytes: reading
 * one more would block, so the read end is made non-blocking first (a
 * blocking one is what libunwind's validation once hung in). */
static void check(void)
{
	char want[128], got[256];
	for (int i = 0; i < n_reused; i++) {
		content(want, sizeof want, "file", i);
		ssize_t r = pread(files[i], got, sizeof got, 0);
		if (r != (ssize_t)strlen(want) ||
		    memcmp(got, want, (size_t)r)) {
			printf("check bad file%d (fd %d): %zd bytes%s%s\n", i,
			       files[i], r, r < 0 ? " " : "",
			       r < 0 ? strerror(errno) : "");
			return;
		}
		content(want, sizeof want, "pipe", i);
		fcntl(pipes[i][0], F_SETFL, O_NONBLOCK);
		r = read(pipes[i][0], got, sizeof got);
		int e = errno;
		ssize_t more = read(pipes[i][0], got + (r > 0 ? r : 0), 1);
		if (r != (ssize_t)strlen(want) ||
		    memcmp(got, want, (size_t)r) || more != -1) {
			printf("check bad pipe%d (fds %d %d): read %zd%s%s, "
			       "then %zd: \"%.*s\"\n",
			       i, pipes[i][0], pipes[i][1], r, r < 0 ? " " : "",
			       r < 0 ? strerror(e) : "", more,
			       r > 0 ? (int)r : 0, got);
			return;
		}
		/* Again for the next check. */
		if (write(pipes[i][1], want, strlen(want)) !=
		    (ssize_t)strlen(want)) {
			printf("check bad pipe%d: write %s\n", i,
			       strerror(errno));
			return;
		}
	}
	printf("check ok\n");
}

static void alloc(long n)
{
	unsigned long sum = 0;
	for (long i = 0; i < n; i++) {
		char *p = malloc(1 + (size_t)(i * 7919 % 4096));
		if (!p)
			continue;
		p[0] = (char)i;
		sum += (unsigned char)p[0];
		free(p);
	}
	printf("alloc done %lu\n", sum & 1);
}

volatile unsigned long burned;
void leaf_work(void);

__attribute__((noinline, used)) void leaf_work(void)
{
	unsigned long x = burned;
	for (int i = 0; i < 200000; i++)
		x = x * 6364136223846793005ul + 1442695040888963407ul;
	burned = x;
}

#if defined(__x86_64__)
/* A frame-pointer function with no call-frame information at all (no .cfi
 * directives: no FDE in .eh_frame). */
__asm__(".text\n"
        ".globl nocfi_spin\n"
        ".type nocfi_spin, @function\n"
        "nocfi_spin:\n"
        "\tpush %rbp\n"
        "\tmov %rsp, %rbp\n"
        "\tcall leaf_work\n"
        "\tpop %rbp\n"
        "\tret\n"
        ".size nocfi_spin, .-nocfi_spin\n");
void nocfi_spin(void);
#else
static void nocfi_spin(void)
{
	leaf_work();
}
#endif

static void spin(double seconds)
{
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	do {
		nocfi_spin();
		clock_gettime(CLOCK_MONOTONIC, &b);
	} while ((double)(b.tv_sec - a.tv_sec) +
	             (double)(b.tv_nsec - a.tv_nsec) / 1e9 <
	         seconds);
	printf("spun\n");
}

static atomic_int lose_next;

int close(int fd)
{
	char name[16] = "";
	struct stat st;
	/* The next definition (a sanitizer's interceptor, then the C
	 * library's): ThreadSanitizer must see every close, or it takes the
	 * next file at a reused number for the closed one (a false race). */
	static int (*next_close)(int);
	if (!next_close)
		next_close = (int (*)(int))dlsym(RTLD_NEXT, "close");
	if (atomic_load(&lose_next) &&
	    pthread_getname_np(pthread_self(), name, sizeof name) == 0 &&
	    !strcmp(name, "pullprof-http") && fd > 32 && fstat(fd, &st) == 0 &&
	    S_ISSOCK(st.st_mode) && atomic_exchange(&lose_next, 0)) {
		if (next_close)
			next_close(fd);
		else
			syscall(SYS_close, fd);
		errno = EBADF;
		return -1;
	}
	return next_close ? next_close(fd) : (int)syscall(SYS_close, fd);
}

static atomic_int swap_next;
/* Written by the agent's HTTP thread (in accept4), read by main. */
static atomic_int swapped = -1, swapped_peer = -1;

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	char name[16] = "";
	static int (*next_accept4)(int, struct sockaddr *, socklen_t *, int);
	if (!next_accept4)
		next_accept4 = (int (*)(int, struct sockaddr *, socklen_t *,
		                        int))dlsym(RTLD_NEXT, "accept4");
	int got = next_accept4
	              ? next_accept4(fd, addr, len, flags)
	              : (int)syscall(SYS_accept4, fd, addr, len, flags);
	int sp[2];
	if (got >= 0 && atomic_load(&swap_next) &&
	    pthread_getname_np(pthread_self(), name, sizeof name) == 0 &&
	    !strcmp(name, "pullprof-http") && atomic_exchange(&swap_next, 0) &&
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0) {
		/* The agent's connection goes; the host's socket takes its
		 * number. */
		close(got);
		if (dup2(sp[0], got) == got) {
			close(sp[0]);
			swapped = got;
			swapped_peer = sp[1];
		}
	}
	return got;
}

static void sockcheck(void)
{
	static const char msg[] = "the host's own socket";
	char got[64];
	if (swapped < 0) {
		printf("sock bad: nothing swapped\n");
		return;
	}
	if (write(swapped_peer, msg, sizeof msg) != (ssize_t)sizeof msg) {
		printf("sock bad: write %s\n", strerror(errno));
		return;
	}
	ssize_t r = read(swapped, got, sizeof got);
	if (r != (ssize_t)sizeof msg || memcmp(got, msg, sizeof msg)) {
		printf("sock bad: read at %d: %zd %s\n", swapped, r,
		       r < 0 ? strerror(errno) : "");
		return;
	}
	printf("sock ok %d\n", swapped);
}

int main(void)
{
	char line[4096], arg[4096];
	long n;

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	while (fgets(line, sizeof line, stdin)) {
		if (!strncmp(line, "closefd ", 8)) {
			n = strtol(line + 8, NULL, 10);
			/* The system call itself, as close_range is: under
			 * ThreadSanitizer, close() of a descriptor another
			 * thread made is a report, and this host's point is
			 * doing just that. */
			printf("closed %ld %ld\n", n, syscall(SYS_close, n));
		} else if (!strncmp(line, "close", 5)) {
			close_all();
			printf("closed\n");
		} else if (sscanf(line, "reuse %4095s %ld", arg, &n) == 2) {
			long at = -1;
			if (sscanf(line, "reuse %*s %*d %ld", &at) != 1)
				at = -1;
			reuse(arg, (int)n, (int)at);
		} else if (!strncmp(line, "check", 5)) {
			check();
		} else if (sscanf(line, "alloc %ld", &n) == 1) {
			alloc(n);
		} else if (sscanf(line, "spin %ld", &n) == 1) {
			spin((double)n);
		} else if (!strncmp(line, "losenext", 8)) {
			atomic_store(&lose_next, 1);
			printf("armed\n");
		} else if (!strncmp(line, "swapnext", 8)) {
			atomic_store(&swap_next, 1);
			printf("armed\n");
		} else if (!strncmp(line, "sockcheck", 9)) {
			sockcheck();
		} else if (!strncmp(line, "exit", 4)) {
			return 0;
		} else {
			printf("unknown command\n");
		}
	}
	return 0;
}

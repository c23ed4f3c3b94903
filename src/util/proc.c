/* Facts about this process (/proc/self) and its sockets.
 * Context: agent.
 */
#define _GNU_SOURCE 1
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fds.h"
#include "util/seccomp.h"

int pp_proc_read_file(const char *path, size_t max, char **out, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *buf;
	int fd = pp_fds_open(path, O_RDONLY);

	if (fd < 0)
		return -errno;
	buf = malloc(cap + 1);
	if (!buf) {
		pp_fds_close(fd);
		return -ENOMEM;
	}
	for (;;) {
		if (n == cap) {
			if (cap >= max)
				break;
			size_t ncap = cap * 2 > max ? max : cap * 2;
			char *nb = realloc(buf, ncap + 1);
			if (!nb) {
				free(buf);
				pp_fds_close(fd);
				return -ENOMEM;
			}
			buf = nb;
			cap = ncap;
		}
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			int e = -errno;
			free(buf);
			pp_fds_close(fd);
			return e;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	pp_fds_close(fd);
	buf[n] = 0;
	*out = buf;
	*len = n;
	return 0;
}

/* A fingerprint of the arguments the process started with (FNV-1a over
 * each argument and its NUL, the bytes /proc/self/cmdline holds until the
 * process writes over them), taken by the constructor below; 0: unknown. */
static uint64_t start_hash;

static uint64_t fnv1a(uint64_t h, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

#define FNV_BASIS 0xcbf29ce484222325ull

#ifdef __GLIBC__
/* glibc hands main's arguments to every constructor: of the program, of the
 * libraries loaded with it or preloaded, and of those dlopen'ed later
 * (after which the program may already have changed them: the hash then
 * differs from the file, and the title rule applies, as it should). */
/* Before any other constructor of this library (the autostart one starts
 * the HTTP thread, which reads start_hash): 102, after the lock wrappers'
 * resolution (101), which must come first of all. */
__attribute__((constructor(102))) static void
note_arguments(int argc, char **argv, char **envp)
{
	(void)envp;
	if (argc <= 0 || !argv)
		return;
	uint64_t h = FNV_BASIS;
	for (int i = 0; i < argc && argv[i]; i++)
		h = fnv1a(h, argv[i], strlen(argv[i]) + 1);
	start_hash = h;
}
#endif

/* Strings in n bytes: each NUL ends one, and an unterminated tail is one
 * more (a title written over the last NUL of the argv area). */
static size_t count_strings(const char *buf, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		k += buf[i] == 0;
	return k + (n > 0 && buf[n - 1] != 0);
}

size_t pp_proc_cmdline_shape(const char *buf, size_t n, int as_started,
                             size_t *argc)
{
	if (!as_started) {
		/* procps' rule: trailing NULs are padding. */
		while (n > 0 && buf[n - 1] == 0)
			n--;
	}
	*argc = count_strings(buf, n);
	return n > 0 && buf[n - 1] == 0 ? n - 1 : n;
}

int pp_proc_cmdline(char **out, size_t *len, size_t *argc)
{
	size_t n;
	int rc = pp_proc_read_file("/proc/self/cmdline", 1 << 20, out, &n);
	if (rc)
		return rc;
	int as_started =
	    start_hash != 0 && fnv1a(FNV_BASIS, *out, n) == start_hash;
	*len = pp_proc_cmdline_shape(*out, n, as_started, argc);
	(*out)[*len] = 0;
	return 0;
}

char *pp_proc_exe(void)
{
	char path[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
	if (n < 0)
		return NULL;
	path[n] = 0;
	return strdup(path);
}

double pp_proc_start_time(void)
{
	char *stat;
	size_t len;
	unsigned long long start_ticks = 0;
	struct timespec boot, real;
	int rc;

	rc = pp_proc_read_file("/proc/self/stat", 4096, &stat, &len);
	if (rc)
		return rc;
	/* The command name may hold spaces and parentheses: skip to the last
	 * ')' and count fields from there (starttime is field 22). */
	char *p = strrchr(stat, ')');
	int field = 2;
	while (p && *p && field < 22) {
		p = strchr(p + 1, ' ');
		if (p)
			field++;
	}
	if (p)
		start_ticks = strtoull(p + 1, NULL, 10);
	free(stat);
	if (!p)
		return -EIO;

	/* starttime counts clock ticks since boot. /proc/stat's btime is
	 * whole seconds, so work back from the boot clock instead. */
	long hz = sysconf(_SC_CLK_TCK);
	clock_gettime(CLOCK_BOOTTIME, &boot);
	clock_gettime(CLOCK_REALTIME, &real);
	double since_boot = pp_timespec_seconds(&boot);
	double now = pp_timespec_seconds(&real);
	return now - since_boot +
	       (double)start_ticks / (double)(hz > 0 ? hz : 100);
}

int pp_fd_hung_up(int fd)
{
	struct pollfd pfd = {fd, POLLRDHUP, 0};
	return fd >= 0 && poll(&pfd, 1, 0) == 1 &&
	       (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

int pp_proc_copy_self(uintptr_t addr, void *out, size_t n)
{
	struct iovec local = {out, n};
	struct iovec remote = {(void *)addr, n};

	if (n == 0)
		return 0;
	if (addr + n < addr)
		return -EFAULT;
	if (pp_seccomp_vm_readv_forbidden())
		return -EPERM;
	ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
	if (got == (ssize_t)n)
		return 0;
	return got < 0 ? -errno : -EFAULT;
}

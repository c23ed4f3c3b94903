/* Facts about this process (/proc/self) and its sockets. Agent context. */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

int pp_proc_read_file(const char *path, size_t max, char **out, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *buf;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	buf = malloc(cap + 1);
	if (!buf) {
		close(fd);
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
				close(fd);
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
			close(fd);
			return e;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = 0;
	*out = buf;
	*len = n;
	return 0;
}

int pp_proc_cmdline(char **out, size_t *len)
{
	int rc = pp_proc_read_file("/proc/self/cmdline", 1 << 20, out, len);
	if (rc == 0 && *len > 0 && (*out)[*len - 1] == 0)
		(*len)--;
	return rc;
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

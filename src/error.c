/*
 * Messages for people: pullprof_strerror() and the one-line stderr log.
 * Agent context.
 */
#include "error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pullprof.h"

PULLPROF_API const char *pullprof_strerror(int err)
{
	switch (err) {
	case 0: return "success";
	case -EINVAL: return "invalid configuration or argument";
	case -EADDRINUSE: return "address already in use";
	case -EADDRNOTAVAIL: return "address not available on this host";
	case -EACCES:
		return "permission denied (ports below 1024 need privileges)";
	case -EALREADY: return "the agent is already running";
	case -EDEADLK: return "called from one of the agent's own threads";
	case -ENOMEM: return "out of memory";
	case -EAGAIN: return "resource temporarily unavailable";
	}
	if (err < 0) {
		const char *d = strerrordesc_np(-err);
		if (d)
			return d;
	}
	return "unknown error";
}

PULLPROF_API const char *pullprof_version(void)
{
	return PACKAGE_VERSION;
}

void pp_log(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n = snprintf(line, sizeof line, "pullprof[%d]: ", (int)getpid());

	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof line - 2)
		n = (int)sizeof line - 2;
	line[n++] = '\n';
	/* One write, so the line never interleaves with the host's output. */
	ssize_t w = write(STDERR_FILENO, line, (size_t)n);
	(void)w;
}

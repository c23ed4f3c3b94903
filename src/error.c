/*
 * Messages for people: pullprof_strerror() and the one-line stderr log.
 * Built into both objects (src/shim/shim.h): the light one, which says why
 * the agent could not be loaded, and the agent.
 * Context: agent.
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
	case -ECHILD:
		return "this process was made without fork() (_Fork() or a "
		       "raw clone) from one that runs the agent, whose "
		       "state it copied is not used";
	case -EDEADLK: return "called from one of the agent's own threads";
	case -ENOMEM: return "out of memory";
	case -EAGAIN: return "resource temporarily unavailable";
	/* What the capture functions return besides a write's errno. */
	case -ESRCH:
		return "the agent is not running (pullprof_start was not "
		       "called, failed, or pullprof_stop ran)";
	case -EBUSY:
		return "too many profiles at once (PULLPROF_MAX_CPU_WINDOWS, "
		       "PULLPROF_MAX_HEAP_PROFILES): try again later";
	case -ECANCELED:
		return "cancelled: the agent stopped before the profile was "
		       "ready";
	case -ENOTSUP:
		return "heap profiling is off in this process "
		       "(PULLPROF_HEAP_RATE=0): start it with a rate above 0";
	case -ESHUTDOWN: return "the agent is stopping";
	case -EMFILE:
		return "too many open files (EMFILE): the process is at its "
		       "descriptor limit (RLIMIT_NOFILE), or the agent holds "
		       "its share of it (/status descriptors); try again later";
	case -ENFILE:
		return "too many open files in the system (ENFILE); try again "
		       "later";
	case -EPROTONOSUPPORT:
		return "HTTPS was asked of a libmicrohttpd built without TLS";
	case -ENOSYS: return "the libmicrohttpd here was built without epoll";
	case -ELIBACC:
		return "the agent (libpullprof-agent.so, installed beside "
		       "libpullprof.so) could not be loaded: stderr says why";
	case -EEXIST:
		return "the process handles both signals pullprof can sample "
		       "with itself (SIGURG, and SIGPROF or ITIMER_PROF: "
		       "another profiler?), and pullprof replaces neither";
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

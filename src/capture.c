/*
 * Programmatic capture: pullprof_write_cpu_profile() and
 * pullprof_write_heap_profile(). Runs on the caller's (host's)
 * thread, as the agent's code does.
 *
 * The caller does what an HTTP request does: it opens a job of the CPU or
 * heap producer (profile/job.h) — under the lifecycle lock, so a concurrent
 * pullprof_stop() either cancels it or comes before it — sleeps until the
 * job pipeline calls back, takes the rendered profile and writes it to its
 * own descriptor itself. So a capture counts against the same limits as
 * HTTP, shares samples with the HTTP windows open at the same time, and
 * the blocking write happens on the caller's thread, never an agent's.
 * Context: agent.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "agent_threads.h"
#include "cpu/cpu.h"
#include "heap/heap.h"
#include "pullprof.h"
#include "shim/heap_hot.h"

/* The caller's wait for the agent's done callback. On the caller's stack:
 * the callback runs once per job (pp_job_done_fn), and the caller leaves only
 * after it has set `done` under the lock, after which the callback touches
 * nothing but the mutex's unlock (safe: POSIX lets a mutex be destroyed once
 * unlocked). */
struct waiter {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done;
};

#define WAITER_INIT                                                            \
	{                                                                      \
		PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0         \
	}

/* On an agent thread (the job pipeline's, or the one stopping the
 * agent): must not block. */
static void wake(void *arg)
{
	struct waiter *w = arg;
	pthread_mutex_lock(&w->mu);
	w->done = 1;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

static void wait_for(struct waiter *w)
{
	pthread_mutex_lock(&w->mu);
	while (!w->done)
		pthread_cond_wait(&w->cv, &w->mu);
	pthread_mutex_unlock(&w->mu);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
}

/* Open for writing? Checked before a window runs, so that a bad descriptor
 * does not cost the caller the whole window first. */
static int check_fd(int fd)
{
	int fl = fd < 0 ? -1 : fcntl(fd, F_GETFL);
	if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY || (fl & O_PATH))
		return -EBADF;
	return 0;
}

/*
 * Write all of p to fd on the calling thread: short writes and EINTR are
 * retried, a non-blocking descriptor is polled until it takes more. A
 * write to a pipe or socket whose reader is gone must not raise SIGPIPE
 * (its default action kills the host): sockets get send(MSG_NOSIGNAL);
 * for anything else SIGPIPE is blocked in this thread only, around the
 * writes, and the one our write raised is taken back with sigtimedwait()
 * before the old mask returns — unless one was already pending before we
 * started, which was the host's (signals of one number do not queue, so
 * ours merged into it) and stays.
 */
static int write_all(int fd, const char *p, size_t len)
{
	struct stat st;
	int sock = fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
	sigset_t pipe_set, old, pending;
	int was_pending = 0, rc = 0;

	if (!sock) {
		sigemptyset(&pipe_set);
		sigaddset(&pipe_set, SIGPIPE);
		sigpending(&pending);
		was_pending = sigismember(&pending, SIGPIPE) == 1;
		pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	}
	while (len > 0) {
		ssize_t n =
		    sock ? send(fd, p, len, MSG_NOSIGNAL) : write(fd, p, len);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0) {
			rc = -EIO; /* no progress and no reason: give up */
			break;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			struct pollfd pfd = {fd, POLLOUT, 0};
			if (poll(&pfd, 1, -1) < 0 && errno != EINTR) {
				rc = -errno;
				break;
			}
			continue;
		}
		rc = -errno;
		break;
	}
	if (!sock) {
		if (rc == -EPIPE && !was_pending) {
			const struct timespec zero = {0, 0};
			while (sigtimedwait(&pipe_set, NULL, &zero) < 0 &&
			       errno == EINTR)
				;
		}
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	return rc;
}

/* The render options of a /profile or /heap answer without parameters:
 * gzipped pprof. */
static const struct pp_render_opts pprof_opts = {
    .format = PP_FORMAT_PPROF, .sample_index = -1, .top = 50, .gzip = 0};

struct capture {
	struct pp_job_request rq;
	struct pp_job *job;
	/* The kind's checks against the running agent's settings, under the
	 * lifecycle lock (NULL: none). */
	int (*bounds)(const struct pp_agent *a, struct capture *c);
	struct pp_cpu_query cpu;   /* the CPU kind's query */
	struct pp_heap_query heap; /* the heap kind's */
};

/* Under the lifecycle lock: the bounds come from the running agent, and a
 * stop either comes before the open or cancels the job. */
static int open_job(const struct pp_agent *a, void *arg)
{
	struct capture *c = arg;
	unsigned retry = 0;
	char err[300];

	int rc = c->bounds ? c->bounds(a, c) : 0;
	if (rc)
		return rc;
	rc = pp_job_open(&c->rq, &c->job, &retry, err, sizeof err);
	/* -ESHUTDOWN (the pipeline stopping) cannot happen under the lock;
	 * were it to, the agent is going away: cancelled. */
	return rc == -ESHUTDOWN ? -ECANCELED : rc;
}

/* Open the job, wait for it, write its profile to fd. */
static int capture(int fd, struct capture *c)
{
	struct waiter waiter = WAITER_INIT;
	char *body = NULL;
	size_t len = 0;
	uint64_t id;

	if (pp_on_agent_thread())
		return -EDEADLK;
	int rc = check_fd(fd);
	if (rc)
		return rc;
	c->rq.render = pprof_opts;
	c->rq.client_fd = -1;
	c->rq.done = wake;
	c->rq.arg = &waiter;
	/* The job and its profile are the agent's memory, not the caller's. */
	int hidden = pp_heap_hide();
	rc = pp_agent_locked(open_job, c);
	if (rc) {
		pp_heap_unhide(hidden);
		return rc;
	}
	wait_for(&waiter);
	rc = pp_job_take(c->job, &body, &len, &id);
	pp_job_release(c->job);
	pp_heap_unhide(hidden);
	if (rc == 0)
		rc = write_all(fd, body, len);
	free(body);
	return rc;
}

/* PULLPROF_MAX_SECONDS, and PULLPROF_CPU_HZ for hz 0. */
static int cpu_bounds(const struct pp_agent *a, struct capture *c)
{
	if (c->cpu.seconds > a->cfg.v.max_seconds)
		return -EINVAL;
	if (c->cpu.hz == 0)
		c->cpu.hz = a->cfg.v.cpu_hz;
	return 0;
}

static int cpu_capture(int fd, unsigned seconds, unsigned hz)
{
	struct capture c = {
	    .rq = {.producer = &pp_cpu_producer, .seconds = seconds},
	    .bounds = cpu_bounds,
	    .cpu = {.seconds = seconds, .hz = hz},
	};

	if (seconds == 0 || hz > 1000)
		return -EINVAL;
	c.rq.query = &c.cpu;
	return capture(fd, &c);
}

/* Where the profile comes from, as for /heap: none is -ENOTSUP. */
static int heap_bounds(const struct pp_agent *a, struct capture *c)
{
	char err[1200];
	(void)a;
	return pp_heap_resolve(&c->heap, 0, err, sizeof err) ? -ENOTSUP : 0;
}

static int heap_capture(int fd, int kind)
{
	struct capture c = {
	    .rq = {.producer = &pp_heap_producer},
	    .bounds = heap_bounds,
	    .heap = {.view = kind == PULLPROF_HEAP_ALLOCS ? PP_HEAP_ALLOCS
	                                                  : PP_HEAP_INUSE},
	};

	if (kind != PULLPROF_HEAP_INUSE && kind != PULLPROF_HEAP_ALLOCS)
		return -EINVAL;
	c.rq.query = &c.heap;
	return capture(fd, &c);
}

/* ---- the API ------------------------------------------------------------ */

/* Neither call is a cancellation point: a pthread_cancel() of the caller
 * while the agent holds a pointer to its stack (the waiter) would leave
 * the callback writing into a dead frame. Cancellation is held off for the
 * call and acts at the caller's next cancellation point. */

PULLPROF_API int pullprof_write_cpu_profile(int fd, unsigned seconds,
                                            unsigned hz)
{
	int state;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &state);
	int rc = cpu_capture(fd, seconds, hz);
	pthread_setcancelstate(state, NULL);
	return rc;
}

PULLPROF_API int pullprof_write_heap_profile(int fd, int kind)
{
	int state;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &state);
	int rc = heap_capture(fd, kind);
	pthread_setcancelstate(state, NULL);
	return rc;
}

/* Looking at threads without a signal (look.h).
 * Context: agent.
 */
#define _GNU_SOURCE 1
#include "threads/look.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "arch/arch.h"
#include "unwind/frames_mem.h"
#include "unwind/unwind.h"
#include "util/clock.h"
#include "util/fds.h"
#include "util/seccomp.h"

/* The stack copy a walk reads: the top 8 KiB come with a perf sample, the
 * rest is read as the walk climbs (callers' frames change least). */
#define STACK_COPY (512u << 10)
#define SAMPLE_STACK 8192u
#define RING_PAGES 4u /* data pages: two samples' worth */
#define MOVES 3

struct event {
	pid_t tid; /* 0: free */
	int fd;
	/* The event's file: a host that closes descriptors it did not open
	 * (closefrom) may have the number for a file of its own, which is
	 * then neither touched nor closed (util/fds.h; a perf event is an
	 * anonymous inode, so only another kind of file is told apart). */
	struct pp_fd_id id;
	unsigned char *ring;
	uint64_t used; /* looker's clock of the last use (LRU) */
	int pending;   /* index into the batch's looks, or -1 */
};

struct pp_looker {
	unsigned max_depth;
	unsigned max_events;
	struct event *events;
	uint64_t clock;
	unsigned char *stack;  /* STACK_COPY */
	unsigned char *record; /* one sample, unwrapped */
	size_t page;
};

static struct {
	_Atomic uint64_t blocked, running, self, gone, not_caught, moved,
	    no_perf, incomplete, denied, seccomp;
	_Atomic int perf_errno;
	_Atomic int kernel; /* 1: exclude_kernel 0 works; -1: refused */
} stats;

void pp_look_stats(struct pp_look_stats *o)
{
	o->blocked = atomic_load(&stats.blocked);
	o->running = atomic_load(&stats.running);
	o->self = atomic_load(&stats.self);
	o->gone = atomic_load(&stats.gone);
	o->not_caught = atomic_load(&stats.not_caught);
	o->moved = atomic_load(&stats.moved);
	o->no_perf = atomic_load(&stats.no_perf);
	o->denied = atomic_load(&stats.denied);
	o->seccomp = atomic_load(&stats.seccomp);
	o->walk_incomplete = atomic_load(&stats.incomplete);
	o->perf_errno = atomic_load(&stats.perf_errno);
	o->perf_kernel = atomic_load(&stats.kernel) == 1;
}

struct pp_looker *pp_looker_new(unsigned max_depth, unsigned max_events)
{
	struct pp_looker *lk = calloc(1, sizeof *lk);
	if (!lk)
		return NULL;
	lk->max_depth = max_depth;
	lk->max_events = max_events;
	lk->page = (size_t)sysconf(_SC_PAGESIZE);
	lk->events = calloc(max_events ? max_events : 1, sizeof *lk->events);
	lk->stack = malloc(STACK_COPY);
	lk->record = malloc(RING_PAGES * lk->page);
	if (!lk->events || !lk->stack || !lk->record) {
		pp_looker_free(lk);
		return NULL;
	}
	return lk;
}

static void event_close(struct pp_looker *lk, struct event *e)
{
	if (!e->tid)
		return;
	munmap(e->ring, (1 + RING_PAGES) * lk->page);
	if (pp_fd_id_ours(&e->id))
		pp_fds_close(e->fd);
	else
		pp_fds_release(); /* closed by the host */
	e->tid = 0;
}

void pp_looker_free(struct pp_looker *lk)
{
	if (!lk)
		return;
	for (unsigned i = 0; lk->events && i < lk->max_events; i++)
		event_close(lk, &lk->events[i]);
	free(lk->events);
	free(lk->stack);
	free(lk->record);
	free(lk);
}

/* A /proc file of the thread refused (not: the thread is gone). A process
 * that stopped being dumpable (setuid, setgid, PR_SET_DUMPABLE 0) has its
 * /proc files owned by root, and the mode-0400 ones (syscall) are root's
 * alone: the kernel's same-process ptrace check would pass, the file's
 * permission bits do not. */
static int refused(int rc)
{
	return rc == -EACCES || rc == -EPERM;
}

static void no_look(struct pp_look *l, enum pp_look_miss why)
{
	l->how = PP_LOOK_NONE;
	l->miss = why;
	l->depth = 0;
	atomic_fetch_add(why == PP_MISS_DENIED ? &stats.denied : &stats.gone,
	                 1);
}

/* ---- walking ------------------------------------------------------------ */

static void walk(struct pp_looker *lk, struct pp_look *l,
                 const struct pp_arch_regs *r, int regs_known, const void *top,
                 size_t toplen)
{
	struct pp_frames_mem m = {.base = r->sp,
	                          .buf = lk->stack,
	                          .cap = STACK_COPY,
	                          .live = 1,
	                          .reads = 64};
	if (toplen) {
		memcpy(lk->stack, top, toplen);
		m.len = toplen;
	}
	l->depth = (unsigned)pp_frames_walk_mem(&m, r, regs_known, l->pcs,
	                                        lk->max_depth, &l->why);
	if (l->why == PP_UNWIND_FAILED || l->why == PP_UNWIND_NO_TABLE)
		atomic_fetch_add(&stats.incomplete, 1);
}

/* The looking thread's own stack, from here. */
static __attribute__((noinline)) void look_self(struct pp_looker *lk,
                                                struct pp_look *l)
{
	struct pp_arch_regs here;
	pp_arch_here(&here);
	l->call.nr = PP_TASK_RUNNING;
	l->how = PP_LOOK_SELF;
	walk(lk, l, &here, 1, NULL, 0);
	atomic_fetch_add(&stats.self, 1);
}

/* A thread off the CPU: walk from the registers its call left, then make
 * sure it did not move meanwhile. 0, or 1 when it is running now (the
 * caller samples it). */
static int look_blocked(struct pp_looker *lk, struct pp_look *l)
{
	for (int round = 0; round < MOVES; round++) {
		if (l->call.nr == PP_TASK_RUNNING)
			return 1;
		struct pp_arch_regs r = {.pc = l->call.pc, .sp = l->call.sp};
		walk(lk, l, &r, 0, NULL, 0);
		struct pp_task_call again;
		int rc = pp_task_call(l->tid, &again);
		if (rc) {
			no_look(l, refused(rc) ? PP_MISS_DENIED : PP_MISS_GONE);
			return 0;
		}
		if (pp_task_call_same(&l->call, &again)) {
			l->how = PP_LOOK_BLOCKED;
			atomic_fetch_add(&stats.blocked, 1);
			return 0;
		}
		l->call = again;
	}
	l->how = PP_LOOK_NONE;
	l->miss = PP_MISS_MOVED;
	l->depth = 0;
	atomic_fetch_add(&stats.moved, 1);
	return 0;
}

/* ---- perf_event samples of running threads ------------------------------ */

static int perf_open(pid_t tid, int exclude_kernel)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof a);
	a.size = sizeof a;
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_TASK_CLOCK;
	/* The kernel's shortest period of a clock event: the first 10 us
	 * the thread spends on a CPU after the refresh. */
	a.sample_period = 10000;
	a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
	                PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
	a.sample_regs_user = PP_ARCH_PERF_REGS;
	a.sample_stack_user = SAMPLE_STACK;
	a.disabled = 1;
	a.wakeup_events = 1;
	a.exclude_kernel = (unsigned)exclude_kernel;
	a.exclude_hv = 1;
	a.use_clockid = 1;
	a.clockid = CLOCK_MONOTONIC;
	return (int)syscall(SYS_perf_event_open, &a, tid, -1, -1,
	                    PERF_FLAG_FD_CLOEXEC);
}

/* The event of tid, opened when new (the least recently used one closed
 * when all are taken); NULL when perf cannot be used. */
static struct event *event_of(struct pp_looker *lk, pid_t tid)
{
	struct event *free_one = NULL, *oldest = NULL;
	for (unsigned i = 0; i < lk->max_events; i++) {
		struct event *e = &lk->events[i];
		if (e->tid == tid && !pp_fd_id_ours(&e->id))
			event_close(lk, e); /* opened again below */
		if (e->tid == tid)
			return e;
		if (!e->tid && !free_one)
			free_one = e;
		if (e->tid && e->pending < 0 &&
		    (!oldest || e->used < oldest->used))
			oldest = e;
	}
	if (atomic_load(&stats.perf_errno))
		return NULL;
	if (!free_one) {
		if (!oldest)
			return NULL;
		event_close(lk, oldest);
		free_one = oldest;
	}
	/* Samples taken while the thread is in the kernel still carry its
	 * user registers; where that is not allowed, user time only. */
	int fd = -1;
	/* Within the agent's share of descriptors (util/fds.h): a thread
	 * over it is shown without its stack, as when perf is busy. */
	if (pp_fds_reserve_spare())
		return NULL;
	if (atomic_load(&stats.kernel) >= 0) {
		fd = perf_open(tid, 0);
		if (fd >= 0)
			atomic_store(&stats.kernel, 1);
		else if (errno == EACCES || errno == EPERM)
			atomic_store(&stats.kernel, -1);
	}
	if (fd < 0 && atomic_load(&stats.kernel) < 0)
		fd = perf_open(tid, 1);
	if (fd < 0) {
		/* ESRCH: that thread ended; anything else: perf is not
		 * for us here (paranoid level, seccomp, no kernel support). */
		if (errno != ESRCH && errno != EMFILE && errno != ENFILE)
			atomic_store(&stats.perf_errno, errno);
		pp_fds_note_error(errno);
		pp_fds_release();
		return NULL;
	}
	if ((fd = pp_fd_move_high(fd)) < 0) {
		pp_fds_release();
		return NULL;
	}
	void *ring = mmap(NULL, (1 + RING_PAGES) * lk->page,
	                  PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (ring == MAP_FAILED) {
		pp_fds_close(fd);
		return NULL;
	}
	free_one->tid = tid;
	free_one->fd = fd;
	pp_fd_id_take(fd, &free_one->id);
	free_one->ring = ring;
	free_one->pending = -1;
	return free_one;
}

/* Drop what the ring holds (stale samples). */
static void ring_drain(struct event *e)
{
	struct perf_event_mmap_page *mp = (void *)e->ring;
	uint64_t head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE);
	__atomic_store_n(&mp->data_tail, head, __ATOMIC_RELEASE);
}

static void ring_copy(struct pp_looker *lk, struct event *e, uint64_t at,
                      void *out, size_t n)
{
	size_t size = RING_PAGES * lk->page;
	const unsigned char *data = e->ring + lk->page;
	size_t off = (size_t)(at % size);
	size_t first = n < size - off ? n : size - off;
	memcpy(out, data + off, first);
	memcpy((unsigned char *)out + first, data, n - first);
}

/* The newest sample in e's ring taken at or after since: walk it. 1 when
 * one was found. */
static int take_sample(struct pp_looker *lk, struct event *e, struct pp_look *l,
                       uint64_t since)
{
	struct perf_event_mmap_page *mp = (void *)e->ring;
	uint64_t head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = mp->data_tail;
	size_t size = RING_PAGES * lk->page;
	int found = 0;

	/* Copy out each sample: the last one copied is the newest. */
	while (tail < head) {
		struct perf_event_header h;
		ring_copy(lk, e, tail, &h, sizeof h);
		if (h.size < sizeof h || h.size > size)
			break;
		if (h.type == PERF_RECORD_SAMPLE) {
			ring_copy(lk, e, tail, lk->record, h.size);
			found = 1;
		}
		tail += h.size;
	}
	__atomic_store_n(&mp->data_tail, head, __ATOMIC_RELEASE);
	if (!found)
		return 0;
	/* tid, pid | time | abi, regs[PP_ARCH_PERF_NREGS] | size,
	 * stack[size], dyn_size */
	const unsigned char *p = lk->record + sizeof(struct perf_event_header);
	const unsigned char *end =
	    lk->record + ((struct perf_event_header *)lk->record)->size;
	uint64_t time, abi, regs[PP_ARCH_PERF_NREGS], ssize, dyn = 0;
	p += 8;
	memcpy(&time, p, 8);
	p += 8;
	memcpy(&abi, p, 8);
	p += 8;
	if (time < since || abi == PERF_SAMPLE_REGS_ABI_NONE ||
	    p + sizeof regs + 8 > end)
		return 0;
	memcpy(regs, p, sizeof regs);
	p += sizeof regs;
	memcpy(&ssize, p, 8);
	p += 8;
	if (ssize > (uint64_t)(end - p))
		return 0;
	const unsigned char *stack = p;
	if (ssize && p + ssize + 8 <= end)
		memcpy(&dyn, p + ssize, 8);
	if (dyn > ssize)
		dyn = ssize;
	l->call.nr = PP_TASK_RUNNING;
	l->how = PP_LOOK_RUNNING;
	struct pp_arch_regs r;
	pp_arch_regs_of_perf(regs, &r);
	walk(lk, l, &r, 1, stack, (size_t)dyn);
	atomic_fetch_add(&stats.running, 1);
	return 1;
}

static void miss(struct pp_look *l, enum pp_look_miss why)
{
	l->how = PP_LOOK_NONE;
	l->miss = why;
	l->depth = 0;
	atomic_fetch_add(why == PP_MISS_SECCOMP   ? &stats.seccomp
	                 : why == PP_MISS_NO_PERF ? &stats.no_perf
	                                          : &stats.not_caught,
	                 1);
}

/* Sample the running threads of looks (marked pending in their events),
 * at most lk->max_events at a time. */
static void sample_running(struct pp_looker *lk, struct pp_look *looks,
                           size_t n, const int *running, unsigned wait_ms)
{
	size_t next = 0;
	/* A filter that kills for perf_event_open (systemd's @system-service
	 * leaves it out: it is in @debug) would kill the host at the first
	 * open: asked first, every dump and wall tick (a filter may come
	 * later; util/seccomp.h). */
	if (!pp_seccomp_allowed(PP_SC_PERF_EVENT_OPEN)) {
		for (size_t i = 0; i < n; i++)
			if (running[i])
				miss(&looks[i], PP_MISS_SECCOMP);
		return;
	}
	struct pollfd *pf =
	    calloc(lk->max_events ? lk->max_events : 1, sizeof *pf);
	struct event **ev =
	    calloc(lk->max_events ? lk->max_events : 1, sizeof *ev);
	if (!pf || !ev) {
		for (size_t i = 0; i < n; i++)
			if (running[i])
				miss(&looks[i], PP_MISS_NOT_CAUGHT);
		free(pf);
		free(ev);
		return;
	}
	for (;;) {
		/* A batch: refresh each thread's event. */
		unsigned k = 0;
		uint64_t since = pp_clock_ns(CLOCK_MONOTONIC);
		while (next < n && k < lk->max_events) {
			size_t i = next++;
			if (!running[i])
				continue;
			struct event *e = event_of(lk, looks[i].tid);
			if (!e) {
				miss(&looks[i], atomic_load(&stats.perf_errno)
				                    ? PP_MISS_NO_PERF
				                    : PP_MISS_NOT_CAUGHT);
				continue;
			}
			e->used = ++lk->clock;
			e->pending = (int)i;
			ring_drain(e);
			ioctl(e->fd, PERF_EVENT_IOC_RESET, 0);
			ioctl(e->fd, PERF_EVENT_IOC_REFRESH, 1);
			ev[k] = e;
			pf[k] = (struct pollfd){.fd = e->fd, .events = POLLIN};
			k++;
		}
		if (!k && next >= n)
			break;
		uint64_t deadline = since + (uint64_t)wait_ms * 1000000u;
		unsigned left = k;
		while (left) {
			uint64_t now = pp_clock_ns(CLOCK_MONOTONIC);
			int slice = now >= deadline ? 0 : 2;
			int r = poll(pf, k, slice);
			for (unsigned j = 0; j < k; j++) {
				struct event *e = ev[j];
				if (e->pending < 0)
					continue;
				struct pp_look *l = &looks[e->pending];
				int done = 0;
				short ev_bits = r > 0 ? pf[j].revents : 0;
				if (ev_bits & POLLIN)
					done = take_sample(lk, e, l, since);
				/* No sample this slice, or the event hung up
				 * (the thread ended): where is the thread now?
				 */
				if (!done &&
				    (r <= 0 ||
				     (ev_bits & (POLLHUP | POLLERR)))) {
					/* Off the CPU now? Then it is read
					 * from outside. */
					struct pp_task_call c;
					int rc = pp_task_call(l->tid, &c);
					if (refused(rc)) {
						/* Where it is cannot be read:
						 * wait for a sample until the
						 * deadline. */
						if (now >= deadline ||
						    (ev_bits &
						     (POLLHUP | POLLERR))) {
							no_look(l,
							        PP_MISS_DENIED);
							done = 1;
						}
					} else if (rc) {
						no_look(l, PP_MISS_GONE);
						done = 1;
					} else if (c.nr != PP_TASK_RUNNING) {
						l->call = c;
						if (look_blocked(lk, l))
							continue;
						done = 1;
					} else if (now >= deadline ||
					           (ev_bits &
					            (POLLHUP | POLLERR))) {
						miss(l, PP_MISS_NOT_CAUGHT);
						done = 1;
					}
				}
				if (done) {
					if (pp_fd_id_ours(&e->id))
						ioctl(e->fd,
						      PERF_EVENT_IOC_DISABLE,
						      0);
					e->pending = -1;
					pf[j].fd = -1;
					left--;
				}
			}
		}
	}
	free(pf);
	free(ev);
}

void pp_look_threads(struct pp_looker *lk, struct pp_look *looks, size_t n,
                     unsigned wait_ms)
{
	pid_t self = (pid_t)syscall(SYS_gettid);
	int *running = calloc(n ? n : 1, sizeof *running);
	size_t nrunning = 0;

	for (size_t i = 0; i < n; i++) {
		struct pp_look *l = &looks[i];
		l->how = PP_LOOK_NONE;
		l->miss = PP_MISS_NONE;
		l->depth = 0;
		l->why = PP_UNWIND_OK;
		/* A thread refused is still shown: no stale name or state. */
		memset(&l->st, 0, sizeof l->st);
		int rc = pp_task_stat(l->tid, &l->st);
		if (rc) {
			no_look(l, refused(rc) ? PP_MISS_DENIED : PP_MISS_GONE);
			continue;
		}
		if (l->tid == self) {
			look_self(lk, l);
			continue;
		}
		rc = pp_task_call(l->tid, &l->call);
		if (refused(rc) && l->st.state != 'R') {
			/* Off the CPU, and where it stopped cannot be read. */
			no_look(l, PP_MISS_DENIED);
			continue;
		}
		if (refused(rc)) {
			/* Running: perf_event may still sample it (its
			 * check is the same-process one, which passes). */
			l->call.nr = PP_TASK_RUNNING;
		} else if (rc) {
			no_look(l, PP_MISS_GONE);
			continue;
		}
		if (look_blocked(lk, l)) {
			if (running) {
				running[i] = 1;
				nrunning++;
			} else {
				miss(l, PP_MISS_NOT_CAUGHT);
			}
		}
	}
	if (nrunning)
		sample_running(lk, looks, n, running, wait_ms);
	free(running);
}

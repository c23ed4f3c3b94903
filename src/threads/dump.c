/*
 * The thread dump, /goroutine: every thread of the process with its stack,
 * read without stopping or signalling any (look.h). A `make` producer: the
 * dump is taken on the pipeline's thread when the job is due; with
 * ?seconds=N the first one is taken at the open and the answer is the
 * change (as Go's delta profiles). Also what both producers of this module
 * share (internal.h).
 * Context: agent.
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent_threads.h"
#include "profile/counts.h"
#include "threads/internal.h"
#include "unwind/unwind.h"
#include "util/clock.h"
#include "util/seccomp.h"

struct pp_threads_settings pp_threads_cfg = {
    .max_depth = 64, .max_dumps = 4, .max_wall = 2, .wall_threads = 16};
_Atomic uint64_t pp_threads_dumps, pp_threads_wall_ticks,
    pp_threads_wall_samples, pp_threads_wall_late;

static pthread_mutex_t unwind_mu = PTHREAD_MUTEX_INITIALIZER;
static int unwind_ready;

int pp_threads_unwind_ready(char *err, size_t errlen)
{
	int rc = 0;
	pthread_mutex_lock(&unwind_mu);
	if (!unwind_ready) {
		rc = pp_unwind_init();
		if (rc)
			snprintf(err, errlen, "cannot set up stack unwinding");
		else
			unwind_ready = 1;
	}
	pthread_mutex_unlock(&unwind_mu);
	if (!rc)
		pp_unwind_refresh(); /* cheap when nothing was loaded */
	return rc;
}

void pp_threads_unwind_release(void)
{
	pthread_mutex_lock(&unwind_mu);
	if (unwind_ready) {
		pp_unwind_shutdown();
		unwind_ready = 0;
	}
	pthread_mutex_unlock(&unwind_mu);
}

void pp_threads_unwind_forget_in_child(void)
{
	/* A thread of the parent may have held it at fork time. */
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	memcpy(&unwind_mu, &fresh, sizeof fresh);
}

void pp_threads_configure(const struct pp_threads_settings *s)
{
	pp_threads_cfg = *s;
	pp_dump_producer.max_open = s->max_dumps;
	pp_threadcreate_producer.max_open = s->max_dumps;
	pp_wall_producer.max_open = s->max_wall;
}

const char *pp_threads_state(const struct pp_look *l)
{
	switch (l->how) {
	case PP_LOOK_RUNNING:
	case PP_LOOK_SELF: return "running";
	case PP_LOOK_BLOCKED:
		/* Woken between the two reads: it was asleep in the call. */
		return l->st.state == 'R' ? "sleeping"
		                          : pp_task_state_name(l->st.state);
	default:
		return l->miss == PP_MISS_NO_PERF ||
		               l->miss == PP_MISS_SECCOMP ||
		               l->miss == PP_MISS_NOT_CAUGHT
		           ? "running"
		           : pp_task_state_name(l->st.state);
	}
}

static const char *miss_frame(enum pp_look_miss m)
{
	switch (m) {
	case PP_MISS_NO_PERF:
		return "[pullprof: running; its stack needs perf_event_open, "
		       "see kernel.perf_event_paranoid and seccomp]";
	case PP_MISS_SECCOMP:
		return "[pullprof: running; its stack needs perf_event_open, "
		       "which a seccomp filter kills the process for]";
	case PP_MISS_NOT_CAUGHT:
		return "[pullprof: running; not on a CPU long enough to be "
		       "sampled in time]";
	case PP_MISS_MOVED:
		return "[pullprof: kept moving while its stack was read]";
	case PP_MISS_DENIED:
		return "[pullprof: stack not readable: /proc/self/task/TID/"
		       "syscall is root's since the process stopped being "
		       "dumpable (setuid/setgid or PR_SET_DUMPABLE 0)]";
	default: return "[pullprof: stack not captured]";
	}
}

static const char *how_text(const struct pp_look *l)
{
	switch (l->how) {
	case PP_LOOK_BLOCKED: return "read while blocked (not interrupted)";
	case PP_LOOK_RUNNING: return "sampled running by perf_event";
	case PP_LOOK_SELF: return "the dumping thread itself";
	default: return miss_frame(l->miss);
	}
}

static void call_text(const struct pp_look *l, char *out, size_t len)
{
	const struct pp_task_call *c = &l->call;
	out[0] = 0;
	if (l->how != PP_LOOK_BLOCKED)
		return;
	if (c->nr == PP_TASK_NOT_IN_CALL) {
		snprintf(out, len, "no system call (a fault or a stop)");
		return;
	}
	const char *name = pp_task_syscall_name(c->nr);
	char num[32];
	if (!name) {
		snprintf(num, sizeof num, "syscall_%ld", c->nr);
		name = num;
	}
	snprintf(out, len,
	         "%s(0x%" PRIx64 ", 0x%" PRIx64 ", 0x%" PRIx64 ", 0x%" PRIx64
	         ")",
	         name, c->args[0], c->args[1], c->args[2], c->args[3]);
}

int pp_threads_add(struct pp_profile *p, const struct pp_look *l,
                   const int64_t *values, int detail, uint64_t time_ns)
{
	uintptr_t extra[1];
	const uintptr_t *pcs = l->pcs;
	size_t depth = l->depth;
	const char *tail = NULL;

	if (l->how == PP_LOOK_NONE && l->miss == PP_MISS_GONE)
		return 0;
	if (l->how == PP_LOOK_NONE)
		tail = miss_frame(l->miss);
	else if (l->why == PP_UNWIND_TRUNCATED)
		tail = "[pullprof: stack truncated]";
	else if (l->why == PP_UNWIND_FAILED || l->why == PP_UNWIND_NO_TABLE)
		tail = "[pullprof: stack walk stopped here]";
	else if (!depth)
		tail = "[pullprof: stack not captured]";
	uintptr_t *all = NULL;
	if (tail) {
		extra[0] = pp_profile_synthetic_pc(p, tail);
		if (!depth) {
			pcs = extra;
			depth = extra[0] ? 1 : 0;
		} else if (extra[0]) {
			all = malloc((depth + 1) * sizeof *all);
			if (!all)
				return -ENOMEM;
			memcpy(all, l->pcs, depth * sizeof *all);
			all[depth++] = extra[0];
			pcs = all;
		}
	}
	struct pp_label labels[10];
	size_t n = 0;
	char call[160], wchan[64];
	labels[n++] =
	    (struct pp_label){.key = "thread_name", .str = l->st.name};
	labels[n++] =
	    (struct pp_label){.key = "state", .str = pp_threads_state(l)};
	if (pp_agent_thread_is(l->tid))
		labels[n++] =
		    (struct pp_label){.key = "agent", .str = "pullprof"};
	if (detail) {
		call_text(l, call, sizeof call);
		pp_task_wchan(l->tid, wchan, sizeof wchan);
		labels[n++] = (struct pp_label){.key = "tid", .num = l->tid};
		if (call[0])
			labels[n++] =
			    (struct pp_label){.key = "call", .str = call};
		if (wchan[0])
			labels[n++] =
			    (struct pp_label){.key = "wchan", .str = wchan};
		labels[n++] = (struct pp_label){.key = "cpu_user",
		                                .num = (int64_t)l->st.utime_ns,
		                                .unit = "nanoseconds"};
		labels[n++] = (struct pp_label){.key = "cpu_system",
		                                .num = (int64_t)l->st.stime_ns,
		                                .unit = "nanoseconds"};
		labels[n++] =
		    (struct pp_label){.key = "stack", .str = how_text(l)};
	}
	int rc = pp_profile_add_at(p, pcs, depth, values, labels, n, time_ns,
	                           (uint32_t)l->tid);
	free(all);
	return rc;
}

int pp_threads_note_denied(struct pp_profile *p, uint64_t denied,
                           uint64_t looks)
{
	char note[400];
	if (!denied)
		return 0;
	snprintf(note, sizeof note,
	         "pullprof: %llu of %llu thread looks could not read where the "
	         "thread stopped: /proc/self/task/TID/syscall is readable by "
	         "root only since the process stopped being dumpable (it "
	         "changed its uid or gid, or set PR_SET_DUMPABLE 0); those "
	         "threads are shown with their name and state under a "
	         "synthetic frame that says so, running threads are still "
	         "sampled with perf_event",
	         (unsigned long long)denied, (unsigned long long)looks);
	return pp_profile_add_comment(p, note);
}

int pp_threads_note_seccomp(struct pp_profile *p, uint64_t seccomp,
                            uint64_t looks)
{
	char note[600], why[300];
	int rc = 0;
	if (seccomp) {
		pp_seccomp_reason(PP_SC_PERF_EVENT_OPEN, why, sizeof why);
		snprintf(note, sizeof note,
		         "pullprof: %llu of %llu threads were running and are "
		         "shown without a stack: %s (running threads are "
		         "sampled with perf_event_open)",
		         (unsigned long long)seccomp, (unsigned long long)looks,
		         why);
		rc = pp_profile_add_comment(p, note);
	}
	if (!rc && pp_seccomp_vm_readv_forbidden()) {
		pp_seccomp_reason(PP_SC_PROCESS_VM_READV, why, sizeof why);
		snprintf(
		    note, sizeof note,
		    "pullprof: the stacks of threads off the CPU end at the "
		    "function they wait in: %s (their callers are read "
		    "with it)",
		    why);
		rc = pp_profile_add_comment(p, note);
	}
	return rc;
}

/* ---- the dump ------------------------------------------------------------ */

#define BATCH 64

static const struct pp_value_type dump_type = {"goroutine", "count"};

/* Every thread now, one sample each (aggregated by stack and labels unless
 * detail). */
static int dump(int detail, struct pp_profile **out)
{
	pid_t *tids;
	size_t n;
	pp_seccomp_refresh_vm_readv(); /* the walks' checked reads */
	int rc = pp_task_list(&tids, &n);
	if (rc)
		return rc;
	unsigned depth = pp_threads_cfg.max_depth;
	struct pp_profile *p = pp_profile_new(&dump_type, 1, &dump_type, 1);
	/* At most 16 perf events (descriptors) open at once. */
	struct pp_looker *lk = pp_looker_new(depth, 16);
	struct pp_look *looks = calloc(BATCH, sizeof *looks);
	uintptr_t *pcs = malloc((size_t)BATCH * depth * sizeof *pcs);
	if (!p || !lk || !looks || !pcs) {
		rc = -ENOMEM;
		goto out;
	}
	p->max_bytes = pp_threads_cfg.max_profile_bytes;
	pp_profile_set_time(p, (int64_t)pp_clock_ns(CLOCK_REALTIME), 0);
	int64_t one = 1;
	uint64_t denied = 0, seccomp = 0;
	for (size_t at = 0; at < n && !rc; at += BATCH) {
		size_t k = n - at < BATCH ? n - at : BATCH;
		for (size_t i = 0; i < k; i++) {
			looks[i].tid = tids[at + i];
			looks[i].pcs = pcs + i * depth;
		}
		/* A running thread gets 50 ms to be caught on a CPU. */
		pp_look_threads(lk, looks, k, 50);
		for (size_t i = 0; i < k && !rc; i++) {
			denied += looks[i].miss == PP_MISS_DENIED;
			seccomp += looks[i].miss == PP_MISS_SECCOMP;
			rc = pp_threads_add(p, &looks[i], &one, detail, 0);
		}
	}
	if (!rc)
		rc = pp_threads_note_denied(p, denied, n);
	if (!rc)
		rc = pp_threads_note_seccomp(p, seccomp, n);
	atomic_fetch_add(&pp_threads_dumps, 1);
out:
	pp_looker_free(lk);
	free(looks);
	free(pcs);
	free(tids);
	if (rc) {
		pp_profile_free(p);
		return rc;
	}
	*out = p;
	return 0;
}

static int dump_check(const void *query, char *err, size_t errlen)
{
	(void)query;
	return pp_threads_unwind_ready(err, errlen);
}

static int dump_snapshot(const void *query, struct pp_profile **out)
{
	const struct pp_counts_query *q = query;
	char err[120];
	int rc = pp_threads_unwind_ready(err, sizeof err);
	return rc ? rc : dump(q->debug == 2, out);
}

static void dump_note(const void *query, int delta, struct pp_profile *p)
{
	(void)query;
	pp_profile_add_comment(
	    p, delta ? "pullprof: the change in the number of threads at "
	               "each stack over the window"
	             : "pullprof: each goroutine is a thread; its stack read "
	               "without stopping or signalling it");
}

static const struct pp_counts dump_counts = {
    .query_size = sizeof(struct pp_counts_query),
    .check = dump_check,
    .snapshot = dump_snapshot,
    .note = dump_note,
};

struct pp_producer pp_dump_producer = {
    .kind = "goroutine",
    .what = "thread dumps",
    .limit_setting = "PULLPROF_MAX_THREAD_DUMPS",
    .max_open = 4,
    PP_COUNTS_PRODUCER(&dump_counts),
};

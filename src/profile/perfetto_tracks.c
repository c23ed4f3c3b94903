/*
 * A Perfetto trace's tracks (perfetto.c says what the trace holds): the
 * clock snapshot, the process's, its threads' and the agent's track
 * descriptors, the window's marks, and the samples on those tracks (CPU
 * samples as instants, wall looks as slices).
 * Context: agent.
 */
#define _GNU_SOURCE 1 /* qsort_r */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perfetto_internal.h"
#include "util/fds.h"
#include "util/proc.h"

static const char *label(const struct pp_sample *s, const char *key)
{
	for (uint32_t i = 0; i < s->nlabels; i++)
		if (s->labels[i].str && strcmp(s->labels[i].key, key) == 0)
			return s->labels[i].str;
	return NULL;
}

static struct thread *thread_of(struct writer *w, uint32_t tid)
{
	int inserted;
	uint64_t *at = pp_u64map_put(&w->thread_at, tid, &inserted);
	if (!at) {
		pp_perfetto_fail(w, -ENOMEM);
		return NULL;
	}
	if (!inserted)
		return &w->threads[*at];
	*at = w->nthreads;
	if (w->nthreads == w->threads_cap) {
		size_t cap = w->threads_cap ? w->threads_cap * 2 : 64;
		struct thread *t = realloc(w->threads, cap * sizeof *t);
		if (!t) {
			pp_perfetto_fail(w, -ENOMEM);
			return NULL;
		}
		w->threads = t;
		w->threads_cap = cap;
	}
	struct thread *t = &w->threads[w->nthreads++];
	memset(t, 0, sizeof *t);
	t->tid = tid;
	return t;
}

/* ---- the process and its threads ---------------------------------------- */

void pp_perfetto_clock_snapshot(struct writer *w)
{
	/* Read back to back: the snapshot relates the three clocks as they
	 * stood within a few hundred nanoseconds of one another. */
	uint64_t boot = pp_perfetto_clock_now(CLOCK_BOOTTIME);
	uint64_t mono = pp_perfetto_clock_now(CLOCK_MONOTONIC);
	uint64_t real = pp_perfetto_clock_now(CLOCK_REALTIME);
	w->mono_to_boot = boot - mono;
	size_t m = pp_perfetto_packet(w, SEQ_META, 0, SEQ_CLEARED);
	pp_pb_bool(&w->pb, TP_FIRST_ON_SEQUENCE, 1);
	size_t cs = pp_pb_start(&w->pb);
	const uint64_t clocks[3][2] = {{BUILTIN_BOOTTIME, boot},
	                               {BUILTIN_MONOTONIC, mono},
	                               {BUILTIN_REALTIME, real}};
	for (int i = 0; i < 3; i++) {
		size_t c = pp_pb_start(&w->pb);
		pp_pb_uint64(&w->pb, CLOCK_ID, clocks[i][0]);
		pp_pb_uint64(&w->pb, CLOCK_TS, clocks[i][1]);
		pp_pb_end(&w->pb, CS_CLOCKS, c);
	}
	pp_pb_uint64(&w->pb, CS_PRIMARY, BUILTIN_BOOTTIME);
	pp_pb_end(&w->pb, TP_CLOCK_SNAPSHOT, cs);
	pp_perfetto_packet_end(w, m);
}

void pp_perfetto_process_track(struct writer *w)
{
	char comm[64] = "", *args = NULL;
	size_t len = 0, argc = 0;
	FILE *f = pp_fds_fopen("/proc/self/comm", "r");
	if (f) {
		if (fgets(comm, sizeof comm, f))
			comm[strcspn(comm, "\n")] = 0;
		pp_fds_fclose(f);
	}
	if (pp_proc_cmdline(&args, &len, &argc) != 0)
		argc = 0;

	size_t m = pp_perfetto_packet(w, SEQ_META, 0, 0);
	size_t td = pp_pb_start(&w->pb);
	pp_pb_uint64(&w->pb, TD_UUID, UUID(UUID_PROCESS, w->pid));
	size_t pd = pp_pb_start(&w->pb);
	pp_pb_uint64(&w->pb, PD_PID, (uint64_t)w->pid);
	for (size_t k = 0, at = 0; k < argc; k++, at += strlen(args + at) + 1)
		pp_perfetto_str(&w->pb, PD_CMDLINE, args + at);
	free(args);
	pp_perfetto_str(&w->pb, PD_NAME, comm);
	pp_pb_end(&w->pb, TD_PROCESS, pd);
	pp_pb_end(&w->pb, TP_TRACK_DESCRIPTOR, td);
	pp_perfetto_packet_end(w, m);

	/* The agent's own track: the window and what the timeline lacks. */
	m = pp_perfetto_packet(w, SEQ_META, 0, 0);
	td = pp_pb_start(&w->pb);
	pp_pb_uint64(&w->pb, TD_UUID, UUID(UUID_PULLPROF, w->pid));
	pp_pb_uint64(&w->pb, TD_PARENT, UUID(UUID_PROCESS, w->pid));
	pp_perfetto_str(&w->pb, TD_NAME, "pullprof");
	pp_perfetto_str(
	    &w->pb, TD_DESCRIPTION,
	    "the sampling windows, and samples the timeline does not show "
	    "one by one");
	pp_pb_end(&w->pb, TP_TRACK_DESCRIPTOR, td);
	pp_perfetto_packet_end(w, m);
}

void pp_perfetto_collect_threads(struct writer *w, const struct pp_profile *p,
                                 int wall)
{
	for (size_t i = 0; i < p->nevents && !w->err; i++) {
		const struct pp_event *e = &p->events[i];
		if (!e->tid)
			continue;
		struct thread *t = thread_of(w, e->tid);
		if (!t)
			return;
		if (!t->name)
			t->name = label(e->sample, "thread_name");
		t->wall |= wall;
	}
}

void pp_perfetto_thread_tracks(struct writer *w)
{
	for (size_t i = 0; i < w->nthreads && !w->err; i++) {
		const struct thread *t = &w->threads[i];
		size_t m = pp_perfetto_packet(w, SEQ_META, 0, 0);
		size_t td = pp_pb_start(&w->pb);
		pp_pb_uint64(&w->pb, TD_UUID, UUID(UUID_THREAD, t->tid));
		size_t th = pp_pb_start(&w->pb);
		pp_pb_uint64(&w->pb, THD_PID, (uint64_t)w->pid);
		pp_pb_uint64(&w->pb, THD_TID, t->tid);
		pp_perfetto_str(&w->pb, THD_NAME, t->name);
		pp_pb_end(&w->pb, TD_THREAD, th);
		pp_pb_end(&w->pb, TP_TRACK_DESCRIPTOR, td);
		pp_perfetto_packet_end(w, m);
		if (!t->wall)
			continue;
		m = pp_perfetto_packet(w, SEQ_META, 0, 0);
		td = pp_pb_start(&w->pb);
		pp_pb_uint64(&w->pb, TD_UUID, UUID(UUID_WALL, t->tid));
		pp_pb_uint64(&w->pb, TD_PARENT, UUID(UUID_THREAD, t->tid));
		pp_perfetto_str(&w->pb, TD_NAME, "wall-clock state");
		pp_perfetto_str(
		    &w->pb, TD_DESCRIPTION,
		    "the thread's state at each wall-clock look, over the "
		    "time the look stands for, with its stack");
		pp_pb_end(&w->pb, TP_TRACK_DESCRIPTOR, td);
		pp_perfetto_packet_end(w, m);
	}
}

/* A slice or an instant on the agent's track. */
static void pullprof_event(struct writer *w, int type, uint64_t ts,
                           const char *name, const char *key, const char *text,
                           int64_t num)
{
	size_t m = pp_perfetto_packet(w, SEQ_META, ts, 0);
	size_t te = pp_pb_start(&w->pb);
	pp_pb_uint64(&w->pb, TE_TYPE, (uint64_t)type);
	pp_pb_uint64(&w->pb, TE_TRACK_UUID, UUID(UUID_PULLPROF, w->pid));
	pp_perfetto_str(&w->pb, TE_NAME, name);
	if (key) {
		size_t da = pp_pb_start(&w->pb);
		pp_perfetto_str(&w->pb, DA_NAME, key);
		if (text)
			pp_perfetto_str(&w->pb, DA_STRING, text);
		else
			pp_pb_int64(&w->pb, DA_INT, num);
		pp_pb_end(&w->pb, TE_DEBUG, da);
	}
	pp_pb_end(&w->pb, TP_TRACK_EVENT, te);
	pp_perfetto_packet_end(w, m);
}

/* The window's bounds and notes for profile p (what, e.g. "CPU"). */
void pp_perfetto_window_marks(struct writer *w, const struct pp_profile *p,
                              const char *what)
{
	char name[160];
	if (!p->mono_start_ns || p->mono_end_ns <= p->mono_start_ns)
		return;
	snprintf(name, sizeof name, "%s window", what);
	pullprof_event(w, TYPE_SLICE_BEGIN, p->mono_start_ns, name,
	               p->ncomments ? "note" : NULL,
	               p->ncomments ? p->comments[0] : NULL, 0);
	/* The process's own events (tid 0): samples no thread's timeline
	 * holds, each under its synthetic frame (the ring was full, the
	 * thread blocks the signal), said by that frame's name and counted
	 * in lost_samples, since they are not on any thread's timeline. */
	for (size_t i = 0; i < p->nevents; i++) {
		const struct pp_event *e = &p->events[i];
		if (e->tid)
			continue;
		const char *frame =
		    e->sample && e->sample->depth
		        ? pp_profile_synthetic_name(p, e->sample->pcs[0])
		        : NULL;
		snprintf(name, sizeof name,
		         "%llu %s samples not on the timeline: %s",
		         (unsigned long long)e->count, what,
		         frame ? frame : "[pullprof: lost samples]");
		pullprof_event(w, TYPE_INSTANT, p->mono_end_ns - 1, name,
		               "lost_samples", NULL, (int64_t)e->count);
	}
	if (p->events_over) {
		snprintf(name, sizeof name,
		         "%llu %s samples past the timeline's bound: in the "
		         "profile's totals only",
		         (unsigned long long)p->events_over, what);
		pullprof_event(w, TYPE_INSTANT, p->mono_end_ns - 1, name,
		               "samples_past_bound", NULL,
		               (int64_t)p->events_over);
	}
	pullprof_event(w, TYPE_SLICE_END, p->mono_end_ns, NULL, NULL, NULL, 0);
}

static void debug_int(struct writer *w, int name, int64_t v)
{
	size_t da = pp_pb_start(&w->pb);
	pp_pb_uint64(&w->pb, DA_NAME_IID, (uint64_t)name);
	pp_pb_int64(&w->pb, DA_INT, v);
	pp_pb_end(&w->pb, TE_DEBUG, da);
}

/* ---- the samples --------------------------------------------------------- */

static int by_time(const void *a, const void *b, void *events)
{
	const struct pp_event *x =
	    &((const struct pp_event *)events)[*(const uint32_t *)a];
	const struct pp_event *y =
	    &((const struct pp_event *)events)[*(const uint32_t *)b];
	if (x->time_ns != y->time_ns)
		return x->time_ns < y->time_ns ? -1 : 1;
	return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

static int by_thread_time(const void *a, const void *b, void *events)
{
	const struct pp_event *x =
	    &((const struct pp_event *)events)[*(const uint32_t *)a];
	const struct pp_event *y =
	    &((const struct pp_event *)events)[*(const uint32_t *)b];
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return by_time(a, b, events);
}

/* The events of p's timeline on threads (not the process's), sorted. */
static uint32_t *sorted(const struct pp_profile *p, int per_thread, size_t *n)
{
	uint32_t *order = malloc((p->nevents + 1) * sizeof *order);
	*n = 0;
	if (!order)
		return NULL;
	for (size_t i = 0; i < p->nevents; i++)
		if (p->events[i].tid)
			order[(*n)++] = (uint32_t)i;
	qsort_r(order, *n, sizeof *order, per_thread ? by_thread_time : by_time,
	        p->events);
	return order;
}

/* The open packet's event on track, with sample si's callstack, named
 * name: what it needs interned goes first, in an InternedData of this
 * packet when anything is new (with the CPU samples' argument names and
 * leaf function, *leaf when leaf is not NULL). Returns the TrackEvent's
 * mark, for the caller's fields and pp_pb_end. */
static size_t sample_event(struct writer *w, struct interning *in,
                           const struct pp_event *e, int type, uint64_t track,
                           const char *name, uint64_t *leaf,
                           struct pp_frames_buf *fb)
{
	size_t id = pp_pb_start(&w->pb);
	size_t before = w->pb.data.len;
	uint64_t name_iid = pp_perfetto_event_name(w, in, name);
	uint64_t cs =
	    pp_perfetto_callstack(w, in, e->sample->index, &fb->v, &fb->cap);
	if (leaf) {
		pp_perfetto_debug_names(w, in);
		*leaf = pp_perfetto_leaf_function(w, in, e->sample->index);
	}
	if (w->pb.data.len != before)
		pp_pb_end(&w->pb, TP_INTERNED_DATA, id);
	else
		pp_pb_drop(&w->pb, id); /* nothing new */
	size_t te = pp_pb_start(&w->pb);
	pp_pb_uint64(&w->pb, TE_TYPE, (uint64_t)type);
	pp_pb_uint64(&w->pb, TE_TRACK_UUID, track);
	pp_pb_uint64(&w->pb, TE_NAME_IID, name_iid);
	pp_pb_uint64(&w->pb, TE_CALLSTACK_IID, cs);
	pp_pb_double(&w->pb, TE_CALLSTACK_WEIGHT, (double)e->value);
	return te;
}

/* A wall look stands for the time since the thread's last look (its
 * weight): its slice ends at the look and starts that long before, not
 * before the last look (prev, of the same thread, or NULL) nor the window. */
static uint64_t look_begin(const struct pp_profile *p, const struct pp_event *e,
                           const struct pp_event *prev)
{
	uint64_t end = e->time_ns, begin = end;
	if (e->value > 0 && (uint64_t)e->value < end)
		begin = end - (uint64_t)e->value;
	if (prev && begin < prev->time_ns)
		begin = prev->time_ns;
	if (begin < p->mono_start_ns)
		begin = p->mono_start_ns;
	return begin < end ? begin : end - 1;
}

/* v's timeline on its sequence: CPU samples as instants on their threads'
 * tracks, or (wall) looks as slices named by state on the threads' wall
 * tracks. */
int pp_perfetto_samples(struct writer *w, const struct pp_view *v, int wall)
{
	const struct pp_profile *p = v->p;
	struct interning in;
	struct pp_frames_buf fb = {NULL, 0};
	size_t n;
	int seq = wall ? SEQ_WALL : SEQ_CPU;
	int rc = pp_perfetto_interning_init(&in, v);
	uint32_t *order = rc ? NULL : sorted(p, wall, &n);
	if (!order) {
		pp_perfetto_interning_free(&in);
		return -ENOMEM;
	}
	pp_perfetto_sequence_start(w, seq);
	for (size_t i = 0; i < n && !w->err; i++) {
		const struct pp_event *e = &p->events[order[i]];
		if (wall) {
			const struct pp_event *prev =
			    i > 0 && p->events[order[i - 1]].tid == e->tid
			        ? &p->events[order[i - 1]]
			        : NULL;
			const char *state = label(e->sample, "state");
			size_t m = pp_perfetto_packet(
			    w, seq, look_begin(p, e, prev), SEQ_NEEDS);
			size_t te =
			    sample_event(w, &in, e, TYPE_SLICE_BEGIN,
			                 UUID(UUID_WALL, e->tid),
			                 state ? state : "unknown", NULL, &fb);
			pp_pb_end(&w->pb, TP_TRACK_EVENT, te);
			pp_perfetto_packet_end(w, m);
			m = pp_perfetto_packet(w, seq, e->time_ns, SEQ_NEEDS);
			te = pp_pb_start(&w->pb);
			pp_pb_uint64(&w->pb, TE_TYPE, TYPE_SLICE_END);
			pp_pb_uint64(&w->pb, TE_TRACK_UUID,
			             UUID(UUID_WALL, e->tid));
			pp_pb_end(&w->pb, TP_TRACK_EVENT, te);
			pp_perfetto_packet_end(w, m);
			continue;
		}
		uint64_t leaf;
		size_t m = pp_perfetto_packet(w, seq, e->time_ns, SEQ_NEEDS);
		size_t te =
		    sample_event(w, &in, e, TYPE_INSTANT,
		                 UUID(UUID_THREAD, e->tid), "cpu", &leaf, &fb);
		/* For SQL: the leaf function, the CPU time, and the periods
		 * when more than one (timer overruns). */
		size_t da = pp_pb_start(&w->pb);
		pp_pb_uint64(&w->pb, DA_NAME_IID, DBG_FUNCTION);
		pp_pb_uint64(&w->pb, DA_STRING_IID, leaf);
		pp_pb_end(&w->pb, TE_DEBUG, da);
		debug_int(w, DBG_CPU_NS, e->value);
		if (e->count > 1)
			debug_int(w, DBG_SAMPLES, e->count);
		pp_pb_end(&w->pb, TP_TRACK_EVENT, te);
		pp_perfetto_packet_end(w, m);
	}
	free(order);
	free(fb.v);
	pp_perfetto_interning_free(&in);
	return w->err;
}

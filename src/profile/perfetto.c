/*
 * The Perfetto trace renderer (/trace, ?format=perfetto). Agent context.
 *
 * A profile that keeps a timeline (CPU and wall windows, model.h) becomes a
 * Perfetto trace (perfetto.protos.Trace: a stream of TracePackets) that
 * ui.perfetto.dev and the trace processor open:
 *
 *  - a ClockSnapshot first, relating CLOCK_MONOTONIC (every timestamp here)
 *    to BOOTTIME and REALTIME; every timestamped packet names its clock;
 *  - a TrackDescriptor for the process (pid, name, command line), one per
 *    thread seen (pid, tid, name), and a process-scoped "pullprof" track
 *    holding the window's bounds and what the timeline lacks (lost samples,
 *    samples past its bound);
 *  - each CPU sample as a TrackEvent instant on its thread's track, at its
 *    own time, with an interned callstack and callstack_weight = the CPU
 *    nanoseconds it stands for (1 + timer overruns periods);
 *  - with the wall profile beside it, each wall sample as a slice on a
 *    child track of its thread named by the thread's state ("sleeping",
 *    "running", ...), ending at the look and as long as the time the look
 *    stands for (since the thread's last look), with its callstack;
 *  - with a heap profile beside it, heapprofd's ProfilePacket.
 *
 * Interning follows Perfetto's sequence rules: each kind of data has a
 * sequence of its own (trusted_packet_sequence_id); its first packet sets
 * first_packet_on_sequence and SEQ_INCREMENTAL_STATE_CLEARED, and every
 * interned entry (event name, function name, source path, mapping path
 * component, build ID, mapping, frame, callstack) is written in the packet
 * that first uses it, never after. Callstacks list frames root first, one
 * Frame per function of a location (inlined ones too).
 */
#define _GNU_SOURCE 1 /* qsort_r */
#include "perfetto.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pb.h"
#include "util/fds.h"
#include "util/proc.h"
#include "util/strtab.h"
#include "util/u64map.h"
#include "util/utf8.h"

/* Field numbers of Perfetto's trace protos (protos/perfetto/trace/...). */
enum {
	TRACE_PACKET = 1,
	/* TracePacket */
	TP_TIMESTAMP = 8,
	TP_TRACK_EVENT = 11,
	TP_SEQUENCE_ID = 10,
	TP_INTERNED_DATA = 12,
	TP_SEQUENCE_FLAGS = 13,
	TP_CLOCK_SNAPSHOT = 6,
	TP_PROFILE_PACKET = 37,
	TP_TIMESTAMP_CLOCK_ID = 58,
	TP_TRACK_DESCRIPTOR = 60,
	TP_FIRST_ON_SEQUENCE = 87,
	SEQ_CLEARED = 1,
	SEQ_NEEDS = 2,
	/* ClockSnapshot */
	CS_CLOCKS = 1,
	CS_PRIMARY = 2,
	CLOCK_ID = 1,
	CLOCK_TS = 2,
	BUILTIN_REALTIME = 1,
	BUILTIN_MONOTONIC = 3,
	BUILTIN_BOOTTIME = 6,
	/* TrackDescriptor */
	TD_UUID = 1,
	TD_NAME = 2,
	TD_PROCESS = 3,
	TD_THREAD = 4,
	TD_PARENT = 5,
	TD_DESCRIPTION = 14,
	PD_PID = 1,
	PD_CMDLINE = 2,
	PD_NAME = 6,
	THD_PID = 1,
	THD_TID = 2,
	THD_NAME = 5,
	/* TrackEvent */
	TE_DEBUG = 4,
	TE_TYPE = 9,
	TE_NAME_IID = 10,
	TE_TRACK_UUID = 11,
	TE_NAME = 23,
	TE_CALLSTACK_IID = 56,
	TE_CALLSTACK_WEIGHT = 57,
	TYPE_SLICE_BEGIN = 1,
	TYPE_SLICE_END = 2,
	TYPE_INSTANT = 3,
	DA_NAME_IID = 1,
	DA_INT = 4,
	DA_STRING = 6,
	DA_NAME = 10,
	DA_STRING_IID = 17,
	DAN_IID = 1,
	DAN_NAME = 2,
	/* InternedData */
	ID_EVENT_NAMES = 2,
	ID_DEBUG_NAMES = 3,
	ID_DEBUG_STRINGS = 29,
	ID_FUNCTION_NAMES = 5,
	ID_FRAMES = 6,
	ID_CALLSTACKS = 7,
	ID_BUILD_IDS = 16,
	ID_MAPPING_PATHS = 17,
	ID_SOURCE_PATHS = 18,
	ID_MAPPINGS = 19,
	IS_IID = 1,
	IS_STR = 2,
	EN_IID = 1,
	EN_NAME = 2,
	/* profile_common.proto */
	MAP_IID = 1,
	MAP_BUILD_ID = 2,
	MAP_START_OFFSET = 3,
	MAP_START = 4,
	MAP_END = 5,
	MAP_PATHS = 7,
	MAP_EXACT_OFFSET = 8,
	FR_IID = 1,
	FR_FUNCTION = 2,
	FR_MAPPING = 3,
	FR_REL_PC = 4,
	FR_SOURCE = 5,
	FR_LINE = 6,
	CSK_IID = 1,
	CSK_FRAMES = 2,
	/* ProfilePacket */
	PP_STRINGS = 1,
	PP_FRAMES = 2,
	PP_CALLSTACKS = 3,
	PP_MAPPINGS = 4,
	PP_DUMPS = 5,
	PHS_PID = 1,
	PHS_SAMPLES = 2,
	PHS_TIMESTAMP = 9,
	PHS_INTERVAL = 12,
	HS_CALLSTACK = 1,
	HS_ALLOCATED = 2,
	HS_FREED = 3,
	HS_ALLOC_COUNT = 5,
	HS_FREE_COUNT = 6,
	HS_MAX = 8,
	HS_MAX_COUNT = 9,
};

/* Where interned entries go: InternedData's fields, or a ProfilePacket's
 * own (whose one string table holds every kind of string; no source
 * paths). */
struct tags {
	int function_names, mapping_paths, build_ids, source_paths, mappings,
	    frames, callstacks;
};
static const struct tags INTERNED_TAGS = {
    ID_FUNCTION_NAMES, ID_MAPPING_PATHS, ID_BUILD_IDS, ID_SOURCE_PATHS,
    ID_MAPPINGS,       ID_FRAMES,        ID_CALLSTACKS};
static const struct tags PROFILE_PACKET_TAGS = {
    PP_STRINGS,  PP_STRINGS, PP_STRINGS,   0,
    PP_MAPPINGS, PP_FRAMES,  PP_CALLSTACKS};

enum { SEQ_META = 1, SEQ_CPU = 2, SEQ_WALL = 3, SEQ_HEAP = 4 };

/* Track uuids: a pid or tid with a kind in the low 3 bits (small varints:
 * every sample names its track). */
#define UUID(kind, id) ((uint64_t)(id) << 3 | (kind))
#define UUID_PROCESS 1u
#define UUID_THREAD 2u
#define UUID_WALL 3u
#define UUID_PULLPROF 4u

struct thread {
	uint32_t tid;
	const char *name;
	int wall; /* has a wall track */
};

/* What one sequence has interned so far (per view: its ids are the view's
 * indices). */
struct interning {
	const struct pp_view *v;
	const struct tags *tags;
	int shared_strings;   /* one iid space for all strings (components) */
	uint32_t *frame_base; /* by location: iid of its first frame - 1 */
	unsigned char *func_done, *frame_done, *stack_done, *map_done;
	unsigned char *leaf_done; /* by function: its name as an argument */
	unsigned debug_names;     /* debug annotation names written */
	struct pp_strtab sources, components, names;
	unsigned char *source_done, *component_done, *name_done;
	size_t source_cap, component_cap, name_cap;
};

struct writer {
	struct pp_pb pb;
	int err;
	pid_t pid;
	struct thread *threads;
	size_t nthreads, threads_cap;
	struct pp_u64map thread_at; /* tid -> index in threads */
	uint64_t mono_to_boot; /* BOOTTIME - MONOTONIC, from the snapshot */
};

/* ---- small helpers ------------------------------------------------------- */

static void fail(struct writer *w, int rc)
{
	if (!w->err)
		w->err = rc;
}

/* A string field: UTF-8, as the trace processor (and protoc) insist.
 * Most are already (the model's and the symbolizer's strings are), but the
 * process's comm and command line come straight from /proc. */
static void str(struct pp_pb *pb, int tag, const char *s)
{
	if (!s)
		return;
	size_t len = strlen(s);
	if (pp_utf8_valid(s, len)) {
		pp_pb_bytes(pb, tag, s, len);
		return;
	}
	struct pp_buf b = {0};
	pp_utf8_append(&b, s, len);
	pp_pb_bytes(pb, tag, b.data ? b.data : "", b.len);
	pp_buf_free(&b);
}

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
		fail(w, -ENOMEM);
		return NULL;
	}
	if (!inserted)
		return &w->threads[*at];
	*at = w->nthreads;
	if (w->nthreads == w->threads_cap) {
		size_t cap = w->threads_cap ? w->threads_cap * 2 : 64;
		struct thread *t = realloc(w->threads, cap * sizeof *t);
		if (!t) {
			fail(w, -ENOMEM);
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

/* Start a packet of sequence seq at time ts (0: none). */
static size_t packet(struct writer *w, int seq, uint64_t ts, unsigned flags)
{
	size_t m = pp_pb_start(&w->pb);
	if (ts) {
		pp_pb_uint64(&w->pb, TP_TIMESTAMP, ts);
		pp_pb_uint64(&w->pb, TP_TIMESTAMP_CLOCK_ID, BUILTIN_MONOTONIC);
	}
	pp_pb_uint64(&w->pb, TP_SEQUENCE_ID, (uint64_t)seq);
	pp_pb_uint64_opt(&w->pb, TP_SEQUENCE_FLAGS, flags);
	return m;
}

static void packet_end(struct writer *w, size_t m)
{
	pp_pb_end(&w->pb, TRACE_PACKET, m);
	pp_pb_flush(&w->pb);
	if (w->pb.err)
		fail(w, w->pb.err);
}

/* The first packet of a sequence: incremental state starts empty. */
static void sequence_start(struct writer *w, int seq)
{
	size_t m = packet(w, seq, 0, SEQ_CLEARED | SEQ_NEEDS);
	pp_pb_bool(&w->pb, TP_FIRST_ON_SEQUENCE, 1);
	packet_end(w, m);
}

static uint64_t clock_now(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- the process and its threads ---------------------------------------- */

static void clock_snapshot(struct writer *w)
{
	/* Read back to back: the snapshot relates the three clocks as they
	 * stood within a few hundred nanoseconds of one another. */
	uint64_t boot = clock_now(CLOCK_BOOTTIME);
	uint64_t mono = clock_now(CLOCK_MONOTONIC);
	uint64_t real = clock_now(CLOCK_REALTIME);
	w->mono_to_boot = boot - mono;
	size_t m = packet(w, SEQ_META, 0, SEQ_CLEARED);
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
	packet_end(w, m);
}

static void process_track(struct writer *w)
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

	size_t m = packet(w, SEQ_META, 0, 0);
	size_t td = pp_pb_start(&w->pb);
	pp_pb_uint64(&w->pb, TD_UUID, UUID(UUID_PROCESS, w->pid));
	size_t pd = pp_pb_start(&w->pb);
	pp_pb_uint64(&w->pb, PD_PID, (uint64_t)w->pid);
	for (size_t k = 0, at = 0; k < argc; k++, at += strlen(args + at) + 1)
		str(&w->pb, PD_CMDLINE, args + at);
	free(args);
	str(&w->pb, PD_NAME, comm);
	pp_pb_end(&w->pb, TD_PROCESS, pd);
	pp_pb_end(&w->pb, TP_TRACK_DESCRIPTOR, td);
	packet_end(w, m);

	/* The agent's own track: the window and what the timeline lacks. */
	m = packet(w, SEQ_META, 0, 0);
	td = pp_pb_start(&w->pb);
	pp_pb_uint64(&w->pb, TD_UUID, UUID(UUID_PULLPROF, w->pid));
	pp_pb_uint64(&w->pb, TD_PARENT, UUID(UUID_PROCESS, w->pid));
	str(&w->pb, TD_NAME, "pullprof");
	str(&w->pb, TD_DESCRIPTION,
	    "the sampling windows, and samples the timeline does not show "
	    "one by one");
	pp_pb_end(&w->pb, TP_TRACK_DESCRIPTOR, td);
	packet_end(w, m);
}

static void collect_threads(struct writer *w, const struct pp_profile *p,
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

static void thread_tracks(struct writer *w)
{
	for (size_t i = 0; i < w->nthreads && !w->err; i++) {
		const struct thread *t = &w->threads[i];
		size_t m = packet(w, SEQ_META, 0, 0);
		size_t td = pp_pb_start(&w->pb);
		pp_pb_uint64(&w->pb, TD_UUID, UUID(UUID_THREAD, t->tid));
		size_t th = pp_pb_start(&w->pb);
		pp_pb_uint64(&w->pb, THD_PID, (uint64_t)w->pid);
		pp_pb_uint64(&w->pb, THD_TID, t->tid);
		str(&w->pb, THD_NAME, t->name);
		pp_pb_end(&w->pb, TD_THREAD, th);
		pp_pb_end(&w->pb, TP_TRACK_DESCRIPTOR, td);
		packet_end(w, m);
		if (!t->wall)
			continue;
		m = packet(w, SEQ_META, 0, 0);
		td = pp_pb_start(&w->pb);
		pp_pb_uint64(&w->pb, TD_UUID, UUID(UUID_WALL, t->tid));
		pp_pb_uint64(&w->pb, TD_PARENT, UUID(UUID_THREAD, t->tid));
		str(&w->pb, TD_NAME, "wall-clock state");
		str(&w->pb, TD_DESCRIPTION,
		    "the thread's state at each wall-clock look, over the "
		    "time the look stands for, with its stack");
		pp_pb_end(&w->pb, TP_TRACK_DESCRIPTOR, td);
		packet_end(w, m);
	}
}

/* A slice or an instant on the agent's track. */
static void pullprof_event(struct writer *w, int type, uint64_t ts,
                           const char *name, const char *key, const char *text,
                           int64_t num)
{
	size_t m = packet(w, SEQ_META, ts, 0);
	size_t te = pp_pb_start(&w->pb);
	pp_pb_uint64(&w->pb, TE_TYPE, (uint64_t)type);
	pp_pb_uint64(&w->pb, TE_TRACK_UUID, UUID(UUID_PULLPROF, w->pid));
	str(&w->pb, TE_NAME, name);
	if (key) {
		size_t da = pp_pb_start(&w->pb);
		str(&w->pb, DA_NAME, key);
		if (text)
			str(&w->pb, DA_STRING, text);
		else
			pp_pb_int64(&w->pb, DA_INT, num);
		pp_pb_end(&w->pb, TE_DEBUG, da);
	}
	pp_pb_end(&w->pb, TP_TRACK_EVENT, te);
	packet_end(w, m);
}

/* The window's bounds and notes for profile p (what, e.g. "CPU"). */
static void window_marks(struct writer *w, const struct pp_profile *p,
                         const char *what)
{
	char name[96];
	uint64_t lost = 0;
	if (!p->mono_start_ns || p->mono_end_ns <= p->mono_start_ns)
		return;
	snprintf(name, sizeof name, "%s window", what);
	pullprof_event(w, TYPE_SLICE_BEGIN, p->mono_start_ns, name,
	               p->ncomments ? "note" : NULL,
	               p->ncomments ? p->comments[0] : NULL, 0);
	for (size_t i = 0; i < p->nevents; i++)
		if (!p->events[i].tid)
			lost += p->events[i].count;
	if (lost) {
		snprintf(name, sizeof name,
		         "%llu %s samples lost (ring full), not on the "
		         "timeline",
		         (unsigned long long)lost, what);
		pullprof_event(w, TYPE_INSTANT, p->mono_end_ns - 1, name,
		               "lost_samples", NULL, (int64_t)lost);
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

/* ---- interning ----------------------------------------------------------- */

static int interning_init(struct interning *in, const struct pp_view *v)
{
	size_t nframes = 0;
	memset(in, 0, sizeof *in);
	in->v = v;
	in->tags = &INTERNED_TAGS;
	in->frame_base = malloc((v->nlocs + 1) * sizeof *in->frame_base);
	if (!in->frame_base)
		return -ENOMEM;
	for (size_t i = 0; i < v->nlocs; i++) {
		in->frame_base[i] = (uint32_t)nframes;
		nframes += v->locs[i].nframes ? v->locs[i].nframes : 1;
	}
	in->func_done = calloc(v->nfuncs + 1, 1);
	in->leaf_done = calloc(v->nfuncs + 2, 1);
	in->frame_done = calloc(nframes + 1, 1);
	in->stack_done = calloc(v->nsamples + 1, 1);
	in->map_done = calloc((v->maps ? v->maps->n : 0) + 1, 1);
	if (!in->func_done || !in->frame_done || !in->stack_done ||
	    !in->map_done || !in->leaf_done || pp_strtab_init(&in->sources) ||
	    pp_strtab_init(&in->components) || pp_strtab_init(&in->names))
		return -ENOMEM;
	/* It also holds build IDs as raw bytes: keep them exact (its text,
	 * names and path components, is valid already). */
	in->components.bytes = 1;
	return 0;
}

static void interning_free(struct interning *in)
{
	free(in->frame_base);
	free(in->func_done);
	free(in->leaf_done);
	free(in->frame_done);
	free(in->stack_done);
	free(in->map_done);
	free(in->source_done);
	free(in->component_done);
	free(in->name_done);
	pp_strtab_free(&in->sources);
	pp_strtab_free(&in->components);
	pp_strtab_free(&in->names);
}

/* The iid of s in t (strings are interned from 1: index 0 is ""), and
 * whether it is new (*fresh). 0 for "" or on error. */
static uint64_t intern_str(struct writer *w, struct pp_strtab *t,
                           unsigned char **done, size_t *cap, const char *s,
                           size_t len, int *fresh)
{
	*fresh = 0;
	if (!s || !len)
		return 0;
	int64_t i = pp_strtab_intern(t, s, len);
	if (i <= 0) {
		if (i < 0)
			fail(w, (int)i);
		return 0;
	}
	if ((size_t)i >= *cap) {
		size_t ncap = *cap ? *cap * 2 : 256;
		while (ncap <= (size_t)i)
			ncap *= 2;
		unsigned char *d = realloc(*done, ncap);
		if (!d) {
			fail(w, -ENOMEM);
			return 0;
		}
		memset(d + *cap, 0, ncap - *cap);
		*done = d;
		*cap = ncap;
	}
	if (!(*done)[i]) {
		(*done)[i] = 1;
		*fresh = 1;
	}
	return (uint64_t)i;
}

static void interned_string(struct writer *w, int tag, uint64_t iid,
                            const void *s, size_t len)
{
	size_t m = pp_pb_start(&w->pb);
	pp_pb_uint64(&w->pb, IS_IID, iid);
	pp_pb_bytes(&w->pb, IS_STR, s, len);
	pp_pb_end(&w->pb, tag, m);
}

/* An event name's iid, written into the open InternedData when new. */
static uint64_t event_name(struct writer *w, struct interning *in,
                           const char *name)
{
	int fresh;
	uint64_t iid = intern_str(w, &in->names, &in->name_done, &in->name_cap,
	                          name, name ? strlen(name) : 0, &fresh);
	if (fresh) {
		size_t m = pp_pb_start(&w->pb);
		pp_pb_uint64(&w->pb, EN_IID, iid);
		str(&w->pb, EN_NAME, name);
		pp_pb_end(&w->pb, ID_EVENT_NAMES, m);
	}
	return iid;
}

static int hexdigit(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	                              : -1;
}

/* Mapping index mi (its path split in components, its build ID as bytes,
 * as Perfetto's own producers write them), written when new. */
static void mapping(struct writer *w, struct interning *in, size_t mi)
{
	const struct pp_mapping *mp = &in->v->maps->v[mi];
	uint64_t comps[64];
	size_t ncomps = 0;
	int fresh;
	if (in->map_done[mi])
		return;
	in->map_done[mi] = 1;
	for (const char *c = mp->name; *c && ncomps < 64;) {
		while (*c == '/')
			c++;
		size_t len = strcspn(c, "/");
		if (!len)
			break;
		comps[ncomps] =
		    intern_str(w, &in->components, &in->component_done,
		               &in->component_cap, c, len, &fresh);
		if (fresh)
			interned_string(w, in->tags->mapping_paths,
			                comps[ncomps], c, len);
		ncomps++;
		c += len;
	}
	size_t idlen = strlen(mp->build_id) / 2;
	uint64_t id_iid = 0;
	if (idlen && idlen <= 64) {
		unsigned char id[64];
		for (size_t i = 0; i < idlen; i++)
			id[i] =
			    (unsigned char)(hexdigit(mp->build_id[2 * i]) << 4 |
			                    hexdigit(mp->build_id[2 * i + 1]));
		if (in->shared_strings) {
			id_iid = intern_str(
			    w, &in->components, &in->component_done,
			    &in->component_cap, (char *)id, idlen, &fresh);
			if (fresh)
				interned_string(w, in->tags->build_ids, id_iid,
				                id, idlen);
		} else {
			id_iid = mp->id;
			interned_string(w, in->tags->build_ids, id_iid, id,
			                idlen);
		}
	}
	size_t m = pp_pb_start(&w->pb);
	pp_pb_uint64(&w->pb, MAP_IID, mp->id);
	pp_pb_uint64_opt(&w->pb, MAP_BUILD_ID, id_iid);
	pp_pb_uint64(&w->pb, MAP_START_OFFSET, 0);
	pp_pb_uint64(&w->pb, MAP_START, mp->start);
	pp_pb_uint64(&w->pb, MAP_END, mp->limit);
	pp_pb_uint64s(&w->pb, MAP_PATHS, comps, ncomps);
	pp_pb_uint64(&w->pb, MAP_EXACT_OFFSET, mp->offset);
	pp_pb_end(&w->pb, in->tags->mappings, m);
}

/* Location li's frames (one per function, inlined ones too), written when
 * new, with what they refer to. */
static void location(struct writer *w, struct interning *in, uint32_t li)
{
	const struct pp_view *v = in->v;
	const struct pp_view_loc *l = &v->locs[li];
	uint32_t n = l->nframes ? l->nframes : 1;
	uint32_t base = in->frame_base[li];
	if (in->frame_done[base])
		return;
	size_t mi = (size_t)-1;
	if (l->mapping && v->maps) {
		mi = (size_t)(l->mapping - v->maps->v);
		mapping(w, in, mi);
	}
	for (uint32_t k = 0; k < n; k++) {
		const struct pp_frame *f = l->nframes ? &l->frames[k] : NULL;
		uint64_t fn = 0, src = 0;
		int fresh;
		if (f && in->shared_strings) {
			fn = intern_str(w, &in->components, &in->component_done,
			                &in->component_cap, f->name,
			                strlen(f->name), &fresh);
			if (fresh)
				interned_string(w, in->tags->function_names, fn,
				                f->name, strlen(f->name));
		} else if (f) {
			uint32_t fi = v->func_of[l->first_func + k];
			fn = (uint64_t)fi + 1;
			if (!in->func_done[fi]) {
				in->func_done[fi] = 1;
				interned_string(w, in->tags->function_names, fn,
				                f->name, strlen(f->name));
			}
		}
		if (f && in->tags->source_paths) {
			src = intern_str(w, &in->sources, &in->source_done,
			                 &in->source_cap, f->file,
			                 strlen(f->file), &fresh);
			if (fresh)
				interned_string(w, in->tags->source_paths, src,
				                f->file, strlen(f->file));
		}
		size_t m = pp_pb_start(&w->pb);
		pp_pb_uint64(&w->pb, FR_IID, (uint64_t)base + k + 1);
		pp_pb_uint64_opt(&w->pb, FR_FUNCTION, fn);
		if (mi != (size_t)-1) {
			pp_pb_uint64(&w->pb, FR_MAPPING, l->mapping->id);
			pp_pb_uint64(&w->pb, FR_REL_PC,
			             l->pc - l->mapping->start +
			                 l->mapping->offset);
		}
		pp_pb_uint64_opt(&w->pb, FR_SOURCE, src);
		if (f && f->line > 0 && in->tags->source_paths)
			pp_pb_uint64(&w->pb, FR_LINE, (uint64_t)f->line);
		pp_pb_end(&w->pb, in->tags->frames, m);
	}
	in->frame_done[base] = 1;
}

/* Scratch for a callstack's frame ids. */
struct pp_frames_buf {
	uint64_t *v;
	size_t cap;
};

/* Sample si's callstack (its iid is si + 1), written when new. */
static uint64_t callstack(struct writer *w, struct interning *in, size_t si,
                          uint64_t **frames, size_t *cap)
{
	const struct pp_view *v = in->v;
	const uint32_t *stack = v->stacks + v->stack_at[si];
	size_t depth = v->stack_at[si + 1] - v->stack_at[si];
	if (in->stack_done[si])
		return si + 1;
	size_t n = 0;
	for (size_t k = 0; k < depth; k++) {
		const struct pp_view_loc *l = &v->locs[stack[k]];
		location(w, in, stack[k]);
		n += l->nframes ? l->nframes : 1;
	}
	if (n > *cap) {
		uint64_t *f = realloc(*frames, n * sizeof *f);
		if (!f) {
			fail(w, -ENOMEM);
			return 0;
		}
		*frames = f;
		*cap = n;
	}
	/* Root first: the outermost location's outermost function first. */
	size_t at = 0;
	for (size_t k = depth; k-- > 0;) {
		const struct pp_view_loc *l = &v->locs[stack[k]];
		uint32_t nf = l->nframes ? l->nframes : 1;
		for (uint32_t j = nf; j-- > 0;)
			(*frames)[at++] =
			    (uint64_t)in->frame_base[stack[k]] + j + 1;
	}
	size_t m = pp_pb_start(&w->pb);
	pp_pb_uint64(&w->pb, CSK_IID, si + 1);
	pp_pb_uint64s(&w->pb, CSK_FRAMES, *frames, n);
	pp_pb_end(&w->pb, in->tags->callstacks, m);
	in->stack_done[si] = 1;
	return si + 1;
}

/* Debug annotation names of the CPU samples (debug.function,
 * debug.cpu_ns, debug.samples in the trace processor's args). */
enum { DBG_FUNCTION = 1, DBG_CPU_NS, DBG_SAMPLES, DBG_NAMES };
static const char *const debug_names[DBG_NAMES] = {NULL, "function", "cpu_ns",
                                                   "samples"};

static void debug_names_once(struct writer *w, struct interning *in)
{
	if (in->debug_names)
		return;
	in->debug_names = 1;
	for (int i = 1; i < DBG_NAMES; i++) {
		size_t m = pp_pb_start(&w->pb);
		pp_pb_uint64(&w->pb, DAN_IID, (uint64_t)i);
		str(&w->pb, DAN_NAME, debug_names[i]);
		pp_pb_end(&w->pb, ID_DEBUG_NAMES, m);
	}
}

/* The iid of sample si's leaf function name (innermost frame of its
 * innermost location), written when new. */
static uint64_t leaf_function(struct writer *w, struct interning *in, size_t si)
{
	const struct pp_view *v = in->v;
	size_t depth = v->stack_at[si + 1] - v->stack_at[si];
	const struct pp_view_loc *l =
	    depth ? &v->locs[v->stacks[v->stack_at[si]]] : NULL;
	uint64_t iid = v->nfuncs + 1; /* an address no symbol covers */
	const char *name = "[unknown]";
	if (l && l->nframes) {
		iid = (uint64_t)v->func_of[l->first_func] + 1;
		name = l->frames[0].name;
	}
	if (!in->leaf_done[iid]) {
		in->leaf_done[iid] = 1;
		interned_string(w, ID_DEBUG_STRINGS, iid, name, strlen(name));
	}
	return iid;
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
	uint64_t name_iid = event_name(w, in, name);
	uint64_t cs = callstack(w, in, e->sample->index, &fb->v, &fb->cap);
	if (leaf) {
		debug_names_once(w, in);
		*leaf = leaf_function(w, in, e->sample->index);
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
static int samples(struct writer *w, const struct pp_view *v, int wall)
{
	const struct pp_profile *p = v->p;
	struct interning in;
	struct pp_frames_buf fb = {NULL, 0};
	size_t n;
	int seq = wall ? SEQ_WALL : SEQ_CPU;
	int rc = interning_init(&in, v);
	uint32_t *order = rc ? NULL : sorted(p, wall, &n);
	if (!order) {
		interning_free(&in);
		return -ENOMEM;
	}
	sequence_start(w, seq);
	for (size_t i = 0; i < n && !w->err; i++) {
		const struct pp_event *e = &p->events[order[i]];
		if (wall) {
			const struct pp_event *prev =
			    i > 0 && p->events[order[i - 1]].tid == e->tid
			        ? &p->events[order[i - 1]]
			        : NULL;
			const char *state = label(e->sample, "state");
			size_t m =
			    packet(w, seq, look_begin(p, e, prev), SEQ_NEEDS);
			size_t te =
			    sample_event(w, &in, e, TYPE_SLICE_BEGIN,
			                 UUID(UUID_WALL, e->tid),
			                 state ? state : "unknown", NULL, &fb);
			pp_pb_end(&w->pb, TP_TRACK_EVENT, te);
			packet_end(w, m);
			m = packet(w, seq, e->time_ns, SEQ_NEEDS);
			te = pp_pb_start(&w->pb);
			pp_pb_uint64(&w->pb, TE_TYPE, TYPE_SLICE_END);
			pp_pb_uint64(&w->pb, TE_TRACK_UUID,
			             UUID(UUID_WALL, e->tid));
			pp_pb_end(&w->pb, TP_TRACK_EVENT, te);
			packet_end(w, m);
			continue;
		}
		uint64_t leaf;
		size_t m = packet(w, seq, e->time_ns, SEQ_NEEDS);
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
		packet_end(w, m);
	}
	free(order);
	free(fb.v);
	interning_free(&in);
	return w->err;
}

/* ---- the heap, as heapprofd dumps it ------------------------------------- */

static uint64_t pcs_hash(const struct pp_sample *s)
{
	uint64_t h = 1469598103934665603ull ^ s->depth;
	for (uint32_t i = 0; i < s->depth; i++) {
		h ^= (uint64_t)s->pcs[i];
		h *= 1099511628211ull;
		h ^= h >> 29;
	}
	return h;
}

static int type_index(const struct pp_profile *p, const char *type)
{
	for (size_t i = 0; i < p->ntypes; i++)
		if (strcmp(p->types[i].type, type) == 0)
			return (int)i;
	return -1;
}

struct stack_key {
	uint64_t hash;
	uint32_t sample; /* index in the view */
};

static int by_key(const void *a, const void *b)
{
	const struct stack_key *x = a, *y = b;
	if (x->hash != y->hash)
		return x->hash < y->hash ? -1 : 1;
	return x->sample < y->sample ? -1 : x->sample > y->sample;
}

static int same_pcs(const struct pp_sample *a, const struct pp_sample *b)
{
	return a->depth == b->depth &&
	       memcmp(a->pcs, b->pcs, a->depth * sizeof *a->pcs) == 0;
}

/* Keys of v's samples, sorted: samples with the same stack (other labels)
 * sit together. */
static struct stack_key *stack_keys(const struct pp_view *v)
{
	struct stack_key *k = malloc((v->nsamples + 1) * sizeof *k);
	if (!k)
		return NULL;
	for (size_t i = 0; i < v->nsamples; i++)
		k[i] = (struct stack_key){pcs_hash(v->samples[i]), (uint32_t)i};
	qsort(k, v->nsamples, sizeof *k, by_key);
	return k;
}

/* A ProfilePacket in the shape heapprofd writes: its own strings,
 * mappings, frames and callstacks, then one process dump with a sample per
 * stack: allocated and freed bytes and counts now (self_freed is what was
 * allocated and is no longer in use), and self_max, what the stack held
 * when the process's in-use total was highest. Values are the unsampled
 * estimates pprof shows. */
static int heap_dump(struct writer *w, const struct pp_view *v,
                     const struct pp_view *peak)
{
	const struct pp_profile *p = v->p;
	int ao = type_index(p, "alloc_objects"),
	    as = type_index(p, "alloc_space"),
	    io = type_index(p, "inuse_objects"),
	    is = type_index(p, "inuse_space");
	if (ao < 0 || as < 0 || io < 0 || is < 0)
		return -EINVAL;
	struct stack_key *keys = stack_keys(v);
	struct stack_key *pkeys = peak ? stack_keys(peak) : NULL;
	struct interning in;
	uint64_t *frames = NULL;
	size_t cap = 0;
	int rc = keys && (!peak || pkeys) ? interning_init(&in, v) : -ENOMEM;
	if (rc) {
		free(keys);
		free(pkeys);
		return rc;
	}
	int pis = peak ? type_index(peak->p, "inuse_space") : -1;
	int pio = peak ? type_index(peak->p, "inuse_objects") : -1;
	uint64_t ts = clock_now(CLOCK_MONOTONIC);

	/* The packet's own interning: the same encoders write into
	 * ProfilePacket's fields (strings 1, frames 2, callstacks 3,
	 * mappings 4) in place of InternedData's. A ProfilePacket names every
	 * string (function names, path components, build IDs) in one
	 * table. */
	size_t m = packet(w, SEQ_HEAP, ts, SEQ_CLEARED);
	pp_pb_bool(&w->pb, TP_FIRST_ON_SEQUENCE, 1);
	size_t pkt = pp_pb_start(&w->pb);
	in.shared_strings = 1;
	in.tags = &PROFILE_PACKET_TAGS;
	for (size_t i = 0; i < v->nsamples && !w->err; i++) {
		if (i && same_pcs(v->samples[keys[i].sample],
		                  v->samples[keys[i - 1].sample]))
			continue;
		callstack(w, &in, keys[i].sample, &frames, &cap);
	}
	size_t dump = pp_pb_start(&w->pb);
	pp_pb_uint64(&w->pb, PHS_PID, (uint64_t)w->pid);
	pp_pb_uint64(&w->pb, PHS_TIMESTAMP, ts + w->mono_to_boot);
	pp_pb_uint64_opt(&w->pb, PHS_INTERVAL, (uint64_t)p->period);
	size_t pj = 0;
	for (size_t i = 0; i < v->nsamples && !w->err;) {
		const struct pp_sample *first = v->samples[keys[i].sample];
		int64_t sum[4] = {0, 0, 0, 0};
		size_t k = i;
		for (; k < v->nsamples &&
		       same_pcs(v->samples[keys[k].sample], first);
		     k++) {
			const struct pp_sample *s = v->samples[keys[k].sample];
			sum[0] += s->values[ao];
			sum[1] += s->values[as];
			sum[2] += s->values[io];
			sum[3] += s->values[is];
		}
		int64_t max_bytes = 0, max_count = 0;
		while (peak && pj < peak->nsamples &&
		       pkeys[pj].hash < keys[i].hash)
			pj++;
		for (size_t q = pj; peak && q < peak->nsamples &&
		                    pkeys[q].hash == keys[i].hash;
		     q++) {
			const struct pp_sample *s =
			    peak->samples[pkeys[q].sample];
			if (!same_pcs(s, first))
				continue;
			max_bytes += pis >= 0 ? s->values[pis] : 0;
			max_count += pio >= 0 ? s->values[pio] : 0;
		}
		size_t hs = pp_pb_start(&w->pb);
		pp_pb_uint64(&w->pb, HS_CALLSTACK,
		             (uint64_t)keys[i].sample + 1);
		pp_pb_uint64_opt(&w->pb, HS_ALLOCATED, (uint64_t)sum[1]);
		pp_pb_uint64_opt(&w->pb, HS_FREED, (uint64_t)(sum[1] - sum[3]));
		pp_pb_uint64_opt(&w->pb, HS_ALLOC_COUNT, (uint64_t)sum[0]);
		pp_pb_uint64_opt(&w->pb, HS_FREE_COUNT,
		                 (uint64_t)(sum[0] - sum[2]));
		if (peak) {
			pp_pb_uint64_opt(&w->pb, HS_MAX, (uint64_t)max_bytes);
			pp_pb_uint64_opt(&w->pb, HS_MAX_COUNT,
			                 (uint64_t)max_count);
		}
		pp_pb_end(&w->pb, PHS_SAMPLES, hs);
		i = k;
	}
	pp_pb_end(&w->pb, PP_DUMPS, dump);
	pp_pb_end(&w->pb, TP_PROFILE_PACKET, pkt);
	packet_end(w, m);
	free(frames);
	free(keys);
	free(pkeys);
	interning_free(&in);
	return w->err;
}

/* ---- the whole trace ----------------------------------------------------- */

int pp_perfetto_write(const struct pp_view *cpu, const struct pp_view *wall,
                      const struct pp_view *heap, const struct pp_view *peak,
                      struct pp_buf *out, int gzip_level)
{
	struct writer w;
	memset(&w, 0, sizeof w);
	w.pid = getpid();
	int rc = pp_pb_init(&w.pb, out, gzip_level);
	if (rc)
		return rc;
	if (cpu)
		collect_threads(&w, cpu->p, 0);
	if (wall)
		collect_threads(&w, wall->p, 1);
	clock_snapshot(&w);
	process_track(&w);
	thread_tracks(&w);
	if (cpu)
		window_marks(&w, cpu->p, "CPU");
	if (wall)
		window_marks(&w, wall->p, "wall-clock");
	if (cpu && !w.err)
		samples(&w, cpu, 0);
	if (wall && !w.err)
		samples(&w, wall, 1);
	if (heap && !w.err)
		fail(&w, heap_dump(&w, heap, peak));
	free(w.threads);
	pp_u64map_free(&w.thread_at);
	if (w.err) {
		pp_pb_abort(&w.pb);
		pp_buf_free(out);
		return w.err;
	}
	rc = pp_pb_finish(&w.pb);
	if (rc)
		pp_buf_free(out);
	return rc;
}

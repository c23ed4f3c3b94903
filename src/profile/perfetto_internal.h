/*
 * The Perfetto trace renderer's parts (perfetto.h): the field numbers of
 * Perfetto's protos, the writer and each sequence's interning state, and
 * what one part calls in another. Only the renderer's files include it.
 * Context: agent.
 */
#ifndef PP_PERFETTO_INTERNAL_H
#define PP_PERFETTO_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "model.h"
#include "pb.h"
#include "util/strtab.h"
#include "util/u64map.h"
#include "view.h"

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

/* Scratch for a callstack's frame ids. */
struct pp_frames_buf {
	uint64_t *v;
	size_t cap;
};

/* Debug annotation names of the CPU samples (debug.function,
 * debug.cpu_ns, debug.samples in the trace processor's args). */
enum { DBG_FUNCTION = 1, DBG_CPU_NS, DBG_SAMPLES, DBG_NAMES };

/* ---- perfetto.c: the writer --------------------------------------------- */

/* Note the first error (later ones are its consequences). */
void pp_perfetto_fail(struct writer *w, int rc);
/* A string field, repaired to UTF-8 when it is not. */
void pp_perfetto_str(struct pp_pb *pb, int tag, const char *s);
/* Start a packet of sequence seq at time ts (0: none); end it. */
size_t pp_perfetto_packet(struct writer *w, int seq, uint64_t ts,
                          unsigned flags);
void pp_perfetto_packet_end(struct writer *w, size_t m);
/* The first packet of a sequence: incremental state starts empty. */
void pp_perfetto_sequence_start(struct writer *w, int seq);
uint64_t pp_perfetto_clock_now(clockid_t c);

/* ---- perfetto_intern.c: what a sequence has interned -------------------- */

/* The interning of one sequence for view v, into InternedData's fields
 * (in->tags and in->shared_strings may be changed after). */
int pp_perfetto_interning_init(struct interning *in, const struct pp_view *v);
void pp_perfetto_interning_free(struct interning *in);
/* The iids of an event name, of sample si's callstack (with its frames,
 * mappings and strings), of the CPU samples' argument names and of sample
 * si's leaf function: each written into the open interned data the first
 * time, never after. */
uint64_t pp_perfetto_event_name(struct writer *w, struct interning *in,
                                const char *name);
uint64_t pp_perfetto_callstack(struct writer *w, struct interning *in,
                               size_t si, uint64_t **frames, size_t *cap);
void pp_perfetto_debug_names(struct writer *w, struct interning *in);
uint64_t pp_perfetto_leaf_function(struct writer *w, struct interning *in,
                                   size_t si);

/* ---- perfetto_tracks.c: the process, its threads, their samples --------- */

/* The threads of p's timeline (wall: each gets a wall track too). */
void pp_perfetto_collect_threads(struct writer *w, const struct pp_profile *p,
                                 int wall);
void pp_perfetto_clock_snapshot(struct writer *w);
void pp_perfetto_process_track(struct writer *w);
void pp_perfetto_thread_tracks(struct writer *w);
void pp_perfetto_window_marks(struct writer *w, const struct pp_profile *p,
                              const char *what);
int pp_perfetto_samples(struct writer *w, const struct pp_view *v, int wall);

/* ---- perfetto_heap.c ---------------------------------------------------- */

int pp_perfetto_heap_dump(struct writer *w, const struct pp_view *v,
                          const struct pp_view *peak);

#endif

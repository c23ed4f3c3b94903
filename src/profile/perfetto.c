/*
 * The Perfetto trace renderer (/trace, ?format=perfetto).
 * Context: agent.
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
 *
 * The parts: this file, the writer's packets and the whole trace;
 * perfetto_intern.c, what each sequence interns; perfetto_tracks.c, the
 * track descriptors and the samples on them; perfetto_heap.c, the heap
 * dump (perfetto_internal.h, what they share).
 */
#include "perfetto.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perfetto_internal.h"
#include "util/utf8.h"

/* ---- the writer ---------------------------------------------------------- */

void pp_perfetto_fail(struct writer *w, int rc)
{
	if (!w->err)
		w->err = rc;
}

/* A string field: UTF-8, as the trace processor (and protoc) insist.
 * Most are already (the model's and the symbolizer's strings are), but the
 * process's comm and command line come straight from /proc. */
void pp_perfetto_str(struct pp_pb *pb, int tag, const char *s)
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

/* Start a packet of sequence seq at time ts (0: none). */
size_t pp_perfetto_packet(struct writer *w, int seq, uint64_t ts,
                          unsigned flags)
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

void pp_perfetto_packet_end(struct writer *w, size_t m)
{
	pp_pb_end(&w->pb, TRACE_PACKET, m);
	pp_pb_flush(&w->pb);
	if (w->pb.err)
		pp_perfetto_fail(w, w->pb.err);
}

/* The first packet of a sequence: incremental state starts empty. */
void pp_perfetto_sequence_start(struct writer *w, int seq)
{
	size_t m = pp_perfetto_packet(w, seq, 0, SEQ_CLEARED | SEQ_NEEDS);
	pp_pb_bool(&w->pb, TP_FIRST_ON_SEQUENCE, 1);
	pp_perfetto_packet_end(w, m);
}

uint64_t pp_perfetto_clock_now(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
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
		pp_perfetto_collect_threads(&w, cpu->p, 0);
	if (wall)
		pp_perfetto_collect_threads(&w, wall->p, 1);
	pp_perfetto_clock_snapshot(&w);
	pp_perfetto_process_track(&w);
	pp_perfetto_thread_tracks(&w);
	if (cpu)
		pp_perfetto_window_marks(&w, cpu->p, "CPU");
	if (wall)
		pp_perfetto_window_marks(&w, wall->p, "wall-clock");
	if (cpu && !w.err)
		pp_perfetto_samples(&w, cpu, 0);
	if (wall && !w.err)
		pp_perfetto_samples(&w, wall, 1);
	if (heap && !w.err)
		pp_perfetto_fail(&w, pp_perfetto_heap_dump(&w, heap, peak));
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

/*
 * A small streaming protobuf wire encoder (varints, length-delimited
 * submessages, packed repeated fields) that feeds zlib's gzip stream as it
 * goes, like Go's runtime/pprof: only the message being written is held
 * uncompressed, never the whole profile.
 * Context: agent.
 */
#ifndef PP_PB_H
#define PP_PB_H

#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

#include "util/buf.h"

struct pp_pb {
	struct pp_buf data; /* encoded, not yet compressed */
	int nest;           /* open submessages */
	int gzip;           /* 0: out gets the raw protobuf */
	z_stream z;
	struct pp_buf *out;
	int err; /* first error (negative errno); later calls do nothing */
};

/* Start encoding into out. level: zlib level 1..9, or 0 for no gzip. */
int pp_pb_init(struct pp_pb *pb, struct pp_buf *out, int level);
/* Flush everything and end the gzip stream. Returns 0 or pb->err. */
int pp_pb_finish(struct pp_pb *pb);
/* Release the encoder after an error (finish does it otherwise). */
void pp_pb_abort(struct pp_pb *pb);

size_t pp_pb_varint_len(uint64_t v);
void pp_pb_varint(struct pp_pb *pb, uint64_t v);
void pp_pb_uint64(struct pp_pb *pb, int tag, uint64_t v);
void pp_pb_uint64_opt(struct pp_pb *pb, int tag, uint64_t v); /* skips 0 */
void pp_pb_int64(struct pp_pb *pb, int tag, int64_t v);
void pp_pb_int64_opt(struct pp_pb *pb, int tag, int64_t v); /* skips 0 */
void pp_pb_bool(struct pp_pb *pb, int tag, int v); /* writes only true */
void pp_pb_double(struct pp_pb *pb, int tag, double v);
void pp_pb_bytes(struct pp_pb *pb, int tag, const void *p, size_t len);
void pp_pb_uint64s(struct pp_pb *pb, int tag, const uint64_t *v, size_t n);
void pp_pb_int64s(struct pp_pb *pb, int tag, const int64_t *v, size_t n);

/* Bytes as they are (no tag): to gzip something that is not a protobuf. */
void pp_pb_raw(struct pp_pb *pb, const void *p, size_t len);

/* Submessages: start returns a mark; end(tag, mark) prefixes what was
 * written since with its tag and length. */
size_t pp_pb_start(struct pp_pb *pb);
void pp_pb_end(struct pp_pb *pb, int tag, size_t mark);
/* Or drop what was written since start (an empty optional message). */
void pp_pb_drop(struct pp_pb *pb, size_t mark);
/* Compress what is pending if enough piled up (only outside messages). */
void pp_pb_flush(struct pp_pb *pb);

#endif

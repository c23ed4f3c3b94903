/* Streaming protobuf encoder into gzip.
 * Context: agent.
 */
#include "pb.h"

#include <errno.h>
#include <string.h>

#define FLUSH_AT (64 * 1024)

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_LEN = 2 };

int pp_pb_init(struct pp_pb *pb, struct pp_buf *out, int level)
{
	memset(pb, 0, sizeof *pb);
	pb->out = out;
	pb->gzip = level > 0;
	if (pb->gzip) {
		/* windowBits 15 + 16: a gzip header and trailer, as pprof
		 * expects of a profile served over HTTP. */
		if (deflateInit2(&pb->z, level, Z_DEFLATED, 15 + 16, 8,
		                 Z_DEFAULT_STRATEGY) != Z_OK)
			return pb->err = -ENOMEM;
	}
	return 0;
}

static void reserve_fail(struct pp_pb *pb)
{
	if (!pb->err)
		pb->err = -ENOMEM;
}

static void deflate_data(struct pp_pb *pb, int flush)
{
	if (pb->err)
		return;
	if (!pb->gzip) {
		pp_buf_append(pb->out, pb->data.data, pb->data.len);
		pb->data.len = 0;
		if (pb->out->failed)
			reserve_fail(pb);
		return;
	}
	pb->z.next_in = (unsigned char *)pb->data.data;
	pb->z.avail_in = (unsigned)pb->data.len;
	for (;;) {
		unsigned char chunk[16384];
		pb->z.next_out = chunk;
		pb->z.avail_out = sizeof chunk;
		int rc = deflate(&pb->z, flush);
		if (rc == Z_STREAM_ERROR) {
			pb->err = -EIO;
			return;
		}
		pp_buf_append(pb->out, chunk, sizeof chunk - pb->z.avail_out);
		if (pb->out->failed) {
			reserve_fail(pb);
			return;
		}
		if (flush == Z_FINISH
		        ? rc == Z_STREAM_END
		        : pb->z.avail_in == 0 && pb->z.avail_out != 0)
			break;
	}
	pb->data.len = 0;
}

void pp_pb_flush(struct pp_pb *pb)
{
	if (pb->nest == 0 && pb->data.len >= FLUSH_AT)
		deflate_data(pb, Z_NO_FLUSH);
}

int pp_pb_finish(struct pp_pb *pb)
{
	if (pb->data.failed)
		reserve_fail(pb);
	deflate_data(pb, Z_FINISH);
	pp_pb_abort(pb);
	return pb->err;
}

void pp_pb_abort(struct pp_pb *pb)
{
	if (pb->gzip)
		deflateEnd(&pb->z);
	pb->gzip = 0;
	pp_buf_free(&pb->data);
}

void pp_pb_raw(struct pp_pb *pb, const void *p, size_t len)
{
	const char *s = p;
	while (len && !pb->err) {
		size_t n = len < FLUSH_AT ? len : FLUSH_AT;
		pp_buf_append(&pb->data, s, n);
		pp_pb_flush(pb);
		s += n;
		len -= n;
	}
}

size_t pp_pb_varint_len(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static size_t put_varint(unsigned char *p, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		p[n++] = (unsigned char)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (unsigned char)v;
	return n;
}

void pp_pb_varint(struct pp_pb *pb, uint64_t v)
{
	unsigned char tmp[10];
	pp_buf_append(&pb->data, tmp, put_varint(tmp, v));
}

static void key(struct pp_pb *pb, int tag, int wire)
{
	pp_pb_varint(pb, (uint64_t)tag << 3 | (uint64_t)wire);
}

void pp_pb_uint64(struct pp_pb *pb, int tag, uint64_t v)
{
	key(pb, tag, WIRE_VARINT);
	pp_pb_varint(pb, v);
}

void pp_pb_double(struct pp_pb *pb, int tag, double v)
{
	uint64_t bits;
	unsigned char le[8];
	memcpy(&bits, &v, sizeof bits);
	for (int i = 0; i < 8; i++)
		le[i] = (unsigned char)(bits >> (8 * i));
	key(pb, tag, WIRE_FIXED64);
	pp_buf_append(&pb->data, le, sizeof le);
}

void pp_pb_uint64_opt(struct pp_pb *pb, int tag, uint64_t v)
{
	if (v)
		pp_pb_uint64(pb, tag, v);
}

/* int64 is the two's complement bit pattern as a varint (10 bytes when
 * negative), not zigzag: that is sint64. */
void pp_pb_int64(struct pp_pb *pb, int tag, int64_t v)
{
	pp_pb_uint64(pb, tag, (uint64_t)v);
}

void pp_pb_int64_opt(struct pp_pb *pb, int tag, int64_t v)
{
	if (v)
		pp_pb_int64(pb, tag, v);
}

void pp_pb_bool(struct pp_pb *pb, int tag, int v)
{
	if (v)
		pp_pb_uint64(pb, tag, 1);
}

void pp_pb_bytes(struct pp_pb *pb, int tag, const void *p, size_t len)
{
	key(pb, tag, WIRE_LEN);
	pp_pb_varint(pb, len);
	pp_buf_append(&pb->data, p, len);
}

void pp_pb_uint64s(struct pp_pb *pb, int tag, const uint64_t *v, size_t n)
{
	size_t len = 0;

	if (n == 0)
		return;
	for (size_t i = 0; i < n; i++)
		len += pp_pb_varint_len(v[i]);
	key(pb, tag, WIRE_LEN);
	pp_pb_varint(pb, len);
	for (size_t i = 0; i < n; i++)
		pp_pb_varint(pb, v[i]);
}

void pp_pb_int64s(struct pp_pb *pb, int tag, const int64_t *v, size_t n)
{
	/* Same bits, same encoding. */
	pp_pb_uint64s(pb, tag, (const uint64_t *)v, n);
}

size_t pp_pb_start(struct pp_pb *pb)
{
	pb->nest++;
	return pb->data.len;
}

void pp_pb_drop(struct pp_pb *pb, size_t mark)
{
	pb->nest--;
	if (!pb->data.failed && mark <= pb->data.len)
		pb->data.len = mark;
}

void pp_pb_end(struct pp_pb *pb, int tag, size_t mark)
{
	unsigned char head[20];
	size_t len, n;

	pb->nest--;
	if (pb->data.failed) {
		reserve_fail(pb);
		return;
	}
	len = pb->data.len - mark;
	n = put_varint(head, (uint64_t)tag << 3 | WIRE_LEN);
	n += put_varint(head + n, len);
	/* Make room for the header in front of the message. Messages are
	 * small (one sample, one location), so the move is cheap. */
	pp_buf_append(&pb->data, head, n);
	if (pb->data.failed) {
		reserve_fail(pb);
		return;
	}
	memmove(pb->data.data + mark + n, pb->data.data + mark, len);
	memcpy(pb->data.data + mark, head, n);
}

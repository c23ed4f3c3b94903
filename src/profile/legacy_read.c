/*
 * The legacy gperftools CPU profile reader. Pure (the agent and
 * pullprof-convert).
 *
 * The file is a sequence of "slots", words of the profiled program's
 * pointer size in its byte order. Nothing in the file says which: like
 * pprof, we try the four combinations on the header, which must read
 * 0 (header count), N >= 3 (header slots that follow), 0 (version); only
 * one of them can (see detect). Every later check names the byte offset of
 * the slot it is about.
 * Context: agent.
 */
#include "legacy_read.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* More header slots than this is no header (a byte-swapped one reads as
 * 3 << 56). */
#define MAX_HEADER_WORDS 1024

struct reader {
	const unsigned char *data;
	size_t len;
	unsigned ws; /* word size */
	int swap;
	char *err;
	size_t errlen;
};

static uint64_t word_at(const struct reader *r, size_t off)
{
	if (r->ws == 8) {
		uint64_t v;
		memcpy(&v, r->data + off, 8);
		return r->swap ? __builtin_bswap64(v) : v;
	}
	uint32_t v;
	memcpy(&v, r->data + off, 4);
	return r->swap ? __builtin_bswap32(v) : v;
}

__attribute__((format(printf, 3, 4))) static int
fail(struct reader *r, size_t off, const char *fmt, ...)
{
	va_list ap;
	int n = 0;

	if (r->err && r->errlen) {
		n = snprintf(r->err, r->errlen, "offset %zu: ", off);
		if (n < 0 || (size_t)n >= r->errlen)
			return -EINVAL;
		va_start(ap, fmt);
		vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* The word size and byte order under which the header reads 0, N, 0. */
static int detect(struct reader *r)
{
	static const struct {
		unsigned ws;
		int swap;
	} tries[] = {{8, 0}, {8, 1}, {4, 0}, {4, 1}};

	for (size_t i = 0; i < sizeof tries / sizeof tries[0]; i++) {
		r->ws = tries[i].ws;
		r->swap = tries[i].swap;
		if (r->len < 3 * r->ws)
			continue;
		uint64_t n = word_at(r, r->ws);
		if (word_at(r, 0) == 0 && n >= 3 && n <= MAX_HEADER_WORDS &&
		    word_at(r, 2 * r->ws) == 0)
			return 0;
	}
	if (r->len < 5 * 4)
		return fail(r, 0,
		            "the file has %zu bytes, too few for the header of "
		            "a gperftools CPU profile",
		            r->len);
	/* Say what is wrong in the format gperftools writes on this
	 * machine. */
	r->ws = sizeof(uintptr_t);
	r->swap = 0;
	if (r->len < 5 * r->ws)
		return fail(r, 0,
		            "the file has %zu bytes, too few for a header",
		            r->len);
	uint64_t w0 = word_at(r, 0), w1 = word_at(r, r->ws),
	         w2 = word_at(r, 2 * r->ws);
	if (w0 != 0)
		return fail(r, 0,
		            "not a gperftools CPU profile: header count "
		            "%#" PRIx64 ", must be 0",
		            w0);
	if (w1 < 3 || w1 > MAX_HEADER_WORDS)
		return fail(r, r->ws,
		            "not a gperftools CPU profile: %" PRIu64
		            " header slots, must be at least 3",
		            w1);
	return fail(r, 2 * r->ws,
	            "format version %" PRIu64 ", only version 0 is known", w2);
}

static int header(struct reader *r, struct pp_legacy *out, size_t *pos)
{
	const size_t ws = r->ws;
	uint64_t nwords = word_at(r, ws);

	/* Slots 0 and 1, then nwords slots: version, period, padding... */
	if ((2 + nwords) * ws > r->len)
		return fail(r, ws,
		            "the header has %" PRIu64
		            " slots but the file ends at byte %zu",
		            2 + nwords, r->len);
	out->period_us = word_at(r, 3 * ws);
	if (out->period_us == 0)
		return fail(r, 3 * ws,
		            "sampling period 0, must be at least 1 "
		            "microsecond");
	if (out->period_us > (uint64_t)INT64_MAX / 1000)
		return fail(r, 3 * ws,
		            "sampling period %" PRIu64
		            " microseconds is too long to express in "
		            "nanoseconds",
		            out->period_us);
	uint64_t pad = word_at(r, 4 * ws);
	if (pad != 0)
		return fail(r, 4 * ws, "header padding %#" PRIx64 ", must be 0",
		            pad);
	*pos = (2 + nwords) * ws;
	return 0;
}

static int records(struct reader *r, struct pp_legacy *out, size_t *pos)
{
	const size_t ws = r->ws;
	const int64_t period_ns = (int64_t)out->period_us * 1000;
	uintptr_t pcs[PP_LEGACY_MAX_DEPTH];
	size_t off = *pos;

	for (;;) {
		size_t left = (r->len - off) / ws;
		if (left < 2)
			return fail(r, off,
			            "the file ends before the trailer (0 1 0) "
			            "after %" PRIu64 " records: truncated?",
			            out->records);
		uint64_t count = word_at(r, off), depth = word_at(r, off + ws);
		left -= 2;
		if (count == 0) {
			/* Only the trailer has a count of 0: 0 1 0. */
			if (depth != 1 || left < 1 ||
			    word_at(r, off + 2 * ws) != 0) {
				if (left < 1 && depth == 1)
					return fail(r, off,
					            "the file ends inside the "
					            "trailer: truncated?");
				return fail(r, off,
				            "record with sample count 0 (only "
				            "the trailer 0 1 0 may have it; "
				            "this one has depth %" PRIu64 ")",
				            depth);
			}
			*pos = off + 3 * ws;
			return 0;
		}
		if (depth == 0)
			return fail(
			    r, off + ws,
			    "record with depth 0 (a record has at least "
			    "one PC)");
		if (depth > left)
			return fail(r, off + ws,
			            "record depth %" PRIu64
			            " exceeds the remaining %zu words",
			            depth, left);
		if (depth > PP_LEGACY_MAX_DEPTH)
			return fail(r, off + ws,
			            "record depth %" PRIu64
			            " is over the limit of %d",
			            depth, PP_LEGACY_MAX_DEPTH);
		if (count > (uint64_t)INT64_MAX / (uint64_t)period_ns ||
		    out->samples + count >
		        (uint64_t)INT64_MAX / (uint64_t)period_ns)
			return fail(r, off,
			            "sample count %" PRIu64
			            " makes the total CPU time overflow",
			            count);
		for (uint64_t i = 0; i < depth; i++) {
			uint64_t pc = word_at(r, off + (2 + i) * ws);
#if UINTPTR_MAX < UINT64_MAX
			if (pc > UINTPTR_MAX)
				return fail(r, off + (2 + i) * ws,
				            "PC %#" PRIx64 " is too wide", pc);
#endif
			pcs[i] = (uintptr_t)pc;
		}
		int64_t values[2] = {(int64_t)count,
		                     (int64_t)count * period_ns};
		if (pp_profile_add(out->profile, pcs, (size_t)depth, values,
		                   NULL, 0))
			return -ENOMEM;
		out->records++;
		out->samples += count;
		off += (2 + depth) * ws;
	}
}

int pp_legacy_read(const void *data, size_t len, struct pp_legacy *out,
                   char *err, size_t errlen)
{
	static const struct pp_value_type types[] = {{"samples", "count"},
	                                             {"cpu", "nanoseconds"}};
	static const struct pp_value_type period_type = {"cpu", "nanoseconds"};
	struct reader r = {data, len, 0, 0, err, errlen};
	size_t pos = 0, at = 0;
	char why[200];
	int rc;

	memset(out, 0, sizeof *out);
	if (err && errlen)
		err[0] = 0;
	rc = detect(&r);
	if (rc == 0)
		rc = header(&r, out, &pos);
	if (rc)
		return rc;
	out->word_size = r.ws;
	out->swapped = r.swap;
	out->profile = pp_profile_new(types, 2, &period_type,
	                              (int64_t)out->period_us * 1000);
	if (!out->profile)
		return -ENOMEM;
	rc = records(&r, out, &pos);
	if (rc)
		goto fail;

	out->maps_offset = pos;
	const char *text = (const char *)r.data + pos;
	size_t tlen = r.len - pos;
	for (size_t i = 0; i < tlen; i++)
		out->maps_lines += text[i] == '\n' || i + 1 == tlen;
	rc = pp_mappings_parse(text, tlen, NULL, PP_MAPS_STRICT, &out->maps,
	                       why, sizeof why, &at);
	if (rc == -EINVAL)
		rc = fail(&r, pos + at, "%s", why);
	if (rc)
		goto fail;
	return 0;
fail:
	pp_legacy_free(out);
	return rc;
}

void pp_legacy_free(struct pp_legacy *l)
{
	pp_profile_free(l->profile);
	pp_mappings_free(&l->maps);
	memset(l, 0, sizeof *l);
}

/*
 * Reader of the legacy gperftools CPU profile format (the binary file that
 * gperftools' libprofiler writes, and pprof's "legacy" CPU profile): header,
 * records "count, depth, PCs...", a trailer record 0 1 0, then the
 * /proc/PID/maps text of the profiled process. Pure: bytes in, profile model
 * and mappings out, no I/O, every field checked. Agent or tool context.
 * Context: agent.
 */
#ifndef PP_LEGACY_READ_H
#define PP_LEGACY_READ_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "symbols/symbols.h"

/* Deeper records are refused (gperftools writes at most 64 PCs). */
#define PP_LEGACY_MAX_DEPTH 4096

struct pp_legacy {
	/* Sample types samples/count and cpu/nanoseconds (count x period),
	 * period type cpu/nanoseconds, period = the file's period in ns.
	 * Stacks leaf first, as in the file: the first PC was sampled, the
	 * others are return addresses. Records with equal stacks are summed. */
	struct pp_profile *profile;
	/* The executable mappings of the maps text (no build IDs). */
	struct pp_mappings maps;
	uint64_t period_us; /* sampling period, microseconds */
	unsigned word_size; /* 8 or 4 (a 32-bit profile) */
	int swapped;        /* written in the other byte order */
	uint64_t records;   /* records before the trailer */
	uint64_t samples;   /* sum of their counts */
	size_t maps_offset; /* where the maps text starts */
	size_t maps_lines;  /* lines of maps text, executable or not */
};

/*
 * Read a legacy CPU profile of len bytes. 0; -EINVAL when the bytes are not
 * a well-formed profile, with the reason and where in err ("offset 40:
 * record depth 1000000 exceeds the remaining 12 words"); -ENOMEM. On error
 * out is left empty. Both byte orders and both word sizes are read.
 */
int pp_legacy_read(const void *data, size_t len, struct pp_legacy *out,
                   char *err, size_t errlen);
void pp_legacy_free(struct pp_legacy *l);

#endif

/* The pprof renderer: profile model -> gzipped perftools.profiles.Profile.
 * Context: agent.
 */
#ifndef PP_PPROF_H
#define PP_PPROF_H

#include "model.h"
#include "pb.h"
#include "symbols/symbols.h"
#include "util/buf.h"
#include "view.h"

/* Field numbers of profile.proto (the renderer writes them, the merge
 * reads and writes them). */
enum {
	PROFILE_SAMPLE_TYPE = 1,
	PROFILE_SAMPLE = 2,
	PROFILE_MAPPING = 3,
	PROFILE_LOCATION = 4,
	PROFILE_FUNCTION = 5,
	PROFILE_STRING_TABLE = 6,
	PROFILE_DROP_FRAMES = 7,
	PROFILE_KEEP_FRAMES = 8,
	PROFILE_TIME_NANOS = 9,
	PROFILE_DURATION_NANOS = 10,
	PROFILE_PERIOD_TYPE = 11,
	PROFILE_PERIOD = 12,
	PROFILE_COMMENT = 13,
	PROFILE_DEFAULT_SAMPLE_TYPE = 14,
	VALUETYPE_TYPE = 1,
	VALUETYPE_UNIT = 2,
	SAMPLE_LOCATION_ID = 1,
	SAMPLE_VALUE = 2,
	SAMPLE_LABEL = 3,
	LABEL_KEY = 1,
	LABEL_STR = 2,
	LABEL_NUM = 3,
	LABEL_NUM_UNIT = 4,
	MAPPING_ID = 1,
	MAPPING_START = 2,
	MAPPING_LIMIT = 3,
	MAPPING_OFFSET = 4,
	MAPPING_FILENAME = 5,
	MAPPING_BUILD_ID = 6,
	MAPPING_HAS_FUNCTIONS = 7,
	MAPPING_HAS_FILENAMES = 8,
	MAPPING_HAS_LINE_NUMBERS = 9,
	MAPPING_HAS_INLINE_FRAMES = 10,
	LOCATION_ID = 1,
	LOCATION_MAPPING_ID = 2,
	LOCATION_ADDRESS = 3,
	LOCATION_LINE = 4,
	LOCATION_IS_FOLDED = 5,
	LINE_FUNCTION_ID = 1,
	LINE_LINE = 2,
	FUNCTION_ID = 1,
	FUNCTION_NAME = 2,
	FUNCTION_SYSTEM_NAME = 3,
	FUNCTION_FILENAME = 4,
	FUNCTION_START_LINE = 5,
};

/* The mapping of synthetic frames ("[pullprof: stack truncated]", ...):
 * see pprof.c. */
#define PP_PPROF_MAPPING_SYNTHETIC "[pullprof]"

/* One of the renderer's own mappings (synthetic frames, unmapped
 * addresses): id, [0, limit), its name's string index, every has_* set. */
void pp_pprof_own_mapping(struct pp_pb *pb, uint64_t id, uint64_t limit,
                          int64_t name);

/* Encode the view into out, gzip_level 1..9, or 0 for a raw protobuf.
 * Returns 0 or a negative errno. */
int pp_pprof_write(const struct pp_view *v, int gzip_level, struct pp_buf *out);

/*
 * Encode p into out. With st (locked by the caller) the profile gets the
 * process's mappings and symbolized locations; with NULL, locations carry
 * addresses only. Returns 0 or a negative errno.
 */
int pp_pprof_render(const struct pp_profile *p, struct pp_symtab *st,
                    int gzip_level, struct pp_buf *out);

#endif

/*
 * Merging the pprof profiles of several processes into one (a server's
 * forked workers, each with its own agent): every sample keeps its stack,
 * values and labels and gains the label pid = "<its process>". A pure
 * in-memory function; the parts are read with the pprof decoder
 * (pprof_read.h).
 * Context: agent.
 */
#ifndef PP_MERGE_H
#define PP_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "pprof_read.h"

struct pp_merge_part {
	int pid;          /* the process this profile came from */
	const void *data; /* a pprof protobuf as an agent answers it, gzipped
	                     or not (the gzip magic says which) */
	size_t len;
};

/* What a merge did (for logs and tests). */
struct pp_merge_stats {
	size_t bytes;        /* the merged tables' memory at the end */
	uint64_t samples;    /* samples kept */
	uint64_t over_limit; /* samples charged to the limit frame */
	size_t left_out;     /* parts left out (their types differ) */
};

struct pp_merge_opts {
	/* Bound on the memory of the merged tables (strings, functions,
	 * locations, mappings, samples), like PULLPROF_MAX_PROFILE_MB for one
	 * process; 0: none. Past it, further samples are charged to one
	 * synthetic frame, PP_PROFILE_LIMIT_FRAME, per pid. Not counted: the
	 * part being decoded (a few times its protobuf's size, freed before
	 * the next) and the gzipped answer. */
	size_t max_bytes;
	const char *const *notes; /* comments to add (e.g. "pid 12: no answer
	                             within 40 s"), may be NULL */
	size_t nnotes;
	struct pp_merge_stats *stats; /* filled in when not NULL */
};

/*
 * Merge n parts into one gzipped pprof profile: 0, with *out (malloc'ed,
 * free() it) and *outlen; or a negative errno and a sentence in err:
 * -EINVAL for input that is not a profile (it names the part, its pid and
 * what is wrong) or when no part is usable, -ENOMEM.
 *
 * Mappings and locations stay per process; functions with the same name,
 * system name, file and start line are shared; strings are interned again.
 * A part whose sample types or period type differ from the first usable
 * part's is left out, and a comment says so. time_nanos is the earliest,
 * duration_nanos the longest; period, default sample type and drop/keep
 * frames are the first usable part's; comments are all of them (each
 * once), then the notes.
 */
int pp_merge_pprof(const struct pp_merge_part *parts, size_t n,
                   const struct pp_merge_opts *o, char **out, size_t *outlen,
                   char *err, size_t errlen);

#endif

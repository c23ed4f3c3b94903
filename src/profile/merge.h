/*
 * Merging the pprof profiles of several processes into one (a server's
 * forked workers, each with its own agent): every sample keeps its stack,
 * values and labels and gains the label pid = "<its process>". A pure
 * in-memory function, and the pprof decoder under it. Agent context.
 */
#ifndef PP_MERGE_H
#define PP_MERGE_H

#include <stddef.h>
#include <stdint.h>

/* The most bytes one part may inflate to (a gzip bomb is refused). */
#define PP_MERGE_MAX_PART ((size_t)1 << 30)

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

/* A decoded profile. String fields are indices into strs (checked to be in
 * range); references between messages are resolved to indices into the
 * arrays here (checked to exist). */
struct pp_merge_vt {
	uint64_t type, unit;
};

struct pp_merge_label {
	uint64_t key, str, unit;
	int64_t num;
};

struct pp_merge_sample {
	size_t locs, vals, labels; /* first index into the flat arrays */
	uint32_t nlocs, nvals, nlabels;
};

struct pp_merge_mapping {
	uint64_t id, start, limit, offset, filename, build_id;
	unsigned char has_functions, has_filenames, has_line_numbers,
	    has_inline_frames;
};

struct pp_merge_line {
	uint64_t function; /* index + 1 into functions; 0: none */
	int64_t line;
};

struct pp_merge_location {
	uint64_t id, mapping; /* mapping: index + 1 into mappings; 0: none */
	uint64_t address;
	size_t lines; /* first index into the lines array */
	uint32_t nlines;
	int is_folded;
};

struct pp_merge_function {
	uint64_t id, name, system_name, filename;
	int64_t start_line;
};

struct pp_merge_decoded {
	unsigned char *inflated; /* the protobuf, when it came gzipped */
	struct pp_merge_str {
		const unsigned char *p; /* into the protobuf: no NUL */
		size_t len;
	} * strs;
	size_t nstrs;
	struct pp_merge_vt *types, period_type;
	size_t ntypes;
	struct pp_merge_sample *samples;
	size_t nsamples;
	uint64_t *locs; /* location indices of every sample, flat */
	size_t nlocs;
	int64_t *vals;
	size_t nvals;
	struct pp_merge_label *labels;
	size_t nlabels;
	struct pp_merge_mapping *mappings;
	size_t nmappings;
	struct pp_merge_location *locations;
	size_t nlocations;
	struct pp_merge_line *lines;
	size_t nlines;
	struct pp_merge_function *functions;
	size_t nfunctions;
	uint64_t *comments;
	size_t ncomments;
	uint64_t drop_frames, keep_frames, default_sample_type;
	int64_t time_nanos, duration_nanos, period;
	size_t caps[11]; /* the arrays' capacities, while decoding */
};

/* Decode a profile (gzipped or not): 0, or -EINVAL with a sentence in err
 * saying at which byte of the protobuf what is wrong, or -ENOMEM. Free d
 * with pp_merge_decoded_free in every case. */
int pp_merge_decode(const void *data, size_t len, struct pp_merge_decoded *d,
                    char *err, size_t errlen);
void pp_merge_decoded_free(struct pp_merge_decoded *d);

#endif

/*
 * The pprof decoder: a profile.proto message (gzipped or not, as an agent
 * answers it) read into flat arrays, every length, varint, string index and
 * ID checked, so that what it returns can be used without further checks.
 * Pure: bytes in, arrays out. The merge of several processes' profiles
 * (merge.h), pullprof-convert --merge and the fuzz target read with it.
 * Context: agent.
 */
#ifndef PP_PPROF_READ_H
#define PP_PPROF_READ_H

#include <stddef.h>
#include <stdint.h>

/* The most bytes one profile may inflate to (a gzip bomb is refused). */
#define PP_PPROF_READ_MAX ((size_t)1 << 30)

/* A decoded profile. String fields are indices into strs (checked to be in
 * range); references between messages are resolved to indices into the
 * arrays here (checked to exist). */
struct pp_pprof_vt {
	uint64_t type, unit;
};

struct pp_pprof_label {
	uint64_t key, str, unit;
	int64_t num;
};

struct pp_pprof_sample {
	size_t locs, vals, labels; /* first index into the flat arrays */
	uint32_t nlocs, nvals, nlabels;
};

struct pp_pprof_mapping {
	uint64_t id, start, limit, offset, filename, build_id;
	unsigned char has_functions, has_filenames, has_line_numbers,
	    has_inline_frames;
};

struct pp_pprof_line {
	uint64_t function; /* index + 1 into functions; 0: none */
	int64_t line;
};

struct pp_pprof_location {
	uint64_t id, mapping; /* mapping: index + 1 into mappings; 0: none */
	uint64_t address;
	size_t lines; /* first index into the lines array */
	uint32_t nlines;
	int is_folded;
};

struct pp_pprof_function {
	uint64_t id, name, system_name, filename;
	int64_t start_line;
};

struct pp_pprof_decoded {
	unsigned char *inflated; /* the protobuf, when it came gzipped */
	struct pp_pprof_str {
		const unsigned char *p; /* into the protobuf: no NUL */
		size_t len;
	} * strs;
	size_t nstrs;
	struct pp_pprof_vt *types, period_type;
	size_t ntypes;
	struct pp_pprof_sample *samples;
	size_t nsamples;
	uint64_t *locs; /* location indices of every sample, flat */
	size_t nlocs;
	int64_t *vals;
	size_t nvals;
	struct pp_pprof_label *labels;
	size_t nlabels;
	struct pp_pprof_mapping *mappings;
	size_t nmappings;
	struct pp_pprof_location *locations;
	size_t nlocations;
	struct pp_pprof_line *lines;
	size_t nlines;
	struct pp_pprof_function *functions;
	size_t nfunctions;
	uint64_t *comments;
	size_t ncomments;
	uint64_t drop_frames, keep_frames, default_sample_type;
	int64_t time_nanos, duration_nanos, period;
	size_t caps[11]; /* the arrays' capacities, while decoding */
};

/* Decode a profile (gzipped or not): 0, or -EINVAL with a sentence in err
 * saying at which byte of the protobuf what is wrong, or -ENOMEM. Free d
 * with pp_pprof_read_free in every case. */
int pp_pprof_read(const void *data, size_t len, struct pp_pprof_decoded *d,
                  char *err, size_t errlen);
void pp_pprof_read_free(struct pp_pprof_decoded *d);

#endif

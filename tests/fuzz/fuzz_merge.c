/*
 * libFuzzer target: the pprof decoder and the merge (pprof_read.c,
 * merge.c). Built by scripts/fuzz.sh, not by the normal build. Any input
 * must give 0 or -EINVAL with a message, never a crash, a leak or
 * undefined behaviour; what decodes must merge (alone, and twice with a
 * tight memory bound), and the merged profile must decode again with
 * every sample kept or charged to the limit frame, each with its pid
 * label.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "profile/merge.h"

static void check_merged(const char *out, size_t len, uint64_t want)
{
	struct pp_pprof_decoded m;
	char err[256];
	if (pp_pprof_read(out, len, &m, err, sizeof err))
		abort(); /* the merge wrote something that does not decode */
	uint64_t values = 0;
	for (size_t i = 0; i < m.nsamples; i++) {
		const struct pp_pprof_sample *s = &m.samples[i];
		int pids = 0;
		for (uint32_t k = 0; k < s->nlabels; k++) {
			const struct pp_pprof_str *key =
			    &m.strs[m.labels[s->labels + k].key];
			pids += key->len == 3 && memcmp(key->p, "pid", 3) == 0;
		}
		if (pids != 1)
			abort();
		for (uint32_t k = 0; k < s->nvals && k < 1; k++)
			values += (uint64_t)m.vals[s->vals + k];
	}
	if (values != want)
		abort(); /* the first value's total changed */
	pp_pprof_read_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pp_pprof_decoded d;
	char err[256] = "";
	int rc = pp_pprof_read(data, size, &d, err, sizeof err);
	if (rc == -EINVAL && !err[0])
		abort(); /* every error says what */
	if (rc && rc != -EINVAL)
		abort();
	uint64_t first = 0;
	for (size_t i = 0; !rc && i < d.nsamples; i++)
		if (d.samples[i].nvals)
			first += (uint64_t)d.vals[d.samples[i].vals];
	pp_pprof_read_free(&d);

	struct pp_merge_part parts[2] = {{1, data, size}, {2, data, size}};
	struct pp_merge_opts o = {0};
	char *out;
	size_t len;
	int mrc = pp_merge_pprof(parts, 1, &o, &out, &len, err, sizeof err);
	if (mrc != rc)
		abort(); /* the merge accepts what the decoder accepts */
	if (!mrc) {
		check_merged(out, len, first);
		free(out);
		o.max_bytes = 1 + size % 70000;
		if (pp_merge_pprof(parts, 2, &o, &out, &len, err, sizeof err))
			abort();
		check_merged(out, len, 2 * first);
		free(out);
	}
	return 0;
}

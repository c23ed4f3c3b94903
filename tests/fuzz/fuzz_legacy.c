/*
 * libFuzzer target: the legacy CPU profile reader (and, for what it
 * accepts, the pprof renderer without symbols). Built by scripts/fuzz.sh,
 * not by the normal build. Any input must give 0 or -EINVAL, never a crash,
 * a leak or undefined behaviour; an error always comes with a message.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "profile/legacy_read.h"
#include "profile/pprof.h"
#include "util/buf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pp_legacy l;
	char err[256];
	int rc = pp_legacy_read(data, size, &l, err, sizeof err);

	if (rc == -EINVAL) {
		if (strncmp(err, "offset ", 7) != 0)
			abort(); /* every error says where */
		return 0;
	}
	if (rc)
		abort(); /* ENOMEM: not with these sizes */
	uint64_t samples = 0;
	for (const struct pp_sample *s = l.profile->first; s; s = s->next) {
		if (s->depth == 0 || s->values[0] <= 0 ||
		    s->values[1] != s->values[0] * l.profile->period)
			abort();
		samples += (uint64_t)s->values[0];
	}
	if (samples != l.samples || l.maps_offset > size)
		abort();
	for (size_t i = 1; i < l.maps.n; i++)
		if (l.maps.v[i].start < l.maps.v[i - 1].limit)
			abort();
	struct pp_buf out = {0};
	if (pp_pprof_render(l.profile, NULL, 0, &out))
		abort();
	pp_buf_free(&out);
	pp_legacy_free(&l);
	return 0;
}

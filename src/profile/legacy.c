/*
 * ?format=legacy: the gperftools CPU profile format, as its specification
 * (gperftools' cpuprofile-fileformat) lays it out, in 64-bit native words:
 *
 *   header   0, 3, 0, sampling period in microseconds, 0
 *   records  count, n, pc[0] .. pc[n-1]     (pc[0] the sampled PC)
 *   trailer  0, 1, 0
 *   then the text of /proc/self/maps, which tools use to find binaries.
 *
 * Only the count value survives (the format has no other); google-pprof
 * and go tool pprof multiply it by the period.
 * Context: agent.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "render.h"
#include "util/proc.h"

#define MAPS_MAX (64u << 20)

static void word(struct pp_buf *b, uint64_t w)
{
	pp_buf_append(b, &w, sizeof w);
}

int pp_legacy_write(const struct pp_profile *p, struct pp_buf *out)
{
	int count = -1;
	for (size_t i = 0; i < p->ntypes; i++)
		if (strcmp(p->types[i].unit, "count") == 0) {
			count = (int)i;
			break;
		}
	if (count < 0 || !p->period_type.unit ||
	    strcmp(p->period_type.unit, "nanoseconds") != 0)
		return -EINVAL;

	char *maps;
	size_t maps_len;
	int rc =
	    pp_proc_read_file("/proc/self/maps", MAPS_MAX, &maps, &maps_len);
	if (rc)
		return rc;

	int64_t us = p->period / 1000;
	word(out, 0);
	word(out, 3);
	word(out, 0);
	word(out, (uint64_t)(us > 0 ? us : 1));
	word(out, 0);
	for (const struct pp_sample *s = p->first; s; s = s->next) {
		/* A record of count 0 would read as the trailer, one of no
		 * PCs has nothing to show: neither is written. */
		if (s->values[count] <= 0 || !s->depth)
			continue;
		word(out, (uint64_t)s->values[count]);
		word(out, s->depth);
		for (uint32_t k = 0; k < s->depth; k++)
			word(out, s->pcs[k]);
	}
	word(out, 0);
	word(out, 1);
	word(out, 0);
	pp_buf_append(out, maps, maps_len);
	free(maps);
	return out->failed ? -ENOMEM : 0;
}

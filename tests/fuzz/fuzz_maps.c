/*
 * libFuzzer target: the maps-text parser (/proc/PID/maps format), strict
 * and lenient. Built by scripts/fuzz.sh. Whatever the text, the result is
 * sorted, non-overlapping (strict), with IDs 1..n each used once, and each
 * mapping's name valid UTF-8: its path itself when that is.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "symbols/symbols.h"
#include "util/utf8.h"

static void check(const struct pp_mappings *m, int strict)
{
	unsigned char seen[4096] = {0};
	for (size_t i = 0; i < m->n; i++) {
		const struct pp_mapping *mp = &m->v[i];
		if (mp->limit <= mp->start || !mp->path || !mp->build_id ||
		    mp->id == 0 || mp->id > m->n)
			abort();
		if (mp->id < sizeof seen && seen[mp->id]++)
			abort();
		if (!mp->name || !pp_utf8_valid(mp->name, strlen(mp->name)))
			abort();
		if (pp_utf8_valid(mp->path, strlen(mp->path)) &&
		    mp->name != mp->path)
			abort();
		if (i && mp->start < m->v[i - 1].start)
			abort();
		if (strict && i && mp->start < m->v[i - 1].limit)
			abort();
		if (pp_mappings_find(m, mp->start) == NULL && strict)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pp_mappings m;
	char err[200];
	size_t at = 0;

	for (int strict = 0; strict < 2; strict++) {
		int rc = pp_mappings_parse((const char *)data, size, NULL,
		                           strict ? PP_MAPS_STRICT : 0, &m, err,
		                           sizeof err, &at);
		if (rc == -EINVAL) {
			if (!strict || !err[0] || at > size)
				abort();
			continue;
		}
		if (rc)
			abort();
		check(&m, strict);
		pp_mappings_free(&m);
	}
	return 0;
}

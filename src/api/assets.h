/* Files from web/, embedded at build time by scripts/embed-assets.sh.
 * Context: agent.
 */
#ifndef PP_ASSETS_H
#define PP_ASSETS_H

#include <stddef.h>

struct pp_asset {
	const char *name; /* path below web/ */
	const char *content_type;
	const unsigned char *data; /* NUL-terminated; len excludes the NUL */
	size_t len;
};

extern const struct pp_asset pp_assets[];
extern const size_t pp_assets_count;

const struct pp_asset *pp_asset_find(const char *name);

#endif

/* Look-up of the embedded web/ files.
 * Context: agent.
 */
#include "assets.h"

#include <string.h>

const struct pp_asset *pp_asset_find(const char *name)
{
	for (size_t i = 0; i < pp_assets_count; i++)
		if (strcmp(pp_assets[i].name, name) == 0)
			return &pp_assets[i];
	return NULL;
}

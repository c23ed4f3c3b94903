/* The unwind-table registry (see unwind.h). pp_registry_enter, _leave and
 * _covers are hot/unsafe context; the rest is agent context. */
#ifndef PP_REGISTRY_H
#define PP_REGISTRY_H

#include <stdint.h>

/* Bracket every use of the published ranges, so the agent knows when an
 * old snapshot has no reader left. */
void pp_registry_enter(void);
void pp_registry_leave(void);
/* Is ip in the code of an image whose unwind table libunwind has? */
int pp_registry_covers(uintptr_t ip);
/* Agent or host context: an image is about to be unloaded (dlclose); until
 * the next refresh no unwind table is trusted. */
void pp_registry_unloading(void);

#endif

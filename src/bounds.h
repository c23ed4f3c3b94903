/*
 * Bounds that size buffers, each in one place: the settings table takes
 * its ranges from here, and every buffer they size is declared with them.
 * Safe to include anywhere (hot context too): macros only.
 * Context: signal.
 */
#ifndef PP_BOUNDS_H
#define PP_BOUNDS_H

/* The deepest stack recorded (PULLPROF_MAX_DEPTH's upper bound): the CPU
 * ring's records, the collector's frame buffer and the heap sampler's are
 * sized by it. */
#define PP_MAX_DEPTH 512
/* The shallowest PULLPROF_MAX_DEPTH may ask for. */
#define PP_MIN_DEPTH 8

#endif

/* Clocks in nanoseconds, and deadlines for timed waits. Safe in any context
 * (clock_gettime is async-signal-safe). */
#ifndef PP_CLOCK_H
#define PP_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds in a second. */
#define PP_NS_PER_SEC 1000000000u

static inline uint64_t pp_clock_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The time on clock c, ns from now: a deadline for a timed wait on a
 * condition variable using that clock. */
static inline struct timespec pp_clock_after(clockid_t c, uint64_t ns)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	ts.tv_sec += (time_t)(ns / 1000000000u);
	ts.tv_nsec += (long)(ns % 1000000000u);
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	return ts;
}

#endif

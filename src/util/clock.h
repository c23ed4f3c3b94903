/* Clocks in nanoseconds, and deadlines for timed waits. Safe in any context
 * (clock_gettime is async-signal-safe).
 * Context: signal.
 */
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
	return (uint64_t)ts.tv_sec * PP_NS_PER_SEC + (uint64_t)ts.tv_nsec;
}

/* The time on clock c, ns from now: a deadline for a timed wait on a
 * condition variable using that clock. */
static inline struct timespec pp_clock_after(clockid_t c, uint64_t ns)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	ts.tv_sec += (time_t)(ns / PP_NS_PER_SEC);
	ts.tv_nsec += (long)(ns % PP_NS_PER_SEC);
	if (ts.tv_nsec >= (long)PP_NS_PER_SEC) {
		ts.tv_sec++;
		ts.tv_nsec -= (long)PP_NS_PER_SEC;
	}
	return ts;
}

/* Seconds, as a double: a timespec, or a count of nanoseconds. */
static inline double pp_timespec_seconds(const struct timespec *ts)
{
	return (double)ts->tv_sec + (double)ts->tv_nsec / PP_NS_PER_SEC;
}

static inline double pp_ns_to_seconds(uint64_t ns)
{
	return (double)ns / PP_NS_PER_SEC;
}

/* Seconds elapsed on the monotonic clock since *since. */
static inline double pp_seconds_since(const struct timespec *since)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - since->tv_sec) +
	       (double)(now.tv_nsec - since->tv_nsec) / PP_NS_PER_SEC;
}

#endif

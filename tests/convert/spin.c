/*
 * CPU work in known functions, for gperftools' own profiler (run with
 * CPUPROFILE=... LD_PRELOAD=libprofiler.so): the converter's output must
 * show what google-pprof shows for the same file. Not linked with pullprof.
 *   spin SECONDS  (of CPU time, so a loaded machine only makes it slower)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static __attribute__((noinline)) double spin_light(double x)
{
	for (int i = 0; i < 2000; i++)
		x = x * 1.0000001 + 0.5;
	return x;
}

static __attribute__((noinline)) double spin_heavy(double x)
{
	for (int i = 0; i < 6000; i++)
		x = x * 0.9999999 + 0.25;
	return x;
}

static __attribute__((noinline)) double spin_both(double x)
{
	return spin_light(x) + spin_heavy(x);
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 1.0, end = now() + secs;
	volatile double x = 0;

	while (now() < end)
		x = x + spin_both(x);
	printf("%g\n", (double)x);
	return 0;
}

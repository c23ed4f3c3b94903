/*
 * The deep stack of tests/arm64/cpuhost.c, built once per variant (the
 * test's cross build passes -DVARIANT=NAME and the variant's flags): every
 * function's name ends in _NAME, so one process holds them all and a
 * profile tells them apart.
 *
 * deep_descend_NAME is a thread's start routine: it goes DEPTH frames down
 * (deep_even/deep_odd alternating, every third frame with a variable-length
 * array so that its CFA is x29-based), then bottom, then spins in the leaf
 * deep_leaf (which never stores x30) until told to stop.
 */
#include <stdint.h>

#define CAT2(a, b) a##_##b
#define CAT(a, b) CAT2(a, b)
#define F(name) CAT(name, VARIANT)
#define KEEP __attribute__((noinline, noclone, used))

extern volatile int cpu_stop;
extern int cpu_depth;
void cpu_arrived(void);
void cpu_name_thread(const char *name);

KEEP uint64_t F(deep_leaf)(uint64_t x);
KEEP uint64_t F(bottom)(uint64_t x);
KEEP uint64_t F(deep_even)(int n, uint64_t x);
KEEP uint64_t F(deep_odd)(int n, uint64_t x);
void *F(deep_descend)(void *arg);

uint64_t F(deep_leaf)(uint64_t x)
{
	while (!__atomic_load_n(&cpu_stop, __ATOMIC_RELAXED))
		for (int k = 0; k < 1000; k++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
		}
	return x;
}

/* The arithmetic after each call keeps it from being a tail call: every
 * level is a frame of its own. */
uint64_t F(bottom)(uint64_t x)
{
	cpu_arrived();
	return F(deep_leaf)(x) * 7 + 3;
}

uint64_t F(deep_even)(int n, uint64_t x)
{
	if (n <= 0)
		return F(bottom)(x) * 3 + 1;
	if (n % 3 == 0) {
		volatile char pad[16 + (x & 15)];
		pad[0] = (char)x;
		return F(deep_odd)(n - 1, x + (uint64_t)pad[0]) * 3 + 1;
	}
	return F(deep_odd)(n - 1, x + 1) * 3 + 1;
}

uint64_t F(deep_odd)(int n, uint64_t x)
{
	if (n <= 0)
		return F(bottom)(x) * 5 + 2;
	if (n % 3 == 0) {
		volatile char pad[24 + (x & 7)];
		pad[0] = (char)x;
		return F(deep_even)(n - 1, x ^ (uint64_t)pad[0]) * 5 + 2;
	}
	return F(deep_even)(n - 1, x ^ 1) * 5 + 2;
}

#define STR2(x) #x
#define STR(x) STR2(x)

void *F(deep_descend)(void *arg)
{
	static volatile uint64_t sink;
	cpu_name_thread("deep-" STR(VARIANT));
	sink +=
	    F(deep_even)(cpu_depth - 1, (uintptr_t)arg + 88172645463325252ULL);
	return (void *)(uintptr_t)(sink & 1);
}

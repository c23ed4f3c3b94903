// hostile: a host that does what makes signal handlers deadlock or crash,
// all at once, while the tests profile it at 1000 Hz: threads that loop
// dlopen/dlclose (the loader lock libunwind would otherwise need), C++
// throw/catch (the unwinder's own locks), malloc/free, and plain CPU work.
// After SECONDS it prints each thread's iteration count and exits 0.
//
//   hostile DL_LIBRARY SECONDS
#include <dlfcn.h>
#include <pthread.h>
#include <stdexcept>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pullprof.h>

static volatile int done;
static const char *dl_path;
static unsigned long counts[4];

static void *dl_loop(void *)
{
	while (!__atomic_load_n(&done, __ATOMIC_RELAXED)) {
		void *h = dlopen(dl_path, RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			fprintf(stderr, "dlopen: %s\n", dlerror());
			exit(3);
		}
		dlclose(h);
		counts[0]++;
	}
	return nullptr;
}

__attribute__((noinline)) static void thrower(int depth)
{
	if (depth == 0)
		throw std::runtime_error("hostile");
	thrower(depth - 1);
}

static void *throw_loop(void *)
{
	while (!__atomic_load_n(&done, __ATOMIC_RELAXED)) {
		try {
			thrower(8);
		} catch (const std::exception &) {
			counts[1]++;
		}
	}
	return nullptr;
}

static void *malloc_loop(void *)
{
	void *keep[64] = {};
	unsigned x = 1;
	while (!__atomic_load_n(&done, __ATOMIC_RELAXED)) {
		x = x * 1103515245u + 12345u;
		unsigned i = x % 64;
		free(keep[i]);
		keep[i] = malloc(16 + x % 8192);
		counts[2]++;
	}
	for (void *p : keep)
		free(p);
	return nullptr;
}

static void *cpu_loop(void *)
{
	volatile unsigned long x = 1;
	while (!__atomic_load_n(&done, __ATOMIC_RELAXED)) {
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005ul + 1;
		counts[3]++;
	}
	return nullptr;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: hostile DL_LIBRARY SECONDS\n");
		return 2;
	}
	dl_path = argv[1];
	int rc = pullprof_start(nullptr);
	if (rc) {
		fprintf(stderr, "hostile: %s\n", pullprof_strerror(rc));
		return 1;
	}
	setvbuf(stdout, nullptr, _IOLBF, 0);
	pthread_t t[4];
	void *(*fn[4])(void *) = {dl_loop, throw_loop, malloc_loop, cpu_loop};
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], nullptr, fn[i], nullptr);
	printf("port %d\n", pullprof_port());
	sleep((unsigned)atoi(argv[2]));
	__atomic_store_n(&done, 1, __ATOMIC_RELAXED);
	for (pthread_t th : t)
		pthread_join(th, nullptr);
	printf("dlopen=%lu throw=%lu malloc=%lu cpu=%lu\n", counts[0],
	       counts[1], counts[2], counts[3]);
	pullprof_stop();
	return 0;
}

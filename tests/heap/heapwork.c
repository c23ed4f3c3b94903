/*
 * A host for the heap profile tests: it links libpullprof, starts the agent
 * and allocates known amounts from distinct functions (all named hw_*, kept
 * out of line) on command, printing the truth the test compares the profile
 * with. Commands on stdin, one answer line each on stdout:
 *
 *   accuracy        small, large and mixed allocations, part freed
 *                   -> "truth FUNC ALLOC_BYTES INUSE_BYTES ..." (one line)
 *   churn BYTES SIZE  allocate and free BYTES in blocks of SIZE
 *   family          every function of the malloc family, kept live
 *   family-free     free them all with free()
 *   chain BYTES     grow one block by realloc up to BYTES, kept live
 *   chain-free
 *   cxx             new/delete from C++ (heapwork_cxx.cc)
 *   badalloc        a new too large to serve: is its std::bad_alloc caught
 *                   (it passes through pullprof's operator new)?
 *   peak BYTES      allocate BYTES, then free them all
 *   delta BYTES     allocate BYTES (kept live) in hw_delta_work
 *   stress THREADS SECONDS  malloc/free/realloc from many threads
 *   fork            fork while threads allocate; the child allocates too
 *   jemalloc        is the next allocator jemalloc? (via its mallctl)
 *   dlcycle PATH [N]  dlopen PATH and dlclose it, N times (1)
 *   stacks N        allocate (and free) 64 bytes from each of N distinct
 *                   stacks (up to 2^16), under hw_left/hw_right chains
 *   quit
 */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pullprof.h>

#define NOINLINE __attribute__((noinline, noclone))

void hw_cxx_run(unsigned long long *alloc, unsigned long long *inuse);
int hw_cxx_bad_alloc(void);

static void *volatile sink;

static void touch(void *p, size_t n)
{
	if (p && n) {
		((volatile char *)p)[0] = 1;
		((volatile char *)p)[n - 1] = 1;
	}
	__atomic_store_n(&sink, p, __ATOMIC_RELAXED);
}

static void fail(const char *what)
{
	printf("fail %s: %s\n", what, strerror(errno));
	fflush(stdout);
	exit(1);
}

/* ---- accuracy ----------------------------------------------------------- */

static void **small, **large, **mixed;
static size_t nsmall, nlarge, nmixed;

NOINLINE static void hw_small_objects(size_t n, size_t size)
{
	for (size_t i = 0; i < n; i++) {
		small[i] = malloc(size);
		touch(small[i], size);
	}
	nsmall = n;
}

NOINLINE static void hw_large_blocks(size_t n, size_t size)
{
	for (size_t i = 0; i < n; i++) {
		large[i] = malloc(size);
		touch(large[i], size);
	}
	nlarge = n;
}

static const size_t mixed_sizes[] = {24, 200, 1500, 9000, 70000};

NOINLINE static void hw_mixed_sizes(size_t n)
{
	for (size_t i = 0; i < n; i++) {
		size_t s = mixed_sizes[i % 5];
		mixed[i] = malloc(s);
		touch(mixed[i], s);
	}
	nmixed = n;
}

static void accuracy(void)
{
	unsigned long long sa, si = 0, la, li = 0, ma = 0, mi = 0;
	const size_t ns = 250000, ss = 64, nl = 40, ls = 1 << 20, nm = 20000;

	/* The arrays of pointers are not part of the measured functions. */
	small = calloc(ns, sizeof *small);
	large = calloc(nl, sizeof *large);
	mixed = calloc(nm, sizeof *mixed);
	hw_small_objects(ns, ss);
	hw_large_blocks(nl, ls);
	hw_mixed_sizes(nm);
	sa = (unsigned long long)ns * ss;
	la = (unsigned long long)nl * ls;
	/* Free every other small object, a quarter of the large blocks and
	 * every third mixed one. */
	for (size_t i = 0; i < nsmall; i++)
		if (i % 2) {
			free(small[i]);
			small[i] = NULL;
		} else {
			si += ss;
		}
	for (size_t i = 0; i < nlarge; i++)
		if (i % 4 == 0) {
			free(large[i]);
			large[i] = NULL;
		} else {
			li += ls;
		}
	for (size_t i = 0; i < nmixed; i++) {
		size_t s = mixed_sizes[i % 5];
		ma += s;
		if (i % 3 == 0) {
			free(mixed[i]);
			mixed[i] = NULL;
		} else {
			mi += s;
		}
	}
	printf("truth hw_small_objects %llu %llu hw_large_blocks %llu %llu "
	       "hw_mixed_sizes %llu %llu\n",
	       sa, si, la, li, ma, mi);
}

NOINLINE static void hw_churn(unsigned long long bytes, size_t size)
{
	for (unsigned long long done = 0; done < bytes; done += size) {
		void *p = malloc(size);
		touch(p, size);
		free(p);
	}
}

/* ---- the malloc family -------------------------------------------------- */

#define FAM_N 64
#define FAM_SIZE (64u << 10)
static void *fam[9][FAM_N];

static int check_align(void *p, size_t a)
{
	return p && ((uintptr_t)p & (a - 1)) == 0;
}

NOINLINE static int hw_fam_malloc(void **v)
{
	for (int i = 0; i < FAM_N; i++)
		touch(v[i] = malloc(FAM_SIZE), FAM_SIZE);
	return check_align(v[0], 16);
}
NOINLINE static int hw_fam_calloc(void **v)
{
	int ok = 1;
	for (int i = 0; i < FAM_N; i++) {
		unsigned char *p = v[i] = calloc(FAM_SIZE / 16, 16);
		ok &= p && p[0] == 0 && p[FAM_SIZE - 1] == 0;
		touch(p, FAM_SIZE);
	}
	return ok;
}
NOINLINE static int hw_fam_realloc(void **v)
{
	int ok = 1;
	for (int i = 0; i < FAM_N; i++) {
		char *p = malloc(100);
		memset(p, 'x', 100);
		p = realloc(p, FAM_SIZE);
		ok &= p && p[99] == 'x';
		touch(v[i] = p, FAM_SIZE);
	}
	return ok;
}
NOINLINE static int hw_fam_reallocarray(void **v)
{
	volatile size_t huge = SIZE_MAX / 2; /* overflows times 4 */
	int ok = reallocarray(NULL, huge, 4) == NULL && errno == ENOMEM;
	for (int i = 0; i < FAM_N; i++)
		touch(v[i] = reallocarray(NULL, FAM_SIZE / 8, 8), FAM_SIZE);
	return ok && v[0];
}
NOINLINE static int hw_fam_posix_memalign(void **v)
{
	int ok = 1;
	for (int i = 0; i < FAM_N; i++) {
		ok &= posix_memalign(&v[i], 256, FAM_SIZE) == 0 &&
		      check_align(v[i], 256);
		touch(v[i], FAM_SIZE);
	}
	void *bad;
	return ok && posix_memalign(&bad, 3, 16) == EINVAL;
}
NOINLINE static int hw_fam_aligned_alloc(void **v)
{
	int ok = 1;
	for (int i = 0; i < FAM_N; i++) {
		v[i] = aligned_alloc(4096, FAM_SIZE);
		ok &= check_align(v[i], 4096);
		touch(v[i], FAM_SIZE);
	}
	return ok;
}
NOINLINE static int hw_fam_memalign(void **v)
{
	int ok = 1;
	for (int i = 0; i < FAM_N; i++) {
		v[i] = memalign(64, FAM_SIZE);
		ok &= check_align(v[i], 64);
		touch(v[i], FAM_SIZE);
	}
	return ok;
}
NOINLINE static int hw_fam_valloc(void **v)
{
	int ok = 1;
	for (int i = 0; i < FAM_N; i++) {
		v[i] = valloc(FAM_SIZE);
		ok &= check_align(v[i], (size_t)getpagesize());
		touch(v[i], FAM_SIZE);
	}
	return ok;
}
NOINLINE static int hw_fam_pvalloc(void **v)
{
	int ok = 1;
	for (int i = 0; i < FAM_N; i++) {
		v[i] = pvalloc(FAM_SIZE - 100); /* rounded up to pages */
		ok &= check_align(v[i], (size_t)getpagesize()) &&
		      malloc_usable_size(v[i]) >= FAM_SIZE - 100;
		touch(v[i], FAM_SIZE - 100);
	}
	return ok;
}

static void family(void)
{
	int (*fn[9])(void **) = {
	    hw_fam_malloc,       hw_fam_calloc,         hw_fam_realloc,
	    hw_fam_reallocarray, hw_fam_posix_memalign, hw_fam_aligned_alloc,
	    hw_fam_memalign,     hw_fam_valloc,         hw_fam_pvalloc,
	};
	int ok = 1;
	for (int k = 0; k < 9; k++) {
		int r = fn[k](fam[k]);
		if (!r)
			printf("# family %d failed\n", k);
		ok &= r;
		for (int i = 0; i < FAM_N; i++)
			ok &= malloc_usable_size(fam[k][i]) >=
			      (k == 8 ? FAM_SIZE - 100 : FAM_SIZE);
	}
	ok &= malloc_usable_size(NULL) == 0;
	printf("family %s %u %u\n", ok ? "ok" : "bad", FAM_N, FAM_SIZE);
}

static void family_free(void)
{
	for (int k = 0; k < 9; k++)
		for (int i = 0; i < FAM_N; i++) {
			free(fam[k][i]); /* memalign'd ones too */
			fam[k][i] = NULL;
		}
	printf("freed\n");
}

/* ---- realloc chains ----------------------------------------------------- */

static void *chain;

NOINLINE static void hw_grow_chain(size_t upto)
{
	size_t n = 1;
	char *p = NULL;
	for (;;) {
		p = realloc(p, n);
		p[n - 1] = (char)n;
		if (n >= upto)
			break;
		n = n * 2 > upto ? upto : n * 2;
	}
	/* ... and back down a little, then up again. */
	p = realloc(p, upto / 2);
	p = realloc(p, upto);
	touch(p, upto);
	chain = p;
}

/* ---- peak, delta -------------------------------------------------------- */

NOINLINE static void hw_peak_builder(size_t bytes)
{
	size_t n = bytes / (1 << 20);
	void **v = calloc(n, sizeof *v);
	for (size_t i = 0; i < n; i++)
		touch(v[i] = malloc(1 << 20), 1 << 20);
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void **delta_keep;
static size_t ndelta;

NOINLINE static void hw_delta_work(size_t bytes)
{
	size_t n = bytes / 4096;
	delta_keep = realloc(delta_keep, (ndelta + n) * sizeof *delta_keep);
	for (size_t i = 0; i < n; i++)
		touch(delta_keep[ndelta++] = malloc(4096), 4096);
}

/* ---- threads ------------------------------------------------------------ */

struct stress {
	double seconds;
	unsigned id;
	unsigned long long ops;
	pthread_t t;
};

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

NOINLINE static void *hw_stress_thread(void *arg)
{
	struct stress *st = arg;
	enum { SLOTS = 1024 };
	void *slot[SLOTS] = {0};
	uint64_t s = 0x9e3779b97f4a7c15ull * (st->id + 1);
	double end = now_s() + st->seconds;
	while (now_s() < end) {
		for (int k = 0; k < 1000; k++) {
			unsigned i = (unsigned)(rnd(&s) % SLOTS);
			size_t n = 16 + rnd(&s) % 4000;
			switch (rnd(&s) % 6) {
			case 0:
			case 1:
				free(slot[i]);
				slot[i] = malloc(n);
				break;
			case 2: slot[i] = realloc(slot[i], n); break;
			case 3:
				free(slot[i]);
				slot[i] = calloc(1, n);
				break;
			case 4:
				free(slot[i]);
				slot[i] = memalign(64, n);
				break;
			default:
				free(slot[i]);
				slot[i] = NULL;
				n = 0;
			}
			touch(slot[i], n);
			st->ops++;
		}
	}
	for (unsigned i = 0; i < SLOTS; i++)
		free(slot[i]);
	return NULL;
}

static void stress(unsigned threads, double seconds)
{
	struct stress st[64];
	unsigned long long ops = 0;
	if (threads > 64)
		threads = 64;
	for (unsigned i = 0; i < threads; i++) {
		st[i] = (struct stress){seconds, i, 0, 0};
		if (pthread_create(&st[i].t, NULL, hw_stress_thread, &st[i]))
			fail("pthread_create");
	}
	for (unsigned i = 0; i < threads; i++) {
		pthread_join(st[i].t, NULL);
		ops += st[i].ops;
	}
	printf("stress ops %llu\n", ops);
}

static volatile int forking_done;

static void *fork_allocator(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&forking_done, __ATOMIC_RELAXED)) {
		void *p = malloc(3000);
		touch(p, 3000);
		free(p);
	}
	return NULL;
}

NOINLINE static void hw_child_work(void)
{
	for (int i = 0; i < 200000; i++) {
		void *p = malloc(16 + (size_t)i % 5000);
		touch(p, 16);
		free(p);
	}
}

static void fork_test(void)
{
	pthread_t t[3];
	__atomic_store_n(&forking_done, 0, __ATOMIC_RELAXED);
	for (int i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, fork_allocator, NULL);
	int statuses = 0, good = 0;
	for (int round = 0; round < 20; round++) {
		usleep(2000);
		pid_t pid = fork();
		if (pid == 0) {
			alarm(20); /* a deadlock becomes a visible death */
			hw_child_work();
			_exit(0);
		}
		int status;
		if (pid > 0 && waitpid(pid, &status, 0) == pid) {
			statuses++;
			good += WIFEXITED(status) && WEXITSTATUS(status) == 0;
		}
	}
	__atomic_store_n(&forking_done, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	printf("fork %d of %d children exited 0\n", good, statuses);
}

static void jemalloc_check(void)
{
	int (*mallctl)(const char *, void *, size_t *, void *, size_t) =
	    (int (*)(const char *, void *, size_t *, void *, size_t))dlsym(
	        RTLD_DEFAULT, "mallctl");
	if (!mallctl) {
		printf("jemalloc absent\n");
		return;
	}
	uint64_t before = 0, after = 0;
	size_t len = sizeof before;
	mallctl("thread.allocated", &before, &len, NULL, 0);
	void *p = malloc(1 << 20);
	touch(p, 1 << 20);
	len = sizeof after;
	mallctl("thread.allocated", &after, &len, NULL, 0);
	free(p);
	printf("jemalloc served %llu\n", (unsigned long long)(after - before));
}

/* ---- many distinct stacks ----------------------------------------------- */

NOINLINE static void hw_stack_leaf(void)
{
	void *p = malloc(64);
	touch(p, 64);
	free(p);
}

NOINLINE static void hw_left(unsigned bits, unsigned depth);
NOINLINE static void hw_right(unsigned bits, unsigned depth);

/* One chain of hw_left/hw_right calls per value of bits: its bits choose
 * the caller at each level, so every value is a stack of its own. */
static void hw_branch(unsigned bits, unsigned depth)
{
	if (!depth)
		hw_stack_leaf();
	else if (bits & 1)
		hw_right(bits >> 1, depth - 1);
	else
		hw_left(bits >> 1, depth - 1);
}

NOINLINE static void hw_left(unsigned bits, unsigned depth)
{
	hw_branch(bits, depth);
	__asm__ volatile("" ::: "memory"); /* not a tail call */
}

NOINLINE static void hw_right(unsigned bits, unsigned depth)
{
	hw_branch(bits, depth);
	__asm__ volatile("" ::: "memory");
}

static void many_stacks(unsigned long long n)
{
	if (n > 1u << 16)
		n = 1u << 16;
	for (unsigned i = 0; i < n; i++)
		hw_branch(i, 16);
	printf("stacks %llu\n", n);
}

/* A host that loads and unloads a plugin again and again (the dlclose
 * wrapper refreshes pullprof's unwind registry on this thread each time). */
static void dlcycle(const char *path, unsigned long long n)
{
	for (unsigned long long i = 0; i < n; i++) {
		void *h = dlopen(path, RTLD_NOW);
		if (!h || dlclose(h) != 0) {
			printf("dlcycle %s\n", dlerror());
			return;
		}
	}
	printf("dlcycle ok\n");
}

int main(void)
{
	char line[256];
	setvbuf(stdout, NULL, _IOLBF, 0);
	int rc = pullprof_start(NULL);
	if (rc && rc != -EALREADY) {
		printf("err %d %s\n", rc, pullprof_strerror(rc));
		return 1;
	}
	printf("port %d\n", pullprof_port());
	while (fgets(line, sizeof line, stdin)) {
		unsigned long long a = 0, b = 0;
		char cmd[32] = "", path[200] = "";
		if (sscanf(line, "%31s %llu %llu", cmd, &a, &b) < 1)
			continue;
		if (!strcmp(cmd, "accuracy"))
			accuracy();
		else if (!strcmp(cmd, "churn")) {
			hw_churn(a, (size_t)b);
			printf("churned\n");
		} else if (!strcmp(cmd, "family"))
			family();
		else if (!strcmp(cmd, "family-free"))
			family_free();
		else if (!strcmp(cmd, "chain")) {
			hw_grow_chain((size_t)a);
			printf("chain %zu\n", malloc_usable_size(chain));
		} else if (!strcmp(cmd, "chain-free")) {
			free(chain);
			chain = NULL;
			printf("freed\n");
		} else if (!strcmp(cmd, "cxx")) {
			unsigned long long al = 0, in = 0;
			hw_cxx_run(&al, &in);
			printf("truth hw_cxx_widgets %llu %llu\n", al, in);
		} else if (!strcmp(cmd, "badalloc")) {
			printf("badalloc %s\n",
			       hw_cxx_bad_alloc() ? "caught" : "missed");
		} else if (!strcmp(cmd, "peak")) {
			hw_peak_builder((size_t)a);
			printf("peaked\n");
		} else if (!strcmp(cmd, "delta")) {
			hw_delta_work((size_t)a);
			printf("allocated\n");
		} else if (!strcmp(cmd, "stress"))
			stress((unsigned)a, (double)b);
		else if (!strcmp(cmd, "fork"))
			fork_test();
		else if (!strcmp(cmd, "stacks"))
			many_stacks(a);
		else if (!strcmp(cmd, "jemalloc"))
			jemalloc_check();
		else if (!strcmp(cmd, "dlcycle") &&
		         sscanf(line, "%*s %199s %llu", path, &a) >= 1)
			dlcycle(path, a ? a : 1);
		else if (!strcmp(cmd, "quit"))
			break;
		else
			printf("unknown %s\n", cmd);
	}
	pullprof_stop();
	return 0;
}

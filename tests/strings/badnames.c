/*
 * A host whose strings are not valid UTF-8, for test_hostile_utf8.py: thread
 * names, profile labels, a library's path and a function's name, all bytes
 * the host chose. It links libpullprof, starts the agent from the
 * environment and prints "port N". Commands on stdin (strings in hex, so
 * any byte passes the line protocol), one answer line each:
 *
 *   dlopen PATHHEX SYMHEX   dlopen the library, find the function
 *                           (badlib_work's shape)  -> "ok ADDRESS" | "err ..."
 *   thread NAMEHEX [KEYHEX VALHEX]
 *                           a worker: prctl(PR_SET_NAME) with the bytes (the
 *                           kernel keeps 15 of them), the label pushed,
 *                           then forever: 2 ms of CPU and a 64 KiB block
 *                           inside the library's function (when loaded),
 *                           2 ms asleep        -> "tid N COMMHEX" (the
 *                           name /proc/self/task/N/comm then holds)
 *   quit
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <pullprof.h>

#define NOINLINE __attribute__((noinline, noclone))
#define BLOCK 65536

typedef int (*work_fn)(void (*cb)(void *), void *arg);
static work_fn work;
static uint64_t spin_sink;

struct worker {
	char name[64], key[128], value[320];
	int labelled;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	int tid;
	char *live; /* the block it keeps: /heap shows it */
};

static size_t unhex(const char *h, char *out, size_t max)
{
	size_t n = 0;
	unsigned b;
	while (n + 1 < max && h[0] && h[1] && sscanf(h, "%2x", &b) == 1) {
		out[n++] = (char)b;
		h += 2;
	}
	out[n] = 0;
	return n;
}

static NOINLINE void bad_burn_alloc(void *arg)
{
	struct timespec start, now;
	uint64_t x = 88172645463325252ull;
	struct worker *w = arg;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
	do {
		for (int i = 0; i < 20000; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
		}
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
	} while ((now.tv_sec - start.tv_sec) * 1000000000L +
	             (now.tv_nsec - start.tv_nsec) <
	         2000000L);
	__atomic_store_n(&spin_sink, x, __ATOMIC_RELAXED);
	char *p = malloc(BLOCK);
	if (p) {
		p[0] = p[BLOCK - 1] = 1;
		free(w->live);
		w->live = p;
	}
}

static void *worker(void *arg)
{
	struct worker *w = arg;
	struct timespec nap = {0, 2000000L};

	prctl(PR_SET_NAME, (unsigned long)w->name, 0, 0, 0);
	if (w->labelled)
		pullprof_label_push(w->key, w->value);
	pthread_mutex_lock(&w->lock);
	w->tid = (int)syscall(SYS_gettid);
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->lock);
	for (;;) {
		work_fn f = __atomic_load_n(&work, __ATOMIC_ACQUIRE);
		if (f)
			f(bad_burn_alloc, w);
		else
			bad_burn_alloc(w);
		nanosleep(&nap, NULL);
	}
	return NULL;
}

int main(void)
{
	char line[2048];
	void *dl = NULL;
	int rc = pullprof_start(NULL);

	if (rc) {
		printf("err %s\n", pullprof_strerror(rc));
		return 1;
	}
	printf("port %d\n", pullprof_port());
	fflush(stdout);
	while (fgets(line, sizeof line, stdin)) {
		char cmd[32] = "", a[700] = "", b[700] = "", c[700] = "";
		int n = sscanf(line, "%31s %699s %699s %699s", cmd, a, b, c);
		if (n < 1)
			continue;
		if (strcmp(cmd, "dlopen") == 0 && n >= 3) {
			char path[350], sym[350];
			unhex(a, path, sizeof path);
			unhex(b, sym, sizeof sym);
			dl = dlopen(path, RTLD_NOW);
			work_fn f =
			    dl ? (work_fn)(uintptr_t)dlsym(dl, sym) : NULL;
			__atomic_store_n(&work, f, __ATOMIC_RELEASE);
			if (f)
				printf("ok %p\n", (void *)(uintptr_t)f);
			else
				printf("err %s\n", dlerror());
		} else if (strcmp(cmd, "thread") == 0 && n >= 2) {
			struct worker *w = calloc(1, sizeof *w);
			pthread_t t;
			char comm[32] = "", path[64];
			unhex(a, w->name, sizeof w->name);
			if (n >= 4) {
				unhex(b, w->key, sizeof w->key);
				unhex(c, w->value, sizeof w->value);
				w->labelled = 1;
			}
			pthread_mutex_init(&w->lock, NULL);
			pthread_cond_init(&w->cv, NULL);
			pthread_mutex_lock(&w->lock);
			pthread_create(&t, NULL, worker, w);
			while (!w->tid)
				pthread_cond_wait(&w->cv, &w->lock);
			pthread_mutex_unlock(&w->lock);
			snprintf(path, sizeof path, "/proc/self/task/%d/comm",
			         w->tid);
			FILE *f = fopen(path, "r");
			size_t k = f ? fread(comm, 1, sizeof comm - 1, f) : 0;
			if (f)
				fclose(f);
			printf("tid %d ", w->tid);
			for (size_t i = 0; i < k && comm[i] != '\n'; i++)
				printf("%02x", (unsigned char)comm[i]);
			printf("\n");
		} else if (strcmp(cmd, "quit") == 0) {
			pullprof_stop();
			printf("bye\n");
			fflush(stdout);
			return 0;
		} else {
			printf("error unknown command %s\n", cmd);
		}
		fflush(stdout);
	}
	pullprof_stop();
	(void)dl;
	return 0;
}

/*
 * A host that loads plugins, preloaded with libpullprof by
 * tests/integration/test_hostile_images.py. Driven line by line on stdin,
 * answers on stdout (after a first line "ready"):
 *
 *   load PATH    dlopen PATH, call its plugin_work (which allocates and
 *                keeps 16 MiB), start a thread parked inside its
 *                plugin_park; answers "loaded TAG ADDRESS" (of plugin_work)
 *   reload PATH  the same without the parked thread
 *   unload       dlclose the plugin loaded last: "unloaded RC"
 *   cycle PATH   dlopen PATH and dlclose it at once: "cycled"
 *   alive        the ticker thread's count: "alive N"
 *   quit         pullprof_stop() when preloaded, then _exit(0)
 *
 * After the test truncated or overwrote the plugin's file, the plugin's
 * code is never run again (it is not there any more): the parked thread
 * stays blocked in the host's own callback.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static unsigned long ticks;
static int park_pipe[2];
static int parked_pipe[2]; /* a byte once a thread is parked */

static void *ticker(void *arg)
{
	(void)arg;
	for (;;) {
		__atomic_fetch_add(&ticks, 1, __ATOMIC_RELAXED);
		usleep(1000);
	}
	return NULL;
}

/* Called from inside the plugin: blocks for good. */
static void parked(void)
{
	char c = 1;
	/* In the host's code now: the plugin's may go. */
	if (write(parked_pipe[1], &c, 1) != 1)
		return;
	while (read(park_pipe[0], &c, 1) != 0)
		;
	for (;;)
		pause();
}

static void *park(void *fn)
{
	pthread_setname_np(pthread_self(), "in-plugin");
	((void (*)(void (*)(void)))fn)(parked);
	return NULL;
}

int main(void)
{
	char line[4096];
	pthread_t t;
	void *last = NULL;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (pipe(park_pipe) != 0 || pipe(parked_pipe) != 0)
		return 1;
	pthread_create(&t, NULL, ticker, NULL);
	printf("ready\n");
	while (fgets(line, sizeof line, stdin)) {
		line[strcspn(line, "\n")] = 0;
		int reload = strncmp(line, "reload ", 7) == 0;
		if (strncmp(line, "load ", 5) == 0 || reload) {
			void *h = dlopen(line + (reload ? 7 : 5), RTLD_NOW);
			int (*work)(void) =
			    h ? (int (*)(void))dlsym(h, "plugin_work") : NULL;
			void *parkfn = h ? dlsym(h, "plugin_park") : NULL;
			if (!work || !parkfn) {
				printf("err %s\n", dlerror());
				continue;
			}
			int tag = work();
			pthread_t p;
			char c;
			/* "loaded" once the thread is past the plugin's
			 * code: the test changes the file right after. */
			if (!reload &&
			    (pthread_create(&p, NULL, park, parkfn) != 0 ||
			     read(parked_pipe[0], &c, 1) != 1)) {
				printf("err park\n");
				continue;
			}
			last = h;
			printf("loaded %d %p\n", tag, (void *)work);
		} else if (strcmp(line, "unload") == 0) {
			printf("unloaded %d\n", last ? dlclose(last) : -1);
			last = NULL;
		} else if (strncmp(line, "cycle ", 6) == 0) {
			void *h = dlopen(line + 6, RTLD_NOW);
			if (!h) {
				printf("err %s\n", dlerror());
				continue;
			}
			dlclose(h);
			printf("cycled\n");
		} else if (strcmp(line, "alive") == 0) {
			printf("alive %lu\n",
			       __atomic_load_n(&ticks, __ATOMIC_RELAXED));
		} else if (strcmp(line, "quit") == 0) {
			/* Not exit(): glibc would run the truncated plugin's
			 * destructors, reading its (gone) .fini_array. The
			 * agent is stopped first, as its destructor would
			 * have (its threads joined). */
			int (*stop)(void) =
			    (int (*)(void))dlsym(RTLD_DEFAULT, "pullprof_stop");
			if (stop)
				stop();
			fflush(stdout);
			_exit(0);
		} else {
			printf("err unknown command\n");
		}
	}
	return 0;
}

/*
 * A host that swaps one library for another at the same address, preloaded
 * with libpullprof by tests/integration/test_hostile_unload.py. Driven line
 * by line on stdin, answers on stdout (after a first line "ready"):
 *
 *   open PATH      dlopen PATH: "opened BASE" (its load address, dlinfo)
 *   spin NAME S    run the opened library's function NAME for S seconds of
 *                  CPU on this thread: "spun ADDRESS" (of NAME, dladdr's
 *                  image base checked against BASE)
 *   swap PATH      dlclose the opened library and dlopen PATH at once,
 *                  nothing in between: "swapped OLD NEW" (the two bases)
 *   keep           call the opened library's swap_keep (16 MiB allocated
 *                  there and kept): "kept"
 *   close          dlclose the opened library: "closed RC"
 *   quit           pullprof_stop() when preloaded, then exit(0)
 */
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *lib;

static uintptr_t base_of(void *h)
{
	struct link_map *lm = NULL;
	if (!h || dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || !lm)
		return 0;
	return (uintptr_t)lm->l_addr;
}

int main(void)
{
	char line[4096];

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	while (fgets(line, sizeof line, stdin)) {
		line[strcspn(line, "\n")] = 0;
		if (strncmp(line, "open ", 5) == 0) {
			lib = dlopen(line + 5, RTLD_NOW | RTLD_LOCAL);
			if (!lib)
				printf("err %s\n", dlerror());
			else
				printf("opened %#lx\n",
				       (unsigned long)base_of(lib));
		} else if (strncmp(line, "spin ", 5) == 0) {
			char name[256];
			double s;
			if (sscanf(line + 5, "%255s %lf", name, &s) != 2 ||
			    !lib) {
				printf("err usage\n");
				continue;
			}
			uint64_t (*fn)(double) =
			    (uint64_t(*)(double))dlsym(lib, name);
			Dl_info di;
			if (!fn || !dladdr((void *)fn, &di) ||
			    (uintptr_t)di.dli_fbase == 0) {
				printf("err %s\n", dlerror());
				continue;
			}
			fn(s);
			printf("spun %p\n", (void *)fn);
		} else if (strncmp(line, "swap ", 5) == 0) {
			uintptr_t old = base_of(lib);
			if (!lib || dlclose(lib) != 0) {
				printf("err dlclose\n");
				continue;
			}
			lib = dlopen(line + 5, RTLD_NOW | RTLD_LOCAL);
			if (!lib) {
				printf("err %s\n", dlerror());
				continue;
			}
			printf("swapped %#lx %#lx\n", (unsigned long)old,
			       (unsigned long)base_of(lib));
		} else if (strcmp(line, "keep") == 0) {
			void *(*keep)(void) =
			    lib ? (void *(*)(void))dlsym(lib, "swap_keep")
			        : NULL;
			if (!keep || !keep())
				printf("err keep\n");
			else
				printf("kept\n");
		} else if (strcmp(line, "close") == 0) {
			printf("closed %d\n", lib ? dlclose(lib) : -1);
			lib = NULL;
		} else if (strcmp(line, "quit") == 0) {
			int (*stop)(void) =
			    (int (*)(void))dlsym(RTLD_DEFAULT, "pullprof_stop");
			if (stop)
				stop();
			exit(0);
		} else {
			printf("err unknown command\n");
		}
	}
	return 0;
}

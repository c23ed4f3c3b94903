/*
 * A host whose allocator pullprof may not see: linked (by
 * tests/integration/test_heap_foreign.py) with Debian's static
 * libjemalloc.a, with a copy of it whose functions are renamed je_malloc
 * etc. (-DPREFIXED: sites a and c use je_malloc, site b the system's
 * malloc), with the shared libjemalloc, or with nothing (glibc). It
 * allocates known amounts at distinct sites and prints the truth; driven
 * on stdin:
 *   (start)  "truth jh_site_a BYTES jh_site_b BYTES"
 *   grow     "truth jh_site_c BYTES"
 *   free_a   "freed jh_site_a"
 *   dump P   "dumped RC" (jemalloc's prof.dump into file P, for jeprof)
 *   quit
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef PREFIXED
void *je_malloc(size_t);
void je_free(void *);
int je_mallctl(const char *, void *, size_t *, void *, size_t);
#define JE_MALLOC je_malloc
#define JE_FREE je_free
#define MALLCTL je_mallctl
#else
#define JE_MALLOC malloc
#define JE_FREE free
#ifdef WITH_JEMALLOC
int mallctl(const char *, void *, size_t *, void *, size_t);
#define MALLCTL mallctl
#endif
#endif

#define A_COUNT 2048
#define A_SIZE (64 << 10)
#define B_COUNT 16384
#define B_SIZE (4 << 10)
#define C_COUNT 1024
#define C_SIZE (32 << 10)

static void *a[A_COUNT], *b[B_COUNT], *c[C_COUNT];

/* Each site touches its memory, so that it is really in use. */
__attribute__((noinline)) void *jh_site_a(size_t n)
{
	void *p = JE_MALLOC(n);
	memset(p, 0xa, n);
	return p;
}

__attribute__((noinline)) void *jh_site_b(size_t n)
{
	void *p = malloc(n);
	memset(p, 0xb, n);
	return p;
}

__attribute__((noinline)) void *jh_site_c(size_t n)
{
	void *p = JE_MALLOC(n);
	memset(p, 0xc, n);
	return p;
}

int main(void)
{
	char line[512];

	for (int i = 0; i < A_COUNT; i++)
		a[i] = jh_site_a(A_SIZE);
	for (int i = 0; i < B_COUNT; i++)
		b[i] = jh_site_b(B_SIZE);
	printf("truth jh_site_a %zu jh_site_b %zu\n", (size_t)A_COUNT * A_SIZE,
	       (size_t)B_COUNT * B_SIZE);
	fflush(stdout);
	while (fgets(line, sizeof line, stdin)) {
		line[strcspn(line, "\n")] = 0;
		if (!strcmp(line, "grow")) {
			for (int i = 0; i < C_COUNT; i++)
				c[i] = jh_site_c(C_SIZE);
			printf("truth jh_site_c %zu\n",
			       (size_t)C_COUNT * C_SIZE);
		} else if (!strcmp(line, "free_a")) {
			for (int i = 0; i < A_COUNT; i++) {
				JE_FREE(a[i]);
				a[i] = NULL;
			}
			printf("freed jh_site_a\n");
		} else if (!strncmp(line, "dump ", 5)) {
#ifdef MALLCTL
			const char *path = line + 5;
			int rc = MALLCTL("prof.dump", NULL, NULL, &path,
			                 sizeof path);
			printf("dumped %d\n", rc);
#else
			printf("dumped -1\n");
#endif
		} else if (!strcmp(line, "quit"))
			break;
		else
			printf("unknown %s\n", line);
		fflush(stdout);
	}
	for (int i = 0; i < B_COUNT; i++)
		free(b[i]);
	return 0;
}

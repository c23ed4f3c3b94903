/* Unit test of src/heap/tcmalloc.c against a real gperftools tcmalloc:
 * this program is the host. Built three times (Makefile.am):
 *   test_tcmalloc          libtcmalloc.a linked statically (the case
 *                          pullprof's wrappers never see);
 *   test_tcmalloc_shared   libtcmalloc.so (PP_TEST_SHARED);
 *   test_tcmalloc_minimal  libtcmalloc_minimal.a (PP_TEST_MINIMAL).
 * It allocates known amounts at three functions of its own and checks that
 * pp_tcmalloc_find describes the tcmalloc it was linked with, and that
 * pp_tcmalloc_heap_sample's text holds each function's bytes: a line's
 * stack is charged to the function whose address range (from this file's
 * symbol table) holds one of its pcs, its size scaled as pprof scales
 * heap_v2 samples, 1/(1-exp(-size/period)).
 *
 * tcmalloc reads TCMALLOC_SAMPLE_PARAMETER once, before main, so main
 * starts itself again with it set (65536) when it is not. The cases
 * without it (sampling off, with and without gperftools' heap profiler
 * running) and the stripped executable run in children of this program
 * (argv[1] "--off", "--stripped") that print what they found, one
 * key=value a line.
 *
 * gperftools 2.10 leaves the first 16 MiB of the main thread unsampled
 * (warm_up() says why): allocated before the sites. Each site is then
 * checked within 10% of what it holds. */
#define _GNU_SOURCE 1
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <math.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#ifndef PP_TEST_MINIMAL
#include <gperftools/heap-profiler.h>
#endif

#include "heap/tcmalloc.h"
#include "symbols/elfsym.h"

extern char **environ;
const char *tc_version(int *major, int *minor, const char **patch);

#define PERIOD 65536
#define MIB ((size_t)1 << 20)

/* The three sites: each allocates n blocks of size bytes, kept. */
static void *kept[3][40000];
static const size_t site_size[3] = {MIB, 256 << 10, 1 << 10};
static const size_t site_count[3] = {32, 128, 32768};
static const char *const site_name[3] = {"site_big", "site_mid", "site_small"};

__attribute__((noinline)) void *site_big(size_t n);
__attribute__((noinline)) void *site_mid(size_t n);
__attribute__((noinline)) void *site_small(size_t n);

__attribute__((noinline)) void *site_big(size_t n)
{
	void *p = malloc(n);
	memset(p, 1, n);
	__asm__ volatile("" ::: "memory"); /* not a tail call */
	return p;
}

__attribute__((noinline)) void *site_mid(size_t n)
{
	void *p = malloc(n);
	memset(p, 2, n);
	__asm__ volatile("" ::: "memory");
	return p;
}

__attribute__((noinline)) void *site_small(size_t n)
{
	void *p = malloc(n);
	memset(p, 3, n);
	__asm__ volatile("" ::: "memory");
	return p;
}

static void *(*const site_fn[3])(size_t) = {site_big, site_mid, site_small};

/* tcmalloc 2.10 does not sample the first 16 MiB a thread allocates when
 * its cache was made before tcmalloc read TCMALLOC_SAMPLE_PARAMETER (the
 * main thread's, at the first malloc of the C library's start-up): its
 * sampler picked its first interval while the flag still read 0, and 16
 * MiB is the interval it picks then. Allocated and freed here, past that
 * first interval, so the sites' bytes are sampled at the period. */
__attribute__((noinline)) static void warm_up(void)
{
	for (int i = 0; i < 24; i++) {
		void *volatile p = malloc(MIB);
		memset(p, 0, 64);
		free(p);
	}
}

static void allocate_sites(void)
{
	static int done;
	if (done)
		return;
	done = 1;
	warm_up();
	for (int s = 0; s < 3; s++)
		for (size_t i = 0; i < site_count[s]; i++)
			kept[s][i] = site_fn[s](site_size[s]);
}

/* The sites' address ranges, from this executable's symbol table and
 * load bias. */
static uintptr_t site_lo[3], site_hi[3];

static void site_ranges(void)
{
	struct pp_elfsym syms[3];
	for (int s = 0; s < 3; s++)
		syms[s].name = site_name[s];
	assert_int_equal(pp_elfsym_lookup("/proc/self/exe", syms, 3, NULL), 3);
	const ElfW(Phdr) *ph = (const ElfW(Phdr) *)getauxval(AT_PHDR);
	uintptr_t bias = 0;
	for (unsigned long i = 0; i < getauxval(AT_PHNUM); i++)
		if (ph[i].p_type == PT_PHDR)
			bias = (uintptr_t)ph - ph[i].p_vaddr;
	for (int s = 0; s < 3; s++) {
		site_lo[s] = bias + syms[s].value;
		site_hi[s] = site_lo[s] + syms[s].size;
		assert_true(site_lo[s] == (uintptr_t)site_fn[s]);
	}
}

/* A throwaway reader of gperftools' heap text (the real one is
 * src/heap/foreign.c's): each site's scaled bytes and sample count, and
 * what no site holds. */
struct tally {
	long period;
	double bytes[4]; /* [3]: no site */
	long lines[4];
	int has_maps;
};

static int site_of(const char *stack)
{
	const char *p = stack;
	while (*p) {
		char *end;
		uintptr_t pc = strtoull(p, &end, 16);
		if (end == p)
			break;
		for (int s = 0; s < 3; s++)
			if (pc > site_lo[s] && pc <= site_hi[s])
				return s; /* a return address: just past a call
				           */
		p = end;
		while (*p == ' ')
			p++;
	}
	return 3;
}

static void read_text(const char *text, struct tally *t)
{
	memset(t, 0, sizeof *t);
	const char *h = strstr(text, "heap_v2/");
	assert_non_null(h);
	t->period = atol(h + 8);
	const char *line = strchr(text, '\n');
	assert_non_null(line);
	for (line++; *line && *line != '\n';) {
		unsigned long long c, sz;
		int used = 0;
		assert_int_equal(
		    sscanf(line, "%llu: %llu [%*u: %*u] @%n", &c, &sz, &used),
		    2);
		assert_true(used > 0);
		int s = site_of(line + used);
		double avg = (double)sz / (double)c;
		t->bytes[s] += (double)sz / (1 - exp(-avg / (double)t->period));
		t->lines[s]++;
		line = strchr(line, '\n');
		assert_non_null(line);
		line++;
	}
	t->has_maps = strstr(text, "\nMAPPED_LIBRARIES:\n") != NULL;
}

static void test_find(void **state)
{
	(void)state;
	struct pp_tcmalloc t;
	assert_int_equal(pp_tcmalloc_find(&t), 1);
	char d[800];
	pp_tcmalloc_describe(&t, d, sizeof d);
	print_message("found: %s; period %lld (%s)\n", d,
	              (long long)t.sample_period, t.period_source);
	int major, minor;
	const char *patch;
	assert_string_equal(t.version, tc_version(&major, &minor, &patch));
	assert_false(t.stripped);
	assert_false(t.malloc_interposed);
	assert_false(t.new_interposed);
#ifdef PP_TEST_SHARED
	assert_int_equal(t.linkage, PP_TCMALLOC_SHARED);
	assert_non_null(strstr(t.path, "libtcmalloc.so"));
	/* Debian's library has no .symtab, but exports the flag. */
	assert_string_equal(t.period_source, "flag");
#else
	char self[512];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	assert_true(n > 0);
	self[n] = 0;
	assert_int_equal(t.linkage, PP_TCMALLOC_STATIC);
	assert_string_equal(t.path, self);
	assert_string_equal(t.period_source, "flag");
#endif
#ifdef PP_TEST_MINIMAL
	assert_true(t.minimal);
	assert_false(t.sample_callable);
	/* The minimal build ignores TCMALLOC_SAMPLE_PARAMETER. */
	assert_int_equal(t.sample_period, 0);
	assert_false(t.profiler_linked);
#else
	assert_false(t.minimal);
	assert_true(t.sample_callable);
	assert_int_equal(t.sample_period, PERIOD);
	assert_true(t.profiler_linked);
	assert_false(t.profiler_running);
#endif
}

static void test_sample(void **state)
{
	(void)state;
	allocate_sites();
	char *text = NULL, err[1024] = "";
	size_t len = 0;
	int rc = pp_tcmalloc_heap_sample(&text, &len, err, sizeof err);
#ifdef PP_TEST_MINIMAL
	print_message("%s\n", err);
	assert_int_equal(rc, -ENOTSUP);
	assert_null(text);
	assert_non_null(strstr(err, "minimal"));
	assert_non_null(strstr(err, "link libtcmalloc"));
	return;
#endif
	if (rc)
		print_message("%s\n", err);
	assert_int_equal(rc, 0);
	assert_non_null(text);
	assert_int_equal(strlen(text), len);
	assert_memory_equal(text, "heap profile: ", 14);
	struct tally t;
	read_text(text, &t);
	assert_int_equal(t.period, PERIOD);
	assert_true(t.has_maps);
	for (int s = 0; s < 3; s++) {
		double truth = (double)site_size[s] * (double)site_count[s];
		double ratio = t.bytes[s] / truth;
		print_message("%s: %ld samples, %.1f MiB estimated of %.1f "
		              "MiB (%.3f)\n",
		              site_name[s], t.lines[s], t.bytes[s] / MIB,
		              truth / MIB, ratio);
		assert_true(ratio > 0.9 && ratio < 1.1);
	}
	/* Nothing else this large is live. */
	assert_true(t.bytes[3] < 8.0 * MIB);
	free(text);

	/* Freed blocks leave the sample. */
	for (size_t i = 0; i < site_count[0]; i++)
		free(kept[0][i]);
	rc = pp_tcmalloc_heap_sample(&text, &len, err, sizeof err);
	assert_int_equal(rc, 0);
	read_text(text, &t);
	assert_int_equal(t.lines[0], 0);
	assert_true(t.lines[1] > 0);
	free(text);
	for (size_t i = 0; i < site_count[0]; i++)
		kept[0][i] = site_big(site_size[0]);
}

/* Run this program again with one argument, and with or without
 * TCMALLOC_SAMPLE_PARAMETER; its stdout into out. Its exit status. */
static int run_child(const char *prog, const char *arg, int sampling, char *out,
                     size_t outlen)
{
	char *envp[256];
	size_t k = 0;
	for (char **e = environ; *e && k < 250; e++)
		if (strncmp(*e, "TCMALLOC_SAMPLE_PARAMETER=", 26) != 0)
			envp[k++] = *e;
	char var[64];
	snprintf(var, sizeof var, "TCMALLOC_SAMPLE_PARAMETER=%d", PERIOD);
	if (sampling)
		envp[k++] = var;
	/* The child must not start itself again with sampling on. */
	envp[k++] = "PP_TEST_TCMALLOC_CHILD=1";
	envp[k] = NULL;
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
	posix_spawn_file_actions_addclose(&fa, fds[0]);
	char *argv[] = {(char *)prog, (char *)arg, NULL};
	pid_t pid;
	assert_int_equal(posix_spawn(&pid, prog, &fa, NULL, argv, envp), 0);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	size_t got = 0;
	ssize_t r;
	while (got + 1 < outlen &&
	       (r = read(fds[0], out + got, outlen - 1 - got)) > 0)
		got += (size_t)r;
	out[got] = 0;
	close(fds[0]);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static const char *self_path(void)
{
	static char self[512];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	assert_true(n > 0);
	self[n] = 0;
	return self;
}

/* Sampling off: the sentence; then, gperftools' heap profiler running,
 * its profile instead. */
static void test_sampling_off(void **state)
{
	(void)state;
	char out[8192];
	assert_int_equal(run_child(self_path(), "--off", 0, out, sizeof out),
	                 0);
	print_message("%s", out);
	assert_non_null(strstr(out, "period=0\n"));
#ifdef PP_TEST_MINIMAL
	assert_non_null(strstr(out, "rc=-95\n"));
	assert_non_null(strstr(out, "minimal"));
#else
	assert_non_null(strstr(out, "rc=-95\n"));
	assert_non_null(strstr(out, "TCMALLOC_SAMPLE_PARAMETER=524288"));
	assert_non_null(strstr(out, "gperftools 2."));
#ifdef PP_TEST_SHARED
	assert_non_null(strstr(out, "libtcmalloc.so"));
#else
	assert_non_null(strstr(out, "linked statically into"));
	assert_non_null(strstr(out, "never reach pullprof's malloc wrappers"));
#endif
	/* With the heap profiler: every allocation, exact. */
	assert_non_null(strstr(out, "profiler_running=1\n"));
	assert_non_null(strstr(out, "profiler_rc=0\n"));
	assert_non_null(strstr(out, "@ heapprofile"));
	assert_non_null(strstr(out, "profiler_mid_bytes=33554432\n"));
#endif
}

/* The child of test_sampling_off. */
static int child_off(void)
{
	struct pp_tcmalloc t;
	char *text = NULL, err[1024] = "";
	size_t len;
	site_ranges();
	if (pp_tcmalloc_find(&t) != 1)
		return 2;
	printf("period=%lld\n", (long long)t.sample_period);
	int rc = pp_tcmalloc_heap_sample(&text, &len, err, sizeof err);
	printf("rc=%d\nerr=%s\n", rc, err);
	free(text);
#ifndef PP_TEST_MINIMAL
	char dir[] = "/tmp/pp-tcmalloc-XXXXXX", prefix[64];
	if (!mkdtemp(dir))
		return 3;
	snprintf(prefix, sizeof prefix, "%s/hp", dir);
	HeapProfilerStart(prefix);
	for (size_t i = 0; i < site_count[1]; i++)
		kept[1][i] = site_mid(site_size[1]);
	pp_tcmalloc_find(&t);
	printf("profiler_running=%d\n", t.profiler_running);
	rc = pp_tcmalloc_heap_sample(&text, &len, err, sizeof err);
	printf("profiler_rc=%d\n", rc);
	if (rc == 0) {
		printf("header=%.*s\n", (int)strcspn(text, "\n"), text);
		/* Exact: one line per stack, "inuse: bytes [allocs:
		 * bytes]". */
		unsigned long long mid = 0;
		for (const char *l = strchr(text, '\n'); l && l[1];
		     l = strchr(l + 1, '\n')) {
			unsigned long long c, b;
			int used = 0;
			if (sscanf(l + 1, "%llu: %llu [%*u: %*u] @%n", &c, &b,
			           &used) == 2 &&
			    used && site_of(l + 1 + used) == 1)
				mid += b;
		}
		printf("profiler_mid_bytes=%llu\n", mid);
		free(text);
	} else {
		printf("profiler_err=%s\n", err);
	}
	HeapProfilerStop();
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		return 4;
#endif
	return 0;
}

static void test_own_function_names(void **state)
{
	(void)state;
	const char *own[] = {
	    "malloc",
	    "tc_malloc",
	    "__libc_calloc",
	    "tc_realloc",
	    "tcmalloc::allocate_full_malloc_oom(unsigned long)",
	    "(anonymous namespace)::do_malloc_pages(tcmalloc::ThreadCache*, "
	    "unsigned long)",
	    "(anonymous namespace)::do_malloc_pages(tcmalloc::ThreadCache*, "
	    "unsigned long) [clone .cold]",
	    "operator new(unsigned long)",
	    "operator new[](unsigned long, std::nothrow_t const&)",
	};
	const char *not_own[] = {
	    "site_big",
	    "tc_big",
	    "tc_parse",
	    "mallocx",
	    "malloc_trim",
	    "my::malloc()",
	    "(anonymous namespace)::do_malloc_stats()",
	    "",
	};
	for (size_t i = 0; i < sizeof own / sizeof *own; i++)
		if (!pp_tcmalloc_own_function(own[i]))
			fail_msg("%s: should be tcmalloc's", own[i]);
	for (size_t i = 0; i < sizeof not_own / sizeof *not_own; i++)
		if (pp_tcmalloc_own_function(not_own[i]))
			fail_msg("%s: should not be tcmalloc's", not_own[i]);
	assert_false(pp_tcmalloc_own_function(NULL));
}

#if !defined(PP_TEST_SHARED) && !defined(PP_TEST_MINIMAL)
/* addr2line's names (as a symbolizer gives them: demangled, with
 * parameters) of the n file addresses in addrs, into names. */
static void addr2line(char (*addrs)[24], int n, char (*names)[256])
{
	char *argv[5 + 12 + 1] = {"addr2line", "-f", "-C", "-e",
	                          (char *)self_path()};
	assert_true(n <= 12);
	for (int i = 0; i < n; i++)
		argv[5 + i] = addrs[i];
	argv[5 + n] = NULL;
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
	posix_spawn_file_actions_addclose(&fa, fds[0]);
	pid_t pid;
	assert_int_equal(
	    posix_spawnp(&pid, "addr2line", &fa, NULL, argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	static char out[16384];
	size_t got = 0;
	ssize_t r;
	while (got + 1 < sizeof out &&
	       (r = read(fds[0], out + got, sizeof out - 1 - got)) > 0)
		got += (size_t)r;
	out[got] = 0;
	close(fds[0]);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	/* Two lines per address: the function, then file:line. */
	char *save = NULL, *line = strtok_r(out, "\n", &save);
	for (int i = 0; i < n; i++) {
		assert_non_null(line);
		snprintf(names[i], sizeof names[i], "%s", line);
		strtok_r(NULL, "\n", &save);
		line = strtok_r(NULL, "\n", &save);
	}
}

/* The stacks of the sites' samples, named: once the frames up to the
 * deepest one of tcmalloc's own are dropped, each starts at its site. */
static void test_own_function_stacks(void **state)
{
	(void)state;
	allocate_sites();
	char *text = NULL, err[1024] = "";
	size_t len = 0;
	assert_int_equal(pp_tcmalloc_heap_sample(&text, &len, err, sizeof err),
	                 0);
	const ElfW(Phdr) *ph = (const ElfW(Phdr) *)getauxval(AT_PHDR);
	uintptr_t bias = 0;
	for (unsigned long i = 0; i < getauxval(AT_PHNUM); i++)
		if (ph[i].p_type == PT_PHDR)
			bias = (uintptr_t)ph - ph[i].p_vaddr;
	/* The first line of each site: its first 4 frames' file addresses
	 * (return addresses: one byte back, inside the call). */
	char addrs[12][24];
	int seen[3] = {0, 0, 0};
	for (const char *l = strchr(text, '\n') + 1; *l && *l != '\n';
	     l = strchr(l, '\n') + 1) {
		const char *p = strchr(l, '@') + 1;
		int s = site_of(p);
		if (s == 3 || seen[s])
			continue;
		seen[s] = 1;
		for (int k = 0; k < 4; k++) {
			char *end;
			uintptr_t pc = strtoull(p, &end, 16);
			snprintf(addrs[s * 4 + k], sizeof addrs[0], "%#lx",
			         (unsigned long)(pc - 1 - bias));
			p = end;
		}
	}
	free(text);
	assert_true(seen[0] && seen[1] && seen[2]);
	char names[12][256];
	addr2line(addrs, 12, names);
	for (int s = 0; s < 3; s++) {
		char(*n)[256] = names + s * 4;
		int first = 0;
		for (int k = 0; k < 4; k++)
			if (pp_tcmalloc_own_function(n[k]))
				first = k + 1;
		print_message("%s: %s | %s | %s | %s\n", site_name[s], n[0],
		              n[1], n[2], n[3]);
		assert_true(first > 0 && first < 4);
		assert_string_equal(n[first], site_name[s]);
	}
}
#endif

#if !defined(PP_TEST_SHARED) && !defined(PP_TEST_MINIMAL)
/* A stripped copy of this program: tcmalloc is found by its strings, and
 * the sentence says why nothing can be served. */
static void test_stripped(void **state)
{
	(void)state;
	char dir[] = "/tmp/pp-tcmalloc-XXXXXX", copy[64], out[4096];
	assert_non_null(mkdtemp(dir));
	snprintf(copy, sizeof copy, "%s/stripped", dir);
	char *argv[] = {"strip", "-o", copy, (char *)self_path(), NULL};
	pid_t pid;
	int status;
	assert_int_equal(posix_spawnp(&pid, "strip", NULL, NULL, argv, environ),
	                 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	int rc = run_child(copy, "--stripped", 1, out, sizeof out);
	unlink(copy);
	rmdir(dir);
	print_message("%s", out);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(out, "find=1\n"));
	assert_non_null(strstr(out, "stripped=1\n"));
	assert_non_null(strstr(out, "linkage=1\n"));
	assert_non_null(strstr(out, "version=gperftools 2."));
	assert_non_null(strstr(out, "callable=0\n"));
	assert_non_null(strstr(out, "rc=-2\n"));
	assert_non_null(strstr(out, "strip --strip-debug"));
}
#endif

/* The child of test_stripped: no symbol table to find its sites in. */
static int child_stripped(void)
{
	struct pp_tcmalloc t;
	char *text = NULL, err[1024] = "";
	size_t len;
	printf("find=%d\n", pp_tcmalloc_find(&t));
	printf("stripped=%d\nlinkage=%d\nversion=%s\ncallable=%d\n", t.stripped,
	       (int)t.linkage, t.version, t.sample_callable);
	int rc = pp_tcmalloc_heap_sample(&text, &len, err, sizeof err);
	printf("rc=%d\nerr=%s\n", rc, err);
	free(text);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--off") == 0)
		return child_off();
	if (argc > 1 && strcmp(argv[1], "--stripped") == 0)
		return child_stripped();
	/* tcmalloc read its period before main: start again with it. */
	const char *p = getenv("TCMALLOC_SAMPLE_PARAMETER");
	if (!getenv("PP_TEST_TCMALLOC_CHILD") && (!p || atoi(p) != PERIOD)) {
		char v[32];
		snprintf(v, sizeof v, "%d", PERIOD);
		setenv("TCMALLOC_SAMPLE_PARAMETER", v, 1);
		execv("/proc/self/exe", argv);
		perror("execv /proc/self/exe");
		return 1;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_find),
		cmocka_unit_test(test_sample),
		cmocka_unit_test(test_sampling_off),
		cmocka_unit_test(test_own_function_names),
#if !defined(PP_TEST_SHARED) && !defined(PP_TEST_MINIMAL)
		cmocka_unit_test(test_own_function_stacks),
		cmocka_unit_test(test_stripped),
#endif
	};
	site_ranges();
	return cmocka_run_group_tests(tests, NULL, NULL);
}

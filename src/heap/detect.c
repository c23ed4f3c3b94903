/*
 * Which allocator the host's malloc calls reach (detect.h). The wrappers
 * are the light object's (the one that defines pp_heap_filter); the host
 * reaches them when the dynamic linker resolves malloc to them and the
 * executable has no malloc of its own that its calls were bound to when it
 * was linked.
 * Context: agent.
 */
#include <dlfcn.h>
#include <errno.h>
#include <gnu/libc-version.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "heap/detect.h"
#include "shim/heap_hot.h"
#include "symbols/elfsym.h"
#include "util/proc.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int found;
/* jemalloc's control function once found with its profiler on: agent
 * threads turn their own sampling off with it. */
static _Atomic(pp_mallctl_fn) exclude_with;
static struct pp_heap_allocator cached;

static struct link_map *map_of(const void *addr)
{
	Dl_info info;
	struct link_map *lm = NULL;
	if (!addr || !dladdr1(addr, &info, (void **)&lm, RTLD_DL_LINKMAP))
		return NULL;
	return lm;
}

static int is_main(const struct link_map *lm)
{
	return lm && (!lm->l_name || !lm->l_name[0]);
}

static void path_of(const struct link_map *lm, char *out, size_t len)
{
	if (is_main(lm)) {
		ssize_t n = readlink("/proc/self/exe", out, len - 1);
		out[n > 0 ? n : 0] = 0;
	} else
		snprintf(out, len, "%s", lm && lm->l_name ? lm->l_name : "");
}

/* What find() asks of the executable, looked up in its symbol table in
 * one read (find runs once, under mu). */
static struct pp_elfsym exe_syms[] = {
    {.name = "malloc"},        {.name = "tc_malloc"},   {.name = "mi_malloc"},
    {.name = "__asan_init"},   {.name = "__tsan_init"}, {.name = "__msan_init"},
    {.name = "__libc_malloc"},
};
static int exe_read;

static int exe_defines(const char *name)
{
	const size_t n = sizeof exe_syms / sizeof exe_syms[0];
	if (!exe_read) {
		exe_read = 1;
		if (pp_elfsym_lookup("/proc/self/exe", exe_syms, n, NULL) < 0)
			for (size_t i = 0; i < n; i++)
				exe_syms[i].found = 0;
	}
	for (size_t i = 0; i < n; i++)
		if (!strcmp(exe_syms[i].name, name))
			return exe_syms[i].found;
	return 0;
}

/* Does the object lm itself define the function name? */
static int defines(struct link_map *lm, const char *name)
{
	if (!lm)
		return 0;
	if (is_main(lm))
		return exe_defines(name);
	void *h = dlopen(lm->l_name, RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return 0;
	void *f = dlsym(h, name);
	dlclose(h);
	return f && map_of(f) == lm;
}

/* The first object from lm on, in the search order, that defines malloc
 * (the vDSO and other nameless maps but the executable's left out). From
 * the start, the one the host's calls reach; not dlsym's answer: in an
 * executable built without -pie that takes malloc's address, dlsym answers
 * the executable's PLT entry (the canonical address), which only jumps to
 * that first definition. From after ours, the allocator the wrappers
 * forward to. */
static struct link_map *first_malloc(struct link_map *lm)
{
	for (; lm; lm = lm->l_next)
		if ((is_main(lm) || lm->l_name[0]) && defines(lm, "malloc"))
			return lm;
	return NULL;
}

static void name_allocator(struct pp_heap_allocator *a, struct link_map *lm)
{
	a->name = "unknown";
	path_of(lm, a->path, sizeof a->path);
	a->linkage = is_main(lm) ? "static" : "shared";
	if (a->je.mallctl && !a->je.prefixed &&
	    strcmp(a->je.path, a->path) == 0) {
		a->name = "jemalloc";
		snprintf(a->version, sizeof a->version, "%s", a->je.version);
	} else if (defines(lm, "tc_malloc") ||
	           (is_main(lm) && a->tc.linkage == PP_TCMALLOC_STATIC)) {
		/* (a stripped executable: tcmalloc.c knows it by its
		 * strings) */
		a->name = "tcmalloc";
		snprintf(a->version, sizeof a->version, "%s", a->tc.version);
	} else if (defines(lm, "mi_malloc"))
		a->name = "mimalloc";
	else if (defines(lm, "__asan_init") || defines(lm, "__tsan_init") ||
	         defines(lm, "__msan_init"))
		a->name = "sanitizer";
	else if (strstr(a->path, "/libc.so") || defines(lm, "__libc_malloc")) {
		a->name = "glibc";
		snprintf(a->version, sizeof a->version, "%s",
		         gnu_get_libc_version());
	}
}

static void find(struct pp_heap_allocator *a)
{
	memset(a, 0, sizeof *a);
	pp_jemalloc_find(&a->je);
	pp_tcmalloc_find(&a->tc);
	struct link_map *ours = map_of((const void *)pp_heap_filter);
	struct link_map *m = first_malloc(_r_debug.r_map);
	if (!m)
		m = map_of(dlsym(RTLD_DEFAULT, "malloc"));
	char ours_path[256];
	path_of(ours, ours_path, sizeof ours_path);

	a->interposed = m && m == ours;
	/* valgrind's tools that replace malloc (memcheck, massif, dhat,
	 * helgrind, drd) redirect every object's malloc to theirs at run
	 * time, dlsym still answering ours: their preloaded object says
	 * they run. */
	for (struct link_map *lm = _r_debug.r_map; lm; lm = lm->l_next)
		if (lm->l_name && strstr(lm->l_name, "/vgpreload_") &&
		    !strstr(lm->l_name, "/vgpreload_core")) {
			a->interposed = 0;
			a->name = "valgrind";
			a->linkage = "shared";
			path_of(lm, a->path, sizeof a->path);
			snprintf(a->reason, sizeof a->reason,
			         "valgrind replaces malloc in every object of "
			         "the process (%s): pullprof's wrappers are "
			         "never called",
			         a->path);
			return;
		}
	if (a->interposed) {
		struct link_map *next = first_malloc(ours->l_next);
		name_allocator(a, next);
		snprintf(a->reason, sizeof a->reason,
		         "the host's malloc resolves to pullprof's wrappers "
		         "(%s), which forward to %s (%s)",
		         ours_path, a->name, a->path[0] ? a->path : "?");
		/* C++'s new: libstdc++'s calls malloc (seen); an
		 * allocator's own does not. */
		struct link_map *n = map_of(dlsym(RTLD_DEFAULT, "_Znwm"));
		if (n && n != ours && !is_main(n) && n->l_name &&
		    !strstr(n->l_name, "libstdc++")) {
			a->new_bypass = 1;
			size_t len = strlen(a->reason);
			snprintf(
			    a->reason + len, sizeof a->reason - len,
			    "; C++'s operator new and delete resolve to %s, "
			    "which defines them: what C++ code allocates "
			    "with new does not reach the wrappers",
			    n->l_name);
		}
	} else if (!m) {
		a->name = "unknown";
		a->linkage = "unknown";
		snprintf(a->reason, sizeof a->reason,
		         "no malloc was found in this process's symbol "
		         "tables");
	} else {
		name_allocator(a, m);
		if (is_main(m))
			snprintf(a->reason, sizeof a->reason,
			         "the executable (%s) defines malloc itself "
			         "(%s linked statically): its calls never "
			         "reach pullprof's wrappers",
			         a->path, a->name);
		else if (!strcmp(a->name, "sanitizer"))
			snprintf(
			    a->reason, sizeof a->reason,
			    "the sanitizer runtime (%s) owns malloc: "
			    "pullprof's wrappers are left out of sanitizer "
			    "builds",
			    a->path);
		else
			snprintf(a->reason, sizeof a->reason,
			         "%s (%s) defines malloc and comes before "
			         "pullprof in the library search order: the "
			         "host's calls reach it, not pullprof's "
			         "wrappers (load pullprof first)",
			         a->path, a->name);
	}
	if (a->je.mallctl && a->je.prefixed) {
		/* A jemalloc beside the system's malloc (Redis's bundled
		 * one): what the host allocates through it is not seen. */
		size_t n = strlen(a->reason);
		snprintf(a->reason + n, sizeof a->reason - n,
		         "; a jemalloc with prefixed names (%s, in %s) serves "
		         "the host's own calls to it, which never reach "
		         "pullprof's wrappers",
		         a->je.symbol, a->je.path);
		a->name = "jemalloc";
		a->linkage = "prefixed";
		snprintf(a->version, sizeof a->version, "%s", a->je.version);
		snprintf(a->path, sizeof a->path, "%s", a->je.path);
	}
}

void pp_heap_allocator(struct pp_heap_allocator *out)
{
	pthread_mutex_lock(&mu);
	if (!found) {
		find(&cached);
		found = 1;
		/* Not this thread: it may be the host's, starting the
		 * agent. The agent's threads start after. */
		if (cached.je.mallctl && cached.je.opt_prof)
			atomic_store(&exclude_with, cached.je.mallctl);
	} else {
		pp_jemalloc_refresh(&cached.je);
		/* Its period and profiler's state (what does not change is
		 * kept by tcmalloc.c). */
		if (cached.tc.linkage != PP_TCMALLOC_NONE)
			pp_tcmalloc_find(&cached.tc);
	}
	*out = cached;
	pthread_mutex_unlock(&mu);
}

void pp_heap_allocator_forget_in_child(void)
{
	/* A parent thread may have held it (/status) across fork; what it
	 * guards is read-only once found. */
	pthread_mutex_init(&mu, NULL);
}

void pp_heap_allocator_exclude_thread(void)
{
	pp_mallctl_fn f = atomic_load(&exclude_with);
	bool off = 0;
	if (f)
		f("thread.prof.active", NULL, NULL, &off, sizeof off);
}

const char *pp_heap_source_name(enum pp_heap_source s)
{
	switch (s) {
	case PP_HEAP_SOURCE_INTERPOSED: return "interposed";
	case PP_HEAP_SOURCE_JEMALLOC: return "jemalloc";
	case PP_HEAP_SOURCE_TCMALLOC: return "tcmalloc";
	default: return "none";
	}
}

/* What to do to get jemalloc's profile, said of a. */
static void jemalloc_advice(const struct pp_heap_allocator *a, char *why,
                            size_t len)
{
	const struct pp_jemalloc *j = &a->je;
	const char *conf =
	    j->prefixed ? "MALLOC_CONF=prof:true (JE_MALLOC_CONF=prof:true "
	                  "for a jemalloc built with the je_ prefix)"
	                : "MALLOC_CONF=prof:true";
	const char *or_else =
	    j->prefixed ? ""
	                : "; or link jemalloc as a shared library loaded "
	                  "after pullprof";
	char allocated[64] = "";
	if (j->allocated >= 1000000)
		snprintf(allocated, sizeof allocated, ", %.1f MB allocated now",
		         (double)j->allocated / 1e6);
	if (!j->config_prof)
		snprintf(why, len,
		         "jemalloc %s (%s%s) was built without its heap "
		         "profiler (--enable-prof): pullprof cannot see these "
		         "allocations. Link a jemalloc built with it, link "
		         "jemalloc as a shared library loaded after pullprof, "
		         "or report allocations with pullprof_heap_alloc "
		         "(docs/api.md)",
		         j->version, j->path, allocated);
	else
		snprintf(
		    why, len,
		    "jemalloc %s (%s%s) has its heap profiler off: start "
		    "the process with %s (add prof_accum:true for /allocs) "
		    "and pullprof serves jemalloc's own profile%s",
		    j->version, j->path, allocated, conf, or_else);
}

/* Can tcmalloc's own sample (or its heap profiler's profile) be read? */
static int tcmalloc_usable(const struct pp_heap_allocator *a)
{
	const struct pp_tcmalloc *t = &a->tc;
	return t->linkage != PP_TCMALLOC_NONE && t->sample_callable &&
	       !t->minimal && !t->stripped &&
	       (t->sample_period > 0 || t->profiler_running);
}

/* Why tcmalloc's profile cannot be read: its own sentence. */
static void tcmalloc_why(char *why, size_t whylen)
{
	char *text = NULL;
	size_t len = 0;
	if (pp_tcmalloc_heap_sample(&text, &len, why, whylen) == 0)
		snprintf(why, whylen,
		         "gperftools tcmalloc's heap sample is not readable "
		         "now");
	free(text);
}

int pp_heap_source_check(const struct pp_heap_allocator *a,
                         enum pp_heap_source source, int sampling_on,
                         int view_allocs, char *why, size_t whylen)
{
	switch (source) {
	case PP_HEAP_SOURCE_INTERPOSED:
		/* Asked for: served even where the wrappers see little or
		 * nothing (the profile's comment says so). */
		if (sampling_on)
			return 0;
		snprintf(why, whylen,
		         "heap profiling is off in this process: start it "
		         "with PULLPROF_HEAP_RATE greater than 0");
		return -ENOTSUP;
	case PP_HEAP_SOURCE_JEMALLOC:
		if (!a->je.mallctl) {
			snprintf(why, whylen,
			         "source=jemalloc: no jemalloc in this "
			         "process (%s)",
			         a->reason);
			return -ENOTSUP;
		}
		if (!a->je.opt_prof) {
			jemalloc_advice(a, why, whylen);
			return -ENOTSUP;
		}
		if (view_allocs && !a->je.accum) {
			snprintf(
			    why, whylen,
			    "jemalloc %s keeps no cumulative counts, which "
			    "/allocs shows: start the process with "
			    "MALLOC_CONF=prof:true,prof_accum:true "
			    "(/heap shows what is in use)",
			    a->je.version);
			return -ENOTSUP;
		}
		return 0;
	case PP_HEAP_SOURCE_TCMALLOC:
		if (a->tc.linkage == PP_TCMALLOC_NONE) {
			snprintf(why, whylen,
			         "source=tcmalloc: no gperftools tcmalloc in "
			         "this process (%s)",
			         a->reason);
			return -ENOTSUP;
		}
		if (!tcmalloc_usable(a)) {
			tcmalloc_why(why, whylen);
			return -ENOTSUP;
		}
		if (view_allocs && !a->tc.profiler_running) {
			snprintf(why, whylen,
			         "tcmalloc's heap sample holds the objects in "
			         "use only: /allocs needs gperftools' heap "
			         "profiler (HEAPPROFILE=/tmp/prefix, with the "
			         "host linked with libtcmalloc); /heap shows "
			         "what is in use");
			return -ENOTSUP;
		}
		return 0;
	default: snprintf(why, whylen, "%s", a->reason); return -ENOTSUP;
	}
}

enum pp_heap_source pp_heap_source_auto(const struct pp_heap_allocator *a,
                                        int sampling_on, int view_allocs,
                                        char *why, size_t whylen)
{
	/* A prefixed jemalloc holds the host's own allocations: its
	 * profile is the true one; the wrappers see only the rest. */
	if (a->je.mallctl && a->je.prefixed) {
		if (a->je.opt_prof)
			return PP_HEAP_SOURCE_JEMALLOC;
		jemalloc_advice(a, why, whylen);
		size_t n = strlen(why);
		snprintf(why + n, whylen - n,
		         ". ?source=interposed gives the allocations that do "
		         "reach pullprof (the system malloc's)");
		return PP_HEAP_SOURCE_NONE;
	}
#ifdef PP_NO_HEAP_INTERPOSE
	/* A sanitizer build (a test build) leaves the wrappers out on
	 * purpose: /heap still runs pullprof's sampler and renderers, under
	 * the sanitizer, and its profile is empty. */
	if (!strcmp(a->name, "sanitizer"))
		return PP_HEAP_SOURCE_INTERPOSED;
#endif
	if (a->interposed) {
		int je = a->je.mallctl && a->je.opt_prof;
		int tc = tcmalloc_usable(a);
		/* C++'s new bypasses the wrappers: the allocator's own
		 * profile, when it has one on, is the whole truth. */
		if (a->new_bypass && (je || tc))
			return je ? PP_HEAP_SOURCE_JEMALLOC
			          : PP_HEAP_SOURCE_TCMALLOC;
		/* Both see the same allocations when jemalloc is the
		 * library behind the wrappers: pullprof's sampler answers
		 * (labels, peak, deltas); ?source=jemalloc asks jemalloc. */
		if (sampling_on || !(je || tc))
			return PP_HEAP_SOURCE_INTERPOSED;
		return je ? PP_HEAP_SOURCE_JEMALLOC : PP_HEAP_SOURCE_TCMALLOC;
	}
	if (!strcmp(a->name, "jemalloc") && a->je.mallctl) {
		if (a->je.opt_prof)
			return PP_HEAP_SOURCE_JEMALLOC;
		size_t n = (size_t)snprintf(why, whylen, "%s. ", a->reason);
		if (n < whylen)
			jemalloc_advice(a, why + n, whylen - n);
		return PP_HEAP_SOURCE_NONE;
	}
	(void)view_allocs;
	if (!strcmp(a->name, "tcmalloc") && a->tc.linkage != PP_TCMALLOC_NONE) {
		if (tcmalloc_usable(a))
			return PP_HEAP_SOURCE_TCMALLOC;
		size_t n = (size_t)snprintf(why, whylen, "%s. ", a->reason);
		if (n < whylen)
			tcmalloc_why(why + n, whylen - n);
		return PP_HEAP_SOURCE_NONE;
	}
	if (!strcmp(a->name, "valgrind")) {
		snprintf(why, whylen,
		         "%s, so pullprof's heap profile would be empty "
		         "(valgrind's own massif and dhat profile the heap)",
		         a->reason);
		return PP_HEAP_SOURCE_NONE;
	}
	snprintf(why, whylen,
	         "%s, so pullprof's heap profile would be empty. Link the "
	         "allocator as a shared library loaded after pullprof, or "
	         "report the host's allocations with pullprof_heap_alloc "
	         "(docs/api.md)",
	         a->reason);
	return PP_HEAP_SOURCE_NONE;
}

/* kB of anonymous memory the process has (RssAnon), or 0. */
static uint64_t rss_anon(void)
{
	char *text = NULL;
	size_t len = 0;
	uint64_t kb = 0;
	if (pp_proc_read_file("/proc/self/status", 1 << 16, &text, &len))
		return 0;
	const char *p = strstr(text, "RssAnon:");
	if (p)
		kb = strtoull(p + 8, NULL, 10);
	free(text);
	return kb;
}

int pp_heap_interposed_unseen(const struct pp_heap_allocator *a,
                              uint64_t sampled, uint64_t rate, char *why,
                              size_t whylen)
{
	if (!a->interposed || sampled || strcmp(a->name, "glibc") != 0)
		return 0;
	/* glibc holds next to nothing, yet the process has much anonymous
	 * memory and not one allocation was sampled: its allocations go
	 * somewhere the wrappers never see (an allocator hidden in a
	 * stripped executable, or its own mmap arenas). */
	struct mallinfo2 mi = mallinfo2();
	uint64_t glibc = (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
	uint64_t anon = rss_anon() << 10;
	if (glibc > (4u << 20) || anon < (64u << 20) || anon < 64 * rate)
		return 0;
	snprintf(why, whylen,
	         "no allocation was sampled although the process holds %.0f "
	         "MB of anonymous memory and glibc's malloc only %.1f MB: "
	         "the host's allocations do not reach pullprof's wrappers "
	         "(an allocator linked into a stripped executable, or memory "
	         "the host maps itself). Report its allocations with "
	         "pullprof_heap_alloc (docs/api.md), or ?source=interposed "
	         "for the (empty) profile",
	         (double)anon / 1e6, (double)glibc / 1e6);
	return 1;
}

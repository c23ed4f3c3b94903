/*
 * gperftools' tcmalloc in the host: found (in the executable, linked
 * statically, or in a shared library), described (version, linkage,
 * whether pullprof's malloc wrappers see the host's allocations, its heap
 * sampling period, its heap profiler), and its own heap sample taken as
 * gperftools' text ("heap profile: ... @ heap_v2/N", the lines
 * MallocExtension::GetHeapSample writes), for a host whose allocations
 * pullprof cannot interpose.
 *
 * No C++ is involved on pullprof's side: MallocExtension::GetHeapSample
 * fills a std::string, whose layout and code are the host's C++ library's;
 * it is a thin shell around the virtual ReadStackTraces(int *period),
 * which returns a plain array of (count, size, depth, pcs...) records. The
 * agent calls that one through the object's own vtable, at the slot where
 * MallocExtension's own vtable holds MallocExtension::ReadStackTraces
 * (both found by name), so no class layout is compiled in; it frees the
 * array with the operator delete[] tcmalloc's own code resolves to, and
 * writes the text itself. Every name it needs must be in the symbol table
 * of the object that holds tcmalloc: an executable stripped of its .symtab
 * is described (found by its strings) but not called.
 * Context: agent.
 */
#ifndef PP_HEAP_TCMALLOC_H
#define PP_HEAP_TCMALLOC_H

#include <stddef.h>
#include <stdint.h>

enum pp_tcmalloc_linkage {
	PP_TCMALLOC_NONE = 0,   /* no gperftools tcmalloc in this process */
	PP_TCMALLOC_STATIC = 1, /* linked into the executable */
	PP_TCMALLOC_SHARED = 2, /* a shared library (path) */
};

struct pp_tcmalloc {
	enum pp_tcmalloc_linkage linkage;
	char path[512];   /* the executable's or the library's file */
	char version[64]; /* tc_version(): "gperftools 2.10"; "" unknown */
	/* libtcmalloc_minimal: built without stack traces, so neither
	 * heap sampling nor the heap profiler (TCMALLOC_SAMPLE_PARAMETER
	 * is ignored). */
	int minimal;
	/* Found by its strings only: the executable has no .symtab
	 * (stripped), nothing of tcmalloc can be called. */
	int stripped;
	/* The malloc the process resolves (the first definition in the
	 * global scope) is not tcmalloc's own: something ahead of it
	 * (pullprof's wrapper when preloaded first) sees the calls.
	 * Statically linked: always 0 (the executable comes first). */
	int malloc_interposed;
	/* The same for C++'s operator new: a shared libtcmalloc defines
	 * it, so new and delete go straight to tcmalloc even when malloc is
	 * interposed. */
	int new_interposed;
	/* Mean bytes between two samples of tcmalloc's heap sampler; 0:
	 * off (tcmalloc's default); -1: unknown. */
	int64_t sample_period;
	/* Where sample_period was read: "flag" (tcmalloc's
	 * FLAGS_tcmalloc_sample_parameter, live), "environment"
	 * (TCMALLOC_SAMPLE_PARAMETER, which tcmalloc read at its start:
	 * the flag is not in a stripped library's table), "minimal", or
	 * "" when unknown. */
	const char *period_source;
	/* MallocExtension::instance() and the slot of ReadStackTraces were
	 * found: pp_tcmalloc_heap_sample can ask tcmalloc. */
	int sample_callable;
	/* gperftools' heap profiler (heap-profiler.h) is linked in; and
	 * IsHeapProfilerRunning() says it runs (HEAPPROFILE=prefix or
	 * HeapProfilerStart()). */
	int profiler_linked;
	int profiler_running;
};

/*
 * Look for a gperftools tcmalloc in this process and describe it into
 * *out. 1 when one was found, 0 when there is none (out->linkage is
 * PP_TCMALLOC_NONE), or a negative errno (-EMFILE: the executable could
 * not be opened). What does not change (where, which names) is looked up
 * once and kept; the period, the profiler's state and the interposition
 * are read again at each call. Costs one read of the executable's symbol
 * table the first time (a few ms for a large program), then
 * microseconds.
 */
int pp_tcmalloc_find(struct pp_tcmalloc *out);

/*
 * tcmalloc's heap sample now, as gperftools' text: the heap_v2 header
 * with tcmalloc's sampling period, a line per sampled live object
 * ("1: SIZE [1: SIZE] @ pc pc ..."; the stack as tcmalloc recorded it,
 * innermost first, starting inside tcmalloc), then MAPPED_LIBRARIES: and
 * /proc/self/maps. The values are the samples', not scaled: a reader
 * scales each by 1/(1-exp(-size/period)) as pprof does for heap_v2. When
 * sampling is off and gperftools' heap profiler runs, its profile instead
 * (GetHeapProfile(): "@ heapprofile", every allocation, unscaled).
 * *text is malloc'ed (the caller frees it), NUL-terminated, *len its
 * length. Otherwise a negative errno with a sentence in err naming what
 * was found and what the user can do: -ENOENT (no tcmalloc, or one that
 * cannot be reached by name), -ENOTSUP (sampling off, or a minimal
 * build), -ENOMEM, -EIO (tcmalloc answered nothing usable).
 */
int pp_tcmalloc_heap_sample(char **text, size_t *len, char *err, size_t errlen);

/*
 * gperftools' heap profiler's own profile (GetHeapProfile()), when it
 * runs: every allocation, in use and since its start ("@ heapprofile").
 * The same contract as pp_tcmalloc_heap_sample; -ENOTSUP when it is not
 * linked in or not running.
 */
int pp_tcmalloc_heap_profile(char **text, size_t *len, char *err,
                             size_t errlen);

/*
 * Is name (a function's name as the symbolizer gives it, demangled, with
 * or without its parameters) one of tcmalloc's own allocation functions?
 * The stacks tcmalloc records start inside it (malloc, tc_malloc,
 * tcmalloc::allocate_full_malloc_oom, (anonymous namespace)::
 * do_malloc_pages, operator new...): a profile drops a sample's frames up
 * to and including the deepest one for which this is true, as pprof does
 * for gperftools' heap profiles, so that it starts at the host's
 * allocating function. Exact names, not patterns: a host's own tc_parse
 * or do_malloc_stats is not tcmalloc's.
 */
int pp_tcmalloc_own_function(const char *name);

/* One line for logs and /status: "gperftools 2.10, linked statically
 * into /srv/app" (or "... in /usr/lib/.../libtcmalloc.so.4"). */
void pp_tcmalloc_describe(const struct pp_tcmalloc *t, char *buf, size_t len);

#endif

/*
 * gperftools' tcmalloc found, described and asked for its heap sample
 * (see tcmalloc.h for why through ReadStackTraces and not the std::string
 * of GetHeapSample).
 * Context: agent.
 */
#include "heap/tcmalloc.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <inttypes.h>
#include <link.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "symbols/elfsym.h"
#include "util/buf.h"
#include "util/env.h"
#include "util/fds.h"

/* The names looked up in the object that holds tcmalloc, by index. */
enum {
	S_INSTANCE,     /* MallocExtension::instance() */
	S_RST_BASE,     /* MallocExtension::ReadStackTraces(int *) */
	S_VT_BASE,      /* MallocExtension's vtable */
	S_VERSION,      /* tc_version */
	S_FLAG,         /* FLAGS_tcmalloc_sample_parameter (int64) */
	S_STACK,        /* GetStackTrace: absent from the minimal build */
	S_PROF_RUNNING, /* IsHeapProfilerRunning */
	S_GET_PROFILE,  /* GetHeapProfile */
	S_DELETE_ARRAY, /* operator delete[](void *) */
	S_FREE,
	S_MALLOC,
	S_NEW, /* operator new(size_t) */
	S_TC_MALLOC,
	S_COUNT
};

static const char *const names[S_COUNT] = {
    [S_INSTANCE] = "_ZN15MallocExtension8instanceEv",
    [S_RST_BASE] = "_ZN15MallocExtension15ReadStackTracesEPi",
    [S_VT_BASE] = "_ZTV15MallocExtension",
    [S_VERSION] = "tc_version",
    [S_FLAG] = "_ZN61FLAG__namespace_do_not_use_directly_use_DECLARE_"
               "int64_instead31FLAGS_tcmalloc_sample_parameterE",
    [S_STACK] = "_Z13GetStackTracePPvii",
    [S_PROF_RUNNING] = "IsHeapProfilerRunning",
    [S_GET_PROFILE] = "GetHeapProfile",
    [S_DELETE_ARRAY] = "_ZdaPv",
    [S_FREE] = "free",
    [S_MALLOC] = "malloc",
    [S_NEW] = "_Znwm",
    [S_TC_MALLOC] = "tc_malloc",
};

/* What does not change once found: kept for the process's life (a
 * forked child's is the same), published once (no lock: a child forked
 * while a thread held one would wait forever). */
struct found {
	enum pp_tcmalloc_linkage linkage;
	char path[512];
	char version[64];
	int minimal, stripped;
	uintptr_t addr[S_COUNT]; /* run-time addresses, 0: absent */
	uint64_t vt_size;
	int slot;      /* ReadStackTraces' index from the vtable's address
	                  point; -1: not found */
	char why[160]; /* why it cannot be called, when it cannot */
};

static _Atomic(struct found *) cached;
/* The executable was read and holds no tcmalloc: it is not read again
 * (a large program's symbol table takes milliseconds); only the loaded
 * libraries are asked again, through the loader. */
static atomic_int exe_has_none;

/* The executable's load bias, from its program headers (the auxiliary
 * vector), without the loader's lock dl_iterate_phdr takes. */
static uintptr_t exe_bias(void)
{
	const ElfW(Phdr) *ph = (const ElfW(Phdr) *)getauxval(AT_PHDR);
	unsigned long n = getauxval(AT_PHNUM);
	if (!ph)
		return 0;
	for (unsigned long i = 0; i < n; i++)
		if (ph[i].p_type == PT_PHDR)
			return (uintptr_t)ph - ph[i].p_vaddr;
	return 0; /* no PT_PHDR: a fixed-address (ET_EXEC) program */
}

static void fill(struct found *f, const struct pp_elfsym *s, uintptr_t bias)
{
	for (int i = 0; i < S_COUNT; i++)
		f->addr[i] = s[i].found ? bias + (uintptr_t)s[i].value : 0;
	f->vt_size = s[S_VT_BASE].size;
	f->minimal = !s[S_STACK].found;
}

/* ReadStackTraces' slot: where MallocExtension's own vtable holds
 * MallocExtension::ReadStackTraces. A class derived from it (tcmalloc's
 * TCMallocImplementation, the debug build's) overrides the function at
 * the same slot (the Itanium C++ ABI's single inheritance), whatever the
 * order of the virtual functions in this version's header. */
static void find_slot(struct found *f)
{
	f->slot = -1;
	if (!f->addr[S_INSTANCE] || !f->addr[S_RST_BASE] ||
	    !f->addr[S_VT_BASE] || f->vt_size < 3 * sizeof(uintptr_t)) {
		snprintf(f->why, sizeof f->why,
		         "MallocExtension's instance(), ReadStackTraces or "
		         "vtable is not in its symbol table");
		return;
	}
	const uintptr_t *vt = (const uintptr_t *)f->addr[S_VT_BASE];
	size_t n = f->vt_size / sizeof *vt;
	/* The function as the loader bound the vtable's entry: the one in
	 * the object, or the first definition in the global scope. */
	uintptr_t want[2] = {f->addr[S_RST_BASE], 0};
	want[1] = (uintptr_t)dlsym(RTLD_DEFAULT, names[S_RST_BASE]);
	/* [0] is the offset to top, [1] the type info: the virtual
	 * functions start at [2], the address point. */
	for (size_t i = 2; i < n; i++)
		if (vt[i] == want[0] || (want[1] && vt[i] == want[1])) {
			f->slot = (int)(i - 2);
			return;
		}
	snprintf(f->why, sizeof f->why,
	         "MallocExtension's vtable does not hold its "
	         "ReadStackTraces");
}

static int lookup(const char *path, struct pp_elfsym *s, unsigned *flags)
{
	for (int i = 0; i < S_COUNT; i++)
		s[i].name = names[i];
	return pp_elfsym_lookup(path, s, S_COUNT, flags);
}

/* tcmalloc in the executable: 1 (f filled), 0, or a negative errno. */
static int in_executable(struct found *f)
{
	struct pp_elfsym s[S_COUNT];
	unsigned flags;
	int rc = lookup("/proc/self/exe", s, &flags);
	if (rc < 0)
		return rc;
	ssize_t n = readlink("/proc/self/exe", f->path, sizeof f->path - 1);
	f->path[n > 0 ? n : 0] = 0;
	if (s[S_TC_MALLOC].found || s[S_INSTANCE].found || s[S_VERSION].found) {
		f->linkage = PP_TCMALLOC_STATIC;
		fill(f, s, exe_bias());
		return 1;
	}
	if (flags & PP_ELFSYM_SYMTAB)
		return 0;
	/* Stripped: only the exported names are left. An executable that
	 * defines malloc and holds gperftools' strings has tcmalloc in it,
	 * out of reach. */
	if (!s[S_MALLOC].found)
		return 0;
	char v[64] = "";
	/* tc_version's "gperftools 2.10"; else one of the variables every
	 * build reads, for a version string of another shape. */
	int has = pp_elfsym_has_string("/proc/self/exe", "gperftools ",
	                               "0123456789.", v, sizeof v);
	if (has <= 0)
		has = pp_elfsym_has_string(
		    "/proc/self/exe", "TCMALLOC_RELEASE_RATE", "", NULL, 0);
	if (has <= 0)
		return has < 0 ? has : 0;
	f->linkage = PP_TCMALLOC_STATIC;
	f->stripped = 1;
	if (strncmp(v, "gperftools ", 11) == 0)
		snprintf(f->version, sizeof f->version, "%s", v);
	fill(f, s, exe_bias());
	f->minimal = -1; /* unknown: its names are gone */
	return 1;
}

/* tcmalloc in a shared library the dynamic linker knows: 1, 0, or a
 * negative errno. */
static int in_library(struct found *f)
{
	void *sym = dlsym(RTLD_DEFAULT, "tc_version");
	if (!sym)
		sym = dlsym(RTLD_DEFAULT, names[S_INSTANCE]);
	if (!sym)
		return 0;
	Dl_info info;
	struct link_map *map = NULL;
	if (!dladdr1(sym, &info, (void **)&map, RTLD_DL_LINKMAP) || !map ||
	    !map->l_name || !map->l_name[0])
		return 0;
	snprintf(f->path, sizeof f->path, "%s", map->l_name);
	struct pp_elfsym s[S_COUNT];
	int rc = lookup(map->l_name, s, NULL);
	if (rc < 0)
		return rc;
	f->linkage = PP_TCMALLOC_SHARED;
	fill(f, s, (uintptr_t)map->l_addr);
	return 1;
}

static void read_version(struct found *f)
{
	if (f->version[0] || !f->addr[S_VERSION])
		return;
	int major = 0, minor = 0;
	const char *patch = NULL;
	const char *(*tc_version)(int *, int *, const char **) =
	    (const char *(*)(int *, int *, const char **))f->addr[S_VERSION];
	const char *v = tc_version(&major, &minor, &patch);
	if (v)
		snprintf(f->version, sizeof f->version, "%s", v);
}

static struct found *found(int *err)
{
	struct found *f = atomic_load_explicit(&cached, memory_order_acquire);
	if (f)
		return f;
	f = calloc(1, sizeof *f);
	if (!f) {
		*err = -ENOMEM;
		return NULL;
	}
	f->slot = -1;
	int rc = atomic_load(&exe_has_none) ? 0 : in_executable(f);
	if (rc == 0) {
		atomic_store(&exe_has_none, 1);
		memset(f, 0, sizeof *f);
		f->slot = -1;
		rc = in_library(f);
	}
	if (rc < 0) {
		free(f);
		*err = rc;
		return NULL;
	}
	if (rc == 0) {
		/* None yet: a library may still be loaded later. */
		free(f);
		*err = 0;
		return NULL;
	}
	if (!f->stripped) {
		read_version(f);
		find_slot(f);
	}
	struct found *none = NULL;
	if (!atomic_compare_exchange_strong(&cached, &none, f)) {
		free(f);
		f = none;
	}
	return f;
}

/* The environment's TCMALLOC_SAMPLE_PARAMETER, as tcmalloc reads it (a
 * number; anything else is 0). */
static int64_t env_period(void)
{
	const char *v = pp_env_get("TCMALLOC_SAMPLE_PARAMETER");
	if (!v || !*v)
		return 0;
	char *end;
	long long n = strtoll(v, &end, 10);
	return *end || n < 0 ? 0 : (int64_t)n;
}

int pp_tcmalloc_find(struct pp_tcmalloc *out)
{
	memset(out, 0, sizeof *out);
	out->sample_period = -1;
	out->period_source = "";
	int err = 0;
	struct found *f = found(&err);
	if (!f)
		return err;
	out->linkage = f->linkage;
	snprintf(out->path, sizeof out->path, "%s", f->path);
	snprintf(out->version, sizeof out->version, "%s", f->version);
	out->minimal = f->minimal > 0;
	out->stripped = f->stripped;
	out->sample_callable = !f->stripped && !out->minimal && f->slot >= 0;
	out->profiler_linked =
	    f->addr[S_PROF_RUNNING] && f->addr[S_GET_PROFILE];
	if (out->profiler_linked)
		out->profiler_running =
		    ((int (*)(void))f->addr[S_PROF_RUNNING])() != 0;
	if (f->addr[S_FLAG]) {
		out->sample_period = *(const volatile int64_t *)f->addr[S_FLAG];
		out->period_source = "flag";
	} else if (out->minimal) {
		out->sample_period = 0;
		out->period_source = "minimal";
	} else if (!f->stripped) {
		out->sample_period = env_period();
		out->period_source = "environment";
	}
	/* Which malloc and operator new the process calls: the first
	 * definitions in the global scope. */
	uintptr_t m = (uintptr_t)dlsym(RTLD_DEFAULT, "malloc");
	uintptr_t n = (uintptr_t)dlsym(RTLD_DEFAULT, names[S_NEW]);
	if (f->linkage == PP_TCMALLOC_SHARED) {
		out->malloc_interposed =
		    f->addr[S_MALLOC] && m && m != f->addr[S_MALLOC];
		out->new_interposed = f->addr[S_NEW] ? n && n != f->addr[S_NEW]
		                                     : out->malloc_interposed;
	}
	return 1;
}

/* The functions a stack tcmalloc records starts in (gperftools 2.10's
 * allocation entry points and what they call before the sampler takes
 * the stack): C names, exact ... */
static const char *const own_names[] = {
    "malloc",
    "calloc",
    "realloc",
    "reallocarray",
    "memalign",
    "posix_memalign",
    "aligned_alloc",
    "valloc",
    "pvalloc",
    "__libc_malloc",
    "__libc_calloc",
    "__libc_realloc",
    "__libc_memalign",
    "__libc_valloc",
    "__libc_pvalloc",
    "tc_malloc",
    "tc_calloc",
    "tc_realloc",
    "tc_memalign",
    "tc_posix_memalign",
    "tc_valloc",
    "tc_pvalloc",
    "tc_new",
    "tc_new_nothrow",
    "tc_newarray",
    "tc_newarray_nothrow",
    "tc_new_aligned",
    "tc_new_aligned_nothrow",
    "tc_newarray_aligned",
    "tc_newarray_aligned_nothrow",
    "tc_malloc_skip_new_handler",
};

/* ... of its functions in an anonymous namespace (tcmalloc.cc's) ... */
static const char *const own_anonymous[] = {
    "do_malloc",
    "do_malloc_pages",
    "do_malloc_or_cpp_alloc",
    "do_calloc",
    "do_realloc",
    "do_realloc_with_callback",
    "do_memalign",
    "do_memalign_or_cpp_memalign",
    "retry_malloc",
};

/* ... and the beginnings of the C++ ones' names (namespaces, overloads). */
static const char *const own_prefixes[] = {
    "tcmalloc::",
    "operator new",
    "MallocHook::",
};

static int listed(const char *const *v, size_t nv, const char *s, size_t n)
{
	for (size_t i = 0; i < nv; i++)
		if (strlen(v[i]) == n && strncmp(s, v[i], n) == 0)
			return 1;
	return 0;
}

int pp_tcmalloc_own_function(const char *name)
{
	static const char anon[] = "(anonymous namespace)::";
	if (!name)
		return 0;
	for (size_t i = 0; i < sizeof own_prefixes / sizeof *own_prefixes; i++)
		if (strncmp(name, own_prefixes[i], strlen(own_prefixes[i])) ==
		    0)
			return 1;
	/* The name without its parameters, or a " [clone .cold]". */
	if (strncmp(name, anon, sizeof anon - 1) == 0) {
		const char *base = name + sizeof anon - 1;
		return listed(own_anonymous,
		              sizeof own_anonymous / sizeof *own_anonymous,
		              base, strcspn(base, "( "));
	}
	return listed(own_names, sizeof own_names / sizeof *own_names, name,
	              strcspn(name, "( "));
}

void pp_tcmalloc_describe(const struct pp_tcmalloc *t, char *buf, size_t len)
{
	const char *v = t->version[0] ? t->version : "gperftools tcmalloc";
	const char *min = t->minimal ? " (minimal)" : "";
	switch (t->linkage) {
	case PP_TCMALLOC_STATIC:
		snprintf(buf, len, "%s%s, linked statically into %s%s", v, min,
		         t->path, t->stripped ? " (stripped)" : "");
		break;
	case PP_TCMALLOC_SHARED:
		snprintf(buf, len, "%s%s in %s", v, min, t->path);
		break;
	default: snprintf(buf, len, "no gperftools tcmalloc"); break;
	}
}

/* Whether the host's allocations reach pullprof's wrappers, and what the
 * user can do to have them reach them. */
static const char *reach(const struct pp_tcmalloc *t)
{
	if (t->linkage == PP_TCMALLOC_STATIC)
		return "its allocations never reach pullprof's malloc wrappers";
	if (!t->malloc_interposed)
		return "it comes before pullprof in the library order, so its "
		       "allocations never reach pullprof's malloc wrappers";
	if (!t->new_interposed)
		return "malloc reaches pullprof's wrappers, but C++ new and "
		       "delete go straight to tcmalloc";
	return "its allocations reach pullprof's malloc wrappers";
}

static const char *remedy(const struct pp_tcmalloc *t)
{
	if (t->linkage == PP_TCMALLOC_STATIC)
		return "; or link libtcmalloc dynamically and preload pullprof "
		       "ahead of it";
	if (!t->malloc_interposed)
		return "; or preload pullprof ahead of libtcmalloc "
		       "(LD_PRELOAD=libpullprof.so:libtcmalloc.so)";
	return "";
}

static int refuse(const struct pp_tcmalloc *t, const struct found *f, char *err,
                  size_t errlen)
{
	char d[700];
	pp_tcmalloc_describe(t, d, sizeof d);
	if (t->linkage == PP_TCMALLOC_NONE) {
		snprintf(err, errlen, "no gperftools tcmalloc in this process");
		return -ENOENT;
	}
	if (t->stripped) {
		snprintf(
		    err, errlen,
		    "%s: %s, and its symbol table was stripped, so its heap "
		    "sample (MallocExtension) cannot be reached; keep the "
		    "symbol table (strip --strip-debug, not strip)%s",
		    d, reach(t), remedy(t));
		return -ENOENT;
	}
	if (t->minimal) {
		snprintf(
		    err, errlen,
		    "%s: %s, and the minimal tcmalloc records no stacks, so "
		    "it has no heap sample; link libtcmalloc (not "
		    "libtcmalloc_minimal) and run with "
		    "TCMALLOC_SAMPLE_PARAMETER=524288%s",
		    d, reach(t), remedy(t));
		return -ENOTSUP;
	}
	snprintf(err, errlen,
	         "%s: %s, and its heap sample cannot be reached: %s%s", d,
	         reach(t), f ? f->why : "not found", remedy(t));
	return -ENOENT;
}

static int sampling_off(const struct pp_tcmalloc *t, char *err, size_t errlen)
{
	char d[700];
	pp_tcmalloc_describe(t, d, sizeof d);
	snprintf(err, errlen,
	         "%s: %s, and tcmalloc's own heap sampling is off; start the "
	         "program with TCMALLOC_SAMPLE_PARAMETER=524288 (a sample "
	         "every 512 KiB allocated, on average) to have /heap served "
	         "from tcmalloc's sample%s",
	         d, reach(t), remedy(t));
	return -ENOTSUP;
}

/* gperftools' line for a count and a size: in use, then [allocated]. */
static void count_size(struct pp_buf *b, uint64_t count, uint64_t size)
{
	pp_buf_printf(
	    b, "%6" PRIu64 ": %8" PRIu64 " [%6" PRIu64 ": %8" PRIu64 "] @",
	    count, size, count, size);
}

/* The records ReadStackTraces returns: (count, size, depth, pc * depth)
 * each, a count of 0 last. Walked with bounds: a depth over this is not
 * tcmalloc's (its stacks hold 31 frames at most in 2.x). */
#define MAX_DEPTH 256
#define MAX_WORDS ((size_t)1 << 28)

static int walk(void **e, uint64_t *count, uint64_t *size, size_t *words)
{
	size_t i = 0;
	*count = *size = 0;
	while (e[i]) {
		uintptr_t depth = (uintptr_t)e[i + 2];
		if (depth > MAX_DEPTH || i > MAX_WORDS)
			return -EIO;
		*count += (uintptr_t)e[i];
		*size += (uintptr_t)e[i + 1];
		i += 3 + depth;
	}
	*words = i;
	return 0;
}

/* The text /proc/self/maps holds, after "MAPPED_LIBRARIES:", as
 * gperftools ends its profiles: the reader's mappings. */
static void append_maps(struct pp_buf *b)
{
	pp_buf_puts(b, "\nMAPPED_LIBRARIES:\n");
	FILE *m = pp_fds_fopen("/proc/self/maps", "r");
	if (!m)
		return;
	char chunk[4096];
	size_t n;
	while ((n = fread(chunk, 1, sizeof chunk, m)) > 0)
		pp_buf_append(b, chunk, n);
	pp_fds_fclose(m);
}

static int format(void **e, int period, char **text, size_t *len)
{
	uint64_t count, size;
	size_t words;
	if (walk(e, &count, &size, &words) < 0)
		return -EIO;
	struct pp_buf b = {0};
	pp_buf_puts(&b, "heap profile: ");
	count_size(&b, count, size);
	pp_buf_printf(&b, " heap_v2/%d\n", period);
	for (size_t i = 0; e[i];) {
		uintptr_t depth = (uintptr_t)e[i + 2];
		count_size(&b, (uintptr_t)e[i], (uintptr_t)e[i + 1]);
		for (uintptr_t d = 0; d < depth; d++)
			pp_buf_printf(&b, " 0x%" PRIxPTR,
			              (uintptr_t)e[i + 3 + d]);
		pp_buf_puts(&b, "\n");
		i += 3 + depth;
	}
	append_maps(&b);
	*text = pp_buf_take(&b, len);
	pp_buf_free(&b);
	return *text ? 0 : -ENOMEM;
}

/* operator delete[] as tcmalloc's own code resolves it: inside the
 * executable, its own definition (an executable binds its calls to what
 * it defines); in a library, the first one in the global scope, as its
 * PLT does. */
static void delete_array(const struct found *f, void *p)
{
	void (*del)(void *) = NULL;
	if (f->linkage == PP_TCMALLOC_STATIC)
		del = (void (*)(void *))f->addr[S_DELETE_ARRAY];
	else
		del = (void (*)(void *))dlsym(RTLD_DEFAULT, "_ZdaPv");
	if (del)
		del(p);
	/* else leaked on purpose: freeing another allocator's block
	 * would be worse. tcmalloc defines operator delete[] itself. */
}

/* The start of both reads: *t described, *f the names found (NULL when
 * none), the output emptied. 0, or a negative errno with a sentence. */
static int begin(struct pp_tcmalloc *t, const struct found **f, char **text,
                 size_t *len, char *err, size_t errlen)
{
	*text = NULL;
	*len = 0;
	*f = NULL;
	int rc = pp_tcmalloc_find(t);
	if (rc < 0) {
		snprintf(err, errlen, "looking for tcmalloc: %s",
		         strerror(-rc));
		return rc;
	}
	int e = 0;
	*f = rc > 0 ? found(&e) : NULL;
	return 0;
}

int pp_tcmalloc_heap_profile(char **text, size_t *len, char *err, size_t errlen)
{
	struct pp_tcmalloc t;
	const struct found *f;
	int rc = begin(&t, &f, text, len, err, errlen);
	if (rc < 0)
		return rc;
	if (!f || t.stripped)
		return refuse(&t, f, err, errlen);
	char d[700];
	pp_tcmalloc_describe(&t, d, sizeof d);
	if (!t.profiler_linked || !t.profiler_running) {
		snprintf(err, errlen,
		         "%s: gperftools' heap profiler is %s; start the "
		         "program with HEAPPROFILE=/path/prefix, or call "
		         "HeapProfilerStart()",
		         d,
		         t.profiler_linked ? "not running" : "not linked in");
		return -ENOTSUP;
	}
	char *p = ((char *(*)(void))f->addr[S_GET_PROFILE])();
	if (!p) {
		snprintf(err, errlen, "%s: GetHeapProfile() returned nothing",
		         d);
		return -EIO;
	}
	size_t n = strlen(p);
	char *copy = malloc(n + 1);
	if (copy)
		memcpy(copy, p, n + 1);
	/* GetHeapProfile's buffer is from malloc as its code resolves it:
	 * the executable's own free, or the first in the global scope (the
	 * one this file calls). */
	if (f->linkage == PP_TCMALLOC_STATIC && f->addr[S_FREE])
		((void (*)(void *))f->addr[S_FREE])(p);
	else
		free(p);
	if (!copy) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	*text = copy;
	*len = n;
	return 0;
}

int pp_tcmalloc_heap_sample(char **text, size_t *len, char *err, size_t errlen)
{
	struct pp_tcmalloc t;
	const struct found *f;
	int rc = begin(&t, &f, text, len, err, errlen);
	if (rc < 0)
		return rc;
	if (!f || !t.sample_callable) {
		if (f && t.profiler_running && !t.stripped)
			return pp_tcmalloc_heap_profile(text, len, err, errlen);
		return refuse(&t, f, err, errlen);
	}
	void *ext = ((void *(*)(void))f->addr[S_INSTANCE])();
	if (!ext) {
		snprintf(err, errlen, "%s: MallocExtension::instance() is NULL",
		         t.path);
		return -EIO;
	}
	/* The object's own vtable (its dynamic class's), at the slot
	 * MallocExtension declares ReadStackTraces. */
	void **(*rst)(void *, int *) =
	    (void **(*)(void *, int *))(*(void *const *const *)ext)[f->slot];
	int period = 0;
	void **entries = rst(ext, &period);
	if (!entries) {
		/* MallocExtension's own answer: no sampling in this
		 * allocator. */
		if (t.profiler_running)
			return pp_tcmalloc_heap_profile(text, len, err, errlen);
		return sampling_off(&t, err, errlen);
	}
	if (period <= 0) {
		delete_array(f, entries);
		if (t.profiler_running)
			return pp_tcmalloc_heap_profile(text, len, err, errlen);
		return sampling_off(&t, err, errlen);
	}
	rc = format(entries, period, text, len);
	delete_array(f, entries);
	if (rc == -EIO)
		snprintf(err, errlen,
		         "%s: tcmalloc's stack traces are not in the expected "
		         "form (a stack deeper than %d frames)",
		         t.path, MAX_DEPTH);
	else if (rc < 0)
		snprintf(err, errlen, "out of memory");
	return rc;
}

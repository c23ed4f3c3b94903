/*
 * dlclose and dl_iterate_phdr, interposed. Part of the light object
 * (src/shim/shim.h): until the agent is loaded both forward at once.
 *
 * dlclose. Called by the application like the
 * real one, which it calls. Before an image can go away it tells the unwind
 * registry, so the SIGPROF handler stops trusting tables until the registry
 * has caught up (at most one collector pass later). Without this, a library
 * unloaded and another loaded at the same place in between two refreshes
 * could make libunwind read the old table's address.
 * Context: host.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stddef.h>

#include "pullprof.h"
#include "shim/shim.h"
#include "unwind/registry.h"

PULLPROF_API int dlclose(void *handle)
{
	static int (*real)(void *);
	if (!real) {
		real = (int (*)(void *))dlsym(RTLD_NEXT, "dlclose");
		if (!real)
			return -1;
	}
	const struct pp_agent_ops *ops = PP_AGENT_OPS();
	if (!ops)
		return real(handle);
	ops->unloading();
	int rc = real(handle), saved = errno;
	/* Until the registry has caught up, captures stop at the first
	 * frame: catch up at once rather than at the next periodic refresh,
	 * which a long profile build may delay. */
	ops->unloaded();
	errno = saved;
	return rc;
}

/*
 * dl_iterate_phdr. HOT/UNSAFE CONTEXT when called from a capture: libunwind
 * calls it (through the PLT, so it reaches this definition) for code it
 * has no registered table for, and it takes the loader lock. Inside a
 * capture (pp_unwind_guard set) the answer is "no images": libunwind stops
 * there instead of waiting for a lock the interrupted code, or another
 * thread waiting on libunwind's own lock, may hold. Everyone else gets the
 * real one.
 */
PP_SHIM_EXPORT __thread int pp_unwind_guard
    __attribute__((tls_model("initial-exec")));

typedef int (*iterate_fn)(int (*)(struct dl_phdr_info *, size_t, void *),
                          void *);
static iterate_fn real_iterate;

/* Not instrumented by ThreadSanitizer: TSan's runtime enumerates the loaded
 * images while it initialises, before any thread state exists, through its
 * own dl_iterate_phdr interceptor, whose "real" one (the next in the
 * lookup order) is this definition; an instrumented entry would record an
 * event for a thread TSan has not set up yet and crash (SEGV in
 * __tsan_func_entry). Nothing here needs TSan's eyes: a TLS flag, a relaxed
 * counter, and one pointer published with release/acquire. */
#if defined(__SANITIZE_THREAD__)
#define PP_NO_TSAN __attribute__((no_sanitize_thread))
#else
#define PP_NO_TSAN
#endif

PULLPROF_API PP_NO_TSAN int
dl_iterate_phdr(int (*cb)(struct dl_phdr_info *, size_t, void *), void *data)
{
	if (pp_unwind_guard) {
		__atomic_fetch_add(&pp_shim.guard_hits, 1, __ATOMIC_RELAXED);
		return 0;
	}
	iterate_fn real = __atomic_load_n(&real_iterate, __ATOMIC_ACQUIRE);
	if (!real) {
		real = (iterate_fn)dlsym(RTLD_NEXT, "dl_iterate_phdr");
		if (!real)
			return 0;
		__atomic_store_n(&real_iterate, real, __ATOMIC_RELEASE);
	}
	return real(cb, data);
}

/* Our own definition, whoever wins the global lookup (the agent compares
 * it with what libunwind's lookup finds: pp_unwind_guard_works). */
extern __typeof(dl_iterate_phdr) pp_dl_iterate_phdr_self
    __attribute__((alias("dl_iterate_phdr"), visibility("hidden")));

__attribute__((constructor)) static void resolve_iterate(void)
{
	/* Atomic: under autostart the agent's threads run (and read it,
	 * pp_unwind_guard_works) before this constructor does; TSan reported
	 * the plain store racing with a preloaded host's first CPU window. */
	__atomic_store_n(&pp_shim.iterate_self, (void *)pp_dl_iterate_phdr_self,
	                 __ATOMIC_RELEASE);
	/* Early, so that a capture never calls dlsym. */
	if (!real_iterate)
		__atomic_store_n(
		    &real_iterate,
		    (iterate_fn)dlsym(RTLD_NEXT, "dl_iterate_phdr"),
		    __ATOMIC_RELEASE);
}

/*
 * The unwind-table registry's readers (registry_internal.h): what the
 * sampling signal's handler and the heap sampler call to find an image's
 * frame table and to read memory for libunwind, on the arrays the agent's
 * side (registry.c) publishes. Atomics and reads of published, immutable
 * arrays; a reader count keeps them from being freed under a reader.
 * Context: signal.
 */
#define UNW_LOCAL_ONLY
#include <errno.h>
#include <libunwind.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "shim/cpu_hot.h"
#include "unwind/registry.h"
#include "unwind/registry_internal.h"
#include "unwind/unwind.h"
#include "util/seccomp.h"

_Atomic(struct range_set *) pp_registry_published;
atomic_int pp_registry_readers;
/* Set by our dlclose wrapper before an image goes away, cleared once the
 * registry caught up: meanwhile the handler trusts no table. */
atomic_int pp_registry_unloads;
/* Set for good by the first dlclose: libunwind's per-thread trace cache
 * (unw_backtrace) keeps frame shapes by address and cannot be flushed, so
 * once code may have been unmapped, captures take the checked path. */
atomic_int pp_registry_ever_unloaded;

/* Counted per thread too: a handler left inside gives its count back
 * (shim/cpu_hot.h). */
void pp_registry_enter(void)
{
	atomic_fetch_add_explicit(&pp_registry_readers, 1,
	                          memory_order_acq_rel);
	pp_cpu_tls.registry++;
}

void pp_registry_leave(void)
{
	pp_cpu_tls.registry--;
	atomic_fetch_sub_explicit(&pp_registry_readers, 1,
	                          memory_order_release);
}

void pp_registry_forget_readers(int n)
{
	atomic_fetch_sub_explicit(&pp_registry_readers, n,
	                          memory_order_release);
}

static const struct range *search(const struct range *r, size_t n, uintptr_t ip)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (ip < r[mid].lo)
			hi = mid;
		else if (ip >= r[mid].hi)
			lo = mid + 1;
		else
			return &r[mid];
	}
	return NULL;
}

static const struct range *find(uintptr_t ip)
{
	if (atomic_load_explicit(&pp_registry_unloads, memory_order_acquire))
		return NULL;
	const struct range_set *s =
	    atomic_load_explicit(&pp_registry_published, memory_order_acquire);
	return s ? search(s->r, s->n, ip) : NULL;
}

/* Can [addr, addr + len) be loaded without a check: inside one readable
 * segment of a registered image (and no image is being unloaded)? */
static int readable(uintptr_t addr, size_t len)
{
	if (atomic_load_explicit(&pp_registry_unloads, memory_order_acquire))
		return 0;
	const struct range_set *s =
	    atomic_load_explicit(&pp_registry_published, memory_order_acquire);
	if (!s)
		return 0;
	const struct range *r = search(s->r + s->n, s->nread, addr);
	return r && addr <= UINTPTR_MAX - len && addr + len <= r->hi;
}

/*
 * libunwind's own accessor reads the local address space with plain loads
 * and, once a step fell back to its frame-chain heuristics, "validates" an
 * address first by writing a byte of it into a pipe it opened at its start
 * and reading it back (libunwind 1.6, x86_64 Ginit.c). That pipe is two
 * descriptor numbers kept in a static: a host that closes descriptors it did
 * not open (closefrom(3) at start-up) and makes a pipe of its own gets them,
 * and the next validation, in a SIGPROF handler or a heap-sampled malloc,
 * reads a byte out of the host's pipe (blocking forever on a blocking one)
 * and writes one into it; when the read fails libunwind closes both numbers
 * and opens a new pipe. Replacing the accessor keeps the pipe out of every
 * capture: memory inside a registered image's readable segments is loaded
 * (it stays mapped while registered: a dlclose first sets `unloading`),
 * anything else is copied with process_vm_readv, which fails instead of
 * faulting. No lock, no allocation, errno kept.
 */
int (*pp_registry_libunwind_read)(unw_addr_space_t, unw_word_t, unw_word_t *,
                                  int, void *);

int pp_registry_read_checked(unw_addr_space_t as, unw_word_t addr,
                             unw_word_t *val, int write, void *arg)
{
	if (write) /* libunwind writes only into its own cursor's frames */
		return pp_registry_libunwind_read(as, addr, val, write, arg);
	if (readable(addr, sizeof *val)) {
		memcpy(val, (const void *)addr, sizeof *val);
		return 0;
	}
	if (pp_seccomp_vm_readv_forbidden())
		return -UNW_EINVAL;
	int saved = errno;
	struct iovec local = {val, sizeof *val};
	struct iovec remote = {(void *)addr, sizeof *val};
	ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
	errno = saved;
	return got == (ssize_t)sizeof *val ? 0 : -UNW_EINVAL;
}

int pp_registry_covers(uintptr_t ip)
{
	return find(ip) != NULL;
}

const struct pp_frame_table *pp_registry_table(uintptr_t ip, int *covered)
{
	const struct range *r = find(ip);
	*covered = r != NULL;
	return r ? r->frames : NULL;
}

const struct pp_frame_table *
pp_registry_table_near(uintptr_t ip, int *covered,
                       struct pp_registry_near *near)
{
	/* An unload since the last frame voids what was found (find()
	 * answers NULL then too). */
	if (ip - near->lo < near->hi - near->lo &&
	    !atomic_load_explicit(&pp_registry_unloads, memory_order_acquire)) {
		*covered = 1;
		return near->frames;
	}
	const struct range *r = find(ip);
	*covered = r != NULL;
	if (!r)
		return NULL;
	*near = (struct pp_registry_near){r->lo, r->hi, r->frames};
	return r->frames;
}

int pp_registry_trace_safe(void)
{
	return !atomic_load_explicit(&pp_registry_ever_unloaded,
	                             memory_order_acquire) &&
	       !atomic_load_explicit(&pp_registry_unloads,
	                             memory_order_acquire) &&
	       atomic_load_explicit(&pp_registry_published,
	                            memory_order_acquire) != NULL;
}

void pp_registry_unloading(void)
{
	atomic_store(&pp_registry_ever_unloaded, 1);
	atomic_fetch_add(&pp_registry_unloads, 1);
}

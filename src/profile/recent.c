/* Recently served profiles.
 * Context: agent.
 */
#include "recent.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/clock.h"

struct pp_recent {
	uint64_t id;
	const char *kind; /* a static string */
	struct pp_profile *p;
	uint64_t added_ns;
	size_t bytes;  /* pp_profile_bytes when kept */
	unsigned refs; /* the store's (while kept) and each getter's */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct pp_recent *kept[PP_RECENT_MAX]; /* oldest first */
static unsigned nkept;
static uint64_t last_id;
static size_t kept_bytes, max_bytes = (size_t)64 << 20;

static void unref_locked(struct pp_recent *r)
{
	if (--r->refs == 0) {
		pp_profile_free(r->p);
		free(r);
	}
}

static void drop_locked(unsigned i)
{
	struct pp_recent *r = kept[i];
	memmove(&kept[i], &kept[i + 1], (nkept - i - 1) * sizeof kept[0]);
	nkept--;
	kept_bytes -= r->bytes;
	unref_locked(r);
}

static void expire_locked(void)
{
	uint64_t now = pp_clock_ns(CLOCK_MONOTONIC);
	while (nkept && now - kept[0]->added_ns >
	                    (uint64_t)PP_RECENT_TTL_S * PP_NS_PER_SEC)
		drop_locked(0);
}

/* A child forked while another thread held the lock gets it unlocked. */
static void before_fork(void)
{
	pthread_mutex_lock(&mu);
}

static void after_fork(void)
{
	pthread_mutex_unlock(&mu);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void register_atfork_once(void)
{
	pthread_atfork(before_fork, after_fork, after_fork);
}

void pp_recent_register_atfork(void)
{
	pthread_once(&atfork_once, register_atfork_once);
}

__attribute__((constructor)) static void recent_init(void)
{
	pp_recent_register_atfork();
}

uint64_t pp_recent_add(const char *kind, struct pp_profile *p)
{
	struct pp_recent *r = calloc(1, sizeof *r);
	if (!r) {
		pp_profile_free(p);
		return 0;
	}
	r->kind = kind;
	r->p = p;
	r->refs = 1;
	r->added_ns = pp_clock_ns(CLOCK_MONOTONIC);
	r->bytes = pp_profile_bytes(p);
	pthread_mutex_lock(&mu);
	expire_locked();
	/* The newest is kept whatever its size; older ones go while they
	 * would hold more than the bound together. */
	while (nkept &&
	       (nkept == PP_RECENT_MAX || kept_bytes + r->bytes > max_bytes))
		drop_locked(0);
	kept_bytes += r->bytes;
	r->id = ++last_id;
	kept[nkept++] = r;
	uint64_t id = r->id;
	pthread_mutex_unlock(&mu);
	return id;
}

void pp_recent_set_max_bytes(size_t bytes)
{
	pthread_mutex_lock(&mu);
	max_bytes = bytes;
	pthread_mutex_unlock(&mu);
}

struct pp_recent *pp_recent_get(uint64_t id, const char *kind, char *err,
                                size_t errlen)
{
	struct pp_recent *found = NULL;
	pthread_mutex_lock(&mu);
	expire_locked();
	for (unsigned i = 0; i < nkept; i++)
		if (kept[i]->id == id && strcmp(kept[i]->kind, kind) == 0) {
			found = kept[i];
			found->refs++;
			break;
		}
	pthread_mutex_unlock(&mu);
	if (!found)
		snprintf(err, errlen,
		         "no %s profile %llu: ids name one of the last %d "
		         "profiles served, for %d minutes",
		         strcmp(kind, "profile") == 0 ? "CPU" : kind,
		         (unsigned long long)id, PP_RECENT_MAX,
		         PP_RECENT_TTL_S / 60);
	return found;
}

const struct pp_profile *pp_recent_profile(const struct pp_recent *r)
{
	return r->p;
}

void pp_recent_unref(struct pp_recent *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&mu);
	unref_locked(r);
	pthread_mutex_unlock(&mu);
}

void pp_recent_clear(void)
{
	pthread_mutex_lock(&mu);
	while (nkept)
		drop_locked(nkept - 1);
	pthread_mutex_unlock(&mu);
}

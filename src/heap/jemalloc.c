/*
 * jemalloc's heap profiler (jemalloc.h). The dump goes to a memfd (or,
 * where memfd_create is refused, an unnamed O_TMPFILE file in /tmp) named
 * by its /proc/self/fd path: jemalloc opens the path itself, so no file is
 * left anywhere and nothing else can read it; the text is read back from
 * the memfd and the memfd closed.
 * Context: agent.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "heap/jemalloc.h"
#include "symbols/byname.h"
#include "util/fds.h"
#include "util/seccomp.h"

/* In order of preference: the plain name, Redis's and jemalloc's usual
 * prefix, Rust's tikv-jemallocator's. */
static const char *const names[] = {"mallctl", "je_mallctl", "_rjem_mallctl",
                                    NULL};

static int get_bool(pp_mallctl_fn f, const char *name)
{
	bool v = 0;
	size_t sz = sizeof v;
	return f(name, &v, &sz, NULL, 0) == 0 && v;
}

void pp_jemalloc_refresh(struct pp_jemalloc *j)
{
	pp_mallctl_fn f = j->mallctl;
	if (!f)
		return;
	const char *v = NULL;
	size_t sz = sizeof v;
	if (f("version", &v, &sz, NULL, 0) == 0 && v)
		snprintf(j->version, sizeof j->version, "%s", v);
	j->config_prof = get_bool(f, "config.prof");
	j->opt_prof = get_bool(f, "opt.prof");
	j->prof_active = get_bool(f, "prof.active");
	j->accum = get_bool(f, "opt.prof_accum");
	size_t lg = 0;
	sz = sizeof lg;
	if (j->opt_prof && f("prof.lg_sample", &lg, &sz, NULL, 0) == 0)
		j->lg_sample = (unsigned)lg;
	else {
		sz = sizeof lg;
		if (f("opt.lg_prof_sample", &lg, &sz, NULL, 0) == 0)
			j->lg_sample = (unsigned)lg;
	}
	/* stats.* are refreshed by writing the epoch. */
	uint64_t epoch = 1;
	size_t allocated = 0;
	sz = sizeof epoch;
	if (f("epoch", &epoch, &sz, &epoch, sz) == 0) {
		sz = sizeof allocated;
		if (f("stats.allocated", &allocated, &sz, NULL, 0) == 0)
			j->allocated = allocated;
	}
}

int pp_jemalloc_find(struct pp_jemalloc *out)
{
	memset(out, 0, sizeof *out);
	/* Exported: a shared libjemalloc, or an executable that exports its
	 * functions. */
	for (size_t i = 0; names[i]; i++) {
		void *f = dlsym(RTLD_DEFAULT, names[i]);
		Dl_info info;
		struct link_map *lm = NULL;
		if (!f || !dladdr1(f, &info, (void **)&lm, RTLD_DL_LINKMAP))
			continue;
		out->mallctl = (pp_mallctl_fn)f;
		out->symbol = names[i];
		/* The executable's link map has no name. */
		out->in_main = lm && (!lm->l_name || !lm->l_name[0]);
		snprintf(out->path, sizeof out->path, "%s",
		         out->in_main ? ""
		         : lm         ? lm->l_name
		                      : "");
		break;
	}
	struct pp_byname b;
	if (!out->mallctl) {
		/* Linked into the executable and not exported: its symbol
		 * table (a shared jemalloc exports it). */
		if (pp_byname_exe(names, &b))
			return -ENOENT;
		out->mallctl = (pp_mallctl_fn)b.addr;
		out->symbol = b.name;
		snprintf(out->path, sizeof out->path, "%s", b.path);
		out->in_main = 1;
	} else if (out->in_main) {
		ssize_t n =
		    readlink("/proc/self/exe", out->path, sizeof out->path - 1);
		out->path[n > 0 ? n : 0] = 0;
	}
	out->prefixed = strcmp(out->symbol, "mallctl") != 0;
	pp_jemalloc_refresh(out);
	return 0;
}

int pp_jemalloc_dump(const struct pp_jemalloc *j, char **text, size_t *len,
                     char *err, size_t errlen)
{
	char path[64];
	int rc;

	*text = NULL;
	*len = 0;
	if (pp_fds_reserve()) {
		snprintf(err, errlen, "no file descriptor left for the dump");
		return -EMFILE;
	}
	/* Not made under a filter that kills for it (util/seccomp.h). */
	int fd = pp_seccomp_allowed(PP_SC_MEMFD_CREATE)
	             ? memfd_create("pullprof-jemalloc-dump", MFD_CLOEXEC)
	             : -1;
	/* memfd_create refused (a seccomp filter, an old kernel): a file
	 * with no name in /tmp, which nothing else can open either. */
	if (fd < 0)
		fd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		pp_fds_release();
		snprintf(err, errlen, "memfd_create: %s", strerror(-rc));
		return rc;
	}
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	const char *p = path;
	rc = j->mallctl("prof.dump", NULL, NULL, &p, sizeof p);
	if (rc) {
		snprintf(err, errlen, "jemalloc's prof.dump failed (%s): %s",
		         strerror(rc),
		         rc == ENOENT ? "it was built without profiling"
		                      : "is its profiler on (prof:true)?");
		rc = -rc;
		goto out;
	}
	struct stat sb;
	if (fstat(fd, &sb) || sb.st_size <= 0) {
		snprintf(err, errlen, "jemalloc's prof.dump wrote nothing");
		rc = -EIO;
		goto out;
	}
	char *buf = malloc((size_t)sb.st_size + 1);
	if (!buf) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	size_t got = 0;
	while (got < (size_t)sb.st_size) {
		ssize_t n =
		    pread(fd, buf + got, (size_t)sb.st_size - got, (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	buf[got] = 0;
	*text = buf;
	*len = got;
	rc = 0;
out:
	close(fd);
	pp_fds_release();
	return rc;
}

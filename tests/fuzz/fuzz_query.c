/*
 * libFuzzer target: the query-string rules of the HTTP endpoints and the
 * configuration value parsers. Built by scripts/fuzz.sh.
 *
 * The input is "QUERY[\nACCEPT-ENCODING]". QUERY is split into arguments
 * as libmicrohttpd does ('&' between arguments, the first '=' between key
 * and value, '+' made a space, then the server's unescape rule), and every
 * endpoint's parameter set is parsed from it: /profile's and /heap's
 * (seconds, hz, gc, peak, format, debug, top, sample_index, id), and the
 * record's times and durations (start, end, last, step: util/when.c). The
 * whole input is also given to the config parsers (unsigned values, listen
 * addresses, the prefix, the metrics path, PULLPROF_RECORD's duration).
 * Built with UBSan: a product or sum of nanoseconds that overflows is a
 * finding. Whatever the input: no crash, no
 * read out of bounds, an answer within its range, or -EINVAL with a sentence.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "ask/args.h"
#include "config.h"
#include "util/cidr.h"
#include "util/when.h"

#define MAXARGS 256

struct fuzz_args {
	size_t n;
	const char *key[MAXARGS], *value[MAXARGS];
};

static void fa_each(const struct pp_args *a, pp_args_fn fn, void *arg)
{
	const struct fuzz_args *f = a->cls;
	for (size_t i = 0; i < f->n; i++)
		fn(arg, f->key[i], f->value[i]);
}

static void plus_to_space(char *s)
{
	for (; *s; s++)
		if (*s == '+')
			*s = ' ';
}

static size_t unescape_checked(char *s)
{
	size_t before = strlen(s);
	size_t n = pp_args_unescape(s);
	/* Shorter or equal, and never a NUL inside (no %00 decoding). */
	if (n > before || strlen(s) != n)
		abort();
	return n;
}

static void split(char *q, struct fuzz_args *f)
{
	f->n = 0;
	while (q && f->n < MAXARGS) {
		char *amp = strchr(q, '&');
		if (amp)
			*amp = 0;
		char *eq = strchr(q, '=');
		if (eq)
			*eq = 0;
		plus_to_space(q);
		unescape_checked(q);
		f->key[f->n] = q;
		f->value[f->n] = NULL;
		if (eq) {
			plus_to_space(eq + 1);
			unescape_checked(eq + 1);
			f->value[f->n] = eq + 1;
		}
		f->n++;
		q = amp ? amp + 1 : NULL;
	}
}

static void check_err(int rc, const char *err, size_t errlen)
{
	if (rc == 0)
		return;
	if (rc != -EINVAL || !err[0] || strnlen(err, errlen) >= errlen)
		abort();
}

static void check_uint(const struct pp_args *a, const char *name, unsigned def,
                       unsigned min, unsigned max)
{
	char err[200];
	unsigned v = 12345;
	err[0] = 0;
	int rc = pp_args_uint(a, name, def, min, max, &v, err, sizeof err);
	check_err(rc, err, sizeof err);
	if (rc == 0 && v != def && (v < min || v > max))
		abort();
}

static void render(const struct pp_args *a, const char *types, int legacy)
{
	struct pp_render_opts o;
	char err[200];
	size_t ntypes = 1;
	for (const char *c = types; *c; c++)
		ntypes += *c == '|';
	memset(&o, 0x5a, sizeof o);
	err[0] = 0;
	int rc = pp_args_render(a, types, legacy, &o, err, sizeof err);
	check_err(rc, err, sizeof err);
	if (rc == 0) {
		int dump = legacy & PP_RENDER_DUMP;
		if ((unsigned)o.format > PP_FORMAT_THREADS ||
		    (!dump && o.format > PP_FORMAT_LEGACY) ||
		    (!(legacy & PP_RENDER_LEGACY) &&
		     o.format == PP_FORMAT_LEGACY))
			abort();
		if (o.sample_index < -1 || o.sample_index >= (int)ntypes)
			abort();
		if (o.gzip != 0 && o.gzip != 1)
			abort();
		if (o.top > 1000000)
			abort();
	}
}

/* A time or a duration parsed: in range, or refused with a sentence. */
static void when(const char *text)
{
	char err[200];
	int64_t ns = -1;
	err[0] = 0;
	int rc = pp_when_parse(text, &ns, err, sizeof err);
	if (rc == 0 ? ns < 0 : (rc != -EINVAL && rc != -ERANGE) || !err[0])
		abort();
	static const int64_t max[] = {3600ll * 1000000000, 86400ll * 1000000000,
	                              INT64_MAX};
	for (size_t i = 0; i < sizeof max / sizeof max[0]; i++) {
		err[0] = 0;
		rc = pp_duration_parse(text, max[i], &ns, err, sizeof err);
		if (rc == 0 ? ns <= 0 || ns > max[i]
		            : (rc != -EINVAL && rc != -ERANGE) || !err[0])
			abort();
	}
}

struct named {
	const char *name;
};

static void when_arg(void *cls, const char *key, const char *value)
{
	const struct named *n = cls;
	if (value && !strcmp(key, n->name))
		when(value);
}

static void params(const struct pp_args *a)
{
	char err[200];
	unsigned v;
	uint64_t id;

	check_uint(a, "seconds", 30, 1, 300);
	check_uint(a, "seconds", 0, 0, 86400);
	check_uint(a, "hz", 100, 1, 1000);
	check_uint(a, "gc", 0, 0, 1);
	err[0] = 0;
	int rc = pp_args_choice(a, "peak", "0|1|reset", &v, err, sizeof err);
	check_err(rc, err, sizeof err);
	if (rc == 0 && v > 2)
		abort();
	render(a, "samples|cpu", 1);
	render(a, "alloc_objects|alloc_space|inuse_objects|inuse_space", 0);
	render(a, "goroutine", PP_RENDER_DUMP);
	render(a, "samples|wall", 0);
	err[0] = 0;
	rc = pp_args_id(a, "seconds|hz", &id, err, sizeof err);
	check_err(rc, err, sizeof err);
	err[0] = 0;
	rc = pp_args_id(a, "seconds|peak", &id, err, sizeof err);
	check_err(rc, err, sizeof err);
	static const struct named times[] = {
	    {"start"}, {"end"}, {"last"}, {"step"}};
	for (size_t i = 0; i < sizeof times / sizeof times[0]; i++)
		a->each(a, when_arg, (void *)&times[i]);
}

static void config(const char *text)
{
	char err[200];
	unsigned v;
	static const unsigned ranges[][2] = {
	    {0, 65535}, {1, 1000}, {0, 1u << 30}, {0, UINT32_MAX}, {8, 512}};

	for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
		err[0] = 0;
		int rc = pp_config_parse_uint(text, ranges[i][0], ranges[i][1],
		                              &v, err, sizeof err);
		check_err(rc, err, sizeof err);
		if (rc == 0) {
			if (v < ranges[i][0] || v > ranges[i][1])
				abort();
			/* Plain decimal digits that strtoul reads the same. */
			if (strspn(text, "0123456789") != strlen(text) ||
			    strtoul(text, NULL, 10) != v)
				abort();
		}
	}
	struct sockaddr_storage ss;
	socklen_t sl = 0;
	err[0] = 0;
	int rc = pp_config_parse_listen(text, &ss, &sl, err, sizeof err);
	check_err(rc, err, sizeof err);
	if (rc == 0 && !(ss.ss_family == AF_INET || ss.ss_family == AF_INET6))
		abort();
	char *prefix = NULL;
	err[0] = 0;
	rc = pp_config_normalize_prefix(text, &prefix, err, sizeof err);
	check_err(rc, err, sizeof err);
	if (rc == 0) {
		size_t n = strlen(prefix);
		if (n && (prefix[0] != '/' || prefix[n - 1] == '/' ||
		          strstr(prefix, "//")))
			abort();
		free(prefix);
	}
	/* PULLPROF_METRICS_PATH: an accepted path is absolute, plain, and
	 * outside the prefix (or exactly its /metrics). */
	static const char *const prefixes[] = {"/debug/pprof", ""};
	for (size_t i = 0; i < 2; i++) {
		const char *p = prefixes[i];
		size_t plen = strlen(p);
		err[0] = 0;
		rc = pp_config_check_metrics_path(text, p, err, sizeof err);
		check_err(rc, err, sizeof err);
		if (rc == 0 && (text[0] != '/' || !text[1] ||
		                strpbrk(text, "?#% ") || strstr(text, "//") ||
		                (strncmp(text, p, plen) == 0 &&
		                 (text[plen] == 0 || text[plen] == '/') &&
		                 strcmp(text + plen, "/metrics") != 0)))
			abort();
	}
	/* PULLPROF_ALLOW: a parsed list matches what it was parsed from. */
	struct pp_cidr_list allow;
	err[0] = 0;
	rc = pp_cidr_parse(text, &allow, err, sizeof err);
	check_err(rc, err, sizeof err);
	if (rc == 0) {
		if (allow.n > PP_CIDR_MAX)
			abort();
		for (size_t i = 0; i < allow.n; i++)
			if (allow.v[i].bits > 128)
				abort();
		if (pp_cidr_match(&allow, (const struct sockaddr *)&ss) < 0)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* A request line holds no NUL: the text ends at the first one. */
	char *text = strndup((const char *)data, size);
	char *copy = strdup(text);
	struct fuzz_args f;

	if (!text || !copy)
		abort();
	config(text);
	when(text);
	(void)pp_args_takes_gzip(text);

	char *nl = strchr(copy, '\n');
	const char *accept = NULL;
	if (nl) {
		*nl = 0;
		accept = nl + 1;
	}
	split(copy, &f);
	struct pp_args a = {fa_each, accept, &f};
	params(&a);
	free(copy);
	free(text);
	return 0;
}

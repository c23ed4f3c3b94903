/* Query-string parameters, as pure functions of a pp_args.
 * Context: agent.
 */
#include "ask/args.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"

struct find {
	const char *name;
	const char *value; /* first one seen */
	int count, conflict;
};

static void each(void *cls, const char *key, const char *value)
{
	struct find *f = cls;
	if (strcmp(key, f->name) != 0)
		return;
	if (!value)
		value = "";
	if (f->count++ == 0)
		f->value = value;
	else if (strcmp(f->value, value) != 0)
		f->conflict = 1;
}

static int find(const struct pp_args *a, struct find *f, char *err,
                size_t errlen)
{
	a->each(a, each, f);
	if (f->conflict) {
		snprintf(err, errlen, "%s is given twice with different values",
		         f->name);
		return -EINVAL;
	}
	return 0;
}

const char *pp_args_value(const struct pp_args *a, const char *name)
{
	struct find f = {name, NULL, 0, 0};
	a->each(a, each, &f);
	return f.value;
}

int pp_args_choice(const struct pp_args *a, const char *name,
                   const char *choices, unsigned *out, char *err, size_t errlen)
{
	struct find f = {name, NULL, 0, 0};
	if (find(a, &f, err, errlen))
		return -EINVAL;
	*out = 0;
	if (f.count == 0)
		return 0;
	size_t len = strlen(f.value);
	for (const char *c = choices; *c; (*out)++) {
		size_t n = strcspn(c, "|");
		if (n == len && strncmp(c, f.value, n) == 0)
			return 0;
		c += n;
		c += *c == '|';
	}
	snprintf(err, errlen, "%s: \"%.40s\" is not one of %s", name, f.value,
	         choices);
	return -EINVAL;
}

int pp_args_uint(const struct pp_args *a, const char *name, unsigned def,
                 unsigned min, unsigned max, unsigned *out, char *err,
                 size_t errlen)
{
	struct find f = {name, NULL, 0, 0};
	char why[160];

	if (find(a, &f, err, errlen))
		return -EINVAL;
	if (f.count == 0) {
		*out = def;
		return 0;
	}
	if (pp_config_parse_uint(f.value, min, max, out, why, sizeof why)) {
		snprintf(err, errlen, "%s: %s", name, why);
		return -EINVAL;
	}
	return 0;
}

struct first {
	const char *name;
	int seen, valued;
};

static void first(void *cls, const char *key, const char *value)
{
	struct first *f = cls;
	if (!f->seen && strcmp(key, f->name) == 0) {
		f->seen = 1;
		f->valued = value != NULL;
	}
}

int pp_args_given(const struct pp_args *a, const char *name)
{
	struct first f = {name, 0, 0};
	a->each(a, first, &f);
	return f.valued;
}

int pp_args_takes_gzip(const char *v)
{
	while (v && *v) {
		size_t n = strcspn(v, ",");
		const char *t = v, *end = v + n;
		while (t < end && (*t == ' ' || *t == '\t'))
			t++;
		size_t tn = strcspn(t, " \t;,");
		int name = (tn == 4 && strncasecmp(t, "gzip", 4) == 0) ||
		           (tn == 6 && strncasecmp(t, "x-gzip", 6) == 0) ||
		           (tn == 1 && *t == '*');
		if (name) {
			const char *q = strstr(t, "q=");
			if (!q || q > end)
				return 1;
			/* q=0, q=0.0, q=0.00, q=0.000 refuse it. */
			q += 2;
			if (strtod(q, NULL) > 0.0)
				return 1;
		}
		v = *end ? end + 1 : end;
	}
	return 0;
}

int pp_args_render(const struct pp_args *a, const char *types, int flags,
                   struct pp_render_opts *o, char *err, size_t errlen)
{
	unsigned format, debug, top, index;
	size_t ntypes = 1;

	for (const char *c = types; *c; c++)
		ntypes += *c == '|';
	if (pp_args_choice(a, "format", PP_FORMAT_NAMES, &format, err,
	                   errlen) ||
	    pp_args_uint(a, "debug", 0, 0, flags & PP_RENDER_DUMP ? 2 : 1,
	                 &debug, err, errlen) ||
	    pp_args_uint(a, "top", 50, 0, 1000000, &top, err, errlen))
		return -EINVAL;
	int legacy = flags & PP_RENDER_LEGACY;
	const char *here = flags & PP_RENDER_TIMELINE
	                       ? "pprof|text|folded|json|perfetto"
	                       : "pprof|text|folded|json";
	if (format == PP_FORMAT_LEGACY && !legacy) {
		snprintf(err, errlen,
		         "format: legacy (gperftools) is a CPU profile format, "
		         "served by /profile only; here: %s",
		         here);
		return -EINVAL;
	}
	if (format == PP_FORMAT_PERFETTO && !(flags & PP_RENDER_TIMELINE)) {
		snprintf(err, errlen,
		         "format: perfetto is a timeline of samples, served "
		         "for /profile, /wall and /trace only; here: %s",
		         here);
		return -EINVAL;
	}
	if (debug && pp_args_given(a, "format") && format != PP_FORMAT_TEXT) {
		snprintf(
		    err, errlen,
		    "debug=%u asks for text and format for another format: "
		    "give one of them",
		    debug);
		return -EINVAL;
	}
	if (debug)
		format = PP_FORMAT_TEXT;
	if (debug && (flags & (PP_RENDER_DUMP | PP_RENDER_CONTENTION))) {
		/* The thread dump's texts: Go's grouped stacks, and a block
		 * per thread; the contention profiles' text. */
		if (pp_args_given(a, "top") ||
		    pp_args_given(a, "sample_index")) {
			snprintf(err, errlen,
			         "top and sample_index apply to format=text, "
			         "not to debug=%u",
			         debug);
			return -EINVAL;
		}
		o->format = flags & PP_RENDER_CONTENTION ? PP_FORMAT_CONTENTION
		            : debug == 1                 ? PP_FORMAT_STACKS
		                                         : PP_FORMAT_THREADS;
		o->top = 0;
		o->gzip = pp_args_takes_gzip(a->accept_encoding);
		o->sample_index = -1;
		return 0;
	}
	o->format = (enum pp_format)format;
	o->top = top;
	o->gzip = pp_args_takes_gzip(a->accept_encoding);
	o->sample_index = -1;
	if (pp_args_given(a, "top") && format != PP_FORMAT_TEXT) {
		snprintf(err, errlen, "top applies to text (debug=1) only");
		return -EINVAL;
	}
	if (!pp_args_given(a, "sample_index"))
		return 0;
	if (format == PP_FORMAT_LEGACY) {
		snprintf(err, errlen,
		         "sample_index: the legacy format holds sample counts "
		         "only");
		return -EINVAL;
	}
	/* A sample type's name, or its position (as pprof's -sample_index). */
	struct find f = {"sample_index", NULL, 0, 0};
	if (find(a, &f, err, errlen))
		return -EINVAL;
	const char *v = f.value ? f.value : "";
	if (*v >= '0' && *v <= '9' && strspn(v, "0123456789") == strlen(v) &&
	    strlen(v) < 4) {
		index = (unsigned)atoi(v);
		if (index < ntypes) {
			o->sample_index = (int)index;
			return 0;
		}
	} else if (!pp_args_choice(a, "sample_index", types, &index, err,
	                           errlen)) {
		o->sample_index = (int)index;
		return 0;
	}
	snprintf(err, errlen,
	         "sample_index: \"%.40s\" is not one of %s (or 0..%zu)", v,
	         types, ntypes - 1);
	return -EINVAL;
}

int pp_args_id(const struct pp_args *a, const char *sampling, uint64_t *id,
               char *err, size_t errlen)
{
	unsigned v;
	if (pp_args_uint(a, "id", 0, 1, UINT_MAX, &v, err, errlen))
		return -EINVAL;
	*id = v;
	for (const char *c = sampling; v && *c;) {
		size_t n = strcspn(c, "|");
		char name[32];
		snprintf(name, sizeof name, "%.*s", (int)n, c);
		if (pp_args_given(a, name)) {
			snprintf(err, errlen,
			         "id renders a profile already taken: %s does "
			         "not apply",
			         name);
			return -EINVAL;
		}
		c += n;
		c += *c == '|';
	}
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

size_t pp_args_unescape(char *str)
{
	char *in = str, *out = str;

	while (*in) {
		int hi, lo;
		if (in[0] == '%' && (hi = hexval(in[1])) >= 0 &&
		    (lo = hexval(in[2])) >= 0 && (hi | lo) != 0) {
			*out++ = (char)(hi * 16 + lo);
			in += 3;
		} else {
			*out++ = *in++;
		}
	}
	*out = 0;
	return (size_t)(out - str);
}

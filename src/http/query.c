/* Query-string parameters. Agent context. */
#include "query.h"

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

static enum MHD_Result each(void *cls, enum MHD_ValueKind kind, const char *key,
                            const char *value)
{
	struct find *f = cls;
	(void)kind;
	if (strcmp(key, f->name) != 0)
		return MHD_YES;
	if (!value)
		value = "";
	if (f->count++ == 0)
		f->value = value;
	else if (strcmp(f->value, value) != 0)
		f->conflict = 1;
	return MHD_YES;
}

static int find(struct pp_request *r, struct find *f, char *err, size_t errlen)
{
	MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, each, f);
	if (f->conflict) {
		snprintf(err, errlen, "%s is given twice with different values",
		         f->name);
		return -EINVAL;
	}
	return 0;
}

int pp_query_choice(struct pp_request *r, const char *name, const char *choices,
                    unsigned *out, char *err, size_t errlen)
{
	struct find f = {name, NULL, 0, 0};
	if (find(r, &f, err, errlen))
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

int pp_query_uint(struct pp_request *r, const char *name, unsigned def,
                  unsigned min, unsigned max, unsigned *out, char *err,
                  size_t errlen)
{
	struct find f = {name, NULL, 0, 0};
	char why[160];

	if (find(r, &f, err, errlen))
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

int pp_query_given(struct pp_request *r, const char *name)
{
	/* By the same exact-name match as the value lookups: libmicrohttpd's
	 * own lookup ignores case, so "?sample_Index=1" was "given" but had
	 * no value, and the host crashed on the NULL (found by fuzzing). */
	struct find f = {name, NULL, 0, 0};
	MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, each, &f);
	return f.count > 0;
}

/* Does an Accept-Encoding value take gzip? A "gzip" (or "x-gzip", or "*")
 * token whose q is not 0. */
static int takes_gzip(const char *v)
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

int pp_query_render(struct pp_request *r, const char *types, int legacy,
                    struct pp_render_opts *o, char *err, size_t errlen)
{
	unsigned format, debug, top, index;
	size_t ntypes = 1;

	for (const char *c = types; *c; c++)
		ntypes += *c == '|';
	if (pp_query_choice(r, "format", PP_FORMAT_NAMES, &format, err,
	                    errlen) ||
	    pp_query_uint(r, "debug", 0, 0, 1, &debug, err, errlen) ||
	    pp_query_uint(r, "top", 50, 0, 1000000, &top, err, errlen))
		return -EINVAL;
	if (format == PP_FORMAT_LEGACY && !legacy) {
		snprintf(
		    err, errlen,
		    "format: legacy (gperftools) is a CPU profile format, "
		    "served by /profile only; here: pprof|text|folded|json");
		return -EINVAL;
	}
	if (debug && pp_query_given(r, "format") && format != PP_FORMAT_TEXT) {
		snprintf(err, errlen,
		         "debug=1 asks for text and format for another format: "
		         "give one of them");
		return -EINVAL;
	}
	if (debug)
		format = PP_FORMAT_TEXT;
	o->format = (enum pp_format)format;
	o->top = top;
	o->gzip = takes_gzip(MHD_lookup_connection_value(
	    r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING));
	o->sample_index = -1;
	if (pp_query_given(r, "top") && format != PP_FORMAT_TEXT) {
		snprintf(err, errlen, "top applies to text (debug=1) only");
		return -EINVAL;
	}
	if (!pp_query_given(r, "sample_index"))
		return 0;
	if (format == PP_FORMAT_LEGACY) {
		snprintf(err, errlen,
		         "sample_index: the legacy format holds sample counts "
		         "only");
		return -EINVAL;
	}
	/* A sample type's name, or its position (as pprof's -sample_index). */
	struct find f = {"sample_index", NULL, 0, 0};
	if (find(r, &f, err, errlen))
		return -EINVAL;
	const char *v = f.value;
	if (*v >= '0' && *v <= '9' && strspn(v, "0123456789") == strlen(v) &&
	    strlen(v) < 4) {
		index = (unsigned)atoi(v);
		if (index < ntypes) {
			o->sample_index = (int)index;
			return 0;
		}
	} else if (!pp_query_choice(r, "sample_index", types, &index, err,
	                            errlen)) {
		o->sample_index = (int)index;
		return 0;
	}
	snprintf(err, errlen,
	         "sample_index: \"%.40s\" is not one of %s (or 0..%zu)", v,
	         types, ntypes - 1);
	return -EINVAL;
}

int pp_query_id(struct pp_request *r, const char *sampling, uint64_t *id,
                char *err, size_t errlen)
{
	unsigned v;
	if (pp_query_uint(r, "id", 0, 1, UINT_MAX, &v, err, errlen))
		return -EINVAL;
	*id = v;
	for (const char *c = sampling; v && *c;) {
		size_t n = strcspn(c, "|");
		char name[32];
		snprintf(name, sizeof name, "%.*s", (int)n, c);
		if (pp_query_given(r, name)) {
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

/* Query-string parameters. Agent context. */
#include "query.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

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

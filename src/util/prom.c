/* The Prometheus text exposition format.
 * Context: agent.
 */
#include "util/prom.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/utf8.h"

/* Escape backslash, newline and, in label values, the double quote: the
 * only characters the format gives a meaning to there. The format is UTF-8
 * (Prometheus's parser refuses a scrape with a value that is not): bytes
 * that are not are written repaired (util/utf8.h). */
static void escaped(struct pp_buf *b, const char *s, int quote)
{
	size_t len = strlen(s);
	if (!pp_utf8_valid(s, len)) {
		struct pp_buf t = {0};
		pp_utf8_append(&t, s, len);
		if (t.failed)
			b->failed = 1;
		else
			escaped(b, t.data, quote);
		pp_buf_free(&t);
		return;
	}
	const char *run = s;

	for (; *s; s++) {
		const char *rep = NULL;
		if (*s == '\\')
			rep = "\\\\";
		else if (*s == '\n')
			rep = "\\n";
		else if (*s == '"' && quote)
			rep = "\\\"";
		if (rep) {
			pp_buf_append(b, run, (size_t)(s - run));
			pp_buf_puts(b, rep);
			run = s + 1;
		}
	}
	pp_buf_append(b, run, (size_t)(s - run));
}

void pp_prom_escape(struct pp_buf *b, const char *value)
{
	escaped(b, value ? value : "", 1);
}

void pp_prom_family(struct pp_buf *b, const char *name, const char *type,
                    const char *help)
{
	pp_buf_printf(b, "# HELP %s ", name);
	escaped(b, help, 0);
	pp_buf_printf(b, "\n# TYPE %s %s\n", name, type);
}

void pp_prom_format(double v, char *out, size_t len)
{
	if (isnan(v)) {
		snprintf(out, len, "NaN");
		return;
	}
	if (isinf(v)) {
		snprintf(out, len, v > 0 ? "+Inf" : "-Inf");
		return;
	}
	/* 15 significant digits read back exactly for most values (and look
	 * like what was meant: 0.1, not 0.10000000000000001); 17 always do. */
	snprintf(out, len, "%.15g", v);
	if (strtod(out, NULL) != v)
		snprintf(out, len, "%.17g", v);
}

static void start(struct pp_buf *b, const char *name,
                  const struct pp_prom_label *labels, size_t n)
{
	pp_buf_puts(b, name);
	if (!n)
		return;
	for (size_t i = 0; i < n; i++) {
		pp_buf_printf(b, "%s%s=\"", i ? "," : "{", labels[i].name);
		pp_prom_escape(b, labels[i].value);
		pp_buf_puts(b, "\"");
	}
	pp_buf_puts(b, "}");
}

void pp_prom_u64(struct pp_buf *b, const char *name,
                 const struct pp_prom_label *labels, size_t nlabels,
                 uint64_t value)
{
	start(b, name, labels, nlabels);
	/* Exact as an integer, whatever its size: the reader makes a double
	 * of it. */
	pp_buf_printf(b, " %" PRIu64 "\n", value);
}

void pp_prom_f64(struct pp_buf *b, const char *name,
                 const struct pp_prom_label *labels, size_t nlabels,
                 double value)
{
	char num[40];

	pp_prom_format(value, num, sizeof num);
	start(b, name, labels, nlabels);
	pp_buf_printf(b, " %s\n", num);
}

void pp_prom_histogram(struct pp_buf *b, const char *name, const char *help,
                       const double *bounds, const uint64_t *counts, size_t n,
                       double sum)
{
	char series[128], le[40];
	uint64_t total = 0;
	struct pp_prom_label l = {"le", le};

	pp_prom_family(b, name, "histogram", help);
	snprintf(series, sizeof series, "%s_bucket", name);
	for (size_t i = 0; i <= n; i++) {
		total += counts[i];
		if (i < n)
			pp_prom_format(bounds[i], le, sizeof le);
		else
			snprintf(le, sizeof le, "+Inf");
		pp_prom_u64(b, series, &l, 1, total);
	}
	snprintf(series, sizeof series, "%s_sum", name);
	pp_prom_f64(b, series, NULL, 0, sum);
	snprintf(series, sizeof series, "%s_count", name);
	pp_prom_u64(b, series, NULL, 0, total);
}

void pp_prom_counter(struct pp_buf *b, const char *name, const char *help,
                     uint64_t v)
{
	pp_prom_family(b, name, "counter", help);
	pp_prom_u64(b, name, NULL, 0, v);
}

void pp_prom_gauge(struct pp_buf *b, const char *name, const char *help,
                   uint64_t v)
{
	pp_prom_family(b, name, "gauge", help);
	pp_prom_u64(b, name, NULL, 0, v);
}

void pp_prom_counter_f(struct pp_buf *b, const char *name, const char *help,
                       double v)
{
	pp_prom_family(b, name, "counter", help);
	pp_prom_f64(b, name, NULL, 0, v);
}

void pp_prom_gauge_f(struct pp_buf *b, const char *name, const char *help,
                     double v)
{
	pp_prom_family(b, name, "gauge", help);
	pp_prom_f64(b, name, NULL, 0, v);
}

/* One counter family with one label: names[i] = values[i]. */
void pp_prom_counter_by(struct pp_buf *b, const char *name, const char *help,
                        const char *label, const char *const *names,
                        const uint64_t *values, size_t n)
{
	pp_prom_family(b, name, "counter", help);
	for (size_t i = 0; i < n; i++) {
		struct pp_prom_label l = {label, names[i]};
		pp_prom_u64(b, name, &l, 1, values[i]);
	}
}

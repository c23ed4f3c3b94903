/*
 * A writer of Prometheus's text exposition format (version 0.0.4), into a
 * pp_buf: family headers, samples with escaped label values, histograms.
 * Pure functions, no server: the /metrics handler (h_metrics.c) and the
 * unit tests use them.
 * Context: agent.
 */
#ifndef PP_PROM_H
#define PP_PROM_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

#define PP_PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct pp_prom_label {
	const char *name;  /* [a-zA-Z_][a-zA-Z0-9_]*, written as it is */
	const char *value; /* any bytes: escaped, and repaired when they are
	                      not UTF-8 */
};

/* "# HELP name help" and "# TYPE name type": once per family, before its
 * samples. help is escaped (backslash, newline). */
void pp_prom_family(struct pp_buf *b, const char *name, const char *type,
                    const char *help);

/* One sample: name{labels} value. */
void pp_prom_u64(struct pp_buf *b, const char *name,
                 const struct pp_prom_label *labels, size_t nlabels,
                 uint64_t value);
void pp_prom_f64(struct pp_buf *b, const char *name,
                 const struct pp_prom_label *labels, size_t nlabels,
                 double value);

/* A whole histogram family: counts[i] (not cumulative) are the
 * observations at most bounds[i] and above bounds[i - 1]; counts[n] those
 * above every bound. Writes the cumulative _bucket series with le=bounds
 * and "+Inf", _sum and _count (the total of counts, so the +Inf bucket
 * always equals it). */
void pp_prom_histogram(struct pp_buf *b, const char *name, const char *help,
                       const double *bounds, const uint64_t *counts, size_t n,
                       double sum);

/* A whole family of one unlabelled sample: a counter, a gauge. */
void pp_prom_counter(struct pp_buf *b, const char *name, const char *help,
                     uint64_t v);
void pp_prom_gauge(struct pp_buf *b, const char *name, const char *help,
                   uint64_t v);
void pp_prom_gauge_f(struct pp_buf *b, const char *name, const char *help,
                     double v);
/* A counter whose value is not whole (seconds). */
void pp_prom_counter_f(struct pp_buf *b, const char *name, const char *help,
                       double v);
/* One counter family with one label: label=names[i] has values[i]. */
void pp_prom_counter_by(struct pp_buf *b, const char *name, const char *help,
                        const char *label, const char *const *names,
                        const uint64_t *values, size_t n);

/* The text of a label value as the format wants it: \ " and newline
 * escaped, bytes that are not UTF-8 repaired (U+FFFD). */
void pp_prom_escape(struct pp_buf *b, const char *value);

/* A number as the format writes it: +Inf, -Inf, NaN, or the shortest
 * decimal that reads back as the same double. */
void pp_prom_format(double v, char *out, size_t len);

#endif

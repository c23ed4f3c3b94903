/*
 * The text renderers of the symbolized view: ?debug=1 (a header and the top
 * functions by flat and cumulative value, as `go tool pprof -top` prints
 * them) and ?format=folded (one "root;caller;leaf value" line per distinct
 * stack, the input of flamegraph.pl and speedscope).
 * Context: agent.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "render.h"
#include "util/clock.h"

/* ---- values as people read them ----------------------------------------- */

static void value(struct pp_buf *b, int64_t v, const char *unit)
{
	double a = (double)(v < 0 ? -v : v), x = (double)v;

	if (v == 0)
		pp_buf_puts(b, "0");
	else if (strcmp(unit, "nanoseconds") == 0) {
		if (a >= PP_NS_PER_SEC)
			pp_buf_printf(b, "%.2fs", x / PP_NS_PER_SEC);
		else if (a >= 1e6)
			pp_buf_printf(b, "%.2fms", x / 1e6);
		else if (a >= 1e3)
			pp_buf_printf(b, "%.2fus", x / 1e3);
		else
			pp_buf_printf(b, "%" PRId64 "ns", v);
	} else if (strcmp(unit, "bytes") == 0) {
		if (a >= 1024.0 * 1024 * 1024)
			pp_buf_printf(b, "%.2fGB", x / (1024.0 * 1024 * 1024));
		else if (a >= 1024.0 * 1024)
			pp_buf_printf(b, "%.2fMB", x / (1024.0 * 1024));
		else if (a >= 1024.0)
			pp_buf_printf(b, "%.2fkB", x / 1024.0);
		else
			pp_buf_printf(b, "%" PRId64 "B", v);
	} else {
		pp_buf_printf(b, "%" PRId64, v);
	}
}

/* value() right-aligned in a column of width w. */
static void column(struct pp_buf *b, int64_t v, const char *unit, int w)
{
	struct pp_buf t = {0};
	value(&t, v, unit);
	pp_buf_printf(b, "%*.*s", w, (int)t.len, t.data ? t.data : "");
	pp_buf_free(&t);
}

static double percent(int64_t v, int64_t total)
{
	return total ? 100.0 * (double)v / (double)total : 0.0;
}

/* ---- frames as names ---------------------------------------------------- */

/* An entry of the tables: function i < nfuncs, or the unknown address of
 * location i - nfuncs. */
static void entry_name(struct pp_buf *b, const struct pp_view *v, size_t e)
{
	if (e < v->nfuncs)
		pp_buf_puts(b, v->funcs[e]->name ? v->funcs[e]->name : "?");
	else
		pp_buf_printf(b, "0x%" PRIxPTR, v->locs[e - v->nfuncs].pc);
}

/* ---- ?debug=1 ------------------------------------------------------------ */

struct entry {
	size_t id;
	int64_t flat, cum;
	int64_t line, line_flat, line_cum; /* the function's hottest line */
	size_t stamp;                      /* last sample counted in cum */
};

static int by_flat(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	if (x->flat != y->flat)
		return x->flat < y->flat ? 1 : -1;
	if (x->cum != y->cum)
		return x->cum < y->cum ? 1 : -1;
	return x->id < y->id ? -1 : x->id > y->id;
}

static int by_cum(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	if (x->cum != y->cum)
		return x->cum < y->cum ? 1 : -1;
	return by_flat(a, b);
}

/* The hottest line of each function: the one whose locations carry the
 * most flat value, else the most cumulative. */
static void hot_line(struct entry *e, int64_t line, int64_t flat, int64_t cum)
{
	if (flat > e->line_flat ||
	    (flat == e->line_flat && cum > e->line_cum)) {
		e->line = line;
		e->line_flat = flat;
		e->line_cum = cum;
	}
}

static void where(struct pp_buf *b, const struct pp_view *v,
                  const struct entry *e)
{
	entry_name(b, v, e->id);
	if (e->id < v->nfuncs) {
		const struct pp_frame *f = v->funcs[e->id];
		if (f->file && *f->file) {
			pp_buf_printf(b, " %s", f->file);
			if (e->line > 0)
				pp_buf_printf(b, ":%" PRId64, e->line);
		}
	} else {
		const struct pp_mapping *m = v->locs[e->id - v->nfuncs].mapping;
		if (m && m->name && *m->name)
			pp_buf_printf(b, " (%s)", m->name);
	}
}

static void table(struct pp_buf *b, const struct pp_view *v, struct entry *rows,
                  size_t n, size_t shown, int64_t total, const char *unit,
                  int cum_first)
{
	int64_t sum = 0;

	if (cum_first)
		pp_buf_printf(b, "%10s %7s %10s %7s  %s\n", "cum", "cum%",
		              "flat", "flat%", "function file:line");
	else
		pp_buf_printf(b, "%10s %7s %7s %10s %7s  %s\n", "flat", "flat%",
		              "sum%", "cum", "cum%", "function file:line");
	for (size_t i = 0; i < n && i < shown; i++) {
		const struct entry *e = &rows[i];
		sum += e->flat;
		if (cum_first) {
			column(b, e->cum, unit, 10);
			pp_buf_printf(b, " %6.2f%% ", percent(e->cum, total));
			column(b, e->flat, unit, 10);
			pp_buf_printf(b, " %6.2f%%  ", percent(e->flat, total));
		} else {
			column(b, e->flat, unit, 10);
			pp_buf_printf(b, " %6.2f%% %6.2f%% ",
			              percent(e->flat, total),
			              percent(sum, total));
			column(b, e->cum, unit, 10);
			pp_buf_printf(b, " %6.2f%%  ", percent(e->cum, total));
		}
		where(b, v, e);
		pp_buf_puts(b, "\n");
	}
}

static void header(struct pp_buf *b, const struct pp_view *v, size_t vi,
                   int64_t total, size_t nstacks)
{
	const struct pp_profile *p = v->p;
	const struct pp_value_type *t = &p->types[vi];

	pp_buf_printf(b, "Type: %s (%s)\n", t->type, t->unit);
	if (p->time_nanos) {
		time_t s = (time_t)(p->time_nanos / PP_NS_PER_SEC);
		struct tm tm;
		char when[40];
		if (gmtime_r(&s, &tm) &&
		    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm))
			pp_buf_printf(b, "Time: %s\n", when);
	}
	if (p->duration_nanos) {
		pp_buf_puts(b, "Duration: ");
		value(b, p->duration_nanos, "nanoseconds");
		pp_buf_puts(b, ", ");
	}
	pp_buf_printf(b, "Total %s = ", t->type);
	value(b, total, t->unit);
	if (p->duration_nanos && strcmp(t->unit, "nanoseconds") == 0)
		pp_buf_printf(b, " (%.2f%% of the duration)",
		              percent(total, p->duration_nanos));
	pp_buf_printf(b, " in %zu stack%s\n", nstacks, nstacks == 1 ? "" : "s");
	if (p->period_type.type && p->period) {
		pp_buf_puts(b, "Period: ");
		value(b, p->period, p->period_type.unit);
		pp_buf_printf(b, " of %s\n", p->period_type.type);
	}
	pp_buf_puts(b, "Sample types:");
	for (size_t i = 0; i < p->ntypes; i++)
		pp_buf_printf(b, " %s/%s%s", p->types[i].type, p->types[i].unit,
		              i == vi ? " (shown)" : "");
	pp_buf_puts(b, "\n");
	for (size_t i = 0; i < p->ncomments; i++)
		pp_buf_printf(b, "Comment: %s\n", p->comments[i]);
	char note[1200];
	for (size_t i = 0; v->maps && i < v->maps->n; i++)
		if (pp_view_mapping_note(v, i, note, sizeof note))
			pp_buf_printf(b, "Comment: %s\n", note);
}

int pp_text_write(const struct pp_view *v, const struct pp_render_opts *o,
                  struct pp_buf *out)
{
	const struct pp_profile *p = v->p;
	size_t vi = pp_view_sample_index(v, o->sample_index);
	size_t nentries = v->nfuncs + v->nlocs, nstacks = 0;
	struct entry *e = calloc(nentries + 1, sizeof *e);
	int64_t *loc_flat = calloc(v->nlocs + 1, sizeof *loc_flat);
	int64_t *loc_cum = calloc(v->nlocs + 1, sizeof *loc_cum);
	size_t *loc_stamp = calloc(v->nlocs + 1, sizeof *loc_stamp);
	int64_t total = 0;
	int rc = 0;

	if (!e || !loc_flat || !loc_cum || !loc_stamp) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < nentries; i++)
		e[i].id = i;
	for (size_t i = 0; i < v->nsamples; i++) {
		int64_t x = v->samples[i]->values[vi];
		const uint32_t *st = v->stacks + v->stack_at[i];
		size_t depth = v->stack_at[i + 1] - v->stack_at[i];
		if (!x)
			continue;
		total += x;
		nstacks++;
		for (size_t k = 0; k < depth; k++) {
			const struct pp_view_loc *l = &v->locs[st[k]];
			if (k == 0)
				loc_flat[st[k]] += x;
			if (loc_stamp[st[k]] != i + 1) {
				loc_stamp[st[k]] = i + 1;
				loc_cum[st[k]] += x;
			}
			if (!l->nframes) {
				struct entry *u = &e[v->nfuncs + st[k]];
				if (k == 0)
					u->flat += x;
				if (u->stamp != i + 1) {
					u->stamp = i + 1;
					u->cum += x;
				}
				continue;
			}
			for (uint32_t f = 0; f < l->nframes; f++) {
				struct entry *u =
				    &e[v->func_of[l->first_func + f]];
				if (k == 0 && f == 0)
					u->flat += x;
				/* Once per sample: recursion counts once. */
				if (u->stamp != i + 1) {
					u->stamp = i + 1;
					u->cum += x;
				}
			}
		}
	}
	for (size_t i = 0; i < v->nlocs; i++) {
		const struct pp_view_loc *l = &v->locs[i];
		for (uint32_t f = 0; f < l->nframes; f++)
			hot_line(&e[v->func_of[l->first_func + f]],
			         l->frames[f].line, f == 0 ? loc_flat[i] : 0,
			         loc_cum[i]);
	}

	/* Drop the entries that never carried value. */
	size_t n = 0;
	for (size_t i = 0; i < nentries; i++)
		if (e[i].flat || e[i].cum)
			e[n++] = e[i];
	size_t shown = o->top && o->top < n ? o->top : n;
	const char *unit = p->types[vi].unit;

	header(out, v, vi, total, nstacks);
	qsort(e, n, sizeof *e, by_flat);
	pp_buf_printf(out, "\nShowing %zu of %zu functions, by flat %s:\n",
	              shown, n, p->types[vi].type);
	table(out, v, e, n, shown, total, unit, 0);
	qsort(e, n, sizeof *e, by_cum);
	pp_buf_printf(out,
	              "\nShowing %zu of %zu functions, by cumulative %s:\n",
	              shown, n, p->types[vi].type);
	table(out, v, e, n, shown, total, unit, 1);
out:
	free(e);
	free(loc_flat);
	free(loc_cum);
	free(loc_stamp);
	return rc;
}

/* ---- ?format=folded ------------------------------------------------------ */

struct line {
	size_t at, len; /* the stack text in the scratch buffer */
	const char *s;  /* ... once the buffer stops moving */
	int64_t value;
};

static int by_text(const void *a, const void *b)
{
	const struct line *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->s, y->s, n);
	return c ? c : x->len < y->len ? -1 : x->len > y->len;
}

/* A frame name as one field of a folded line: ';' separates frames, so it
 * becomes ':'; control characters become spaces. Spaces stay: the value
 * is after the last one. */
static void folded_name(struct pp_buf *b, const char *s)
{
	for (; *s; s++) {
		char c = *s;
		if (c == ';')
			c = ':';
		else if ((unsigned char)c < 0x20 || c == 0x7f)
			c = ' ';
		pp_buf_append(b, &c, 1);
	}
}

static void folded_stack(struct pp_buf *b, const struct pp_view *v, size_t i)
{
	const uint32_t *st = v->stacks + v->stack_at[i];
	size_t depth = v->stack_at[i + 1] - v->stack_at[i];
	int first = 1;

	if (!depth) {
		pp_buf_puts(b, "[no stack]");
		return;
	}
	/* Root first; within a location, the outermost (inlined-into)
	 * function first. */
	for (size_t k = depth; k-- > 0;) {
		const struct pp_view_loc *l = &v->locs[st[k]];
		if (!l->nframes) {
			pp_buf_printf(b, "%s0x%" PRIxPTR, first ? "" : ";",
			              l->pc);
			first = 0;
			continue;
		}
		for (uint32_t f = l->nframes; f-- > 0;) {
			if (!first)
				pp_buf_puts(b, ";");
			const char *name = l->frames[f].name;
			folded_name(b, name && *name ? name : "?");
			first = 0;
		}
	}
}

int pp_folded_write(const struct pp_view *v, const struct pp_render_opts *o,
                    struct pp_buf *out)
{
	size_t vi = pp_view_sample_index(v, o->sample_index);
	struct line *lines = malloc((v->nsamples + 1) * sizeof *lines);
	struct pp_buf text = {0};
	size_t n = 0;

	if (!lines)
		return -ENOMEM;
	for (size_t i = 0; i < v->nsamples; i++) {
		int64_t x = v->samples[i]->values[vi];
		if (!x)
			continue;
		lines[n].at = text.len;
		folded_stack(&text, v, i);
		lines[n].len = text.len - lines[n].at;
		lines[n].value = x;
		n++;
	}
	if (text.failed) {
		free(lines);
		pp_buf_free(&text);
		return -ENOMEM;
	}
	/* Stacks that differ in addresses only fold into one line. */
	for (size_t i = 0; i < n; i++)
		lines[i].s = text.data + lines[i].at;
	qsort(lines, n, sizeof *lines, by_text);
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;
		int64_t sum = lines[i].value;
		while (j < n && by_text(&lines[i], &lines[j]) == 0)
			sum += lines[j++].value;
		if (sum) {
			pp_buf_append(out, lines[i].s, lines[i].len);
			pp_buf_printf(out, " %" PRId64 "\n", sum);
		}
		i = j;
	}
	free(lines);
	pp_buf_free(&text);
	return 0;
}

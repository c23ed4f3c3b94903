/*
 * Go's debug texts, the renderers of ?debug=1 and 2 that are not the heap's
 * (legacy.c): /goroutine's and /threadcreate's debug=1, stacks grouped with
 * a count as Go prints those profiles; /goroutine's debug=2, one block per
 * thread with what the kernel says of it (a "pstack" that stops nothing);
 * and /mutex's and /block's debug=1, Go's contention text. All read the
 * symbolized view; debug=2 reads the per-thread labels the dump producer
 * puts on each sample (threads/dump.c).
 * Context: agent.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "render.h"

static const struct pp_label *label(const struct pp_sample *s, const char *key)
{
	for (uint32_t i = 0; i < s->nlabels; i++)
		if (strcmp(s->labels[i].key, key) == 0)
			return &s->labels[i];
	return NULL;
}

static const char *label_str(const struct pp_sample *s, const char *key)
{
	const struct pp_label *l = label(s, key);
	return l && l->str ? l->str : "";
}

/* One "#\t0xADDR\tfunction\tfile:line" line per frame of the location
 * (inlined frames share the address), as Go's debug=1. */
static void frames_hashed(struct pp_buf *b, const struct pp_view_loc *l)
{
	if (l->synthetic) {
		pp_buf_printf(b, "#\t0x%" PRIxPTR "\t%s\n", (uintptr_t)0,
		              l->synthetic);
		return;
	}
	if (!l->nframes) {
		pp_buf_printf(b, "#\t0x%" PRIxPTR "\t?\n", l->pc);
		return;
	}
	for (uint32_t f = 0; f < l->nframes; f++) {
		const struct pp_frame *fr = &l->frames[f];
		pp_buf_printf(b, "#\t0x%" PRIxPTR "\t%s", l->pc, fr->name);
		if (fr->file && *fr->file)
			pp_buf_printf(b, "\t%s:%" PRId64, fr->file, fr->line);
		pp_buf_puts(b, "\n");
	}
}

/* " 0xPC 0xPC ...\n": a stack's addresses as Go's texts list them after
 * "@" (0 for a synthetic frame). */
static void addresses(struct pp_buf *b, const struct pp_view *v,
                      const uint32_t *st, size_t depth)
{
	for (size_t d = 0; d < depth; d++)
		pp_buf_printf(b, " 0x%" PRIxPTR,
		              v->locs[st[d]].synthetic ? (uintptr_t)0
		                                       : v->locs[st[d]].pc);
	pp_buf_puts(b, "\n");
}

struct group {
	size_t sample;
	int64_t count;
};

static int by_count(const void *a, const void *b)
{
	const struct group *x = a, *y = b;
	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	return (x->sample > y->sample) - (x->sample < y->sample);
}

int pp_stacks_write(const struct pp_view *v, struct pp_buf *out)
{
	struct group *g = calloc(v->nsamples + 1, sizeof *g);
	int64_t total = 0;
	size_t n = 0;

	if (!g)
		return -ENOMEM;
	for (size_t i = 0; i < v->nsamples; i++) {
		int64_t c = v->samples[i]->values[0];
		total += c;
		if (c)
			g[n++] = (struct group){i, c};
	}
	qsort(g, n, sizeof *g, by_count);
	const char *kind = v->p->ntypes ? v->p->types[0].type : "";
	pp_buf_printf(out, "%s profile: total %" PRId64 "\n", kind, total);
	if (strcmp(kind, "goroutine") == 0) {
		pp_buf_puts(out, "# each goroutine is a thread of this "
		                 "process\n");
		/* What could not be read (pprof's parser skips "#" lines
		 * between the header and the stacks); the first comment is
		 * the line above. */
		for (size_t c = 0; c < v->p->ncomments; c++)
			if (strncmp(v->p->comments[c], "pullprof: each ", 15))
				pp_buf_printf(out, "# %s\n", v->p->comments[c]);
	}
	for (size_t k = 0; k < n; k++) {
		size_t i = g[k].sample;
		const struct pp_sample *s = v->samples[i];
		const uint32_t *st = v->stacks + v->stack_at[i];
		size_t depth = v->stack_at[i + 1] - v->stack_at[i];
		pp_buf_printf(out, "\n%" PRId64 " @", g[k].count);
		addresses(out, v, st, depth);
		if (s->nlabels)
			pp_buf_puts(out, "# labels: {");
		for (uint32_t j = 0; j < s->nlabels; j++) {
			const struct pp_label *l = &s->labels[j];
			pp_buf_printf(out, "%s\"%s\":", j ? ", " : "", l->key);
			if (l->str)
				pp_buf_printf(out, "\"%s\"", l->str);
			else
				pp_buf_printf(out, "%" PRId64, l->num);
		}
		if (s->nlabels)
			pp_buf_puts(out, "}\n");
		for (size_t d = 0; d < depth; d++)
			frames_hashed(out, &v->locs[st[d]]);
	}
	free(g);
	return 0;
}

static void seconds(struct pp_buf *b, const struct pp_sample *s,
                    const char *key)
{
	const struct pp_label *l = label(s, key);
	pp_buf_printf(b, "%.3fs", l ? (double)l->num / 1e9 : 0.0);
}

int pp_threads_write(const struct pp_view *v, struct pp_buf *out)
{
	for (size_t i = 0; i < v->nsamples; i++) {
		const struct pp_sample *s = v->samples[i];
		const struct pp_label *tid = label(s, "tid");
		const char *call = label_str(s, "call");
		const char *agent = label_str(s, "agent");
		pp_buf_printf(out, "thread %" PRId64 " \"%s\" [%s%s%s]%s:\n",
		              tid ? tid->num : 0, label_str(s, "thread_name"),
		              label_str(s, "state"), *call ? ", in " : "", call,
		              *agent ? " (pullprof's own)" : "");
		const char *wchan = label_str(s, "wchan");
		if (*wchan)
			pp_buf_printf(out, "    wchan: %s\n", wchan);
		pp_buf_puts(out, "    cpu: user ");
		seconds(out, s, "cpu_user");
		pp_buf_puts(out, ", system ");
		seconds(out, s, "cpu_system");
		pp_buf_printf(out, "\n    stack: %s\n", label_str(s, "stack"));
		const uint32_t *st = v->stacks + v->stack_at[i];
		size_t depth = v->stack_at[i + 1] - v->stack_at[i];
		for (size_t d = 0; d < depth; d++) {
			const struct pp_view_loc *l = &v->locs[st[d]];
			if (l->synthetic) {
				pp_buf_printf(out, "%s\n", l->synthetic);
				continue;
			}
			if (!l->nframes) {
				pp_buf_printf(
				    out, "?()\n\t0x%" PRIxPTR " in %s\n", l->pc,
				    l->mapping && l->mapping->name
				        ? l->mapping->name
				        : "unknown code");
				continue;
			}
			for (uint32_t f = 0; f < l->nframes; f++) {
				const struct pp_frame *fr = &l->frames[f];
				pp_buf_printf(out, "%s()\n\t", fr->name);
				if (fr->file && *fr->file)
					pp_buf_printf(out, "%s:%" PRId64 " ",
					              fr->file, fr->line);
				pp_buf_printf(
				    out, "(0x%" PRIxPTR "%s)\n", l->pc,
				    f + 1 < l->nframes ? ", inlined" : "");
			}
		}
		pp_buf_puts(out, "\n");
	}
	return 0;
}

/* Go's text of a contention profile (/mutex and /block at debug=1), which
 * pprof's legacy parser reads back: a header naming the profile, the
 * clock's rate (delays are in nanoseconds, so 1e9 "cycles" a second) and
 * the sampling period (1: the values are already scaled), then per stack
 * "delay count @ addresses" and its frames. */
int pp_contention_write(const struct pp_view *v, struct pp_buf *out)
{
	const char *title =
	    v->p->legacy_title ? v->p->legacy_title : "contention";
	pp_buf_printf(out, "--- %s:\ncycles/second=1000000000\n", title);
	if (strcmp(title, "mutex") == 0)
		pp_buf_puts(out, "sampling period=1\n");
	for (size_t c = 0; c < v->p->ncomments; c++)
		pp_buf_printf(out, "# %s\n", v->p->comments[c]);
	for (size_t i = 0; i < v->nsamples; i++) {
		const struct pp_sample *s = v->samples[i];
		const uint32_t *st = v->stacks + v->stack_at[i];
		size_t depth = v->stack_at[i + 1] - v->stack_at[i];
		pp_buf_printf(out, "%" PRId64 " %" PRId64 " @",
		              v->p->ntypes > 1 ? s->values[1] : 0,
		              s->values[0]);
		addresses(out, v, st, depth);
		for (uint32_t j = 0; j < s->nlabels; j++) {
			const struct pp_label *l = &s->labels[j];
			pp_buf_printf(out,
			              "%s%s=", j ? ", " : "# labels: ", l->key);
			if (l->str)
				pp_buf_printf(out, "%s", l->str);
			else
				pp_buf_printf(out, "%" PRId64, l->num);
		}
		if (s->nlabels)
			pp_buf_puts(out, "\n");
		for (size_t d = 0; d < depth; d++)
			frames_hashed(out, &v->locs[st[d]]);
	}
	return 0;
}

/*
 * ?format=json: the symbolized view as JSON, what the built-in viewer reads.
 * Keys in a fixed order (the README documents the layout).
 * Indices are 0-based into the arrays; a sample's locations are leaf first,
 * a location's lines innermost first; addresses are hex strings (a JSON
 * number cannot hold 64 bits). A profile that keeps a timeline (CPU and
 * wall windows) ends with it: its events as arrays of five integers.
 * Context: agent.
 */
#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "render.h"
#include "util/utf8.h"

static struct json_object *hex(uint64_t x)
{
	char s[24];
	snprintf(s, sizeof s, "0x%" PRIx64, x);
	return json_object_new_string(s);
}

/* The model's and the symbolizer's strings are UTF-8 already (their
 * string tables repair what comes from outside); checked again here, where
 * json-c would copy any byte into the text unescaped. */
static struct json_object *str(const char *s)
{
	if (!s)
		s = "";
	size_t len = strlen(s);
	if (pp_utf8_valid(s, len))
		return json_object_new_string_len(s, (int)len);
	char *clean = pp_utf8_sanitize(s, len);
	struct json_object *o = clean ? json_object_new_string(clean) : NULL;
	free(clean);
	return o;
}

static struct json_object *value_type(const struct pp_value_type *t)
{
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "type", str(t->type));
	json_object_object_add(o, "unit", str(t->unit));
	return o;
}

static struct json_object *functions(const struct pp_view *v)
{
	struct json_object *a = json_object_new_array_ext((int)v->nfuncs);
	for (size_t i = 0; i < v->nfuncs; i++) {
		const struct pp_frame *f = v->funcs[i];
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "name", str(f->name));
		json_object_object_add(o, "system_name", str(f->system_name));
		json_object_object_add(o, "file", str(f->file));
		json_object_object_add(o, "start_line",
		                       json_object_new_int64(f->start_line));
		json_object_array_add(a, o);
	}
	return a;
}

static struct json_object *mappings(const struct pp_view *v)
{
	size_t n = v->maps ? v->maps->n : 0;
	struct json_object *a = json_object_new_array_ext((int)v->nshown);
	/* In pprof ID order (the main executable first): index = id - 1. */
	for (unsigned id = 1; id <= v->nshown; id++) {
		for (size_t i = 0; i < n; i++) {
			const struct pp_mapping *m = &v->maps->v[i];
			if (v->map_id[i] != id)
				continue;
			struct json_object *o = json_object_new_object();
			json_object_object_add(o, "start", hex(m->start));
			json_object_object_add(o, "limit", hex(m->limit));
			json_object_object_add(o, "offset", hex(m->offset));
			json_object_object_add(o, "path", str(m->name));
			json_object_object_add(o, "build_id", str(m->build_id));
			json_object_array_add(a, o);
			break;
		}
	}
	return a;
}

/* The numeric bulk (locations, samples, totals: millions of integers in a
 * big profile) is written straight into the buffer; a json-c object per
 * integer made a 100k-stack profile take 1.7 s. Strings (functions,
 * mappings, labels, comments) still go through json-c for their escaping. */
static void num(struct pp_buf *b, int64_t v)
{
	char s[24], *p = s + sizeof s;
	uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;
	do
		*--p = (char)('0' + u % 10);
	while (u /= 10);
	if (v < 0)
		*--p = '-';
	pp_buf_append(b, p, (size_t)(s + sizeof s - p));
}

static void put(struct pp_buf *b, struct json_object *o)
{
	size_t len = 0;
	const char *s = json_object_to_json_string_length(
	    o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
	if (s)
		pp_buf_append(b, s, len);
	else
		b->failed = 1;
	json_object_put(o);
}

static void locations(struct pp_buf *b, const struct pp_view *v)
{
	pp_buf_puts(b, "[");
	for (size_t i = 0; i < v->nlocs; i++) {
		const struct pp_view_loc *l = &v->locs[i];
		if (l->synthetic)
			pp_buf_puts(b, i ? ",{\"address\":\"\""
			                 : "{\"address\":\"\"");
		else
			pp_buf_printf(b, "%s{\"address\":\"0x%" PRIxPTR "\"",
			              i ? "," : "", l->pc);
		pp_buf_puts(b, ",\"mapping\":");
		num(b, l->mapping
		           ? (int64_t)v->map_id[l->mapping - v->maps->v] - 1
		           : -1);
		pp_buf_puts(b, ",\"lines\":[");
		for (uint32_t k = 0; k < l->nframes; k++) {
			pp_buf_puts(b,
			            k ? ",{\"function\":" : "{\"function\":");
			num(b, v->func_of[l->first_func + k]);
			pp_buf_puts(b, ",\"line\":");
			num(b, l->frames[k].line);
			pp_buf_puts(b, "}");
		}
		pp_buf_puts(b, "]}");
	}
	pp_buf_puts(b, "]");
}

static struct json_object *labels(const struct pp_sample *s)
{
	struct json_object *a = json_object_new_array_ext((int)s->nlabels);
	for (uint32_t i = 0; i < s->nlabels; i++) {
		const struct pp_label *l = &s->labels[i];
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "key", str(l->key));
		if (l->str) {
			json_object_object_add(o, "str", str(l->str));
		} else {
			json_object_object_add(o, "num",
			                       json_object_new_int64(l->num));
			if (l->unit)
				json_object_object_add(o, "unit", str(l->unit));
		}
		json_object_array_add(a, o);
	}
	return a;
}

static void samples(struct pp_buf *b, const struct pp_view *v, int64_t *totals)
{
	const struct pp_profile *p = v->p;
	pp_buf_puts(b, "[");
	for (size_t i = 0; i < v->nsamples; i++) {
		const struct pp_sample *s = v->samples[i];
		pp_buf_puts(b, i ? ",{\"locations\":[" : "{\"locations\":[");
		for (size_t k = v->stack_at[i]; k < v->stack_at[i + 1]; k++) {
			if (k > v->stack_at[i])
				pp_buf_puts(b, ",");
			num(b, v->stacks[k]);
		}
		pp_buf_puts(b, "],\"values\":[");
		for (size_t t = 0; t < p->ntypes; t++) {
			if (t)
				pp_buf_puts(b, ",");
			num(b, s->values[t]);
			totals[t] += s->values[t];
		}
		pp_buf_puts(b, "]");
		if (s->nlabels) {
			pp_buf_puts(b, ",\"labels\":");
			put(b, labels(s));
		}
		pp_buf_puts(b, "}");
	}
	pp_buf_puts(b, "]");
}

/* The timeline: {"start_ns", "end_ns", "over", "events"}, each event
 * [t, tid, sample, count, value] with t in nanoseconds from start_ns and
 * sample its index in the samples written above (the view's order, which
 * is the model's: pp_sample.index). A wall window's last tick can come just
 * after the window's end: end_ns is then that tick's time, so every t lies
 * within [0, end_ns - start_ns]. */
static void timeline(struct pp_buf *b, const struct pp_view *v)
{
	const struct pp_profile *p = v->p;
	uint64_t start = p->mono_start_ns, end = p->mono_end_ns;
	for (size_t i = 0; i < p->nevents; i++)
		if (p->events[i].time_ns > end)
			end = p->events[i].time_ns;
	if (end < start)
		end = start;
	pp_buf_puts(b, ",\"timeline\":{\"start_ns\":");
	num(b, (int64_t)start);
	pp_buf_puts(b, ",\"end_ns\":");
	num(b, (int64_t)end);
	pp_buf_puts(b, ",\"over\":");
	num(b, (int64_t)p->events_over);
	pp_buf_puts(b, ",\"events\":[");
	int first = 1;
	for (size_t i = 0; i < p->nevents; i++) {
		const struct pp_event *e = &p->events[i];
		/* Every event's sample is one of the view's; checked rather
		 * than trusted, as a bad index would mislead the reader. */
		if (!e->sample || e->sample->index >= v->nsamples ||
		    v->samples[e->sample->index] != e->sample)
			continue;
		pp_buf_puts(b, first ? "[" : ",[");
		first = 0;
		num(b, e->time_ns > start ? (int64_t)(e->time_ns - start) : 0);
		pp_buf_puts(b, ",");
		num(b, e->tid);
		pp_buf_puts(b, ",");
		num(b, e->sample->index);
		pp_buf_puts(b, ",");
		num(b, e->count);
		pp_buf_puts(b, ",");
		num(b, e->value);
		pp_buf_puts(b, "]");
	}
	pp_buf_puts(b, "]}");
}

int pp_json_write(const struct pp_view *v, struct pp_buf *out)
{
	const struct pp_profile *p = v->p;
	int64_t *totals = calloc(p->ntypes + 1, sizeof *totals);
	if (!totals)
		return -ENOMEM;

	struct json_object *types = json_object_new_array();
	for (size_t i = 0; i < p->ntypes; i++)
		json_object_array_add(types, value_type(&p->types[i]));
	pp_buf_puts(out, "{\"sample_types\":");
	put(out, types);
	pp_buf_puts(out, ",\"default_sample_type\":");
	num(out, (int64_t)pp_view_sample_index(v, -1));
	if (p->period_type.type) {
		pp_buf_puts(out, ",\"period_type\":");
		put(out, value_type(&p->period_type));
	}
	pp_buf_puts(out, ",\"period\":");
	num(out, p->period);
	pp_buf_puts(out, ",\"time_nanos\":");
	num(out, p->time_nanos);
	pp_buf_puts(out, ",\"duration_nanos\":");
	num(out, p->duration_nanos);
	struct json_object *comments = json_object_new_array();
	for (size_t i = 0; i < p->ncomments; i++)
		json_object_array_add(comments, str(p->comments[i]));
	pp_buf_puts(out, ",\"comments\":");
	put(out, comments);
	pp_buf_puts(out, ",\"functions\":");
	put(out, functions(v));
	pp_buf_puts(out, ",\"mappings\":");
	put(out, mappings(v));
	pp_buf_puts(out, ",\"locations\":");
	locations(out, v);
	pp_buf_puts(out, ",\"samples\":");
	samples(out, v, totals);
	pp_buf_puts(out, ",\"totals\":[");
	for (size_t i = 0; i < p->ntypes; i++) {
		if (i)
			pp_buf_puts(out, ",");
		num(out, totals[i]);
	}
	pp_buf_puts(out, "]");
	if (p->max_events)
		timeline(out, v);
	pp_buf_puts(out, "}\n");
	free(totals);
	return out->failed ? -ENOMEM : 0;
}

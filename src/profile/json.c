/*
 * ?format=json: the symbolized view as JSON, what the built-in viewer reads.
 * Indices are 0-based into the arrays; a sample's locations are leaf first,
 * a location's lines innermost first; addresses are hex strings (a JSON
 * number cannot hold 64 bits). Agent context.
 */
#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>

#include "render.h"

static struct json_object *hex(uint64_t x)
{
	char s[24];
	snprintf(s, sizeof s, "0x%" PRIx64, x);
	return json_object_new_string(s);
}

static struct json_object *str(const char *s)
{
	return json_object_new_string(s ? s : "");
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
	struct json_object *a = json_object_new_array_ext((int)n);
	/* In pprof ID order (the main executable first): index = id - 1. */
	for (unsigned id = 1; id <= n; id++) {
		for (size_t i = 0; i < n; i++) {
			const struct pp_mapping *m = &v->maps->v[i];
			if (m->id != id)
				continue;
			struct json_object *o = json_object_new_object();
			json_object_object_add(o, "start", hex(m->start));
			json_object_object_add(o, "limit", hex(m->limit));
			json_object_object_add(o, "offset", hex(m->offset));
			json_object_object_add(o, "path", str(m->path));
			json_object_object_add(o, "build_id", str(m->build_id));
			json_object_array_add(a, o);
			break;
		}
	}
	return a;
}

static struct json_object *locations(const struct pp_view *v)
{
	struct json_object *a = json_object_new_array_ext((int)v->nlocs);
	for (size_t i = 0; i < v->nlocs; i++) {
		const struct pp_view_loc *l = &v->locs[i];
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "address",
		                       l->synthetic ? str("") : hex(l->pc));
		json_object_object_add(
		    o, "mapping",
		    json_object_new_int(l->mapping ? (int)l->mapping->id - 1
		                                   : -1));
		struct json_object *lines =
		    json_object_new_array_ext((int)l->nframes);
		for (uint32_t k = 0; k < l->nframes; k++) {
			struct json_object *ln = json_object_new_object();
			json_object_object_add(
			    ln, "function",
			    json_object_new_int64(
			        v->func_of[l->first_func + k]));
			json_object_object_add(
			    ln, "line",
			    json_object_new_int64(l->frames[k].line));
			json_object_array_add(lines, ln);
		}
		json_object_object_add(o, "lines", lines);
		json_object_array_add(a, o);
	}
	return a;
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

static struct json_object *samples(const struct pp_view *v, int64_t *totals)
{
	const struct pp_profile *p = v->p;
	struct json_object *a = json_object_new_array_ext((int)v->nsamples);
	for (size_t i = 0; i < v->nsamples; i++) {
		const struct pp_sample *s = v->samples[i];
		struct json_object *o = json_object_new_object();
		struct json_object *locs =
		    json_object_new_array_ext((int)s->depth);
		for (size_t k = v->stack_at[i]; k < v->stack_at[i + 1]; k++)
			json_object_array_add(
			    locs, json_object_new_int64(v->stacks[k]));
		json_object_object_add(o, "locations", locs);
		struct json_object *vals =
		    json_object_new_array_ext((int)p->ntypes);
		for (size_t t = 0; t < p->ntypes; t++) {
			json_object_array_add(
			    vals, json_object_new_int64(s->values[t]));
			totals[t] += s->values[t];
		}
		json_object_object_add(o, "values", vals);
		if (s->nlabels)
			json_object_object_add(o, "labels", labels(s));
		json_object_array_add(a, o);
	}
	return a;
}

int pp_json_write(const struct pp_view *v, struct pp_buf *out)
{
	const struct pp_profile *p = v->p;
	int64_t *totals = calloc(p->ntypes + 1, sizeof *totals);
	struct json_object *o = json_object_new_object();
	int rc = 0;

	if (!totals || !o) {
		free(totals);
		json_object_put(o);
		return -ENOMEM;
	}
	struct json_object *types = json_object_new_array();
	for (size_t i = 0; i < p->ntypes; i++)
		json_object_array_add(types, value_type(&p->types[i]));
	json_object_object_add(o, "sample_types", types);
	json_object_object_add(
	    o, "default_sample_type",
	    json_object_new_int((int)pp_view_sample_index(v, -1)));
	if (p->period_type.type)
		json_object_object_add(o, "period_type",
		                       value_type(&p->period_type));
	json_object_object_add(o, "period", json_object_new_int64(p->period));
	json_object_object_add(o, "time_nanos",
	                       json_object_new_int64(p->time_nanos));
	json_object_object_add(o, "duration_nanos",
	                       json_object_new_int64(p->duration_nanos));
	struct json_object *comments = json_object_new_array();
	for (size_t i = 0; i < p->ncomments; i++)
		json_object_array_add(comments, str(p->comments[i]));
	json_object_object_add(o, "comments", comments);
	json_object_object_add(o, "functions", functions(v));
	json_object_object_add(o, "mappings", mappings(v));
	json_object_object_add(o, "locations", locations(v));
	json_object_object_add(o, "samples", samples(v, totals));
	struct json_object *tot = json_object_new_array();
	for (size_t i = 0; i < p->ntypes; i++)
		json_object_array_add(tot, json_object_new_int64(totals[i]));
	json_object_object_add(o, "totals", tot);

	size_t len = 0;
	const char *s = json_object_to_json_string_length(
	    o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
	if (s) {
		pp_buf_append(out, s, len);
		pp_buf_puts(out, "\n");
	} else {
		rc = -ENOMEM;
	}
	json_object_put(o);
	free(totals);
	return rc;
}

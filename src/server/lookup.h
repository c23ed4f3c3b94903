/*
 * Lookups: requests whose answer takes the symbolizer (/symbol, /maps) are
 * answered by one agent thread of their own ("pullprof-lookup"), never on
 * the HTTP thread: a 4 MiB /symbol list takes seconds, and the server must
 * keep answering everyone else meanwhile. At most max_lookups are queued or
 * running at once; one more is refused (the caller answers 429). Agent
 * context.
 * Context: agent.
 */
#ifndef PP_LOOKUP_H
#define PP_LOOKUP_H

#include <json-c/json.h>
#include <microhttpd.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct pp_request;
struct pp_server;
struct pp_lookups;

/* What a lookup answers: status 200 with body (malloc'd) or json, or an
 * error status with msg. */
struct pp_lookup_answer {
	unsigned status;
	const char *content_type;
	char *body;
	size_t len;
	struct json_object *json;
	char msg[320];
	/* Send status, content type (ctype when set) and body as they are,
	 * an error too (an answer relayed from another process, tree.c). */
	int verbatim;
	char ctype[128];
	/* More headers of the answer, name and value ("": none). */
	char headers[4][2][128];
};

/* Runs on the lookup thread. *cancel turns non-zero when nobody waits for
 * the answer any more (client gone, agent stopping): stop early. */
typedef void (*pp_lookup_fn)(void *arg, const atomic_int *cancel,
                             struct pp_lookup_answer *out);

struct pp_lookup_stats {
	unsigned max, queued, running;
	uint64_t done, cancelled, refused;
};

/* A pool: its threads' name, how many run lookups at once, and how many
 * may be queued or running (one more is refused: 429 naming what and the
 * setting that bounds it, when there is one). */
struct pp_lookups_spec {
	const char *thread_name;
	unsigned threads; /* 1..PP_LOOKUP_MAX_THREADS */
	unsigned max;
	const char *what;    /* "symbol and mapping lookups" */
	const char *setting; /* "PULLPROF_MAX_LOOKUPS", or NULL */
};
#define PP_LOOKUP_MAX_THREADS 8

int pp_lookups_start(struct pp_server *srv, const struct pp_lookups_spec *spec,
                     struct pp_lookups **out);
/* Cancel what is queued (answered 503), stop the running one early, join
 * the thread. Before the server's loop stops: the answers go through it. */
void pp_lookups_stop(struct pp_lookups *l);
/* After the server's loop is gone (requests read l until then: once
 * stopped, new ones are answered 503). */
void pp_lookups_free(struct pp_lookups *l);

/* Answer r with fn(arg) once the lookup thread has run it (r's connection
 * is suspended meanwhile); free_arg(arg) afterwards (when not NULL),
 * however the request ends. When max lookups are already queued or running, r
 * is answered 429 with Retry-After at once (and arg freed). */
enum MHD_Result pp_lookup_answer_later(struct pp_request *r, pp_lookup_fn fn,
                                       void *arg, void (*free_arg)(void *arg));
/* The same on another pool of r's server. */
enum MHD_Result pp_lookup_answer_on(struct pp_lookups *l, struct pp_request *r,
                                    pp_lookup_fn fn, void *arg,
                                    void (*free_arg)(void *arg));

void pp_lookups_stats(struct pp_lookups *l, struct pp_lookup_stats *out);

#endif

/*
 * Every answer goes through here: common headers, error bodies in the
 * endpoint's convention, and the request counters. Agent context.
 */
#ifndef PP_RESPOND_H
#define PP_RESPOND_H

#include <json-c/json.h>
#include <microhttpd.h>
#include <stdint.h>

#include "routes.h"

enum pp_body { PP_BODY_STATIC, PP_BODY_COPY, PP_BODY_FREE };

enum MHD_Result pp_respond(struct pp_request *r, unsigned status,
                           const char *content_type, const void *body,
                           size_t len, enum pp_body mode);
/* One more header (static strings) for r's next answer. */
void pp_respond_header(struct pp_request *r, const char *name,
                       const char *value);
/* Answer status with a one-sentence reason, formatted for r's endpoint. */
enum MHD_Result pp_respond_error(struct pp_request *r, unsigned status,
                                 const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Bytes from the system (paths, arguments, thread names) as a JSON string:
 * valid UTF-8 whatever they hold; NULL s gives NULL (JSON null). */
struct json_object *pp_json_text(const char *s, size_t len);

/* Serialize obj (pretty-printed) and release it. */
enum MHD_Result pp_respond_json(struct pp_request *r, unsigned status,
                                struct json_object *obj);
enum MHD_Result pp_respond_redirect(struct pp_request *r, const char *location);

/* A profile built off the HTTP thread (a CPU window, a heap job): how to
 * collect it once ready — the body handed over and the id the profile is
 * kept under (0: none), or a negative errno, -ECANCELED when the agent
 * stopped — and how to let go of the job. */
struct pp_deferred {
	int (*take)(void *job, char **body, size_t *len, uint64_t *id);
	void (*release)(void *job);
};

/* Suspend r's connection until pp_request_wake(r) (the job's done
 * callback: any thread, never blocks); then answer with the profile in
 * r->render's format (binary ones attached under the route's name, with
 * X-Pullprof-Profile-Id), or with why there is none. The job is released
 * however the request ends. */
void pp_request_defer(struct pp_request *r, void *job,
                      const struct pp_deferred *ops);
void pp_request_wake(void *request);

#endif

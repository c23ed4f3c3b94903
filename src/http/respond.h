/*
 * Every answer goes through here: common headers, error bodies in the
 * endpoint's convention, and the request counters. Agent context.
 */
#ifndef PP_RESPOND_H
#define PP_RESPOND_H

#include <json-c/json.h>
#include <microhttpd.h>

#include "routes.h"

enum pp_body { PP_BODY_STATIC, PP_BODY_COPY, PP_BODY_FREE };

enum MHD_Result pp_respond(struct pp_request *r, unsigned status,
                           const char *content_type, const void *body,
                           size_t len, enum pp_body mode);
/* Answer status with a one-sentence reason, formatted for r's endpoint. */
enum MHD_Result pp_respond_error(struct pp_request *r, unsigned status,
                                 const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Serialize obj (pretty-printed) and release it. */
enum MHD_Result pp_respond_json(struct pp_request *r, unsigned status,
                                struct json_object *obj);
enum MHD_Result pp_respond_redirect(struct pp_request *r, const char *location);

/* For profiles built off the HTTP thread: suspend r's connection until
 * pp_request_wake(r) (a done callback: any thread, never blocks) resumes
 * it and `resume` answers. state is released by cleanup however the
 * request ends. */
void pp_request_defer(struct pp_request *r, void *state,
                      void (*cleanup)(struct pp_request *r), pp_handler resume);
void pp_request_wake(void *request);
/* Answer with a built profile (rc 0: body handed over) or why there is
 * none: the agent stopping or the client gone (-ECANCELED), or another
 * error. */
enum MHD_Result pp_respond_profile(struct pp_request *r, int rc, char *body,
                                   size_t len, const char *filename);

#endif

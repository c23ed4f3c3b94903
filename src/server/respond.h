/*
 * Every answer goes through here: common headers, error bodies in the
 * endpoint's convention, and the request counters.
 * Context: agent.
 */
#ifndef PP_RESPOND_H
#define PP_RESPOND_H

#include <json-c/json.h>
#include <microhttpd.h>
#include <stdint.h>

#include "profile/job.h"
#include "request.h"

enum pp_body { PP_BODY_STATIC, PP_BODY_COPY, PP_BODY_FREE };

enum MHD_Result pp_respond(struct pp_request *r, unsigned status,
                           const char *content_type, const void *body,
                           size_t len, enum pp_body mode);
/* Do the answers in flight hold PULLPROF_MAX_ANSWERS_MB? Then answer with
 * pp_respond_busy (503, Retry-After) instead of building another. */
int pp_respond_full(struct pp_request *r);
/* Remember the process's root directory (at the server's start), so that
 * a later chroot can be named. */
void pp_respond_note_root(void);
/* When /proc/self/maps cannot be read (the host chrooted into a tree
 * without /proc, or none is mounted): 1, and one sentence naming the file,
 * why and what to do in why; else 0. Any agent thread. */
int pp_respond_no_proc(char *why, size_t whylen);
enum MHD_Result pp_respond_busy(struct pp_request *r);
/* One more header (static strings) for r's next answer. */
/* Long-running requests leave places for liveness and status
 * (conns.c, pp_server_may_wait): window is 1 for a profile window, 0 for
 * any other request that waits. Returns 1 with the refusal (429 or 503,
 * Retry-After, a sentence naming the setting) queued in *answered, or 0:
 * go on. */
int pp_respond_may_wait(struct pp_request *r, int window,
                        enum MHD_Result *answered);

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

/* A profile request: open a job (profile/job.h) for r — its client's
 * socket watched for a hang-up — and suspend the connection until the job
 * ends; then answer with the profile in rq->render's format (binary ones
 * attached under the route's name, with X-Pullprof-Profile-Id), or with why
 * there is none. A job that cannot open is answered at once, its error
 * mapped to a status here and nowhere else. rq's client_fd, done and arg
 * are set here. */
enum MHD_Result pp_respond_job(struct pp_request *r, struct pp_job_request *rq);

#endif

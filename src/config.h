/*
 * Configuration: one table of settings, the defaults, the PULLPROF_*
 * environment overrides and the validation, all in one place.
 * Context: agent.
 */
#ifndef PP_CONFIG_H
#define PP_CONFIG_H

#include <stddef.h>
#include <sys/socket.h>
#include <time.h>

#include "pullprof.h"
#include "util/cidr.h"

/* The configuration the agent runs with, after defaults, the caller's struct
 * and the environment were merged and validated. Owns its strings. */
struct pp_config {
	/* The effective values, laid out as the public struct so the settings
	 * table reads them by offset. Its strings are owned copies: listen is
	 * normalized ("host:port" / "[v6]:port", or "none"), prefix is "" or
	 * "/a/b"
	 * (leading slash, no trailing slash). */
	struct pullprof_config v;
	int serve; /* 0: listen "none", no HTTP server; addr is unset */
	struct sockaddr_storage addr;
	socklen_t addrlen;
	struct pp_cidr_list allow; /* parsed v.allow; empty: everyone */
	/* A tree member's socket, bound and listening already (fork/members.c):
	 * the server takes it instead of binding addr. */
	int have_bound_fd;
	int bound_fd;
	/* v.record as nanoseconds; 0: no record. */
	uint64_t record_ns;
};

/* What the running agent tells the code that serves it (the HTTP servers
 * and their handlers): its settings and when it started. The same for
 * every server it runs, the configured address's and a follow-mode
 * member's socket (whose own settings, srv->cfg, drop the token). Valid
 * while the agent runs. */
struct pp_route;
struct pp_request;
struct pp_agent_facts {
	const struct pp_config *cfg;
	double start_time; /* seconds since the epoch */
	struct timespec start_mono;
	int autostarted;
	/* The routing table the servers answer with (src/routes.h: the
	 * endpoints of no kind and every kind's), made by the agent: the
	 * server core is handed it and names none of them. */
	const struct pp_route *routes;
	size_t nroutes;
	/* Asked before a route's handler (follow mode's tree: the whole
	 * tree, or another process of it): -1 to go on to the handler, or
	 * the enum MHD_Result of the answer it gave. NULL: none. */
	int (*intercept)(struct pp_request *r);
};

/* The mutex and block profiles' default rates (the settings table's, read
 * by locks/ in its messages): cheap enough to leave on (bench/RESULTS.md,
 * "Lock contention"). */
#define PP_LOCKS_MUTEX_RATE 10
#define PP_LOCKS_BLOCK_RATE 10000

/* PULLPROF_FORK as a value (docs/fork.md). */
enum pp_fork_mode { PP_FORK_ADOPT, PP_FORK_FOLLOW, PP_FORK_OFF };
enum pp_fork_mode pp_fork_mode_of(const struct pp_config *c);

/* The listen value that starts the agent without an HTTP server. */
#define PP_LISTEN_NONE "none"

enum pp_setting_type {
	PP_SETTING_STRING,
	PP_SETTING_UINT,
	PP_SETTING_SECRET, /* a string never shown (status says if set) */
};

/* One row of the settings table (config.c), the one declaration of a
 * setting: it drives env parsing, validation, the defaults, the status JSON
 * and the documentation checks (tests/settings_dump, test_docs.py). */
struct pp_setting {
	const char *key; /* name in the status JSON */
	const char *env; /* environment variable */
	enum pp_setting_type type;
	size_t offset;        /* in struct pullprof_config */
	unsigned def;         /* PP_SETTING_UINT: the default */
	const char *def_text; /* string settings: the default (NULL: none) */
	unsigned min, max;    /* PP_SETTING_UINT only */
	const char *choices;  /* PP_SETTING_STRING: "a|b" allowed values */
	const char *unit;     /* PP_SETTING_UINT: "seconds", "bytes", ... */
	const char *help;
};

/* struct_size bounds pp_config_resolve accepts: the struct of the first
 * version with struct_size (1.0.0, ending with metrics_path: docs/abi.md),
 * and a sanity bound against a struct never initialized. */
#define PP_CONFIG_FIRST_SIZE                                                   \
	(offsetof(struct pullprof_config, metrics_path) + sizeof(const char *))
#define PP_CONFIG_MAX_SIZE 65536

extern const struct pp_setting pp_settings[];
extern const size_t pp_settings_count;

/* Merge cfg (or the defaults when NULL) with the environment and validate.
 * On error returns a negative errno and writes one sentence to err. */
int pp_config_resolve(const struct pullprof_config *cfg, struct pp_config *out,
                      char *err, size_t errlen);
void pp_config_free(struct pp_config *c);
/* A tree member's configuration (fork/members.c): base's settings (the
 * environment read again), listening on the Unix socket at path, without TLS,
 * token or network list. 0 or a negative errno with a sentence in err. */
int pp_config_member(const struct pp_config *base, const char *path,
                     struct pp_config *out, char *err, size_t errlen);

/* Parsers, exposed for unit tests. Each returns 0 or -EINVAL with a reason
 * in err. */
int pp_config_parse_listen(const char *text, struct sockaddr_storage *addr,
                           socklen_t *addrlen, char *err, size_t errlen);
int pp_config_parse_uint(const char *text, unsigned min, unsigned max,
                         unsigned *out, char *err, size_t errlen);
int pp_config_normalize_prefix(const char *text, char **out, char *err,
                               size_t errlen);

/* PULLPROF_METRICS_PATH against the normalized prefix: an absolute plain
 * path outside the prefix's space (or exactly <prefix>/metrics). */
int pp_config_check_metrics_path(const char *path, const char *prefix,
                                 char *err, size_t errlen);

/* Format addr as "host:port" or "[v6]:port" into buf. */
void pp_format_sockaddr(const struct sockaddr *sa, char *buf, size_t len);

#endif

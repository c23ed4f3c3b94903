/*
 * Configuration: defaults ← caller's struct ← PULLPROF_* environment, then
 * validated once, with one sentence per bad value.
 * Context: agent.
 */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "bounds.h"
#include "util/env.h"
#include "util/when.h"

#define OFF(field) offsetof(struct pullprof_config, field)
/* Every PULLPROF_* setting, declared once: parsing and validation
 * (pp_config_resolve), the defaults (pullprof_config_init), /status, and
 * through tests/settings_dump the documentation's tables, which
 * tests/integration/test_docs.py compares with it. */
const struct pp_setting pp_settings[] = {
    {"listen", "PULLPROF_LISTEN", PP_SETTING_STRING, OFF(listen), 0,
     "127.0.0.1:6060", 0, 0, NULL, "",
     "address to listen on: host:port, [v6]:port, :port or port; port 0 = "
     "any free port; none = no HTTP server (profiles through "
     "pullprof_write_*)"},
    {"prefix", "PULLPROF_PREFIX", PP_SETTING_STRING, OFF(prefix), 0,
     "/debug/pprof", 0, 0, NULL, "",
     "URL path prefix of every endpoint (\"\" = root)"},
    {"max_connections", "PULLPROF_MAX_CONNECTIONS", PP_SETTING_UINT,
     OFF(max_connections), 32, NULL, 1, 1000, NULL, "connections",
     "most simultaneous HTTP connections"},
    {"idle_timeout", "PULLPROF_IDLE_TIMEOUT", PP_SETTING_UINT,
     OFF(idle_timeout), 30, NULL, 1, 3600, NULL, "seconds",
     "seconds before an idle connection is closed"},
    {"cpu_hz", "PULLPROF_CPU_HZ", PP_SETTING_UINT, OFF(cpu_hz), 100, NULL, 1,
     1000, NULL, "Hz", "default CPU sampling rate in Hz"},
    {"max_seconds", "PULLPROF_MAX_SECONDS", PP_SETTING_UINT, OFF(max_seconds),
     300, NULL, 1, 86400, NULL, "seconds",
     "longest CPU profile a request may ask for, in seconds"},
    {"max_cpu_windows", "PULLPROF_MAX_CPU_WINDOWS", PP_SETTING_UINT,
     OFF(max_cpu_windows), 8, NULL, 1, 64, NULL, "windows",
     "most CPU profiles running at once"},
    {"max_depth", "PULLPROF_MAX_DEPTH", PP_SETTING_UINT, OFF(max_depth), 128,
     NULL, PP_MIN_DEPTH, PP_MAX_DEPTH, NULL, "frames",
     "deepest stack recorded, in frames"},
    {"unwind", "PULLPROF_UNWIND", PP_SETTING_STRING, OFF(unwind), 0, "dwarf", 0,
     0, "dwarf|libunwind|fp", "",
     "stack unwinding in the CPU profiler: dwarf (compact tables made from "
     "DWARF CFI, libunwind where they cannot say), libunwind (every frame) "
     "or fp (frame pointers)"},
    {"heap_rate", "PULLPROF_HEAP_RATE", PP_SETTING_UINT, OFF(heap_rate),
     512 * 1024, NULL, 0, 1u << 30, NULL, "bytes",
     "heap profile: mean bytes allocated between samples (0 = off, 1 = "
     "every allocation)"},
    {"token", "PULLPROF_TOKEN", PP_SETTING_SECRET, OFF(token), 0, NULL, 0, 0,
     NULL, "",
     "secret every request but healthz must carry (Authorization: Bearer, "
     "or the Basic password); needed for a non-loopback listen address"},
    {"insecure", "PULLPROF_INSECURE", PP_SETTING_UINT, OFF(insecure), 0, NULL,
     0, 1, NULL, "", "1: allow a non-loopback listen address without a token"},
    {"tls_cert", "PULLPROF_TLS_CERT", PP_SETTING_STRING, OFF(tls_cert), 0, NULL,
     0, 0, NULL, "",
     "PEM certificate (chain) file: serve HTTPS (with tls_key)"},
    {"tls_key", "PULLPROF_TLS_KEY", PP_SETTING_STRING, OFF(tls_key), 0, NULL, 0,
     0, NULL, "", "PEM private key file of tls_cert"},
    {"allow", "PULLPROF_ALLOW", PP_SETTING_STRING, OFF(allow), 0, NULL, 0, 0,
     NULL, "",
     "client networks allowed, comma-separated CIDRs (others get 403)"},
    {"max_client_connections", "PULLPROF_MAX_CLIENT_CONNECTIONS",
     PP_SETTING_UINT, OFF(max_client_connections), 16, NULL, 1, 1000, NULL,
     "connections", "most simultaneous connections from one client address"},
    {"max_header_bytes", "PULLPROF_MAX_HEADER_BYTES", PP_SETTING_UINT,
     OFF(max_header_bytes), 32768, NULL, 4096, 1u << 20, NULL, "bytes",
     "memory for one request line and its headers, in bytes"},
    {"max_profile_mb", "PULLPROF_MAX_PROFILE_MB", PP_SETTING_UINT,
     OFF(max_profile_mb), 64, NULL, 1, 4096, NULL, "MiB",
     "memory one profile may hold while it is built, in MiB"},
    {"max_heap_profiles", "PULLPROF_MAX_HEAP_PROFILES", PP_SETTING_UINT,
     OFF(max_heap_profiles), 16, NULL, 1, 256, NULL, "profiles",
     "most heap profiles waiting for their window or being built at once"},
    {"max_lookups", "PULLPROF_MAX_LOOKUPS", PP_SETTING_UINT, OFF(max_lookups),
     4, NULL, 1, 64, NULL, "requests",
     "most /symbol and /maps requests queued or running at once"},
    {"max_body_bytes", "PULLPROF_MAX_BODY_BYTES", PP_SETTING_UINT,
     OFF(max_body_bytes), 4u << 20, NULL, 1024, 64u << 20, NULL, "bytes",
     "largest request body read (POST /symbol), in bytes"},
    {"metrics_path", "PULLPROF_METRICS_PATH", PP_SETTING_STRING,
     OFF(metrics_path), 0, NULL, 0, 0, NULL, "",
     "also serve <prefix>/metrics at this path outside the prefix, e.g. "
     "/metrics"},
    {"max_thread_dumps", "PULLPROF_MAX_THREAD_DUMPS", PP_SETTING_UINT,
     OFF(max_thread_dumps), 4, NULL, 1, 64, NULL, "dumps",
     "most thread dumps (/goroutine) taken or waiting for their window at "
     "once"},
    {"max_wall_profiles", "PULLPROF_MAX_WALL_PROFILES", PP_SETTING_UINT,
     OFF(max_wall_profiles), 2, NULL, 1, 16, NULL, "profiles",
     "most wall-clock profiles (/wall, /debug/fgprof) sampling at once"},
    {"wall_threads", "PULLPROF_WALL_THREADS", PP_SETTING_UINT,
     OFF(wall_threads), 16, NULL, 1, 4096, NULL, "threads",
     "threads a wall-clock profile looks at per tick, rotating through "
     "all"},
    {"mutex_rate", "PULLPROF_MUTEX_RATE", PP_SETTING_UINT, OFF(mutex_rate),
     PP_LOCKS_MUTEX_RATE, NULL, 0, 1000000000, NULL, "unlocks",
     "the mutex profile records 1 in N unlocks that had waiters (Go's "
     "mutex profile fraction); 0: off"},
    {"block_rate", "PULLPROF_BLOCK_RATE", PP_SETTING_UINT, OFF(block_rate),
     PP_LOCKS_BLOCK_RATE, NULL, 0, 1000000000, NULL, "nanoseconds",
     "the block profile samples one wait per N ns spent waiting, every "
     "wait at least that long (Go's block profile rate); 0: off"},
    {"request_timeout", "PULLPROF_REQUEST_TIMEOUT", PP_SETTING_UINT,
     OFF(request_timeout), 10, NULL, 1, 3600, NULL, "seconds",
     "seconds a client has to send a whole request (line, headers, body) "
     "from the connection's opening or its previous answer; then the "
     "connection is closed"},
    {"hosts", "PULLPROF_HOSTS", PP_SETTING_STRING, OFF(hosts), 0, NULL, 0, 0,
     NULL, "",
     "names the Host header may carry besides IP addresses and localhost, "
     "comma-separated, * for any (others get 403); unset: this machine's "
     "name without a token, any name with one"},
    {"max_answers_mb", "PULLPROF_MAX_ANSWERS_MB", PP_SETTING_UINT,
     OFF(max_answers_mb), 256, NULL, 1, 65536, NULL, "MiB",
     "memory all answers being built or sent may hold together, in MiB "
     "(past it: 503 with Retry-After)"},
    {"fork", "PULLPROF_FORK", PP_SETTING_STRING, OFF(fork_mode), 0, "adopt", 0,
     0, "adopt|follow|off", "",
     "forked children: adopt (take the address over when the parent "
     "exits: daemons), follow (every child runs an agent; this address "
     "answers for the whole tree, merged, ?pid=N for one), off"},
    {"record", "PULLPROF_RECORD", PP_SETTING_STRING, OFF(record), 0, NULL, 0, 0,
     NULL, "",
     "keep a look-back of every thread's CPU samples over this duration "
     "(300, 90s, 5m, 1h; at most 24h) for ?last= and ?start=&end=; unset "
     "or off: no record"},
    {"record_hz", "PULLPROF_RECORD_HZ", PP_SETTING_UINT, OFF(record_hz), 19,
     NULL, 1, 1000, NULL, "Hz",
     "the record's sampling rate in Hz (a faster window raises it "
     "meanwhile)"},
    {"record_mb", "PULLPROF_RECORD_MB", PP_SETTING_UINT, OFF(record_mb), 32,
     NULL, 1, 65536, NULL, "MiB",
     "memory the record may hold, in MiB; past it the oldest samples go "
     "first"},
};
const size_t pp_settings_count = sizeof pp_settings / sizeof pp_settings[0];

/* The struct as this library knows it, every field at its default: the
 * settings table's defaults, nothing else. */
static void fill_defaults(struct pullprof_config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->struct_size = sizeof *cfg;
	for (size_t i = 0; i < pp_settings_count; i++) {
		const struct pp_setting *s = &pp_settings[i];
		char *field = (char *)cfg + s->offset;
		if (s->type == PP_SETTING_UINT)
			*(unsigned *)field = s->def;
		else
			*(const char **)field = s->def_text;
	}
}

PULLPROF_API void pullprof_config_init_size(struct pullprof_config *cfg,
                                            size_t size)
{
	struct pullprof_config d;

	if (!cfg || size < sizeof cfg->struct_size)
		return;
	fill_defaults(&d);
	/* Never past the caller's struct; past ours (a newer header's
	 * fields), zeros: this library does not know them. */
	memcpy(cfg, &d, size < sizeof d ? size : sizeof d);
	if (size > sizeof d)
		memset((char *)cfg + sizeof d, 0, size - sizeof d);
	cfg->struct_size = size;
}

int pp_config_parse_uint(const char *text, unsigned min, unsigned max,
                         unsigned *out, char *err, size_t errlen)
{
	const char *p = text;
	unsigned long long v = 0;

	if (!p || !*p) {
		snprintf(err, errlen,
		         "empty value, expected an integer in %u..%u", min,
		         max);
		return -EINVAL;
	}
	for (; *p; p++) {
		if (!isdigit((unsigned char)*p)) {
			snprintf(
			    err, errlen,
			    "\"%.64s\" is not a whole number (expected %u..%u)",
			    text, min, max);
			return -EINVAL;
		}
		v = v * 10 + (unsigned)(*p - '0');
		if (v > UINT_MAX)
			break;
	}
	if (v < min || v > max) {
		snprintf(err, errlen, "%.64s is out of range %u..%u", text, min,
		         max);
		return -EINVAL;
	}
	*out = (unsigned)v;
	return 0;
}

int pp_config_parse_listen(const char *text, struct sockaddr_storage *addr,
                           socklen_t *addrlen, char *err, size_t errlen)
{
	char host[64];
	const char *port_text;
	unsigned port;
	char perr[128];

	memset(addr, 0, sizeof *addr);
	if (!text || !*text) {
		snprintf(err, errlen,
		         "empty listen address, expected host:port");
		return -EINVAL;
	}
	if (text[0] == '[') {
		const char *close = strchr(text, ']');
		if (!close || close[1] != ':') {
			snprintf(
			    err, errlen,
			    "\"%.64s\": an IPv6 address is written [addr]:port",
			    text);
			return -EINVAL;
		}
		size_t n = (size_t)(close - text - 1);
		if (n == 0 || n >= sizeof host) {
			snprintf(err, errlen, "\"%.64s\": bad IPv6 address",
			         text);
			return -EINVAL;
		}
		memcpy(host, text + 1, n);
		host[n] = 0;
		port_text = close + 2;
	} else {
		const char *colon = strrchr(text, ':');
		if (!colon) {
			/* A bare port: loopback, the safe choice. */
			strcpy(host, "127.0.0.1");
			port_text = text;
		} else {
			size_t n = (size_t)(colon - text);
			if (memchr(text, ':', n)) {
				snprintf(err, errlen,
				         "\"%.64s\": write an IPv6 address in "
				         "brackets, "
				         "e.g. [::1]:6060",
				         text);
				return -EINVAL;
			}
			if (n >= sizeof host) {
				snprintf(err, errlen,
				         "\"%.64s\": host too long", text);
				return -EINVAL;
			}
			memcpy(host, text, n);
			host[n] = 0;
			if (n == 0)
				strcpy(host, "0.0.0.0");
			port_text = colon + 1;
		}
	}
	if (pp_config_parse_uint(port_text, 0, 65535, &port, perr,
	                         sizeof perr)) {
		snprintf(err, errlen, "\"%.64s\": bad port: %s", text, perr);
		return -EINVAL;
	}
	if (strcmp(host, "localhost") == 0)
		strcpy(host, "127.0.0.1");

	struct sockaddr_in *in4 = (struct sockaddr_in *)addr;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)addr;
	if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)port);
		*addrlen = sizeof *in4;
		return 0;
	}
	if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		*addrlen = sizeof *in6;
		return 0;
	}
	/* Host names would need a resolver call inside the host process at
	 * start-up, possibly blocking on DNS: only literals are accepted. */
	snprintf(
	    err, errlen,
	    "\"%.64s\": host must be an IPv4 or [IPv6] literal or localhost",
	    text);
	return -EINVAL;
}

/* A URL path as settings give it: printable, no query or escapes, no empty,
 * "." or ".." segments (trailing_slashes: a trailing run of '/' is let
 * through, for the caller to trim). what names it in the message. */
static int check_path_chars(const char *text, const char *what,
                            int trailing_slashes, char *err, size_t errlen)
{
	for (const char *p = text; *p; p++) {
		unsigned char c = (unsigned char)*p;
		if (c <= ' ' || c >= 0x7f || c == '?' || c == '#' || c == '%' ||
		    c == '"' || c == '<' || c == '>' || c == '\\') {
			snprintf(
			    err, errlen,
			    "\"%.64s\": %s may not contain a query, spaces, "
			    "control characters or any of ?#%%\"<>\\",
			    text, what);
			return -EINVAL;
		}
		if (c != '/')
			continue;
		if (trailing_slashes && p[strspn(p, "/")] == 0)
			return 0;
		if (p[1] == '/' ||
		    (p[1] == '.' &&
		     (p[2] == '/' || p[2] == 0 ||
		      (p[2] == '.' && (p[3] == '/' || p[3] == 0))))) {
			snprintf(err, errlen,
			         "\"%.64s\": %s may not contain empty, . or .. "
			         "segments",
			         text, what);
			return -EINVAL;
		}
	}
	return 0;
}

int pp_config_normalize_prefix(const char *text, char **out, char *err,
                               size_t errlen)
{
	size_t n;

	if (!text)
		text = "";
	n = strlen(text);
	if (n > 200) {
		snprintf(err, errlen, "prefix longer than 200 characters");
		return -EINVAL;
	}
	if (n > 0 && text[0] != '/') {
		snprintf(err, errlen, "\"%.64s\": the prefix must start with /",
		         text);
		return -EINVAL;
	}
	/* A trailing "//" is allowed here: it is trimmed below. */
	if (check_path_chars(text, "the prefix", 1, err, errlen))
		return -EINVAL;
	while (n > 0 && text[n - 1] == '/')
		n--;
	*out = strndup(text, n);
	return *out ? 0 : -ENOMEM;
}

void pp_format_sockaddr(const struct sockaddr *sa, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN];

	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 =
		    (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
		snprintf(buf, len, "[%s]:%u", host, ntohs(in6->sin6_port));
	} else {
		const struct sockaddr_in *in4 = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &in4->sin_addr, host, sizeof host);
		snprintf(buf, len, "%s:%u", host, ntohs(in4->sin_port));
	}
}

/* Is s one of the '|'-separated words of list? */
static int one_of(const char *s, const char *list)
{
	size_t n = strlen(s);
	while (*list) {
		size_t k = strcspn(list, "|");
		if (k == n && strncmp(list, s, n) == 0)
			return 1;
		list += k + (list[k] == '|');
	}
	return 0;
}

/* The security settings: empty strings mean unset; the token's shape; TLS
 * files in pairs; the allow-list parsed; and no non-loopback listen address
 * without a token unless the operator said insecure. */
static int security(struct pullprof_config *m, struct pp_config *out,
                    const char *listen, char *err, size_t errlen)
{
	const char **strs[] = {&m->token, &m->tls_cert, &m->tls_key, &m->allow,
	                       &m->hosts};
	for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
		if (*strs[i] && !**strs[i])
			*strs[i] = NULL;
	if (m->token) {
		size_t n = strlen(m->token);
		int printable = 1;
		for (const char *p = m->token; *p; p++)
			if (*p <= ' ' || *p >= 0x7f)
				printable = 0;
		/* The token itself is never repeated in a message. */
		if (n < 8 || n > 256 || !printable) {
			snprintf(
			    err, errlen,
			    "PULLPROF_TOKEN: must be 8 to 256 printable "
			    "ASCII characters without spaces (this one has "
			    "%zu characters%s)",
			    n, printable ? "" : ", some not printable");
			return -EINVAL;
		}
	}
	if (!m->tls_cert != !m->tls_key) {
		snprintf(err, errlen,
		         "%s is set but not %s: HTTPS needs both the "
		         "certificate and its key",
		         m->tls_cert ? "PULLPROF_TLS_CERT" : "PULLPROF_TLS_KEY",
		         m->tls_cert ? "PULLPROF_TLS_KEY"
		                     : "PULLPROF_TLS_CERT");
		return -EINVAL;
	}
	char why[200];
	if (pp_cidr_parse(m->allow, &out->allow, why, sizeof why)) {
		snprintf(err, errlen, "PULLPROF_ALLOW: %s", why);
		return -EINVAL;
	}
	if (m->hosts) {
		const char *p = m->hosts;
		for (; *p; p++)
			if (!isalnum((unsigned char)*p) &&
			    !strchr(".-_*, ", *p))
				break;
		if (*p || strlen(m->hosts) > 2000) {
			snprintf(err, errlen,
			         "PULLPROF_HOSTS: \"%.64s\" is not a list of "
			         "host names (letters, digits, '.', '-', '*', "
			         "separated by commas)",
			         m->hosts);
			return -EINVAL;
		}
	}
	if (out->serve &&
	    !pp_cidr_is_loopback((const struct sockaddr *)&out->addr) &&
	    !m->token && !m->insecure) {
		snprintf(err, errlen,
		         "PULLPROF_LISTEN=%s is not a loopback address, and "
		         "anyone who reaches it could read this process's "
		         "memory layout and profiles: set PULLPROF_TOKEN "
		         "(clients then send \"Authorization: Bearer TOKEN\"), "
		         "or PULLPROF_INSECURE=1 to serve without one",
		         listen);
		return -EINVAL;
	}
	return 0;
}

int pp_config_check_metrics_path(const char *path, const char *prefix,
                                 char *err, size_t errlen)
{
	size_t n = strlen(path), plen = strlen(prefix);

	if (path[0] != '/') {
		snprintf(err, errlen,
		         "\"%.64s\": a path, starting with / (e.g. /metrics)",
		         path);
		return -EINVAL;
	}
	if (n > 200) {
		snprintf(err, errlen, "longer than 200 characters");
		return -EINVAL;
	}
	if (check_path_chars(path, "the path", 0, err, errlen))
		return -EINVAL;
	if (n == 1) {
		snprintf(err, errlen,
		         "\"/\" leads to the index; name a path such as "
		         "/metrics");
		return -EINVAL;
	}
	/* <prefix>/metrics itself is allowed (and changes nothing); any
	 * other path in the prefix's space belongs to the endpoints. */
	if (strncmp(path, prefix, plen) == 0 &&
	    (path[plen] == 0 || path[plen] == '/') &&
	    strcmp(path + plen, "/metrics") != 0) {
		snprintf(err, errlen,
		         "\"%.64s\" is under the prefix \"%s\", where the "
		         "endpoints live (the metrics are at %s/metrics "
		         "anyway); name a path outside it, e.g. /metrics",
		         path, *prefix ? prefix : "/", prefix);
		return -EINVAL;
	}
	return 0;
}

int pp_config_resolve(const struct pullprof_config *cfg, struct pp_config *out,
                      char *err, size_t errlen)
{
	struct pullprof_config merged;
	char why[200];
	int rc;

	struct pullprof_config defaults;

	memset(out, 0, sizeof *out);
	fill_defaults(&defaults);
	merged = defaults;
	if (cfg) {
		/* Only the bytes the caller's struct has: the fields of a
		 * newer version keep their defaults. */
		if (cfg->struct_size < PP_CONFIG_FIRST_SIZE ||
		    cfg->struct_size > PP_CONFIG_MAX_SIZE) {
			snprintf(err, errlen,
			         "struct pullprof_config was not filled by "
			         "pullprof_config_init() (struct_size %zu)",
			         cfg->struct_size);
			return -EINVAL;
		}
		memcpy(&merged, cfg,
		       cfg->struct_size < sizeof merged ? cfg->struct_size
		                                        : sizeof merged);
		merged.struct_size = sizeof merged;
	}

	for (size_t i = 0; i < pp_settings_count; i++) {
		const struct pp_setting *s = &pp_settings[i];
		char *field = (char *)&merged + s->offset;
		/* Never the host's getenv (util/env.h). */
		const char *env = merged.ignore_env ? NULL : pp_env_get(s->env);

		if (s->type != PP_SETTING_UINT) {
			/* NULL means "the default", like an unset variable. */
			if (env)
				*(const char **)field = env;
			else if (!*(const char **)field)
				*(const char **)field =
				    *(const char **)((char *)&defaults +
				                     s->offset);
			if (s->choices &&
			    !one_of(*(const char **)field, s->choices)) {
				snprintf(err, errlen,
				         "%s: \"%.64s\" is not one of %s",
				         s->env, *(const char **)field,
				         s->choices);
				return -EINVAL;
			}
			continue;
		}
		if (env) {
			rc = pp_config_parse_uint(env, s->min, s->max,
			                          (unsigned *)field, why,
			                          sizeof why);
			if (rc) {
				snprintf(err, errlen, "%s: %s", s->env, why);
				return rc;
			}
		} else {
			unsigned v = *(unsigned *)field;
			if (v < s->min || v > s->max) {
				snprintf(err, errlen,
				         "%s is %u, out of range %u..%u",
				         s->key, v, s->min, s->max);
				return -EINVAL;
			}
		}
	}

	/* "none": the profilers without a server, for programs that write
	 * their profiles themselves (pullprof_write_cpu_profile). Nothing
	 * listens, so no token is needed. */
	out->serve = strcmp(merged.listen, PP_LISTEN_NONE) != 0;
	if (out->serve) {
		rc = pp_config_parse_listen(merged.listen, &out->addr,
		                            &out->addrlen, why, sizeof why);
		if (rc) {
			snprintf(err, errlen, "PULLPROF_LISTEN: %s", why);
			return rc;
		}
	}
	char *prefix = NULL;
	rc =
	    pp_config_normalize_prefix(merged.prefix, &prefix, why, sizeof why);
	if (rc) {
		snprintf(err, errlen, "PULLPROF_PREFIX: %s", why);
		return rc;
	}
	if (merged.metrics_path && !*merged.metrics_path)
		merged.metrics_path = NULL;
	if (merged.record &&
	    (!*merged.record || !strcmp(merged.record, "off") ||
	     !strcmp(merged.record, "0")))
		merged.record = NULL;
	if (merged.record) {
		int64_t ns;
		if (pp_duration_parse(merged.record,
		                      (int64_t)86400 * 1000000000, &ns, why,
		                      sizeof why)) {
			snprintf(err, errlen, "PULLPROF_RECORD: %s", why);
			free(prefix);
			return -EINVAL;
		}
		out->record_ns = (uint64_t)ns;
	}
	if (merged.metrics_path &&
	    pp_config_check_metrics_path(merged.metrics_path, prefix, why,
	                                 sizeof why)) {
		snprintf(err, errlen, "PULLPROF_METRICS_PATH: %s", why);
		free(prefix);
		return -EINVAL;
	}
	char text[80] = PP_LISTEN_NONE;
	if (out->serve)
		pp_format_sockaddr((struct sockaddr *)&out->addr, text,
		                   sizeof text);
	rc = security(&merged, out, text, err, errlen);
	if (rc) {
		free(prefix);
		return rc;
	}
	out->v = merged;
	out->v.prefix = prefix;
	out->v.listen = strdup(text);
	out->v.unwind = strdup(merged.unwind);
	out->v.fork_mode = strdup(merged.fork_mode);
	/* Optional strings: NULL when unset (or ""), else owned copies. */
	const char **opt[] = {&out->v.token,        &out->v.tls_cert,
	                      &out->v.tls_key,      &out->v.allow,
	                      &out->v.metrics_path, &out->v.hosts,
	                      &out->v.record};
	int failed = !out->v.listen || !out->v.unwind || !out->v.fork_mode;
	for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++)
		if (*opt[i] && !(*opt[i] = strdup(*opt[i])))
			failed = 1;
	if (failed) {
		pp_config_free(out);
		return -ENOMEM;
	}
	return 0;
}

int pp_config_member(const struct pp_config *base, const char *path,
                     struct pp_config *out, char *err, size_t errlen)
{
	struct sockaddr_un *un = (struct sockaddr_un *)&out->addr;
	size_t n = strlen(path);

	if (n >= sizeof un->sun_path) {
		snprintf(err, errlen,
		         "the socket path %s is longer than a Unix socket's "
		         "%zu bytes",
		         path, sizeof un->sun_path - 1);
		return -ENAMETOOLONG;
	}
	int rc = pp_config_resolve(&base->v, out, err, errlen);
	if (rc)
		return rc;
	/* Reached only through a directory no one else may enter: no TLS,
	 * no token, no network list. */
	const char **drop[] = {&out->v.token, &out->v.tls_cert, &out->v.tls_key,
	                       &out->v.allow, &out->v.listen};
	for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++) {
		free((char *)*drop[i]);
		*drop[i] = NULL;
	}
	out->allow.n = 0;
	memset(&out->addr, 0, sizeof out->addr);
	un->sun_family = AF_UNIX;
	memcpy(un->sun_path, path, n + 1);
	out->addrlen =
	    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
	out->serve = 1;
	size_t len = n + sizeof "unix:";
	char *listen = malloc(len);
	if (!listen) {
		pp_config_free(out);
		return -ENOMEM;
	}
	snprintf(listen, len, "unix:%s", path);
	out->v.listen = listen;
	return 0;
}

void pp_config_free(struct pp_config *c)
{
	const char **strs[] = {
	    &c->v.listen,   &c->v.prefix,    &c->v.unwind, &c->v.token,
	    &c->v.tls_cert, &c->v.tls_key,   &c->v.allow,  &c->v.metrics_path,
	    &c->v.hosts,    &c->v.fork_mode, &c->v.record};
	for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
		free((char *)*strs[i]);
		*strs[i] = NULL;
	}
}

enum pp_fork_mode pp_fork_mode_of(const struct pp_config *c)
{
	const char *m = c->v.fork_mode;
	if (m && strcmp(m, "follow") == 0)
		return PP_FORK_FOLLOW;
	if (m && strcmp(m, "off") == 0)
		return PP_FORK_OFF;
	return PP_FORK_ADOPT;
}

/* Unit tests: configuration parsing, merging with the environment, and
 * validation messages. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <netinet/in.h>

#include "config.h"
#include "pullprof.h"

static char err[256];

static void listen_ok(const char *text, int family, const char *want)
{
	struct sockaddr_storage ss;
	socklen_t len = 0;
	char got[80];

	err[0] = 0;
	assert_int_equal(
	    pp_config_parse_listen(text, &ss, &len, err, sizeof err), 0);
	assert_int_equal(ss.ss_family, family);
	pp_format_sockaddr((struct sockaddr *)&ss, got, sizeof got);
	assert_string_equal(got, want);
}

static void listen_bad(const char *text, const char *why)
{
	struct sockaddr_storage ss;
	socklen_t len = 0;

	err[0] = 0;
	assert_int_equal(
	    pp_config_parse_listen(text, &ss, &len, err, sizeof err), -EINVAL);
	if (!strstr(err, why))
		fail_msg(
		    "error for \"%s\" is \"%s\", expected it to mention \"%s\"",
		    text, err, why);
}

static void test_listen_forms(void **state)
{
	(void)state;
	listen_ok("127.0.0.1:6060", AF_INET, "127.0.0.1:6060");
	listen_ok("0.0.0.0:0", AF_INET, "0.0.0.0:0");
	listen_ok(":7000", AF_INET, "0.0.0.0:7000");
	listen_ok("6061", AF_INET, "127.0.0.1:6061");
	listen_ok("localhost:80", AF_INET, "127.0.0.1:80");
	listen_ok("[::1]:6060", AF_INET6, "[::1]:6060");
	listen_ok("[::]:0", AF_INET6, "[::]:0");
	listen_ok("[fe80::1]:65535", AF_INET6, "[fe80::1]:65535");
}

static void test_listen_errors(void **state)
{
	(void)state;
	listen_bad("", "empty");
	listen_bad("127.0.0.1:", "bad port");
	listen_bad("127.0.0.1:65536", "out of range");
	listen_bad("127.0.0.1:-1", "not a whole number");
	listen_bad("127.0.0.1:60x", "not a whole number");
	listen_bad("::1:6060", "brackets");
	listen_bad("[::1]6060", "[addr]:port");
	listen_bad("[]:6060", "bad IPv6");
	listen_bad("[zz::1]:6060", "literal");
	listen_bad("example.com:6060", "literal");
	listen_bad("300.1.1.1:6060", "literal");
}

static void test_uint(void **state)
{
	unsigned v = 0;
	(void)state;
	assert_int_equal(
	    pp_config_parse_uint("42", 1, 100, &v, err, sizeof err), 0);
	assert_int_equal(v, 42);
	assert_int_equal(pp_config_parse_uint("0", 0, 1, &v, err, sizeof err),
	                 0);
	assert_int_equal(v, 0);
	assert_int_equal(
	    pp_config_parse_uint("101", 1, 100, &v, err, sizeof err), -EINVAL);
	assert_non_null(strstr(err, "out of range 1..100"));
	assert_int_equal(pp_config_parse_uint("99999999999999999999", 1, 100,
	                                      &v, err, sizeof err),
	                 -EINVAL);
	assert_int_equal(
	    pp_config_parse_uint(" 5", 1, 100, &v, err, sizeof err), -EINVAL);
	assert_int_equal(
	    pp_config_parse_uint("5 ", 1, 100, &v, err, sizeof err), -EINVAL);
	assert_int_equal(
	    pp_config_parse_uint("+5", 1, 100, &v, err, sizeof err), -EINVAL);
	assert_int_equal(pp_config_parse_uint("", 1, 100, &v, err, sizeof err),
	                 -EINVAL);
	assert_int_equal(v, 0); /* untouched by failures */
}

static void prefix_ok(const char *in, const char *want)
{
	char *out = NULL;
	assert_int_equal(pp_config_normalize_prefix(in, &out, err, sizeof err),
	                 0);
	assert_string_equal(out, want);
	free(out);
}

static void prefix_bad(const char *in)
{
	char *out = NULL;
	assert_int_equal(pp_config_normalize_prefix(in, &out, err, sizeof err),
	                 -EINVAL);
	assert_null(out);
	assert_true(strlen(err) > 0);
}

static void test_prefix(void **state)
{
	(void)state;
	prefix_ok("/debug/pprof", "/debug/pprof");
	prefix_ok("/debug/pprof/", "/debug/pprof");
	prefix_ok("/", "");
	prefix_ok("", "");
	prefix_ok("/a-b_c/x.y~z", "/a-b_c/x.y~z");
	prefix_bad("debug");
	prefix_bad("/a b");
	prefix_bad("/a?b");
	prefix_bad("/a#b");
	prefix_bad("/a//b");
	prefix_bad("/a/../b");
	prefix_bad("/a/./b");
	prefix_bad("/..");
	prefix_bad("/<script>");
	prefix_bad("/%2e");
}

static void test_defaults(void **state)
{
	struct pullprof_config c;
	struct pp_config r;
	(void)state;

	memset(&c, 0xff, sizeof c);
	pullprof_config_init(&c);
	assert_string_equal(c.listen, "127.0.0.1:6060");
	assert_string_equal(c.prefix, "/debug/pprof");
	assert_int_equal(c.ignore_env, 0);

	unsetenv("PULLPROF_LISTEN");
	unsetenv("PULLPROF_PREFIX");
	unsetenv("PULLPROF_MAX_CONNECTIONS");
	unsetenv("PULLPROF_IDLE_TIMEOUT");
	assert_int_equal(pp_config_resolve(NULL, &r, err, sizeof err), 0);
	assert_string_equal(r.v.unwind, "dwarf");
	assert_int_equal(r.v.cpu_hz, 100);
	assert_int_equal(r.v.max_seconds, 300);
	assert_string_equal(r.v.listen, "127.0.0.1:6060");
	assert_string_equal(r.v.prefix, "/debug/pprof");
	assert_int_equal(r.v.max_connections, c.max_connections);
	assert_int_equal(r.v.idle_timeout, c.idle_timeout);
	pp_config_free(&r);

	/* NULL strings in a caller's struct mean "the default". */
	c.listen = NULL;
	c.prefix = NULL;
	assert_int_equal(pp_config_resolve(&c, &r, err, sizeof err), 0);
	assert_string_equal(r.v.listen, "127.0.0.1:6060");
	assert_string_equal(r.v.prefix, "/debug/pprof");
	pp_config_free(&r);
}

static void test_env_overrides(void **state)
{
	struct pullprof_config c;
	struct pp_config r;
	(void)state;

	pullprof_config_init(&c);
	c.listen = "127.0.0.1:1234";
	c.prefix = "/mine";
	c.max_connections = 5;
	setenv("PULLPROF_LISTEN", "[::1]:0", 1);
	setenv("PULLPROF_PREFIX", "/ops/pprof/", 1);
	setenv("PULLPROF_MAX_CONNECTIONS", "7", 1);
	assert_int_equal(pp_config_resolve(&c, &r, err, sizeof err), 0);
	assert_string_equal(r.v.listen, "[::1]:0");
	assert_string_equal(r.v.prefix, "/ops/pprof");
	assert_int_equal(r.v.max_connections, 7);
	pp_config_free(&r);

	/* ignore_env: the caller's struct alone. */
	c.ignore_env = 1;
	assert_int_equal(pp_config_resolve(&c, &r, err, sizeof err), 0);
	assert_string_equal(r.v.listen, "127.0.0.1:1234");
	assert_string_equal(r.v.prefix, "/mine");
	assert_int_equal(r.v.max_connections, 5);
	pp_config_free(&r);
	unsetenv("PULLPROF_LISTEN");
	unsetenv("PULLPROF_PREFIX");
	unsetenv("PULLPROF_MAX_CONNECTIONS");
}

static void resolve_bad_env(const char *var, const char *value, const char *why)
{
	struct pp_config r;

	setenv(var, value, 1);
	err[0] = 0;
	assert_int_equal(pp_config_resolve(NULL, &r, err, sizeof err), -EINVAL);
	unsetenv(var);
	/* The message names the variable and the reason. */
	if (strncmp(err, var, strlen(var)) != 0 || !strstr(err, why))
		fail_msg("%s=%s gave \"%s\"", var, value, err);
}

static void test_env_errors(void **state)
{
	struct pullprof_config c;
	struct pp_config r;
	(void)state;

	resolve_bad_env("PULLPROF_LISTEN", "nonsense", "bad port");
	resolve_bad_env("PULLPROF_LISTEN", "host.example:80", "literal");
	resolve_bad_env("PULLPROF_PREFIX", "no-slash", "must start with /");
	resolve_bad_env("PULLPROF_MAX_CONNECTIONS", "0", "out of range");
	resolve_bad_env("PULLPROF_MAX_CONNECTIONS", "lots",
	                "not a whole number");
	resolve_bad_env("PULLPROF_IDLE_TIMEOUT", "99999", "out of range");
	resolve_bad_env("PULLPROF_UNWIND", "frames",
	                "not one of dwarf|libunwind|fp");
	resolve_bad_env("PULLPROF_CPU_HZ", "0", "out of range 1..1000");
	resolve_bad_env("PULLPROF_MAX_SECONDS", "100000", "out of range");

	/* A bad value in the struct is caught too, named by its key. */
	pullprof_config_init(&c);
	c.max_connections = 0;
	assert_int_equal(pp_config_resolve(&c, &r, err, sizeof err), -EINVAL);
	assert_non_null(strstr(err, "max_connections"));
}

static void metrics_path_bad(const char *path, const char *prefix,
                             const char *why)
{
	err[0] = 0;
	assert_int_equal(
	    pp_config_check_metrics_path(path, prefix, err, sizeof err),
	    -EINVAL);
	if (!strstr(err, why))
		fail_msg("metrics path \"%s\" (prefix \"%s\") gave \"%s\", "
		         "expected it to mention \"%s\"",
		         path, prefix, err, why);
}

static void test_metrics_path(void **state)
{
	struct pullprof_config c;
	struct pp_config r;
	(void)state;

	/* Outside the prefix, exact paths. */
	assert_int_equal(pp_config_check_metrics_path(
	                     "/metrics", "/debug/pprof", err, sizeof err),
	                 0);
	assert_int_equal(pp_config_check_metrics_path(
	                     "/ops/metrics/", "/debug/pprof", err, sizeof err),
	                 0);
	assert_int_equal(pp_config_check_metrics_path("/debug", "/debug/pprof",
	                                              err, sizeof err),
	                 0);
	assert_int_equal(pp_config_check_metrics_path(
	                     "/debug/pprofx", "/debug/pprof", err, sizeof err),
	                 0);
	/* <prefix>/metrics itself: allowed, it changes nothing. */
	assert_int_equal(
	    pp_config_check_metrics_path("/metrics", "", err, sizeof err), 0);
	assert_int_equal(pp_config_check_metrics_path("/debug/pprof/metrics",
	                                              "/debug/pprof", err,
	                                              sizeof err),
	                 0);

	metrics_path_bad("metrics", "/debug/pprof", "starting with /");
	metrics_path_bad("/", "/debug/pprof", "leads to the index");
	metrics_path_bad("/metrics?x=1", "/debug/pprof",
	                 "may not contain a query");
	metrics_path_bad("/met rics", "/debug/pprof", "spaces");
	metrics_path_bad("/m%65trics", "/debug/pprof", "?#%");
	metrics_path_bad("//metrics", "/debug/pprof", "empty, . or ..");
	metrics_path_bad("/a/../metrics", "/debug/pprof", "empty, . or ..");
	metrics_path_bad("/debug/pprof", "/debug/pprof", "under the prefix");
	metrics_path_bad("/debug/pprof/status", "/debug/pprof",
	                 "under the prefix");
	metrics_path_bad("/prom", "", "under the prefix");

	/* Through the configuration: NULL and "" are none; the message names
	 * the variable; the value is kept. */
	unsetenv("PULLPROF_METRICS_PATH");
	assert_int_equal(pp_config_resolve(NULL, &r, err, sizeof err), 0);
	assert_null(r.v.metrics_path);
	pp_config_free(&r);
	setenv("PULLPROF_METRICS_PATH", "", 1);
	assert_int_equal(pp_config_resolve(NULL, &r, err, sizeof err), 0);
	assert_null(r.v.metrics_path);
	pp_config_free(&r);
	setenv("PULLPROF_METRICS_PATH", "/metrics", 1);
	assert_int_equal(pp_config_resolve(NULL, &r, err, sizeof err), 0);
	assert_string_equal(r.v.metrics_path, "/metrics");
	pp_config_free(&r);
	unsetenv("PULLPROF_METRICS_PATH");
	resolve_bad_env("PULLPROF_METRICS_PATH", "metrics", "starting with /");
	/* Checked against the prefix in force, the environment's included. */
	setenv("PULLPROF_PREFIX", "/", 1);
	resolve_bad_env("PULLPROF_METRICS_PATH", "/prom", "under the prefix");
	unsetenv("PULLPROF_PREFIX");
	pullprof_config_init(&c);
	c.metrics_path = "/debug/pprof/heap";
	assert_int_equal(pp_config_resolve(&c, &r, err, sizeof err), -EINVAL);
	assert_non_null(strstr(err, "PULLPROF_METRICS_PATH"));
}

static void test_listen_none(void **state)
{
	struct pullprof_config c;
	struct pp_config r;
	(void)state;

	pullprof_config_init(&c);
	c.ignore_env = 1;
	assert_int_equal(pp_config_resolve(&c, &r, err, sizeof err), 0);
	assert_int_equal(r.serve, 1);
	pp_config_free(&r);

	/* "none": no server, nothing to protect with a token. */
	c.listen = "none";
	assert_int_equal(pp_config_resolve(&c, &r, err, sizeof err), 0);
	assert_int_equal(r.serve, 0);
	assert_string_equal(r.v.listen, "none");
	pp_config_free(&r);
	c.listen = "0.0.0.0:0";
	assert_int_equal(pp_config_resolve(&c, &r, err, sizeof err), -EINVAL);
	assert_non_null(strstr(err, "PULLPROF_TOKEN"));

	/* The environment's "none" wins over the struct's address. */
	c.ignore_env = 0;
	setenv("PULLPROF_LISTEN", "none", 1);
	assert_int_equal(pp_config_resolve(&c, &r, err, sizeof err), 0);
	assert_int_equal(r.serve, 0);
	pp_config_free(&r);
	unsetenv("PULLPROF_LISTEN");

	/* Only that word: the rest are addresses. */
	resolve_bad_env("PULLPROF_LISTEN", "NONE", "bad port");
	resolve_bad_env("PULLPROF_LISTEN", "none:6060", "literal");

	/* The other settings are checked all the same. */
	c.ignore_env = 1;
	c.listen = "none";
	c.token = "short";
	assert_int_equal(pp_config_resolve(&c, &r, err, sizeof err), -EINVAL);
	assert_non_null(strstr(err, "PULLPROF_TOKEN"));
}

static void test_settings_table(void **state)
{
	(void)state;
	/* Every setting has a PULLPROF_ variable and a description. */
	for (size_t i = 0; i < pp_settings_count; i++) {
		assert_int_equal(strncmp(pp_settings[i].env, "PULLPROF_", 9),
		                 0);
		assert_true(strlen(pp_settings[i].help) > 10);
		for (size_t j = 0; j < i; j++)
			assert_string_not_equal(pp_settings[i].key,
			                        pp_settings[j].key);
	}
}

static void test_strerror(void **state)
{
	(void)state;
	assert_string_equal(pullprof_strerror(0), "success");
	assert_string_equal(pullprof_strerror(-EADDRINUSE),
	                    "address already in use");
	assert_non_null(
	    strstr(pullprof_strerror(-EALREADY), "already running"));
	/* Unknown negative errno values still read well; junk does not crash.
	 */
	assert_string_equal(pullprof_strerror(-ENOENT),
	                    "No such file or directory");
	/* The capture functions' own meanings. */
	assert_non_null(strstr(pullprof_strerror(-ESRCH), "not running"));
	assert_non_null(
	    strstr(pullprof_strerror(-ENOTSUP), "PULLPROF_HEAP_RATE"));
	/* One meaning per code: stopping is not "heap profiling off". */
	assert_non_null(strstr(pullprof_strerror(-ESHUTDOWN), "stopping"));
	assert_null(strstr(pullprof_strerror(-ESHUTDOWN), "HEAP"));
	assert_non_null(
	    strstr(pullprof_strerror(-EBUSY), "PULLPROF_MAX_CPU_WINDOWS"));
	assert_non_null(strstr(pullprof_strerror(-ECANCELED), "stopped"));
	assert_string_equal(pullprof_strerror(-100000), "unknown error");
	assert_string_equal(pullprof_strerror(12345), "unknown error");
}

/* Every setting's default, from its one declaration, is inside its own
 * range and is what pullprof_config_init gives. */
static void test_table_defaults(void **state)
{
	struct pullprof_config c;
	(void)state;

	pullprof_config_init(&c);
	assert_int_equal(c.struct_size, sizeof c);
	for (size_t i = 0; i < pp_settings_count; i++) {
		const struct pp_setting *s = &pp_settings[i];
		const char *field = (const char *)&c + s->offset;
		assert_non_null(s->help);
		assert_non_null(s->unit);
		assert_int_equal(strncmp(s->env, "PULLPROF_", 9), 0);
		if (s->type == PP_SETTING_UINT) {
			assert_in_range(s->def, s->min, s->max);
			assert_int_equal(*(const unsigned *)field, s->def);
		} else {
			const char *v = *(const char *const *)field;
			if (s->def_text)
				assert_string_equal(v, s->def_text);
			else
				assert_null(v);
		}
	}
}

/* A struct from an older header is smaller than this library's: init and
 * start never touch a byte past the caller's struct_size. */
static void test_struct_size(void **state)
{
	union {
		struct pullprof_config c;
		unsigned char bytes[sizeof(struct pullprof_config) + 64];
	} u;
	struct pp_config r;
	size_t old = offsetof(struct pullprof_config, max_lookups);
	(void)state;

	memset(&u, 0xAA, sizeof u);
	pullprof_config_init_size(&u.c, old);
	assert_int_equal(u.c.struct_size, old);
	assert_string_equal(u.c.listen, "127.0.0.1:6060");
	for (size_t i = old; i < sizeof u; i++)
		assert_int_equal(u.bytes[i], 0xAA);

	/* A newer header's larger struct: zeros past what we know, and
	 * start reads only its own fields. */
	memset(&u, 0xAA, sizeof u);
	pullprof_config_init_size(&u.c, sizeof u);
	assert_int_equal(u.c.struct_size, sizeof u);
	for (size_t i = sizeof u.c; i < sizeof u; i++)
		assert_int_equal(u.bytes[i], 0);
	u.c.ignore_env = 1;
	u.c.max_lookups = 9;
	assert_int_equal(pp_config_resolve(&u.c, &r, err, sizeof err), 0);
	assert_int_equal(r.v.max_lookups, 9);
	assert_int_equal(r.v.struct_size, sizeof r.v);
	pp_config_free(&r);

	/* The first version's size is accepted; anything smaller, or a
	 * struct never initialized, is refused with a reason. */
	pullprof_config_init(&u.c);
	u.c.ignore_env = 1;
	u.c.struct_size = PP_CONFIG_FIRST_SIZE;
	assert_int_equal(pp_config_resolve(&u.c, &r, err, sizeof err), 0);
	pp_config_free(&r);
	u.c.struct_size = PP_CONFIG_FIRST_SIZE - sizeof(void *);
	assert_int_equal(pp_config_resolve(&u.c, &r, err, sizeof err), -EINVAL);
	assert_non_null(strstr(err, "pullprof_config_init"));
	u.c.struct_size = 0;
	assert_int_equal(pp_config_resolve(&u.c, &r, err, sizeof err), -EINVAL);
	/* NULL and sizes too small to hold struct_size are ignored. */
	pullprof_config_init_size(NULL, sizeof u.c);
	memset(&u, 0xAA, sizeof u);
	pullprof_config_init_size(&u.c, 1);
	assert_int_equal(u.bytes[0], 0xAA);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_listen_forms),
	    cmocka_unit_test(test_listen_errors),
	    cmocka_unit_test(test_uint),
	    cmocka_unit_test(test_prefix),
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_table_defaults),
	    cmocka_unit_test(test_struct_size),
	    cmocka_unit_test(test_env_overrides),
	    cmocka_unit_test(test_env_errors),
	    cmocka_unit_test(test_metrics_path),
	    cmocka_unit_test(test_listen_none),
	    cmocka_unit_test(test_settings_table),
	    cmocka_unit_test(test_strerror),
	};
	return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}

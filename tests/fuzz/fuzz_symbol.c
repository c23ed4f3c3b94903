/*
 * libFuzzer target: the /symbol address list (gperftools' remote
 * symbolization protocol). Built by scripts/fuzz.sh.
 *
 * The input is parsed twice: as a POST body (bytes as they come, NULs
 * included), and as a GET query (split into arguments as libmicrohttpd
 * does, unescaped by the server's rule, joined back as the handler does).
 * Each walk is checked against a reference written differently: the same
 * addresses in the same order, or the same bad token.
 */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/symbol_body.h"
#include "ask/args.h"
#include "util/buf.h"

#define MAXADDR 4096

struct seen {
	size_t n;
	uint64_t v[MAXADDR];
	size_t stop_after; /* stop the walk after this many (0: never) */
};

static int collect(void *cls, uint64_t addr)
{
	struct seen *s = cls;
	if (s->n < MAXADDR)
		s->v[s->n] = addr;
	s->n++;
	return s->stop_after && s->n >= s->stop_after;
}

static int hexdigit(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 32;
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The reference: one token, "0x" hex digits or decimal digits, under 40
 * characters, value below 2^64. */
static int ref_addr(const unsigned char *s, size_t n, uint64_t *out)
{
	unsigned base = 10;
	size_t i = 0;
	uint64_t v = 0;

	if (n == 0 || n >= 40)
		return -1;
	if (n > 2 && s[0] == '0' && (s[1] | 32) == 'x') {
		base = 16;
		i = 2;
	}
	for (; i < n; i++) {
		int d = hexdigit(s[i]);
		if (d < 0 || (unsigned)d >= base)
			return -1;
		if (v > (UINT64_MAX - (unsigned)d) / base)
			return -1;
		v = v * base + (unsigned)d;
	}
	*out = v;
	return 0;
}

static int sep(unsigned char c)
{
	return c == '+' || c == ' ' || (c >= '\t' && c <= '\r');
}

static void walk(const char *in, size_t len)
{
	static struct seen got, want;
	size_t bad = 0, badlen = 0;

	got.n = 0;
	got.stop_after = 0;
	int rc = pp_symbol_addrs(in, len, collect, &got, &bad, &badlen);

	/* The reference walk. */
	const unsigned char *u = (const unsigned char *)in;
	int want_rc = 0;
	size_t want_bad = 0, want_badlen = 0;
	want.n = 0;
	for (size_t i = 0; i < len;) {
		if (sep(u[i])) {
			i++;
			continue;
		}
		size_t j = i;
		while (j < len && !sep(u[j]))
			j++;
		uint64_t a;
		if (ref_addr(u + i, j - i, &a)) {
			want_rc = -EINVAL;
			want_bad = i;
			want_badlen = j - i;
			break;
		}
		if (want.n < MAXADDR)
			want.v[want.n] = a;
		want.n++;
		i = j;
	}
	if (rc != want_rc || got.n != want.n)
		abort();
	if (rc &&
	    (bad != want_bad || badlen != want_badlen || bad + badlen > len))
		abort();
	for (size_t i = 0; i < got.n && i < MAXADDR; i++)
		if (got.v[i] != want.v[i])
			abort();
	/* A callback that stops the walk stops it there. */
	if (want.n > 1) {
		got.n = 0;
		got.stop_after = 1;
		if (pp_symbol_addrs(in, len, collect, &got, &bad, &badlen) ||
		    got.n != 1)
			abort();
	}
}

/* The GET form: libmicrohttpd's split and the handler's join. */
static void get_form(const uint8_t *data, size_t size)
{
	char *q = strndup((const char *)data, size);
	struct pp_buf b = {0};
	if (!q)
		abort();
	for (char *p = q; p;) {
		char *amp = strchr(p, '&');
		if (amp)
			*amp = 0;
		char *eq = strchr(p, '=');
		if (eq)
			*eq = 0;
		for (char *c = p; *c; c++)
			if (*c == '+')
				*c = ' ';
		pp_args_unescape(p);
		const char *value = NULL;
		if (eq) {
			for (char *c = eq + 1; *c; c++)
				if (*c == '+')
					*c = ' ';
			pp_args_unescape(eq + 1);
			value = eq + 1;
		}
		pp_symbol_join_arg(&b, p, value);
		p = amp ? amp + 1 : NULL;
	}
	walk(b.data ? b.data : "", b.len);
	pp_buf_free(&b);
	free(q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* An exact-size copy, so ASan sees a read past the body. */
	char *body = malloc(size ? size : 1);
	if (!body)
		abort();
	memcpy(body, data, size);
	walk(body, size);
	free(body);
	get_form(data, size);
	return 0;
}

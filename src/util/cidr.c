/* Network address lists.
 * Context: agent.
 */
#include "cidr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

/* The 128-bit form of an address; 0 when the family is neither. */
static int to128(const struct sockaddr *sa, uint8_t out[16])
{
	if (sa->sa_family == AF_INET) {
		memcpy(out, v4_mapped, 12);
		memcpy(out + 12, &((const struct sockaddr_in *)sa)->sin_addr,
		       4);
		return 1;
	}
	if (sa->sa_family == AF_INET6) {
		memcpy(out, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
		return 1;
	}
	return 0;
}

static int prefix_equal(const uint8_t *a, const uint8_t *b, unsigned bits)
{
	unsigned whole = bits / 8, rest = bits % 8;
	if (memcmp(a, b, whole) != 0)
		return 0;
	if (!rest)
		return 1;
	uint8_t mask = (uint8_t)(0xff << (8 - rest));
	return (a[whole] & mask) == (b[whole] & mask);
}

static int parse_one(const char *item, size_t len, struct pp_cidr *c, char *err,
                     size_t errlen)
{
	char text[80];
	unsigned bits, max;
	int v4;

	if (len == 0 || len >= sizeof text) {
		snprintf(err, errlen,
		         "\"%.*s\": not a network (a.b.c.d/n or v6/n)",
		         (int)(len < 64 ? len : 64), item);
		return -EINVAL;
	}
	memcpy(text, item, len);
	text[len] = 0;
	char *slash = strchr(text, '/');
	if (slash)
		*slash = 0;
	struct in_addr a4;
	struct in6_addr a6;
	if (inet_pton(AF_INET, text, &a4) == 1) {
		v4 = 1;
		memcpy(c->addr, v4_mapped, 12);
		memcpy(c->addr + 12, &a4, 4);
		max = 32;
	} else if (inet_pton(AF_INET6, text, &a6) == 1) {
		v4 = 0;
		memcpy(c->addr, &a6, 16);
		max = 128;
	} else {
		snprintf(err, errlen,
		         "\"%.64s\": not an IPv4 or IPv6 address (write "
		         "networks as a.b.c.d/n or v6/n)",
		         text);
		return -EINVAL;
	}
	bits = max;
	if (slash) {
		char *end;
		const char *b = slash + 1;
		unsigned long v = strtoul(b, &end, 10);
		if (!*b || *end || b[0] < '0' || b[0] > '9' || v > max) {
			snprintf(err, errlen,
			         "\"%.*s\": the prefix length must be 0..%u",
			         (int)len, item, max);
			return -EINVAL;
		}
		bits = (unsigned)v;
	}
	c->bits = v4 ? bits + 96 : bits;
	/* Host bits set (10.1.2.3/8) are most likely a typo for another
	 * network: refuse rather than guess. */
	uint8_t masked[16];
	memset(masked, 0, sizeof masked);
	memcpy(masked, c->addr, c->bits / 8);
	if (c->bits % 8)
		masked[c->bits / 8] = (uint8_t)(c->addr[c->bits / 8] &
		                                (0xff << (8 - c->bits % 8)));
	if (memcmp(masked, c->addr, 16) != 0) {
		snprintf(err, errlen,
		         "\"%.*s\": address bits set past the prefix length "
		         "(did you mean the network it is in?)",
		         (int)len, item);
		return -EINVAL;
	}
	return 0;
}

int pp_cidr_parse(const char *text, struct pp_cidr_list *out, char *err,
                  size_t errlen)
{
	memset(out, 0, sizeof *out);
	if (!text)
		return 0;
	const char *p = text;
	while (*p == ' ' || *p == '\t')
		p++;
	if (!*p)
		return 0;
	for (;;) {
		size_t n = strcspn(p, ",");
		const char *end = p + n;
		const char *s = p, *e = end;
		while (s < e && (*s == ' ' || *s == '\t'))
			s++;
		while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		if (out->n == PP_CIDR_MAX) {
			snprintf(err, errlen, "more than %d networks",
			         PP_CIDR_MAX);
			return -EINVAL;
		}
		int rc =
		    parse_one(s, (size_t)(e - s), &out->v[out->n], err, errlen);
		if (rc)
			return rc;
		out->n++;
		if (!*end)
			return 0;
		p = end + 1;
	}
}

int pp_cidr_match(const struct pp_cidr_list *l, const struct sockaddr *sa)
{
	uint8_t a[16];

	if (l->n == 0)
		return 1;
	if (!to128(sa, a))
		return 0;
	for (size_t i = 0; i < l->n; i++)
		if (prefix_equal(a, l->v[i].addr, l->v[i].bits))
			return 1;
	return 0;
}

int pp_cidr_is_loopback(const struct sockaddr *sa)
{
	static const uint8_t one[16] = {0, 0, 0, 0, 0, 0, 0, 0,
	                                0, 0, 0, 0, 0, 0, 0, 1};
	uint8_t a[16];
	if (!to128(sa, a))
		return 0;
	return memcmp(a, one, 16) == 0 ||
	       (memcmp(a, v4_mapped, 12) == 0 && a[12] == 127);
}

int pp_cidr_same_host(const struct sockaddr *a, const struct sockaddr *b)
{
	uint8_t x[16], y[16];
	return to128(a, x) && to128(b, y) && memcmp(x, y, 16) == 0;
}

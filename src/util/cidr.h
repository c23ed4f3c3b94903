/* Network address lists ("10.0.0.0/8,::1/128") and matching client
 * addresses against them. Pure functions.
 * Context: agent.
 */
#ifndef PP_CIDR_H
#define PP_CIDR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define PP_CIDR_MAX 64

struct pp_cidr {
	uint8_t addr[16]; /* IPv4 as its IPv4-mapped IPv6 form */
	unsigned bits;    /* prefix length over the 128-bit form */
};

struct pp_cidr_list {
	struct pp_cidr v[PP_CIDR_MAX];
	size_t n; /* 0: the list is empty (everyone allowed) */
};

/* Parse comma-separated networks: "a.b.c.d/n", "a.b.c.d" (/32), "v6/n",
 * "v6" (/128); spaces around items are ignored. 0, or -EINVAL with a
 * sentence in err (which item, why). An empty text gives an empty list. */
int pp_cidr_parse(const char *text, struct pp_cidr_list *out, char *err,
                  size_t errlen);

/* Is the address (AF_INET or AF_INET6, IPv4-mapped ones as IPv4) in the
 * list? An empty list matches everything. */
int pp_cidr_match(const struct pp_cidr_list *l, const struct sockaddr *sa);

/* Are a and b the same host (IPv4-mapped IPv6 addresses as their IPv4)?
 * Ports are not compared; other families are never the same. */
int pp_cidr_same_host(const struct sockaddr *a, const struct sockaddr *b);

/* Is the address a loopback one (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104)? */
int pp_cidr_is_loopback(const struct sockaddr *sa);

#endif

/* The /symbol address list, as pure functions.
 * Context: agent.
 */
#include "symbol_body.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

int pp_symbol_parse_addr(const char *s, size_t n, uint64_t *out)
{
	char tmp[40];
	char *end;

	if (n == 0 || n >= sizeof tmp)
		return -EINVAL;
	memcpy(tmp, s, n);
	tmp[n] = 0;
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)tmp[i]) &&
		    !(i == 1 && (tmp[i] | 32) == 'x'))
			return -EINVAL;
	errno = 0;
	int base = n > 2 && tmp[0] == '0' && (tmp[1] | 32) == 'x' ? 16 : 10;
	unsigned long long v = strtoull(tmp + (base == 16 ? 2 : 0), &end, base);
	if (errno || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

int pp_symbol_addrs(const char *in, size_t len,
                    int (*fn)(void *cls, uint64_t addr), void *cls, size_t *bad,
                    size_t *badlen)
{
	size_t i = 0;
	while (i < len) {
		size_t j = i;
		while (j < len && in[j] != '+' &&
		       !isspace((unsigned char)in[j]))
			j++;
		if (j > i) {
			uint64_t addr;
			if (pp_symbol_parse_addr(in + i, j - i, &addr)) {
				*bad = i;
				*badlen = j - i;
				return -EINVAL;
			}
			if (fn(cls, addr))
				return 0;
		}
		i = j + 1;
	}
	return 0;
}

void pp_symbol_join_arg(struct pp_buf *b, const char *key, const char *value)
{
	pp_buf_puts(b, key);
	if (value && *value) {
		pp_buf_puts(b, "=");
		pp_buf_puts(b, value);
	}
	pp_buf_puts(b, " ");
}

/*
 * /symbol: the remote symbolization protocol of gperftools' pprof, which
 * go tool pprof still speaks for profiles without symbols (the legacy
 * formats). GET answers "num_symbols: 1" (we can symbolize); a list of
 * addresses — POST body or GET query, separated by '+' — is answered with
 * one "0x<addr> <function>" line per address we know, as Go's net/http/pprof
 * answers. Agent context.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handlers.h"
#include "respond.h"
#include "symbols/symbols.h"
#include "util/buf.h"

/* GET arguments arrive split by libmicrohttpd ('+' already made a space):
 * join the keys back into one list. */
static enum MHD_Result join_arg(void *cls, enum MHD_ValueKind kind,
                                const char *key, const char *value)
{
	struct pp_buf *b = cls;
	(void)kind;
	pp_buf_puts(b, key);
	if (value && *value) {
		pp_buf_puts(b, "=");
		pp_buf_puts(b, value);
	}
	pp_buf_puts(b, " ");
	return MHD_YES;
}

/* Parse one address: 0x-hex or decimal, as strconv.ParseUint(s, 0, 64). */
static int parse_addr(const char *s, size_t n, uint64_t *out)
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

enum MHD_Result pp_h_symbol(struct pp_request *r)
{
	struct pp_buf query = {0}, out = {0};
	const char *in;
	size_t len;

	if (strcmp(r->method, MHD_HTTP_METHOD_POST) == 0) {
		in = r->body.data ? r->body.data : "";
		len = r->body.len;
	} else {
		MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND,
		                          join_arg, &query);
		in = query.data ? query.data : "";
		len = query.len;
	}

	pp_buf_puts(&out, "num_symbols: 1\n");
	struct pp_symtab *st = NULL;
	size_t i = 0;
	while (i < len) {
		size_t j = i;
		while (j < len && in[j] != '+' &&
		       !isspace((unsigned char)in[j]))
			j++;
		if (j > i) {
			uint64_t addr;
			if (parse_addr(in + i, j - i, &addr)) {
				if (st)
					pp_symtab_release(st);
				pp_buf_free(&query);
				pp_buf_free(&out);
				return pp_respond_error(
				    r, MHD_HTTP_BAD_REQUEST,
				    "symbol: \"%.*s\" is not an address (send "
				    "0x-hex addresses separated by +)",
				    (int)(j - i < 40 ? j - i : 40), in + i);
			}
			if (!st && !(st = pp_symtab_acquire()))
				break;
			struct pp_symbol sym;
			if (addr &&
			    pp_symtab_lookup(st, (uintptr_t)addr, &sym) == 0 &&
			    sym.nframes)
				pp_buf_printf(&out, "%#" PRIx64 " %s\n", addr,
				              sym.frames[0].name);
		}
		i = j + 1;
	}
	if (st)
		pp_symtab_release(st);
	pp_buf_free(&query);
	char *body = pp_buf_take(&out, &len);
	if (!body)
		return pp_respond_error(r, MHD_HTTP_SERVICE_UNAVAILABLE,
		                        "symbol: out of memory");
	return pp_respond(r, MHD_HTTP_OK, "text/plain; charset=utf-8", body,
	                  len, PP_BODY_FREE);
}

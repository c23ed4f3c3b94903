/*
 * /symbol: the remote symbolization protocol of gperftools' pprof, which
 * go tool pprof still speaks for profiles without symbols (the legacy
 * formats). GET answers "num_symbols: 1" (we can symbolize); a list of
 * addresses — POST body or GET query, separated by '+' — is answered with
 * one "0x<addr> <function>" line per address we know, as Go's net/http/pprof
 * answers. Agent context.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "handlers.h"
#include "respond.h"
#include "symbol_body.h"
#include "symbols/symbols.h"
#include "util/buf.h"

static enum MHD_Result join_arg(void *cls, enum MHD_ValueKind kind,
                                const char *key, const char *value)
{
	(void)kind;
	pp_symbol_join_arg(cls, key, value);
	return MHD_YES;
}

struct lookup {
	struct pp_symtab *st;
	struct pp_buf *out;
};

/* One address of the list: its line when we know it. Nonzero (stop) when
 * the symbol table cannot be had. */
static int lookup_one(void *cls, uint64_t addr)
{
	struct lookup *l = cls;
	struct pp_symbol sym;

	if (!l->st && !(l->st = pp_symtab_acquire()))
		return 1;
	if (addr && pp_symtab_lookup(l->st, (uintptr_t)addr, &sym) == 0 &&
	    sym.nframes)
		pp_buf_printf(l->out, "%#" PRIx64 " %s\n", addr,
		              sym.frames[0].name);
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
	struct lookup l = {NULL, &out};
	size_t bad, badlen;
	int rc = pp_symbol_addrs(in, len, lookup_one, &l, &bad, &badlen);
	if (l.st)
		pp_symtab_release(l.st);
	if (rc) {
		enum MHD_Result res = pp_respond_error(
		    r, MHD_HTTP_BAD_REQUEST,
		    "symbol: \"%.*s\" is not an address (send "
		    "0x-hex addresses separated by +)",
		    (int)(badlen < 40 ? badlen : 40), in + bad);
		pp_buf_free(&query);
		pp_buf_free(&out);
		return res;
	}
	pp_buf_free(&query);
	char *body = pp_buf_take(&out, &len);
	if (!body)
		return pp_respond_error(r, MHD_HTTP_SERVICE_UNAVAILABLE,
		                        "symbol: out of memory");
	return pp_respond(r, MHD_HTTP_OK, "text/plain; charset=utf-8", body,
	                  len, PP_BODY_FREE);
}

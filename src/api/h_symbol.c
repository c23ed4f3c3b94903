/*
 * /symbol: the remote symbolization protocol of gperftools' pprof, which
 * go tool pprof still speaks for profiles without symbols (the legacy
 * formats). GET answers "num_symbols: 1" (we can symbolize); a list of
 * addresses — POST body or GET query, separated by '+' — is answered with
 * one "0x<addr> <function>" line per address we know, as Go's net/http/pprof
 * answers.
 * Context: agent.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handlers.h"
#include "pullprof.h"
#include "server/lookup.h"
#include "server/respond.h"
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

/* The address list, once checked, with the answer being written. */
struct symbol_job {
	struct pp_buf in;
	struct pp_buf out;
	struct pp_symtab *st;
	int error; /* a negative errno: the symbols could not be had */
	const atomic_int *cancel;
};

static void symbol_job_free(void *arg)
{
	struct symbol_job *j = arg;
	pp_buf_free(&j->in);
	pp_buf_free(&j->out);
	free(j);
}

/* One address of the list: its line when we know it. Nonzero (stop) when
 * the symbol table cannot be had or nobody waits any more. */
static int lookup_one(void *cls, uint64_t addr)
{
	struct symbol_job *j = cls;
	struct pp_symbol sym;

	if (atomic_load_explicit(j->cancel, memory_order_relaxed))
		return 1;
	if (!j->st && (j->error = pp_symtab_acquire(&j->st)))
		return 1;
	if (addr && pp_symtab_lookup(j->st, (uintptr_t)addr, &sym) == 0 &&
	    sym.nframes)
		pp_buf_printf(&j->out, "%#" PRIx64 " %s\n", addr,
		              sym.frames[0].name);
	return 0;
}

static int count_one(void *cls, uint64_t addr)
{
	(void)addr;
	++*(size_t *)cls;
	return 0;
}

/* On the lookup thread. */
static void symbolize(void *arg, const atomic_int *cancel,
                      struct pp_lookup_answer *a)
{
	struct symbol_job *j = arg;
	size_t bad, badlen;

	j->cancel = cancel;
	pp_buf_puts(&j->out, "num_symbols: 1\n");
	pp_symbol_addrs(j->in.data ? j->in.data : "", j->in.len, lookup_one, j,
	                &bad, &badlen);
	if (j->st) {
		j->error = pp_symtab_shortage(j->st);
		pp_symtab_release(j->st);
	}
	j->st = NULL;
	if (j->error) {
		a->status = MHD_HTTP_SERVICE_UNAVAILABLE;
		snprintf(a->msg, sizeof a->msg,
		         "symbol: the symbols could not be read: %s",
		         pullprof_strerror(j->error));
		return;
	}
	a->body = pp_buf_take(&j->out, &a->len);
	if (!a->body) {
		a->status = MHD_HTTP_SERVICE_UNAVAILABLE;
		snprintf(a->msg, sizeof a->msg, "symbol: out of memory");
		return;
	}
	a->status = MHD_HTTP_OK;
	a->content_type = "text/plain; charset=utf-8";
}

enum MHD_Result pp_h_symbol(struct pp_request *r)
{
	struct symbol_job *j = calloc(1, sizeof *j);
	size_t bad, badlen;

	if (!j)
		return pp_respond_error(r, MHD_HTTP_SERVICE_UNAVAILABLE,
		                        "symbol: out of memory");
	if (strcmp(r->method, MHD_HTTP_METHOD_POST) == 0) {
		/* The body goes with the job. */
		j->in = r->body;
		memset(&r->body, 0, sizeof r->body);
	} else {
		MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND,
		                          join_arg, &j->in);
	}
	if (j->in.failed) {
		symbol_job_free(j);
		return pp_respond_error(r, MHD_HTTP_SERVICE_UNAVAILABLE,
		                        "symbol: out of memory");
	}
	const char *in = j->in.data ? j->in.data : "";
	size_t n = 0;
	/* Checked here (a fast pass): a bad list is a 400 whatever the
	 * lookup thread is doing; only good ones wait for it. */
	if (pp_symbol_addrs(in, j->in.len, count_one, &n, &bad, &badlen)) {
		enum MHD_Result res = pp_respond_error(
		    r, MHD_HTTP_BAD_REQUEST,
		    "symbol: \"%.*s\" is not an address (send "
		    "0x-hex addresses separated by +)",
		    (int)(badlen < 40 ? badlen : 40), in + bad);
		symbol_job_free(j);
		return res;
	}
	if (n == 0) {
		/* The probe ("do you symbolize?"): nothing to look up. */
		symbol_job_free(j);
		static const char probe[] = "num_symbols: 1\n";
		return pp_respond(r, MHD_HTTP_OK, "text/plain; charset=utf-8",
		                  probe, sizeof probe - 1, PP_BODY_STATIC);
	}
	return pp_lookup_answer_later(r, symbolize, j, symbol_job_free);
}

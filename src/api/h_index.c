/*
 * The index page: web/index.html with its {{placeholders}} filled from the
 * routing table, so the page lists exactly the endpoints that exist.
 * Context: agent.
 */
#include <string.h>
#include <unistd.h>

#include "assets.h"
#include "config.h"
#include "handlers.h"
#include "server/respond.h"
#include "server/server.h"
#include "util/buf.h"

static void endpoints(struct pp_buf *b, const struct pp_agent_facts *f)
{
	for (size_t i = 0; i < f->nroutes; i++) {
		const struct pp_route *rt = &f->routes[i];
		pp_buf_puts(b, "<tr><td><a href=\"");
		pp_buf_html(b, rt->link);
		pp_buf_puts(b, "\">");
		pp_buf_html(b, rt->path[1] ? rt->path + 1 : "(index)");
		if (rt->subtree)
			pp_buf_puts(b, "/");
		pp_buf_puts(b, "</a></td><td>");
		pp_buf_html(b, rt->help);
		pp_buf_puts(b, "</td></tr>\n");
	}
}

static void fill(struct pp_buf *b, const struct pp_request *r, const char *name,
                 size_t n)
{
	if (n == 7 && memcmp(name, "version", 7) == 0)
		pp_buf_puts(b, PACKAGE_VERSION);
	else if (n == 6 && memcmp(name, "prefix", 6) == 0)
		pp_buf_html(b, r->cfg->v.prefix);
	else if (n == 3 && memcmp(name, "pid", 3) == 0)
		pp_buf_printf(b, "%d", (int)getpid());
	else if (n == 9 && memcmp(name, "endpoints", 9) == 0)
		endpoints(b, r->srv->facts);
}

enum MHD_Result pp_h_index(struct pp_request *r)
{
	const struct pp_asset *page = pp_asset_find("index.html");
	const char *p = (const char *)page->data, *open;
	struct pp_buf b = {0};
	size_t len;

	while ((open = strstr(p, "{{")) != NULL) {
		const char *close = strstr(open + 2, "}}");
		if (!close)
			break;
		pp_buf_append(&b, p, (size_t)(open - p));
		fill(&b, r, open + 2, (size_t)(close - open - 2));
		p = close + 2;
	}
	pp_buf_puts(&b, p);
	char *body = pp_buf_take(&b, &len);
	if (!body)
		return pp_respond_error(r, MHD_HTTP_SERVICE_UNAVAILABLE,
		                        "out of memory building the index");
	return pp_respond(r, MHD_HTTP_OK, page->content_type, body, len,
	                  PP_BODY_FREE);
}

/*
 * /ui: the flame graph viewer, files embedded from web/ui/. Only names in
 * the embedded table are served; the rest of the path is never looked up
 * anywhere else, so "..", "%2e%2e" or a deeper path simply find nothing.
 * Context: agent.
 */
#include <stdio.h>
#include <string.h>

#include "assets.h"
#include "config.h"
#include "handlers.h"
#include "server/respond.h"

/* The viewer talks only to this agent: no other origin, no inline code. */
#define UI_CSP                                                                 \
	"default-src 'none'; script-src 'self'; style-src 'self'; "            \
	"img-src 'self' data:; connect-src 'self'; base-uri 'none'; "          \
	"form-action 'none'; frame-ancestors 'none'"

enum MHD_Result pp_h_ui(struct pp_request *r)
{
	const char *below = r->rest + strlen(r->route->path);
	char name[96];

	if (!*below) {
		/* "/ui": the page's relative links need the slash. */
		char loc[256];
		snprintf(loc, sizeof loc, "%s%s/", r->cfg->v.prefix,
		         r->route->path);
		return pp_respond_redirect(r, loc);
	}
	const char *file = below[1] ? below + 1 : "index.html";
	int n = snprintf(name, sizeof name, "ui/%s", file);
	const struct pp_asset *a =
	    n > 0 && (size_t)n < sizeof name ? pp_asset_find(name) : NULL;
	if (!a)
		return pp_respond_error(r, MHD_HTTP_NOT_FOUND,
		                        "the viewer has no file %s (it is at "
		                        "%s%s/)",
		                        r->url, r->cfg->v.prefix,
		                        r->route->path);
	r->headers[0][0] = "Content-Security-Policy";
	r->headers[0][1] = UI_CSP;
	return pp_respond(r, MHD_HTTP_OK, a->content_type, a->data, a->len,
	                  PP_BODY_STATIC);
}

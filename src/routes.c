/* The routing table: which paths exist and who answers them (request.c
 * runs a request through it), made once from the endpoints of no kind here
 * and every kind's endpoints (kinds.h).
 * Context: agent.
 */
#include "routes.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include "api/handlers.h"
#include "kinds.h"
#include "server/server.h"
#include "tree/tree.h"

#define GET_HEAD "GET, HEAD"

/* The endpoints of no kind, in the order the index lists them: these, the
 * kinds' (kinds.h, in table order), then those of post[]. */
static const struct pp_route pre[] = {
    {
        .path = "/",
        .name = "index",
        .quick = 1,
        .methods = GET_HEAD,
        .kind = PP_ROUTE_PAGE,
        .handler = pp_h_index,
        .link = "./",
        .help = "this page: every endpoint with a short description",
    },
    {
        .path = "/healthz",
        .name = "healthz",
        .quick = 1,
        .methods = GET_HEAD,
        .kind = PP_ROUTE_PROFILE,
        .handler = pp_h_healthz,
        .link = "healthz",
        .help = "liveness: \"ok\", served without the token",
        .open = 1,
    },
    {
        .path = "/status",
        .name = "status",
        .quick = 1,
        .methods = GET_HEAD,
        .kind = PP_ROUTE_JSON,
        .handler = pp_h_status,
        .link = "status",
        .help = "agent and process status as JSON: version, pid, uptime, "
                "configuration, request counters",
    },
    {
        .path = "/metrics",
        .name = "metrics",
        .quick = 1,
        .methods = GET_HEAD,
        .kind = PP_ROUTE_PROFILE,
        .handler = pp_h_metrics,
        .link = "metrics",
        .help = "the agent's own counters (requests, CPU samples and "
                "drops, handler time, heap estimates) and the process's "
                "CPU, memory, threads and descriptors, for Prometheus",
    },
    {
        .path = "/threads",
        .name = "threads",
        .quick = 1,
        .methods = GET_HEAD,
        .kind = PP_ROUTE_JSON,
        .handler = pp_h_threads,
        .link = "threads",
        .help = "the process's threads as JSON: tid, name, state, user and "
                "system CPU time",
    },
    {
        .path = "/cmdline",
        .name = "cmdline",
        .quick = 1,
        .methods = GET_HEAD,
        .kind = PP_ROUTE_PROFILE,
        .handler = pp_h_cmdline,
        .link = "cmdline",
        .help = "the command line of this process, arguments separated by "
                "NUL bytes (as Go's net/http/pprof)",
    },
    {
        .path = "/children",
        .name = "children",
        .quick = 1,
        .methods = GET_HEAD,
        .kind = PP_ROUTE_JSON,
        .handler = pp_h_children,
        .link = "children",
        .help = "the processes this address answers for as JSON "
                "(PULLPROF_FORK=follow: the forked children with their "
                "pids; ?pid=N on any endpoint asks one of them)",
    },
};

static const struct pp_route post[] = {
    {
        .path = "/record",
        .name = "record",
        .quick = 1,
        .methods = GET_HEAD,
        .kind = PP_ROUTE_JSON,
        .handler = pp_h_record,
        .link = "record",
        .help = "the record (PULLPROF_RECORD) as JSON: how far back it "
                "reaches, its memory and rate, the saved recordings; read "
                "it with ?last=N or ?start=&end= on /profile and /trace",
    },
    {
        .path = "/record/timeline",
        .name = "record_timeline",
        .methods = GET_HEAD,
        .kind = PP_ROUTE_JSON,
        .handler = pp_h_record_timeline,
        .link = "record",
        .help = "CPU by thread over time from the record, as JSON (?last=N "
                "or ?start=&end=, ?step=S, ?threads=N): the viewer's "
                "Recent view",
    },
    {
        .path = "/record/save",
        .name = "record_save",
        .quick = 1,
        .methods = "POST",
        .kind = PP_ROUTE_JSON,
        .handler = pp_h_record_save,
        .link = "record",
        .help = "POST ?reason=...&last=N: keep the record's last N seconds "
                "(default 60) aside under an id, read with ?recording=ID",
    },
    {
        .path = "/symbol",
        .name = "symbol",
        .methods = "GET, HEAD, POST",
        .kind = PP_ROUTE_PROFILE,
        .handler = pp_h_symbol,
        .link = "symbol",
        .help = "symbolize addresses for pprof: POST 0x1234+0x5678, answers "
                "one \"0x1234 function\" line per known address",
        .takes_body = 1,
    },
    {
        .path = "/ui",
        .name = "ui",
        .quick = 1,
        .methods = GET_HEAD,
        .kind = PP_ROUTE_PAGE,
        .handler = pp_h_ui,
        .link = "ui/",
        .help = "flame graph viewer: fetch any kind of profile and explore "
                "it in the browser (search, zoom, top functions, downloads); "
                "its Recent view shows the record: CPU by thread, a range's "
                "flame graph, two ranges' difference",
        .subtree = 1,
    },
    {
        .path = "/maps",
        .name = "maps",
        .methods = GET_HEAD,
        .kind = PP_ROUTE_JSON,
        .handler = pp_h_maps,
        .link = "maps",
        .help = "executable mappings as JSON: address range, offset, path, "
                "build ID, and the symbols found for each (dwarf, symtab, "
                "none; separate debug file; file deleted or replaced)",
    },
};
#define N(a) (sizeof a / sizeof a[0])

struct pp_route pp_routes[PP_MAX_ROUTES];
size_t pp_routes_count;
static size_t kind_routes;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void add(const struct pp_route *rt)
{
	if (pp_routes_count < PP_MAX_ROUTES)
		pp_routes[pp_routes_count] = *rt;
	pp_routes_count++;
}

/* A kind's endpoint as a route: answered by the one handler of every kind
 * (h_kind.c); a window's requests wait, a snapshot's are made at once on
 * the pipeline. */
static void add_endpoint(const struct pp_endpoint *e, void *arg)
{
	(void)arg;
	struct pp_route rt = {
	    .path = e->path,
	    .name = e->name,
	    .methods = GET_HEAD,
	    .kind = PP_ROUTE_PROFILE,
	    .handler = pp_h_kind,
	    .link = e->link,
	    .help = e->help,
	    .window = e->window,
	    .beside_go = e->beside_go,
	    .endpoint = e,
	};
	add(&rt);
	kind_routes++;
}

static void build(void)
{
	for (size_t i = 0; i < N(pre); i++)
		add(&pre[i]);
	pp_kinds_each_endpoint(add_endpoint, NULL);
	for (size_t i = 0; i < N(post); i++)
		add(&post[i]);
}

int pp_routes_build(char *err, size_t errlen)
{
	pthread_once(&once, build);
	if (pp_routes_count > PP_MAX_ROUTES) {
		snprintf(
		    err, errlen,
		    "%zu routes (%zu of them the kinds' endpoints) are more "
		    "than the server counts (PP_MAX_ROUTES, %d)",
		    pp_routes_count, kind_routes, PP_MAX_ROUTES);
		return -ENOSPC;
	}
	return 0;
}

/* The routing table: which paths exist and who answers them (request.c
 * runs a request through it).
 * Context: agent.
 */
#include "routes.h"

#include "handlers.h"
#include "server.h"
#include "tree.h"

#define GET_HEAD "GET, HEAD"
/* About 250k addresses of "0x7f0123456789+". */

/* Every endpoint, in the order the index lists them. */
const struct pp_route pp_routes[] = {
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
    {
        .path = "/profile",
        .name = "profile",
        .window = 30,
        .methods = GET_HEAD,
        .kind = PP_ROUTE_PROFILE,
        .handler = pp_h_profile,
        .link = "profile?seconds=30",
        .help = "CPU profile of the next seconds (default 30) sampled at hz "
                "(default 100), gzipped pprof: go tool pprof reads it",
    },
    {
        .path = "/trace",
        .name = "trace",
        .window = 1,
        .methods = GET_HEAD,
        .kind = PP_ROUTE_PROFILE,
        .handler = pp_h_trace,
        .link = "trace?seconds=5",
        .help = "a Perfetto trace of the next seconds (default 1, as Go's): "
                "every CPU sample at its time on its thread's track "
                "(wall=1 adds every thread's state, heap=1 a heap "
                "snapshot); opens in ui.perfetto.dev",
    },
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
        .path = "/heap",
        .name = "heap",
        .methods = GET_HEAD,
        .kind = PP_ROUTE_PROFILE,
        .handler = pp_h_heap,
        .link = "heap",
        .help = "sampled heap profile: memory in use and allocated so far, "
                "by stack (?seconds=N: the change over N seconds; "
                "?peak=1: what was live at the highest point)",
    },
    {
        .path = "/allocs",
        .name = "allocs",
        .methods = GET_HEAD,
        .kind = PP_ROUTE_PROFILE,
        .handler = pp_h_allocs,
        .link = "allocs",
        .help = "the heap profile with allocated space as its default view "
                "(same parameters as heap)",
    },
    {
        .path = "/goroutine",
        .name = "goroutine",
        .methods = GET_HEAD,
        .kind = PP_ROUTE_PROFILE,
        .handler = pp_h_goroutine,
        .link = "goroutine?debug=2",
        .help = "thread dump: every thread's stack now, read without "
                "stopping or signalling it (Go's path; each goroutine is a "
                "thread); debug=1 grouped, debug=2 a block per thread, "
                "seconds=N the change",
    },
    {
        .path = "/threadcreate",
        .name = "threadcreate",
        .methods = GET_HEAD,
        .kind = PP_ROUTE_PROFILE,
        .handler = pp_h_threadcreate,
        .link = "threadcreate?debug=1",
        .help = "the stacks that created threads since the agent started, "
                "a count each (Go's threadcreate); seconds=N the change",
    },
    {
        .path = "/mutex",
        .name = "mutex",
        .methods = GET_HEAD,
        .kind = PP_ROUTE_PROFILE,
        .handler = pp_h_mutex,
        .link = "mutex?debug=1",
        .help = "lock contention by the stacks that held the locks others "
                "waited for, weighted by the wait (Go's mutex profile; "
                "PULLPROF_MUTEX_RATE); seconds=N the change",
    },
    {
        .path = "/block",
        .name = "block",
        .methods = GET_HEAD,
        .kind = PP_ROUTE_PROFILE,
        .handler = pp_h_block,
        .link = "block?debug=1",
        .help = "where threads waited for locks, condition variables, "
                "semaphores and joins, weighted by the wait (Go's block "
                "profile; PULLPROF_BLOCK_RATE); seconds=N the change",
    },
    {
        .path = "/wall",
        .name = "wall",
        .window = 30,
        .methods = GET_HEAD,
        .kind = PP_ROUTE_PROFILE,
        .handler = pp_h_wall,
        .link = "wall?seconds=30",
        .help = "wall-clock profile of the next seconds (default 30) at hz "
                "(default 99): every thread, running or blocked, labelled "
                "with its state",
    },
    {
        .path = "/fgprof",
        .name = "fgprof",
        .window = 30,
        .methods = GET_HEAD,
        .kind = PP_ROUTE_PROFILE,
        .handler = pp_h_fgprof,
        .link = "fgprof?seconds=30",
        .help = "the wall-clock profile with fgprof's sample types; also at "
                "/debug/fgprof when the prefix is /debug/pprof",
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
const size_t pp_routes_count = sizeof pp_routes / sizeof pp_routes[0];

_Static_assert(sizeof pp_routes / sizeof pp_routes[0] <= PP_MAX_ROUTES,
               "raise PP_MAX_ROUTES");

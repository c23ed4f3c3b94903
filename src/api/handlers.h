/* One handler per endpoint of no kind, and one for every kind's endpoints;
 * the table in routes.c maps paths to them.
 * Context: agent.
 */
#ifndef PP_HANDLERS_H
#define PP_HANDLERS_H

#include "server/request.h"

enum MHD_Result pp_h_index(struct pp_request *r);
enum MHD_Result pp_h_status(struct pp_request *r);
enum MHD_Result pp_h_record(struct pp_request *r);
enum MHD_Result pp_h_record_save(struct pp_request *r);
enum MHD_Result pp_h_record_timeline(struct pp_request *r);
enum MHD_Result pp_h_healthz(struct pp_request *r);
enum MHD_Result pp_h_cmdline(struct pp_request *r);
enum MHD_Result pp_h_threads(struct pp_request *r);
enum MHD_Result pp_h_symbol(struct pp_request *r);
enum MHD_Result pp_h_maps(struct pp_request *r);
enum MHD_Result pp_h_ui(struct pp_request *r);
/* Every kind's endpoints (r->route->endpoint). */
enum MHD_Result pp_h_kind(struct pp_request *r);
enum MHD_Result pp_h_metrics(struct pp_request *r);

#endif

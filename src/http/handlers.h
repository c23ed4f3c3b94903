/* One handler per endpoint family; the table in routes.c maps paths to them.
 * Context: agent.
 */
#ifndef PP_HANDLERS_H
#define PP_HANDLERS_H

#include "routes.h"

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
enum MHD_Result pp_h_children(struct pp_request *r);
enum MHD_Result pp_h_profile(struct pp_request *r);
enum MHD_Result pp_h_trace(struct pp_request *r);
enum MHD_Result pp_h_goroutine(struct pp_request *r);
enum MHD_Result pp_h_wall(struct pp_request *r);
enum MHD_Result pp_h_threadcreate(struct pp_request *r);
enum MHD_Result pp_h_mutex(struct pp_request *r);
enum MHD_Result pp_h_block(struct pp_request *r);
enum MHD_Result pp_h_fgprof(struct pp_request *r);
enum MHD_Result pp_h_heap(struct pp_request *r);
enum MHD_Result pp_h_allocs(struct pp_request *r);
enum MHD_Result pp_h_ui(struct pp_request *r);
enum MHD_Result pp_h_metrics(struct pp_request *r);

#endif

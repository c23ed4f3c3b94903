/*
 * A CPU sample into a profile model: its synthetic frames, its labels,
 * and the notes a CPU profile carries. Used by the windows (collector.c)
 * and the record's reads (record/read.c).
 * Context: agent.
 */
#ifndef PP_CPU_MODEL_H
#define PP_CPU_MODEL_H

#include <stddef.h>
#include <stdint.h>

struct pp_profile;

/* A CPU timeline's bound when profiles have none: 32 MiB of events. */
#define PP_CPU_TIMELINE_DEFAULT_BYTES (64u << 20)

/* One sample into a CPU model as every reader of samples adds it (a
 * window, the record): the synthetic frames for a stack not captured or
 * truncated and for a thread's last CPU (flags: PP_REC_*), the values
 * samples/count and cpu/nanoseconds, the thread_id, thread_name and the
 * label set's labels, on the timeline at time_ns. 0 or -ENOMEM. */
int pp_cpu_model_add(struct pp_profile *p, const uintptr_t *stack, size_t depth,
                     unsigned flags, uint32_t weight, uint32_t period_ns,
                     uint32_t tid, const char *name, uint32_t label_set,
                     uint64_t time_ns);
/* The notes of a finished CPU model: samples past the size limit,
 * dlcloses not recorded, a rate that changed over it. */
void pp_cpu_model_notes(struct pp_profile *p, uint32_t min_period,
                        uint32_t max_period);

#endif

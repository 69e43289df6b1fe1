/* plan.h - the memory plan of a lowered graph (docs/format.md §9): every run-time buffer a byte
 * offset in one arena, alias-aware (views and in-place results share their owner's storage),
 * checked by graph validation (vl_graph_parse refuses an unsafe plan) and honoured by the
 * interpreter. */
#ifndef VIEWLOWER_PLAN_H
#define VIEWLOWER_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "viewlower/export.h"
#include "viewlower/graph.h"
#include "viewlower/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vl_plan_report {
  bool present;
  int64_t arena_bytes;       /* the plan's arena */
  int64_t lower_bound_bytes; /* the largest sum of sizes live at one position */
  int64_t naive_bytes;       /* the sum of every planned size (one buffer each) */
  uint32_t planned;          /* storages planned */
  int64_t alignment;
} vl_plan_report;

/* Plans g in place: sets g's plan and every planned owner's mem_offset (dropping any earlier
 * plan), and fills out. alignment is a power of two from 1 to VL_PLAN_MAX_ALIGNMENT. */
VL_API vl_status vl_plan(vl_graph *g, int64_t alignment, vl_plan_report *out, vl_error *err);
/* The figures of g's own plan (g->has_plan), as vl_plan would report them. */
VL_API vl_status vl_plan_figures(const vl_graph *g, vl_plan_report *out, vl_error *err);
/* Removes g's plan and every mem_offset. */
VL_API void vl_plan_drop(vl_graph *g);

#ifdef __cplusplus
}
#endif
#endif

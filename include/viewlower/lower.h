/* lower.h - the view_copy -> memory.view lowering (docs/format.md §3), the layout algebra that
 * folds chains of every layout-only op (option fold), and the report. */
#ifndef VIEWLOWER_LOWER_H
#define VIEWLOWER_LOWER_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "viewlower/export.h"
#include "viewlower/graph.h"
#include "viewlower/plan.h"
#include "viewlower/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { VL_POLICY_SAFE, VL_POLICY_LEGACY } vl_policy;

/* Lowering options (docs/format.md §3, "Options", and §9 for the plan). */
typedef struct vl_lower_options {
  bool remove_view_copy; /* default true */
  vl_policy policy;      /* default VL_POLICY_SAFE */
  bool fold;             /* default true: the layout algebra (safe policy); false: view_copy only */
  bool param_layouts;    /* default true: stored layouts of parameters (with fold) */
  bool plan;             /* default false: the memory plan of the lowered graph */
  int64_t plan_alignment; /* default 16: a power of two >= 1 */
} vl_lower_options;

/* Reason codes in the order of the reasons table of docs/format.md §3. X(enum, name) */
#define VL_REASON_MAP(X)                                                                           \
  X(VL_REASON_DISABLED, "disabled")                                                                \
  X(VL_REASON_FEEDS_OUTPUT, "feeds_output")                                                        \
  X(VL_REASON_BASE_LAYOUT, "base_layout")                                                          \
  X(VL_REASON_VIEW_LAYOUT, "view_layout")                                                          \
  X(VL_REASON_REORDERS, "reorders")                                                                \
  X(VL_REASON_VIEW_MUTATED, "view_mutated")                                                        \
  X(VL_REASON_BASE_MUTATED, "base_mutated")                                                        \
  X(VL_REASON_BASE_MUTABLE_INPUT, "base_mutable_input")                                            \
  X(VL_REASON_BASE_FEEDS_OUTPUT, "base_feeds_output")                                              \
  X(VL_REASON_DYNAMIC_SHAPE, "dynamic_shape")

typedef enum {
#define VL__REASON_ENUM(e, name) e,
  VL_REASON_MAP(VL__REASON_ENUM)
#undef VL__REASON_ENUM
      VL_REASON_COUNT
} vl_reason;

VL_API const char *vl_reason_name(vl_reason r);

/* One decision; its four strings share one allocation owned by the report (vl_report_clear). */
typedef struct vl_decision {
  char *node;   /* node name */
  char *target; /* the node's target in the input graph */
  char *base;   /* base name after normalization; with fold, the root the node was judged on */
  bool replaced;
  bool merged;    /* fold: rewritten to aten.as_strided_copy.default of base */
  int64_t offset; /* replaced or merged: element offset into base's buffer */
  uint32_t reasons; /* bit (1u << vl_reason) per failed condition */
  char *message;    /* one line for people */
} vl_decision;

/* Why a parameter or constant keeps its layout (docs/format.md §3, params_not_relaid), in this
 * order. X(enum, name): the first five are the placeholder's own; the last three are a user's. */
#define VL_PARAM_RULE_MAP(X)                                                                       \
  X(VL_PARAM_MUTATED, "mutated")                                                                   \
  X(VL_PARAM_DYNAMIC, "dynamic")                                                                   \
  X(VL_PARAM_ONE_ELEMENT, "single_element")                                                        \
  X(VL_PARAM_FEEDS_OUTPUT, "feeds_output")                                                         \
  X(VL_PARAM_WRITTEN, "written")                                                                   \
  X(VL_PARAM_READ_BY_OP, "read_by_op")                                                             \
  X(VL_PARAM_READS_BUFFER, "reads_buffer")                                                         \
  X(VL_PARAM_NOT_INPUT, "not_input")

typedef enum {
#define VL__PARAM_RULE_ENUM(e, name) e,
  VL_PARAM_RULE_MAP(VL__PARAM_RULE_ENUM)
#undef VL__PARAM_RULE_ENUM
      VL_PARAM_RULE_COUNT
} vl_param_rule;

VL_API const char *vl_param_rule_name(vl_param_rule r);

/* A relaid parameter (report "param_layouts"). */
typedef struct vl_param_layout {
  char *node;
  uint8_t rank;
  uint8_t dim_order[VL_MAX_RANK]; /* the declared order now */
  uint8_t was[VL_MAX_RANK];       /* the order of the input graph */
  int64_t nbytes;
  uint32_t aliased; /* users that no longer copy */
} vl_param_layout;

/* A user that makes a parameter ineligible. */
typedef struct vl_param_blocker {
  char *node;
  vl_param_rule rule;
} vl_param_blocker;

/* A parameter or constant that is not eligible although a layout-only reader of it still
 * copies (report "params_not_relaid"): the placeholder's own rules and every blocking user. */
typedef struct vl_param_kept {
  char *node;
  uint32_t rules; /* bit (1u << vl_param_rule) per placeholder rule that fails */
  vl_param_blocker *blockers;
  uint32_t n_blockers;
  char *message; /* one line for people */
} vl_param_kept;

typedef struct vl_report {
  uint32_t view_copy_nodes;
  uint32_t replaced;
  uint32_t kept;
  uint32_t normalized;
  uint32_t removed_dead;
  int64_t bytes_saved;
  uint32_t layout_copy_nodes; /* layout-only nodes of the input (view_copy_nodes without fold) */
  uint32_t merged;
  int64_t bytes_copied; /* nbytes of the layout-only nodes that still copy */
  vl_decision *decisions;
  uint32_t n_decisions;
  bool params_ran; /* the parameter layouts ran: the keys below are reported */
  uint32_t params_relaid;
  vl_param_layout *param_layouts; /* params_relaid entries, in graph order */
  vl_param_kept *params_kept;
  uint32_t n_params_kept;
  vl_plan_report plan;
} vl_report;

VL_API void vl_lower_options_default(vl_lower_options *o);
/* Options from JSON {"remove_view_copy": bool, "policy": "safe"|"legacy", "fold": bool,
 * "param_layouts": bool, "plan": bool, "plan_alignment": N}; opts may be NULL, and a member
 * given as null keeps its default, as an absent one does. */
VL_API vl_status vl_lower_options_from_json(const cJSON *opts, vl_lower_options *out,
                                            vl_error *err);

/* Lowers g in place and fills report (caller releases it with vl_report_clear). */
VL_API vl_status vl_lower(vl_graph *g, const vl_lower_options *opts, vl_report *report,
                          vl_error *err);
VL_API void vl_report_clear(vl_report *r);
/* The report as JSON (docs/format.md §3); caller frees with cJSON_Delete. */
VL_API cJSON *vl_report_to_json(const vl_report *r);

#ifdef __cplusplus
}
#endif
#endif

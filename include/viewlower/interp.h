/* interp.h - the graph interpreter with real aliasing, and verify (docs/kernels.md). */
#ifndef VIEWLOWER_INTERP_H
#define VIEWLOWER_INTERP_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "viewlower/export.h"
#include "viewlower/graph.h"
#include "viewlower/lower.h"
#include "viewlower/status.h"
#include "viewlower/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs g on inputs (a value for every placeholder; an input's dim order may differ from its
 * placeholder's and is converted). Every tensor gets its own buffer in its declared layout,
 * except memory.view, which aliases its base's buffer. On success *outputs holds one tensor per
 * output arg, named after the output's node, in the node's declared layout; caller frees it
 * with vl_tensor_map_free. Unknown targets: VL_ERR_UNSUPPORTED naming the target, path
 * "/nodes/<i>/target". Missing input: VL_ERR_INVALID_PARAMS with path "/<name>". */
VL_API vl_status vl_interp_run(const vl_graph *g, const vl_tensor_map *inputs,
                               const vl_limits *lim, vl_tensor_map **outputs, vl_error *err);

/* Fills in a value for each placeholder absent from given (may be NULL) from seed: distinct,
 * exactly representable values in the placeholder's dtype and layout. *out holds a value for
 * every placeholder, in graph order (a copy of the given one where there is one). A name in
 * given that no placeholder has is VL_ERR_INVALID_PARAMS at "/<name>" (vl_interp_run too).
 * Caller frees *out with vl_tensor_map_free. */
VL_API vl_status vl_inputs_generate(const vl_graph *g, const vl_tensor_map *given, uint64_t seed,
                                    const vl_limits *lim, vl_tensor_map **out, vl_error *err);

typedef struct vl_mismatch {
  uint32_t output;      /* index into the output list */
  char *name;           /* output node name */
  int64_t index;        /* first differing flat logical index */
  vl_dtype dtype;
  uint8_t expected[8];  /* element bytes, original graph */
  uint8_t actual[8];    /* element bytes, lowered graph */
} vl_mismatch;

typedef struct vl_verify_result {
  bool equal;
  vl_report report;
  vl_mismatch *mismatches;
  uint32_t n_mismatches;
} vl_verify_result;

/* Lowers a copy of g with opts, runs both on the same inputs (given and/or from seed) and
 * compares outputs bit for bit in logical order. */
VL_API vl_status vl_verify(const vl_graph *g, const vl_lower_options *opts,
                           const vl_tensor_map *inputs, uint64_t seed, const vl_limits *lim,
                           vl_verify_result *out, vl_error *err);
VL_API void vl_verify_result_clear(vl_verify_result *r);
/* {"equal","report","mismatches":[{"output","name","index","expected","actual"}]} */
VL_API cJSON *vl_verify_result_to_json(const vl_verify_result *r);

#ifdef __cplusplus
}
#endif
#endif

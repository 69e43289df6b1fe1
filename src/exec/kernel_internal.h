/* kernel_internal.h - helpers shared by the copy engine, the interpreter, input generation and
 * verify (copy.c, interp.c, inputs.c, verify.c), and service.c's view_copy. Not part of the
 * public API. */
#ifndef VIEWLOWER_KERNEL_INTERNAL_H
#define VIEWLOWER_KERNEL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "layout/tensor_internal.h"
#include "viewlower/graph.h"
#include "viewlower/status.h"
#include "viewlower/tensor.h"

/* The spec of vl_view_copy's output (its checks and errors, without allocating or copying). */
vl_status vl__view_copy_spec(const vl_tensor *self, const int64_t *size, size_t size_rank,
                             const uint8_t *out_dim_order, vl_spec *spec, vl_error *err);

/* Index of the placeholder named name, or VL_NO_NODE. */
uint32_t vl__graph_placeholder(const vl_graph *g, const char *name);
/* Every name in inputs (may be NULL) is a placeholder's; else VL_ERR_INVALID_PARAMS at "/<name>".
 */
vl_status vl__inputs_check_names(const vl_graph *g, const vl_tensor_map *inputs, vl_error *err);

/* An empty map; caller frees with vl_tensor_map_free. */
vl_status vl__tensor_map_new(vl_tensor_map **out, vl_error *err);
/* Appends a zero-filled tensor of spec (checked against lim) named name: m->tensors[m->count-1]. */
vl_status vl__tensor_map_add(vl_tensor_map *m, const char *name, const vl_spec *spec,
                             const vl_limits *lim, vl_error *err);

#endif

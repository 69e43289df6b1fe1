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

/* Every name in inputs (may be NULL) is a placeholder's; else VL_ERR_INVALID_PARAMS at "/<name>"
 * (the first such name in map order). O(n log n): names are sorted, not scanned per input. */
vl_status vl__inputs_check_names(const vl_graph *g, const vl_tensor_map *inputs, vl_error *err);
/* *out (n_nodes entries, caller frees) gets, for each placeholder of g, the index of its value in
 * inputs (may be NULL), and -1 for a placeholder without one and for every other node: one sort
 * of the names and a binary search per placeholder, where a find per placeholder was quadratic
 * (80,000 placeholders took 40 s to execute). */
vl_status vl__inputs_index(const vl_graph *g, const vl_tensor_map *inputs, long **out,
                           vl_error *err);

/* An empty map; caller frees with vl_tensor_map_free. */
vl_status vl__tensor_map_new(vl_tensor_map **out, vl_error *err);
/* Appends a zero-filled tensor of spec (checked against lim) named name: m->tensors[m->count-1].
 * m must come from vl__tensor_map_new and grow only through this function (its arrays grow by
 * doubling, their capacity the power of two at or above count). */
vl_status vl__tensor_map_add(vl_tensor_map *m, const char *name, const vl_spec *spec,
                             const vl_limits *lim, vl_error *err);

#endif

/* tensor.h - tensor specs (dtype + shape + dim order), limits, and owned tensors.
 *
 * A spec's dim_order lists dims from outermost to innermost in memory; strides are derived
 * from it (docs/format.md §1, viewlower/layout.h). Tensor data is always held in physical order.
 * Element types are in viewlower/dtype.h. */
#ifndef VIEWLOWER_TENSOR_H
#define VIEWLOWER_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "viewlower/dtype.h"
#include "viewlower/export.h"
#include "viewlower/status.h"

#ifdef __cplusplus
extern "C" {
#endif


/* Resource limits, each checked before allocating. vl_limits_default fills the defaults. */
typedef struct vl_limits {
  uint32_t max_nodes;       /* nodes per graph (default 1,000,000) */
  int64_t max_tensor_bytes; /* bytes of one tensor (default 1 GiB) */
  int64_t max_total_bytes;  /* bytes of the buffers one execution holds at once, its inputs
                               for the whole run (default 4 GiB) */
  uint32_t max_name_len;    /* node name bytes (default 4096) */
  int64_t max_json_values;  /* elements of one tensor written as JSON "values" (default 2^24);
                               larger outputs must ask for base64 or blob */
} vl_limits;

VL_API void vl_limits_default(vl_limits *lim);

/* Dim orders (outermost dim first): the default order 0..rank-1; the channels-last order of
 * rank 4/5 ([0,2,3,1], [0,2,3,4,1]; false for other ranks); is order a permutation of 0..rank-1? */
VL_API void vl_dim_order_default(uint8_t *order, uint8_t rank);
VL_API bool vl_dim_order_channels_last(uint8_t *order, uint8_t rank);
VL_API bool vl_dim_order_is_permutation(const uint8_t *order, size_t rank);

typedef struct vl_spec {
  vl_dtype dtype;
  uint8_t rank;
  bool dynamic;
  int64_t shape[VL_MAX_RANK];
  uint8_t dim_order[VL_MAX_RANK];
} vl_spec;

/* A spec of the given shape in the default (contiguous) dim order. rank must be <= VL_MAX_RANK. */
VL_API void vl_spec_init(vl_spec *s, vl_dtype dt, uint8_t rank, const int64_t *shape);
/* Checks rank, sizes >= 0, dim order is a permutation, and that nbytes fits in 63 bits.
 * err->path is relative to the spec ("/shape/2", "/dim_order"). */
VL_API vl_status vl_spec_check(const vl_spec *s, vl_error *err);
/* false when the product overflows int64 (then *out is untouched). */
VL_API bool vl_spec_numel(const vl_spec *s, int64_t *out);
VL_API bool vl_spec_nbytes(const vl_spec *s, int64_t *out);
VL_API bool vl_spec_equal(const vl_spec *a, const vl_spec *b);

/* Resolves a view size argument against a numel (view_copy in docs/protocol.md, "Methods"): at most
 * one -1, no other negative, -1 with a zero elsewhere is an error, the inferred size must divide,
 * numels must match. On success writes rank sizes to shape. Errors are VL_ERR_KERNEL with path ""
 * (caller prefixes).
 */
VL_API vl_status vl_view_size_infer(int64_t numel, const int64_t *size, size_t rank, int64_t *shape,
                                    vl_error *err);

/* An owned tensor: spec plus data in physical order (nbytes bytes, malloc'd). */
typedef struct vl_tensor {
  vl_spec spec;
  int64_t nbytes;
  void *data;
} vl_tensor;

/* Allocates a zero-filled tensor of spec (checked against lim->max_tensor_bytes: VL_ERR_TOO_LARGE).
 * Its data is released by free() and starts on a 64-byte boundary. Caller frees with
 * vl_tensor_free. */
VL_API vl_status vl_tensor_new(const vl_spec *spec, const vl_limits *lim, vl_tensor **out,
                               vl_error *err);
VL_API void vl_tensor_free(vl_tensor *t);

/* Named tensors (e.g. execution inputs). The map owns its names and tensors. */
typedef struct vl_tensor_map {
  size_t count;
  char **names;
  vl_tensor **tensors;
} vl_tensor_map;

VL_API void vl_tensor_map_free(vl_tensor_map *m);
/* Index of name, or -1. */
VL_API long vl_tensor_map_find(const vl_tensor_map *m, const char *name);

#ifdef __cplusplus
}
#endif
#endif

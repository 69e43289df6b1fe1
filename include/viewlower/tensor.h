/* tensor.h - dtypes, tensor specs (shape + dim order), layouts, and owned tensors.
 *
 * A spec's dim_order lists dims from outermost to innermost in memory; strides are derived
 * from it (SPEC §1). Tensor data is always held in physical order. */
#ifndef VIEWLOWER_TENSOR_H
#define VIEWLOWER_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "viewlower/export.h"
#include "viewlower/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VL_MAX_RANK 16
/* Largest size of one dim: 2^53, the largest integer JSON carries exactly. An empty tensor
 * could otherwise have a dim no JSON document can state back. */
#define VL_MAX_DIM_SIZE ((int64_t)1 << 53)

/* X(enum, name, element size) */
#define VL_DTYPE_MAP(X)                                                                            \
  X(VL_DTYPE_UINT8, "uint8", 1)                                                                    \
  X(VL_DTYPE_INT8, "int8", 1)                                                                      \
  X(VL_DTYPE_INT16, "int16", 2)                                                                    \
  X(VL_DTYPE_INT32, "int32", 4)                                                                    \
  X(VL_DTYPE_INT64, "int64", 8)                                                                    \
  X(VL_DTYPE_FLOAT16, "float16", 2)                                                                \
  X(VL_DTYPE_BFLOAT16, "bfloat16", 2)                                                              \
  X(VL_DTYPE_FLOAT32, "float32", 4)                                                                \
  X(VL_DTYPE_FLOAT64, "float64", 8)                                                                \
  X(VL_DTYPE_BOOL, "bool", 1)

typedef enum {
#define VL__DTYPE_ENUM(e, name, size) e,
  VL_DTYPE_MAP(VL__DTYPE_ENUM)
#undef VL__DTYPE_ENUM
      VL_DTYPE_COUNT
} vl_dtype;

/* Resource limits, each checked before allocating. vl_limits_default fills the defaults. */
typedef struct vl_limits {
  uint32_t max_nodes;       /* nodes per graph (default 1,000,000) */
  int64_t max_tensor_bytes; /* bytes of one tensor (default 1 GiB) */
  int64_t max_total_bytes;  /* bytes of all buffers of one execution (default 4 GiB) */
  uint32_t max_name_len;    /* node name bytes (default 4096) */
  int64_t max_json_values;  /* elements of one tensor written as JSON "values" (default 2^24);
                               larger outputs must ask for base64 or blob */
} vl_limits;

VL_API void vl_limits_default(vl_limits *lim);

typedef struct vl_spec {
  vl_dtype dtype;
  uint8_t rank;
  bool dynamic;
  int64_t shape[VL_MAX_RANK];
  uint8_t dim_order[VL_MAX_RANK];
} vl_spec;

VL_API const char *vl_dtype_name(vl_dtype dt);
VL_API bool vl_dtype_from_name(const char *name, vl_dtype *out);
VL_API size_t vl_dtype_size(vl_dtype dt);

/* A spec of the given shape in the default (contiguous) dim order. rank must be <= VL_MAX_RANK. */
VL_API void vl_spec_init(vl_spec *s, vl_dtype dt, uint8_t rank, const int64_t *shape);
/* Checks rank, sizes >= 0, dim order is a permutation, and that nbytes fits in 63 bits.
 * err->path is relative to the spec ("/shape/2", "/dim_order"). */
VL_API vl_status vl_spec_check(const vl_spec *s, vl_error *err);
VL_API bool vl_dim_order_is_permutation(const uint8_t *order, size_t rank);
/* false when the product overflows int64 (then *out is untouched). */
VL_API bool vl_spec_numel(const vl_spec *s, int64_t *out);
VL_API bool vl_spec_nbytes(const vl_spec *s, int64_t *out);
VL_API bool vl_spec_equal(const vl_spec *a, const vl_spec *b);

/* Element strides from the spec's dim order (a size of 0 counts as 1). */
VL_API void vl_layout_strides(const vl_spec *s, int64_t strides[VL_MAX_RANK]);
/* Default strides of a shape (row-major). */
VL_API void vl_layout_default_strides(uint8_t rank, const int64_t *shape, int64_t *strides);
/* Canonical dim order for given element strides (SPEC §1); VL_ERR_INVALID_TENSOR when not dense. */
VL_API vl_status vl_layout_dim_order_from_strides(uint8_t rank, const int64_t *shape,
                                                  const int64_t *strides, uint8_t *order,
                                                  vl_error *err);
VL_API bool vl_layout_is_default_order(const vl_spec *s);
/* dim order [0,2,3,1] (rank 4) or [0,2,3,4,1] (rank 5). */
VL_API bool vl_layout_is_channels_last(const vl_spec *s);
/* Physically contiguous: every dim of size > 1 has its default stride; <= 1 element always. */
VL_API bool vl_layout_is_contiguous(const vl_spec *s);
VL_API void vl_dim_order_default(uint8_t *order, uint8_t rank);
/* The channels-last order for rank 4/5 into order; false for other ranks. */
VL_API bool vl_dim_order_channels_last(uint8_t *order, uint8_t rank);

/* Resolves a view size argument against a numel (SPEC §4): at most one -1, no other negative,
 * -1 with a zero elsewhere is an error, the inferred size must divide, numels must match.
 * On success writes rank sizes to shape. Errors are VL_ERR_KERNEL with path "" (caller prefixes).
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
 * Caller frees with vl_tensor_free. */
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

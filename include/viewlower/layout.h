/* layout.h - the layout algebra (SPEC §1, §3): dim orders, strides, contiguity, PyTorch's view
 * stride rule and the exact layout test. Pure functions over specs; nothing allocates.
 * Passes and kernels call these; no other module computes strides or contiguity itself. */
#ifndef VIEWLOWER_LAYOUT_H
#define VIEWLOWER_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "viewlower/export.h"
#include "viewlower/status.h"
#include "viewlower/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

VL_API bool vl_dim_order_is_permutation(const uint8_t *order, size_t rank);
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

/* Contiguity as the layout rule of SPEC §3 judges it: physical for static specs, the dim order
 * alone for dynamic ones (their sizes may change). */
VL_API bool vl_layout_rule_contiguous(const vl_spec *s);

/* PyTorch's view stride rule: the strides a tensor (shape, strides) would have as a strided alias
 * of shape out_shape, into out_strides; false when no such alias exists (a reshape may only split
 * a dim, or merge dims adjacent and nested in memory). Both numels must be equal and > 1. */
VL_API bool vl_layout_view_strides(uint8_t rank, const int64_t *shape, const int64_t *strides,
                                   uint8_t out_rank, const int64_t *out_shape,
                                   int64_t *out_strides);

/* The exact layout test of SPEC §3: may `view` (shape + declared dim order) alias `base`'s
 * storage? True iff every logical element of view sits at the same memory offset as the base's
 * element of the same logical index. Dynamic specs pass only with both dim orders default. */
VL_API bool vl_layout_view_keeps_offsets(const vl_spec *base, const vl_spec *view);

#ifdef __cplusplus
}
#endif
#endif

/* copy.h - the layout-aware copy engine and the portable view_copy kernel (SPEC §4). */
#ifndef VIEWLOWER_COPY_H
#define VIEWLOWER_COPY_H

#include <stddef.h>
#include <stdint.h>

#include "viewlower/export.h"
#include "viewlower/status.h"
#include "viewlower/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Strided copy over one iteration shape: dst[i * dst_strides] = src[i * src_strides] for every
 * index i of shape. Strides are in elements (may be any non-negative values that stay inside
 * the buffers). Merges dims, moves contiguous runs with memcpy and transposes in tiles. */
VL_API void vl_copy_strided(size_t elem_size, size_t rank, const int64_t *shape, void *dst,
                            const int64_t *dst_strides, const void *src,
                            const int64_t *src_strides);

/* Logical-order copy: element k of dst (row-major over dst_spec's shape) = element k of src.
 * Both buffers are in their spec's physical layout. dtype and numel must match (VL_ERR_KERNEL). */
VL_API vl_status vl_copy_logical(const vl_spec *dst_spec, void *dst, const vl_spec *src_spec,
                                 const void *src, vl_error *err);

/* Permuted copy: dst logical index (i_0..i_r) = src logical index with dim perm[d] of src at
 * position d of dst (PyTorch permute). dst_spec's shape must be the permuted src shape. */
VL_API vl_status vl_copy_permute(const vl_spec *dst_spec, void *dst, const vl_spec *src_spec,
                                 const void *src, const int64_t *perm, vl_error *err);

/* view_copy(self, size) -> out, laid out with out_dim_order (NULL: default). Every check of
 * SPEC §4; errors are VL_ERR_KERNEL (VL_ERR_TOO_LARGE over lim). Caller frees *out. */
VL_API vl_status vl_view_copy(const vl_tensor *self, const int64_t *size, size_t size_rank,
                              const uint8_t *out_dim_order, const vl_limits *lim, vl_tensor **out,
                              vl_error *err);

/* view_copy(self, size, out=out): the out variant. out is caller-owned and must have self's
 * dtype and exactly the shape size resolves to (VL_ERR_KERNEL otherwise); its dim order is kept. */
VL_API vl_status vl_view_copy_out(const vl_tensor *self, const int64_t *size, size_t size_rank,
                                  vl_tensor *out, vl_error *err);

#ifdef __cplusplus
}
#endif
#endif

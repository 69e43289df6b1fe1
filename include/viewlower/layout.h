/* layout.h - the layout algebra (docs/format.md §1, §3): dim orders, strides, contiguity, PyTorch's
 * view stride rule and the exact layout test. Pure functions over specs; nothing allocates. Passes
 * and kernels call these; no other module computes strides or contiguity itself. */
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

/* Element strides from the spec's dim order (a size of 0 counts as 1). */
VL_API void vl_layout_strides(const vl_spec *s, int64_t strides[VL_MAX_RANK]);
/* Default strides of a shape (row-major). */
VL_API void vl_layout_default_strides(uint8_t rank, const int64_t *shape, int64_t *strides);
/* Canonical dim order for given element strides (docs/format.md §1); VL_ERR_INVALID_TENSOR when not
 * dense. */
VL_API vl_status vl_layout_dim_order_from_strides(uint8_t rank, const int64_t *shape,
                                                  const int64_t *strides, uint8_t *order,
                                                  vl_error *err);
VL_API bool vl_layout_is_default_order(const vl_spec *s);
/* dim order [0,2,3,1] (rank 4) or [0,2,3,4,1] (rank 5). */
VL_API bool vl_layout_is_channels_last(const vl_spec *s);
/* Physically contiguous: every dim of size > 1 has its default stride; <= 1 element always. */
VL_API bool vl_layout_is_contiguous(const vl_spec *s);

/* Contiguity as the layout rule of docs/format.md §3 judges it: physical for static specs, the dim
 * order alone for dynamic ones (their sizes may change). */
VL_API bool vl_layout_rule_contiguous(const vl_spec *s);

/* PyTorch's view stride rule: the strides a tensor (shape, strides) would have as a strided alias
 * of shape out_shape, into out_strides; false when no such alias exists (a reshape may only split
 * a dim, or merge dims adjacent and nested in memory). Both numels must be equal and > 1. */
VL_API bool vl_layout_view_strides(uint8_t rank, const int64_t *shape, const int64_t *strides,
                                   uint8_t out_rank, const int64_t *out_shape,
                                   int64_t *out_strides);

/* The exact layout test (docs/format.md §3): may `view` (shape + declared dim order) alias `base`'s
 * storage? True iff every logical element of view sits at the same memory offset as the base's
 * element of the same logical index. Dynamic specs pass only with both dim orders default. */
VL_API bool vl_layout_view_keeps_offsets(const vl_spec *base, const vl_spec *view);


/* ---- descriptors (docs/format.md §3, "Layout-only nodes") ----------------------------------
 * A descriptor says where a tensor's elements sit in some buffer: element i (a logical
 * multi-index of shape) is at element offset + sum_d i_d * strides[d]. Each layout-only op has
 * one map below, turning the descriptor of its input into its own exactly as PyTorch's view op
 * of the same name turns (sizes, strides, storage_offset); a map returns false (and leaves *out
 * untouched) exactly where PyTorch's op raises: no strided alias exists (reshape), or an argument
 * is out of range. Dims may be negative (wrapped as PyTorch wraps them). in and out may alias. */
typedef struct vl_desc {
  uint8_t rank;
  int64_t offset;
  int64_t shape[VL_MAX_RANK];
  int64_t strides[VL_MAX_RANK];
} vl_desc;

/* The descriptor of a spec's own buffer at an element offset: its shape and dim-order strides. */
VL_API void vl_desc_of_spec(const vl_spec *s, int64_t offset, vl_desc *out);
/* view / reshape to shape (sizes >= 0, numel equal; no -1): PyTorch's view stride rule. */
VL_API bool vl_desc_reshape(const vl_desc *in, uint8_t rank, const int64_t *shape, vl_desc *out);
/* permute(dims): a permutation of the dims (n == rank). */
VL_API bool vl_desc_permute(const vl_desc *in, const int64_t *dims, size_t n, vl_desc *out);
VL_API bool vl_desc_transpose(const vl_desc *in, int64_t dim0, int64_t dim1, vl_desc *out);
/* t(): rank <= 1 is the identity, rank 2 swaps, rank > 2 fails. */
VL_API bool vl_desc_t(const vl_desc *in, vl_desc *out);
/* squeeze(): every size-1 dim dropped (dims NULL); squeeze(dim) / squeeze(dims): those of the
 * listed dims that have size 1 (a dim listed twice fails). */
VL_API bool vl_desc_squeeze(const vl_desc *in, const int64_t *dims, size_t n, vl_desc *out);
VL_API bool vl_desc_unsqueeze(const vl_desc *in, int64_t dim, vl_desc *out);
/* slice(dim, start, end, step): start/end NULL for None; clamped as PyTorch clamps (negative
 * values wrap, values past the end, INT64_MAX among them, mean the end); step >= 1. */
VL_API bool vl_desc_slice(const vl_desc *in, int64_t dim, const int64_t *start,
                          const int64_t *end, int64_t step, vl_desc *out);
/* select(dim, index): index in [-size, size), the dim dropped. */
VL_API bool vl_desc_select(const vl_desc *in, int64_t dim, int64_t index, vl_desc *out);
VL_API bool vl_desc_identity(const vl_desc *in, vl_desc *out);
/* as_strided(size, stride, storage_offset) read from in's buffer position: offset becomes
 * in->offset + storage_offset (sizes, strides and storage_offset >= 0). */
VL_API bool vl_desc_as_strided(const vl_desc *in, uint8_t rank, const int64_t *size,
                               const int64_t *stride, int64_t storage_offset, vl_desc *out);
/* The layout test of the layout algebra (docs/format.md §3): d has spec's shape, and d's strides
 * equal the strides of spec's dim order on every dim of size > 1 (a spec of at most one element
 * always passes). */
VL_API bool vl_desc_matches_spec(const vl_desc *d, const vl_spec *spec);
/* The largest element offset d reads (offset when d has no element), false on overflow. */
VL_API bool vl_desc_extent(const vl_desc *d, int64_t *last, bool *empty);

#ifdef __cplusplus
}
#endif
#endif

/* copy.h - the layout-aware copy engine and the portable view_copy kernel (docs/kernels.md). */
#ifndef VIEWLOWER_COPY_H
#define VIEWLOWER_COPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "viewlower/export.h"
#include "viewlower/status.h"
#include "viewlower/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Kernel sets of the copy engine, one per level of the machine's vector units. Every level
 * gives bit-identical results; a higher one is faster where the CPU runs it. On x86-64: SSE2 is
 * the baseline (streamed stores for copies larger than the caches), SSSE3 adds byte-shuffle
 * deinterleave / interleave of 3- and 4-channel 8- and 16-bit images, AVX2 256-bit transposes,
 * AVX-512 (F, BW, VL) 512-bit transposes of 4- and 8-byte elements. Elsewhere only
 * VL_COPY_PORTABLE (plain C and compiler vector types) exists. */
typedef enum vl_copy_level {
  VL_COPY_PORTABLE = 0,
  VL_COPY_SSE2 = 1,
  VL_COPY_SSSE3 = 2,
  VL_COPY_AVX2 = 3,
  VL_COPY_AVX512 = 4,
  VL_COPY_LEVEL_COUNT
} vl_copy_level;

/* The highest level this CPU (and its operating system) runs: a pure function of the machine,
 * asked of the CPU on each call (no state is kept). vl_copy_strided, vl_copy_logical,
 * vl_copy_permute and view_copy use it. */
VL_API vl_copy_level vl_copy_level_native(void);
/* "portable", "sse2", "ssse3", "avx2", "avx512"; NULL for a value out of range. */
VL_API const char *vl_copy_level_name(vl_copy_level level);
/* The level of a name above (exact, lower case). false when the name is none of them. */
VL_API bool vl_copy_level_from_name(const char *name, vl_copy_level *out);
/* Whether this machine can run level (true for every level up to vl_copy_level_native()). */
VL_API bool vl_copy_level_supported(vl_copy_level level);

/* Strided copy over one iteration shape: dst[i * dst_strides] = src[i * src_strides] for every
 * index i of shape. Strides are in elements (may be any non-negative values that stay inside
 * the buffers). Merges dims, moves contiguous runs with memcpy and transposes in tiles. */
VL_API void vl_copy_strided(size_t elem_size, size_t rank, const int64_t *shape, void *dst,
                            const int64_t *dst_strides, const void *src,
                            const int64_t *src_strides);

/* vl_copy_strided with the kernels of one level. A level the machine cannot run (or out of
 * range) is lowered to vl_copy_level_native(), so the call is always safe. Callers that force a
 * level (tests, viewlower-bench --level) pass it here; the core reads no environment. */
VL_API void vl_copy_strided_at(vl_copy_level level, size_t elem_size, size_t rank,
                               const int64_t *shape, void *dst, const int64_t *dst_strides,
                               const void *src, const int64_t *src_strides);

/* Logical-order copy: element k of dst (row-major over dst_spec's shape) = element k of src.
 * Both buffers are in their spec's physical layout. dtype and numel must match (VL_ERR_KERNEL). */
VL_API vl_status vl_copy_logical(const vl_spec *dst_spec, void *dst, const vl_spec *src_spec,
                                 const void *src, vl_error *err);

/* vl_copy_logical with the kernels of one level (lowered as for vl_copy_strided_at). */
VL_API vl_status vl_copy_logical_at(vl_copy_level level, const vl_spec *dst_spec, void *dst,
                                    const vl_spec *src_spec, const void *src, vl_error *err);

/* Permuted copy: dst logical index (i_0..i_r) = src logical index with dim perm[d] of src at
 * position d of dst (PyTorch permute). dst_spec's shape must be the permuted src shape. */
VL_API vl_status vl_copy_permute(const vl_spec *dst_spec, void *dst, const vl_spec *src_spec,
                                 const void *src, const int64_t *perm, vl_error *err);

/* vl_copy_permute with the kernels of one level (lowered as for vl_copy_strided_at). */
VL_API vl_status vl_copy_permute_at(vl_copy_level level, const vl_spec *dst_spec, void *dst,
                                    const vl_spec *src_spec, const void *src, const int64_t *perm,
                                    vl_error *err);

/* view_copy(self, size) -> out, laid out with out_dim_order (NULL: default). Every check of
 * view_copy in docs/protocol.md, "Methods"; errors are VL_ERR_KERNEL (VL_ERR_TOO_LARGE over lim).
 * Caller frees *out. */
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

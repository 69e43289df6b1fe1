/* desc_internal.h - the descriptor maps' dim rule, for the core's own explanations of them. */
#ifndef VL_LAYOUT_DESC_INTERNAL_H
#define VL_LAYOUT_DESC_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

/* PyTorch's maybe_wrap_dim: dim in -rank..rank-1 (a rank-0 tensor takes -1 and 0), made
 * non-negative in *out; false when out of range. Every map of viewlower/layout.h reads its
 * dims through this. */
bool vl__wrap_dim(int64_t dim, uint8_t rank, int64_t *out);

#endif

/* tensor_internal.h - tensor construction for the core's own kernels. */
#ifndef VL_LAYOUT_TENSOR_INTERNAL_H
#define VL_LAYOUT_TENSOR_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "viewlower/tensor.h"

/* vl_tensor_new without the zero fill, for a caller that writes every one of the tensor's
 * nbytes before anything reads them (view_copy's output). Clearing 64 MiB that the copy then
 * overwrites took a tenth of a blob round trip through the daemon. Same checks, errors and
 * alignment as vl_tensor_new. */
vl_status vl__tensor_new_for_overwrite(const vl_spec *spec, const vl_limits *lim, vl_tensor **out,
                                       vl_error *err);

/* lim, or the defaults (vl_limits_default) written into *storage when lim is NULL: every entry
 * point that takes optional limits reads them through this. */
const vl_limits *vl__limits_or_default(const vl_limits *lim, vl_limits *storage);

/* Adds nbytes (>= 0) to *sum, saturating at INT64_MAX: each tensor fits 63 bits, a sum of
 * them need not (the report's bytes, the plan's figures). */
void vl__bytes_add(int64_t *sum, int64_t nbytes);

/* "[1,2,6]" into buf (truncated to n bytes); returns buf. */
const char *vl__shape_text(char *buf, size_t n, size_t rank, const int64_t *shape);

#endif

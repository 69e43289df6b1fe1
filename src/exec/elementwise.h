/* elementwise.h - per-dtype arithmetic and casts over contiguous arrays, for the interpreter.
 *
 * Integers wrap like two's complement (computed unsigned, never undefined behaviour); bool add
 * is logical or and mul logical and; float16/bfloat16 compute in float and round to nearest
 * even, as PyTorch does. Arrays are element-aligned and hold n elements. */
#ifndef VIEWLOWER_ELEMENTWISE_H
#define VIEWLOWER_ELEMENTWISE_H

#include <stdbool.h>
#include <stdint.h>

#include "viewlower/graph.h"
#include "viewlower/tensor.h"

typedef enum { VL__EW_ADD, VL__EW_MUL } vl__ew_op;

/* out[k] = a[k] op b[k]; with b_scalar, b is one element used for every k. out may be a or b. */
void vl__ew_binary(vl_dtype dt, vl__ew_op op, void *out, const void *a, const void *b,
                   bool b_scalar, int64_t n);
/* out[k] = max(a[k], 0) (NaN stays NaN; unsigned and bool unchanged). */
void vl__ew_relu(vl_dtype dt, void *out, const void *a, int64_t n);
/* Converts n elements of dtype from into dtype to (floats to integers truncate toward zero,
 * saturating at the int64 range, NaN to 0, then wrap to the width; anything non-zero to true). */
void vl__ew_cast(vl_dtype to, void *out, vl_dtype from, const void *in, int64_t n);
/* A number literal (int, float or bool arg) as one element of dt; false when a is no number. */
bool vl__ew_scalar(vl_dtype dt, const vl_arg *a, void *elem);

#endif

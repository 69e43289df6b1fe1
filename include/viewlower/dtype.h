/* dtype.h - element types (docs/format.md §1): the dtype table, names, sizes, and float16 /
 * bfloat16 conversion. Every module that reads or writes elements takes its dtype facts from
 * here. */
#ifndef VIEWLOWER_DTYPE_H
#define VIEWLOWER_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "viewlower/export.h"

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

VL_API const char *vl_dtype_name(vl_dtype dt);
VL_API bool vl_dtype_from_name(const char *name, vl_dtype *out);
VL_API size_t vl_dtype_size(vl_dtype dt);


/* float16 / bfloat16 from a double, round to nearest even; and back (exact). */
VL_API uint16_t vl_f16_from_double(double x);
VL_API uint16_t vl_bf16_from_double(double x);
VL_API double vl_f16_to_double(uint16_t h);
VL_API double vl_bf16_to_double(uint16_t h);

/* One element's value: an integer (integer and bool dtypes) or a double (float dtypes). */
typedef struct vl_scalar {
  bool is_float;
  int64_t i;
  double f;
} vl_scalar;

VL_API vl_scalar vl_scalar_int(int64_t i);
VL_API vl_scalar vl_scalar_float(double f);
/* The element of dtype dt at elem (any alignment); bool loads as 0/1. */
VL_API vl_scalar vl_dtype_load(vl_dtype dt, const void *elem);
/* Stores v at elem as dt. Integers keep the low bits of the int64 value (two's complement wrap);
 * a float stored to an integer dtype truncates toward zero, saturating at the int64 range, NaN
 * as 0; bool stores v != 0; half floats round to nearest even. */
VL_API void vl_dtype_store(vl_dtype dt, void *elem, vl_scalar v);

#ifdef __cplusplus
}
#endif
#endif

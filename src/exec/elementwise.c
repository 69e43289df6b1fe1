/* elementwise.c - typed add / mul / relu loops and dtype casts for the interpreter.
 *
 * One row per dtype in a table of loop functions. Signed integers are read through their
 * unsigned type (allowed aliasing) so sums and products wrap without undefined behaviour;
 * half types round-trip through float. */
#include "exec/elementwise.h"

#include <math.h>
#include <string.h>

#include "viewlower/tensor_json.h"

typedef void (*bin_fn)(void *o, const void *a, const void *b, int64_t bstep, int64_t n);
typedef void (*un_fn)(void *o, const void *a, int64_t n);

/* Integers: computed in uint64_t and truncated, i.e. modulo 2^width. */
#define VL__INT_BINARY(U, name, expr)                                                              \
  static void name(void *o, const void *a, const void *b, int64_t bstep, int64_t n) {              \
    U *po = o;                                                                                     \
    const U *pa = a, *pb = b;                                                                      \
    for (int64_t k = 0; k < n; k++, pb += bstep) {                                                 \
      uint64_t x = pa[k], y = *pb;                                                                 \
      po[k] = (U)(expr);                                                                           \
    }                                                                                              \
  }

VL__INT_BINARY(uint8_t, add_u8, x + y)
VL__INT_BINARY(uint16_t, add_u16, x + y)
VL__INT_BINARY(uint32_t, add_u32, x + y)
VL__INT_BINARY(uint64_t, add_u64, x + y)
VL__INT_BINARY(uint8_t, mul_u8, x *y)
VL__INT_BINARY(uint16_t, mul_u16, x *y)
VL__INT_BINARY(uint32_t, mul_u32, x *y)
VL__INT_BINARY(uint64_t, mul_u64, x *y)
VL__INT_BINARY(uint8_t, or_bool, (x != 0) | (y != 0))
VL__INT_BINARY(uint8_t, and_bool, (x != 0) & (y != 0))

/* Floats in their own type; half types through float, rounded back to nearest even. */
#define VL__FLOAT_BINARY(T, name, op)                                                              \
  static void name(void *o, const void *a, const void *b, int64_t bstep, int64_t n) {              \
    T *po = o;                                                                                     \
    const T *pa = a, *pb = b;                                                                      \
    for (int64_t k = 0; k < n; k++, pb += bstep) po[k] = pa[k] op * pb;                            \
  }

VL__FLOAT_BINARY(float, add_f32, +)
VL__FLOAT_BINARY(double, add_f64, +)
VL__FLOAT_BINARY(float, mul_f32, *)
VL__FLOAT_BINARY(double, mul_f64, *)

static float f16_load(uint16_t h) {
  return (float)vl_f16_to_double(h);
}
static uint16_t f16_store(float f) {
  return vl_f16_from_double((double)f);
}
static float bf16_load(uint16_t h) {
  return (float)vl_bf16_to_double(h);
}
static uint16_t bf16_store(float f) {
  return vl_bf16_from_double((double)f);
}

#define VL__HALF_BINARY(name, load, store, op)                                                     \
  static void name(void *o, const void *a, const void *b, int64_t bstep, int64_t n) {              \
    uint16_t *po = o;                                                                              \
    const uint16_t *pa = a, *pb = b;                                                               \
    for (int64_t k = 0; k < n; k++, pb += bstep) po[k] = store(load(pa[k]) op load(*pb));          \
  }

VL__HALF_BINARY(add_f16, f16_load, f16_store, +)
VL__HALF_BINARY(mul_f16, f16_load, f16_store, *)
VL__HALF_BINARY(add_bf16, bf16_load, bf16_store, +)
VL__HALF_BINARY(mul_bf16, bf16_load, bf16_store, *)

#define VL__RELU(T, name)                                                                          \
  static void name(void *o, const void *a, int64_t n) {                                            \
    T *po = o;                                                                                     \
    const T *pa = a;                                                                               \
    for (int64_t k = 0; k < n; k++) po[k] = pa[k] < 0 ? (T)0 : pa[k];                              \
  }

VL__RELU(int8_t, relu_i8)
VL__RELU(int16_t, relu_i16)
VL__RELU(int32_t, relu_i32)
VL__RELU(int64_t, relu_i64)
VL__RELU(float, relu_f32)
VL__RELU(double, relu_f64)

static void relu_f16(void *o, const void *a, int64_t n) {
  uint16_t *po = o;
  const uint16_t *pa = a;
  for (int64_t k = 0; k < n; k++) po[k] = f16_load(pa[k]) < 0 ? 0 : pa[k];
}

static void relu_bf16(void *o, const void *a, int64_t n) {
  uint16_t *po = o;
  const uint16_t *pa = a;
  for (int64_t k = 0; k < n; k++) po[k] = bf16_load(pa[k]) < 0 ? 0 : pa[k];
}

static void relu_u8(void *o, const void *a, int64_t n) {
  if (o != a) memmove(o, a, (size_t)n);
}

typedef struct ew_row {
  bin_fn add, mul;
  un_fn relu;
} ew_row;

static const ew_row ew_table[VL_DTYPE_COUNT] = {
    [VL_DTYPE_UINT8] = {add_u8, mul_u8, relu_u8},
    [VL_DTYPE_INT8] = {add_u8, mul_u8, relu_i8},
    [VL_DTYPE_INT16] = {add_u16, mul_u16, relu_i16},
    [VL_DTYPE_INT32] = {add_u32, mul_u32, relu_i32},
    [VL_DTYPE_INT64] = {add_u64, mul_u64, relu_i64},
    [VL_DTYPE_FLOAT16] = {add_f16, mul_f16, relu_f16},
    [VL_DTYPE_BFLOAT16] = {add_bf16, mul_bf16, relu_bf16},
    [VL_DTYPE_FLOAT32] = {add_f32, mul_f32, relu_f32},
    [VL_DTYPE_FLOAT64] = {add_f64, mul_f64, relu_f64},
    [VL_DTYPE_BOOL] = {or_bool, and_bool, relu_u8},
};

void vl__ew_binary(vl_dtype dt, vl__ew_op op, void *out, const void *a, const void *b,
                   bool b_scalar, int64_t n) {
  const ew_row *r = &ew_table[dt];
  (op == VL__EW_ADD ? r->add : r->mul)(out, a, b, b_scalar ? 0 : 1, n);
}

void vl__ew_relu(vl_dtype dt, void *out, const void *a, int64_t n) {
  ew_table[dt].relu(out, a, n);
}

/* ---- casts ------------------------------------------------------------------------------- */

void vl__ew_cast(vl_dtype to, void *out, vl_dtype from, const void *in, int64_t n) {
  size_t eo = vl_dtype_size(to), ei = vl_dtype_size(from);
  char *po = out;
  const char *pi = in;
  for (int64_t k = 0; k < n; k++, po += eo, pi += ei)
    vl_dtype_store(to, po, vl_dtype_load(from, pi));
}

bool vl__ew_scalar(vl_dtype dt, const vl_arg *a, void *elem) {
  switch (a->kind) {
  case VL_ARG_INT: vl_dtype_store(dt, elem, vl_scalar_int(a->u.i)); return true;
  case VL_ARG_BOOL: vl_dtype_store(dt, elem, vl_scalar_int(a->u.b)); return true;
  case VL_ARG_FLOAT: vl_dtype_store(dt, elem, vl_scalar_float(a->u.f)); return true;
  default: return false;
  }
}

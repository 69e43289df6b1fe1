/* dtype.c - element types (docs/format.md §1): names, sizes, and exact float16 / bfloat16
 * conversion (round to nearest even from a double, exact back), and one element loaded or stored as
 * a scalar; shared by tensor JSON, the interpreter's arithmetic and casts, and input generation. */
#include "viewlower/dtype.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static const struct {
  const char *name;
  size_t size;
} dtype_table[] = {
#define ROW(e, name, size) {name, size},
    VL_DTYPE_MAP(ROW)
#undef ROW
};

const char *vl_dtype_name(vl_dtype dt) {
  return (unsigned)dt < VL_DTYPE_COUNT ? dtype_table[dt].name : "?";
}

bool vl_dtype_from_name(const char *name, vl_dtype *out) {
  for (unsigned i = 0; i < VL_DTYPE_COUNT; i++) {
    if (strcmp(name, dtype_table[i].name) == 0) {
      *out = (vl_dtype)i;
      return true;
    }
  }
  return false;
}

size_t vl_dtype_size(vl_dtype dt) {
  return (unsigned)dt < VL_DTYPE_COUNT ? dtype_table[dt].size : 0;
}

/* ---------------------------------------------------------------- float16 / bfloat16 */

/* v >= 0 and below 2^53: the nearest integer, ties to even, whatever the FP rounding mode. */
static double round_half_even(double v) {
  double r = floor(v);
  double frac = v - r; /* exact */
  if (frac > 0.5 || (frac == 0.5 && fmod(r, 2.0) != 0.0)) r += 1.0;
  return r;
}

/* A 16-bit IEEE-style float (1 sign bit, ebits exponent bits, mbits mantissa bits) nearest to x,
 * ties to even, rounded once from the double. Too-large values become inf; the rounding carry out
 * of the top binade lands exactly on the inf pattern, and out of the subnormals on the smallest
 * normal, so neither needs a special case. */
static uint16_t narrow_from_double(double x, int mbits, int ebits) {
  const uint32_t sign = signbit(x) ? 0x8000u : 0u;
  const uint32_t inf = ((1u << ebits) - 1u) << mbits;
  const int bias = (1 << (ebits - 1)) - 1;
  const int emin = 1 - bias;
  double a = fabs(x);
  if (isnan(x)) return (uint16_t)(sign | inf | (1u << (mbits - 1)));
  if (a == 0.0) return (uint16_t)sign;
  if (isinf(a)) return (uint16_t)(sign | inf);
  int e;
  (void)frexp(a, &e);
  int unbiased = e - 1; /* a is in [2^unbiased, 2^(unbiased+1)) */
  if (unbiased > bias) return (uint16_t)(sign | inf);
  if (unbiased < emin) { /* subnormal: a whole number of units 2^(emin - mbits) */
    return (uint16_t)(sign | (uint32_t)round_half_even(ldexp(a, mbits - emin)));
  }
  uint32_t q = (uint32_t)round_half_even(ldexp(a, mbits - unbiased)); /* [2^mbits, 2^(mbits+1)] */
  uint32_t bits = ((uint32_t)(unbiased + bias) << mbits) + (q - (1u << mbits));
  return (uint16_t)(sign | bits);
}

uint16_t vl_f16_from_double(double x) {
  return narrow_from_double(x, 10, 5);
}

uint16_t vl_bf16_from_double(double x) {
  return narrow_from_double(x, 7, 8);
}

double vl_f16_to_double(uint16_t h) {
  unsigned e = (h >> 10) & 0x1fu;
  unsigned m = h & 0x3ffu;
  double v;
  if (e == 0) {
    v = ldexp((double)m, -24);
  } else if (e == 31) {
    v = m != 0 ? NAN : INFINITY;
  } else {
    v = ldexp((double)(m | 0x400u), (int)e - 25);
  }
  return (h & 0x8000u) ? -v : v;
}

double vl_bf16_to_double(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16; /* bfloat16 is the top half of a float32 */
  float f;
  memcpy(&f, &bits, sizeof f);
  return (double)f;
}

/* ---------------------------------------------------------------- elements in memory */

vl_scalar vl_scalar_int(int64_t i) {
  return (vl_scalar){.is_float = false, .i = i, .f = 0};
}
vl_scalar vl_scalar_float(double f) {
  return (vl_scalar){.is_float = true, .i = 0, .f = f};
}

vl_scalar vl_dtype_load(vl_dtype dt, const void *p) {
  uint8_t u8;
  uint16_t u16;
  int8_t i8;
  int16_t i16;
  int32_t i32;
  int64_t i64;
  float f32;
  double f64;
  switch (dt) {
  case VL_DTYPE_UINT8: memcpy(&u8, p, 1); return vl_scalar_int(u8);
  case VL_DTYPE_BOOL: memcpy(&u8, p, 1); return vl_scalar_int(u8 != 0);
  case VL_DTYPE_INT8: memcpy(&i8, p, 1); return vl_scalar_int(i8);
  case VL_DTYPE_INT16: memcpy(&i16, p, 2); return vl_scalar_int(i16);
  case VL_DTYPE_INT32: memcpy(&i32, p, 4); return vl_scalar_int(i32);
  case VL_DTYPE_INT64: memcpy(&i64, p, 8); return vl_scalar_int(i64);
  case VL_DTYPE_FLOAT16: memcpy(&u16, p, 2); return vl_scalar_float(vl_f16_to_double(u16));
  case VL_DTYPE_BFLOAT16: memcpy(&u16, p, 2); return vl_scalar_float(vl_bf16_to_double(u16));
  case VL_DTYPE_FLOAT32: memcpy(&f32, p, 4); return vl_scalar_float(f32);
  default: memcpy(&f64, p, 8); return vl_scalar_float(f64);
  }
}

/* Truncates toward zero, saturating at the int64 range; NaN is 0. */
static int64_t scalar_to_int(vl_scalar v) {
  if (!v.is_float) return v.i;
  if (isnan(v.f)) return 0;
  if (v.f >= 9223372036854775808.0) return INT64_MAX;
  if (v.f <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v.f;
}

static double scalar_to_double(vl_scalar v) {
  return v.is_float ? v.f : (double)v.i;
}

/* Stores v as dt; integers keep the low bits of the int64 value (two's complement wrap). */
void vl_dtype_store(vl_dtype dt, void *p, vl_scalar v) {
  uint64_t u = (uint64_t)scalar_to_int(v);
  uint8_t u8 = (uint8_t)u;
  uint16_t u16 = (uint16_t)u;
  uint32_t u32 = (uint32_t)u;
  float f32 = (float)scalar_to_double(v);
  double f64 = scalar_to_double(v);
  switch (dt) {
  case VL_DTYPE_BOOL:
    u8 = v.is_float ? v.f != 0 : v.i != 0;
    memcpy(p, &u8, 1);
    return;
  case VL_DTYPE_UINT8:
  case VL_DTYPE_INT8: memcpy(p, &u8, 1); return;
  case VL_DTYPE_INT16: memcpy(p, &u16, 2); return;
  case VL_DTYPE_INT32: memcpy(p, &u32, 4); return;
  case VL_DTYPE_INT64: memcpy(p, &u, 8); return;
  case VL_DTYPE_FLOAT16:
    u16 = vl_f16_from_double(f64);
    memcpy(p, &u16, 2);
    return;
  case VL_DTYPE_BFLOAT16:
    u16 = vl_bf16_from_double(f64);
    memcpy(p, &u16, 2);
    return;
  case VL_DTYPE_FLOAT32: memcpy(p, &f32, 4); return;
  default: memcpy(p, &f64, 8); return;
  }
}

/* dtype.c - element types (SPEC §1): names, sizes, and exact float16 / bfloat16 conversion
 * (round to nearest even from a double, exact back), shared by tensor JSON, the interpreter's
 * arithmetic and input generation. */
#include "viewlower/dtype.h"

#include <math.h>
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


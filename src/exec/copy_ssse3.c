/* copy_ssse3.c - the SSSE3 level of the copy engine (built with -mssse3 on x86-64): deinterleave
 * and interleave of 3 channels and deinterleave of 4 channels of 1- and 2-byte elements (NHWC
 * <-> NCHW images) with pshufb. For 3 channels each group of 48 interleaved bytes is 3 loads,
 * 9 shuffles and ORs, 3 stores; the pixels after the last whole group are moved one by one.
 * Masks: exec/copy_shuffle.h. These kernels also serve the AVX2 level: the same shuffles on
 * 256-bit registers (two groups, one per lane) measured slower on cache-resident images (0.39x
 * against 0.47x memcpy deinterleaving 224^2 uint8, 0.48x against 0.65x interleaving) and no
 * faster at 1080p. The AVX-512 level has its own 3-channel byte kernels (copy_avx512.c) and
 * calls these for the pixels before and after its 64-pixel steps. */
#include "exec/copy_kernels.h"

#if defined(__x86_64__) && defined(__SSSE3__)
#include <string.h>
#include <tmmintrin.h>

#include "exec/copy_shuffle.h"

#define LOAD(p) _mm_loadu_si128((const __m128i *)(const void *)(p))
#define STORE(p, v) _mm_storeu_si128((__m128i *)(void *)(p), (v))
#define MASK(F, C, E, k, v) _mm_setr_epi8(VL__MASK16(F, C, E, k, v))
#define MASKS(F, C, E)                                                                             \
  {                                                                                                \
    {MASK(F, C, E, 0, 0), MASK(F, C, E, 0, 1), MASK(F, C, E, 0, 2), MASK(F, C, E, 0, 3)},          \
        {MASK(F, C, E, 1, 0), MASK(F, C, E, 1, 1), MASK(F, C, E, 1, 2), MASK(F, C, E, 1, 3)},      \
        {MASK(F, C, E, 2, 0), MASK(F, C, E, 2, 1), MASK(F, C, E, 2, 2), MASK(F, C, E, 2, 3)}, {    \
      MASK(F, C, E, 3, 0), MASK(F, C, E, 3, 1), MASK(F, C, E, 3, 2), MASK(F, C, E, 3, 3)           \
    }                                                                                              \
  }

#define VL__SSSE3_NARROW(C, E, sfx)                                                                \
  static void split##C##_##sfx(char *d, const char *s, int64_t n, ptrdiff_t dx) {                  \
    const __m128i m[4][4] = MASKS(VL__SPLIT_AT, C, E);                                             \
    enum { P = 16 / E };                                                                           \
    int64_t y = 0;                                                                                 \
    for (; y + P <= n; y += P, s += 16 * C) {                                                      \
      __m128i in[C];                                                                               \
      for (int v = 0; v < C; v++) in[v] = LOAD(s + 16 * v);                                        \
      for (int k = 0; k < C; k++) {                                                                \
        __m128i o = _mm_shuffle_epi8(in[0], m[k][0]);                                              \
        for (int v = 1; v < C; v++) o = _mm_or_si128(o, _mm_shuffle_epi8(in[v], m[k][v]));         \
        STORE(d + k * dx + y * E, o);                                                              \
      }                                                                                            \
    }                                                                                              \
    for (; y < n; y++, s += C * E)                                                                 \
      for (int k = 0; k < C; k++) memcpy(d + k * dx + y * E, s + k * E, E);                        \
  }                                                                                                \
  static void merge##C##_##sfx(char *d, const char *s, int64_t n, ptrdiff_t sy) {                  \
    const __m128i m[4][4] = MASKS(VL__MERGE_AT, C, E);                                             \
    enum { P = 16 / E };                                                                           \
    int64_t x = 0;                                                                                 \
    for (; x + P <= n; x += P, d += 16 * C) {                                                      \
      __m128i in[C];                                                                               \
      for (int k = 0; k < C; k++) in[k] = LOAD(s + k * sy + x * E);                                \
      for (int v = 0; v < C; v++) {                                                                \
        __m128i o = _mm_shuffle_epi8(in[0], m[0][v]);                                              \
        for (int k = 1; k < C; k++) o = _mm_or_si128(o, _mm_shuffle_epi8(in[k], m[k][v]));         \
        STORE(d + 16 * v, o);                                                                      \
      }                                                                                            \
    }                                                                                              \
    for (; x < n; x++, d += C * E)                                                                 \
      for (int k = 0; k < C; k++) memcpy(d + k * E, s + k * sy + x * E, E);                        \
  }

VL__SSSE3_NARROW(3, 1, u8)
VL__SSSE3_NARROW(3, 2, u16)

/* 4 x 4 transpose of 32-bit words: t[k] word v = old t[v] word k. */
static void transpose4x32(__m128i t[4]) {
  __m128i lo01 = _mm_unpacklo_epi32(t[0], t[1]), hi01 = _mm_unpackhi_epi32(t[0], t[1]);
  __m128i lo23 = _mm_unpacklo_epi32(t[2], t[3]), hi23 = _mm_unpackhi_epi32(t[2], t[3]);
  t[0] = _mm_unpacklo_epi64(lo01, lo23);
  t[1] = _mm_unpackhi_epi64(lo01, lo23);
  t[2] = _mm_unpacklo_epi64(hi01, hi23);
  t[3] = _mm_unpackhi_epi64(hi01, hi23);
}

/* Four channels (exec/copy_shuffle.h), deinterleave only: per group, four shuffles and a
 * transpose of words. The interleave is left to the portable loop, which the compiler turns
 * into unpacks alone (0.97x memcpy on a 224^2 image against 0.40x for shuffles here). */
#define VL__SSSE3_NARROW4(E, sfx)                                                                  \
  static void split4_##sfx(char *d, const char *s, int64_t n, ptrdiff_t dx) {                      \
    const __m128i g = MASK(VL__SPLIT4_GROUP, 4, E, 0, 0);                                          \
    enum { P = 16 / E };                                                                           \
    int64_t y = 0;                                                                                 \
    for (; y + P <= n; y += P, s += 64) {                                                          \
      __m128i t[4];                                                                                \
      for (int v = 0; v < 4; v++) t[v] = _mm_shuffle_epi8(LOAD(s + 16 * v), g);                    \
      transpose4x32(t);                                                                            \
      for (int k = 0; k < 4; k++) STORE(d + k * dx + y * E, t[k]);                                 \
    }                                                                                              \
    for (; y < n; y++, s += 4 * E)                                                                 \
      for (int k = 0; k < 4; k++) memcpy(d + k * dx + y * E, s + k * E, E);                        \
  }

VL__SSSE3_NARROW4(1, u8)
VL__SSSE3_NARROW4(2, u16)

const vl__copy_kernels vl__copy_kernels_ssse3 = {
    .split = {{NULL, split3_u8, split4_u8}, {NULL, split3_u16, split4_u16}},
    .merge = {{NULL, merge3_u8, NULL}, {NULL, merge3_u16, NULL}},
};
#elif defined(__x86_64__)
const vl__copy_kernels vl__copy_kernels_ssse3 = {.tile = {NULL}};
#else
typedef int vl__copy_ssse3_unused; /* not x86-64: the file is empty */
#endif

/* copy_shuffle.h - the narrow-plane kernels (3 and 4 channels of 1- and 2-byte elements) of
 * copy_ssse3.c and copy_avx2.c and their byte-shuffle masks. Every mask is a compile-time
 * constant: byte j of a 16-byte result names the source byte it takes (-128: none).
 *
 * Split (deinterleave) of C channels of E-byte elements: a group of 16 * C interleaved bytes
 * (16 / E pixels) is loaded as C vectors; channel k's 16 bytes are the OR of C shuffles, one per
 * vector v, taking byte ((j / E) * C + k) * E + j % E of the group when it lies in vector v.
 * Merge (interleave): output vector v of a group is the OR over channels k of shuffles of the
 * channel vectors, taking byte (o / (C * E)) * E + o % E of channel k for each output byte
 * o = 16 v + j whose channel (o / E) % C is k. */
#ifndef VL_EXEC_COPY_SHUFFLE_H
#define VL_EXEC_COPY_SHUFFLE_H

#define VL__IN16(o) ((o) >= 0 && (o) < 16 ? (char)(o) : (char)-128)
#define VL__SPLIT_AT(C, E, k, v, j) VL__IN16((((j) / (E)) * (C) + (k)) * (E) + (j) % (E)-16 * (v))
#define VL__MERGE_AT(C, E, k, v, j)                                                                \
  ((((16 * (v) + (j)) / (E)) % (C)) == (k)                                                         \
       ? (char)(((16 * (v) + (j)) / ((C) * (E))) * (E) + (16 * (v) + (j)) % (E))                   \
       : (char)-128)

/* Three channels, by blends (copy_avx2.c): within a group of three 16-byte vectors a, b, c,
 * element slot i of each vector (E bytes at i * E) holds channel (P v + i) % 3 in vector v
 * (P = 16 / E elements a vector; P is 1 modulo 3 for E = 1 and 2 modulo 3 for E = 2), so each
 * slot holds channel k in exactly one of the three. Split: per channel k, two blends take each
 * slot from the vector where it holds k (VL__SELECT3: all bits set where slot i of vector v
 * holds channel k), and one shuffle puts the 16 / E elements in pixel order (VL__SPLIT3_GATHER:
 * element e of channel k sits in slot (3 e + k) % P). Merge: one shuffle per channel k puts in
 * each slot i the pixel the output vector holding k at slot i needs (VL__MERGE3_GATHER: that
 * vector is VL__MERGE3_V, the pixel (P v + i) / 3), and two blends per output vector v take
 * each slot from its channel. */
#define VL__SELECT3(C, E, k, v, j) ((((16 / (E)) * (v) + (j) / (E)) % 3) == (k) ? (char)-128 : 0)
#define VL__SPLIT3_GATHER(C, E, k, v, j)                                                           \
  (char)(((3 * ((j) / (E)) + (k)) % (16 / (E))) * (E) + (j) % (E))
#define VL__MERGE3_V(E, k, i) ((i) % 3 == (k) ? 0 : ((16 / (E)) + (i)) % 3 == (k) ? 1 : 2)
#define VL__MERGE3_GATHER(C, E, k, v, j)                                                           \
  (char)((((16 / (E)) * VL__MERGE3_V(E, k, (j) / (E)) + (j) / (E)) / 3) * (E) + (j) % (E))

/* Four channels: a 16-byte vector of a group is 16 / (4 E) pixels of all four channels. Split:
 * one shuffle per vector groups it by channel (32-bit word k = channel k of its pixels), then a
 * 4 x 4 transpose of 32-bit words over the group's four vectors gives the channels. */
#define VL__SPLIT4_GROUP(C, E, k, v, j)                                                            \
  (char)((((j) % 4) / (E)) * 4 * (E) + ((j) / 4) * (E) + (j) % (E))
#define VL__MASK16(F, C, E, k, v)                                                                  \
  F(C, E, k, v, 0), F(C, E, k, v, 1), F(C, E, k, v, 2), F(C, E, k, v, 3), F(C, E, k, v, 4),        \
      F(C, E, k, v, 5), F(C, E, k, v, 6), F(C, E, k, v, 7), F(C, E, k, v, 8), F(C, E, k, v, 9),    \
      F(C, E, k, v, 10), F(C, E, k, v, 11), F(C, E, k, v, 12), F(C, E, k, v, 13),                  \
      F(C, E, k, v, 14), F(C, E, k, v, 15)

/* ---- the kernels ----------------------------------------------------------------------------
 * VL__SSSE3_NARROW(C, E, sfx) defines split<C>_<sfx> and merge<C>_<sfx> (3 channels: per group
 * of 16 * C bytes, C loads, C * C shuffles and ORs, C stores; the pixels after the last whole
 * group one by one), VL__SSSE3_NARROW4(E, sfx) split4_<sfx> (per group, four shuffles and a
 * 4 x 4 transpose of 32-bit words). Each level's file instantiates them with its own flags:
 * copy_ssse3.c as SSSE3, copy_avx2.c as the same 128-bit shuffles in VEX encoding (three
 * operands, so none of the register copies pshufb's two-operand form needs: 27 instructions
 * per 48-byte group instead of 33; the groups are bound by the front end). */
#if defined(__SSSE3__)
#include <string.h>
#include <tmmintrin.h>

#define VL__LD16(p) _mm_loadu_si128((const __m128i *)(const void *)(p))
#define VL__ST16(p, v) _mm_storeu_si128((__m128i *)(void *)(p), (v))
#define VL__MASK(F, C, E, k, v) _mm_setr_epi8(VL__MASK16(F, C, E, k, v))
#define VL__MASKS(F, C, E)                                                                         \
  {                                                                                                \
    {VL__MASK(F, C, E, 0, 0), VL__MASK(F, C, E, 0, 1), VL__MASK(F, C, E, 0, 2),                    \
     VL__MASK(F, C, E, 0, 3)},                                                                     \
        {VL__MASK(F, C, E, 1, 0), VL__MASK(F, C, E, 1, 1), VL__MASK(F, C, E, 1, 2),                \
         VL__MASK(F, C, E, 1, 3)},                                                                 \
        {VL__MASK(F, C, E, 2, 0), VL__MASK(F, C, E, 2, 1), VL__MASK(F, C, E, 2, 2),                \
         VL__MASK(F, C, E, 2, 3)},                                                                 \
    {                                                                                              \
      VL__MASK(F, C, E, 3, 0), VL__MASK(F, C, E, 3, 1), VL__MASK(F, C, E, 3, 2),                   \
          VL__MASK(F, C, E, 3, 3)                                                                  \
    }                                                                                              \
  }

#define VL__SSSE3_NARROW(C, E, sfx)                                                                \
  static void split##C##_##sfx(char *d, const char *s, int64_t n, ptrdiff_t dx) {                  \
    const __m128i m[4][4] = VL__MASKS(VL__SPLIT_AT, C, E);                                         \
    enum { P = 16 / E };                                                                           \
    int64_t y = 0;                                                                                 \
    for (; y + P <= n; y += P, s += 16 * C) {                                                      \
      __m128i in[C];                                                                               \
      for (int v = 0; v < C; v++) in[v] = VL__LD16(s + 16 * v);                                    \
      for (int k = 0; k < C; k++) {                                                                \
        __m128i o = _mm_shuffle_epi8(in[0], m[k][0]);                                              \
        for (int v = 1; v < C; v++) o = _mm_or_si128(o, _mm_shuffle_epi8(in[v], m[k][v]));         \
        VL__ST16(d + k * dx + y * E, o);                                                           \
      }                                                                                            \
    }                                                                                              \
    for (; y < n; y++, s += C * E)                                                                 \
      for (int k = 0; k < C; k++) memcpy(d + k * dx + y * E, s + k * E, E);                        \
  }                                                                                                \
  static void merge##C##_##sfx(char *d, const char *s, int64_t n, ptrdiff_t sy) {                  \
    const __m128i m[4][4] = VL__MASKS(VL__MERGE_AT, C, E);                                         \
    enum { P = 16 / E };                                                                           \
    int64_t x = 0;                                                                                 \
    for (; x + P <= n; x += P, d += 16 * C) {                                                      \
      __m128i in[C];                                                                               \
      for (int k = 0; k < C; k++) in[k] = VL__LD16(s + k * sy + x * E);                            \
      for (int v = 0; v < C; v++) {                                                                \
        __m128i o = _mm_shuffle_epi8(in[0], m[0][v]);                                              \
        for (int k = 1; k < C; k++) o = _mm_or_si128(o, _mm_shuffle_epi8(in[k], m[k][v]));         \
        VL__ST16(d + 16 * v, o);                                                                   \
      }                                                                                            \
    }                                                                                              \
    for (; x < n; x++, d += C * E)                                                                 \
      for (int k = 0; k < C; k++) memcpy(d + k * E, s + k * sy + x * E, E);                        \
  }

/* 4 x 4 transpose of 32-bit words: t[k] word v = old t[v] word k. */
static inline void vl__transpose4x32(__m128i t[4]) {
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
    const __m128i g = VL__MASK(VL__SPLIT4_GROUP, 4, E, 0, 0);                                      \
    enum { P = 16 / E };                                                                           \
    int64_t y = 0;                                                                                 \
    for (; y + P <= n; y += P, s += 64) {                                                          \
      __m128i t[4];                                                                                \
      for (int v = 0; v < 4; v++) t[v] = _mm_shuffle_epi8(VL__LD16(s + 16 * v), g);                \
      vl__transpose4x32(t);                                                                        \
      for (int k = 0; k < 4; k++) VL__ST16(d + k * dx + y * E, t[k]);                              \
    }                                                                                              \
    for (; y < n; y++, s += 4 * E)                                                                 \
      for (int k = 0; k < 4; k++) memcpy(d + k * dx + y * E, s + k * E, E);                        \
  }
#endif

#endif

/* copy_shuffle.h - byte-shuffle masks for the narrow-plane kernels (3 and 4 channels of 1- and
 * 2-byte elements), shared by copy_ssse3.c and copy_avx2.c. Every mask is a compile-time
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

/* Three channels, where each 16-byte vector of a group holds every channel at each element
 * position exactly once (16 / E is prime to 3), so one byte blend per other vector gathers a
 * channel and one shuffle puts it in pixel order (split), and the reverse (merge). W = 16 / E
 * elements per vector; u = j / E is the element position of byte j. */
#define VL__W(E) (16 / (E))
/* split: select vector v's byte j for channel k (-128) or not (0) */
#define VL__SPLIT3_SEL(C, E, k, v, j)                                                              \
  ((VL__W(E) * (v) + (j) / (E)) % 3 == (k) ? (char)-128 : (char)0)
/* split: the blended channel k's byte j of pixel order: element p * 3 + k of the group sits at
 * position (p * 3 + k) % W */
#define VL__SPLIT3_ORDER(C, E, k, v, j) (char)((((j) / (E)*3 + (k)) % VL__W(E)) * (E) + (j) % (E))
/* merge: the vector of the group that takes channel k at element position u */
#define VL__MERGE3_VEC(E, k, u) ((u) % 3 == (k) ? 0 : (VL__W(E) + (u)) % 3 == (k) ? 1 : 2)
/* merge: channel k's pixels in the positions where their output vectors take them */
#define VL__MERGE3_ORDER(C, E, k, v, j)                                                            \
  (char)(((VL__W(E) * VL__MERGE3_VEC(E, k, (j) / (E)) + (j) / (E)) / 3) * (E) + (j) % (E))
/* merge: output vector v takes channel k at byte j (-128) or not (0) */
#define VL__MERGE3_SEL(C, E, k, v, j)                                                              \
  ((VL__W(E) * (v) + (j) / (E)) % 3 == (k) ? (char)-128 : (char)0)

/* Four channels: a 16-byte vector of a group is 16 / (4 E) pixels of all four channels. split:
 * one shuffle per vector groups it by channel (32-bit word k = channel k of its pixels), then a
 * 4 x 4 transpose of 32-bit words over the group's four vectors gives the channels; merge: the
 * transpose, then the inverse shuffle. */
#define VL__SPLIT4_GROUP(C, E, k, v, j)                                                            \
  (char)((((j) % 4) / (E)) * 4 * (E) + ((j) / 4) * (E) + (j) % (E))
#define VL__MERGE4_GROUP(C, E, k, v, j)                                                            \
  (char)((((j) / (E)) % 4) * 4 + ((j) / (4 * (E))) * (E) + (j) % (E))

#define VL__MASK16(F, C, E, k, v)                                                                  \
  F(C, E, k, v, 0), F(C, E, k, v, 1), F(C, E, k, v, 2), F(C, E, k, v, 3), F(C, E, k, v, 4),        \
      F(C, E, k, v, 5), F(C, E, k, v, 6), F(C, E, k, v, 7), F(C, E, k, v, 8), F(C, E, k, v, 9),    \
      F(C, E, k, v, 10), F(C, E, k, v, 11), F(C, E, k, v, 12), F(C, E, k, v, 13),                  \
      F(C, E, k, v, 14), F(C, E, k, v, 15)

#endif

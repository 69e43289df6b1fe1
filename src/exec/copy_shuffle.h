/* copy_shuffle.h - byte-shuffle masks for the narrow-plane kernels (3 and 4 channels of 1- and
 * 2-byte elements) of copy_ssse3.c. Every mask is a compile-time
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

#endif

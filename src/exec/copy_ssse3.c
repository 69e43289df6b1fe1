/* copy_ssse3.c - the SSSE3 level of the copy engine (built with -mssse3 on x86-64): deinterleave
 * and interleave of 3 channels and deinterleave of 4 channels of 1- and 2-byte elements (NHWC
 * <-> NCHW images) with pshufb. For 3 channels each group of 48 interleaved bytes is 3 loads,
 * 9 shuffles and ORs, 3 stores; the pixels after the last whole group are moved one by one.
 * The kernels and their masks are in exec/copy_shuffle.h. The AVX2 level compiles the same
 * kernels in VEX encoding (copy_avx2.c); the same shuffles on 256-bit registers (two groups,
 * one per lane) measured slower on cache-resident images (0.39x against 0.47x memcpy
 * deinterleaving 224^2 uint8, 0.48x against 0.65x interleaving) and no faster at 1080p; the
 * AVX2 level's 3-channel kernels use blends and two-channel gathers instead, which leave the
 * shuffle units fewer shuffles, and call these for their tails. The AVX-512 level has its own
 * 3-channel byte kernels (copy_avx512.c) and calls these for the pixels before and after its
 * 64-pixel steps. */
#include "exec/copy_kernels.h"

#if defined(__x86_64__) && defined(__SSSE3__)
#include "exec/copy_shuffle.h"

VL__SSSE3_NARROW(3, 1, u8)
VL__SSSE3_NARROW(3, 2, u16)
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

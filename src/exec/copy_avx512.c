/* copy_avx512.c - the AVX-512 level of the copy engine (built with -mavx512f -mavx512bw
 * -mavx512vl on x86-64): transposes of 4- and 8-byte elements in 512-bit registers. Each
 * register is loaded as four 128-bit quarters from rows i, i + K/4, i + K/2, i + 3K/4, so the
 * in-lane unpacks and shuffles do the whole transpose: 16x16 of 4 bytes (16 registers, 32
 * shuffles, 1 KiB) and 8x8 of 8 bytes (8 registers, 8 shuffles, 512 bytes). Ragged edges move
 * element by element. The other kernels of this level are the AVX2 ones (copy_avx2.c): the
 * byte and 16-bit shuffles are not faster at 512 bits here. */
#include "exec/copy_kernels.h"

#if defined(__x86_64__) && defined(__AVX512F__)
#include <immintrin.h>

#define LDPS(p) _mm_loadu_ps((const float *)(const void *)(p))

/* Four 16-byte quarters, quarter q from p + q * step. */
static __m512 load4ps(const char *p, ptrdiff_t step) {
  __m512 z = _mm512_castps128_ps512(LDPS(p));
  z = _mm512_insertf32x4(z, LDPS(p + step), 1);
  z = _mm512_insertf32x4(z, LDPS(p + 2 * step), 2);
  return _mm512_insertf32x4(z, LDPS(p + 3 * step), 3);
}

static __m512d load4pd(const char *p, ptrdiff_t step) {
  return _mm512_castps_pd(load4ps(p, step)); /* the quarters are bits: same loads */
}

static void block_u32(char *d, const char *s, ptrdiff_t dx, ptrdiff_t sy) {
  for (int g = 0; g < 4; g++) { /* columns 4g .. 4g + 3; lane k holds rows 4k .. 4k + 3 */
    const char *c = s + 16 * g;
    __m512 t0 = load4ps(c, 4 * sy), t1 = load4ps(c + sy, 4 * sy);
    __m512 t2 = load4ps(c + 2 * sy, 4 * sy), t3 = load4ps(c + 3 * sy, 4 * sy);
    VL__LANE_TRANSPOSE4_PS(512, t0, t1, t2, t3, d + 4 * g * dx, dx);
  }
}

static void block_u64(char *d, const char *s, ptrdiff_t dx, ptrdiff_t sy) {
  for (int g = 0; g < 4; g++) { /* columns 2g, 2g + 1; lane k holds rows 2k, 2k + 1 */
    const char *c = s + 16 * g;
    __m512d t0 = load4pd(c, 2 * sy), t1 = load4pd(c + sy, 2 * sy);
    _mm512_storeu_pd(d + 2 * g * dx, _mm512_unpacklo_pd(t0, t1));
    _mm512_storeu_pd(d + (2 * g + 1) * dx, _mm512_unpackhi_pd(t0, t1));
  }
}

VL__LEVEL_TILE(u32, 16, 4, 2)
VL__LEVEL_TILE(u64, 8, 8, 3)

/* Tiles one block high and 1 KiB wide: each step reads K source rows of 1 KiB and writes
 * 1024 / E destination rows K elements at a time; 0.55x against 0.40x memcpy (4 bytes,
 * 768 x 196, cache-resident) and 0.50x against 0.33x (8 bytes, 384 x 196) with the engine's
 * default 512 rows of 128 bytes. Larger copies are unchanged. */
const vl__copy_kernels vl__copy_kernels_avx512 = {.tile = {NULL, NULL, tile_u32, tile_u64},
                                                  .tile_rows = {0, 0, 16, 8},
                                                  .tile_bytes = {0, 0, 1024, 1024}};
#elif defined(__x86_64__)
const vl__copy_kernels vl__copy_kernels_avx512 = {.tile = {NULL}};
#else
typedef int vl__copy_avx512_unused; /* not x86-64: the file is empty */
#endif

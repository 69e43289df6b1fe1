/* copy_avx512.c - the AVX-512 level of the copy engine (built with -mavx512f -mavx512bw
 * -mavx512vl on x86-64). Every kernel here writes whole 64-byte pieces of destination rows.
 *
 * Transposes: each register is four 128-bit quarters from four source rows (load4: masked
 * windows, not inserts), so in-lane unpacks alone do the transpose and leave 64 bytes of one
 * destination row per register: 16 x 64 bytes (16 registers, 64 byte unpacks, 1 KiB), 8 x 32
 * of 2 bytes (8 registers, 24 unpacks, 512 bytes), 16 x 16 of 4 bytes (16 registers, 32
 * shuffles) and 8 x 8 of 8 bytes (8 registers, 8 unpacks), walked by VL__TILE_BODY_RECT; the
 * rows it leaves and thinner planes take the AVX2 blocks (copy_avx2.c).
 * Images: deinterleave and interleave of 3 byte channels, 64 pixels (four of the SSSE3
 * kernel's 48-byte groups, one per lane) per step. The other narrow kernels are the lower
 * levels'.
 *
 * Tables that differ in how a register's quarters are loaded and in their tile shapes:
 * vl__copy_kernels_avx512 (masked windows; measured on an Intel core with 48 KiB L1d and 2 MiB
 * L2) and vl__copy_kernels_avx512_amd (inserts, 512-row tiles and streamed 4- and 8-byte
 * transposes; measured on AMD Zen 5, where masked loads cost more than inserts). The AMD table's
 * 1- and 2-byte tiles are blocks of 32-byte row pairs instead (VL__PAIRS_TILE), with the
 * quarters blocks left for planes narrower than theirs. vl__copy_kernels_avx512_zen4 is the AMD
 * table with the AVX2 level's float tile and image kernels, for Zen 4's two-pass 512-bit units.
 * The engine takes the AMD tables on AMD cores (level_table in copy.c). docs/kernels.md has the
 * figures. */
#include "exec/copy_kernels.h"

#include <stdbool.h>

#if defined(__x86_64__) && defined(__AVX512F__)
#include <immintrin.h>

#include "exec/copy_shuffle.h"

#define LOAD16(p) _mm_loadu_si128((const __m128i *)(const void *)(p))

#define INLINE static inline __attribute__((always_inline))

/* Four 16-byte quarters, quarter q from p + q * step. With insert (the AMD table), one load and
 * three inserts from memory. Without (the Intel table), quarter 0 is a plain load and quarters
 * 1..3 are zero-masked 64-byte loads placed so that only quarter q's 16 bytes are enabled, then
 * ORed in: masked-off bytes are never read (they cannot fault), and unlike inserts
 * (vinserti32x4, the shuffle port) these cost load ports and one logic op per two quarters,
 * leaving the shuffle port to the transpose. On AMD Zen 5 masked loads cost more than the
 * inserts they save (u8 768x196 0.29x -> 0.31x memcpy, 224^2 images 0.48x -> 0.63x, f64 384x196
 * 0.37x -> 0.43x with the same tiles). */
INLINE __m512i load4(const char *p, ptrdiff_t step, bool insert) {
  if (insert) {
    __m512i r = _mm512_castsi128_si512(LOAD16(p));
    r = _mm512_inserti32x4(r, LOAD16(p + step), 1);
    r = _mm512_inserti32x4(r, LOAD16(p + 2 * step), 2);
    return _mm512_inserti32x4(r, LOAD16(p + 3 * step), 3);
  }
  __m512i q0 = _mm512_zextsi128_si512(LOAD16(p));
  __m512i q1 = _mm512_maskz_loadu_epi32(0x00F0, p + step - 16);
  __m512i q2 = _mm512_maskz_loadu_epi32(0x0F00, p + 2 * step - 32);
  __m512i q3 = _mm512_maskz_loadu_epi32(0xF000, p + 3 * step - 48);
  return _mm512_or_si512(_mm512_ternarylogic_epi32(q0, q1, q2, 0xFE), q3);
}

/* K x 4K elements of W bits (K = 128 / W): register j holds source rows j, j + K, j + 2K, j + 3K
 * (16 bytes each), so log2(K) rounds of in-lane W-bit interleaves leave column x of all 4K rows
 * in register x: one 64-byte store per destination row. block_u8: 16 x 64 bytes, block_u16:
 * 8 x 32 of 2 bytes. */
#define VL__ROWS_BLOCK(sfx, W, K, ROUNDS)                                                          \
  INLINE void block_##sfx(char *d, const char *s, ptrdiff_t dx, ptrdiff_t sy, bool ins) {          \
    __m512i r[K], t[K];                                                                            \
    for (int j = 0; j < (K); j++) r[j] = load4(s + j * sy, (K)*sy, ins);                           \
    for (int round = 0; round < (ROUNDS); round++) {                                               \
      for (int i = 0; i < (K) / 2; i++) {                                                          \
        t[2 * i] = _mm512_unpacklo_epi##W(r[i], r[i + (K) / 2]);                                   \
        t[2 * i + 1] = _mm512_unpackhi_epi##W(r[i], r[i + (K) / 2]);                               \
      }                                                                                            \
      for (int i = 0; i < (K); i++) r[i] = t[i];                                                   \
    }                                                                                              \
    for (int x = 0; x < (K); x++) _mm512_storeu_si512((void *)(d + x * dx), r[x]);                 \
  }

VL__ROWS_BLOCK(u8, 8, 16, 4)
VL__ROWS_BLOCK(u16, 16, 8, 3)

#define LOAD4PS(p, step) _mm512_castsi512_ps(load4(p, step, ins))
#define LOAD4PD(p, step) _mm512_castsi512_pd(load4(p, step, ins))
/* A block's 64-byte rows: plain stores, or (stream) non-temporal ones of whole lines. */
#define STORE64PS(p, v, stream)                                                                    \
  ((stream) ? _mm512_stream_ps((float *)(void *)(p), v) : _mm512_storeu_ps((float *)(void *)(p), v))
#define STORE64PD(p, v, stream)                                                                    \
  ((stream) ? _mm512_stream_pd((double *)(void *)(p), v)                                           \
            : _mm512_storeu_pd((double *)(void *)(p), v))

/* 4 x cols columns of 16 rows (the tile's blocks: 16 columns; the streamed ones: 8, as many
 * destination rows as the engine streams per call) */
INLINE void block_u32(char *d, const char *s, ptrdiff_t dx, ptrdiff_t sy, bool ins, bool stream,
                      int cols) {
#define ROW_STORE(p, v) STORE64PS(p, v, stream)
  for (int g = 0; g < cols; g++) { /* columns 4g .. 4g + 3; lane k holds rows 4k .. 4k + 3 */
    const char *c = s + 16 * g;
    __m512 t0 = LOAD4PS(c, 4 * sy), t1 = LOAD4PS(c + sy, 4 * sy);
    __m512 t2 = LOAD4PS(c + 2 * sy, 4 * sy), t3 = LOAD4PS(c + 3 * sy, 4 * sy);
    VL__LANE_TRANSPOSE4_PS(512, ROW_STORE, t0, t1, t2, t3, d + 4 * g * dx, dx);
  }
#undef ROW_STORE
}

INLINE void block_u64(char *d, const char *s, ptrdiff_t dx, ptrdiff_t sy, bool ins, bool stream) {
  for (int g = 0; g < 4; g++) { /* columns 2g, 2g + 1; lane k holds rows 2k, 2k + 1 */
    const char *c = s + 16 * g;
    __m512d t0 = LOAD4PD(c, 2 * sy), t1 = LOAD4PD(c + sy, 2 * sy);
    STORE64PD(d + 2 * g * dx, _mm512_unpacklo_pd(t0, t1), stream);
    STORE64PD(d + (2 * g + 1) * dx, _mm512_unpackhi_pd(t0, t1), stream);
  }
}

/* The blocks of each table: _m with masked windows, _i with inserts, _s with inserts and
 * non-temporal stores (the streamed transposes: each block writes one whole line of every
 * destination row it touches when d is on a line and dx a multiple of 64). */
#define VL__BLOCK_VARIANT(name, call)                                                              \
  static void name(char *d, const char *s, ptrdiff_t dx, ptrdiff_t sy) {                           \
    call;                                                                                          \
  }
VL__BLOCK_VARIANT(block_u8_m, block_u8(d, s, dx, sy, false))
VL__BLOCK_VARIANT(block_u8_i, block_u8(d, s, dx, sy, true))
VL__BLOCK_VARIANT(block_u16_m, block_u16(d, s, dx, sy, false))
VL__BLOCK_VARIANT(block_u16_i, block_u16(d, s, dx, sy, true))
VL__BLOCK_VARIANT(block_u32_m, block_u32(d, s, dx, sy, false, false, 4))
VL__BLOCK_VARIANT(block_u32_i, block_u32(d, s, dx, sy, true, false, 4))
VL__BLOCK_VARIANT(block_u32_s, block_u32(d, s, dx, sy, true, true, 2))
VL__BLOCK_VARIANT(block_u64_m, block_u64(d, s, dx, sy, false, false))
VL__BLOCK_VARIANT(block_u64_i, block_u64(d, s, dx, sy, true, false))
VL__BLOCK_VARIANT(block_u64_s, block_u64(d, s, dx, sy, true, true))

/* Every block writes 64 bytes of each destination row (VL__TILE_BODY_RECT); the rows after the
 * last whole stripe, the rows before the first line boundary and planes thinner than a block
 * take the AVX2 level's smaller blocks. */
#define VL__RECT_TILE(name, KX, KY, RK, E, block, ROW)                                             \
  static void name(char *d, const char *s, int64_t nx, int64_t ny, ptrdiff_t dx, ptrdiff_t sy) {   \
    VL__TILE_BODY_RECT(KX, KY, RK, E, block, vl__copy_kernels_avx2.tile[ROW], d, s, nx, ny, dx,    \
                       sy);                                                                        \
  }
VL__RECT_TILE(tile_u8_m, 16, 64, 16, 1, block_u8_m, 0)
VL__RECT_TILE(tile_u8_i, 16, 64, 16, 1, block_u8_i, 0)
VL__RECT_TILE(tile_u16_m, 8, 32, 8, 2, block_u16_m, 1)
VL__RECT_TILE(tile_u16_i, 8, 32, 8, 2, block_u16_i, 1)
VL__RECT_TILE(tile_u32_m, 16, 16, 8, 4, block_u32_m, 2)
VL__RECT_TILE(tile_u32_i, 16, 16, 8, 4, block_u32_i, 2)
VL__RECT_TILE(tile_u64_m, 8, 8, 4, 8, block_u64_m, 3)
VL__RECT_TILE(tile_u64_i, 8, 8, 4, 8, block_u64_i, 3)

/* The AMD table's byte and word transposes: each register is two 32-byte pieces, of source
 * rows j and j + K (one 256-bit load and a masked 256-bit broadcast: pair_load), so log2(K) rounds
 * of in-lane W-bit interleaves over K registers leave, in register x, columns x and K + x of rows
 * 0..K-1 and K..2K-1; a second set of K registers does rows 2K..4K-1, and one 128-bit lane shuffle
 * of a register of each set gives 64 bytes (4K elements) of one destination row. A block is 2K
 * columns by 4K rows: 16 x 64 bytes in 32 registers or 16 x 32 words (uint8: 128
 * unpacks and 32 lane shuffles per 2 KiB, against 48 inserts and 64 unpacks per KiB with
 * quarters). Rows of a plane after its last whole stripe (and before the first line boundary,
 * with aligned rows) take edge blocks: K source rows by 4K columns, each row one 64-byte load,
 * leaving 16 bytes of each of 4K destination rows. On Zen 5 these blocks with 64-byte tiles
 * (below) took uint8 768 x 196 from 0.27-0.29x to 0.47-0.48x memcpy and float16 from 0.29-0.31x
 * to 0.37-0.40x in the same runs; the 4 rows after 196's three stripes had cost about 40 % of
 * the old kernel's time on 16-row AVX2 blocks. */
#define LOAD32(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define LOAD64(p) _mm512_loadu_si512((const void *)(p))
/* A register of two 32-byte pieces, p's low and q's high: a load and a broadcast load merged
 * under a mask, both on the load ports, where vinserti64x4 (what the compiler makes of the
 * same intrinsics) takes a shuffle slot from the interleaves. On Zen 5, float16 768 x 196
 * 0.43-0.44x -> 0.45-0.46x memcpy over three alternated runs of 6 (uint8 unchanged, 0.46x). */
INLINE __m512i pair_load(const char *p, const char *q) {
  __m512i r = _mm512_castsi256_si512(LOAD32(p));
  __mmask8 high = 0xF0;
  __asm__("vbroadcasti64x4 %1, %0%{%2%}"
          : "+v"(r)
          : "m"(*(const char(*)[32])(const void *)q), "Yk"(high));
  return r;
}
#define VL__INTERLEAVE(W, K, ROUNDS, r)                                                            \
  do {                                                                                             \
    __m512i t_[K];                                                                                 \
    for (int round_ = 0; round_ < (ROUNDS); round_++) {                                            \
      for (int i_ = 0; i_ < (K) / 2; i_++) {                                                       \
        t_[2 * i_] = _mm512_unpacklo_epi##W(r[i_], r[i_ + (K) / 2]);                               \
        t_[2 * i_ + 1] = _mm512_unpackhi_epi##W(r[i_], r[i_ + (K) / 2]);                           \
      }                                                                                            \
      for (int i_ = 0; i_ < (K); i_++) r[i_] = t_[i_];                                             \
    }                                                                                              \
  } while (0)

#define VL__PAIRS_TILE(sfx, W, K, ROUNDS, rest)                                                    \
  static void pairs_##sfx(char *d, const char *s, ptrdiff_t dx, ptrdiff_t sy) {                    \
    __m512i a[K], b[K];                                                                            \
    for (int j = 0; j < (K); j++) a[j] = pair_load(s + j * sy, s + (j + (K)) * sy);                \
    VL__INTERLEAVE(W, K, ROUNDS, a);                                                               \
    for (int j = 0; j < (K); j++)                                                                  \
      b[j] = pair_load(s + (j + 2 * (K)) * sy, s + (j + 3 * (K)) * sy);                            \
    VL__INTERLEAVE(W, K, ROUNDS, b);                                                               \
    for (int x = 0; x < (K); x++) {                                                                \
      _mm512_storeu_si512((void *)(d + x * dx), _mm512_shuffle_i64x2(a[x], b[x], 0x88));           \
      _mm512_storeu_si512((void *)(d + (x + (K)) * dx), _mm512_shuffle_i64x2(a[x], b[x], 0xDD));   \
    }                                                                                              \
  }                                                                                                \
  static void edge_##sfx(char *d, const char *s, ptrdiff_t dx, ptrdiff_t sy) {                     \
    __m512i a[K];                                                                                  \
    for (int j = 0; j < (K); j++) a[j] = LOAD64(s + j * sy);                                       \
    VL__INTERLEAVE(W, K, ROUNDS, a);                                                               \
    for (int x = 0; x < (K); x++) {                                                                \
      _mm_storeu_si128((__m128i *)(void *)(d + x * dx), _mm512_castsi512_si128(a[x]));             \
      _mm_storeu_si128((__m128i *)(void *)(d + ((K) + x) * dx),                                    \
                       _mm512_extracti32x4_epi32(a[x], 1));                                        \
      _mm_storeu_si128((__m128i *)(void *)(d + (2 * (K) + x) * dx),                                \
                       _mm512_extracti32x4_epi32(a[x], 2));                                        \
      _mm_storeu_si128((__m128i *)(void *)(d + (3 * (K) + x) * dx),                                \
                       _mm512_extracti32x4_epi32(a[x], 3));                                        \
    }                                                                                              \
  }                                                                                                \
  static void tile_##sfx(char *d, const char *s, int64_t nx, int64_t ny, ptrdiff_t dx,             \
                         ptrdiff_t sy) {                                                           \
    VL__TILE_BODY_EDGES(2 * (K), 4 * (K), (W) / 8, pairs_##sfx, edge_##sfx, 4 * (K), (K), rest, d, \
                        s, nx, ny, dx, sy);                                                        \
  }
VL__PAIRS_TILE(u8_p, 8, 16, 4, tile_u8_i)
VL__PAIRS_TILE(u16_p, 16, 8, 3, tile_u16_i)

/* The streamed transposes (AMD table): blocks of 8 columns of 16 floats or 8 of 8 doubles (one
 * line of each of 8 destination rows) walked down y, so each destination row's lines leave in
 * order (VL__STREAM_BODY); planes thinner than a block take the tile, with plain stores. */
static void stream_u32(char *d, const char *s, int64_t nx, int64_t ny, ptrdiff_t dx, ptrdiff_t sy) {
  VL__STREAM_BODY(8, 16, 4, block_u32_s, tile_u32_i, d, s, nx, ny, dx, sy);
}

static void stream_u64(char *d, const char *s, int64_t nx, int64_t ny, ptrdiff_t dx, ptrdiff_t sy) {
  VL__STREAM_BODY(8, 8, 8, block_u64_s, tile_u64_i, d, s, nx, ny, dx, sy);
}

/* ---- narrow planes: 3 channels of bytes ------------------------------------------------------ */

/* Deinterleave of 3 byte channels (NHWC -> NCHW images), four 48-byte groups (64 pixels) at a
 * time: vector v of group g is loaded into lane g of register v (load4 with a 48-byte step), so
 * the in-lane shuffles of the SSSE3 kernel (exec/copy_shuffle.h) run on four groups at once and
 * channel k's 64 bytes leave in one store. The pixels after the last four groups go to the
 * SSSE3 kernel. */
#define MASK(C, E, k, v) _mm512_broadcast_i32x4(_mm_setr_epi8(VL__MASK16(VL__SPLIT_AT, C, E, k, v)))

INLINE void split3_u8(char *d, const char *s, int64_t n, ptrdiff_t dx, bool ins) {
  const __m512i m[3][3] = {{MASK(3, 1, 0, 0), MASK(3, 1, 0, 1), MASK(3, 1, 0, 2)},
                           {MASK(3, 1, 1, 0), MASK(3, 1, 1, 1), MASK(3, 1, 1, 2)},
                           {MASK(3, 1, 2, 0), MASK(3, 1, 2, 1), MASK(3, 1, 2, 2)}};
  /* the pixels up to the first 64-byte boundary of channel 0 go to the SSSE3 kernel, so the
   * stores below do not split lines (none of the three when dx is a multiple of 64) */
  int64_t y = (int64_t)((64 - (uintptr_t)d % 64) % 64);
  if (y > n) y = n;
  if (y > 0) vl__copy_kernels_ssse3.split[0][1](d, s, y, dx);
  for (s += 3 * y; y + 64 <= n; y += 64, s += 192) {
    __m512i in[3];
    for (int v = 0; v < 3; v++) in[v] = load4(s + 16 * v, 48, ins);
    for (int k = 0; k < 3; k++) {
      __m512i o = _mm512_ternarylogic_epi32(_mm512_shuffle_epi8(in[0], m[k][0]),
                                            _mm512_shuffle_epi8(in[1], m[k][1]),
                                            _mm512_shuffle_epi8(in[2], m[k][2]), 0xFE);
      _mm512_storeu_si512((void *)(d + k * dx + y), o);
    }
  }
  if (y < n) vl__copy_kernels_ssse3.split[0][1](d + y, s, n - y, dx);
}
static void split3_u8_m(char *d, const char *s, int64_t n, ptrdiff_t dx) {
  split3_u8(d, s, n, dx, false);
}
static void split3_u8_i(char *d, const char *s, int64_t n, ptrdiff_t dx) {
  split3_u8(d, s, n, dx, true);
}

/* Interleave of 3 byte channels (NCHW -> NHWC images), 64 pixels at a time: each channel's 64
 * bytes are one load (lane g: pixels 16g .. 16g + 15), the in-lane shuffles of the SSSE3 kernel
 * give output vector v of each group g in lane g of register o[v], and two lane permutes per
 * output register gather the 192 interleaved bytes in order. The first pixels, up to where the
 * output reaches a line boundary (3 x + d = 0 mod 64; 43 is 3's inverse mod 64), and the
 * pixels after the last whole 64 go to the SSSE3 kernel. */
#define MMASK(C, E, k, v)                                                                          \
  _mm512_broadcast_i32x4(_mm_setr_epi8(VL__MASK16(VL__MERGE_AT, C, E, k, v)))

static void merge3_u8(char *d, const char *s, int64_t n, ptrdiff_t sy) {
  const __m512i m[3][3] = {{MMASK(3, 1, 0, 0), MMASK(3, 1, 0, 1), MMASK(3, 1, 0, 2)},
                           {MMASK(3, 1, 1, 0), MMASK(3, 1, 1, 1), MMASK(3, 1, 1, 2)},
                           {MMASK(3, 1, 2, 0), MMASK(3, 1, 2, 1), MMASK(3, 1, 2, 2)}};
  /* output chunk c (16 bytes) of a step is vector c % 3 of group c / 3: out0 = o0.g0 o1.g0
   * o2.g0 o0.g1, out1 = o1.g1 o2.g1 o0.g2 o1.g2, out2 = o2.g2 o0.g3 o1.g3 o2.g3; each is two
   * permutes of 64-bit words (indices 8..15 name the second operand's words) */
  const __m512i a0 = _mm512_setr_epi64(0, 1, 8, 9, 0, 0, 2, 3),
                b0 = _mm512_setr_epi64(0, 1, 2, 3, 8, 9, 6, 7),
                a1 = _mm512_setr_epi64(2, 3, 0, 0, 12, 13, 4, 5),
                b1 = _mm512_setr_epi64(0, 1, 10, 11, 4, 5, 6, 7),
                a2 = _mm512_setr_epi64(4, 5, 14, 15, 0, 0, 6, 7),
                b2 = _mm512_setr_epi64(0, 1, 2, 3, 14, 15, 6, 7);
  int64_t x = (int64_t)(((64 - (uintptr_t)d % 64) % 64) * 43 % 64);
  if (x > n) x = n;
  if (x > 0) vl__copy_kernels_ssse3.merge[0][1](d, s, x, sy);
  for (d += 3 * x; x + 64 <= n; x += 64, d += 192) {
    __m512i in[3], o[3];
    for (int k = 0; k < 3; k++) in[k] = _mm512_loadu_si512((const void *)(s + k * sy + x));
    for (int v = 0; v < 3; v++)
      o[v] = _mm512_ternarylogic_epi32(_mm512_shuffle_epi8(in[0], m[0][v]),
                                       _mm512_shuffle_epi8(in[1], m[1][v]),
                                       _mm512_shuffle_epi8(in[2], m[2][v]), 0xFE);
    __m512i t0 = _mm512_permutex2var_epi64(o[0], a0, o[1]);
    __m512i t1 = _mm512_permutex2var_epi64(o[1], a1, o[0]);
    __m512i t2 = _mm512_permutex2var_epi64(o[2], a2, o[0]);
    _mm512_storeu_si512((void *)d, _mm512_permutex2var_epi64(t0, b0, o[2]));
    _mm512_storeu_si512((void *)(d + 64), _mm512_permutex2var_epi64(t1, b1, o[2]));
    _mm512_storeu_si512((void *)(d + 128), _mm512_permutex2var_epi64(t2, b2, o[1]));
  }
  if (x < n) vl__copy_kernels_ssse3.merge[0][1](d, s + x, n - x, sy);
}

/* Tile shapes (source rows x bytes of each; 0: the engine's 512 rows of 128 bytes). 4- and
 * 8-byte tiles one block high and 1 KiB wide: each step reads K source rows of 1 KiB and writes
 * 1024 / E destination rows K elements at a time; 0.55x against 0.40x memcpy (4 bytes,
 * 768 x 196, cache-resident) and 0.50x against 0.33x (8 bytes, 384 x 196) with the engine's
 * default shape. 1- and 2-byte tiles keep the default 512 rows but are 512 and 1024 bytes wide
 * (each stripe of 64 or 32 rows is walked along 512 elements of x before the next; 128 bytes
 * measured 0.32x and 0.36x memcpy on 768 x 196, 512 / 1024 bytes 0.38x and 0.41-0.44x).
 * Larger copies are unchanged. */
const vl__copy_kernels vl__copy_kernels_avx512 = {
    .tile = {tile_u8_m, tile_u16_m, tile_u32_m, tile_u64_m},
    .tile_rows = {0, 0, 16, 8},
    .tile_bytes = {512, 1024, 1024, 1024},
    .split = {{NULL, split3_u8_m, NULL}},
    .merge = {{NULL, merge3_u8, NULL}}};

/* AMD (measured on Zen 5), inserts: 4- and 8-byte tiles 512 rows x 512 bytes and 2-byte ones
 * 512 x 256, as the AVX2 level's. On Zen 5 the Intel shape (one block high x 1 KiB) measured
 * 0.43x against these shapes' 0.54x memcpy on f32 768x196, and 0.43x against 0.57x on f64
 * 384x196. */
const vl__copy_kernels vl__copy_kernels_avx512_amd = {
    .tile = {tile_u8_p, tile_u16_p, tile_u32_i, tile_u64_i},
    .tile_rows = {0, 512, 512, 512},
    .tile_bytes = {64, 256, 512, 512},
    .split = {{NULL, split3_u8_i, NULL}},
    .merge = {{NULL, merge3_u8, NULL}},
    .stream = {NULL, NULL, stream_u32, stream_u64}};

/* Zen 4 (AMD family 19h): its 512-bit operations take two passes of the 256-bit units, so the
 * float transposes of the AMD table (48 inserts and 32 shuffles of 512 bits a KiB) cost about
 * twice the AVX2 level's 8 x 8 blocks (32 inserts and 64 shuffles of 256 bits), and the
 * 3-channel byte images run faster on the AVX2 level's 256-bit kernels too: this table is the
 * AMD one with the AVX2 level's float tile and its walk over whole planes (still streaming with
 * the AMD table's kernel past the streaming threshold) and no image kernels (the engine takes
 * the AVX2 level's). Measured on an AMD EPYC (Zen 4, 1 MiB L2 a core, 32 MiB L3), alternated
 * runs against the AMD table, median ours_vs_memcpy: float32 [1,64,112,112] channels-last 0.62
 * -> 0.72 with the tile, 0.80 with the walk; [1,768,14,14] 0.68 -> 0.78; uint8 224^2 images
 * NHWC -> NCHW 0.66 -> 0.87, NCHW -> NHWC 0.78 -> 0.82; byte, 2-byte and 8-byte transposes and
 * the 25.7 MB float copy (streamed) unchanged (docs/kernels.md). */
const vl__copy_kernels vl__copy_kernels_avx512_zen4 = {
    .tile = {tile_u8_p, tile_u16_p, vl__copy_avx2_tile_u32, tile_u64_i},
    .tile_rows = {0, 512, 512, 512},
    .tile_bytes = {64, 256, 512, 512},
    .stream = {NULL, NULL, stream_u32, stream_u64},
    .plane = {NULL, NULL, vl__copy_avx2_plane_u32, NULL}};
#elif defined(__x86_64__)
const vl__copy_kernels vl__copy_kernels_avx512 = {.tile = {NULL}};
const vl__copy_kernels vl__copy_kernels_avx512_amd = {.tile = {NULL}};
const vl__copy_kernels vl__copy_kernels_avx512_zen4 = {.tile = {NULL}};
#else
typedef int vl__copy_avx512_unused; /* not x86-64: the file is empty */
#endif

/* copy_avx2.c - the AVX2 level of the copy engine (built with -mavx2 on x86-64).
 *
 * Transposes: blocks in 256-bit registers where each register is loaded as two 128-bit halves
 * from rows i and i + K/2, so the in-lane unpacks of AVX2 do the transpose: 16x16 bytes (8
 * registers, 24 unpacks, the two lanes joined by 128-bit unpacks at the 16-byte stores; a block
 * of 32 rows x 16 in 16 registers with one 32-byte store per destination row ran 1.06x as fast
 * on Zen 3, but this one is 1.24x as fast as that on Zen 1, uint8 768x196), 16 rows x 8 of 2
 * bytes (one 32-byte store per destination row, no cross-lane permute; walked by
 * VL__TILE_BODY_RECT, the rows after the last stripe and thinner planes on 8x8 2-byte blocks),
 * 8x8 of 4 bytes (8 registers, 16), 4x4 of 8 bytes (4 registers, 4). The last block of a row or
 * column overlaps the one before it (VL__TILE_BODY). The streamed transposes of 4- and 8-byte
 * elements (copies of 2 MiB and more) run the same transposes twice per block, so each
 * destination row gets one whole 64-byte line, streamed out from the registers. Narrow planes
 * (images) on 256-bit registers: 3 channels of 2-byte elements by word blends and one shuffle per
 * channel, of bytes by shuffles that gather two channels at once, unpacks and dword blends (the
 * fewest operations found for Zen 1's two shuffle pipes); 4 channels with the SSSE3 kernels in VEX
 * encoding. */
#include "exec/copy_kernels.h"

#if defined(__x86_64__) && defined(__AVX2__)
#include <immintrin.h>

#include "exec/copy_shuffle.h"

#define LOAD16(p) _mm_loadu_si128((const __m128i *)(const void *)(p))
#define STORE16(p, v) _mm_storeu_si128((__m128i *)(void *)(p), (v))
/* A register of two 16-byte halves: lane 0 from p, lane 1 from q. */
#define LOAD2(p, q) _mm256_inserti128_si256(_mm256_castsi128_si256(LOAD16(p)), LOAD16(q), 1)
#define LOAD2PS(p, q)                                                                              \
  _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps((const float *)(const void *)(p))),     \
                       _mm_loadu_ps((const float *)(const void *)(q)), 1)
#define LOAD2PD(p, q)                                                                              \
  _mm256_insertf128_pd(_mm256_castpd128_pd256(_mm_loadu_pd((const double *)(const void *)(p))),    \
                       _mm_loadu_pd((const double *)(const void *)(q)), 1)
#define STOREPD(p, v) _mm256_storeu_pd((double *)(void *)(p), (v))
#define STOREPS(p, v) _mm256_storeu_ps((float *)(void *)(p), (v))
#define LOAD32(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define STORE32(p, v) _mm256_storeu_si256((__m256i *)(void *)(p), (v))
/* Stores lane 0 of v at p and lane 1 at q. */
#define STORE2(p, q, v)                                                                            \
  do {                                                                                             \
    STORE16(p, _mm256_castsi256_si128(v));                                                         \
    STORE16(q, _mm256_extracti128_si256(v, 1));                                                    \
  } while (0)

/* ---- transposes ------------------------------------------------------------------------------ */

static void block_u8(char *d, const char *s, ptrdiff_t dx, ptrdiff_t sy) {
  __m256i t[8], a[8], b[8];
  for (int i = 0; i < 8; i++) t[i] = LOAD2(s + i * sy, s + (i + 8) * sy);
  for (int i = 0; i < 4; i++) {
    a[2 * i] = _mm256_unpacklo_epi8(t[2 * i], t[2 * i + 1]);
    a[2 * i + 1] = _mm256_unpackhi_epi8(t[2 * i], t[2 * i + 1]);
  }
  /* a[0..7]: rows (0,1) cols 0-7, (0,1) 8-15, (2,3) 0-7, (2,3) 8-15, (4,5) ..., (6,7) ... */
  for (int h = 0; h < 2; h++) {
    for (int i = 0; i < 2; i++) {
      b[4 * h + 2 * i] = _mm256_unpacklo_epi16(a[4 * h + i], a[4 * h + i + 2]);
      b[4 * h + 2 * i + 1] = _mm256_unpackhi_epi16(a[4 * h + i], a[4 * h + i + 2]);
    }
  }
  /* b[0..3]: rows 0-3 (lane 0) and 8-11 (lane 1) of cols 0-3, 4-7, 8-11, 12-15; b[4..7]: rows
   * 4-7 and 12-15 of the same */
  for (int i = 0; i < 4; i++) {
    __m256i lo = _mm256_unpacklo_epi32(b[i], b[i + 4]), hi = _mm256_unpackhi_epi32(b[i], b[i + 4]);
    /* lo: cols 4i, 4i+1, rows 0-7 in lane 0 and 8-15 in lane 1; hi: cols 4i+2, 4i+3. The lanes
     * meet in 128-bit unpacks (a cross-lane permute costs more than the extract it saves). */
    __m128i l0 = _mm256_castsi256_si128(lo), l1 = _mm256_extracti128_si256(lo, 1);
    __m128i h0 = _mm256_castsi256_si128(hi), h1 = _mm256_extracti128_si256(hi, 1);
    STORE16(d + (4 * i) * dx, _mm_unpacklo_epi64(l0, l1));
    STORE16(d + (4 * i + 1) * dx, _mm_unpackhi_epi64(l0, l1));
    STORE16(d + (4 * i + 2) * dx, _mm_unpacklo_epi64(h0, h1));
    STORE16(d + (4 * i + 3) * dx, _mm_unpackhi_epi64(h0, h1));
  }
}

/* The transpose of N registers, register i holding source rows i and i + N (LOAD2): ROUNDS
 * rounds of in-lane interleaves (UNPACKLO, UNPACKHI) leave column x of all 2N rows in register x,
 * stored as destination row x. */
#define VL__INTERLEAVE_BLOCK(N, ROUNDS, UNPACKLO, UNPACKHI)                                        \
  do {                                                                                             \
    __m256i r[N], t[N];                                                                            \
    for (int i = 0; i < (N); i++) r[i] = LOAD2(s + i * sy, s + (i + (N)) * sy);                    \
    for (int round = 0; round < (ROUNDS); round++) {                                               \
      for (int i = 0; i < (N) / 2; i++) {                                                          \
        t[2 * i] = UNPACKLO(r[i], r[i + (N) / 2]);                                                 \
        t[2 * i + 1] = UNPACKHI(r[i], r[i + (N) / 2]);                                             \
      }                                                                                            \
      for (int i = 0; i < (N); i++) r[i] = t[i];                                                   \
    }                                                                                              \
    for (int x = 0; x < (N); x++) _mm256_storeu_si256((__m256i *)(void *)(d + x * dx), r[x]);      \
  } while (0)

static void block_u16(char *d, const char *s, ptrdiff_t dx, ptrdiff_t sy) {
  __m256i t[4], a[4];
  for (int i = 0; i < 4; i++) t[i] = LOAD2(s + i * sy, s + (i + 4) * sy);
  a[0] = _mm256_unpacklo_epi16(t[0], t[1]);
  a[1] = _mm256_unpackhi_epi16(t[0], t[1]);
  a[2] = _mm256_unpacklo_epi16(t[2], t[3]);
  a[3] = _mm256_unpackhi_epi16(t[2], t[3]);
  for (int i = 0; i < 2; i++) {
    __m256i lo = _mm256_unpacklo_epi32(a[i], a[i + 2]), hi = _mm256_unpackhi_epi32(a[i], a[i + 2]);
    lo = _mm256_permute4x64_epi64(lo, 0xD8);
    hi = _mm256_permute4x64_epi64(hi, 0xD8);
    STORE2(d + (4 * i) * dx, d + (4 * i + 1) * dx, lo);
    STORE2(d + (4 * i + 2) * dx, d + (4 * i + 3) * dx, hi);
  }
}

/* 16 source rows of 8 elements: register i holds rows i and i + 8, so three rounds of in-lane
 * interleaves leave column x of all 16 rows in register x, one 32-byte store per destination
 * row (no cross-lane permute). */
static void block_u16x16(char *d, const char *s, ptrdiff_t dx, ptrdiff_t sy) {
  VL__INTERLEAVE_BLOCK(8, 3, _mm256_unpacklo_epi16, _mm256_unpackhi_epi16);
}

static inline __attribute__((always_inline)) void block_u32(char *d, const char *s, ptrdiff_t dx,
                                                            ptrdiff_t sy) {
  for (int h = 0; h < 2; h++) { /* columns 4h .. 4h + 3 */
    const char *c = s + 16 * h;
    __m256 t0 = LOAD2PS(c, c + 4 * sy), t1 = LOAD2PS(c + sy, c + 5 * sy);
    __m256 t2 = LOAD2PS(c + 2 * sy, c + 6 * sy), t3 = LOAD2PS(c + 3 * sy, c + 7 * sy);
    VL__LANE_TRANSPOSE4_PS(256, STOREPS, t0, t1, t2, t3, d + 4 * h * dx, dx);
  }
}

static void block_u64(char *d, const char *s, ptrdiff_t dx, ptrdiff_t sy) {
  for (int h = 0; h < 2; h++) { /* columns 2h, 2h + 1 */
    const char *c = s + 16 * h;
    __m256d t0 = LOAD2PD(c, c + 2 * sy), t1 = LOAD2PD(c + sy, c + 3 * sy);
    STOREPD(d + 2 * h * dx, _mm256_unpacklo_pd(t0, t1));
    STOREPD(d + (2 * h + 1) * dx, _mm256_unpackhi_pd(t0, t1));
  }
}

/* 16 source rows of 8 floats as 8 whole destination lines, streamed out from the registers:
 * each half of 4 columns is two 4 x 4 lane transposes (rows 0-7, then 8-15), and a column's two
 * results are the two halves of one line, stored back to back so the line leaves complete. */
static void block_stream_u32(char *d, const char *s, ptrdiff_t dx, ptrdiff_t sy) {
  for (int h = 0; h < 2; h++) { /* columns 4h .. 4h + 3 */
    __m256 r[2][4];
    for (int v = 0; v < 2; v++) { /* source rows 8v .. 8v + 7 */
      const char *c = s + 16 * h + 8 * v * sy;
      __m256 t0 = LOAD2PS(c, c + 4 * sy), t1 = LOAD2PS(c + sy, c + 5 * sy);
      __m256 t2 = LOAD2PS(c + 2 * sy, c + 6 * sy), t3 = LOAD2PS(c + 3 * sy, c + 7 * sy);
      __m256 a0 = _mm256_unpacklo_ps(t0, t1), a1 = _mm256_unpackhi_ps(t0, t1);
      __m256 a2 = _mm256_unpacklo_ps(t2, t3), a3 = _mm256_unpackhi_ps(t2, t3);
      r[v][0] = _mm256_shuffle_ps(a0, a2, 0x44);
      r[v][1] = _mm256_shuffle_ps(a0, a2, 0xEE);
      r[v][2] = _mm256_shuffle_ps(a1, a3, 0x44);
      r[v][3] = _mm256_shuffle_ps(a1, a3, 0xEE);
    }
    for (int j = 0; j < 4; j++) {
      float *o = (float *)(void *)(d + (4 * h + j) * dx);
      _mm256_stream_ps(o, r[0][j]);
      _mm256_stream_ps(o + 8, r[1][j]);
    }
  }
}

/* 8 source rows of 4 doubles as 4 whole destination lines, the same way: two 2 x 2 lane
 * transposes per pair of columns (rows 0-3, then 4-7), a column's two results one line. */
static void block_stream_u64(char *d, const char *s, ptrdiff_t dx, ptrdiff_t sy) {
  for (int h = 0; h < 2; h++) { /* columns 2h, 2h + 1 */
    __m256d r[2][2];
    for (int v = 0; v < 2; v++) { /* source rows 4v .. 4v + 3 */
      const char *c = s + 16 * h + 4 * v * sy;
      __m256d t0 = LOAD2PD(c, c + 2 * sy), t1 = LOAD2PD(c + sy, c + 3 * sy);
      r[v][0] = _mm256_unpacklo_pd(t0, t1);
      r[v][1] = _mm256_unpackhi_pd(t0, t1);
    }
    for (int j = 0; j < 2; j++) {
      double *o = (double *)(void *)(d + (2 * h + j) * dx);
      _mm256_stream_pd(o, r[0][j]);
      _mm256_stream_pd(o + 4, r[1][j]);
    }
  }
}

VL__LEVEL_TILE(u8, 16, 1, 0)
VL__LEVEL_TILE(u16, 8, 2, 1)
VL__LEVEL_TILE(u32, 8, 4, 2)

/* The float tile as a kernel of its own, for the AVX-512 table of Zen 4 (copy_avx512.c). */
void vl__copy_avx2_tile_u32(char *d, const char *s, int64_t nx, int64_t ny, ptrdiff_t dx,
                            ptrdiff_t sy) {
  tile_u32(d, s, nx, ny, dx, sy);
}

/* The 8 x 8 blocks of one 8-row stripe w >= 8 columns wide: pairs of blocks, then the last
 * block moved back to end at the edge (rewriting a few elements with the values they got). */
static inline __attribute__((always_inline)) void stripe_u32(char *d, const char *s, int64_t w,
                                                             ptrdiff_t dx, ptrdiff_t sy) {
  int64_t x = 0;
  for (; x + 16 <= w; x += 16) {
    block_u32(d + x * dx, s + x * 4, dx, sy);
    block_u32(d + (x + 8) * dx, s + (x + 8) * 4, dx, sy);
  }
  if (x < w) {
    block_u32(d + (w - 8) * dx, s + (w - 8) * 4, dx, sy);
    if (w - x > 8) block_u32(d + x * dx, s + x * 4, dx, sy);
  }
}

/* One tile of w x h >= 8 x 8: its stripes by pointer steps, the last moved back. */
static inline __attribute__((always_inline)) void walk_u32(char *d, const char *s, int64_t w,
                                                           int64_t h, ptrdiff_t dx, ptrdiff_t sy) {
  int64_t y = 0;
  for (char *o = d; y + 8 <= h; y += 8, o += 32, s += 8 * sy) stripe_u32(o, s, w, dx, sy);
  if (y < h) stripe_u32(d + (h - 8) * 4, s - y * sy + (h - 8) * sy, w, dx, sy);
}

/* The float tile's walk over a plane in tiles of bx x by (the last ones narrower, or moved back
 * when narrower than a block), all in one function: the stripes advance by pointer steps
 * instead of the tile's move-back test on every stripe, and the usual tile widths (16, 32 and
 * 64 columns: the engine narrows tiles to 4 x the cache sets their rows share) compile with
 * their block counts known. On Zen 4, float32 [1,64,112,112] channels-last (16-column tiles)
 * read 0.69-0.72x memcpy through the tile called per tile and 0.79x with this walk, in a
 * scratch harness alternating both with memcpy on the same buffers. */
void vl__copy_avx2_plane_u32(char *d, const char *s, int64_t nx, int64_t ny, ptrdiff_t dx,
                             ptrdiff_t sy, int64_t bx, int64_t by) {
  if (nx < 8 || ny < 8 || bx < 8 || by < 8) {
    tile_u32(d, s, nx, ny, dx, sy);
    return;
  }
  for (int64_t y0 = 0; y0 < ny; y0 += by) {
    int64_t h = ny - y0 < by ? ny - y0 : by;
    if (h < 8) {
      y0 = ny - 8;
      h = 8;
    }
    for (int64_t x0 = 0; x0 < nx; x0 += bx) {
      int64_t w = nx - x0 < bx ? nx - x0 : bx;
      if (w < 8) {
        x0 = nx - 8;
        w = 8;
      }
      char *o = d + x0 * dx + y0 * 4;
      const char *i = s + x0 * 4 + y0 * sy;
      switch (w) {
      case 16: walk_u32(o, i, 16, h, dx, sy); break;
      case 32: walk_u32(o, i, 32, h, dx, sy); break;
      case 64: walk_u32(o, i, 64, h, dx, sy); break;
      default: walk_u32(o, i, w, h, dx, sy); break;
      }
    }
  }
}
VL__LEVEL_TILE(u64, 4, 8, 3)

/* 16-row stripes of 8 x 16 blocks; the rows after the last stripe and planes thinner than a
 * block take the 8 x 8 blocks (at least 8 rows: RK). */
static void tile_u16x16(char *d, const char *s, int64_t nx, int64_t ny, ptrdiff_t dx,
                        ptrdiff_t sy) {
  VL__TILE_BODY_RECT(8, 16, 8, 2, block_u16x16, tile_u16, d, s, nx, ny, dx, sy);
}

/* floats: 8 columns of 16 rows a block */
static void stream_u32(char *d, const char *s, int64_t nx, int64_t ny, ptrdiff_t dx, ptrdiff_t sy) {
  VL__STREAM_BODY(8, 16, 4, block_stream_u32, tile_u32, d, s, nx, ny, dx, sy);
}

/* doubles: 4 columns of 8 rows a block */
static void stream_u64(char *d, const char *s, int64_t nx, int64_t ny, ptrdiff_t dx, ptrdiff_t sy) {
  VL__STREAM_BODY(4, 8, 8, block_stream_u64, tile_u64, d, s, nx, ny, dx, sy);
}

/* ---- narrow planes ---------------------------------------------------------------------------
 * The SSSE3 kernels (exec/copy_shuffle.h), compiled here in VEX encoding: 0.46x -> 0.52x memcpy
 * on 224^2 uint8 images in both directions on a core with 128-bit vector units (the two-operand
 * pshufb needs a register copy per shuffle). The 3-channel ones serve the blend kernels below
 * for the pixels after their last step. */
VL__SSSE3_NARROW(3, 1, u8)
VL__SSSE3_NARROW(3, 2, u16)
VL__SSSE3_NARROW4(1, u8)
VL__SSSE3_NARROW4(2, u16)

#define MASK256(F, C, E, k, v) _mm256_broadcastsi128_si256(VL__MASK(F, C, E, k, v))

/* Three channels of 2-byte elements by blends (exec/copy_shuffle.h), 16 pixels a step: each
 * 256-bit register holds one 48-byte group per lane, so a step is 3 loads (and 3 inserts), 6
 * word blends and 3 shuffles, 3 stores (split) or 3 loads, 3 shuffles, 6 word blends and 6
 * 16-byte stores (merge), against 18 shuffles and 12 ORs for the same 96 bytes above (blends do
 * not take the shuffle units); the 128-bit kernels above take the pixels after the last whole
 * step. The slots are whole words, so the blends take immediates (SELECT3_W: bit i set where
 * word i of vector v holds channel k). Byte-mask blends (vpblendvb) run at half the rate of
 * these on Zen 1 and a lane permute (vperm2i128) takes three cycles there, so the merge stores
 * each lane on its own. */
#define SELECT3_W(k, v)                                                                            \
  ((((8 * (v) + 0) % 3 == (k)) << 0) | (((8 * (v) + 1) % 3 == (k)) << 1) |                         \
   (((8 * (v) + 2) % 3 == (k)) << 2) | (((8 * (v) + 3) % 3 == (k)) << 3) |                         \
   (((8 * (v) + 4) % 3 == (k)) << 4) | (((8 * (v) + 5) % 3 == (k)) << 5) |                         \
   (((8 * (v) + 6) % 3 == (k)) << 6) | (((8 * (v) + 7) % 3 == (k)) << 7))
/* Slot by slot, the one of a, b, c whose slot holds channel k1 of vector v1 (b) or k2 of v2 (c),
 * else a. */
#define BLEND3W(a, b, c, k1, v1, k2, v2)                                                           \
  _mm256_blend_epi16(_mm256_blend_epi16(a, b, SELECT3_W(k1, v1)), c, SELECT3_W(k2, v2))
static void split3b_u16(char *d, const char *s, int64_t n, ptrdiff_t dx) {
  int64_t y = 0;
  for (; y + 16 <= n; y += 16, s += 96) {
    __m256i a = LOAD2(s, s + 48), b = LOAD2(s + 16, s + 64), c = LOAD2(s + 32, s + 80);
    __m256i t0 = BLEND3W(a, b, c, 0, 1, 0, 2), t1 = BLEND3W(a, b, c, 1, 1, 1, 2);
    __m256i t2 = BLEND3W(a, b, c, 2, 1, 2, 2);
    STORE32(d + y * 2, _mm256_shuffle_epi8(t0, MASK256(VL__SPLIT3_GATHER, 3, 2, 0, 0)));
    STORE32(d + dx + y * 2, _mm256_shuffle_epi8(t1, MASK256(VL__SPLIT3_GATHER, 3, 2, 1, 0)));
    STORE32(d + 2 * dx + y * 2, _mm256_shuffle_epi8(t2, MASK256(VL__SPLIT3_GATHER, 3, 2, 2, 0)));
  }
  if (y < n) split3_u16(d + y * 2, s, n - y, dx);
}
static void merge3b_u16(char *d, const char *s, int64_t n, ptrdiff_t sy) {
  int64_t x = 0;
  for (; x + 16 <= n; x += 16, d += 96) {
    __m256i r = _mm256_shuffle_epi8(LOAD32(s + x * 2), MASK256(VL__MERGE3_GATHER, 3, 2, 0, 0));
    __m256i g = _mm256_shuffle_epi8(LOAD32(s + sy + x * 2), MASK256(VL__MERGE3_GATHER, 3, 2, 1, 0));
    __m256i b =
        _mm256_shuffle_epi8(LOAD32(s + 2 * sy + x * 2), MASK256(VL__MERGE3_GATHER, 3, 2, 2, 0));
    /* lane 0 of each output vector is in the first 48 bytes, lane 1 in the next 48 */
    STORE2(d, d + 48, BLEND3W(r, g, b, 1, 0, 2, 0));
    STORE2(d + 16, d + 64, BLEND3W(r, g, b, 1, 1, 2, 1));
    STORE2(d + 32, d + 80, BLEND3W(r, g, b, 1, 2, 2, 2));
  }
  if (x < n) merge3_u16(d, s + x * 2, n - x, sy);
}

/* Three channels of bytes, 32 pixels a step (one 48-byte group per 128-bit lane), with as few
 * operations as the shuffle units allow (Zen 1: two 128-bit shuffle pipes; ANDs, ORs and dword
 * blends on all four). Split: two shuffles each gather P = R0-7 | G0-7 from vectors a, b and
 * Q = G8-15 | R8-15 from b, c; R is P's low half and Q's high half (a dword blend) and G the
 * middle of Q:P (alignr); B is three shuffles ORed, as in the 128-bit kernel. Merge: unpacks
 * interleave R and G (an alignr of the two gives the pairs of the middle 16 output bytes), one
 * shuffle puts each 16 bytes' pairs in place, leaving the B slots zero, and B, put in place by
 * one shuffle for all three, is ANDed into them (SELECT3_B). Per 96 bytes that is 8 shuffles
 * and 5 other operations (split) or 7 and 6 (merge). The word kernels' form on bytes needs 6
 * byte-mask blends beside its 3 shuffles, or 15 ANDs and ORs in their place. 224^2 images, side
 * by side on Zen 1 (medians of 5): split 0.44x -> 0.53x memcpy, merge 0.38x -> 0.57x; the AND
 * and OR form of the word kernels reached 0.47x and 0.48x. */
#define SPLIT_RG(C, E, k, v, j)                                                                    \
  VL__IN16(3 * ((k) == 0 ? (j) % 8 : 8 + (j) % 8) + (((j) < 8) == ((k) == 0) ? 0 : 1) - 16 * (v))
#define MERGE_RG_BASE(v) ((v) == 0 ? 0 : (v) == 1 ? 10 : 16)
#define MERGE_RG(C, E, k, v, j)                                                                    \
  ((16 * (v) + (j)) % 3 == 2                                                                       \
       ? (char)-128                                                                                \
       : (char)(2 * ((16 * (v) + (j)) / 3) + (16 * (v) + (j)) % 3 - MERGE_RG_BASE(v)))
#define SELECT3_B(C, E, k, v, j) (VL__SELECT3(C, E, k, v, j) ? (char)-1 : 0)
static void split3b_u8(char *d, const char *s, int64_t n, ptrdiff_t dx) {
  int64_t y = 0;
  for (; y + 32 <= n; y += 32, s += 96) {
    __m256i a = LOAD2(s, s + 48), b = LOAD2(s + 16, s + 64), c = LOAD2(s + 32, s + 80);
    __m256i p = _mm256_or_si256(_mm256_shuffle_epi8(a, MASK256(SPLIT_RG, 3, 1, 0, 0)),
                                _mm256_shuffle_epi8(b, MASK256(SPLIT_RG, 3, 1, 0, 1)));
    __m256i q = _mm256_or_si256(_mm256_shuffle_epi8(b, MASK256(SPLIT_RG, 3, 1, 1, 1)),
                                _mm256_shuffle_epi8(c, MASK256(SPLIT_RG, 3, 1, 1, 2)));
    __m256i bl =
        _mm256_or_si256(_mm256_or_si256(_mm256_shuffle_epi8(a, MASK256(VL__SPLIT_AT, 3, 1, 2, 0)),
                                        _mm256_shuffle_epi8(b, MASK256(VL__SPLIT_AT, 3, 1, 2, 1))),
                        _mm256_shuffle_epi8(c, MASK256(VL__SPLIT_AT, 3, 1, 2, 2)));
    STORE32(d + y, _mm256_blend_epi32(p, q, 0xCC));
    STORE32(d + dx + y, _mm256_alignr_epi8(q, p, 8));
    STORE32(d + 2 * dx + y, bl);
  }
  if (y < n) split3_u8(d + y, s, n - y, dx);
}
static void merge3b_u8(char *d, const char *s, int64_t n, ptrdiff_t sy) {
  int64_t x = 0;
  for (; x + 32 <= n; x += 32, d += 96) {
    __m256i r = LOAD32(s + x), g = LOAD32(s + sy + x);
    __m256i b = _mm256_shuffle_epi8(LOAD32(s + 2 * sy + x), MASK256(VL__MERGE3_GATHER, 3, 1, 2, 0));
    __m256i lo = _mm256_unpacklo_epi8(r, g), hi = _mm256_unpackhi_epi8(r, g);
    __m256i mid = _mm256_alignr_epi8(hi, lo, 10);
    __m256i o0 = _mm256_or_si256(_mm256_shuffle_epi8(lo, MASK256(MERGE_RG, 3, 1, 0, 0)),
                                 _mm256_and_si256(b, MASK256(SELECT3_B, 3, 1, 2, 0)));
    __m256i o1 = _mm256_or_si256(_mm256_shuffle_epi8(mid, MASK256(MERGE_RG, 3, 1, 0, 1)),
                                 _mm256_and_si256(b, MASK256(SELECT3_B, 3, 1, 2, 1)));
    __m256i o2 = _mm256_or_si256(_mm256_shuffle_epi8(hi, MASK256(MERGE_RG, 3, 1, 0, 2)),
                                 _mm256_and_si256(b, MASK256(SELECT3_B, 3, 1, 2, 2)));
    STORE2(d, d + 48, o0);
    STORE2(d + 16, d + 64, o1);
    STORE2(d + 32, d + 80, o2);
  }
  if (x < n) merge3_u8(d, s + x, n - x, sy);
}

const vl__copy_kernels vl__copy_kernels_avx2 = {
    .tile = {tile_u8, tile_u16x16, tile_u32, tile_u64},
    /* Tiles of 512 rows, 2-byte ones 256 bytes wide, 4- and 8-byte ones 512 (against the
     * engine's 128: f16 768x196 0.48x -> 0.51x memcpy, f32 768x196 0.53x -> 0.58x, f64
     * 384x196 0.64x -> 0.74x in the engine microbench) */
    .tile_rows = {0, 512, 512, 512},
    .tile_bytes = {0, 256, 512, 512},
    .split = {{NULL, split3b_u8, split4_u8}, {NULL, split3b_u16, split4_u16}},
    .merge = {{NULL, merge3b_u8, NULL}, {NULL, merge3b_u16, NULL}},
    .stream = {NULL, NULL, stream_u32, stream_u64},
    /* the float tile's walk over whole planes (vl__copy_avx2_plane_u32): measured on Zen 4 at
     * this level (--level avx2), f32 [1,64,112,112] channels-last 0.63-0.73x -> 0.75-0.81x
     * memcpy, f32 768x196 0.69-0.80x -> 0.76-0.87x (three alternated runs each) */
    .plane = {NULL, NULL, vl__copy_avx2_plane_u32, NULL},
};
#elif defined(__x86_64__)
const vl__copy_kernels vl__copy_kernels_avx2 = {.tile = {NULL}};
#else
typedef int vl__copy_avx2_unused; /* not x86-64: the file is empty */
#endif

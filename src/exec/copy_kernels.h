/* copy_kernels.h - the inner kernels of the copy engine (src/exec/copy.c), one constant table
 * per level of the machine's vector units (vl_copy_level in viewlower/copy.h).
 *
 * Each x86 table lives in its own file, compiled with that level's instruction-set flags
 * (copy_ssse3.c: -mssse3, copy_avx2.c: -mavx2, copy_avx512.c: -mavx512f -mavx512bw -mavx512vl;
 * see src/CMakeLists.txt); the engine calls them only when vl_copy_level_native() says the CPU
 * runs that level. A NULL entry means "the next lower level's kernel". The tables are constant:
 * the dispatch keeps no state. */
#ifndef VL_EXEC_COPY_KERNELS_H
#define VL_EXEC_COPY_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* A typed strided line: n elements, each step ds / ss bytes. */
typedef void (*vl__line_fn)(char *d, const char *s, int64_t n, ptrdiff_t ds, ptrdiff_t ss);
/* nx x ny elements: element (x, y) sits at d + x*dx + y*size and at s + x*size + y*sy (the
 * destination is contiguous along y, the source along x). */
typedef void (*vl__tile_fn)(char *d, const char *s, int64_t nx, int64_t ny, ptrdiff_t dx,
                            ptrdiff_t sy);
/* A whole transpose plane as tile_fn's, walked in tiles of bx x by elements (the engine's
 * shape for the plane) by the kernel itself, so its loops and blocks compile as one. */
typedef void (*vl__plane_fn)(char *d, const char *s, int64_t nx, int64_t ny, ptrdiff_t dx,
                             ptrdiff_t sy, int64_t bx, int64_t by);
/* Narrow planes of NX = 2..4 rows. split: n dense source rows of NX elements become NX
 * destination rows stride bytes apart (deinterleave); merge: NX source rows stride bytes apart
 * become n dense destination rows of NX elements (interleave). */
typedef void (*vl__narrow_fn)(char *d, const char *s, int64_t n, ptrdiff_t stride);

#define VL__NARROW_MAX 4

typedef struct vl__copy_kernels {
  vl__tile_fn tile[4]; /* element sizes 1, 2, 4, 8 */
  /* The tile shape these tiles prefer: source rows per tile and bytes of each (0: the engine's
   * 512 rows of 128 bytes). */
  uint16_t tile_rows[4], tile_bytes[4];
  vl__narrow_fn split[4][VL__NARROW_MAX - 1], merge[4][VL__NARROW_MAX - 1]; /* [size][NX - 2] */
  /* Streamed transposes that write whole destination lines straight from registers with
   * non-temporal stores, as the tile of the same row but with d on a 64-byte line, dx a
   * multiple of 64 and ny * size a multiple of 64; the caller fences. NULL: the engine
   * transposes into a buffer and streams that out. Used only with this table's own tile. */
  vl__tile_fn stream[4];
  /* The tile's walk over a whole plane (vl__plane_fn), or NULL: the engine calls the tile once
   * per tile. Used only with this table's own tile. */
  vl__plane_fn plane[4];
} vl__copy_kernels;

/* The portable kernels (copy_portable.c): every entry set. Its tiles also serve the planes
 * thinner than a wider level's blocks. */
extern const vl__copy_kernels vl__copy_kernels_portable;
extern const vl__line_fn vl__copy_lines_portable[4]; /* element sizes 1, 2, 4, 8 */
extern const vl__tile_fn vl__copy_tiles_portable[4];

/* The body of a tile kernel: whole KX x KY blocks (KX source columns, KY source rows) along x
 * first (each source line is used up at once), the last block of each row and column moved
 * back to end at the plane's edge, so it rewrites a few elements with the values they already
 * got (source and destination never overlap). A plane thinner than a block goes to small. */
#define VL__TILE_BODY2(KX, KY, E, block, small, d, s, nx, ny, dx, sy)                              \
  do {                                                                                             \
    if ((nx) < (KX) || (ny) < (KY)) {                                                              \
      small(d, s, nx, ny, dx, sy);                                                                 \
      break;                                                                                       \
    }                                                                                              \
    for (int64_t y_ = 0;; y_ += (KY)) {                                                            \
      if (y_ > (ny) - (KY)) y_ = (ny) - (KY);                                                      \
      for (int64_t x_ = 0;; x_ += (KX)) {                                                          \
        if (x_ > (nx) - (KX)) x_ = (nx) - (KX);                                                    \
        block((d) + x_ * (dx) + y_ * (E), (s) + x_ * (E) + y_ * (sy), dx, sy);                     \
        if (x_ == (nx) - (KX)) break;                                                              \
      }                                                                                            \
      if (y_ == (ny) - (KY)) break;                                                                \
    }                                                                                              \
  } while (0)
#define VL__TILE_BODY(K, E, block, small, d, s, nx, ny, dx, sy)                                    \
  VL__TILE_BODY2(K, K, E, block, small, d, s, nx, ny, dx, sy)

/* The first row of a plane whose destination stripes start on a 64-byte line: when every
 * destination row starts at the same offset within a line (dx a multiple of 64), the rows of e
 * bytes before the first line boundary, if a whole stripe of ky rows fits after them; else 0. */
static inline int64_t vl__line_lead(const char *d, int64_t ky, int64_t e, int64_t ny,
                                    ptrdiff_t dx) {
  int64_t lead = (int64_t)((64 - (uintptr_t)d % 64) % 64);
  return dx % 64 == 0 && lead % e == 0 && lead / e + ky <= ny ? lead / e : 0;
}

/* One stripe of a plane: KX-column blocks from row y, the last moved back to end at x's edge. */
#define VL__STRIPE(KX, E, block, d, s, nx, dx, sy, y)                                              \
  do {                                                                                             \
    for (int64_t x_ = 0;; x_ += (KX)) {                                                            \
      if (x_ > (nx) - (KX)) x_ = (nx) - (KX);                                                      \
      block((d) + x_ * (dx) + (y) * (E), (s) + x_ * (E) + (y) * (sy), dx, sy);                     \
      if (x_ == (nx) - (KX)) break;                                                                \
    }                                                                                              \
  } while (0)

/* The body of a tile kernel over KX x KY blocks that write KY elements (64 bytes) of each of KX
 * destination rows: stripes of KY source rows, each walked along x in blocks, the last block of
 * a stripe moved back to end at the plane's x edge. When every destination row starts at the
 * same offset within a 64-byte line (dx a multiple of 64), the stripes start at the first line
 * boundary, so no block's store splits a line; the rows before it (at least RK, moved back
 * over rows the stripes rewrite with the same values) and the rows after the last whole stripe
 * go to rest, whose blocks are smaller. A plane thinner than a block goes to rest whole. */
#define VL__TILE_BODY_RECT(KX, KY, RK, E, block, rest, d, s, nx, ny, dx, sy)                       \
  do {                                                                                             \
    if ((nx) < (KX) || (ny) < (KY)) {                                                              \
      rest(d, s, nx, ny, dx, sy);                                                                  \
      break;                                                                                       \
    }                                                                                              \
    int64_t y_ = vl__line_lead(d, KY, E, ny, dx);                                                  \
    if (y_ > 0) rest(d, s, nx, y_ < (RK) ? (RK) : y_, dx, sy);                                     \
    for (; y_ + (KY) <= (ny); y_ += (KY)) VL__STRIPE(KX, E, block, d, s, nx, dx, sy, y_);          \
    if (y_ < (ny)) {                                                                               \
      if ((ny)-y_ < (RK)) y_ = (ny) - (RK);                                                        \
      rest((d) + y_ * (E), (s) + y_ * (sy), nx, (ny)-y_, dx, sy);                                  \
    }                                                                                              \
  } while (0)

/* The body of a tile kernel over KX x KY blocks that write KY elements (64 bytes) of each of KX
 * destination rows, as VL__TILE_BODY_RECT, whose edge rows (before the first line boundary
 * when every destination row starts at the same offset within a line, after the last whole
 * stripe) take edge blocks of EY source rows by EX columns, walked like the stripes (the last
 * one moved back to end at the edge), or, when fewer than half a stripe's rows are left or the
 * plane is narrower than EX, one whole stripe moved back to the plane's y edge; both rewrite
 * rows of their neighbours with the values those already hold. A plane thinner than a block
 * goes to rest whole. */
#define VL__EDGE_ROWS(KX, KY, E, block, edge, EX, EY, d, s, nx, ny, dx, sy, y0, y1)                \
  do {                                                                                             \
    if ((y1) - (y0) >= (KY) / 2 || (nx) < (EX)) {                                                  \
      int64_t b_ = (y0) == 0 ? 0 : (ny) - (KY);                                                    \
      VL__STRIPE(KX, E, block, d, s, nx, dx, sy, b_);                                              \
      break;                                                                                       \
    }                                                                                              \
    for (int64_t e_ = (y0);; e_ += (EY)) {                                                         \
      if (e_ > (y1) - (EY)) e_ = (y1) - (EY) < 0 ? 0 : (y1) - (EY);                                \
      VL__STRIPE(EX, E, edge, d, s, nx, dx, sy, e_);                                               \
      if (e_ + (EY) >= (y1)) break;                                                                \
    }                                                                                              \
  } while (0)
#define VL__TILE_BODY_EDGES(KX, KY, E, block, edge, EX, EY, rest, d, s, nx, ny, dx, sy)            \
  do {                                                                                             \
    if ((nx) < (KX) || (ny) < (KY)) {                                                              \
      rest(d, s, nx, ny, dx, sy);                                                                  \
      break;                                                                                       \
    }                                                                                              \
    int64_t y_ = vl__line_lead(d, KY, E, ny, dx);                                                  \
    if (y_ > 0)                                                                                    \
      VL__EDGE_ROWS(KX, KY, E, block, edge, EX, EY, d, s, nx, ny, dx, sy, (int64_t)0, y_);         \
    for (; y_ + (KY) <= (ny); y_ += (KY)) VL__STRIPE(KX, E, block, d, s, nx, dx, sy, y_);          \
    if (y_ < (ny)) VL__EDGE_ROWS(KX, KY, E, block, edge, EX, EY, d, s, nx, ny, dx, sy, y_, ny);    \
  } while (0)

/* The body of a streamed transpose (the stream entries): KX-column blocks of KY rows (one line
 * of each destination row) walked down y, so each destination row's lines leave in order; the
 * last block of x moves back to end at the edge and streams a few lines again with the values
 * they already hold. A plane thinner than a block goes to the tile, with plain stores. */
#define VL__STREAM_BODY(KX, KY, E, block, small, d, s, nx, ny, dx, sy)                             \
  do {                                                                                             \
    if ((nx) < (KX)) {                                                                             \
      small(d, s, nx, ny, dx, sy);                                                                 \
      break;                                                                                       \
    }                                                                                              \
    for (int64_t x = 0;; x += (KX)) {                                                              \
      if (x > (nx) - (KX)) x = (nx) - (KX);                                                        \
      for (int64_t y = 0; y < (ny); y += (KY))                                                     \
        block((d) + x * (dx) + y * (E), (s) + x * (E) + y * (sy), dx, sy);                         \
      if (x == (nx) - (KX)) break;                                                                 \
    }                                                                                              \
  } while (0)

/* A level's tile kernel tile_<sfx> over its K x K block block_<sfx> (VL__TILE_BODY); a plane
 * thinner than K goes to the portable tile of table row ROW (element size E = 1 << ROW). */
#define VL__LEVEL_TILE(sfx, K, E, ROW)                                                             \
  static void tile_##sfx(char *d, const char *s, int64_t nx, int64_t ny, ptrdiff_t dx,             \
                         ptrdiff_t sy) {                                                           \
    VL__TILE_BODY(K, E, block_##sfx, vl__copy_tiles_portable[ROW], d, s, nx, ny, dx, sy);          \
  }

/* The 4 x 4 transpose of 32-bit words within each 128-bit lane of the registers t0..t3 (one
 * source row each), stored as four destination rows dx bytes apart from o by STORE(p, v): the
 * step both the AVX2 (W = 256) and the AVX-512 (W = 512) float blocks end in, in their
 * intrinsics' names. */
#define VL__LANE_TRANSPOSE4_PS(W, STORE, t0, t1, t2, t3, o, dx)                                    \
  do {                                                                                             \
    __m##W a0_ = _mm##W##_unpacklo_ps(t0, t1), a1_ = _mm##W##_unpackhi_ps(t0, t1);                 \
    __m##W a2_ = _mm##W##_unpacklo_ps(t2, t3), a3_ = _mm##W##_unpackhi_ps(t2, t3);                 \
    STORE((o), _mm##W##_shuffle_ps(a0_, a2_, 0x44));                                               \
    STORE((o) + (dx), _mm##W##_shuffle_ps(a0_, a2_, 0xEE));                                        \
    STORE((o) + 2 * (dx), _mm##W##_shuffle_ps(a1_, a3_, 0x44));                                    \
    STORE((o) + 3 * (dx), _mm##W##_shuffle_ps(a1_, a3_, 0xEE));                                    \
  } while (0)

/* Defined only on x86-64 (each is all NULL where its file was built without its flags). */
extern const vl__copy_kernels vl__copy_kernels_ssse3;
extern const vl__copy_kernels vl__copy_kernels_avx2;
extern const vl__copy_kernels vl__copy_kernels_avx512;
/* The AVX-512 kernels as AMD cores run them best (copy_avx512.c): Zen 4 (family 19h, whose
 * 512-bit operations take two passes of its 256-bit units) and later cores; level_table picks
 * one. */
extern const vl__copy_kernels vl__copy_kernels_avx512_amd;
extern const vl__copy_kernels vl__copy_kernels_avx512_zen4;
/* The AVX2 level's float tile and its walk over a plane (copy_avx2.c), which the Zen 4 table
 * takes too. */
void vl__copy_avx2_tile_u32(char *d, const char *s, int64_t nx, int64_t ny, ptrdiff_t dx,
                            ptrdiff_t sy);
void vl__copy_avx2_plane_u32(char *d, const char *s, int64_t nx, int64_t ny, ptrdiff_t dx,
                             ptrdiff_t sy, int64_t bx, int64_t by);

#endif

/* copy_portable.c - the copy engine's portable inner kernels (src/exec/copy.c runs them):
 * typed strided lines, cache-blocked 2-D transposes for element sizes 1, 2, 4 and 8, and the
 * narrow-plane split / merge kernels, in plain C (vector extensions where the compiler has
 * them). The faster levels (copy_ssse3.c, copy_avx2.c, copy_avx512.c) fall back on these for
 * what their own blocks do not cover. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "exec/copy_kernels.h"

/* A typed strided line: n elements, each step ds / ss bytes. memcpy keeps unaligned and
 * type-punned access defined; compilers turn it into plain loads and stores. */
#define VL__DEFINE_LINE(T, name)                                                                   \
  static void name(char *d, const char *s, int64_t n, ptrdiff_t ds, ptrdiff_t ss) {                \
    for (int64_t i = 0; i < n; i++) {                                                              \
      T v;                                                                                         \
      memcpy(&v, s, sizeof v);                                                                     \
      memcpy(d, &v, sizeof v);                                                                     \
      d += ds;                                                                                     \
      s += ss;                                                                                     \
    }                                                                                              \
  }

VL__DEFINE_LINE(uint8_t, line_u8)
VL__DEFINE_LINE(uint16_t, line_u16)
VL__DEFINE_LINE(uint32_t, line_u32)
VL__DEFINE_LINE(uint64_t, line_u64)

/* 2-D blocks: element (x, y) sits at d + x*dx + y*sizeof(T) and at s + x*sizeof(T) + y*sy, i.e.
 * the destination is contiguous along y and the source along x. The core is a K x K block held
 * in K 16-byte vectors (K = 16 / sizeof(T)), transposed by log2(K) rounds of one interleave:
 * row'[2i] = low halves of rows i and i + K/2 interleaved, row'[2i+1] = high halves. Compilers
 * without vector shuffles get the same block as plain loops. */
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
#define VL__VECTOR_BLOCKS 1
typedef uint8_t v_u8 __attribute__((vector_size(16)));
typedef uint16_t v_u16 __attribute__((vector_size(16)));
typedef uint32_t v_u32 __attribute__((vector_size(16)));
typedef uint64_t v_u64 __attribute__((vector_size(16)));
#define LO_u8(a, b)                                                                                \
  __builtin_shufflevector(a, b, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23)
#define HI_u8(a, b)                                                                                \
  __builtin_shufflevector(a, b, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31)
#define LO_u16(a, b) __builtin_shufflevector(a, b, 0, 8, 1, 9, 2, 10, 3, 11)
#define HI_u16(a, b) __builtin_shufflevector(a, b, 4, 12, 5, 13, 6, 14, 7, 15)
#define LO_u32(a, b) __builtin_shufflevector(a, b, 0, 4, 1, 5)
#define HI_u32(a, b) __builtin_shufflevector(a, b, 2, 6, 3, 7)
#define LO_u64(a, b) __builtin_shufflevector(a, b, 0, 2)
#define HI_u64(a, b) __builtin_shufflevector(a, b, 1, 3)

#define VL__DEFINE_BLOCK(T, sfx)                                                                   \
  static void block_##sfx(char *d, const char *s, ptrdiff_t dx, ptrdiff_t sy) {                    \
    enum { K = 16 / sizeof(T) };                                                                   \
    v_##sfx r[K], t[K];                                                                            \
    for (int y = 0; y < K; y++) memcpy(&r[y], s + y * sy, sizeof r[y]);                            \
    for (int round = K; round > 1; round /= 2) {                                                   \
      for (int i = 0; i < K / 2; i++) {                                                            \
        t[2 * i] = LO_##sfx(r[i], r[i + K / 2]);                                                   \
        t[2 * i + 1] = HI_##sfx(r[i], r[i + K / 2]);                                               \
      }                                                                                            \
      memcpy(r, t, sizeof r);                                                                      \
    }                                                                                              \
    for (int x = 0; x < K; x++) memcpy(d + x * dx, &r[x], sizeof r[x]);                            \
  }
#else
#define VL__DEFINE_BLOCK(T, sfx)                                                                   \
  static void block_##sfx(char *d, const char *s, ptrdiff_t dx, ptrdiff_t sy) {                    \
    enum { K = 16 / sizeof(T) };                                                                   \
    T r[K][K];                                                                                     \
    for (int y = 0; y < K; y++) memcpy(r[y], s + y * sy, sizeof r[y]);                             \
    for (int x = 0; x < K; x++) {                                                                  \
      T row[K];                                                                                    \
      for (int y = 0; y < K; y++) row[y] = r[y][x];                                                \
      memcpy(d + x * dx, row, sizeof row);                                                         \
    }                                                                                              \
  }
#endif

/* One tile of nx x ny elements: whole K x K blocks (VL__TILE_BODY), or, when the plane is
 * thinner than a block, strided lines. */
#define VL__DEFINE_TILE(T, sfx)                                                                    \
  VL__DEFINE_BLOCK(T, sfx)                                                                         \
  static void lines_##sfx(char *d, const char *s, int64_t nx, int64_t ny, ptrdiff_t dx,            \
                          ptrdiff_t sy) {                                                          \
    for (int64_t x = 0; x < nx; x++)                                                               \
      line_##sfx(d + x * dx, s + x * (ptrdiff_t)sizeof(T), ny, (ptrdiff_t)sizeof(T), sy);          \
  }                                                                                                \
  static void tile_##sfx(char *d, const char *s, int64_t nx, int64_t ny, ptrdiff_t dx,             \
                         ptrdiff_t sy) {                                                           \
    enum { K = 16 / sizeof(T) };                                                                   \
    VL__TILE_BODY(K, (ptrdiff_t)sizeof(T), block_##sfx, lines_##sfx, d, s, nx, ny, dx, sy);        \
  }

VL__DEFINE_TILE(uint8_t, u8)
VL__DEFINE_TILE(uint16_t, u16)
VL__DEFINE_TILE(uint32_t, u32)
VL__DEFINE_TILE(uint64_t, u64)

/* Narrow planes, where the transpose has only 2..4 rows on one side (e.g. RGB images):
 * split turns dense source rows of NX elements into NX destination rows (deinterleave),
 * merge the reverse. With NX a constant the compiler vectorizes the grouped accesses. */

#define VL__DEFINE_SPLIT(T, NX, sfx)                                                               \
  static void split##NX##_##sfx(char *d, const char *s, int64_t ny, ptrdiff_t dx) {                \
    char *o[NX];                                                                                   \
    for (int x = 0; x < NX; x++) o[x] = d + x * dx;                                                \
    for (int64_t y = 0; y < ny; y++, s += NX * sizeof(T))                                          \
      for (int x = 0; x < NX; x++)                                                                 \
        memcpy(o[x] + y * (ptrdiff_t)sizeof(T), s + (size_t)x * sizeof(T), sizeof(T));             \
  }                                                                                                \
  static void merge##NX##_##sfx(char *d, const char *s, int64_t nx, ptrdiff_t sy) {                \
    const char *in[NX];                                                                            \
    for (int y = 0; y < NX; y++) in[y] = s + y * sy;                                               \
    for (int64_t x = 0; x < nx; x++, d += NX * sizeof(T))                                          \
      for (int y = 0; y < NX; y++)                                                                 \
        memcpy(d + (size_t)y * sizeof(T), in[y] + x * (ptrdiff_t)sizeof(T), sizeof(T));            \
  }

#define VL__DEFINE_NARROW(T, sfx)                                                                  \
  VL__DEFINE_SPLIT(T, 2, sfx) VL__DEFINE_SPLIT(T, 3, sfx) VL__DEFINE_SPLIT(T, 4, sfx)

VL__DEFINE_NARROW(uint8_t, u8)
VL__DEFINE_NARROW(uint16_t, u16)
VL__DEFINE_NARROW(uint32_t, u32)
VL__DEFINE_NARROW(uint64_t, u64)

const vl__line_fn vl__copy_lines_portable[4] = {line_u8, line_u16, line_u32, line_u64};
const vl__tile_fn vl__copy_tiles_portable[4] = {tile_u8, tile_u16, tile_u32, tile_u64};

const vl__copy_kernels vl__copy_kernels_portable = {
    .tile = {tile_u8, tile_u16, tile_u32, tile_u64},
    .split = {{split2_u8, split3_u8, split4_u8},
              {split2_u16, split3_u16, split4_u16},
              {split2_u32, split3_u32, split4_u32},
              {split2_u64, split3_u64, split4_u64}},
    .merge = {{merge2_u8, merge3_u8, merge4_u8},
              {merge2_u16, merge3_u16, merge4_u16},
              {merge2_u32, merge3_u32, merge4_u32},
              {merge2_u64, merge3_u64, merge4_u64}},
};

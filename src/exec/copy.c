/* copy.c - the layout-aware copy engine and the view_copy kernel (docs/kernels.md).
 *
 * A strided copy is first reduced to the fewest loops: size-1 dims are dropped, dims are ordered
 * by destination stride and merged where they stay adjacent in both buffers, and a run that is
 * contiguous on both sides becomes one wider "element". What is left runs as one of three inner
 * kernels - memcpy of whole runs, a cache-blocked 2-D transpose (typed for element sizes 1, 2,
 * 4 and 8) or a typed strided line - under an odometer of pointers over the outer loops. The
 * kernels themselves are in copy_portable.c and the levels' files (copy_kernels.h).
 * Invariants: inside the engine strides are in bytes; nothing divides or takes a modulus per
 * element; pointers never leave the buffers they walk. */
#include "viewlower/copy.h"
#include "viewlower/layout.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/copy_kernels.h"
#include "exec/kernel_internal.h"
#include "layout/tensor_internal.h"

/* Loops the engine handles at once. Each kept dim has size >= 2, so a copy that fits in memory
 * has far fewer than 64 of them; more are peeled off one by one (see vl_copy_strided). */
#define MAX_LOOPS 64
/* Transpose tiles: TILE_X_BYTES of each source row (the source-contiguous dim) by TILE_Y rows.
 * TILE_Y source rows are read as one sequential region (good for memory-bound copies), the
 * tile's destination rows are TILE_Y elements long. Tuned with viewlower-bench. */
#define TILE_X_BYTES 128
#define TILE_Y 512
/* Runs at least this many bytes long go through memcpy; shorter ones are moved as words. */
#define MEMCPY_MIN_RUN 64
/* Copies at least this large do not stay in the caches (source and destination together pass
 * what one core can expect of the last-level cache): their transposes write whole destination
 * lines with non-temporal stores, so no line is read from memory only to be overwritten (the
 * same trade large memcpy makes). Where the target has no such stores, the tiles write as
 * usual. 2 MiB, or 4 MiB where the last-level cache holds 16 MiB or more (stream_min_bytes).
 * On Zen 1 (8 MiB of L3 per core complex) 2 MiB measured better than 8 MiB on 3 MB
 * channels-last float32 (about 0.75x against 0.6x memcpy); on a Zen 5 guest (32 MiB per CCD,
 * 508 MiB as the guest reports it) the same 3.2 MB copy stays in L3: streamed it ran at
 * 20-21 GB/s, through the tiles at 32-34 GB/s, and its next reader finds it in the cache. The
 * 6.4 MB copies ran as fast either way there, 25.7 MB ones 1.3-1.6x faster streamed. */
#define STREAM_MIN_BYTES ((uint64_t)2 << 20)
#define STREAM_MIN_BYTES_LARGE_LLC ((uint64_t)4 << 20)
#define LARGE_LLC_BYTES ((long)16 << 20)
#define STREAM_LINE 64  /* bytes in one cache line, written at once */
#define STREAM_ROWS 16  /* destination rows gathered per step */
#define STREAM_SPAN 256 /* bytes of each destination row written per step: whole lines */
#define STREAM_DIRECT_ROWS 8 /* destination rows per call of a level's streamed transpose */
#if defined(__SSE2__)
#include <emmintrin.h>
#define VL__STREAM_STORES 1
#endif

typedef struct loops {
  size_t n;
  size_t elem;              /* bytes moved per innermost step (grows when runs merge) */
  int64_t size[MAX_LOOPS];  /* outermost first */
  ptrdiff_t dst[MAX_LOOPS]; /* byte strides */
  ptrdiff_t src[MAX_LOOPS];
} loops;

/* ---- loop normalisation ---------------------------------------------------------------- */

/* Keeps dims of size > 1 with strides in bytes. false when there is nothing to copy. */
static bool loops_build(loops *L, size_t elem, size_t rank, const int64_t *shape,
                        const int64_t *dst_strides, const int64_t *src_strides) {
  L->n = 0;
  L->elem = elem;
  /* Empty first: an empty tensor's strides may be saturated, and are never multiplied. */
  for (size_t i = 0; i < rank; i++) {
    if (shape[i] == 0) return false;
  }
  for (size_t i = 0; i < rank; i++) {
    if (shape[i] == 1) continue;
    L->size[L->n] = shape[i];
    L->dst[L->n] = (ptrdiff_t)(dst_strides[i] * (int64_t)elem);
    L->src[L->n] = (ptrdiff_t)(src_strides[i] * (int64_t)elem);
    L->n++;
  }
  return true;
}

static bool loop_before(const loops *L, size_t a, size_t b) {
  if (L->dst[a] != L->dst[b]) return L->dst[a] > L->dst[b];
  return L->src[a] > L->src[b];
}

static void loops_swap(loops *L, size_t a, size_t b) {
  int64_t s = L->size[a];
  ptrdiff_t d = L->dst[a], r = L->src[a];
  L->size[a] = L->size[b];
  L->dst[a] = L->dst[b];
  L->src[a] = L->src[b];
  L->size[b] = s;
  L->dst[b] = d;
  L->src[b] = r;
}

/* Orders loops so the destination is written outermost-stride first (insertion sort). */
static void loops_sort(loops *L) {
  for (size_t i = 1; i < L->n; i++) {
    for (size_t j = i; j > 0 && loop_before(L, j, j - 1); j--) loops_swap(L, j, j - 1);
  }
}

/* Merges loop i into loop i + 1 when i steps over exactly one whole i + 1 on both sides. */
static void loops_merge(loops *L) {
  size_t w = 0;
  for (size_t i = 0; i < L->n; i++) {
    if (w > 0 && L->dst[w - 1] == L->dst[i] * (ptrdiff_t)L->size[i] &&
        L->src[w - 1] == L->src[i] * (ptrdiff_t)L->size[i]) {
      L->size[w - 1] *= L->size[i];
      L->dst[w - 1] = L->dst[i];
      L->src[w - 1] = L->src[i];
      continue;
    }
    L->size[w] = L->size[i];
    L->dst[w] = L->dst[i];
    L->src[w] = L->src[i];
    w++;
  }
  L->n = w;
}

/* An innermost loop dense on both sides becomes part of the element. */
static void loops_widen_element(loops *L) {
  while (L->n > 0 && L->dst[L->n - 1] == (ptrdiff_t)L->elem &&
         L->src[L->n - 1] == (ptrdiff_t)L->elem) {
    L->elem *= (size_t)L->size[L->n - 1];
    L->n--;
  }
}

/* The loop (other than the innermost) whose source stride is one element, or L->n. */
static size_t loops_find_src_unit(const loops *L) {
  for (size_t i = 0; i + 1 < L->n; i++) {
    if (L->src[i] == (ptrdiff_t)L->elem) return i;
  }
  return L->n;
}

/* Moves loop i to just outside the innermost one; the other loops keep their order. */
static void loops_move_inside(loops *L, size_t i) {
  for (size_t j = i; j + 2 < L->n; j++) loops_swap(L, j, j + 1);
}

/* ---- inner kernels (copy_portable.c and the levels' files) ------------------------------ */

typedef vl__line_fn line_fn;
typedef vl__tile_fn tile_fn;
typedef vl__narrow_fn narrow_fn;
typedef vl__plane_fn plane_fn;
#define NARROW_MAX VL__NARROW_MAX

/* Row of the kernel tables for an element size of 1, 2, 4 or 8 bytes. */
static size_t type_row(size_t elem) {
  return elem == 1 ? 0 : elem == 2 ? 1 : elem == 4 ? 2 : 3;
}

static bool typed(size_t elem) {
  return elem == 1 || elem == 2 || elem == 4 || elem == 8;
}

static line_fn line_for(size_t elem) {
  return typed(elem) ? vl__copy_lines_portable[type_row(elem)] : NULL;
}

static tile_fn tile_portable(size_t elem) {
  return typed(elem) ? vl__copy_kernels_portable.tile[type_row(elem)] : NULL;
}

/* ---- dispatch ------------------------------------------------------------------------------ */

/* The kernel table of a level above SSE2, or NULL (SSE2 and the portable level use the kernels
 * of this file; the SSE2 level adds the streamed stores). */
static const vl__copy_kernels *level_table(vl_copy_level level) {
#if defined(__x86_64__)
  switch (level) {
  case VL_COPY_SSSE3: return &vl__copy_kernels_ssse3;
  case VL_COPY_AVX2: return &vl__copy_kernels_avx2;
  case VL_COPY_AVX512:
    /* AMD cores load a block's quarters faster with inserts than masked loads, and Zen 4
     * (family 19h: the AVX-512 cores of that family) runs some planes faster in 256-bit
     * registers (copy_avx512.c); libgcc keeps the vendor and family, so asking is a read */
    __builtin_cpu_init();
    if (!__builtin_cpu_is("amd")) return &vl__copy_kernels_avx512;
    return __builtin_cpu_is("amdfam19h") ? &vl__copy_kernels_avx512_zen4
                                         : &vl__copy_kernels_avx512_amd;
  default: return NULL;
  }
#else
  (void)level;
  return NULL;
#endif
}

/* A tile kernel and the tile shape it is walked in. */
typedef struct tile_choice {
  tile_fn fn;
  int64_t rows, bytes; /* source rows per tile, bytes of each */
  tile_fn stream;      /* the same level's streamed transpose, or NULL */
  plane_fn plane;      /* the same level's walk over a plane, or NULL */
} tile_choice;

/* The tile kernel of the highest level <= level that has one for elem, with its shape. */
static tile_choice tile_for(vl_copy_level level, size_t elem) {
  if (typed(elem)) {
    for (int l = (int)level; l > (int)VL_COPY_SSE2; l--) {
      const vl__copy_kernels *t = level_table((vl_copy_level)l);
      size_t r = type_row(elem);
      if (t != NULL && t->tile[r] != NULL) {
        return (tile_choice){t->tile[r], t->tile_rows[r] ? t->tile_rows[r] : TILE_Y,
                             t->tile_bytes[r] ? t->tile_bytes[r] : TILE_X_BYTES, t->stream[r],
                             t->plane[r]};
      }
    }
  }
  return (tile_choice){tile_portable(elem), TILE_Y, TILE_X_BYTES, NULL, NULL};
}

/* The narrow kernel (split or merge) for elem and nx rows, as tile_for. */
static narrow_fn narrow_for(vl_copy_level level, bool split, size_t elem, int64_t nx) {
  size_t row = type_row(elem), col = (size_t)(nx - 2);
  for (int l = (int)level; l > (int)VL_COPY_SSE2; l--) {
    const vl__copy_kernels *t = level_table((vl_copy_level)l);
    narrow_fn f = t == NULL ? NULL : split ? t->split[row][col] : t->merge[row][col];
    if (f != NULL) return f;
  }
  return split ? vl__copy_kernels_portable.split[row][col]
               : vl__copy_kernels_portable.merge[row][col];
}

vl_copy_level vl_copy_level_native(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  /* libgcc fills the CPU model in a constructor; asking again is cheap and makes the answer
   * right even from another constructor. The AVX checks include the operating system's
   * support for the registers (XGETBV). */
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl")) {
    return VL_COPY_AVX512;
  }
  if (__builtin_cpu_supports("avx2")) return VL_COPY_AVX2;
  if (__builtin_cpu_supports("ssse3")) return VL_COPY_SSSE3;
  return VL_COPY_SSE2;
#else
  return VL_COPY_PORTABLE;
#endif
}

static const char *const level_names[VL_COPY_LEVEL_COUNT] = {"portable", "sse2", "ssse3", "avx2",
                                                             "avx512"};

const char *vl_copy_level_name(vl_copy_level level) {
  return (unsigned)level < VL_COPY_LEVEL_COUNT ? level_names[level] : NULL;
}

bool vl_copy_level_from_name(const char *name, vl_copy_level *out) {
  for (int l = 0; name != NULL && l < VL_COPY_LEVEL_COUNT; l++) {
    if (strcmp(name, level_names[l]) == 0) {
      *out = (vl_copy_level)l;
      return true;
    }
  }
  return false;
}

bool vl_copy_level_supported(vl_copy_level level) {
  return (unsigned)level < VL_COPY_LEVEL_COUNT && level <= vl_copy_level_native();
}

/* level, or the native level when the machine cannot run it. */
static vl_copy_level level_clamp(vl_copy_level level) {
  return vl_copy_level_supported(level) ? level : vl_copy_level_native();
}

/* The work under the odometer: the innermost one or two loops of L. */
typedef enum { KERNEL_LINE, KERNEL_TILES, KERNEL_SPLIT, KERNEL_MERGE } kernel_kind;

typedef struct inner {
  const loops *L;
  kernel_kind kind;
  size_t depth;     /* loops handled here: 1 (line) or 2 (the others) */
  line_fn line;     /* typed line, or NULL for memcpy per element */
  tile_choice tile; /* KERNEL_TILES */
  bool stream;      /* KERNEL_TILES: large enough for non-temporal stores */
  bool staged;      /* KERNEL_TILES: destination rows 4 KiB-aliased (staged_plane) */
  narrow_fn narrow; /* KERNEL_SPLIT, KERNEL_MERGE */
} inner;

static void run_line(const inner *k, char *d, const char *s) {
  const loops *L = k->L;
  size_t i = L->n - 1;
  if (k->line != NULL) {
    k->line(d, s, L->size[i], L->dst[i], L->src[i]);
    return;
  }
  for (int64_t j = 0; j < L->size[i]; j++, d += L->dst[i], s += L->src[i]) memcpy(d, s, L->elem);
}

/* The cache sets that lines at one offset of rows dx bytes apart fall into: rows whose stride
 * is a multiple of a large power of two share few of them (4 KiB aliasing: 64 sets of 64-byte
 * lines per way on common cores). */
static int64_t row_sets(ptrdiff_t dx) {
  uint64_t stride = (uint64_t)(dx < 0 ? -dx : dx) % 4096, align = 4096;
  if (stride != 0) align = stride & (~stride + 1); /* lowest set bit */
  return align <= 64 ? 64 : (int64_t)(4096 / align);
}

/* How many destination rows a tile may write at once: until its rows fit half of 8 ways of
 * the sets they share (row_sets). */
static int64_t tile_rows(ptrdiff_t dx, size_t elem, int64_t bytes) {
  int64_t rows = 4 * row_sets(dx), wide = bytes / (int64_t)elem;
  return rows < wide ? rows : wide;
}

/* Destination rows a multiple of 2 KiB apart share one or two sets, so tile_rows narrows a
 * tile to 4 or 8 rows: fewer than any level's blocks of 1-, 2- and 4-byte elements hold (8 of
 * 8-byte ones at 2 KiB), so every level fell back to its element loops: uint8 [1,64,64,64]
 * channels-last to contiguous (rows 4 KiB apart) ran at 0.05-0.06x memcpy, float16
 * [1,64,32,64] at 0.06x. Such planes are transposed STAGE_ROWS rows at a time into a buffer
 * that stays in L1, its rows STAGE_SPAN bytes apart, then copied out row by row, STAGE_SPAN
 * bytes of each destination row at a time: 0.40x and 0.34-0.37x, float32 [1,64,32,32] 0.30-0.40x
 * -> 0.44-0.53x and [1,64,64,64] 0.30-0.36x -> 0.39-0.44x, alternated runs on Zen 5. At 1 KiB
 * (16-row tiles) the direct tiles stay: staged, float16 [1,64,16,32] and uint8 [1,128,16,32]
 * fell from 0.59x to 0.33-0.36x. */
#define STAGE_ROWS 32
#define STAGE_SPAN 256
#define STAGE_BELOW 16 /* staged when tile_rows would leave fewer rows than this */

static bool staged_plane(ptrdiff_t dx, int64_t nx, size_t elem) {
  int64_t rows = 4 * row_sets(dx);
  return rows < STAGE_BELOW && rows < 64 / (int64_t)elem && nx > rows;
}

static void run_transpose_staged(const inner *k, char *d, const char *s) {
  const loops *L = k->L;
  size_t x = L->n - 2, y = L->n - 1;
  int64_t nx = L->size[x], ny = L->size[y];
  ptrdiff_t dx = L->dst[x], sy = L->src[y], e = (ptrdiff_t)L->elem;
  int64_t per = STAGE_SPAN / e, by = ny < per ? ny : per, bx = nx < STAGE_ROWS ? nx : STAGE_ROWS;
  _Alignas(64) char buf[STAGE_ROWS * STAGE_SPAN];
  for (int64_t y0 = 0; y0 < ny; y0 += by) {
    if (y0 + by > ny) y0 = ny - by; /* the last step moves back to end at the edge */
    for (int64_t x0 = 0; x0 < nx; x0 += bx) {
      if (x0 + bx > nx) x0 = nx - bx;
      k->tile.fn(buf, s + x0 * e + y0 * sy, bx, by, STAGE_SPAN, sy);
      char *o = d + x0 * dx + y0 * e;
      if (by * e == STAGE_SPAN) {
        for (int64_t i = 0; i < bx; i++) memcpy(o + i * dx, buf + i * STAGE_SPAN, STAGE_SPAN);
      } else {
        for (int64_t i = 0; i < bx; i++) memcpy(o + i * dx, buf + i * STAGE_SPAN, (size_t)(by * e));
      }
    }
  }
}

/* Loop x (n - 2) is contiguous in the source, loop y (n - 1) in the destination; the plane is
 * walked in tiles of the kernel's shape (source rows at a time, split across x into
 * cache-friendly widths). A last tile narrower than the others is moved back to end at the
 * edge, like the blocks inside a tile, so it never drops to a thin plane's element loops. */
static void run_transpose(const inner *k, char *d, const char *s) {
  const loops *L = k->L;
  size_t x = L->n - 2, y = L->n - 1;
  int64_t nx = L->size[x], ny = L->size[y], ty = k->tile.rows;
  ptrdiff_t dx = L->dst[x], sy = L->src[y], e = (ptrdiff_t)L->elem;
  int64_t tx = tile_rows(dx, L->elem, k->tile.bytes);
  int64_t by = ny < ty ? ny : ty, bx = nx < tx ? nx : tx;
  if (k->tile.plane != NULL) {
    k->tile.plane(d, s, nx, ny, dx, sy, bx, by);
    return;
  }
  for (int64_t y0 = 0; y0 < ny; y0 += by) {
    if (y0 + by > ny) y0 = ny - by;
    for (int64_t x0 = 0; x0 < nx; x0 += bx) {
      if (x0 + bx > nx) x0 = nx - bx;
      k->tile.fn(d + x0 * dx + y0 * e, s + x0 * e + y0 * sy, bx, by, dx, sy);
    }
  }
}

#ifdef VL__STREAM_STORES
/* Moves one 64-byte line from an aligned buffer to aligned memory, bypassing the caches. */
static void stream_line(char *d, const char *s) {
  for (int i = 0; i < STREAM_LINE; i += 16) {
    __m128i v = _mm_load_si128((const __m128i *)(const void *)(s + i));
    _mm_stream_si128((__m128i *)(void *)(d + i), v);
  }
}

/* Asks for the lines of one source row of bytes bytes ahead of its use. */
static void prefetch_row(const char *s, int64_t bytes) {
  for (int64_t i = 0; i < bytes; i += STREAM_LINE) _mm_prefetch(s + i, _MM_HINT_T0);
}

/* The transpose of a copy larger than the caches. Every destination row has the same alignment
 * (dx is a multiple of a line), so y splits into a head up to the first line boundary, whole
 * lines, and a tail. Whole lines are transposed STREAM_ROWS at a time into a small aligned
 * buffer that stays in L1, then streamed out line by line; head and tail go through the tiles.
 * While a step streams out, the next step's source rows are asked for, a few after each
 * destination row, so they arrive from memory or the last-level cache in time: 1.8x on
 * channels-last float32 8x64x112x112 and float64 4x64x112x112 (25.7 MB), 1.05x to 1.1x on 3 to
 * 6 MB ones, side by side. Asked for all at once before each step, the requests stalled the
 * core until memory answered (1.3x on the 25.7 MB copies, 0.8x to 0.9x on the others); 64 rows
 * per step read the source once but came out slower with these requests. A level with its
 * own streamed transpose for the element size writes the lines straight from its registers
 * instead, which saves the buffer's store and reload: on Zen 1 the transpose into the buffer
 * alone ran at 0.8x memcpy and the streaming out alone at 1.7x, and the direct kernels took
 * float32 3.2 MB from 0.85x to 1.04x memcpy and float64 25.7 MB from 0.90x to 0.99x. */
static void run_transpose_streamed(const inner *k, char *d, const char *s) {
  const loops *L = k->L;
  size_t x = L->n - 2, y = L->n - 1;
  int64_t nx = L->size[x], ny = L->size[y];
  ptrdiff_t dx = L->dst[x], sy = L->src[y], e = (ptrdiff_t)L->elem;
  uintptr_t mis = (uintptr_t)d % STREAM_LINE;
  if (dx % STREAM_LINE != 0 || mis % (uintptr_t)e != 0) {
    run_transpose(k, d, s);
    return;
  }
  int64_t per = STREAM_SPAN / e;
  int64_t head = mis == 0 ? 0 : (int64_t)((STREAM_LINE - mis) / (uintptr_t)e);
  if (head > ny) head = ny;
  int64_t end = head + (ny - head) / per * per;
  if (head > 0) k->tile.fn(d, s, nx, head, dx, sy);
  _Alignas(STREAM_LINE) char buf[STREAM_ROWS * STREAM_SPAN];
  for (int64_t y0 = head; y0 < end; y0 += per) {
    /* the next step's source rows, asked for a few after each destination row streamed out */
    int64_t pf = y0 + 2 * per <= end ? 0 : per;
    const char *next = pf == 0 ? s + (y0 + per) * sy : s;
    if (k->tile.stream != NULL) {
      /* the last chunk moves back to end at the edge, as the tiles' blocks do */
      int64_t bx = nx < STREAM_DIRECT_ROWS ? nx : STREAM_DIRECT_ROWS;
      for (int64_t x0 = 0;; x0 += bx) {
        if (x0 > nx - bx) x0 = nx - bx;
        k->tile.stream(d + x0 * dx + y0 * e, s + x0 * e + y0 * sy, bx, per, dx, sy);
        for (int64_t upto = (x0 + bx) * per / nx; pf < upto; pf++)
          prefetch_row(next + pf * sy, nx * e);
        if (x0 == nx - bx) break;
      }
      continue;
    }
    for (int64_t x0 = 0; x0 < nx; x0 += STREAM_ROWS) {
      int64_t bx = nx - x0 < STREAM_ROWS ? nx - x0 : STREAM_ROWS;
      k->tile.fn(buf, s + x0 * e + y0 * sy, bx, per, STREAM_SPAN, sy);
      for (int64_t i = 0; i < bx; i++) {
        for (int64_t j = 0; j < STREAM_SPAN; j += STREAM_LINE) {
          stream_line(d + (x0 + i) * dx + y0 * e + j, buf + i * STREAM_SPAN + j);
        }
        for (int64_t upto = (x0 + i + 1) * per / nx; pf < upto; pf++)
          prefetch_row(next + pf * sy, nx * e);
      }
    }
  }
  if (end < ny) k->tile.fn(d + end * e, s + end * sy, nx, ny - end, dx, sy);
  _mm_sfence(); /* streamed lines are visible before the copy returns */
}
#endif

static void run_inner(const inner *k, char *d, const char *s) {
  const loops *L = k->L;
  switch (k->kind) {
  case KERNEL_TILES:
#ifdef VL__STREAM_STORES
    if (k->stream) {
      run_transpose_streamed(k, d, s);
      break;
    }
#endif
    if (k->staged) {
      run_transpose_staged(k, d, s);
      break;
    }
    run_transpose(k, d, s);
    break;
  case KERNEL_SPLIT: k->narrow(d, s, L->size[L->n - 1], L->dst[L->n - 2]); break;
  case KERNEL_MERGE: k->narrow(d, s, L->size[L->n - 2], L->src[L->n - 1]); break;
  default: run_line(k, d, s); break;
  }
}

/* Walks every index of the outer loops (all but the inner kernel's) with two pointers. */
static void odometer_run(const inner *k, char *d, const char *s) {
  const loops *L = k->L;
  size_t outer = L->n - k->depth;
  int64_t idx[MAX_LOOPS] = {0};
  for (;;) {
    run_inner(k, d, s);
    size_t i = outer;
    for (;;) {
      if (i == 0) return;
      i--;
      if (++idx[i] < L->size[i]) {
        d += L->dst[i];
        s += L->src[i];
        break;
      }
      idx[i] = 0;
      d -= L->dst[i] * (ptrdiff_t)(L->size[i] - 1);
      s -= L->src[i] * (ptrdiff_t)(L->size[i] - 1);
    }
  }
}

/* The 2-D kernel once loop n - 2 is source-contiguous and loop n - 1 destination-contiguous:
 * a narrow split or merge when one side has 2..4 dense rows, else cache tiles. */
static void choose_plane(inner *k, vl_copy_level level) {
  const loops *L = k->L;
  int64_t nx = L->size[L->n - 2], ny = L->size[L->n - 1];
  ptrdiff_t e = (ptrdiff_t)L->elem;
  k->depth = 2;
  k->kind = KERNEL_TILES;
  k->tile = tile_for(level, L->elem);
  if (nx <= NARROW_MAX && L->src[L->n - 1] == nx * e) {
    k->kind = KERNEL_SPLIT;
    k->narrow = narrow_for(level, true, L->elem, nx);
  } else if (ny <= NARROW_MAX && L->dst[L->n - 2] == ny * e) {
    k->kind = KERNEL_MERGE;
    k->narrow = narrow_for(level, false, L->elem, ny);
  }
}

/* Bytes the copy moves (saturating; the buffers fit in memory, so it does not in practice). */
static uint64_t loops_bytes(const loops *L) {
  uint64_t n = L->elem;
  for (size_t i = 0; i < L->n; i++) {
    if (n > UINT64_MAX / (uint64_t)L->size[i]) return UINT64_MAX;
    n *= (uint64_t)L->size[i];
  }
  return n;
}

/* The size from which a transpose streams (STREAM_MIN_BYTES). The C library reads the cache
 * sizes once, at start-up; asked only for copies of 2 MiB and more. */
static uint64_t stream_min_bytes(void) {
#ifdef _SC_LEVEL3_CACHE_SIZE
  if (sysconf(_SC_LEVEL3_CACHE_SIZE) >= LARGE_LLC_BYTES) return STREAM_MIN_BYTES_LARGE_LLC;
#endif
  return STREAM_MIN_BYTES;
}

/* Chooses the inner kernel for normalised loops and runs the copy. */
static void loops_run(loops *L, char *d, const char *s, vl_copy_level level) {
  inner k = {.L = L, .kind = KERNEL_LINE, .depth = 1, .line = line_for(L->elem)};
  if (L->n == 0) {
    memcpy(d, s, L->elem);
    return;
  }
  if (L->elem >= MEMCPY_MIN_RUN) k.line = NULL;
  size_t xs = loops_find_src_unit(L);
  if (tile_portable(L->elem) != NULL && L->dst[L->n - 1] == (ptrdiff_t)L->elem && xs < L->n) {
    loops_move_inside(L, xs);
    choose_plane(&k, level);
    uint64_t bytes = loops_bytes(L);
    k.stream = level >= VL_COPY_SSE2 && bytes >= STREAM_MIN_BYTES && bytes >= stream_min_bytes();
    k.staged = staged_plane(L->dst[L->n - 2], L->size[L->n - 2], L->elem);
  }
  odometer_run(&k, d, s);
}

/* Peels the outermost dim while there are more dims than the engine holds. */
static void copy_strided(vl_copy_level level, size_t elem_size, size_t rank, const int64_t *shape,
                         void *dst, const int64_t *dst_strides, const void *src,
                         const int64_t *src_strides);

static void copy_peel(vl_copy_level level, size_t elem, size_t rank, const int64_t *shape,
                      char *dst, const int64_t *dst_strides, const char *src,
                      const int64_t *src_strides) {
  for (size_t i = 0; i < rank; i++) {
    if (shape[i] == 0) return;
  }
  ptrdiff_t ds = (ptrdiff_t)(dst_strides[0] * (int64_t)elem);
  ptrdiff_t ss = (ptrdiff_t)(src_strides[0] * (int64_t)elem);
  for (int64_t i = 0; i < shape[0]; i++, dst += ds, src += ss) {
    copy_strided(level, elem, rank - 1, shape + 1, dst, dst_strides + 1, src, src_strides + 1);
  }
}

static void copy_strided(vl_copy_level level, size_t elem_size, size_t rank, const int64_t *shape,
                         void *dst, const int64_t *dst_strides, const void *src,
                         const int64_t *src_strides) {
  if (rank > MAX_LOOPS) {
    copy_peel(level, elem_size, rank, shape, dst, dst_strides, src, src_strides);
    return;
  }
  loops L;
  if (!loops_build(&L, elem_size, rank, shape, dst_strides, src_strides)) return;
  loops_sort(&L);
  loops_merge(&L);
  loops_widen_element(&L);
  loops_run(&L, dst, src, level);
}

void vl_copy_strided_at(vl_copy_level level, size_t elem_size, size_t rank, const int64_t *shape,
                        void *dst, const int64_t *dst_strides, const void *src,
                        const int64_t *src_strides) {
  copy_strided(level_clamp(level), elem_size, rank, shape, dst, dst_strides, src, src_strides);
}

void vl_copy_strided(size_t elem_size, size_t rank, const int64_t *shape, void *dst,
                     const int64_t *dst_strides, const void *src, const int64_t *src_strides) {
  copy_strided(vl_copy_level_native(), elem_size, rank, shape, dst, dst_strides, src, src_strides);
}

/* ---- logical-order copies ------------------------------------------------------------------ */

/* Same dtype and numel, else VL_ERR_KERNEL. Writes the common numel. */
static vl_status check_same_elements(const vl_spec *dst, const vl_spec *src, int64_t *numel,
                                     vl_error *err) {
  int64_t nd, ns;
  if (dst->dtype != src->dtype) {
    return vl_error_set(err, VL_ERR_KERNEL, "", "copy from %s into %s: dtypes differ",
                        vl_dtype_name(src->dtype), vl_dtype_name(dst->dtype));
  }
  if (!vl_spec_numel(dst, &nd) || !vl_spec_numel(src, &ns)) {
    return vl_error_set(err, VL_ERR_KERNEL, "", "element count overflows");
  }
  if (nd != ns) {
    return vl_error_set(err, VL_ERR_KERNEL, "",
                        "copy of %lld elements into %lld elements: counts differ", (long long)ns,
                        (long long)nd);
  }
  *numel = nd;
  return VL_OK;
}

/* A common refinement of two shapes of equal numel: a shape whose consecutive dims multiply to
 * each dim of a and of b, with both stride sets split to match. Returns its rank, or -1 when
 * none exists (e.g. (2,3) and (3,2)). */
static int refine(const vl_spec *a, const int64_t *as, const vl_spec *b, const int64_t *bs,
                  int64_t *shape, int64_t *ast, int64_t *bst) {
  size_t i = 0, j = 0;
  int r = 0;
  int64_t ra = 1, rb = 1, sa = 0, sb = 0; /* unconsumed (inner) part of the current dims */
  for (;;) {
    while (ra == 1 && i < a->rank) sa = as[i], ra = a->shape[i++];
    while (rb == 1 && j < b->rank) sb = bs[j], rb = b->shape[j++];
    if (ra == 1 || rb == 1) return ra == rb ? r : -1;
    int64_t f = ra < rb ? ra : rb;
    if ((ra < rb ? rb : ra) % f != 0) return -1;
    ra /= f;
    rb /= f;
    shape[r] = f;
    ast[r] = sa * ra;
    bst[r] = sb * rb;
    r++;
  }
}

/* Copies through a contiguous buffer when neither side is contiguous and no refinement exists. */
static vl_status copy_via_temp(vl_copy_level level, const vl_spec *dst_spec, void *dst,
                               const int64_t *dst_strides, const vl_spec *src_spec, const void *src,
                               const int64_t *src_strides, int64_t nbytes, vl_error *err) {
  size_t es = vl_dtype_size(src_spec->dtype);
  int64_t dense[VL_MAX_RANK];
  void *tmp = malloc((size_t)nbytes);
  if (tmp == NULL) {
    return vl_error_set(err, VL_ERR_NOMEM, "", "out of memory for a %lld-byte copy buffer",
                        (long long)nbytes);
  }
  vl_layout_default_strides(src_spec->rank, src_spec->shape, dense);
  copy_strided(level, es, src_spec->rank, src_spec->shape, tmp, dense, src, src_strides);
  vl_layout_default_strides(dst_spec->rank, dst_spec->shape, dense);
  copy_strided(level, es, dst_spec->rank, dst_spec->shape, dst, dst_strides, tmp, dense);
  free(tmp);
  return VL_OK;
}

static vl_status copy_logical(vl_copy_level level, const vl_spec *dst_spec, void *dst,
                              const vl_spec *src_spec, const void *src, vl_error *err) {
  int64_t numel = 0, nbytes, ds[VL_MAX_RANK], ss[VL_MAX_RANK], dense[VL_MAX_RANK];
  vl_status st = check_same_elements(dst_spec, src_spec, &numel, err);
  if (st != VL_OK || numel == 0) return st;
  size_t es = vl_dtype_size(src_spec->dtype);
  if (!vl_spec_nbytes(src_spec, &nbytes)) {
    return vl_error_set(err, VL_ERR_KERNEL, "", "byte size of the copy overflows");
  }
  bool dst_dense = vl_layout_is_contiguous(dst_spec), src_dense = vl_layout_is_contiguous(src_spec);
  if (dst_dense && src_dense) {
    memcpy(dst, src, (size_t)nbytes);
    return VL_OK;
  }
  vl_layout_strides(dst_spec, ds);
  vl_layout_strides(src_spec, ss);
  int64_t shape[2 * VL_MAX_RANK], rd[2 * VL_MAX_RANK], rs[2 * VL_MAX_RANK];
  int r = refine(dst_spec, ds, src_spec, ss, shape, rd, rs);
  if (r >= 0) {
    copy_strided(level, es, (size_t)r, shape, dst, rd, src, rs);
  } else if (dst_dense) {
    vl_layout_default_strides(src_spec->rank, src_spec->shape, dense);
    copy_strided(level, es, src_spec->rank, src_spec->shape, dst, dense, src, ss);
  } else if (src_dense) {
    vl_layout_default_strides(dst_spec->rank, dst_spec->shape, dense);
    copy_strided(level, es, dst_spec->rank, dst_spec->shape, dst, ds, src, dense);
  } else {
    return copy_via_temp(level, dst_spec, dst, ds, src_spec, src, ss, nbytes, err);
  }
  return VL_OK;
}

vl_status vl_copy_logical_at(vl_copy_level level, const vl_spec *dst_spec, void *dst,
                             const vl_spec *src_spec, const void *src, vl_error *err) {
  return copy_logical(level_clamp(level), dst_spec, dst, src_spec, src, err);
}

vl_status vl_copy_logical(const vl_spec *dst_spec, void *dst, const vl_spec *src_spec,
                          const void *src, vl_error *err) {
  return copy_logical(vl_copy_level_native(), dst_spec, dst, src_spec, src, err);
}

/* perm must list 0..rank-1 once each, and dst's shape must be src's shape permuted. */
static vl_status check_permute(const vl_spec *dst, const vl_spec *src, const int64_t *perm,
                               vl_error *err) {
  bool seen[VL_MAX_RANK] = {false};
  char a[160], b[160], c[160];
  if (dst->dtype != src->dtype) {
    return vl_error_set(err, VL_ERR_KERNEL, "", "permute from %s into %s: dtypes differ",
                        vl_dtype_name(src->dtype), vl_dtype_name(dst->dtype));
  }
  if (dst->rank != src->rank) {
    return vl_error_set(err, VL_ERR_KERNEL, "", "permute of rank %u into rank %u",
                        (unsigned)src->rank, (unsigned)dst->rank);
  }
  for (size_t d = 0; d < src->rank; d++) {
    if (perm[d] < 0 || perm[d] >= src->rank || seen[perm[d]]) {
      return vl_error_set(err, VL_ERR_KERNEL, "", "dims %s are not a permutation of 0..%d",
                          vl__shape_text(a, sizeof a, src->rank, perm), src->rank - 1);
    }
    seen[perm[d]] = true;
    if (dst->shape[d] != src->shape[perm[d]]) {
      return vl_error_set(err, VL_ERR_KERNEL, "", "permute of %s by %s cannot give shape %s",
                          vl__shape_text(a, sizeof a, src->rank, src->shape),
                          vl__shape_text(b, sizeof b, src->rank, perm),
                          vl__shape_text(c, sizeof c, dst->rank, dst->shape));
    }
  }
  return VL_OK;
}

vl_status vl_copy_permute_at(vl_copy_level level, const vl_spec *dst_spec, void *dst,
                             const vl_spec *src_spec, const void *src, const int64_t *perm,
                             vl_error *err) {
  int64_t ds[VL_MAX_RANK], ss[VL_MAX_RANK], sp[VL_MAX_RANK];
  vl_status st = check_permute(dst_spec, src_spec, perm, err);
  if (st != VL_OK) return st;
  vl_layout_strides(dst_spec, ds);
  vl_layout_strides(src_spec, ss);
  for (size_t d = 0; d < src_spec->rank; d++) sp[d] = ss[perm[d]];
  copy_strided(level_clamp(level), vl_dtype_size(src_spec->dtype), dst_spec->rank, dst_spec->shape,
               dst, ds, src, sp);
  return VL_OK;
}

vl_status vl_copy_permute(const vl_spec *dst_spec, void *dst, const vl_spec *src_spec,
                          const void *src, const int64_t *perm, vl_error *err) {
  return vl_copy_permute_at(vl_copy_level_native(), dst_spec, dst, src_spec, src, perm, err);
}

/* ---- view_copy --------------------------------------------------------------------------- */

/* Resolves size against self (view_copy's size rule, docs/kernels.md) into shape. */
static vl_status view_shape(const vl_tensor *self, const int64_t *size, size_t size_rank,
                            int64_t *shape, vl_error *err) {
  int64_t numel;
  if (size_rank > VL_MAX_RANK) {
    return vl_error_set(err, VL_ERR_KERNEL, "", "view_copy: size has rank %zu, more than %d",
                        size_rank, VL_MAX_RANK);
  }
  if (!vl_spec_numel(&self->spec, &numel)) {
    return vl_error_set(err, VL_ERR_KERNEL, "", "view_copy: element count of self overflows");
  }
  vl_status st = vl_view_size_infer(numel, size, size_rank, shape, err);
  if (st != VL_OK) {
    char msg[VL_ERROR_MESSAGE_MAX];
    snprintf(msg, sizeof msg, "%s", err != NULL ? err->message : "");
    return vl_error_set(err, VL_ERR_KERNEL, "", "view_copy: %s", msg);
  }
  return VL_OK;
}

vl_status vl_view_copy_out(const vl_tensor *self, const int64_t *size, size_t size_rank,
                           vl_tensor *out, vl_error *err) {
  int64_t shape[VL_MAX_RANK];
  char a[160], b[160];
  vl_status st = view_shape(self, size, size_rank, shape, err);
  if (st != VL_OK) return st;
  if (out->spec.dtype != self->spec.dtype) {
    return vl_error_set(err, VL_ERR_KERNEL, "", "view_copy: out has dtype %s, self has %s",
                        vl_dtype_name(out->spec.dtype), vl_dtype_name(self->spec.dtype));
  }
  if (out->spec.rank != size_rank ||
      (size_rank > 0 && memcmp(out->spec.shape, shape, size_rank * sizeof *shape) != 0)) {
    return vl_error_set(err, VL_ERR_KERNEL, "", "view_copy: out has shape %s, size gives %s",
                        vl__shape_text(a, sizeof a, out->spec.rank, out->spec.shape),
                        vl__shape_text(b, sizeof b, size_rank, shape));
  }
  return vl_copy_logical(&out->spec, out->data, &self->spec, self->data, err);
}

vl_status vl__view_copy_spec(const vl_tensor *self, const int64_t *size, size_t size_rank,
                             const uint8_t *out_dim_order, vl_spec *spec, vl_error *err) {
  int64_t shape[VL_MAX_RANK];
  vl_status st = view_shape(self, size, size_rank, shape, err);
  if (st != VL_OK) return st;
  vl_spec_init(spec, self->spec.dtype, (uint8_t)size_rank, shape);
  if (out_dim_order != NULL) {
    if (!vl_dim_order_is_permutation(out_dim_order, size_rank)) {
      return vl_error_set(err, VL_ERR_KERNEL, "/out_dim_order",
                          "view_copy: out dim order is not a permutation of 0..%zu",
                          size_rank > 0 ? size_rank - 1 : 0);
    }
    memcpy(spec->dim_order, out_dim_order, size_rank);
  }
  return VL_OK;
}

vl_status vl_view_copy(const vl_tensor *self, const int64_t *size, size_t size_rank,
                       const uint8_t *out_dim_order, const vl_limits *lim, vl_tensor **out,
                       vl_error *err) {
  vl_spec spec;
  vl_tensor *t = NULL;
  vl_status st = vl__view_copy_spec(self, size, size_rank, out_dim_order, &spec, err);
  if (st != VL_OK) return st;
  st = vl__tensor_new_for_overwrite(&spec, lim, &t, err); /* the copy writes every byte */
  if (st != VL_OK) return st;
  st = vl_view_copy_out(self, size, size_rank, t, err);
  if (st != VL_OK) {
    vl_tensor_free(t);
    return st;
  }
  *out = t;
  return VL_OK;
}

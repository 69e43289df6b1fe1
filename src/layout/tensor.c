/* tensor.c - tensor specs (docs/format.md §1): dim orders, checks, overflow-checked sizes, view
 * size inference, owned tensors and tensor maps. Strides and layout tests are in layout.c (which
 * builds on this file; nothing here calls it), dtypes in dtype.c.
 * Invariant: a spec that passed vl_spec_check has rank <= 16, sizes >= 0, a permutation as dim
 * order and an nbytes that fits in 63 bits. */
#include "viewlower/tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_num.h"
#include "layout/tensor_internal.h"

/* ---- dim orders: the orders a spec may declare (docs/format.md §1) ---- */

void vl_dim_order_default(uint8_t *order, uint8_t rank) {
  for (uint8_t i = 0; i < rank; i++) order[i] = i;
}

bool vl_dim_order_channels_last(uint8_t *order, uint8_t rank) {
  if (rank != 4 && rank != 5) return false;
  order[0] = 0;
  for (uint8_t i = 1; i + 1 < rank; i++) order[i] = (uint8_t)(i + 1);
  order[rank - 1] = 1;
  return true;
}

bool vl_dim_order_is_permutation(const uint8_t *order, size_t rank) {
  bool seen[VL_MAX_RANK] = {false};
  if (rank > VL_MAX_RANK) return false;
  for (size_t i = 0; i < rank; i++) {
    if (order[i] >= rank || seen[order[i]]) return false;
    seen[order[i]] = true;
  }
  return true;
}

/* ---- specs ---- */

void vl_limits_default(vl_limits *lim) {
  lim->max_nodes = 1000000;
  lim->max_tensor_bytes = (int64_t)1 << 30;
  lim->max_total_bytes = (int64_t)4 << 30;
  lim->max_name_len = 4096;
  lim->max_json_values = (int64_t)1 << 24;
}

const vl_limits *vl__limits_or_default(const vl_limits *lim, vl_limits *storage) {
  if (lim != NULL) return lim;
  vl_limits_default(storage);
  return storage;
}

void vl_spec_init(vl_spec *s, vl_dtype dt, uint8_t rank, const int64_t *shape) {
  memset(s, 0, sizeof *s);
  s->dtype = dt;
  s->rank = rank;
  if (rank > 0) memcpy(s->shape, shape, rank * sizeof *shape);
  vl_dim_order_default(s->dim_order, rank);
}

bool vl_spec_numel(const vl_spec *s, int64_t *out) {
  int64_t n = 1;
  /* A zero size makes the tensor empty whatever the other sizes: [2^40, 2^40, 0] is as valid
   * as [0, 2^40, 2^40] (its product must not overflow on the way to the zero). */
  for (uint8_t i = 0; i < s->rank; i++) {
    if (s->shape[i] < 0) return false;
    if (s->shape[i] == 0) n = 0;
  }
  for (uint8_t i = 0; i < s->rank && n != 0; i++) {
    if (s->shape[i] < 0 || __builtin_mul_overflow(n, s->shape[i], &n)) return false;
  }
  *out = n;
  return true;
}

bool vl_spec_nbytes(const vl_spec *s, int64_t *out) {
  int64_t n;
  if (!vl_spec_numel(s, &n)) return false;
  return !__builtin_mul_overflow(n, (int64_t)vl_dtype_size(s->dtype), out);
}

vl_status vl_spec_check(const vl_spec *s, vl_error *err) {
  if ((unsigned)s->dtype >= VL_DTYPE_COUNT) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/dtype", "unknown dtype");
  }
  if (s->rank > VL_MAX_RANK) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/shape", "rank %u exceeds the maximum of %d",
                        s->rank, VL_MAX_RANK);
  }
  for (uint8_t i = 0; i < s->rank; i++) {
    if (s->shape[i] < 0 || s->shape[i] > VL_MAX_DIM_SIZE) {
      char path[32];
      snprintf(path, sizeof path, "/shape/%u", i);
      return vl_error_set(err, VL_ERR_INVALID_TENSOR, path,
                          s->shape[i] < 0 ? "size %lld is negative" : "size %lld exceeds 2^53",
                          (long long)s->shape[i]);
    }
  }
  if (!vl_dim_order_is_permutation(s->dim_order, s->rank)) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/dim_order", "not a permutation of 0..%d",
                        (int)s->rank - 1);
  }
  int64_t nbytes;
  if (!vl_spec_nbytes(s, &nbytes)) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/shape", "byte size overflows 63 bits");
  }
  return VL_OK;
}

bool vl_spec_equal(const vl_spec *a, const vl_spec *b) {
  if (a->dtype != b->dtype || a->rank != b->rank || a->dynamic != b->dynamic) return false;
  for (uint8_t i = 0; i < a->rank; i++) {
    if (a->shape[i] != b->shape[i] || a->dim_order[i] != b->dim_order[i]) return false;
  }
  return true;
}

vl_status vl_view_size_infer(int64_t numel, const int64_t *size, size_t rank, int64_t *shape,
                             vl_error *err) {
  if (rank > VL_MAX_RANK) {
    return vl_error_set(err, VL_ERR_KERNEL, "", "size has rank %zu, more than %d", rank,
                        VL_MAX_RANK);
  }
  size_t infer = rank;
  int64_t known = 1;
  bool has_zero = false;
  /* With a zero size the product is 0, however large the sizes before it ([2^40, 2^40, 0]). */
  for (size_t i = 0; i < rank; i++) {
    if (size[i] == 0) known = 0;
  }
  for (size_t i = 0; i < rank; i++) {
    if (size[i] == -1) {
      if (infer != rank) {
        return vl_error_set(err, VL_ERR_KERNEL, "", "only one size may be -1 (dims %zu and %zu)",
                            infer, i);
      }
      infer = i;
    } else if (size[i] < 0) {
      return vl_error_set(err, VL_ERR_KERNEL, "", "size %lld at dim %zu is negative",
                          (long long)size[i], i);
    } else if (size[i] > VL_MAX_DIM_SIZE) {
      return vl_error_set(err, VL_ERR_KERNEL, "", "size %lld at dim %zu exceeds 2^53",
                          (long long)size[i], i);
    } else {
      has_zero |= size[i] == 0;
      if (__builtin_mul_overflow(known, size[i], &known)) {
        return vl_error_set(err, VL_ERR_KERNEL, "", "product of sizes overflows");
      }
    }
  }
  int64_t out[VL_MAX_RANK];
  if (rank > 0) memcpy(out, size, rank * sizeof *size);
  if (infer != rank) {
    if (has_zero) {
      return vl_error_set(err, VL_ERR_KERNEL, "",
                          "cannot infer size -1 at dim %zu: another size is 0", infer);
    }
    if (numel % known != 0) {
      return vl_error_set(err, VL_ERR_KERNEL, "",
                          "cannot infer size -1 at dim %zu: %lld elements do not divide by %lld",
                          infer, (long long)numel, (long long)known);
    }
    out[infer] = numel / known;
    known = numel;
  }
  if (known != numel) {
    return vl_error_set(err, VL_ERR_KERNEL, "", "size has %lld elements but the input has %lld",
                        (long long)known, (long long)numel);
  }
  if (rank > 0) memcpy(shape, out, rank * sizeof *out);
  return VL_OK;
}

/* A tensor's storage (zero-filled when zero), which free() releases. It starts on a 64-byte line,
 * as the copy kernels' blocks and 64-byte stores prefer (glibc gives 16 bytes: the AVX-512 level
 * on Zen 5 measured u8 768x196 0.32 -> 0.34x memcpy, f64 384x196 0.57 -> 0.60x, 224^2 images
 * NCHW -> NHWC 0.57 -> 0.70x with aligned tensors). Large storage was once left to calloc, whose
 * fresh pages come zero but start 16 bytes past a page: every source row of a transpose then
 * began 16 bytes into a line, and the f32 channels-last copy of 3.2 MB ran at 0.58-0.60x memcpy
 * against 0.80x aligned (same engine, same run). Zero-filled large storage is cleared by hand;
 * the tensors the core fills whole (decoded inputs, copy results) are not cleared at all. */
#define TENSOR_ALIGN 64
static void *tensor_storage(size_t nbytes, bool zero) {
  if (nbytes > SIZE_MAX - TENSOR_ALIGN) return NULL;
  size_t n = (nbytes + TENSOR_ALIGN - 1) / TENSOR_ALIGN * TENSOR_ALIGN; /* a multiple (C11) */
  void *p = aligned_alloc(TENSOR_ALIGN, n > 0 ? n : TENSOR_ALIGN);
  if (p != NULL && zero) memset(p, 0, n);
  return p;
}

static vl_status tensor_new(const vl_spec *spec, const vl_limits *lim, bool zero, vl_tensor **out,
                            vl_error *err) {
  int64_t nbytes;
  if (!vl_spec_nbytes(spec, &nbytes)) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/shape", "byte size overflows 63 bits");
  }
  if (lim != NULL && nbytes > lim->max_tensor_bytes) {
    return vl_error_set(err, VL_ERR_TOO_LARGE, "/shape",
                        "tensor of %lld bytes exceeds the limit of %lld bytes", (long long)nbytes,
                        (long long)lim->max_tensor_bytes);
  }
  if ((uint64_t)nbytes > SIZE_MAX) {
    return vl_error_set(err, VL_ERR_TOO_LARGE, "/shape", "too large");
  }
  vl_tensor *t = calloc(1, sizeof *t);
  if (t == NULL) return vl_error_set(err, VL_ERR_NOMEM, "", "out of memory");
  t->spec = *spec;
  t->nbytes = nbytes;
  t->data = tensor_storage((size_t)nbytes, zero);
  if (t->data == NULL) {
    free(t);
    return vl_error_set(err, VL_ERR_NOMEM, "", "out of memory allocating %lld bytes",
                        (long long)nbytes);
  }
  *out = t;
  return VL_OK;
}

vl_status vl_tensor_new(const vl_spec *spec, const vl_limits *lim, vl_tensor **out, vl_error *err) {
  return tensor_new(spec, lim, true, out, err);
}

vl_status vl__tensor_new_for_overwrite(const vl_spec *spec, const vl_limits *lim, vl_tensor **out,
                                       vl_error *err) {
  return tensor_new(spec, lim, false, out, err);
}

void vl_tensor_free(vl_tensor *t) {
  if (t == NULL) return;
  free(t->data);
  free(t);
}

void vl_tensor_map_free(vl_tensor_map *m) {
  if (m == NULL) return;
  for (size_t i = 0; i < m->count; i++) {
    free(m->names[i]);
    vl_tensor_free(m->tensors[i]);
  }
  free(m->names);
  free(m->tensors);
  free(m);
}

long vl_tensor_map_find(const vl_tensor_map *m, const char *name) {
  if (m == NULL) return -1;
  for (size_t i = 0; i < m->count; i++) {
    if (strcmp(m->names[i], name) == 0) return (long)i;
  }
  return -1;
}

void vl__bytes_add(int64_t *sum, int64_t nbytes) {
  if (__builtin_add_overflow(*sum, nbytes, sum)) *sum = INT64_MAX;
}

/* Written without snprintf: the kept views' reasons print shapes, one call per element cost
 * a tenth of a small lowering's time in the daemon. Truncated to n - 1 bytes as snprintf. */
const char *vl__shape_text(char *buf, size_t n, size_t rank, const int64_t *shape) {
  if (n == 0) return buf;
  size_t at = 0;
  char num[VL__NUM_TEXT_MAX];
#define SHAPE_PUT(p, len)                                                                          \
  do {                                                                                             \
    size_t k_ = (len) < n - 1 - at ? (len) : n - 1 - at;                                           \
    memcpy(buf + at, (p), k_);                                                                     \
    at += k_;                                                                                      \
  } while (0)
  SHAPE_PUT("[", 1);
  for (size_t i = 0; i < rank; i++) {
    if (i > 0) SHAPE_PUT(",", 1);
    size_t len = vl__num_format_int(shape[i], num);
    SHAPE_PUT(num, len);
  }
  SHAPE_PUT("]", 1);
#undef SHAPE_PUT
  buf[at] = '\0';
  return buf;
}

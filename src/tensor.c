/* tensor.c - dtypes, specs and layouts (SPEC §1): strides from dim order, canonical dim order
 * from strides, contiguity, overflow-checked sizes, view size inference, owned tensors.
 * Invariant: a spec that passed vl_spec_check has rank <= 16, sizes >= 0, a permutation as dim
 * order and an nbytes that fits in 63 bits. */
#include "viewlower/tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
  const char *name;
  size_t size;
} dtype_table[] = {
#define ROW(e, name, size) {name, size},
    VL_DTYPE_MAP(ROW)
#undef ROW
};

void vl_limits_default(vl_limits *lim) {
  lim->max_nodes = 1000000;
  lim->max_tensor_bytes = (int64_t)1 << 30;
  lim->max_total_bytes = (int64_t)4 << 30;
  lim->max_name_len = 4096;
  lim->max_json_values = (int64_t)1 << 24;
}

const char *vl_dtype_name(vl_dtype dt) {
  return (unsigned)dt < VL_DTYPE_COUNT ? dtype_table[dt].name : "?";
}

bool vl_dtype_from_name(const char *name, vl_dtype *out) {
  for (unsigned i = 0; i < VL_DTYPE_COUNT; i++) {
    if (strcmp(name, dtype_table[i].name) == 0) {
      *out = (vl_dtype)i;
      return true;
    }
  }
  return false;
}

size_t vl_dtype_size(vl_dtype dt) {
  return (unsigned)dt < VL_DTYPE_COUNT ? dtype_table[dt].size : 0;
}

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

void vl_spec_init(vl_spec *s, vl_dtype dt, uint8_t rank, const int64_t *shape) {
  memset(s, 0, sizeof *s);
  s->dtype = dt;
  s->rank = rank;
  if (rank > 0) memcpy(s->shape, shape, rank * sizeof *shape);
  vl_dim_order_default(s->dim_order, rank);
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

bool vl_spec_numel(const vl_spec *s, int64_t *out) {
  int64_t n = 1;
  for (uint8_t i = 0; i < s->rank; i++) {
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
  if ((unsigned)s->dtype >= VL_DTYPE_COUNT)
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/dtype", "unknown dtype");
  if (s->rank > VL_MAX_RANK)
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/shape", "rank %u exceeds the maximum of %d",
                        s->rank, VL_MAX_RANK);
  for (uint8_t i = 0; i < s->rank; i++) {
    if (s->shape[i] < 0 || s->shape[i] > VL_MAX_DIM_SIZE) {
      char path[32];
      snprintf(path, sizeof path, "/shape/%u", i);
      return vl_error_set(err, VL_ERR_INVALID_TENSOR, path,
                          s->shape[i] < 0 ? "size %lld is negative" : "size %lld exceeds 2^53",
                          (long long)s->shape[i]);
    }
  }
  if (!vl_dim_order_is_permutation(s->dim_order, s->rank))
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/dim_order", "not a permutation of 0..%d",
                        (int)s->rank - 1);
  int64_t nbytes;
  if (!vl_spec_nbytes(s, &nbytes))
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/shape", "byte size overflows 63 bits");
  return VL_OK;
}

bool vl_spec_equal(const vl_spec *a, const vl_spec *b) {
  if (a->dtype != b->dtype || a->rank != b->rank || a->dynamic != b->dynamic) return false;
  for (uint8_t i = 0; i < a->rank; i++)
    if (a->shape[i] != b->shape[i] || a->dim_order[i] != b->dim_order[i]) return false;
  return true;
}

static void strides_for_order(uint8_t rank, const int64_t *shape, const uint8_t *order,
                              int64_t *strides) {
  int64_t stride = 1;
  for (int i = rank - 1; i >= 0; i--) {
    uint8_t d = order[i];
    strides[d] = stride;
    /* A zero size counts as 1 so that strides stay meaningful for empty tensors. Sizes of a
     * checked spec keep every product within 63 bits. */
    stride *= shape[d] > 1 ? shape[d] : 1;
  }
}

void vl_layout_strides(const vl_spec *s, int64_t strides[VL_MAX_RANK]) {
  strides_for_order(s->rank, s->shape, s->dim_order, strides);
}

void vl_layout_default_strides(uint8_t rank, const int64_t *shape, int64_t *strides) {
  uint8_t order[VL_MAX_RANK];
  vl_dim_order_default(order, rank);
  strides_for_order(rank, shape, order, strides);
}

/* Do the strides of order match the given ones? exact: on every dim; else on dims of size > 1. */
static bool order_fits(uint8_t rank, const int64_t *shape, const int64_t *strides,
                       const uint8_t *order, bool exact) {
  int64_t want[VL_MAX_RANK];
  strides_for_order(rank, shape, order, want);
  for (uint8_t d = 0; d < rank; d++)
    if ((exact || shape[d] > 1) && want[d] != strides[d]) return false;
  return true;
}

static void order_by_descending_stride(uint8_t rank, const int64_t *strides, uint8_t *order) {
  /* Insertion sort on at most 16 dims; ties keep ascending dim index (stable). */
  vl_dim_order_default(order, rank);
  for (uint8_t i = 1; i < rank; i++) {
    uint8_t d = order[i];
    int j = i - 1;
    while (j >= 0 && strides[order[j]] < strides[d]) {
      order[j + 1] = order[j];
      j--;
    }
    order[j + 1] = d;
  }
}

vl_status vl_layout_dim_order_from_strides(uint8_t rank, const int64_t *shape,
                                           const int64_t *strides, uint8_t *order, vl_error *err) {
  uint8_t cand[VL_MAX_RANK];
  for (uint8_t d = 0; d < rank; d++) {
    if (shape[d] < 0) return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/shape", "negative size");
    if (strides[d] < 0)
      return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/strides", "stride %lld is negative",
                          (long long)strides[d]);
  }
  /* Preference: an exact match of default, then of channels-last; then the same two ignoring
   * size-1 dims; then dims by descending stride. [8,1,3,3] strides [9,1,3,1] is channels-last. */
  for (int pass = 0; pass < 2; pass++) {
    bool exact = pass == 0;
    vl_dim_order_default(cand, rank);
    if (order_fits(rank, shape, strides, cand, exact)) goto found;
    if (vl_dim_order_channels_last(cand, rank) && order_fits(rank, shape, strides, cand, exact))
      goto found;
  }
  order_by_descending_stride(rank, strides, cand);
  if (order_fits(rank, shape, strides, cand, false)) goto found;
  return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/strides",
                      "strides are not dense (no dim order produces them)");
found:
  memcpy(order, cand, rank);
  return VL_OK;
}

bool vl_layout_is_default_order(const vl_spec *s) {
  for (uint8_t i = 0; i < s->rank; i++)
    if (s->dim_order[i] != i) return false;
  return true;
}

bool vl_layout_is_channels_last(const vl_spec *s) {
  uint8_t cl[VL_MAX_RANK];
  return vl_dim_order_channels_last(cl, s->rank) && memcmp(cl, s->dim_order, s->rank) == 0;
}

bool vl_layout_is_contiguous(const vl_spec *s) {
  int64_t numel;
  if (vl_spec_numel(s, &numel) && numel <= 1) return true;
  int64_t have[VL_MAX_RANK], want[VL_MAX_RANK];
  vl_layout_strides(s, have);
  vl_layout_default_strides(s->rank, s->shape, want);
  for (uint8_t d = 0; d < s->rank; d++)
    if (s->shape[d] > 1 && have[d] != want[d]) return false;
  return true;
}

vl_status vl_view_size_infer(int64_t numel, const int64_t *size, size_t rank, int64_t *shape,
                             vl_error *err) {
  if (rank > VL_MAX_RANK)
    return vl_error_set(err, VL_ERR_KERNEL, "", "size has rank %zu, more than %d", rank,
                        VL_MAX_RANK);
  size_t infer = rank;
  int64_t known = 1;
  bool has_zero = false;
  for (size_t i = 0; i < rank; i++) {
    if (size[i] == -1) {
      if (infer != rank)
        return vl_error_set(err, VL_ERR_KERNEL, "", "only one size may be -1 (dims %zu and %zu)",
                            infer, i);
      infer = i;
    } else if (size[i] < 0) {
      return vl_error_set(err, VL_ERR_KERNEL, "", "size %lld at dim %zu is negative",
                          (long long)size[i], i);
    } else if (size[i] > VL_MAX_DIM_SIZE) {
      return vl_error_set(err, VL_ERR_KERNEL, "", "size %lld at dim %zu exceeds 2^53",
                          (long long)size[i], i);
    } else {
      has_zero |= size[i] == 0;
      if (__builtin_mul_overflow(known, size[i], &known))
        return vl_error_set(err, VL_ERR_KERNEL, "", "product of sizes overflows");
    }
  }
  int64_t out[VL_MAX_RANK];
  if (rank > 0) memcpy(out, size, rank * sizeof *size);
  if (infer != rank) {
    if (has_zero)
      return vl_error_set(err, VL_ERR_KERNEL, "",
                          "cannot infer size -1 at dim %zu: another size is 0", infer);
    if (numel % known != 0)
      return vl_error_set(err, VL_ERR_KERNEL, "",
                          "cannot infer size -1 at dim %zu: %lld elements do not divide by %lld",
                          infer, (long long)numel, (long long)known);
    out[infer] = numel / known;
    known = numel;
  }
  if (known != numel)
    return vl_error_set(err, VL_ERR_KERNEL, "", "size has %lld elements but the input has %lld",
                        (long long)known, (long long)numel);
  if (rank > 0) memcpy(shape, out, rank * sizeof *out);
  return VL_OK;
}

vl_status vl_tensor_new(const vl_spec *spec, const vl_limits *lim, vl_tensor **out, vl_error *err) {
  int64_t nbytes;
  if (!vl_spec_nbytes(spec, &nbytes))
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/shape", "byte size overflows 63 bits");
  if (lim != NULL && nbytes > lim->max_tensor_bytes)
    return vl_error_set(err, VL_ERR_TOO_LARGE, "/shape",
                        "tensor of %lld bytes exceeds the limit of %lld bytes", (long long)nbytes,
                        (long long)lim->max_tensor_bytes);
  if ((uint64_t)nbytes > SIZE_MAX)
    return vl_error_set(err, VL_ERR_TOO_LARGE, "/shape", "too large");
  vl_tensor *t = calloc(1, sizeof *t);
  if (t == NULL) return vl_error_set(err, VL_ERR_NOMEM, "", "out of memory");
  t->spec = *spec;
  t->nbytes = nbytes;
  t->data = calloc(nbytes > 0 ? (size_t)nbytes : 1, 1);
  if (t->data == NULL) {
    free(t);
    return vl_error_set(err, VL_ERR_NOMEM, "", "out of memory allocating %lld bytes",
                        (long long)nbytes);
  }
  *out = t;
  return VL_OK;
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
  for (size_t i = 0; i < m->count; i++)
    if (strcmp(m->names[i], name) == 0) return (long)i;
  return -1;
}

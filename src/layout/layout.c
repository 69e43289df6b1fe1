/* layout.c - the layout algebra (docs/format.md §1, §3): dim orders, strides from a dim order and
 * the canonical dim order from strides, contiguity, PyTorch's view stride rule and the exact layout
 * test (a view may alias its base only if every logical element keeps its memory offset).
 * The dim orders themselves (default, channels-last, the permutation check) belong to the spec
 * (tensor.c); this file builds on them and calls nothing back.
 * Invariant: specs given here passed vl_spec_check (products of sizes fit in 63 bits). */
#include "viewlower/layout.h"

#include <stdint.h>
#include <string.h>

static void strides_for_order(uint8_t rank, const int64_t *shape, const uint8_t *order,
                              int64_t *strides) {
  int64_t stride = 1;
  for (int i = rank - 1; i >= 0; i--) {
    uint8_t d = order[i];
    strides[d] = stride;
    /* A zero size counts as 1 so that strides stay meaningful for empty tensors. Then the
     * product of the other sizes may pass 63 bits ([0, 2^40, 2^40]): such a stride saturates
     * at INT64_MAX (it addresses no element). Non-empty checked specs never overflow. */
    if (__builtin_mul_overflow(stride, shape[d] > 1 ? shape[d] : 1, &stride)) stride = INT64_MAX;
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
  for (uint8_t d = 0; d < rank; d++) {
    if ((exact || shape[d] > 1) && want[d] != strides[d]) return false;
  }
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
    if (strides[d] < 0) {
      return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/strides", "stride %lld is negative",
                          (long long)strides[d]);
    }
  }
  /* Preference: an exact match of default, then of channels-last; then the same two ignoring
   * size-1 dims; then dims by descending stride. [8,1,3,3] strides [9,1,3,1] is channels-last. */
  for (int pass = 0; pass < 2; pass++) {
    bool exact = pass == 0;
    vl_dim_order_default(cand, rank);
    if (order_fits(rank, shape, strides, cand, exact)) goto found;
    if (vl_dim_order_channels_last(cand, rank) && order_fits(rank, shape, strides, cand, exact)) {
      goto found;
    }
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
  for (uint8_t i = 0; i < s->rank; i++) {
    if (s->dim_order[i] != i) return false;
  }
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
  for (uint8_t d = 0; d < s->rank; d++) {
    if (s->shape[d] > 1 && have[d] != want[d]) return false;
  }
  return true;
}

bool vl_layout_rule_contiguous(const vl_spec *s) {
  return s->dynamic ? vl_layout_is_default_order(s) : vl_layout_is_contiguous(s);
}


/* Strides base (shape, strides) would have as a strided alias of shape out_shape, or false
 * when no such alias exists. Walks the base from its innermost dim, cutting it into chunks of
 * dims that are nested in memory, and requires the view's dims to tile each chunk exactly. */
bool vl_layout_view_strides(uint8_t rank, const int64_t *shape, const int64_t *strides,
                         uint8_t out_rank, const int64_t *out_shape, int64_t *out_strides) {
  int view_d = out_rank - 1;
  int64_t chunk_base_stride = strides[rank - 1];
  int64_t tensor_numel = 1, view_numel = 1;
  int64_t span = 0;
  /* Products here fit for non-empty tensors; an empty one may pass 63 bits: no alias then. */
  for (int d = rank - 1; d >= 0; d--) {
    if (__builtin_mul_overflow(tensor_numel, shape[d], &tensor_numel)) return false;
    bool chunk_ends = d == 0;
    if (d > 0 && shape[d - 1] != 1) {
      chunk_ends = __builtin_mul_overflow(tensor_numel, chunk_base_stride, &span) ||
                   strides[d - 1] != span;
    }
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || out_shape[view_d] == 1)) {
      if (__builtin_mul_overflow(view_numel, chunk_base_stride, &out_strides[view_d]) ||
          __builtin_mul_overflow(view_numel, out_shape[view_d], &view_numel)) {
        return false;
      }
      view_d--;
    }
    if (view_numel != tensor_numel) return false;
    if (d > 0) {
      chunk_base_stride = strides[d - 1];
      tensor_numel = view_numel = 1;
    }
  }
  return view_d == -1;
}

bool vl_layout_view_keeps_offsets(const vl_spec *base, const vl_spec *view) {
  if (base->dynamic || view->dynamic) {
    return vl_layout_is_default_order(base) && vl_layout_is_default_order(view);
  }
  int64_t numel = 0, view_numel = 0;
  if (!vl_spec_numel(base, &numel) || !vl_spec_numel(view, &view_numel) || numel != view_numel) {
    return false;
  }
  if (numel <= 1) return true; /* nothing can move */
  int64_t bs[VL_MAX_RANK], vs[VL_MAX_RANK], want[VL_MAX_RANK];
  vl_layout_strides(base, bs);
  vl_layout_strides(view, want);
  if (!vl_layout_view_strides(base->rank, base->shape, bs, view->rank, view->shape, vs)) return false;
  for (uint8_t d = 0; d < view->rank; d++) {
    if (view->shape[d] > 1 && vs[d] != want[d]) return false;
  }
  return true;
}

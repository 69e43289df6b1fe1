/* lower_layout.c - the exact layout test of SPEC §3: a view may alias its base only if every
 * logical element keeps its memory offset. The base is viewed with the view's shape by
 * PyTorch's view stride rule (split a dim, or merge dims adjacent and nested in memory); the
 * strides that alias would have must equal the strides of the view's declared dim order
 * (size-1 dims ignored). */
#include "viewlower/lower.h"

/* Strides base (shape, strides) would have as a strided alias of shape out_shape, or false
 * when no such alias exists. Walks the base from its innermost dim, cutting it into chunks of
 * dims that are nested in memory, and requires the view's dims to tile each chunk exactly. */
static bool view_strides(uint8_t rank, const int64_t *shape, const int64_t *strides,
                         uint8_t out_rank, const int64_t *out_shape, int64_t *out_strides) {
  int view_d = out_rank - 1;
  int64_t chunk_base_stride = strides[rank - 1];
  int64_t tensor_numel = 1, view_numel = 1;
  for (int d = rank - 1; d >= 0; d--) {
    tensor_numel *= shape[d];
    bool chunk_ends =
        d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || out_shape[view_d] == 1)) {
      out_strides[view_d] = view_numel * chunk_base_stride;
      view_numel *= out_shape[view_d];
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
  if (base->dynamic || view->dynamic)
    return vl_layout_is_default_order(base) && vl_layout_is_default_order(view);
  int64_t numel = 0, view_numel = 0;
  if (!vl_spec_numel(base, &numel) || !vl_spec_numel(view, &view_numel) || numel != view_numel)
    return false;
  if (numel <= 1) return true; /* nothing can move */
  int64_t bs[VL_MAX_RANK], vs[VL_MAX_RANK], want[VL_MAX_RANK];
  vl_layout_strides(base, bs);
  vl_layout_strides(view, want);
  if (!view_strides(base->rank, base->shape, bs, view->rank, view->shape, vs)) return false;
  for (uint8_t d = 0; d < view->rank; d++)
    if (view->shape[d] > 1 && vs[d] != want[d]) return false;
  return true;
}

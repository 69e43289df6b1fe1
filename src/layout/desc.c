/* desc.c - descriptor composition (docs/format.md §3, "Layout-only nodes"): one map per layout-only
 * op, each turning the (shape, strides, offset) of its input into its own exactly as PyTorch's view
 * op of the same name does (checked against PyTorch by tests/oracle/desc_oracle.py). A map fails
 * where PyTorch raises. Maps work on a local copy, so in and out may be the same descriptor.
 * Invariant: descriptors come from checked specs or earlier maps, so sizes are >= 0 and every
 * offset a map computes stays within the buffer the descriptor already spans (no overflow),
 * except for an empty tensor, whose other sizes may multiply past 63 bits: its strides saturate
 * and its offset stays where it was, since it reads no element. */
#include <string.h>

#include "viewlower/layout.h"

#include "layout/desc_internal.h"

void vl_desc_of_spec(const vl_spec *s, int64_t offset, vl_desc *out) {
  out->rank = s->rank;
  out->offset = offset;
  memcpy(out->shape, s->shape, s->rank * sizeof s->shape[0]);
  vl_layout_strides(s, out->strides);
}

bool vl__wrap_dim(int64_t dim, uint8_t rank, int64_t *out) {
  int64_t r = rank > 0 ? rank : 1;
  if (dim < -r || dim >= r) return false;
  *out = dim < 0 ? dim + r : dim;
  return true;
}

static bool numel_of(uint8_t rank, const int64_t *shape, int64_t *numel) {
  int64_t n = 1;
  for (uint8_t d = 0; d < rank; d++) {
    if (shape[d] < 0 || __builtin_mul_overflow(n, shape[d], &n)) return false;
  }
  *numel = n;
  return true;
}

/* PyTorch's computeStride, including its choices where any stride would do: a rank-0 input
 * gives all ones; an empty tensor keeps its strides when the shape is unchanged, else takes
 * contiguous ones. */
static bool reshape_strides(const vl_desc *in, uint8_t rank, const int64_t *shape,
                            int64_t numel, int64_t *out) {
  if (in->rank == 0) {
    for (uint8_t d = 0; d < rank; d++) out[d] = 1;
    return true;
  }
  if (numel == 0) {
    if (rank == in->rank && memcmp(shape, in->shape, rank * sizeof *shape) == 0) {
      memcpy(out, in->strides, rank * sizeof *out);
    } else {
      int64_t stride = 1;
      for (int d = rank - 1; d >= 0; d--) {
        out[d] = stride;
        stride *= shape[d] > 1 ? shape[d] : 1;
      }
    }
    return true;
  }
  return vl_layout_view_strides(in->rank, in->shape, in->strides, rank, shape, out);
}

bool vl_desc_reshape(const vl_desc *in, uint8_t rank, const int64_t *shape, vl_desc *out) {
  int64_t a, b, strides[VL_MAX_RANK];
  if (rank > VL_MAX_RANK || !numel_of(in->rank, in->shape, &a) || !numel_of(rank, shape, &b) ||
      a != b) {
    return false;
  }
  if (!reshape_strides(in, rank, shape, a, strides)) return false;
  out->offset = in->offset;
  out->rank = rank;
  memmove(out->shape, shape, rank * sizeof *shape);
  memcpy(out->strides, strides, rank * sizeof *strides);
  return true;
}

bool vl_desc_permute(const vl_desc *in, const int64_t *dims, size_t n, vl_desc *out) {
  vl_desc r = *in;
  bool seen[VL_MAX_RANK] = {false};
  if (n != in->rank) return false;
  for (size_t i = 0; i < n; i++) {
    int64_t d;
    if (!vl__wrap_dim(dims[i], in->rank, &d) || (in->rank > 0 && seen[d])) return false;
    if (in->rank == 0) continue;
    seen[d] = true;
    r.shape[i] = in->shape[d];
    r.strides[i] = in->strides[d];
  }
  *out = r;
  return true;
}

bool vl_desc_transpose(const vl_desc *in, int64_t dim0, int64_t dim1, vl_desc *out) {
  int64_t a, b;
  if (!vl__wrap_dim(dim0, in->rank, &a) || !vl__wrap_dim(dim1, in->rank, &b)) return false;
  vl_desc r = *in;
  if (in->rank > 0) {
    r.shape[a] = in->shape[b], r.shape[b] = in->shape[a];
    r.strides[a] = in->strides[b], r.strides[b] = in->strides[a];
  }
  *out = r;
  return true;
}

bool vl_desc_t(const vl_desc *in, vl_desc *out) {
  if (in->rank > 2) return false;
  return in->rank == 2 ? vl_desc_transpose(in, 0, 1, out) : vl_desc_identity(in, out);
}

/* Keeps the dims of in not marked in drop. */
static void drop_dims(const vl_desc *in, const bool *drop, vl_desc *out) {
  vl_desc r = *in;
  r.rank = 0;
  for (uint8_t d = 0; d < in->rank; d++) {
    if (drop[d]) continue;
    r.shape[r.rank] = in->shape[d];
    r.strides[r.rank++] = in->strides[d];
  }
  *out = r;
}

bool vl_desc_squeeze(const vl_desc *in, const int64_t *dims, size_t n, vl_desc *out) {
  bool drop[VL_MAX_RANK] = {false}, listed[VL_MAX_RANK] = {false};
  for (uint8_t d = 0; dims == NULL && d < in->rank; d++) drop[d] = in->shape[d] == 1;
  for (size_t i = 0; dims != NULL && i < n; i++) {
    int64_t d;
    if (!vl__wrap_dim(dims[i], in->rank, &d)) return false;
    if (in->rank == 0) continue;
    if (listed[d]) return false;
    listed[d] = true;
    drop[d] = in->shape[d] == 1;
  }
  drop_dims(in, drop, out);
  return true;
}

bool vl_desc_unsqueeze(const vl_desc *in, int64_t dim, vl_desc *out) {
  int64_t d;
  if (in->rank >= VL_MAX_RANK || !vl__wrap_dim(dim, (uint8_t)(in->rank + 1), &d)) return false;
  vl_desc r = *in;
  /* PyTorch's stride for the new dim: the extent of the dim it is put in front of (saturated
   * where an empty tensor's sizes pass 63 bits, as vl_layout_strides does). */
  int64_t stride = 1;
  if (d < in->rank && __builtin_mul_overflow(in->shape[d], in->strides[d], &stride)) {
    stride = INT64_MAX;
  }
  for (int k = in->rank; k > d; k--) {
    r.shape[k] = in->shape[k - 1];
    r.strides[k] = in->strides[k - 1];
  }
  r.shape[d] = 1;
  r.strides[d] = stride;
  r.rank = (uint8_t)(in->rank + 1);
  *out = r;
  return true;
}

/* in's offset moved to index i of dim d (0 <= i <= its size). Inside a non-empty tensor's
 * buffer this fits; an empty tensor's sizes may pass 63 bits ([0, 2^40, 2^40]), and as its
 * elements sit nowhere, the offset then stays where it was. */
static int64_t offset_at(const vl_desc *in, int64_t d, int64_t i) {
  int64_t step, offset;
  if (__builtin_mul_overflow(i, in->strides[d], &step) ||
      __builtin_add_overflow(in->offset, step, &offset)) {
    return in->offset;
  }
  return offset;
}

bool vl_desc_slice(const vl_desc *in, int64_t dim, const int64_t *start, const int64_t *end,
                   int64_t step, vl_desc *out) {
  int64_t d;
  if (in->rank == 0 || !vl__wrap_dim(dim, in->rank, &d) || step < 1) return false;
  int64_t size = in->shape[d];
  int64_t s = start ? *start : 0, e = end ? *end : INT64_MAX;
  if (s < 0) s += size;
  if (e < 0) e += size;
  s = s < 0 ? 0 : (s >= size ? size : s);
  e = e < s ? s : (e >= size ? size : e);
  vl_desc r = *in;
  r.offset = offset_at(in, d, s);
  r.shape[d] = e == s ? 0 : (e - s - 1) / step + 1;
  /* A product past 63 bits leaves at most one element along the dim (a step past its extent),
   * or none (an empty tensor): the stride addresses nothing else, so the input's is kept. */
  if (__builtin_mul_overflow(in->strides[d], step, &r.strides[d])) r.strides[d] = in->strides[d];
  *out = r;
  return true;
}

bool vl_desc_select(const vl_desc *in, int64_t dim, int64_t index, vl_desc *out) {
  int64_t d;
  if (in->rank == 0 || !vl__wrap_dim(dim, in->rank, &d)) return false;
  int64_t size = in->shape[d];
  if (index < -size || index >= size) return false;
  if (index < 0) index += size;
  bool drop[VL_MAX_RANK] = {false};
  drop[d] = true;
  int64_t offset = offset_at(in, d, index);
  drop_dims(in, drop, out);
  out->offset = offset;
  return true;
}

bool vl_desc_identity(const vl_desc *in, vl_desc *out) {
  *out = *in;
  return true;
}

bool vl_desc_as_strided(const vl_desc *in, uint8_t rank, const int64_t *size,
                        const int64_t *stride, int64_t storage_offset, vl_desc *out) {
  int64_t offset;
  if (rank > VL_MAX_RANK || storage_offset < 0 ||
      __builtin_add_overflow(in->offset, storage_offset, &offset)) {
    return false;
  }
  for (uint8_t d = 0; d < rank; d++) {
    if (size[d] < 0 || stride[d] < 0) return false;
  }
  vl_desc r;
  r.rank = rank;
  r.offset = offset;
  memcpy(r.shape, size, rank * sizeof *size);
  memcpy(r.strides, stride, rank * sizeof *stride);
  *out = r;
  return true;
}

bool vl_desc_matches_spec(const vl_desc *d, const vl_spec *spec) {
  if (d->rank != spec->rank || memcmp(d->shape, spec->shape, d->rank * sizeof d->shape[0]) != 0) {
    return false;
  }
  int64_t numel = 0, want[VL_MAX_RANK];
  if (vl_spec_numel(spec, &numel) && numel <= 1) return true;
  vl_layout_strides(spec, want);
  for (uint8_t k = 0; k < d->rank; k++) {
    if (d->shape[k] > 1 && d->strides[k] != want[k]) return false;
  }
  return true;
}

bool vl_desc_extent(const vl_desc *d, int64_t *last, bool *empty) {
  int64_t end = d->offset;
  *empty = false;
  for (uint8_t k = 0; k < d->rank; k++) *empty |= d->shape[k] == 0;
  /* no element: the other sizes' spans may pass 63 bits, and none is read */
  for (uint8_t k = 0; k < d->rank && !*empty; k++) {
    int64_t span;
    if (d->shape[k] > 0 && (__builtin_mul_overflow(d->shape[k] - 1, d->strides[k], &span) ||
                            __builtin_add_overflow(end, span, &end))) {
      return false;
    }
  }
  *last = end;
  return true;
}

/* fold_ops.c - the table of layout-only ops (docs/format.md §3, "Layout-only nodes"): target ->
 * logical map, each map reading the node's arguments as PyTorch's schema gives them (positional, or
 * by name in kwargs, with the schema's defaults) and calling the descriptor map of
 * viewlower/layout.h. */
#include "lower/fold_ops.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "layout/desc_internal.h"
#include "layout/tensor_internal.h"

bool vl__fold_int(const vl_arg *a, int64_t *v) {
  if (a->kind == VL_ARG_INT) {
    *v = a->u.i;
    return true;
  }
  if (a->kind != VL_ARG_FLOAT || !(a->u.f == a->u.f) || floor(a->u.f) != a->u.f) return false;
  if (a->u.f >= 9223372036854775807.0) {
    *v = INT64_MAX;
  } else if (a->u.f <= -9223372036854775807.0) {
    *v = INT64_MIN;
  } else {
    *v = (int64_t)a->u.f;
  }
  return true;
}

/* Argument pos of n, else kwargs[name], else NULL (absent: the schema default applies). */
static const vl_arg *arg_at(const vl_node *n, uint32_t pos, const char *name) {
  if (pos < n->n_args) return &n->args[pos];
  return name ? vl_node_kwarg(n, name) : NULL;
}

/* An integer argument with a default; false when present but not an integer. */
static bool int_arg(const vl_node *n, uint32_t pos, const char *name, int64_t dflt, int64_t *v) {
  const vl_arg *a = arg_at(n, pos, name);
  if (a == NULL || a->kind == VL_ARG_NULL) {
    *v = dflt;
    return true;
  }
  return vl__fold_int(a, v);
}

/* An optional integer (None allowed): *has false for None or absent. */
static bool opt_int_arg(const vl_node *n, uint32_t pos, const char *name, int64_t *v, bool *has) {
  const vl_arg *a = arg_at(n, pos, name);
  *has = a != NULL && a->kind != VL_ARG_NULL;
  return !*has || vl__fold_int(a, v);
}

static bool int_list(const vl_arg *a, int64_t *v, size_t *n) {
  if (a == NULL || a->kind != VL_ARG_LIST || a->count > VL_MAX_RANK) return false;
  for (uint32_t k = 0; k < a->count; k++) {
    if (!vl__fold_int(&a->u.items[k], &v[k])) return false;
  }
  *n = a->count;
  return true;
}

typedef bool (*map_fn)(const vl_node *n, const vl_desc *in, vl_desc *out);

/* view_copy and _reshape_alias_copy: a logical reshape to the size argument (its -1 inferred). */
static bool map_reshape(const vl_node *n, const vl_desc *in, vl_desc *out) {
  int64_t size[VL_MAX_RANK], shape[VL_MAX_RANK], numel = 1;
  size_t rank;
  vl_error e;
  if (!int_list(arg_at(n, 1, "size"), size, &rank)) return false;
  for (uint8_t d = 0; d < in->rank; d++) {
    if (__builtin_mul_overflow(numel, in->shape[d], &numel)) return false;
  }
  if (vl_view_size_infer(numel, size, rank, shape, &e) != VL_OK) return false;
  return vl_desc_reshape(in, (uint8_t)rank, shape, out);
}

static bool map_permute(const vl_node *n, const vl_desc *in, vl_desc *out) {
  int64_t dims[VL_MAX_RANK];
  size_t count;
  return int_list(arg_at(n, 1, "dims"), dims, &count) && vl_desc_permute(in, dims, count, out);
}

static bool map_transpose(const vl_node *n, const vl_desc *in, vl_desc *out) {
  int64_t a, b;
  const vl_arg *x = arg_at(n, 1, "dim0"), *y = arg_at(n, 2, "dim1");
  return x && y && vl__fold_int(x, &a) && vl__fold_int(y, &b) && vl_desc_transpose(in, a, b, out);
}

static bool map_t(const vl_node *n, const vl_desc *in, vl_desc *out) {
  (void)n;
  return vl_desc_t(in, out);
}

static bool map_squeeze_all(const vl_node *n, const vl_desc *in, vl_desc *out) {
  (void)n;
  return vl_desc_squeeze(in, NULL, 0, out);
}

static bool map_squeeze_dim(const vl_node *n, const vl_desc *in, vl_desc *out) {
  const vl_arg *a = arg_at(n, 1, "dim");
  int64_t d;
  return a && vl__fold_int(a, &d) && vl_desc_squeeze(in, &d, 1, out);
}

static bool map_squeeze_dims(const vl_node *n, const vl_desc *in, vl_desc *out) {
  int64_t dims[VL_MAX_RANK];
  size_t count;
  return int_list(arg_at(n, 1, "dim"), dims, &count) && vl_desc_squeeze(in, dims, count, out);
}

static bool map_unsqueeze(const vl_node *n, const vl_desc *in, vl_desc *out) {
  const vl_arg *a = arg_at(n, 1, "dim");
  int64_t d;
  return a && vl__fold_int(a, &d) && vl_desc_unsqueeze(in, d, out);
}

static bool map_identity(const vl_node *n, const vl_desc *in, vl_desc *out) {
  (void)n;
  return vl_desc_identity(in, out);
}

static bool map_slice(const vl_node *n, const vl_desc *in, vl_desc *out) {
  int64_t dim, start, end, step;
  bool has_start, has_end;
  return int_arg(n, 1, "dim", 0, &dim) && opt_int_arg(n, 2, "start", &start, &has_start) &&
         opt_int_arg(n, 3, "end", &end, &has_end) && int_arg(n, 4, "step", 1, &step) &&
         vl_desc_slice(in, dim, has_start ? &start : NULL, has_end ? &end : NULL, step, out);
}

static bool map_select(const vl_node *n, const vl_desc *in, vl_desc *out) {
  const vl_arg *a = arg_at(n, 1, "dim"), *b = arg_at(n, 2, "index");
  int64_t d, idx;
  return a && b && vl__fold_int(a, &d) && vl__fold_int(b, &idx) &&
         vl_desc_select(in, d, idx, out);
}

static bool map_as_strided(const vl_node *n, const vl_desc *in, vl_desc *out) {
  int64_t size[VL_MAX_RANK], stride[VL_MAX_RANK], so;
  size_t rank, srank;
  return int_list(arg_at(n, 1, "size"), size, &rank) &&
         int_list(arg_at(n, 2, "stride"), stride, &srank) && srank == rank &&
         int_arg(n, 3, "storage_offset", 0, &so) &&
         vl_desc_as_strided(in, (uint8_t)rank, size, stride, so, out);
}

/* ---- why a map fails ----------------------------------------------------------------------- */

/* What vl__fold_why fills: the first problem found with node n's arguments for an input of
 * descriptor in (contiguous, of the input's shape), as a message and the JSON pointer (relative
 * to the node) of the argument at fault. */
typedef struct why {
  const vl_node *n;
  const vl_desc *in;
  int64_t numel; /* the input's (0 when any size is 0, whatever the others) */
  char *path, *msg;
  size_t path_cap, msg_cap;
} why;

typedef bool (*why_fn)(why *w);

/* Records the problem at argument pos (or kwargs[name]; "/args" when neither is given). */
__attribute__((format(printf, 4, 5))) static bool say(why *w, uint32_t pos, const char *name,
                                                      const char *fmt, ...) {
  if (pos < w->n->n_args) {
    snprintf(w->path, w->path_cap, "/args/%u", (unsigned)pos);
  } else if (name != NULL && vl_node_kwarg(w->n, name) != NULL) {
    snprintf(w->path, w->path_cap, "/kwargs/%s", name);
  } else {
    snprintf(w->path, w->path_cap, "/args");
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(w->msg, w->msg_cap, fmt, ap);
  va_end(ap);
  return true;
}

/* A dim argument for rank r (vl__wrap_dim's range), made non-negative in *wrapped (0 when
 * absent); an absent one is a problem unless it has a default. */
static bool why_dim(why *w, uint32_t pos, const char *name, uint8_t r, bool has_default,
                    int64_t *wrapped) {
  const vl_arg *a = arg_at(w->n, pos, name);
  int64_t d = 0, lim = r > 0 ? r : 1; /* lim: the range's bound, for the message */
  *wrapped = 0;
  if (a == NULL || a->kind == VL_ARG_NULL) {
    return has_default ? false : say(w, pos, name, "%s is missing", name);
  }
  if (!vl__fold_int(a, &d)) return say(w, pos, name, "%s is not an integer", name);
  if (!vl__wrap_dim(d, r, wrapped)) {
    return say(w, pos, name, "dim %lld is out of range for rank %u (-%lld..%lld)", (long long)d,
               (unsigned)w->in->rank, (long long)lim, (long long)(lim - 1));
  }
  return false;
}

/* A list of dims for the input's rank: integers in range, each once (when distinct). */
static bool why_dims(why *w, uint32_t pos, const char *name, bool permutation) {
  int64_t dims[VL_MAX_RANK];
  size_t count;
  bool seen[VL_MAX_RANK] = {false};
  char t[VL_MAX_RANK * 22 + 3];
  if (!int_list(arg_at(w->n, pos, name), dims, &count)) {
    return say(w, pos, name, "%s is not a list of at most %d integers", name, VL_MAX_RANK);
  }
  /* the list's text only for a message: most lists are fine, and this runs per kept view */
  if (permutation && count != w->in->rank) {
    return say(w, pos, name, "%s %s has %zu entries for an input of rank %u", name,
               vl__shape_text(t, sizeof t, count, dims), count, (unsigned)w->in->rank);
  }
  for (size_t k = 0; k < count; k++) {
    int64_t d;
    bool out = !vl__wrap_dim(dims[k], w->in->rank, &d);
    if (out || (w->in->rank > 0 && seen[d])) {
      vl__shape_text(t, sizeof t, count, dims);
      if (permutation) {
        return say(w, pos, name, "%s %s are not a permutation of 0..%d", name, t, w->in->rank - 1);
      }
      return say(w, pos, name, "%s %s: dim %lld %s", name, t, (long long)dims[k],
                 out ? "is out of range" : "is listed twice");
    }
    seen[d] = true;
  }
  return false;
}

static bool why_reshape(why *w) {
  int64_t size[VL_MAX_RANK], shape[VL_MAX_RANK];
  size_t rank;
  vl_error e;
  if (!int_list(arg_at(w->n, 1, "size"), size, &rank)) {
    return say(w, 1, "size", "size is not a list of at most %d integers", VL_MAX_RANK);
  }
  if (vl_view_size_infer(w->numel, size, rank, shape, &e) != VL_OK) {
    return say(w, 1, "size", "%s", e.message);
  }
  return false;
}

static bool why_permute(why *w) {
  return why_dims(w, 1, "dims", true);
}

static bool why_transpose(why *w) {
  int64_t d;
  return why_dim(w, 1, "dim0", w->in->rank, false, &d) ||
         why_dim(w, 2, "dim1", w->in->rank, false, &d);
}

static bool why_t(why *w) {
  if (w->in->rank <= 2) return false;
  return say(w, 0, NULL, "t_copy takes an input of rank 2 or less, not %u", (unsigned)w->in->rank);
}

static bool why_squeeze_dim(why *w) {
  int64_t d;
  return why_dim(w, 1, "dim", w->in->rank, false, &d);
}

static bool why_squeeze_dims(why *w) {
  return why_dims(w, 1, "dim", false);
}

static bool why_unsqueeze(why *w) {
  if (w->in->rank >= VL_MAX_RANK) {
    return say(w, 0, NULL, "the input already has the largest rank, %d", VL_MAX_RANK);
  }
  int64_t d;
  return why_dim(w, 1, "dim", (uint8_t)(w->in->rank + 1), false, &d);
}

static bool why_slice(why *w) {
  static const char *const bound[2] = {"start", "end"};
  int64_t v;
  bool has;
  if (w->in->rank == 0) return say(w, 0, NULL, "a rank-0 input has no dim to slice");
  if (why_dim(w, 1, "dim", w->in->rank, true, &v)) return true;
  for (uint32_t k = 0; k < 2; k++) {
    if (!opt_int_arg(w->n, 2 + k, bound[k], &v, &has)) {
      return say(w, 2 + k, bound[k], "%s is not an integer or null", bound[k]);
    }
  }
  if (!int_arg(w->n, 4, "step", 1, &v)) return say(w, 4, "step", "step is not an integer");
  if (v < 1) return say(w, 4, "step", "step %lld is not 1 or more", (long long)v);
  return false;
}

static bool why_select(why *w) {
  const vl_arg *b = arg_at(w->n, 2, "index");
  int64_t dim, index;
  if (w->in->rank == 0) return say(w, 0, NULL, "a rank-0 input has no dim to select from");
  if (why_dim(w, 1, "dim", w->in->rank, false, &dim)) return true;
  if (b == NULL || !vl__fold_int(b, &index)) return say(w, 2, "index", "index is not an integer");
  int64_t size = w->in->shape[dim];
  if (index < -size || index >= size) {
    return say(w, 2, "index", "index %lld is out of range for dim %lld of size %lld",
               (long long)index, (long long)dim, (long long)size);
  }
  return false;
}

static bool why_as_strided(why *w) {
  int64_t size[VL_MAX_RANK], stride[VL_MAX_RANK], so;
  size_t rank, srank;
  if (!int_list(arg_at(w->n, 1, "size"), size, &rank)) {
    return say(w, 1, "size", "size is not a list of at most %d integers", VL_MAX_RANK);
  }
  if (!int_list(arg_at(w->n, 2, "stride"), stride, &srank)) {
    return say(w, 2, "stride", "stride is not a list of at most %d integers", VL_MAX_RANK);
  }
  if (srank != rank) {
    return say(w, 2, "stride", "stride has %zu entries but size %zu", srank, rank);
  }
  for (size_t d = 0; d < rank; d++) {
    if (size[d] < 0 || stride[d] < 0) {
      return say(w, size[d] < 0 ? 1 : 2, size[d] < 0 ? "size" : "stride",
                 "%s %lld of dim %zu is negative", size[d] < 0 ? "size" : "stride",
                 (long long)(size[d] < 0 ? size[d] : stride[d]), d);
    }
  }
  if (!int_arg(w->n, 3, "storage_offset", 0, &so) || so < 0) {
    return say(w, 3, "storage_offset", "storage_offset is not an integer of 0 or more");
  }
  return false;
}

static bool why_none(why *w) {
  (void)w;
  return false;
}

typedef struct fold_row {
  const char *target;
  size_t len; /* strlen(target): rows of another length are skipped without a compare */
  vl_fold_kind kind;
  map_fn map;
  why_fn why;      /* names what is wrong with the arguments when map fails */
  bool conversion; /* a layout conversion: layout-only only without a dtype change */
  bool permutes;   /* the map only permutes dims and inserts or drops size-1 dims */
} fold_row;

#define ROW(t) t, sizeof t - 1

static const fold_row fold_table[] = {
    {ROW("aten.view_copy.default"), VL_FOLD_VIEW_COPY, map_reshape, why_reshape, false, false},
    {ROW("aten._reshape_alias_copy.default"), VL_FOLD_OP, map_reshape, why_reshape, false, false},
    {ROW("aten.permute_copy.default"), VL_FOLD_OP, map_permute, why_permute, false, true},
    {ROW("aten.transpose_copy.int"), VL_FOLD_OP, map_transpose, why_transpose, false, true},
    {ROW("aten.t_copy.default"), VL_FOLD_OP, map_t, why_t, false, true},
    {ROW("aten.squeeze_copy.default"), VL_FOLD_OP, map_squeeze_all, why_none, false, true},
    {ROW("aten.squeeze_copy.dim"), VL_FOLD_OP, map_squeeze_dim, why_squeeze_dim, false, true},
    {ROW("aten.squeeze_copy.dims"), VL_FOLD_OP, map_squeeze_dims, why_squeeze_dims, false, true},
    {ROW("aten.unsqueeze_copy.default"), VL_FOLD_OP, map_unsqueeze, why_unsqueeze, false, true},
    {ROW("aten.alias_copy.default"), VL_FOLD_OP, map_identity, why_none, false, true},
    {ROW("aten.slice_copy.Tensor"), VL_FOLD_OP, map_slice, why_slice, false, false},
    {ROW("aten.select_copy.int"), VL_FOLD_OP, map_select, why_select, false, false},
    {ROW("dim_order_ops._to_dim_order_copy.default"), VL_FOLD_OP, map_identity, why_none, true,
     true},
    {ROW("dim_order_ops._clone_dim_order.default"), VL_FOLD_OP, map_identity, why_none, true, true},
    {ROW("aten._to_copy.default"), VL_FOLD_OP, map_identity, why_none, true, true},
    {ROW("aten.clone.default"), VL_FOLD_OP, map_identity, why_none, true, true},
    {ROW("aten.as_strided_copy.default"), VL_FOLD_AS_STRIDED, map_as_strided, why_as_strided, false,
     false},
};

static const struct {
  const char *target;
  size_t len;
} split_targets[] = {{ROW("aten.split_copy.Tensor")},
                     {ROW("aten.split_with_sizes_copy.default")},
                     {ROW("aten.unbind_copy.int")}};

#undef ROW

static const fold_row *row_of(const vl_node *n) {
  if (n->op != VL_NODE_CALL || n->target == NULL) return NULL;
  size_t len = strlen(n->target);
  for (size_t k = 0; k < sizeof fold_table / sizeof *fold_table; k++) {
    const fold_row *row = &fold_table[k];
    if (row->len == len && memcmp(row->target, n->target, len) == 0) return row;
  }
  return NULL;
}

bool vl__fold_proposes_order(const vl_node *n) {
  const fold_row *row = row_of(n);
  return row != NULL && row->permutes;
}

bool vl__fold_is_split(const vl_node *n) {
  if (n->op != VL_NODE_CALL || n->target == NULL || n->n_vals == 0) return false;
  size_t len = strlen(n->target);
  for (size_t k = 0; k < sizeof split_targets / sizeof *split_targets; k++) {
    if (split_targets[k].len == len && memcmp(split_targets[k].target, n->target, len) == 0) {
      return true;
    }
  }
  return false;
}

static bool reads_tensor(const vl_graph *g, const vl_node *n, uint32_t *input) {
  if (n->n_args == 0 || n->args[0].kind != VL_ARG_REF || !g->nodes[n->args[0].u.ref].has_val) {
    return false;
  }
  *input = n->args[0].u.ref;
  return true;
}

vl_fold_kind vl__fold_kind(const vl_graph *g, uint32_t i, uint32_t *input) {
  const vl_node *n = &g->nodes[i];
  uint32_t producer, index, in;
  bool writes = n->out != VL_NO_NODE || n->n_mutates > 0;
  /* A node that writes is no pure layout op; a view_copy that does is still decided. */
  if (!n->has_val || (writes && !vl__is_view_copy(n))) return VL_FOLD_NONE;
  vl_fold_kind kind = VL_FOLD_NONE;
  if (vl_node_getitem(n, &producer, &index)) {
    const vl_node *p = &g->nodes[producer];
    if (!vl__fold_is_split(p) || p->out != VL_NO_NODE || p->n_mutates > 0 ||
        !reads_tensor(g, p, &in)) {
      return VL_FOLD_NONE;
    }
    kind = VL_FOLD_GETITEM;
  } else {
    const fold_row *row = row_of(n);
    if (row == NULL || !reads_tensor(g, n, &in)) return VL_FOLD_NONE;
    kind = row->kind;
  }
  if (g->nodes[in].val->dtype != n->val->dtype) return VL_FOLD_NONE;
  if (input != NULL) *input = in;
  return kind;
}

bool vl__fold_split_starts(const vl_node *n, int64_t *starts) {
  starts[0] = 0;
  if (strcmp(n->target, "aten.unbind_copy.int") == 0) {
    for (uint32_t k = 0; k < n->n_vals; k++) starts[k + 1] = k + 1;
    return true;
  }
  const vl_arg *a = arg_at(n, 1, strcmp(n->target, "aten.split_copy.Tensor") == 0 ? "split_size"
                                                                                   : "split_sizes");
  int64_t chunk = 0;
  bool sizes = a != NULL && a->kind == VL_ARG_LIST;
  if (a == NULL || (sizes ? a->count != n->n_vals : !vl__fold_int(a, &chunk) || chunk < 0)) {
    return false;
  }
  for (uint32_t k = 0; k < n->n_vals; k++) {
    int64_t len = chunk;
    if (sizes && (!vl__fold_int(&a->u.items[k], &len) || len < 0)) return false;
    if (__builtin_add_overflow(starts[k], len, &starts[k + 1])) return false;
  }
  return true;
}

bool vl__fold_split_output(const vl_node *n, uint32_t index, const int64_t *starts,
                           const vl_desc *in, vl_desc *out) {
  int64_t dim, d;
  if (index >= n->n_vals) return false;
  if (strcmp(n->target, "aten.unbind_copy.int") == 0) {
    return int_arg(n, 1, "dim", 0, &dim) && vl_desc_select(in, dim, index, out);
  }
  if (!int_arg(n, 2, "dim", 0, &dim) || in->rank == 0) return false;
  d = dim < 0 ? dim + in->rank : dim;
  if (d < 0 || d >= in->rank || starts[index] > in->shape[d]) return false;
  return vl_desc_slice(in, d, &starts[index], &starts[index + 1], 1, out);
}

bool vl__fold_map(const vl_graph *g, uint32_t i, const int64_t *split_starts, const vl_desc *in,
                  vl_desc *out) {
  const vl_node *n = &g->nodes[i];
  uint32_t producer, index;
  vl_desc r;
  bool ok;
  if (vl_node_getitem(n, &producer, &index)) {
    ok = split_starts != NULL &&
         vl__fold_split_output(&g->nodes[producer], index, split_starts, in, &r);
  } else {
    const fold_row *row = row_of(n);
    ok = row != NULL && row->map(n, in, &r);
  }
  if (!ok || r.rank != n->val->rank ||
      memcmp(r.shape, n->val->shape, r.rank * sizeof r.shape[0]) != 0) {
    return false;
  }
  *out = r;
  return true;
}

bool vl__fold_why(const vl_graph *g, uint32_t i, const vl_spec *input, char *path, size_t path_cap,
                  char *msg, size_t msg_cap) {
  const vl_node *n = &g->nodes[i];
  const fold_row *row = row_of(n);
  if (row == NULL || path_cap == 0 || msg_cap == 0) return false;
  /* the input's shape, contiguous: whether the arguments apply does not depend on its layout */
  vl_desc in = {.rank = input->rank, .offset = 0}, r;
  memcpy(in.shape, input->shape, input->rank * sizeof in.shape[0]);
  vl_layout_default_strides(input->rank, input->shape, in.strides);
  why w = {n, &in, 0, path, msg, path_cap, msg_cap};
  if (!vl_spec_numel(input, &w.numel)) return false; /* not a checked spec */
  if (row->why(&w)) return true;
  char a[VL_MAX_RANK * 22 + 3], b[VL_MAX_RANK * 22 + 3], c[VL_MAX_RANK * 22 + 3];
  if (!row->map(n, &in, &r)) {
    return say(&w, UINT32_MAX, NULL, "the arguments do not apply to an input of shape %s",
               vl__shape_text(a, sizeof a, in.rank, in.shape));
  }
  if (r.rank == n->val->rank && memcmp(r.shape, n->val->shape, r.rank * sizeof r.shape[0]) == 0) {
    return false;
  }
  vl__shape_text(a, sizeof a, in.rank, in.shape);
  snprintf(path, path_cap, "/val/shape");
  vl__shape_text(b, sizeof b, r.rank, r.shape);
  snprintf(msg, msg_cap, "the arguments give shape %s from an input of shape %s, not val's %s", b,
           a, vl__shape_text(c, sizeof c, n->val->rank, n->val->shape));
  return true;
}

/* graph_check.c - semantic validation after parsing (docs/format.md §2): the skip_dim_order
 * spelling rule, the kwargs of layout conversions that name their result (dim_order, memory_format,
 * dtype) agreeing with its val, view nodes (view_copy / memory.view) whose size argument, val
 * and base agree, and in-place / out= results whose val describes the storage they share. */
#include <stdio.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "graph/storage.h"
#include "layout/tensor_internal.h"
#include "viewlower/layout.h"

static vl_status node_error(vl_error *err, uint32_t i, const char *sub, const char *msg) {
  char path[VL_ERROR_PATH_MAX];
  snprintf(path, sizeof path, "/nodes/%u%s", i, sub);
  return vl_error_set(err, VL_ERR_INVALID_GRAPH, path, "%s", msg);
}

/* a (at /nodes/i<at>) is a list of integers: else list_msg at <at>, or item_msg at <at>/k for
 * the first entry that is not. */
static vl_status check_int_list(const vl_arg *a, uint32_t i, const char *at, const char *list_msg,
                                const char *item_msg, vl_error *err) {
  if (a->kind != VL_ARG_LIST) {
    return node_error(err, i, at, list_msg);
  }
  for (uint32_t k = 0; k < a->count; k++) {
    if (a->u.items[k].kind != VL_ARG_INT) {
      char sub[64];
      snprintf(sub, sizeof sub, "%s/%u", at, k);
      return node_error(err, i, sub, item_msg);
    }
  }
  return VL_OK;
}

static bool starts_with(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void order_text(char *buf, size_t n, const char *lead, const vl_spec *s) {
  int64_t order[VL_MAX_RANK];
  for (uint8_t k = 0; k < s->rank; k++) order[k] = s->dim_order[k];
  char list[120];
  snprintf(buf, n, "%s%s", lead, vl__shape_text(list, sizeof list, s->rank, order));
}

static vl_status check_spelling(const vl_graph *g, uint32_t i, vl_error *err) {
  const vl_node *n = &g->nodes[i];
  if (g->skip_dim_order) {
    if (starts_with(n->target, "dim_order_ops.")) {
      return node_error(err, i, "/target",
                        "dim_order_ops targets are not allowed when skip_dim_order is true "
                        "(use aten._to_copy / aten.clone with memory_format)");
    }
    return VL_OK;
  }
  if (!starts_with(n->target, "aten._to_copy.") && !starts_with(n->target, "aten.clone.") &&
      strcmp(n->target, "aten._to_copy") != 0 && strcmp(n->target, "aten.clone") != 0) {
    return VL_OK;
  }
  const vl_arg *mf = vl_node_kwarg(n, "memory_format");
  if (mf == NULL || mf->kind == VL_ARG_NULL) return VL_OK;
  if (mf->kind == VL_ARG_STRING && strcmp(mf->u.s, "preserve_format") == 0) return VL_OK;
  return node_error(err, i, "/kwargs/memory_format",
                    "layout changes use dim_order_ops._to_dim_order_copy / _clone_dim_order "
                    "with kwargs.dim_order when skip_dim_order is false");
}

/* order (val's rank of entries, spelled as written) is the layout node i writes: a permutation of
 * 0..rank-1 for val's rank that gives val's layout, i.e. the same strides on every dim of size
 * > 1 (a [1,C,1,1] tensor converted to channels-last has kwargs [0,2,3,1] and strides that read
 * back as val's dim_order [0,1,2,3]: one layout, two spellings). Errors at /nodes/i<at>. */
static vl_status check_order_agrees(const vl_node *n, const int64_t *order, const char *spelled,
                                    uint32_t i, const char *at, vl_error *err) {
  const vl_spec *v = n->val;
  char msg[VL_ERROR_MESSAGE_MAX], want[120];
  bool seen[VL_MAX_RANK] = {false};
  vl_spec s = *v;
  for (uint8_t k = 0; k < v->rank; k++) {
    if (order[k] < 0 || order[k] >= v->rank || seen[order[k]]) {
      snprintf(msg, sizeof msg, "not a permutation of 0..%d", (int)v->rank - 1);
      return node_error(err, i, at, msg);
    }
    seen[order[k]] = true;
    s.dim_order[k] = (uint8_t)order[k];
  }
  vl_desc d;
  vl_desc_of_spec(&s, 0, &d);
  if (vl_desc_matches_spec(&d, v)) return VL_OK;
  order_text(want, sizeof want, "val's dim_order ", v);
  snprintf(msg, sizeof msg, "%s disagrees with %s (the layout the node writes)", spelled, want);
  return node_error(err, i, at, msg);
}

/* kwargs.dim_order of a layout conversion: the layout it writes (check_order_agrees). */
static vl_status check_kw_dim_order(const vl_node *n, const vl_arg *a, uint32_t i, vl_error *err) {
  char got[VL_MAX_RANK * 22 + 3];
  int64_t order[VL_MAX_RANK];
  vl_status st = check_int_list(a, i, "/kwargs/dim_order", "must be a list of integers",
                                "a dim must be an integer", err);
  if (st != VL_OK) return st;
  if (a->count != n->val->rank) {
    char msg[VL_ERROR_MESSAGE_MAX];
    snprintf(msg, sizeof msg, "has %u entries but val's rank is %u", a->count, n->val->rank);
    return node_error(err, i, "/kwargs/dim_order", msg);
  }
  for (uint32_t k = 0; k < a->count; k++) order[k] = a->u.items[k].u.i;
  return check_order_agrees(n, order, vl__shape_text(got, sizeof got, a->count, order), i,
                            "/kwargs/dim_order", err);
}

/* kwargs.memory_format of aten._to_copy / aten.clone (the skip_dim_order spelling): one of the
 * format's four names; all but preserve_format (the input's layout, as PyTorch decides it)
 * name the layout the node writes, checked as kwargs.dim_order is: contiguous_format the
 * identity order, channels_last [0,2,3,1] (rank 4), channels_last_3d [0,2,3,4,1] (rank 5). */
static vl_status check_kw_memory_format(const vl_node *n, const vl_arg *a, uint32_t i,
                                        vl_error *err) {
  static const struct {
    const char *name;
    uint8_t rank; /* 0: any */
    int64_t order[5];
  } formats[] = {{"preserve_format", 0, {0}},
                 {"contiguous_format", 0, {0}},
                 {"channels_last", 4, {0, 2, 3, 1}},
                 {"channels_last_3d", 5, {0, 2, 3, 4, 1}}};
  const char *at = "/kwargs/memory_format";
  for (size_t f = 0; a->kind == VL_ARG_STRING && f < sizeof formats / sizeof *formats; f++) {
    if (strcmp(a->u.s, formats[f].name) != 0) continue;
    if (f == 0) return VL_OK;
    uint8_t rank = formats[f].rank != 0 ? formats[f].rank : n->val->rank;
    if (rank != n->val->rank) {
      char msg[VL_ERROR_MESSAGE_MAX];
      snprintf(msg, sizeof msg, "%s needs rank %u but val's rank is %u", formats[f].name, rank,
               n->val->rank);
      return node_error(err, i, at, msg);
    }
    int64_t order[VL_MAX_RANK];
    for (uint8_t k = 0; k < rank; k++) order[k] = formats[f].rank != 0 ? formats[f].order[k] : k;
    return check_order_agrees(n, order, formats[f].name, i, at, err);
  }
  return node_error(err, i, at,
                    "unknown memory_format (expected one of contiguous_format channels_last "
                    "channels_last_3d preserve_format, or null)");
}

/* kwargs.dtype of _to_dim_order_copy or _to_copy: the dtype it converts to, so val's (named as
 * in specs). Unchecked, a _to_copy whose val keeps its input's dtype while its kwargs convert
 * would count as layout-only (a conversion without a dtype change) and become an alias. */
static vl_status check_kw_dtype(const vl_node *n, const vl_arg *a, uint32_t i, vl_error *err) {
  char msg[VL_ERROR_MESSAGE_MAX];
  vl_dtype dt;
  if (a->kind != VL_ARG_STRING || !vl_dtype_from_name(a->u.s, &dt)) {
    return node_error(err, i, "/kwargs/dtype",
                      "unknown dtype (expected one of uint8 int8 int16 int32 int64 float16 "
                      "bfloat16 float32 float64 bool, or null)");
  }
  if (dt == n->val->dtype) return VL_OK;
  snprintf(msg, sizeof msg, "%s disagrees with val's dtype %s (the dtype the node writes)",
           vl_dtype_name(dt), vl_dtype_name(n->val->dtype));
  return node_error(err, i, "/kwargs/dtype", msg);
}

typedef vl_status (*kwarg_check)(const vl_node *n, const vl_arg *a, uint32_t i, vl_error *err);

/* Keyword arguments that name what their node writes, checked against its val when present
 * and not null (absent or null: the schema's default, nothing to check). One row per kwarg. */
static const struct kwarg_row {
  const char *target;
  const char *key;
  kwarg_check check;
} kwarg_table[] = {
    {"dim_order_ops._to_dim_order_copy.default", "dim_order", check_kw_dim_order},
    {"dim_order_ops._to_dim_order_copy.default", "dtype", check_kw_dtype},
    {"dim_order_ops._clone_dim_order.default", "dim_order", check_kw_dim_order},
    {"aten._to_copy.default", "dtype", check_kw_dtype},
    {"aten._to_copy.default", "memory_format", check_kw_memory_format},
    {"aten.clone.default", "memory_format", check_kw_memory_format},
};

static vl_status check_kwargs(const vl_graph *g, uint32_t i, vl_error *err) {
  const vl_node *n = &g->nodes[i];
  if (n->n_kwargs == 0 || !n->has_val) return VL_OK;
  for (size_t k = 0; k < sizeof kwarg_table / sizeof *kwarg_table; k++) {
    const struct kwarg_row *row = &kwarg_table[k];
    if (strcmp(n->target, row->target) != 0) continue;
    const vl_arg *a = vl_node_kwarg(n, row->key);
    if (a == NULL || a->kind == VL_ARG_NULL) continue;
    vl_status st = row->check(n, a, i, err);
    if (st != VL_OK) return st;
  }
  return VL_OK;
}

/* docs/format.md §2, "Checked at the node": a memory.view may alias a sub-range, but every element
 * it reads (from its offset, through its declared layout) lies inside its base's buffer of
 * base_numel elements. */
static vl_status check_alias_range(const vl_node *n, const vl_node *base, int64_t base_numel,
                                   vl_error *err, uint32_t i) {
  char msg[VL_ERROR_MESSAGE_MAX];
  vl_desc d;
  int64_t last;
  bool empty;
  vl_desc_of_spec(n->val, n->offset, &d);
  if (!vl_desc_extent(&d, &last, &empty) || (!empty && last >= base_numel) ||
      (empty && n->offset > base_numel)) {
    snprintf(msg, sizeof msg,
             "reads elements up to %lld from offset %lld, past the %lld elements of base %.64s",
             (long long)last, (long long)n->offset, (long long)base_numel, base->name);
    return node_error(err, i, n->offset > 0 ? "/offset" : "/val/shape", msg);
  }
  return VL_OK;
}

static vl_status check_view(const vl_graph *g, uint32_t i, vl_error *err) {
  const vl_node *n = &g->nodes[i];
  char msg[VL_ERROR_MESSAGE_MAX];
  if (n->n_args != 2 || n->args[0].kind != VL_ARG_REF) {
    return node_error(err, i, "/args", "a view takes two arguments: the base node and a size list");
  }
  const vl_node *base = &g->nodes[n->args[0].u.ref];
  if (!base->has_val) return node_error(err, i, "/args/0", "the base must be a tensor node");
  const vl_arg *size = &n->args[1];
  int64_t sizes[VL_MAX_RANK];
  if (size->kind == VL_ARG_LIST && size->count > VL_MAX_RANK) {
    return node_error(err, i, "/args/1", "the size has more than 16 entries");
  }
  vl_status st = check_int_list(size, i, "/args/1", "the size must be a list of integers",
                                "a size must be an integer", err);
  if (st != VL_OK) return st;
  for (uint32_t k = 0; k < size->count; k++) {
    sizes[k] = size->u.items[k].u.i;
  }
  if (base->val->dtype != n->val->dtype) {
    snprintf(msg, sizeof msg, "dtype %s differs from the base's %s", vl_dtype_name(n->val->dtype),
             vl_dtype_name(base->val->dtype));
    return node_error(err, i, "/val/dtype", msg);
  }
  int64_t base_numel = 0, numel = 0, shape[VL_MAX_RANK];
  vl_spec_numel(base->val, &base_numel);
  vl_spec_numel(n->val, &numel);
  bool alias = vl__is_memory_view(n);
  if (alias) {
    st = check_alias_range(n, base, base_numel, err, i);
    if (st != VL_OK) return st;
  } else if (numel != base_numel) {
    snprintf(msg, sizeof msg, "%lld elements but the base %.64s has %lld", (long long)numel,
             base->name, (long long)base_numel);
    return node_error(err, i, "/val/shape", msg);
  }
  vl_error e;
  if (vl_view_size_infer(alias ? numel : base_numel, sizes, size->count, shape, &e) != VL_OK) {
    return node_error(err, i, "/args/1", e.message);
  }
  bool same = size->count == n->val->rank;
  for (uint32_t k = 0; same && k < n->val->rank; k++) same = shape[k] == n->val->shape[k];
  if (!same) return node_error(err, i, "/val/shape", "disagrees with the size argument");
  return VL_OK;
}

/* The result of an in-place op (arg 0) or of an out= node (kwargs.out) is the written
 * argument's storage (docs/format.md §2, "Writes"): the interpreter writes it through the
 * argument's layout, and the passes read the node's val as that storage's layout, so the two must
 * agree (dtype, shape, dynamism and the strides of every dim of size > 1). Otherwise a view of the
 * result would be judged on a layout the storage does not have. */
static vl_status check_written(const vl_graph *g, uint32_t i, vl_error *err) {
  const vl_node *n = &g->nodes[i];
  uint32_t w = VL_NO_NODE;
  if (n->out != VL_NO_NODE) {
    w = n->out;
  } else if (vl__node_is_inplace(n)) {
    w = n->args[0].u.ref;
  }
  if (w == VL_NO_NODE || !n->has_val || !g->nodes[w].has_val) return VL_OK;
  const vl_spec *a = g->nodes[w].val, *v = n->val;
  char msg[2 * VL_ERROR_MESSAGE_MAX], want[200], got[200];
  vl_desc d;
  vl_desc_of_spec(a, 0, &d);
  if (a->dtype != v->dtype) {
    snprintf(want, sizeof want, "dtype %s", vl_dtype_name(a->dtype));
    snprintf(got, sizeof got, "%s", vl_dtype_name(v->dtype));
  } else if (a->rank != v->rank || memcmp(a->shape, v->shape, a->rank * sizeof a->shape[0])) {
    snprintf(want, sizeof want, "shape %s", vl__shape_text(msg, 160, a->rank, a->shape));
    vl__shape_text(got, sizeof got, v->rank, v->shape);
  } else if (a->dynamic != v->dynamic) {
    snprintf(want, sizeof want, "dynamism (dynamic %s)", a->dynamic ? "true" : "false");
    snprintf(got, sizeof got, "dynamic %s", v->dynamic ? "true" : "false");
  } else if (!vl_desc_matches_spec(&d, v)) {
    order_text(want, sizeof want, "layout, dim_order ", a);
    order_text(got, sizeof got, "dim_order ", v);
  } else {
    return VL_OK;
  }
  snprintf(msg, sizeof msg, "%.64s writes %.64s in place, so its result is that storage: it must "
           "have %.64s's %s, not %s", n->name, g->nodes[w].name, g->nodes[w].name, want, got);
  return node_error(err, i, "/val", msg);
}

vl_status vl__graph_check(vl_graph *g, vl_error *err) {
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    const vl_node *n = &g->nodes[i];
    if (n->op != VL_NODE_CALL) continue;
    vl_status st = check_spelling(g, i, err);
    if (st == VL_OK) st = check_kwargs(g, i, err);
    if (st == VL_OK && (vl__is_view_copy(n) || vl__is_memory_view(n))) st = check_view(g, i, err);
    if (st == VL_OK) st = check_written(g, i, err);
    if (st != VL_OK) return st;
  }
  return vl__plan_check(g, err); /* docs/format.md §9, once every node is well formed */
}

/* inputs.c - execution inputs: name checks, tensor-map building, and seeded generation of
 * distinct, exactly representable values for placeholders without a given value (docs/kernels.md,
 * "Generated inputs").
 *
 * Generated values walk a per-dtype sequence from a seeded offset: logical element k gets
 * sequence entry (k + offset) mod the sequence length. Sequences list distinct values, small
 * integers first (0, 1, 2, ...), so any reordering of up to that many elements shows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernel_internal.h"
#include "viewlower/layout.h"
#include "viewlower/copy.h"
#include "viewlower/interp.h"
#include "viewlower/tensor_json.h"

/* ---- tensor maps --------------------------------------------------------------------------- */

/* A name and where it came from, sorted by name for binary searches. */
typedef struct named {
  const char *name;
  long at;
} named;

static int named_cmp(const void *a, const void *b) {
  return strcmp(((const named *)a)->name, ((const named *)b)->name);
}

static long named_find(const named *sorted, size_t n, const char *name) {
  named key = {name, -1};
  const named *hit = n > 0 ? bsearch(&key, sorted, n, sizeof *sorted, named_cmp) : NULL;
  return hit != NULL ? hit->at : -1;
}

vl_status vl__inputs_check_names(const vl_graph *g, const vl_tensor_map *inputs, vl_error *err) {
  if (inputs == NULL || inputs->count == 0) return VL_OK;
  named *ph = malloc((g->n_nodes ? g->n_nodes : 1) * sizeof *ph);
  if (ph == NULL) return vl_error_set(err, VL_ERR_NOMEM, "", "out of memory");
  size_t n = 0;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i].op == VL_NODE_PLACEHOLDER) ph[n++] = (named){g->nodes[i].name, (long)i};
  }
  qsort(ph, n, sizeof *ph, named_cmp); /* node names are unique */
  vl_status st = VL_OK;
  for (size_t k = 0; st == VL_OK && k < inputs->count; k++) {
    if (named_find(ph, n, inputs->names[k]) < 0) {
      char path[VL_ERROR_PATH_MAX] = "";
      vl_pointer_append(path, sizeof path, inputs->names[k]);
      st = vl_error_set(err, VL_ERR_INVALID_PARAMS, path, "no placeholder is named %s",
                        inputs->names[k]);
    }
  }
  free(ph);
  return st;
}

vl_status vl__inputs_index(const vl_graph *g, const vl_tensor_map *inputs, long **out,
                           vl_error *err) {
  size_t count = inputs != NULL ? inputs->count : 0;
  long *index = malloc((g->n_nodes ? g->n_nodes : 1) * sizeof *index);
  named *in = malloc((count ? count : 1) * sizeof *in);
  if (index == NULL || in == NULL) {
    free(index);
    free(in);
    return vl_error_set(err, VL_ERR_NOMEM, "", "out of memory");
  }
  for (size_t k = 0; k < count; k++) in[k] = (named){inputs->names[k], (long)k};
  qsort(in, count, sizeof *in, named_cmp); /* a map's names are unique */
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    index[i] = g->nodes[i].op == VL_NODE_PLACEHOLDER ? named_find(in, count, g->nodes[i].name) : -1;
  }
  free(in);
  *out = index;
  return VL_OK;
}

vl_status vl__tensor_map_new(vl_tensor_map **out, vl_error *err) {
  vl_tensor_map *m = calloc(1, sizeof *m);
  if (m == NULL) return vl_error_set(err, VL_ERR_NOMEM, "", "out of memory");
  *out = m;
  return VL_OK;
}

vl_status vl__tensor_map_add(vl_tensor_map *m, const char *name, const vl_spec *spec,
                             const vl_limits *lim, vl_error *err) {
  /* Full when count is 0 or a power of two: double (one realloc per entry was quadratic in
   * copies wherever realloc cannot grow in place). */
  bool full = (m->count & (m->count - 1)) == 0;
  size_t cap = m->count > 0 ? 2 * m->count : 1;
  char **names = full ? realloc(m->names, cap * sizeof *names) : m->names;
  if (names != NULL) m->names = names;
  vl_tensor **tensors = names == NULL ? NULL
                        : full        ? realloc(m->tensors, cap * sizeof *tensors)
                                      : m->tensors;
  if (tensors != NULL) m->tensors = tensors;
  char *copy = tensors != NULL ? strdup(name) : NULL;
  if (copy == NULL) return vl_error_set(err, VL_ERR_NOMEM, "", "out of memory");
  vl_tensor *t = NULL;
  vl_status st = vl_tensor_new(spec, lim, &t, err);
  if (st != VL_OK) {
    free(copy);
    return st;
  }
  m->names[m->count] = copy;
  m->tensors[m->count] = t;
  m->count++;
  return VL_OK;
}

/* ---- value sequences ------------------------------------------------------------------------ */

/* A 16-bit float format: its conversions, how many integers 0..ints-1 it holds exactly, and
 * how many finite non-negative bit patterns it has (patterns ascend with value). */
typedef struct half_fmt {
  double (*to_double)(uint16_t);
  uint16_t (*from_double)(double);
  uint32_t ints;
  uint32_t n_pos;
} half_fmt;

/* Non-integer patterns in [0, q), for q up to the pattern of the largest exact integer. */
static uint32_t half_nonint_below(const half_fmt *f, uint32_t q) {
  double v = f->to_double((uint16_t)q);
  uint32_t ints_below = (uint32_t)v + ((double)(uint32_t)v < v ? 1u : 0u); /* ceil */
  return q - ints_below;
}

/* The j-th non-negative value (j < n_pos): the exact integers first, then the remaining finite
 * patterns in ascending order. */
static uint16_t half_positive(const half_fmt *f, uint32_t j) {
  if (j < f->ints) return f->from_double((double)j);
  uint32_t limit = f->from_double((double)(f->ints - 1)), jj = j - f->ints;
  uint32_t nonint = limit - (f->ints - 1);
  if (jj >= nonint) return (uint16_t)(limit + 1 + (jj - nonint));
  uint32_t lo = 0, hi = limit; /* smallest p with half_nonint_below(p + 1) > jj */
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (half_nonint_below(f, mid + 1) > jj) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return (uint16_t)lo;
}

/* Sequence entry j of a half format: non-negative values, then their negatives (no -0). */
static uint16_t half_value(const half_fmt *f, uint64_t u) {
  uint32_t j = (uint32_t)(u % (2 * (uint64_t)f->n_pos - 1));
  if (j < f->n_pos) return half_positive(f, j);
  return (uint16_t)(half_positive(f, j - f->n_pos + 1) | 0x8000u);
}

static const half_fmt fmt_f16 = {vl_f16_to_double, vl_f16_from_double, 2049, 0x7C00};
static const half_fmt fmt_bf16 = {vl_bf16_to_double, vl_bf16_from_double, 257, 0x7F80};

/* The range of a tensor's seeded offset: small enough that typical tensors stay on exact
 * small integers, large enough that different seeds give different values. */
static uint64_t offset_range(vl_dtype dt) {
  switch (dt) {
  case VL_DTYPE_BOOL: return 2;
  case VL_DTYPE_UINT8:
  case VL_DTYPE_INT8: return 256;
  case VL_DTYPE_BFLOAT16: return 128;
  default: return 1024;
  }
}

/* Writes sequence entry u of dtype dt at p. */
static void put_value(vl_dtype dt, void *p, uint64_t u) {
  uint8_t b = (uint8_t)u;
  uint16_t h = (uint16_t)u;
  uint32_t w = (uint32_t)u;
  float f = (float)(u % (1u << 24));
  double d = (double)(u % (1ull << 53));
  switch (dt) {
  case VL_DTYPE_BOOL:
    b = (uint8_t)(u & 1u);
    memcpy(p, &b, 1);
    break;
  case VL_DTYPE_UINT8:
  case VL_DTYPE_INT8: memcpy(p, &b, 1); break;
  case VL_DTYPE_INT16: memcpy(p, &h, 2); break;
  case VL_DTYPE_INT32: memcpy(p, &w, 4); break;
  case VL_DTYPE_INT64: memcpy(p, &u, 8); break;
  case VL_DTYPE_FLOAT16:
    h = half_value(&fmt_f16, u);
    memcpy(p, &h, 2);
    break;
  case VL_DTYPE_BFLOAT16:
    h = half_value(&fmt_bf16, u);
    memcpy(p, &h, 2);
    break;
  case VL_DTYPE_FLOAT32: memcpy(p, &f, 4); break;
  default: memcpy(p, &d, 8); break;
  }
}

/* splitmix64: a well-mixed offset per (seed, placeholder). */
static uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/* Fills t (in its own layout) with the sequence from offset, in logical order. */
static vl_status fill_sequence(vl_tensor *t, uint64_t offset, vl_error *err) {
  int64_t numel = 0;
  size_t es = vl_dtype_size(t->spec.dtype);
  bool dense = vl_layout_is_contiguous(&t->spec);
  vl_spec_numel(&t->spec, &numel);
  char *buf = dense ? t->data : malloc(t->nbytes > 0 ? (size_t)t->nbytes : 1);
  if (buf == NULL) return vl_error_set(err, VL_ERR_NOMEM, "", "out of memory generating inputs");
  for (int64_t k = 0; k < numel; k++) {
    put_value(t->spec.dtype, buf + (size_t)k * es, (uint64_t)k + offset);
  }
  vl_status st = VL_OK;
  if (!dense) {
    vl_spec logical = t->spec;
    vl_dim_order_default(logical.dim_order, logical.rank);
    st = vl_copy_logical(&t->spec, t->data, &logical, buf, err);
    free(buf);
  }
  return st;
}

/* ---- vl_inputs_generate ------------------------------------------------------------------ */

/* Adds a value for placeholder i (the p-th placeholder): a copy of the given one, or generated. */
static vl_status add_input(vl_tensor_map *m, const vl_graph *g, uint32_t i, uint32_t p,
                           const vl_tensor_map *given, long k, uint64_t seed,
                           const vl_limits *lim, vl_error *err) {
  const vl_node *n = &g->nodes[i];
  const vl_spec *spec = k >= 0 ? &given->tensors[k]->spec : n->val;
  vl_status st = vl__tensor_map_add(m, n->name, spec, lim, err);
  if (st != VL_OK && k < 0) {
    /* a generated input's size is the placeholder's val: the error is there, not at a
     * "/shape" the request does not have (verify answered "/graph/shape") */
    char at[48];
    snprintf(at, sizeof at, "/nodes/%u/val", i);
    vl_error_prefix(err, at);
  }
  if (st != VL_OK) return st;
  vl_tensor *t = m->tensors[m->count - 1];
  if (k >= 0) {
    if (t->nbytes > 0) memcpy(t->data, given->tensors[k]->data, (size_t)t->nbytes);
    return VL_OK;
  }
  uint64_t offset = mix(seed ^ mix((uint64_t)p)) % offset_range(spec->dtype);
  return fill_sequence(t, offset, err);
}

vl_status vl_inputs_generate(const vl_graph *g, const vl_tensor_map *given, uint64_t seed,
                             const vl_limits *lim, vl_tensor_map **out, vl_error *err) {
  vl_tensor_map *m = NULL;
  int64_t total = 0;
  uint32_t p = 0;
  long *index = NULL;
  vl_status st = vl__inputs_check_names(g, given, err);
  if (st == VL_OK) st = vl__inputs_index(g, given, &index, err);
  if (st == VL_OK) st = vl__tensor_map_new(&m, err);
  for (uint32_t i = 0; st == VL_OK && i < g->n_nodes; i++) {
    if (g->nodes[i].op != VL_NODE_PLACEHOLDER) continue;
    st = add_input(m, g, i, p++, given, index[i], seed, lim, err);
    if (st != VL_OK) break;
    total += m->tensors[m->count - 1]->nbytes;
    if (lim != NULL && total > lim->max_total_bytes) {
      char at[32]; /* the placeholder whose input passed the limit */
      snprintf(at, sizeof at, "/nodes/%u", i);
      st = vl_error_set(err, VL_ERR_TOO_LARGE, at, "inputs need more than the limit of %lld bytes",
                        (long long)lim->max_total_bytes);
    }
  }
  free(index);
  if (st != VL_OK) {
    vl_tensor_map_free(m);
    return st;
  }
  *out = m;
  return VL_OK;
}

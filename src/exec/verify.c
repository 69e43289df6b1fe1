/* verify.c - lowering checked by running it (docs/kernels.md, "verify"): the original graph and a
 * lowered copy run on the same inputs (given, the rest generated from the seed), and every output
 * is compared bit for bit in logical order; the first differing index of each output is reported.
 * The caller's graph is never modified. */
#include <stdlib.h>
#include <string.h>

#include "exec/kernel_internal.h"
#include "viewlower/layout.h"
#include "viewlower/copy.h"
#include "viewlower/interp.h"
#include "viewlower/tensor_json.h"

/* t's bytes in logical order: t's own data when contiguous, else a malloc'd copy (*tmp). */
static vl_status logical_bytes(const vl_tensor *t, const uint8_t **out, void **tmp, vl_error *err) {
  *tmp = NULL;
  if (vl_layout_is_contiguous(&t->spec)) {
    *out = t->data;
    return VL_OK;
  }
  vl_spec dense = t->spec;
  vl_dim_order_default(dense.dim_order, dense.rank);
  *tmp = malloc(t->nbytes > 0 ? (size_t)t->nbytes : 1);
  if (*tmp == NULL) return vl_error_set(err, VL_ERR_NOMEM, "", "out of memory comparing outputs");
  *out = *tmp;
  return vl_copy_logical(&dense, *tmp, &t->spec, t->data, err);
}

/* First index where a and b (n elements of es bytes) differ, or -1. */
static int64_t first_difference(const uint8_t *a, const uint8_t *b, int64_t n, size_t es) {
  if (memcmp(a, b, (size_t)n * es) == 0) return -1;
  for (int64_t k = 0; k < n; k++, a += es, b += es) {
    if (memcmp(a, b, es) != 0) return k;
  }
  return -1;
}

/* Compares output i of both runs; appends a mismatch to r when they differ. */
static vl_status compare_output(const vl_tensor_map *want, const vl_tensor_map *got, uint32_t i,
                                vl_verify_result *r, vl_error *err) {
  const vl_tensor *a = want->tensors[i], *b = got->tensors[i];
  const uint8_t *pa, *pb;
  void *ta = NULL, *tb = NULL;
  int64_t numel = 0;
  if (a->spec.dtype != b->spec.dtype || !vl_spec_numel(&a->spec, &numel) ||
      a->nbytes != b->nbytes) {
    return vl_error_set(err, VL_ERR_INTERNAL, "", "output %u (%s) changed its spec in lowering", i,
                        want->names[i]);
  }
  size_t es = vl_dtype_size(a->spec.dtype);
  vl_status st = logical_bytes(a, &pa, &ta, err);
  if (st == VL_OK) st = logical_bytes(b, &pb, &tb, err);
  int64_t k = st == VL_OK ? first_difference(pa, pb, numel, es) : -1;
  if (k >= 0) {
    vl_mismatch *m = &r->mismatches[r->n_mismatches];
    memset(m, 0, sizeof *m);
    m->output = i;
    m->index = k;
    m->dtype = a->spec.dtype;
    memcpy(m->expected, pa + (size_t)k * es, es);
    memcpy(m->actual, pb + (size_t)k * es, es);
    m->name = strdup(want->names[i]);
    if (m->name == NULL) {
      st = vl_error_set(err, VL_ERR_NOMEM, "", "out of memory");
    } else {
      r->n_mismatches++;
    }
  }
  free(ta);
  free(tb);
  return st;
}

static vl_status compare_all(const vl_tensor_map *want, const vl_tensor_map *got,
                             vl_verify_result *r, vl_error *err) {
  if (want->count != got->count) {
    return vl_error_set(err, VL_ERR_INTERNAL, "", "lowering changed the number of outputs");
  }
  r->mismatches = calloc(want->count > 0 ? want->count : 1, sizeof *r->mismatches);
  if (r->mismatches == NULL) return vl_error_set(err, VL_ERR_NOMEM, "", "out of memory");
  for (uint32_t i = 0; i < want->count; i++) {
    vl_status st = compare_output(want, got, i, r, err);
    if (st != VL_OK) return st;
  }
  r->equal = r->n_mismatches == 0;
  return VL_OK;
}

/* Runs the lowered graph; its error paths point into the lowered graph, so the message says so. */
static vl_status run_lowered(const vl_graph *low, const vl_tensor_map *inputs, const vl_limits *lim,
                             vl_tensor_map **out, vl_error *err) {
  vl_status st = vl_interp_run(low, inputs, lim, out, err);
  if (st != VL_OK && err != NULL) {
    vl_error inner = *err;
    vl_error_set(err, st, inner.path, "in the lowered graph: %s", inner.message);
  }
  return st;
}

vl_status vl_verify(const vl_graph *g, const vl_lower_options *opts, const vl_tensor_map *inputs,
                    uint64_t seed, const vl_limits *lim, vl_verify_result *out, vl_error *err) {
  vl_graph *low = NULL;
  vl_tensor_map *all = NULL, *want = NULL, *got = NULL;
  vl_verify_result r;
  memset(&r, 0, sizeof r);
  vl_status st = vl_graph_clone(g, &low, err);
  if (st == VL_OK) st = vl_lower(low, opts, &r.report, err);
  if (st == VL_OK) st = vl_inputs_generate(g, inputs, seed, lim, &all, err);
  if (st == VL_OK) st = vl_interp_run(g, all, lim, &want, err);
  if (st == VL_OK) st = run_lowered(low, all, lim, &got, err);
  if (st == VL_OK) st = compare_all(want, got, &r, err);
  vl_tensor_map_free(got);
  vl_tensor_map_free(want);
  vl_tensor_map_free(all);
  vl_graph_free(low);
  if (st != VL_OK) {
    vl_verify_result_clear(&r);
    return st;
  }
  *out = r;
  return VL_OK;
}

void vl_verify_result_clear(vl_verify_result *r) {
  if (r == NULL) return;
  vl_report_clear(&r->report);
  for (uint32_t i = 0; i < r->n_mismatches; i++) free(r->mismatches[i].name);
  free(r->mismatches);
  memset(r, 0, sizeof *r);
}

static cJSON *mismatch_to_json(const vl_mismatch *m) {
  cJSON *o = cJSON_CreateObject();
  cJSON *expected = vl_scalar_to_json(m->dtype, m->expected);
  cJSON *actual = vl_scalar_to_json(m->dtype, m->actual);
  bool ok = o != NULL && expected != NULL && actual != NULL &&
            cJSON_AddNumberToObject(o, "output", m->output) != NULL &&
            cJSON_AddStringToObject(o, "name", m->name) != NULL &&
            cJSON_AddNumberToObject(o, "index", (double)m->index) != NULL;
  if (ok && cJSON_AddItemToObject(o, "expected", expected)) {
    expected = NULL;
  } else {
    ok = false;
  }
  if (ok && cJSON_AddItemToObject(o, "actual", actual)) {
    actual = NULL;
  } else {
    ok = false;
  }
  cJSON_Delete(expected);
  cJSON_Delete(actual);
  if (!ok) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

cJSON *vl_verify_result_to_json(const vl_verify_result *r) {
  cJSON *o = cJSON_CreateObject(), *list = cJSON_CreateArray();
  cJSON *report = vl_report_to_json(&r->report);
  bool ok = o != NULL && list != NULL && report != NULL &&
            cJSON_AddBoolToObject(o, "equal", r->equal) != NULL;
  if (ok && cJSON_AddItemToObject(o, "report", report)) {
    report = NULL;
  } else {
    ok = false;
  }
  for (uint32_t i = 0; ok && i < r->n_mismatches; i++) {
    cJSON *m = mismatch_to_json(&r->mismatches[i]);
    ok = m != NULL && cJSON_AddItemToArray(list, m);
    if (!ok) cJSON_Delete(m);
  }
  if (ok && cJSON_AddItemToObject(o, "mismatches", list)) {
    list = NULL;
  } else {
    ok = false;
  }
  cJSON_Delete(report);
  cJSON_Delete(list);
  if (!ok) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

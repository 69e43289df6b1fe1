/* spec_json.c - tensor specs as JSON: {"dtype","shape","dim_order"|"strides","dynamic"}.
 * vl__spec_read holds every rule of a spec once (spec_json.h); vl_spec_from_json feeds it a
 * cJSON object, the graph parser (graph_json.c) its tape. Errors are VL_ERR_INVALID_TENSOR with
 * pointers relative to the spec object; the graph parser re-labels them as graph errors. */
#include <stdio.h>
#include <string.h>

#include "base/json_util.h"
#include "graph/spec_json.h"
#include "viewlower/layout.h"
#include "viewlower/tensor_json.h"

/* Member names in the order of the VL__SPEC_* members. */
static const char *const spec_keys[] = {"dtype", "shape", "dim_order", "strides", "dynamic", NULL};

/* ---- the rules of a spec, over any parser's handles ---- */

static vl_status read_dtype(const vl__spec_src *src, vl_spec *s, vl_error *err) {
  const void *dt = src->member[VL__SPEC_DTYPE];
  char name[32];
  if (dt == NULL) return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/dtype", "is required");
  if (!src->text(src->ctx, dt, name, sizeof name) || !vl_dtype_from_name(name, &s->dtype)) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/dtype",
                        "unknown dtype (expected one of uint8 int8 int16 int32 int64 float16 "
                        "bfloat16 float32 float64 bool)");
  }
  return VL_OK;
}

static vl_status read_shape(const vl__spec_src *src, vl_spec *s, vl_error *err) {
  const void *shape = src->member[VL__SPEC_SHAPE];
  if (shape == NULL) return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/shape", "is required");
  long len = src->array_len(src->ctx, shape);
  if (len > VL_MAX_RANK) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/shape", "rank %ld exceeds the maximum of %d",
                        len, VL_MAX_RANK);
  }
  size_t rank = 0;
  vl_status st = src->ints(src->ctx, shape, INT64_MAX, "/shape", s->shape, &rank, err);
  s->rank = (uint8_t)rank;
  return st;
}

/* dim_order or strides (docs/format.md §1), never both; neither is the default order. */
static vl_status read_order(const vl__spec_src *src, vl_spec *s, vl_error *err) {
  const void *order = src->member[VL__SPEC_DIM_ORDER], *strides = src->member[VL__SPEC_STRIDES];
  int64_t v[VL_MAX_RANK];
  size_t n = 0;
  if (order != NULL && strides != NULL) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/strides",
                        "give either dim_order or strides, not both");
  }
  if (order == NULL && strides == NULL) {
    vl_dim_order_default(s->dim_order, s->rank);
    return VL_OK;
  }
  const char *path = order ? "/dim_order" : "/strides";
  vl_status st = src->ints(src->ctx, order ? order : strides, order ? VL_MAX_RANK : INT64_MAX,
                           path, v, &n, err);
  if (st != VL_OK) return st;
  if (n != s->rank) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, path, "has %zu entries but the rank is %u", n,
                        s->rank);
  }
  if (strides != NULL) {
    return vl_layout_dim_order_from_strides(s->rank, s->shape, v, s->dim_order, err);
  }
  for (size_t i = 0; i < n; i++) s->dim_order[i] = (uint8_t)v[i];
  if (!vl_dim_order_is_permutation(s->dim_order, n)) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/dim_order", "not a permutation of 0..%d",
                        (int)n - 1);
  }
  return VL_OK;
}

vl_status vl__spec_read(const vl__spec_src *src, vl_spec *out, vl_error *err) {
  vl_spec s;
  memset(&s, 0, sizeof s);
  vl_status st = read_dtype(src, &s, err);
  if (st == VL_OK) st = read_shape(src, &s, err);
  if (st == VL_OK) st = read_order(src, &s, err);
  if (st != VL_OK) return st;
  const void *dyn = src->member[VL__SPEC_DYNAMIC];
  int dynamic = dyn != NULL ? src->boolean(src->ctx, dyn) : 0;
  if (dynamic < 0) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/dynamic", "must be true or false");
  }
  s.dynamic = dynamic == 1;
  st = vl_spec_check(&s, err);
  if (st != VL_OK) return st;
  *out = s;
  return VL_OK;
}

/* ---- over a cJSON tree ---- */

static bool cjson_text(void *ctx, const void *v, char *buf, size_t cap) {
  (void)ctx;
  const cJSON *item = v;
  if (!cJSON_IsString(item) || strlen(item->valuestring) >= cap) return false;
  memcpy(buf, item->valuestring, strlen(item->valuestring) + 1);
  return true;
}

static long cjson_array_len(void *ctx, const void *v) {
  (void)ctx;
  return cJSON_IsArray((const cJSON *)v) ? (long)cJSON_GetArraySize(v) : -1;
}

static vl_status cjson_ints(void *ctx, const void *v, int64_t max, const char *path, int64_t *out,
                            size_t *n, vl_error *err) {
  (void)ctx;
  return vl__json_int_array(v, VL_MAX_RANK, 0, max, out, n, path, VL_ERR_INVALID_TENSOR, err);
}

static int cjson_boolean(void *ctx, const void *v) {
  (void)ctx;
  return cJSON_IsBool((const cJSON *)v) ? cJSON_IsTrue((const cJSON *)v) : -1;
}

vl_status vl_spec_from_json(const cJSON *obj, const char *const *extra_keys, vl_spec *out,
                            vl_error *err) {
  if (!cJSON_IsObject(obj)) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "", "must be an object");
  }
  vl_status st = vl__json_check_keys(obj, spec_keys, extra_keys, "", VL_ERR_INVALID_TENSOR, err);
  if (st != VL_OK) return st;
  vl__spec_src src = {.text = cjson_text, .array_len = cjson_array_len, .ints = cjson_ints,
                      .boolean = cjson_boolean};
  for (int k = 0; k < VL__SPEC_MEMBERS; k++) {
    src.member[k] = cJSON_GetObjectItemCaseSensitive(obj, spec_keys[k]);
  }
  return vl__spec_read(&src, out, err);
}

static cJSON *int_array(const int64_t *v, size_t n) {
  cJSON *arr = cJSON_CreateArray();
  for (size_t i = 0; arr != NULL && i < n; i++) {
    cJSON *num = cJSON_CreateNumber((double)v[i]);
    if (num == NULL || !cJSON_AddItemToArray(arr, num)) {
      cJSON_Delete(num);
      cJSON_Delete(arr);
      return NULL;
    }
  }
  return arr;
}

cJSON *vl_spec_to_json(const vl_spec *s) {
  int64_t order[VL_MAX_RANK];
  for (uint8_t i = 0; i < s->rank; i++) order[i] = s->dim_order[i];
  cJSON *obj = cJSON_CreateObject();
  if (obj == NULL) return NULL;
  bool ok = cJSON_AddStringToObject(obj, "dtype", vl_dtype_name(s->dtype)) != NULL;
  cJSON *shape = int_array(s->shape, s->rank);
  ok = ok && shape != NULL && cJSON_AddItemToObject(obj, "shape", shape);
  if (!ok) cJSON_Delete(shape);
  cJSON *dims = ok ? int_array(order, s->rank) : NULL;
  ok = ok && dims != NULL && cJSON_AddItemToObject(obj, "dim_order", dims);
  if (!ok) cJSON_Delete(dims);
  if (ok && s->dynamic) ok = cJSON_AddTrueToObject(obj, "dynamic") != NULL;
  if (!ok) {
    cJSON_Delete(obj);
    return NULL;
  }
  return obj;
}

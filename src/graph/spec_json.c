/* spec_json.c - tensor specs as JSON: {"dtype","shape","dim_order"|"strides","dynamic"}.
 * Errors are VL_ERR_INVALID_TENSOR with pointers relative to the spec object; the graph parser
 * re-labels them as graph errors. */
#include <stdio.h>
#include <string.h>

#include "base/json_util.h"
#include "viewlower/layout.h"
#include "viewlower/tensor_json.h"

static const char *const spec_keys[] = {"dtype", "shape", "dim_order", "strides", "dynamic", NULL};

static vl_status parse_dtype(const cJSON *obj, vl_spec *s, vl_error *err) {
  const cJSON *dt = cJSON_GetObjectItemCaseSensitive(obj, "dtype");
  if (dt == NULL) return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/dtype", "is required");
  if (!cJSON_IsString(dt) || !vl_dtype_from_name(dt->valuestring, &s->dtype)) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/dtype",
                        "unknown dtype (expected one of uint8 int8 int16 int32 int64 float16 "
                        "bfloat16 float32 float64 bool)");
  }
  return VL_OK;
}

static vl_status parse_shape(const cJSON *obj, vl_spec *s, vl_error *err) {
  const cJSON *shape = cJSON_GetObjectItemCaseSensitive(obj, "shape");
  if (shape == NULL) return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/shape", "is required");
  if (cJSON_IsArray(shape) && cJSON_GetArraySize(shape) > VL_MAX_RANK) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/shape", "rank %d exceeds the maximum of %d",
                        cJSON_GetArraySize(shape), VL_MAX_RANK);
  }
  size_t rank = 0;
  vl_status st = vl__json_int_array(shape, VL_MAX_RANK, 0, INT64_MAX, s->shape, &rank, "/shape",
                                    VL_ERR_INVALID_TENSOR, err);
  s->rank = (uint8_t)rank;
  return st;
}

static vl_status parse_order(const cJSON *obj, vl_spec *s, vl_error *err) {
  const cJSON *order = cJSON_GetObjectItemCaseSensitive(obj, "dim_order");
  const cJSON *strides = cJSON_GetObjectItemCaseSensitive(obj, "strides");
  int64_t v[VL_MAX_RANK];
  size_t n = 0;
  vl_status st;
  if (order != NULL && strides != NULL) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/strides",
                        "give either dim_order or strides, not both");
  }
  if (order == NULL && strides == NULL) {
    vl_dim_order_default(s->dim_order, s->rank);
    return VL_OK;
  }
  const char *path = order ? "/dim_order" : "/strides";
  st = vl__json_int_array(order ? order : strides, VL_MAX_RANK, 0, order ? VL_MAX_RANK : INT64_MAX,
                          v, &n, path, VL_ERR_INVALID_TENSOR, err);
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

vl_status vl_spec_from_json(const cJSON *obj, const char *const *extra_keys, vl_spec *out,
                            vl_error *err) {
  vl_spec s;
  memset(&s, 0, sizeof s);
  if (!cJSON_IsObject(obj)) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "", "must be an object");
  }
  vl_status st = vl__json_check_keys(obj, spec_keys, extra_keys, "", VL_ERR_INVALID_TENSOR, err);
  if (st == VL_OK) st = parse_dtype(obj, &s, err);
  if (st == VL_OK) st = parse_shape(obj, &s, err);
  if (st == VL_OK) st = parse_order(obj, &s, err);
  if (st != VL_OK) return st;
  const cJSON *dyn = cJSON_GetObjectItemCaseSensitive(obj, "dynamic");
  if (dyn != NULL && !cJSON_IsBool(dyn)) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "/dynamic", "must be true or false");
  }
  s.dynamic = cJSON_IsTrue(dyn);
  st = vl_spec_check(&s, err);
  if (st != VL_OK) return st;
  *out = s;
  return VL_OK;
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

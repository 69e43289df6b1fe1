/* fuzz_tensor.c - libFuzzer harness: tensor JSON -> vl_tensor_from_json -> vl_view_copy ->
 * vl_tensor_to_json.
 *
 * Input: {"tensor": T, "size": [...]?, "out_dim_order": [...]?}, optionally followed by a NUL
 * byte and a binary payload that "blob" references point into. The size defaults to [-1].
 * Oracles: a parsed tensor written in each encoding (values, base64, blob) reads back to the
 * same spec and the same elements (NaN payloads aside for "values"); a view_copy that succeeds
 * has the requested rank, sizes, dim order, dtype and numel, and element k of the output is
 * element k of the input in logical order, checked by a naive per-element walk that shares
 * no code with the copy engine; strides match the rule of docs/format.md §1 computed in 128 bits
 * (saturated at INT64_MAX past 63 bits, which only an empty tensor can reach). */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "viewlower/layout.h"
#include "viewlower/copy.h"
#include "viewlower/tensor_json.h"

static double elem_as_double(vl_dtype dt, const uint8_t *p) {
  uint16_t h;
  float f;
  double d;
  switch (dt) {
  case VL_DTYPE_FLOAT16: memcpy(&h, p, 2); return vl_f16_to_double(h);
  case VL_DTYPE_BFLOAT16: memcpy(&h, p, 2); return vl_bf16_to_double(h);
  case VL_DTYPE_FLOAT32: memcpy(&f, p, 4); return (double)f;
  case VL_DTYPE_FLOAT64: memcpy(&d, p, 8); return d;
  default: return 0.0;
  }
}

static bool is_float(vl_dtype dt) {
  return dt == VL_DTYPE_FLOAT16 || dt == VL_DTYPE_BFLOAT16 || dt == VL_DTYPE_FLOAT32 ||
         dt == VL_DTYPE_FLOAT64;
}

/* Same bits, or (for "values", which writes NaN as "nan") both NaN. */
static bool same_elements(const vl_tensor *a, const vl_tensor *b, bool nan_equal) {
  if (!vl_spec_equal(&a->spec, &b->spec) || a->nbytes != b->nbytes) return false;
  size_t es = vl_dtype_size(a->spec.dtype);
  const uint8_t *pa = a->data, *pb = b->data;
  for (int64_t off = 0; off < a->nbytes; off += (int64_t)es) {
    if (memcmp(pa + off, pb + off, es) == 0) continue;
    if (!nan_equal || !is_float(a->spec.dtype)) return false;
    if (!isnan(elem_as_double(a->spec.dtype, pa + off)) ||
        !isnan(elem_as_double(b->spec.dtype, pb + off)))
      return false;
  }
  return true;
}

static void check_round_trip(const vl_tensor *t, vl_encoding enc, const vl_limits *lim) {
  vl_buf payload = {0};
  cJSON *j = vl_tensor_to_json(t, enc, &payload);
  FUZZ_CHECK(j != NULL);
  vl_tensor *back = NULL;
  vl_error err;
  vl_error_clear(&err);
  vl_status st = vl_tensor_from_json(j, payload.data, payload.len, lim, &back, &err);
  if (st != VL_OK) {
    char *text = cJSON_PrintUnformatted(j);
    fprintf(stderr, "encoding %d does not read back: %s: %s\n%s\n", (int)enc, err.path, err.message,
            text ? text : "");
    free(text);
  }
  FUZZ_CHECK(st == VL_OK);
  FUZZ_CHECK(same_elements(t, back, enc == VL_ENCODING_VALUES));
  vl_tensor_free(back);
  cJSON_Delete(j);
  vl_buf_free(&payload);
}

/* Physical element offset of logical (row-major) index k. */
static int64_t offset_of(const vl_spec *s, const int64_t *strides, int64_t k) {
  int64_t off = 0;
  for (int d = (int)s->rank - 1; d >= 0; d--) {
    int64_t n = s->shape[d];
    off += (k % n) * strides[d];
    k /= n;
  }
  return off;
}

static void check_logical_copy(const vl_tensor *in, const vl_tensor *out) {
  int64_t n_in = 0, n_out = 0, si[VL_MAX_RANK], so[VL_MAX_RANK];
  FUZZ_CHECK(vl_spec_numel(&in->spec, &n_in) && vl_spec_numel(&out->spec, &n_out));
  FUZZ_CHECK(n_in == n_out);
  FUZZ_CHECK(in->spec.dtype == out->spec.dtype);
  vl_layout_strides(&in->spec, si);
  vl_layout_strides(&out->spec, so);
  size_t es = vl_dtype_size(in->spec.dtype);
  const uint8_t *pi = in->data, *po = out->data;
  for (int64_t k = 0; k < n_in; k++) {
    size_t a = (size_t)offset_of(&in->spec, si, k) * es;
    size_t b = (size_t)offset_of(&out->spec, so, k) * es;
    FUZZ_CHECK(memcmp(pi + a, po + b, es) == 0);
  }
}

/* Strides from the dim order, by the rule of docs/format.md §1 in 128-bit arithmetic (shares no
 * code with layout.c): they must equal vl_layout_strides exactly; an empty tensor's stride past 63
 * bits saturates at INT64_MAX ([0, 2^40, 2^40]: once a signed overflow, found by no fuzzer). */
static void check_strides(const vl_spec *s) {
  int64_t got[VL_MAX_RANK];
  vl_layout_strides(s, got);
  __int128 stride = 1;
  const __int128 cap = (__int128)INT64_MAX;
  for (int i = (int)s->rank - 1; i >= 0; i--) {
    uint8_t d = s->dim_order[i];
    FUZZ_CHECK(got[d] == (stride > cap ? INT64_MAX : (int64_t)stride));
    stride *= s->shape[d] > 1 ? s->shape[d] : 1;
    if (stride > cap) stride = cap + 1; /* stays "past 63 bits" without overflowing 128 */
  }
}

/* Reads a JSON array of numbers as int64 (clamped far outside any valid size). */
static bool read_ints(const cJSON *arr, int64_t *v, size_t *n) {
  *n = 0;
  if (!cJSON_IsArray(arr)) return false;
  for (const cJSON *c = arr->child; c != NULL; c = c->next) {
    if (*n == VL_MAX_RANK + 1 || !cJSON_IsNumber(c) || !isfinite(c->valuedouble)) return false;
    double d = c->valuedouble;
    v[(*n)++] = d > 4e18    ? INT64_C(4000000000000000000)
                : d < -4e18 ? -INT64_C(4000000000000000000)
                            : (int64_t)d;
  }
  return true;
}

static void check_view(const vl_tensor *t, const cJSON *root, const vl_limits *lim) {
  int64_t size[VL_MAX_RANK + 1] = {-1}, order[VL_MAX_RANK + 1];
  size_t rank = 1, order_rank = 0;
  const cJSON *js = cJSON_GetObjectItemCaseSensitive(root, "size");
  const cJSON *jo = cJSON_GetObjectItemCaseSensitive(root, "out_dim_order");
  if (js != NULL && !read_ints(js, size, &rank)) return;
  if (jo != NULL && (!read_ints(jo, order, &order_rank) || order_rank != rank)) return;
  uint8_t dims[VL_MAX_RANK + 1];
  for (size_t i = 0; i < order_rank; i++)
    dims[i] = (uint8_t)(order[i] < 0 ? 255 : order[i] > 255 ? 255 : order[i]);
  vl_tensor *out = NULL;
  vl_error err;
  vl_error_clear(&err);
  vl_status st = vl_view_copy(t, size, rank, jo ? dims : NULL, lim, &out, &err);
  if (st != VL_OK) {
    fuzz_check_error(st, &err);
    FUZZ_CHECK(st == VL_ERR_KERNEL || st == VL_ERR_TOO_LARGE);
    return;
  }
  FUZZ_CHECK(out->spec.rank == rank);
  for (size_t i = 0; i < rank; i++) {
    FUZZ_CHECK(size[i] == -1 || out->spec.shape[i] == size[i]);
    FUZZ_CHECK(!jo || out->spec.dim_order[i] == dims[i]);
  }
  check_logical_copy(t, out);
  check_round_trip(out, VL_ENCODING_VALUES, lim);
  vl_tensor_free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *nul = memchr(data, 0, size);
  size_t json_len = nul ? (size_t)(nul - data) : size;
  const uint8_t *payload = nul ? nul + 1 : NULL;
  size_t payload_len = nul ? size - json_len - 1 : 0;
  cJSON *root = cJSON_ParseWithLength((const char *)data, json_len);
  if (root == NULL) return 0;
  vl_limits lim;
  fuzz_limits(&lim);
  vl_tensor *t = NULL;
  vl_error err;
  vl_error_clear(&err);
  vl_status st = vl_tensor_from_json(cJSON_GetObjectItemCaseSensitive(root, "tensor"), payload,
                                     payload_len, &lim, &t, &err);
  if (st != VL_OK) {
    fuzz_check_error(st, &err);
    FUZZ_CHECK(t == NULL);
  } else {
    check_strides(&t->spec);
    check_round_trip(t, VL_ENCODING_VALUES, &lim);
    check_round_trip(t, VL_ENCODING_BASE64, &lim);
    check_round_trip(t, VL_ENCODING_BLOB, &lim);
    check_view(t, root, &lim);
  }
  vl_tensor_free(t);
  cJSON_Delete(root);
  return 0;
}

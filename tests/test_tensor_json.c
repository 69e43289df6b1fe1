/* test_tensor_json.c - the tensor JSON codec (docs/format.md §4): logical vs physical order,
 * bit-exact round trips of every dtype through values, base64 and blob, float16/bfloat16 rounding,
 * shortest number printing, 64-bit integers as strings, and every error with its exact path. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/json_util.h"

#include "base/json_num.h"
#include "viewlower/tensor_json.h"

/* ---------------------------------------------------------------- helpers */

static vl_status parse_tensor(const char *json, const uint8_t *payload, size_t payload_len,
                              const vl_limits *lim, vl_tensor **out, vl_error *err) {
  cJSON *doc = cJSON_ParseWithLength(json, strlen(json));
  assert_non_null(doc);
  vl_status st = vl_tensor_from_json(doc, payload, payload_len, lim, out, err);
  cJSON_Delete(doc);
  return st;
}

static vl_tensor *parse_ok(const char *json) {
  vl_tensor *t = NULL;
  vl_error err;
  vl_error_clear(&err);
  vl_status st = parse_tensor(json, NULL, 0, NULL, &t, &err);
  if (st != VL_OK) fail_msg("%s: %s", err.path, err.message);
  return t;
}

static void assert_error_message_is_one_line(const vl_error *err) {
  assert_true(err->message[0] != '\0');
  assert_null(strchr(err->message, '\n'));
}

static void assert_tensor_error_with(const char *json, const uint8_t *payload, size_t payload_len,
                                     const vl_limits *lim, vl_status code, const char *path) {
  vl_tensor *t = NULL;
  vl_error err;
  vl_error_clear(&err);
  assert_int_equal(parse_tensor(json, payload, payload_len, lim, &t, &err), code);
  assert_int_equal(err.code, code);
  assert_string_equal(err.path, path);
  assert_error_message_is_one_line(&err);
  assert_null(t);
}

static void assert_tensor_error(const char *json, const char *path) {
  assert_tensor_error_with(json, NULL, 0, NULL, VL_ERR_INVALID_TENSOR, path);
}

static char *print_json(const cJSON *j) {
  char *text = cJSON_PrintUnformatted(j);
  assert_non_null(text);
  return text;
}

/* Prints a scalar and compares the JSON text. */
static void assert_scalar_prints(vl_dtype dt, const void *elem, const char *want) {
  cJSON *j = vl_scalar_to_json(dt, elem);
  assert_non_null(j);
  char *text = print_json(j);
  assert_string_equal(text, want);
  free(text);
  cJSON_Delete(j);
}

static void assert_f32_prints(float f, const char *want) {
  assert_scalar_prints(VL_DTYPE_FLOAT32, &f, want);
}

static void assert_f64_prints(double d, const char *want) {
  assert_scalar_prints(VL_DTYPE_FLOAT64, &d, want);
}

static vl_tensor *new_tensor(vl_dtype dt, uint8_t rank, const int64_t *shape,
                             const uint8_t *order) {
  vl_spec s;
  vl_tensor *t = NULL;
  vl_error err;
  vl_spec_init(&s, dt, rank, shape);
  if (order != NULL) memcpy(s.dim_order, order, rank);
  assert_int_equal(vl_tensor_new(&s, NULL, &t, &err), VL_OK);
  return t;
}

/* Tensor -> JSON text -> parsed tree -> tensor, through the given encoding. */
static vl_tensor *round_trip(const vl_tensor *t, vl_encoding enc) {
  vl_buf payload = {0};
  cJSON *j = vl_tensor_to_json(t, enc, &payload);
  assert_non_null(j);
  char *text = print_json(j);
  cJSON_Delete(j);
  vl_tensor *back = NULL;
  vl_error err;
  vl_error_clear(&err);
  vl_status st = parse_tensor(text, payload.data, payload.len, NULL, &back, &err);
  if (st != VL_OK) fail_msg("%s -> %s: %s", text, err.path, err.message);
  free(text);
  vl_buf_free(&payload);
  return back;
}

static uint64_t next_random(uint64_t *state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return *state;
}

static bool is_float_dtype(vl_dtype dt) {
  return dt == VL_DTYPE_FLOAT16 || dt == VL_DTYPE_BFLOAT16 || dt == VL_DTYPE_FLOAT32 ||
         dt == VL_DTYPE_FLOAT64;
}

static double element_as_double(vl_dtype dt, const uint8_t *p) {
  uint16_t h;
  float f;
  double d;
  switch (dt) {
  case VL_DTYPE_FLOAT16: memcpy(&h, p, 2); return vl_f16_to_double(h);
  case VL_DTYPE_BFLOAT16: memcpy(&h, p, 2); return vl_bf16_to_double(h);
  case VL_DTYPE_FLOAT32: memcpy(&f, p, 4); return (double)f;
  default: memcpy(&d, p, 8); return d;
  }
}

/* The canonical quiet NaN that "nan" reads back as, per float dtype. */
static void store_canonical_nan(vl_dtype dt, uint8_t *p) {
  static const uint8_t f16[] = {0x00, 0x7e}, bf16[] = {0xc0, 0x7f}, f32[] = {0, 0, 0xc0, 0x7f},
                       f64[] = {0, 0, 0, 0, 0, 0, 0xf8, 0x7f};
  switch (dt) {
  case VL_DTYPE_FLOAT16: memcpy(p, f16, 2); break;
  case VL_DTYPE_BFLOAT16: memcpy(p, bf16, 2); break;
  case VL_DTYPE_FLOAT32: memcpy(p, f32, 4); break;
  default: memcpy(p, f64, 8); break;
  }
}

/* Random bit patterns; bools 0/1; float NaNs made canonical so "values" can carry them. */
static void fill_random(vl_tensor *t, uint64_t seed) {
  uint8_t *p = t->data;
  size_t esize = vl_dtype_size(t->spec.dtype);
  for (int64_t i = 0; i < t->nbytes; i++) p[i] = (uint8_t)(next_random(&seed) >> 24);
  for (int64_t i = 0; i < t->nbytes; i += (int64_t)esize) {
    if (t->spec.dtype == VL_DTYPE_BOOL) p[i] &= 1u;
    if (is_float_dtype(t->spec.dtype) && isnan(element_as_double(t->spec.dtype, p + i)))
      store_canonical_nan(t->spec.dtype, p + i);
  }
}

/* ---------------------------------------------------------------- encodings and order */

static void encoding_names_are_values_base64_and_blob(void **state) {
  (void)state;
  vl_encoding e = VL_ENCODING_BLOB;
  assert_true(vl_encoding_from_name("values", &e));
  assert_int_equal(e, VL_ENCODING_VALUES);
  assert_true(vl_encoding_from_name("base64", &e));
  assert_int_equal(e, VL_ENCODING_BASE64);
  assert_true(vl_encoding_from_name("blob", &e));
  assert_int_equal(e, VL_ENCODING_BLOB);
  assert_false(vl_encoding_from_name("data", &e));
  assert_false(vl_encoding_from_name("", &e));
}

static void channels_last_values_are_scattered_into_physical_order(void **state) {
  (void)state;
  vl_tensor *t = parse_ok("{\"dtype\":\"float32\",\"shape\":[1,2,2,3],\"dim_order\":[0,2,3,1],"
                          "\"values\":[0,1,2,3,4,5,6,7,8,9,10,11]}");
  static const float physical[12] = {0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11};
  assert_int_equal(t->nbytes, 48);
  assert_memory_equal(t->data, physical, sizeof physical);
  cJSON *j = vl_tensor_to_json(t, VL_ENCODING_VALUES, NULL);
  char *text = print_json(j);
  assert_string_equal(text, "{\"dtype\":\"float32\",\"shape\":[1,2,2,3],\"dim_order\":[0,2,3,1],"
                            "\"values\":[0,1,2,3,4,5,6,7,8,9,10,11]}");
  free(text);
  cJSON_Delete(j);
  vl_tensor_free(t);
}

static void data_is_read_in_physical_order(void **state) {
  (void)state;
  /* int8 bytes 0,6,1,7,2,8,3,9,4,10,5,11 are the channels-last buffer of logical 0..11. */
  vl_tensor *t = parse_ok("{\"dtype\":\"int8\",\"shape\":[1,2,2,3],\"dim_order\":[0,2,3,1],"
                          "\"data\":\"AAYBBwIIAwkECgUL\"}");
  cJSON *j = vl_tensor_to_json(t, VL_ENCODING_VALUES, NULL);
  char *text = print_json(j);
  assert_non_null(strstr(text, "\"values\":[0,1,2,3,4,5,6,7,8,9,10,11]"));
  free(text);
  cJSON_Delete(j);
  vl_tensor_free(t);
}

static void strides_select_the_layout_of_values(void **state) {
  (void)state;
  vl_tensor *t = parse_ok("{\"dtype\":\"uint8\",\"shape\":[2,3],\"strides\":[1,2],"
                          "\"values\":[0,1,2,3,4,5]}");
  static const uint8_t physical[6] = {0, 3, 1, 4, 2, 5};
  assert_int_equal(t->spec.dim_order[0], 1);
  assert_int_equal(t->spec.dim_order[1], 0);
  assert_memory_equal(t->data, physical, sizeof physical);
  vl_tensor_free(t);
}

static void empty_and_rank_zero_tensors_are_read_from_every_body(void **state) {
  (void)state;
  vl_tensor *t = parse_ok("{\"dtype\":\"float32\",\"shape\":[0,3],\"values\":[]}");
  assert_int_equal(t->nbytes, 0);
  vl_tensor_free(t);
  t = parse_ok("{\"dtype\":\"float32\",\"shape\":[3,0],\"data\":\"\"}");
  assert_int_equal(t->nbytes, 0);
  vl_tensor_free(t);
  t = parse_ok("{\"dtype\":\"int16\",\"shape\":[0],\"blob\":{\"offset\":0,\"nbytes\":0}}");
  assert_int_equal(t->nbytes, 0);
  vl_tensor_free(t);
  t = parse_ok("{\"dtype\":\"int32\",\"shape\":[],\"values\":[-7]}");
  int32_t v;
  memcpy(&v, t->data, sizeof v);
  assert_int_equal(v, -7);
  vl_tensor_free(t);
}

/* ---------------------------------------------------------------- round trips */

static void assert_round_trips(const vl_tensor *t, vl_encoding enc) {
  vl_tensor *back = round_trip(t, enc);
  assert_true(vl_spec_equal(&back->spec, &t->spec));
  assert_int_equal(back->nbytes, t->nbytes);
  assert_memory_equal(back->data, t->data, (size_t)t->nbytes);
  vl_tensor_free(back);
}

static void every_dtype_round_trips_bit_exactly_through_values_base64_and_blob(void **state) {
  (void)state;
  static const int64_t shape[3] = {3, 4, 5};
  static const uint8_t order[3] = {2, 0, 1};
  for (int dt = 0; dt < VL_DTYPE_COUNT; dt++) {
    for (uint64_t seed = 1; seed <= 40; seed++) {
      vl_tensor *t = new_tensor((vl_dtype)dt, 3, shape, order);
      fill_random(t, seed * 0x9e3779b97f4a7c15u);
      assert_round_trips(t, VL_ENCODING_VALUES);
      assert_round_trips(t, VL_ENCODING_BASE64);
      assert_round_trips(t, VL_ENCODING_BLOB);
      vl_tensor_free(t);
    }
  }
}

static void every_float16_and_bfloat16_prints_and_reads_back_to_the_same_bits(void **state) {
  (void)state;
  static const int64_t shape[1] = {65536};
  vl_dtype dts[2] = {VL_DTYPE_FLOAT16, VL_DTYPE_BFLOAT16};
  for (int k = 0; k < 2; k++) {
    vl_tensor *t = new_tensor(dts[k], 1, shape, NULL);
    uint16_t *h = t->data;
    for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    for (uint32_t i = 0; i < 65536; i++)
      if (isnan(element_as_double(dts[k], (const uint8_t *)&h[i])))
        store_canonical_nan(dts[k], (uint8_t *)&h[i]);
    assert_round_trips(t, VL_ENCODING_VALUES);
    vl_tensor_free(t);
  }
}

static void printed_values_read_back_without_reprinting(void **state) {
  (void)state;
  static const int64_t shape[2] = {4, 6};
  for (int dt = 0; dt < VL_DTYPE_COUNT; dt++) {
    vl_tensor *t = new_tensor((vl_dtype)dt, 2, shape, NULL), *back = NULL;
    fill_random(t, 77);
    cJSON *j = vl_tensor_to_json(t, VL_ENCODING_VALUES, NULL);
    vl_error err;
    assert_int_equal(vl_tensor_from_json(j, NULL, 0, NULL, &back, &err), VL_OK);
    assert_memory_equal(back->data, t->data, (size_t)t->nbytes);
    cJSON_Delete(j);
    vl_tensor_free(back);
    vl_tensor_free(t);
  }
}

static void blob_bytes_are_appended_at_eight_byte_aligned_offsets(void **state) {
  (void)state;
  static const int64_t shape[1] = {3};
  vl_tensor *t = new_tensor(VL_DTYPE_UINT8, 1, shape, NULL);
  memcpy(t->data, "\x01\x02\x03", 3);
  vl_buf payload = {0};
  assert_int_equal(vl_buf_append(&payload, "abc", 3), VL_OK);
  cJSON *a = vl_tensor_to_json(t, VL_ENCODING_BLOB, &payload);
  cJSON *b = vl_tensor_to_json(t, VL_ENCODING_BLOB, &payload);
  char *ta = print_json(a), *tb = print_json(b);
  assert_string_equal(ta, "{\"dtype\":\"uint8\",\"shape\":[3],\"dim_order\":[0],"
                          "\"blob\":{\"offset\":8,\"nbytes\":3}}");
  assert_string_equal(tb, "{\"dtype\":\"uint8\",\"shape\":[3],\"dim_order\":[0],"
                          "\"blob\":{\"offset\":16,\"nbytes\":3}}");
  assert_int_equal(payload.len, 19);
  assert_memory_equal(payload.data, "abc\0\0\0\0\0\x01\x02\x03\0\0\0\0\0\x01\x02\x03", 19);
  free(ta);
  free(tb);
  cJSON_Delete(a);
  cJSON_Delete(b);
  assert_null(vl_tensor_to_json(t, VL_ENCODING_BLOB, NULL));
  vl_buf_free(&payload);
  vl_tensor_free(t);
}

/* A blob at an 8-byte aligned address is borrowed (data points into the payload, nothing is
 * allocated); an unaligned one, and other bodies, are copied into an owned tensor; the checks
 * are those of vl_tensor_from_json. */
static void aligned_blobs_are_borrowed_and_others_copied(void **state) {
  (void)state;
  _Alignas(8) uint8_t payload[24] = {0};
  for (int i = 0; i < 24; i++) payload[i] = (uint8_t)(i + 1);
  vl_tensor view, *owned = (vl_tensor *)1;
  vl_error err;
  cJSON *a =
      cJSON_Parse("{\"dtype\":\"int32\",\"shape\":[2],\"blob\":{\"offset\":8,\"nbytes\":8}}");
  assert_int_equal(
      vl_tensor_from_json_borrow(a, payload, sizeof payload, NULL, &view, &owned, &err), VL_OK);
  assert_null(owned);
  assert_ptr_equal(view.data, payload + 8);
  assert_int_equal(view.nbytes, 8);
  assert_int_equal(view.spec.dtype, VL_DTYPE_INT32);
  assert_int_equal(view.spec.rank, 1);
  assert_int_equal(view.spec.shape[0], 2);
  cJSON *u =
      cJSON_Parse("{\"dtype\":\"uint8\",\"shape\":[3],\"blob\":{\"offset\":5,\"nbytes\":3}}");
  assert_int_equal(
      vl_tensor_from_json_borrow(u, payload, sizeof payload, NULL, &view, &owned, &err), VL_OK);
  assert_non_null(owned);
  assert_true((uint8_t *)owned->data < payload || (uint8_t *)owned->data >= payload + 24);
  assert_memory_equal(owned->data, "\x06\x07\x08", 3);
  vl_tensor_free(owned);
  cJSON *v = cJSON_Parse("{\"dtype\":\"int8\",\"shape\":[2],\"values\":[-1,2]}");
  assert_int_equal(vl_tensor_from_json_borrow(v, NULL, 0, NULL, &view, &owned, &err), VL_OK);
  assert_non_null(owned);
  assert_memory_equal(owned->data, "\xff\x02", 2);
  vl_tensor_free(owned);
  cJSON *o =
      cJSON_Parse("{\"dtype\":\"int32\",\"shape\":[2],\"blob\":{\"offset\":24,\"nbytes\":8}}");
  assert_int_equal(
      vl_tensor_from_json_borrow(o, payload, sizeof payload, NULL, &view, &owned, &err),
      VL_ERR_INVALID_TENSOR);
  assert_string_equal(err.path, "/blob/offset");
  assert_null(owned);
  cJSON *b = cJSON_Parse("{\"dtype\":\"bool\",\"shape\":[8],\"blob\":{\"offset\":0,\"nbytes\":8}}");
  assert_int_equal(
      vl_tensor_from_json_borrow(b, payload, sizeof payload, NULL, &view, &owned, &err),
      VL_ERR_INVALID_TENSOR);
  assert_string_equal(err.path, "/blob");
  assert_null(owned);
  cJSON_Delete(a);
  cJSON_Delete(u);
  cJSON_Delete(v);
  cJSON_Delete(o);
  cJSON_Delete(b);
}

/* Into an empty payload the tensor's storage is moved (same address, offset 0); into a payload
 * that already holds bytes it is copied at the next aligned offset, as vl_tensor_to_json. */
static void blob_output_takes_the_storage_into_an_empty_payload(void **state) {
  (void)state;
  static const int64_t shape[1] = {3};
  vl_tensor *t = new_tensor(VL_DTYPE_UINT8, 1, shape, NULL);
  memcpy(t->data, "\x01\x02\x03", 3);
  void *storage = t->data;
  vl_buf payload = {0};
  cJSON *a = vl_tensor_to_json_take(t, VL_ENCODING_BLOB, &payload);
  char *ta = print_json(a);
  assert_string_equal(ta, "{\"dtype\":\"uint8\",\"shape\":[3],\"dim_order\":[0],"
                          "\"blob\":{\"offset\":0,\"nbytes\":3}}");
  assert_ptr_equal(payload.data, storage);
  assert_int_equal(payload.len, 3);
  assert_memory_equal(payload.data, "\x01\x02\x03", 3);
  assert_null(t->data);
  assert_int_equal(t->nbytes, 0);
  vl_tensor_free(t);
  vl_tensor *t2 = new_tensor(VL_DTYPE_UINT8, 1, shape, NULL);
  memcpy(t2->data, "\x04\x05\x06", 3);
  cJSON *b = vl_tensor_to_json_take(t2, VL_ENCODING_BLOB, &payload);
  char *tb = print_json(b);
  assert_string_equal(tb, "{\"dtype\":\"uint8\",\"shape\":[3],\"dim_order\":[0],"
                          "\"blob\":{\"offset\":8,\"nbytes\":3}}");
  assert_int_equal(payload.len, 11);
  assert_memory_equal(payload.data, "\x01\x02\x03\0\0\0\0\0\x04\x05\x06", 11);
  assert_non_null(t2->data);
  free(ta);
  free(tb);
  cJSON_Delete(a);
  cJSON_Delete(b);
  vl_buf_free(&payload);
  vl_tensor_free(t2);
}

static void base64_output_uses_the_standard_alphabet_with_padding(void **state) {
  (void)state;
  static const int64_t shape[1] = {4};
  vl_tensor *t = new_tensor(VL_DTYPE_UINT8, 1, shape, NULL);
  memcpy(t->data, "\xfb\xff\x00\x01", 4);
  cJSON *j = vl_tensor_to_json(t, VL_ENCODING_BASE64, NULL);
  assert_string_equal(cJSON_GetObjectItem(j, "data")->valuestring, "+/8AAQ==");
  cJSON_Delete(j);
  vl_tensor_free(t);
}

/* ---------------------------------------------------------------- float16 / bfloat16 */

static void float16_rounds_to_nearest_even_from_the_double(void **state) {
  (void)state;
  assert_int_equal(vl_f16_from_double(1.0), 0x3c00);
  assert_int_equal(vl_f16_from_double(1.0 + 0x1p-11), 0x3c00);           /* tie -> even */
  assert_int_equal(vl_f16_from_double(1.0 + 3 * 0x1p-11), 0x3c02);       /* tie -> even */
  assert_int_equal(vl_f16_from_double(1.0 + 0x1p-11 + 0x1p-40), 0x3c01); /* above the tie */
  assert_int_equal(vl_f16_from_double(1.0 + 0x1p-11 - 0x1p-40), 0x3c00); /* below the tie */
  assert_int_equal(vl_f16_from_double(65504.0), 0x7bff);
  assert_int_equal(vl_f16_from_double(65519.99), 0x7bff);
  assert_int_equal(vl_f16_from_double(65520.0), 0x7c00); /* tie with inf -> inf (even) */
  assert_int_equal(vl_f16_from_double(1e300), 0x7c00);
  assert_int_equal(vl_f16_from_double(-1e6), 0xfc00);
  assert_int_equal(vl_f16_from_double(INFINITY), 0x7c00);
  assert_int_equal(vl_f16_from_double(-0.0), 0x8000);
  assert_int_equal(vl_f16_from_double(NAN), 0x7e00);
}

static void float16_subnormals_round_to_nearest_even(void **state) {
  (void)state;
  assert_int_equal(vl_f16_from_double(0x1p-24), 0x0001);
  assert_int_equal(vl_f16_from_double(0x1p-25), 0x0000); /* tie -> even (zero) */
  assert_int_equal(vl_f16_from_double(0x1p-25 + 0x1p-60), 0x0001);
  assert_int_equal(vl_f16_from_double(3 * 0x1p-25), 0x0002); /* tie -> even */
  assert_int_equal(vl_f16_from_double(1023 * 0x1p-24), 0x03ff);
  assert_int_equal(vl_f16_from_double(1023.5 * 0x1p-24), 0x0400); /* carries into the normals */
  assert_int_equal(vl_f16_from_double(-0x1p-24), 0x8001);
  assert_int_equal(vl_f16_from_double(1e-300), 0x0000);
  assert_int_equal(vl_f16_from_double(-1e-300), 0x8000);
  assert_true(vl_f16_to_double(0x0001) == 0x1p-24);
  assert_true(vl_f16_to_double(0x7bff) == 65504.0);
  assert_true(isinf(vl_f16_to_double(0xfc00)) && vl_f16_to_double(0xfc00) < 0);
  assert_true(isnan(vl_f16_to_double(0x7e00)));
}

static void bfloat16_rounds_to_nearest_even_from_the_double(void **state) {
  (void)state;
  assert_int_equal(vl_bf16_from_double(1.0), 0x3f80);
  assert_int_equal(vl_bf16_from_double(1.0 + 0x1p-8), 0x3f80);     /* tie -> even */
  assert_int_equal(vl_bf16_from_double(1.0 + 3 * 0x1p-8), 0x3f82); /* tie -> even */
  assert_int_equal(vl_bf16_from_double(1.0 + 0x1p-8 + 0x1p-50), 0x3f81);
  /* Through float32 first this would round twice: 1 + 2^-8 + 2^-30 is 1 + 2^-8 as a float. */
  assert_int_equal(vl_bf16_from_double(1.0 + 0x1p-8 + 0x1p-30), 0x3f81);
  assert_int_equal(vl_bf16_from_double(0x1.fep127), 0x7f7f);
  assert_int_equal(vl_bf16_from_double(0x1.ffp127), 0x7f80); /* tie with inf -> inf */
  assert_int_equal(vl_bf16_from_double(0x1p-133), 0x0001);
  assert_int_equal(vl_bf16_from_double(0x1p-134), 0x0000); /* tie -> even (zero) */
  assert_int_equal(vl_bf16_from_double(-0.0), 0x8000);
  assert_int_equal(vl_bf16_from_double(NAN), 0x7fc0);
  assert_int_equal(vl_bf16_from_double(-INFINITY), 0xff80);
  assert_true(vl_bf16_to_double(0x0001) == 0x1p-133);
}

#ifdef __FLT16_MANT_DIG__
static void float16_conversion_matches_the_compiler_on_random_doubles(void **state) {
  (void)state;
  uint64_t s = 88172645463325252u;
  for (int i = 0; i < 1000000; i++) {
    uint64_t bits = next_random(&s);
    /* Exponents from 2^-30 to 2^19 (subnormals to overflow), with many exact ties. */
    bits = (bits & 0x800fffffffffffffu) | ((uint64_t)(1023 - 30 + (int)(bits >> 52) % 50) << 52);
    if (i % 3 == 0) bits = (bits & ~(uint64_t)0x7fffffffff) | 0x4000000000u;
    double x;
    memcpy(&x, &bits, sizeof x);
    _Float16 h = (_Float16)x;
    uint16_t want;
    memcpy(&want, &h, sizeof want);
    assert_int_equal(vl_f16_from_double(x), want);
  }
}
#endif

static void float16_and_bfloat16_values_round_from_json_numbers(void **state) {
  (void)state;
  vl_tensor *t = parse_ok("{\"dtype\":\"float16\",\"shape\":[5],"
                          "\"values\":[1.00048828125,65520,5.960464477539063e-08,-0.0,0.1]}");
  static const uint16_t f16[5] = {0x3c00, 0x7c00, 0x0001, 0x8000, 0x2e66};
  assert_memory_equal(t->data, f16, sizeof f16);
  vl_tensor_free(t);
  t = parse_ok("{\"dtype\":\"bfloat16\",\"shape\":[3],\"values\":[1.00390625,\"-inf\",3.14]}");
  static const uint16_t bf16[3] = {0x3f80, 0xff80, 0x4049};
  assert_memory_equal(t->data, bf16, sizeof bf16);
  vl_tensor_free(t);
}

/* ---------------------------------------------------------------- number printing */

static void float32_prints_the_shortest_form_that_reads_back(void **state) {
  (void)state;
  uint32_t denormal_bits = 1;
  float denormal;
  memcpy(&denormal, &denormal_bits, sizeof denormal);
  assert_f32_prints(0.1f, "0.1");
  assert_f32_prints(denormal, "1e-45");
  assert_f32_prints(3.4028234663852886e38f, "3.4028235e+38");
  assert_f32_prints(1.0f / 3.0f, "0.33333334");
  assert_f32_prints(16777216.0f, "16777216");
  assert_f32_prints(1e20f, "1e+20");
  assert_f32_prints(1e15f, "1000000000000000"); /* the float is 999999986991104 */
  assert_f32_prints(10.0f, "10");
  assert_f32_prints(120.0f, "120");
  assert_f32_prints(1.5f, "1.5");
  assert_f32_prints(0.0001f, "0.0001");
  assert_f32_prints(0.00001f, "1e-05");
  assert_f32_prints(0.000123f, "0.000123");
  assert_f32_prints(-2.5f, "-2.5");
  assert_f32_prints(-0.0f, "-0.0");
  assert_f32_prints(0.0f, "0");
  assert_f32_prints(NAN, "\"nan\"");
  assert_f32_prints(INFINITY, "\"inf\"");
  assert_f32_prints(-INFINITY, "\"-inf\"");
}

static void float64_prints_the_shortest_form_that_reads_back(void **state) {
  (void)state;
  assert_f64_prints(0.1, "0.1");
  assert_f64_prints(0.1 + 0.2, "0.30000000000000004");
  assert_f64_prints(4.9406564584124654e-324, "5e-324");
  assert_f64_prints(1.7976931348623157e308, "1.7976931348623157e+308");
  assert_f64_prints(123456789.0, "123456789");
  assert_f64_prints(9007199254740992.0, "9007199254740992");
  assert_f64_prints(1e16, "1e+16");
  assert_f64_prints(-1.25e-7, "-1.25e-07");
  assert_f64_prints(-0.0, "-0.0");
  assert_f64_prints(-INFINITY, "\"-inf\"");
}

static void float16_and_bfloat16_print_their_shortest_digits(void **state) {
  (void)state;
  static const struct {
    vl_dtype dt;
    uint16_t bits;
    const char *text;
  } cases[] = {
      {VL_DTYPE_FLOAT16, 0x3c00, "1"},         {VL_DTYPE_FLOAT16, 0x3555, "0.3333"},
      {VL_DTYPE_FLOAT16, 0x7bff, "65500"},     {VL_DTYPE_FLOAT16, 0x0001, "6e-08"},
      {VL_DTYPE_FLOAT16, 0x2e66, "0.1"},       {VL_DTYPE_FLOAT16, 0x8000, "-0.0"},
      {VL_DTYPE_FLOAT16, 0x7e00, "\"nan\""},   {VL_DTYPE_FLOAT16, 0xfc00, "\"-inf\""},
      {VL_DTYPE_BFLOAT16, 0x3f80, "1"},        {VL_DTYPE_BFLOAT16, 0x4049, "3.14"},
      {VL_DTYPE_BFLOAT16, 0x7f7f, "3.39e+38"}, {VL_DTYPE_BFLOAT16, 0x7f80, "\"inf\""},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    assert_scalar_prints(cases[i].dt, &cases[i].bits, cases[i].text);
}

static void integers_print_exactly_and_int64_beyond_2_53_as_strings(void **state) {
  (void)state;
  int64_t safe = 9007199254740992, unsafe = 9007199254740993, lowest = INT64_MIN;
  int64_t neg_safe = -9007199254740992, neg_unsafe = -9007199254740993;
  uint8_t u8 = 255, b = 1;
  int8_t i8 = -128;
  int32_t i32 = INT32_MIN;
  assert_scalar_prints(VL_DTYPE_INT64, &safe, "9007199254740992");
  assert_scalar_prints(VL_DTYPE_INT64, &unsafe, "\"9007199254740993\"");
  assert_scalar_prints(VL_DTYPE_INT64, &neg_safe, "-9007199254740992");
  assert_scalar_prints(VL_DTYPE_INT64, &neg_unsafe, "\"-9007199254740993\"");
  assert_scalar_prints(VL_DTYPE_INT64, &lowest, "\"-9223372036854775808\"");
  assert_scalar_prints(VL_DTYPE_UINT8, &u8, "255");
  assert_scalar_prints(VL_DTYPE_INT8, &i8, "-128");
  assert_scalar_prints(VL_DTYPE_INT32, &i32, "-2147483648");
  assert_scalar_prints(VL_DTYPE_BOOL, &b, "true");
}

static void int64_values_are_read_from_decimal_strings(void **state) {
  (void)state;
  vl_tensor *t =
      parse_ok("{\"dtype\":\"int64\",\"shape\":[5],\"values\":[\"9223372036854775807\","
               "\"-9223372036854775808\",\"9007199254740993\",-9007199254740991,\"0\"]}");
  static const int64_t want[5] = {INT64_MAX, INT64_MIN, 9007199254740993, -9007199254740991, 0};
  assert_memory_equal(t->data, want, sizeof want);
  vl_tensor_free(t);
}

static void float_values_accept_nan_and_infinity_strings_and_round_float32(void **state) {
  (void)state;
  vl_tensor *t = parse_ok("{\"dtype\":\"float32\",\"shape\":[5],"
                          "\"values\":[\"nan\",\"inf\",\"-inf\",0.1,1e-45]}");
  const float *f = t->data;
  uint32_t nan_bits, denormal_bits;
  memcpy(&nan_bits, &f[0], 4);
  memcpy(&denormal_bits, &f[4], 4);
  assert_int_equal(nan_bits, 0x7fc00000);
  assert_true(isinf(f[1]) && f[1] > 0);
  assert_true(isinf(f[2]) && f[2] < 0);
  assert_true(f[3] == 0.1f);
  assert_int_equal(denormal_bits, 1);
  vl_tensor_free(t);
}

static void json_numbers_beyond_the_float_range_round_to_infinity(void **state) {
  (void)state;
  vl_tensor *t = parse_ok("{\"dtype\":\"float32\",\"shape\":[3],"
                          "\"values\":[3.40282356e38,3.4028235677973366e38,-1e39]}");
  const float *f = t->data;
  assert_true(f[0] == 3.4028234663852886e38f); /* below the tie with 2^128: FLT_MAX */
  assert_true(isinf(f[1]) && f[1] > 0);        /* 2^128 - 2^103, the tie: to even, inf */
  assert_true(isinf(f[2]) && f[2] < 0);
  vl_tensor_free(t);
  t = parse_ok("{\"dtype\":\"float64\",\"shape\":[1],\"values\":[1e400]}");
  assert_true(isinf(*(const double *)t->data));
  vl_tensor_free(t);
}

/* ---------------------------------------------------------------- errors */

static void wrong_value_count_is_rejected_at_values(void **state) {
  (void)state;
  assert_tensor_error("{\"dtype\":\"float32\",\"shape\":[2,6],\"values\":[0,1,2,3,4,5,6,7,8,9,10]}",
                      "/values");
  assert_tensor_error("{\"dtype\":\"float32\",\"shape\":[1],\"values\":[1,2]}", "/values");
  assert_tensor_error("{\"dtype\":\"float32\",\"shape\":[1],\"values\":1}", "/values");
}

static void fractional_integer_is_rejected_at_its_index(void **state) {
  (void)state;
  assert_tensor_error("{\"dtype\":\"int32\",\"shape\":[3],\"values\":[1,2,2.5]}", "/values/2");
  assert_tensor_error("{\"dtype\":\"int64\",\"shape\":[2],\"values\":[0,0.5]}", "/values/1");
}

static void out_of_range_integers_are_rejected_at_their_index(void **state) {
  (void)state;
  assert_tensor_error("{\"dtype\":\"int8\",\"shape\":[2],\"values\":[127,128]}", "/values/1");
  assert_tensor_error("{\"dtype\":\"int8\",\"shape\":[1],\"values\":[-129]}", "/values/0");
  assert_tensor_error("{\"dtype\":\"uint8\",\"shape\":[2],\"values\":[0,-1]}", "/values/1");
  assert_tensor_error("{\"dtype\":\"int16\",\"shape\":[1],\"values\":[32768]}", "/values/0");
  assert_tensor_error("{\"dtype\":\"int32\",\"shape\":[1],\"values\":[1e10]}", "/values/0");
  assert_tensor_error("{\"dtype\":\"int32\",\"shape\":[1],\"values\":[\"5\"]}", "/values/0");
}

static void int64_numbers_beyond_2_53_and_malformed_strings_are_rejected(void **state) {
  (void)state;
  static const char *const bad[] = {"9007199254740994",
                                    "-9007199254740994",
                                    "1e19",
                                    "\"9223372036854775808\"",
                                    "\"-9223372036854775809\"",
                                    "\"+1\"",
                                    "\"01\"",
                                    "\" 1\"",
                                    "\"1.0\"",
                                    "\"\"",
                                    "\"-\"",
                                    "true",
                                    "null"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char json[128];
    snprintf(json, sizeof json, "{\"dtype\":\"int64\",\"shape\":[2],\"values\":[1,%s]}", bad[i]);
    assert_tensor_error(json, "/values/1");
  }
}

static void bool_accepts_only_true_and_false(void **state) {
  (void)state;
  vl_tensor *t = parse_ok("{\"dtype\":\"bool\",\"shape\":[2],\"values\":[true,false]}");
  assert_memory_equal(t->data, "\x01\x00", 2);
  vl_tensor_free(t);
  assert_tensor_error("{\"dtype\":\"bool\",\"shape\":[2],\"values\":[true,1]}", "/values/1");
  assert_tensor_error("{\"dtype\":\"bool\",\"shape\":[1],\"values\":[\"true\"]}", "/values/0");
  assert_tensor_error("{\"dtype\":\"bool\",\"shape\":[1],\"data\":\"Ag==\"}", "/data");
}

static void float_values_reject_other_strings_and_non_numbers(void **state) {
  (void)state;
  assert_tensor_error("{\"dtype\":\"float32\",\"shape\":[1],\"values\":[\"NaN\"]}", "/values/0");
  assert_tensor_error("{\"dtype\":\"float64\",\"shape\":[2],\"values\":[1,\"1.5\"]}", "/values/1");
  assert_tensor_error("{\"dtype\":\"float16\",\"shape\":[1],\"values\":[true]}", "/values/0");
  assert_tensor_error("{\"dtype\":\"bfloat16\",\"shape\":[1],\"values\":[null]}", "/values/0");
  assert_tensor_error("{\"dtype\":\"float32\",\"shape\":[1],\"values\":[[1]]}", "/values/0");
}

static void error_index_is_the_logical_index_under_any_dim_order(void **state) {
  (void)state;
  assert_tensor_error("{\"dtype\":\"int8\",\"shape\":[2,3],\"dim_order\":[1,0],"
                      "\"values\":[0,1,2,3,999,5]}",
                      "/values/4");
}

static void bad_base64_is_rejected_at_data(void **state) {
  (void)state;
  static const struct {
    const char *text;
    int nbytes; /* the size the text's length implies, so only the named defect remains */
  } bad[] = {
      {"AA*A", 3}, /* character outside the alphabet */
      {"AAA", 2},  /* length not a multiple of 4 */
      {"AA=A", 3}, /* padding in the middle */
      {"A===", 1}, /* three padding characters */
      {"AB==", 1}, /* non-zero padding bits */
      {"AAF=", 2}, /* non-zero padding bits */
      {"AA A", 3}, /* whitespace */
      {"AA-_", 3}, /* URL-safe alphabet */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char json[128];
    snprintf(json, sizeof json, "{\"dtype\":\"uint8\",\"shape\":[%d],\"data\":\"%s\"}",
             bad[i].nbytes, bad[i].text);
    assert_tensor_error(json, "/data");
  }
  assert_tensor_error("{\"dtype\":\"uint8\",\"shape\":[1],\"data\":[1]}", "/data");
}

static void base64_of_the_wrong_length_is_rejected_at_data(void **state) {
  (void)state;
  assert_tensor_error("{\"dtype\":\"int32\",\"shape\":[2],\"data\":\"AAAAAAAA\"}", "/data");
  assert_tensor_error("{\"dtype\":\"int32\",\"shape\":[1],\"data\":\"AAAAAAAA\"}", "/data");
  vl_tensor *t = parse_ok("{\"dtype\":\"int32\",\"shape\":[2],\"data\":\"AQAAAP////8=\"}");
  static const int32_t want[2] = {1, -1};
  assert_int_equal(t->nbytes, 8);
  assert_memory_equal(t->data, want, sizeof want);
  vl_tensor_free(t);
}

static void blob_outside_the_payload_is_rejected_at_offset(void **state) {
  (void)state;
  static const uint8_t payload[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  const char *in = "{\"dtype\":\"uint8\",\"shape\":[4],\"blob\":{\"offset\":12,\"nbytes\":4}}";
  const char *out = "{\"dtype\":\"uint8\",\"shape\":[4],\"blob\":{\"offset\":13,\"nbytes\":4}}";
  vl_tensor *t = NULL;
  vl_error err;
  assert_int_equal(parse_tensor(in, payload, sizeof payload, NULL, &t, &err), VL_OK);
  assert_memory_equal(t->data, payload + 12, 4);
  vl_tensor_free(t);
  assert_tensor_error_with(out, payload, sizeof payload, NULL, VL_ERR_INVALID_TENSOR,
                           "/blob/offset");
  assert_tensor_error_with(in, NULL, 0, NULL, VL_ERR_INVALID_TENSOR, "/blob/offset");
}

static void blob_offset_plus_nbytes_overflow_is_rejected(void **state) {
  (void)state;
  static const uint8_t payload[8] = {0};
  assert_tensor_error_with("{\"dtype\":\"uint8\",\"shape\":[4],"
                           "\"blob\":{\"offset\":\"9223372036854775807\",\"nbytes\":4}}",
                           payload, sizeof payload, NULL, VL_ERR_INVALID_TENSOR, "/blob/offset");
}

static void malformed_blob_references_are_rejected_at_their_field(void **state) {
  (void)state;
  static const uint8_t payload[8] = {0};
  static const struct {
    const char *blob, *path;
  } cases[] = {
      {"{\"offset\":0,\"nbytes\":3}", "/blob/nbytes"},
      {"{\"offset\":-8,\"nbytes\":4}", "/blob/offset"},
      {"{\"offset\":0.5,\"nbytes\":4}", "/blob/offset"},
      {"{\"nbytes\":4}", "/blob/offset"},
      {"{\"offset\":0}", "/blob/nbytes"},
      {"{\"offset\":0,\"nbytes\":4,\"x\":1}", "/blob/x"},
      {"[0,4]", "/blob"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char json[160];
    snprintf(json, sizeof json, "{\"dtype\":\"int32\",\"shape\":[1],\"blob\":%s}", cases[i].blob);
    assert_tensor_error_with(json, payload, sizeof payload, NULL, VL_ERR_INVALID_TENSOR,
                             cases[i].path);
  }
}

static void unknown_keys_and_body_conflicts_are_rejected(void **state) {
  (void)state;
  assert_tensor_error("{\"dtype\":\"int8\",\"shape\":[1],\"values\":[1],\"foo\":1}", "/foo");
  assert_tensor_error("{\"dtype\":\"int8\",\"shape\":[1],\"values\":[1],\"data\":\"AQ==\"}",
                      "/data");
  assert_tensor_error("{\"dtype\":\"int8\",\"shape\":[1],\"blob\":{},\"values\":[1]}", "/values");
  assert_tensor_error("{\"dtype\":\"int8\",\"shape\":[1],\"values\":[1],\"values\":[2]}",
                      "/values");
  assert_tensor_error("{\"dtype\":\"int8\",\"shape\":[1]}", "");
  assert_tensor_error("[1]", "");
  assert_tensor_error("{\"dtype\":\"int9\",\"shape\":[1],\"values\":[1]}", "/dtype");
}

static void tensor_over_the_byte_limit_fails_before_allocating(void **state) {
  (void)state;
  /* 4 TB: must fail on the size alone, not try to allocate or count values. */
  assert_tensor_error_with("{\"dtype\":\"float32\",\"shape\":[1000000000000],\"values\":[]}", NULL,
                           0, NULL, VL_ERR_TOO_LARGE, "/shape");
  assert_tensor_error_with("{\"dtype\":\"float32\",\"shape\":[1000000000000],\"data\":\"\"}", NULL,
                           0, NULL, VL_ERR_TOO_LARGE, "/shape");
  vl_limits lim;
  vl_limits_default(&lim);
  lim.max_tensor_bytes = 16;
  assert_tensor_error_with("{\"dtype\":\"float32\",\"shape\":[5],\"values\":[1,2,3,4,5]}", NULL, 0,
                           &lim, VL_ERR_TOO_LARGE, "/shape");
  vl_tensor *t = NULL;
  vl_error err;
  assert_int_equal(parse_tensor("{\"dtype\":\"float32\",\"shape\":[4],\"values\":[1,2,3,4]}", NULL,
                                0, &lim, &t, &err),
                   VL_OK);
  vl_tensor_free(t);
}

static void byte_size_overflowing_63_bits_is_an_invalid_tensor(void **state) {
  (void)state;
  vl_tensor *t = NULL;
  vl_error err;
  vl_error_clear(&err);
  assert_int_equal(parse_tensor("{\"dtype\":\"float64\",\"shape\":[4294967296,4294967296],"
                                "\"values\":[]}",
                                NULL, 0, NULL, &t, &err),
                   VL_ERR_INVALID_TENSOR);
  assert_string_equal(err.path, "/shape");
  assert_null(t);
}

/* ---------------------------------------------------------------- tensor maps */

static vl_status parse_map(const char *json, const vl_limits *lim, vl_tensor_map **out,
                           vl_error *err) {
  cJSON *doc = cJSON_Parse(json);
  assert_non_null(doc);
  vl_status st = vl_tensor_map_from_json(doc, NULL, 0, lim, out, err);
  cJSON_Delete(doc);
  return st;
}

static void assert_map_error(const char *json, const vl_limits *lim, vl_status code,
                             const char *path) {
  vl_tensor_map *m = NULL;
  vl_error err;
  vl_error_clear(&err);
  assert_int_equal(parse_map(json, lim, &m, &err), code);
  assert_string_equal(err.path, path);
  assert_error_message_is_one_line(&err);
  assert_null(m);
}

static void tensor_map_keeps_names_in_document_order(void **state) {
  (void)state;
  vl_tensor_map *m = NULL;
  vl_error err;
  assert_int_equal(parse_map("{\"x\":{\"dtype\":\"int8\",\"shape\":[1],\"values\":[1]},"
                             "\"y\":{\"dtype\":\"bool\",\"shape\":[],\"values\":[true]}}",
                             NULL, &m, &err),
                   VL_OK);
  assert_int_equal(m->count, 2);
  assert_string_equal(m->names[0], "x");
  assert_string_equal(m->names[1], "y");
  assert_int_equal(vl_tensor_map_find(m, "y"), 1);
  assert_int_equal(m->tensors[1]->spec.dtype, VL_DTYPE_BOOL);
  vl_tensor_map_free(m);
  assert_int_equal(parse_map("{}", NULL, &m, &err), VL_OK);
  assert_int_equal(m->count, 0);
  vl_tensor_map_free(m);
}

static void tensor_map_errors_are_prefixed_with_the_escaped_name(void **state) {
  (void)state;
  assert_map_error("{\"x\":{\"dtype\":\"int8\",\"shape\":[1],\"values\":[1]},"
                   "\"a/b~c\":{\"dtype\":\"int8\",\"shape\":[4],\"values\":[0,1,2,300]}}",
                   NULL, VL_ERR_INVALID_TENSOR, "/a~1b~0c/values/3");
  assert_map_error("[]", NULL, VL_ERR_INVALID_TENSOR, "");
  assert_map_error("{\"x\":1}", NULL, VL_ERR_INVALID_TENSOR, "/x");
}

static void tensor_map_rejects_duplicate_names_at_the_repeat(void **state) {
  (void)state;
  assert_map_error("{\"x\":{\"dtype\":\"int8\",\"shape\":[1],\"values\":[1]},"
                   "\"y\":{\"dtype\":\"int8\",\"shape\":[1],\"values\":[1]},"
                   "\"y\":{\"dtype\":\"int8\",\"shape\":[1],\"values\":[1]},"
                   "\"x\":{\"dtype\":\"int8\",\"shape\":[1],\"values\":[1]}}",
                   NULL, VL_ERR_INVALID_TENSOR, "/y");
}

static void tensor_map_total_bytes_are_limited_before_allocating(void **state) {
  (void)state;
  vl_limits lim;
  vl_limits_default(&lim);
  lim.max_total_bytes = 20;
  assert_map_error("{\"x\":{\"dtype\":\"float32\",\"shape\":[4],\"values\":[1,2,3,4]},"
                   "\"y\":{\"dtype\":\"float32\",\"shape\":[4],\"values\":[1,2,3,4]}}",
                   &lim, VL_ERR_TOO_LARGE, "/y/shape");
}

/* ---------------------------------------------------------------- buffer */

static void buffer_grows_and_keeps_its_bytes(void **state) {
  (void)state;
  vl_buf b = {0};
  uint8_t chunk[100];
  for (int i = 0; i < 100; i++) chunk[i] = (uint8_t)i;
  for (int i = 0; i < 50; i++) assert_int_equal(vl_buf_append(&b, chunk, sizeof chunk), VL_OK);
  assert_int_equal(b.len, 5000);
  assert_true(b.cap >= b.len);
  for (size_t i = 0; i < b.len; i++) assert_int_equal(b.data[i], i % 100);
  uint8_t *tail = vl_buf_extend(&b, 0);
  assert_ptr_equal(tail, b.data + 5000);
  assert_null(vl_buf_extend(&b, SIZE_MAX));
  assert_int_equal(b.len, 5000);
  vl_buf_free(&b);
  assert_null(b.data);
  assert_int_equal(b.len, 0);
  vl_buf_free(NULL);
}

static void empty_buffer_extends_by_zero_bytes_to_a_valid_pointer(void **state) {
  (void)state;
  vl_buf b = {0};
  assert_non_null(vl_buf_extend(&b, 0));
  assert_int_equal(vl_buf_append(&b, NULL, 0), VL_OK);
  assert_int_equal(b.len, 0);
  vl_buf_free(&b);
}

/* The exact number reader and writer (src/base/json_num, docs/format.md §2): 200,000 seeded random
 * doubles (every bit pattern class: subnormals, huge, tiny, negative zero) print as a float
 * token that reads back to the same bits, in no more than 17 significant digits. */
static void every_double_prints_as_a_float_token_that_reads_back_bit_exactly(void **state) {
  (void)state;
  uint64_t x = 0x9E3779B97F4A7C15ull;
  size_t checked = 0;
  for (int i = 0; i < 200000; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    double d;
    memcpy(&d, &x, sizeof d);
    if (!isfinite(d)) continue;
    char text[VL__NUM_TEXT_MAX];
    size_t n = vl__num_format_double(d, text);
    assert_int_equal(n, strlen(text));
    bool is_float = false;
    int64_t iv = 0;
    double back = 0;
    assert_int_equal(vl__num_parse(text, n, &is_float, &iv, &back), VL__NUM_OK);
    assert_true(is_float);
    if (memcmp(&back, &d, sizeof d) != 0) fail_msg("%.17g printed as %s", d, text);
    size_t digits = 0;
    for (const char *c = text; *c && *c != 'e'; c++) digits += *c >= '0' && *c <= '9';
    assert_true(digits <= 17 + 4); /* plain layout pads up to 4 zeros (0.0001234) */
    checked++;
  }
  assert_true(checked > 190000);
  static const struct {
    double v;
    const char *text;
  } cases[] = {{2.0, "2.0"},         {-0.0, "-0.0"},        {0.1, "0.1"},
               {1e-05, "1e-05"},     {1e16, "1e+16"},       {123456789012345680.0, "1.2345678901234568e+17"},
               {0.30000000000000004, "0.30000000000000004"}, {5e-324, "5e-324"},
               {1.7976931348623157e308, "1.7976931348623157e+308"}, {100.0, "100.0"}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char text[VL__NUM_TEXT_MAX];
    vl__num_format_double(cases[i].v, text);
    assert_string_equal(text, cases[i].text);
  }
}

static void integer_tokens_are_exact_in_the_int64_range_only(void **state) {
  (void)state;
  static const struct {
    const char *text;
    vl__num_result result;
    bool is_float;
    int64_t value;
  } cases[] = {
      {"9223372036854775807", VL__NUM_OK, false, INT64_MAX},
      {"-9223372036854775808", VL__NUM_OK, false, INT64_MIN},
      {"9007199254740993", VL__NUM_OK, false, INT64_C(9007199254740993)},
      {"9223372036854775808", VL__NUM_RANGE, false, 0},
      {"-9223372036854775809", VL__NUM_RANGE, false, 0},
      {"123456789012345678901234567890", VL__NUM_RANGE, false, 0},
      {"-0", VL__NUM_OK, false, 0},
      {"1e400", VL__NUM_RANGE, true, 0},
      {"01", VL__NUM_BAD, false, 0},
      {"1.", VL__NUM_BAD, false, 0},
      {"+1", VL__NUM_BAD, false, 0},
      {".5", VL__NUM_BAD, false, 0},
      {"1e", VL__NUM_BAD, false, 0},
      {"-", VL__NUM_BAD, false, 0},
      {"", VL__NUM_BAD, false, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    bool is_float = false;
    int64_t v = 0;
    double f = 0;
    vl__num_result r = vl__num_parse(cases[i].text, strlen(cases[i].text), &is_float, &v, &f);
    if (r != cases[i].result) fail_msg("%s: %d, want %d", cases[i].text, r, cases[i].result);
    if (r == VL__NUM_OK && !cases[i].is_float) assert_true(v == cases[i].value);
    if (r != VL__NUM_BAD) assert_int_equal(is_float, cases[i].is_float);
    char text[VL__NUM_TEXT_MAX];
    if (r == VL__NUM_OK && !is_float && cases[i].text[0] != '-') {
      vl__num_format_int(v, text);
      assert_string_equal(text, cases[i].text);
    }
  }
  char text[VL__NUM_TEXT_MAX];
  vl__num_format_int(INT64_MIN, text);
  assert_string_equal(text, "-9223372036854775808");
}

/* Integer members (ids, seeds, shapes) are whole numbers within 2^53: 9007199254740993 reads as
 * the double 2^53, so the parsed tree's token text decides. */
/* vl__path_join(_index) cut a path where snprintf would: at VL_ERROR_PATH_MAX - 1 bytes, then
 * append the escaped token only if it fits. */
static void joined_paths_are_cut_as_snprintf_cuts_them(void **state) {
  (void)state;
  char base[VL_ERROR_PATH_MAX + 40], out[VL_ERROR_PATH_MAX], want[VL_ERROR_PATH_MAX + 80];
  for (size_t len = VL_ERROR_PATH_MAX - 12; len <= VL_ERROR_PATH_MAX + 30; len += 7) {
    memset(base, 'p', len);
    base[0] = '/';
    base[len] = '\0';
    size_t cut = len < VL_ERROR_PATH_MAX - 1 ? len : VL_ERROR_PATH_MAX - 1; /* snprintf's cut */
    vl__path_join(out, base, "a~b");
    memcpy(want, base, cut);
    want[cut] = '\0';
    vl_pointer_append(want, VL_ERROR_PATH_MAX, "a~b");
    assert_string_equal(out, want);
    assert_true(strlen(out) < VL_ERROR_PATH_MAX);
    vl__path_join_index(out, base, 12345);
    memcpy(want, base, cut);
    want[cut] = '\0';
    vl_pointer_append_index(want, VL_ERROR_PATH_MAX, 12345);
    assert_string_equal(out, want);
  }
  vl__path_join(out, "/graph", "x/y");
  assert_string_equal(out, "/graph/x~1y");
}

static void a_whole_number_past_2_53_is_refused_by_its_digits(void **state) {
  (void)state;
  static const struct {
    const char *text;
    bool ok;
    int64_t value;
  } rows[] = {{"9007199254740992", true, INT64_C(9007199254740992)},
              {"-9007199254740992", true, -INT64_C(9007199254740992)},
              {"9007199254740993", false, 0},
              {"-9007199254740993", false, 0},
              {"9007199254740991", true, INT64_C(9007199254740991)},
              {"9007199254740992.0", true, INT64_C(9007199254740992)},
              {"9007199254740994", false, 0}};
  for (size_t k = 0; k < sizeof rows / sizeof *rows; k++) {
    cJSON *doc = NULL;
    size_t at = 0;
    assert_int_equal(vl__json_parse_one(rows[k].text, strlen(rows[k].text), false, &doc, &at),
                     VL__JSON_OK);
    int64_t v = 0;
    bool ok = vl__json_int(doc, -INT64_C(9007199254740992), INT64_C(9007199254740992), &v);
    if (ok != rows[k].ok) fail_msg("%s: %s", rows[k].text, ok ? "accepted" : "refused");
    if (ok) assert_int_equal(v, rows[k].value);
    cJSON_Delete(doc);
  }
  /* A refused one is told the range it can have: [0, 2^53], not [0, 2^63 - 1]. */
  const char *t = "[2,9007199254740993]";
  cJSON *doc = NULL;
  size_t at = 0;
  assert_int_equal(vl__json_parse_one(t, strlen(t), false, &doc, &at), VL__JSON_OK);
  int64_t out[2];
  size_t len = 0;
  vl_error err;
  assert_int_equal(vl__json_int_array(doc, 2, 0, INT64_MAX, out, &len, "/shape",
                                      VL_ERR_INVALID_TENSOR, &err),
                   VL_ERR_INVALID_TENSOR);
  assert_string_equal(err.path, "/shape/1");
  assert_string_equal(err.message, "must be a whole number in [0, 9007199254740992]");
  cJSON_Delete(doc);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(encoding_names_are_values_base64_and_blob),
      cmocka_unit_test(every_double_prints_as_a_float_token_that_reads_back_bit_exactly),
      cmocka_unit_test(integer_tokens_are_exact_in_the_int64_range_only),
      cmocka_unit_test(channels_last_values_are_scattered_into_physical_order),
      cmocka_unit_test(data_is_read_in_physical_order),
      cmocka_unit_test(strides_select_the_layout_of_values),
      cmocka_unit_test(empty_and_rank_zero_tensors_are_read_from_every_body),
      cmocka_unit_test(every_dtype_round_trips_bit_exactly_through_values_base64_and_blob),
      cmocka_unit_test(every_float16_and_bfloat16_prints_and_reads_back_to_the_same_bits),
      cmocka_unit_test(printed_values_read_back_without_reprinting),
      cmocka_unit_test(blob_bytes_are_appended_at_eight_byte_aligned_offsets),
      cmocka_unit_test(aligned_blobs_are_borrowed_and_others_copied),
      cmocka_unit_test(blob_output_takes_the_storage_into_an_empty_payload),
      cmocka_unit_test(base64_output_uses_the_standard_alphabet_with_padding),
      cmocka_unit_test(float16_rounds_to_nearest_even_from_the_double),
      cmocka_unit_test(float16_subnormals_round_to_nearest_even),
      cmocka_unit_test(bfloat16_rounds_to_nearest_even_from_the_double),
#ifdef __FLT16_MANT_DIG__
      cmocka_unit_test(float16_conversion_matches_the_compiler_on_random_doubles),
#endif
      cmocka_unit_test(float16_and_bfloat16_values_round_from_json_numbers),
      cmocka_unit_test(float32_prints_the_shortest_form_that_reads_back),
      cmocka_unit_test(float64_prints_the_shortest_form_that_reads_back),
      cmocka_unit_test(float16_and_bfloat16_print_their_shortest_digits),
      cmocka_unit_test(integers_print_exactly_and_int64_beyond_2_53_as_strings),
      cmocka_unit_test(int64_values_are_read_from_decimal_strings),
      cmocka_unit_test(float_values_accept_nan_and_infinity_strings_and_round_float32),
      cmocka_unit_test(json_numbers_beyond_the_float_range_round_to_infinity),
      cmocka_unit_test(wrong_value_count_is_rejected_at_values),
      cmocka_unit_test(fractional_integer_is_rejected_at_its_index),
      cmocka_unit_test(out_of_range_integers_are_rejected_at_their_index),
      cmocka_unit_test(int64_numbers_beyond_2_53_and_malformed_strings_are_rejected),
      cmocka_unit_test(bool_accepts_only_true_and_false),
      cmocka_unit_test(float_values_reject_other_strings_and_non_numbers),
      cmocka_unit_test(error_index_is_the_logical_index_under_any_dim_order),
      cmocka_unit_test(bad_base64_is_rejected_at_data),
      cmocka_unit_test(base64_of_the_wrong_length_is_rejected_at_data),
      cmocka_unit_test(blob_outside_the_payload_is_rejected_at_offset),
      cmocka_unit_test(blob_offset_plus_nbytes_overflow_is_rejected),
      cmocka_unit_test(malformed_blob_references_are_rejected_at_their_field),
      cmocka_unit_test(unknown_keys_and_body_conflicts_are_rejected),
      cmocka_unit_test(tensor_over_the_byte_limit_fails_before_allocating),
      cmocka_unit_test(byte_size_overflowing_63_bits_is_an_invalid_tensor),
      cmocka_unit_test(tensor_map_keeps_names_in_document_order),
      cmocka_unit_test(tensor_map_errors_are_prefixed_with_the_escaped_name),
      cmocka_unit_test(tensor_map_rejects_duplicate_names_at_the_repeat),
      cmocka_unit_test(tensor_map_total_bytes_are_limited_before_allocating),
      cmocka_unit_test(buffer_grows_and_keeps_its_bytes),
      cmocka_unit_test(a_whole_number_past_2_53_is_refused_by_its_digits),
      cmocka_unit_test(joined_paths_are_cut_as_snprintf_cuts_them),
      cmocka_unit_test(empty_buffer_extends_by_zero_bytes_to_a_valid_pointer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_hostile.c - hostile inputs through vl_service_call (the entry point the daemon and
 * viewlowerctl --local share): size arithmetic that overflows, blobs outside the payload, rank
 * 17, node counts over the limit (a real 1,000,001-node graph included), nesting 10^5 deep,
 * NUL bytes and invalid UTF-8, duplicate keys, numbers out of range or fractional, value lists
 * that disagree with the shape, negative sizes, orders that are not permutations. Each case
 * asserts the exact status and JSON pointer (relative to params), and that nothing crashes,
 * leaks or allocates what the input only claims to need. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "viewlower/graph.h"
#include "viewlower/layout.h"
#include "viewlower/lower.h"
#include "viewlower/service.h"

/* ---------------------------------------------------------------- helpers */

#define G_HEAD "{\"format\":\"viewlower.graph\",\"version\":1,\"nodes\":["
#define G_X                                                                                        \
  "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\",\"shape\":[2,3]}}"
#define G_OUT(a) "{\"name\":\"out\",\"op\":\"output\",\"args\":[\"" a "\"]}"
/* A one-placeholder graph around node text n (which must name "x" as its input or be "x"). */
#define GRAPH1(n) G_HEAD n "," G_OUT("x") "]}"
#define TENSOR_2x3 "{\"dtype\":\"float32\",\"shape\":[2,3],\"values\":[0,1,2,3,4,5]}"

typedef struct {
  const uint8_t *payload;
  size_t payload_len;
  const vl_limits *lim;
} call_opts;

static vl_status call_doc(const char *method, const cJSON *params, const call_opts *o,
                          vl_error *err) {
  cJSON *res = NULL;
  vl_buf out = {0};
  vl_call_stats stats;
  vl_error_clear(err);
  vl_status st = vl_service_call(method, params, o ? o->payload : NULL, o ? o->payload_len : 0,
                                 o ? o->lim : NULL, &res, &out, &stats, err);
  if (st != VL_OK) assert_null(res);
  cJSON_Delete(res);
  vl_buf_free(&out);
  return st;
}

static void check_error(const char *what, vl_status st, const vl_error *err, vl_status code,
                        const char *path) {
  if (st != code || err->code != code || strcmp(err->path, path) != 0)
    fail_msg("%.300s\n got  %s %s: %s\n want %s %s", what, vl_status_kind(st), err->path,
             err->message, vl_status_kind(code), path);
  assert_true(err->message[0] != '\0');
  assert_null(strchr(err->message, '\n'));
}

/* Calls method with params given as JSON text (parsed the way the daemon parses requests). */
static void expect_with(const char *method, const char *params, const call_opts *o, vl_status code,
                        const char *path) {
  cJSON *doc = cJSON_ParseWithLength(params, strlen(params));
  if (doc == NULL) fail_msg("test params do not parse: %.300s", params);
  vl_error err;
  vl_status st = call_doc(method, doc, o, &err);
  check_error(params, st, &err, code, path);
  cJSON_Delete(doc);
}

static void expect(const char *method, const char *params, vl_status code, const char *path) {
  expect_with(method, params, NULL, code, path);
}

static void expect_ok_with(const char *method, const char *params, const call_opts *o) {
  cJSON *doc = cJSON_Parse(params);
  assert_non_null(doc);
  vl_error err;
  vl_status st = call_doc(method, doc, o, &err);
  if (st != VL_OK)
    fail_msg("%.300s\n got %s %s: %s", params, vl_status_kind(st), err.path, err.message);
  cJSON_Delete(doc);
}

/* view_copy of one tensor (text) to size [-1]. */
static void expect_tensor(const char *tensor, vl_status code, const char *path) {
  char params[4096];
  snprintf(params, sizeof params, "{\"input\":%s,\"size\":[-1]}", tensor);
  expect("view_copy", params, code, path);
}

/* validate of a graph given as text. */
static void expect_graph(const char *graph, vl_status code, const char *path) {
  size_t n = strlen(graph) + 32;
  char *params = malloc(n);
  assert_non_null(params);
  snprintf(params, n, "{\"graph\":%s}", graph);
  expect("validate", params, code, path);
  free(params);
}

static double seconds_since(const struct timespec *t0) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* ---------------------------------------------------------------- size arithmetic */

static void shape_whose_element_count_overflows_is_an_invalid_tensor(void **state) {
  (void)state;
  /* 2^32 * 2^32 elements: the element count itself overflows 64 bits. */
  expect_tensor("{\"dtype\":\"float32\",\"shape\":[4294967296,4294967296],\"values\":[]}",
                VL_ERR_INVALID_TENSOR, "/input/shape");
}

static void shape_whose_byte_size_overflows_is_an_invalid_tensor(void **state) {
  (void)state;
  /* 2^62 elements fit in int64; times 8 bytes they do not. */
  expect_tensor("{\"dtype\":\"float64\",\"shape\":[2147483648,2147483648],\"values\":[]}",
                VL_ERR_INVALID_TENSOR, "/input/shape");
  /* 2^62 int16 elements are exactly 2^63 bytes, one past the largest 63-bit size; as int8
   * they are 2^62 bytes, a valid size far over the limit. */
  expect_tensor("{\"dtype\":\"int16\",\"shape\":[2147483648,2147483648],\"values\":[]}",
                VL_ERR_INVALID_TENSOR, "/input/shape");
  expect_tensor("{\"dtype\":\"int8\",\"shape\":[2147483648,2147483648],\"values\":[]}",
                VL_ERR_TOO_LARGE, "/input/shape");
}

static void graph_value_whose_byte_size_overflows_names_the_shape(void **state) {
  (void)state;
  expect_graph(GRAPH1("{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"int64\","
                      "\"shape\":[2147483648,2147483648]}}"),
               VL_ERR_INVALID_GRAPH, "/graph/nodes/0/val/shape");
}

#define T40 "1099511627776" /* 2^40 */

/* Calls method and returns its result printed (caller frees); fails the test on an error. */
static char *result_text(const char *method, const char *params, const call_opts *o) {
  cJSON *doc = cJSON_Parse(params), *res = NULL;
  assert_non_null(doc);
  vl_buf out = {0};
  vl_error err;
  vl_status st = vl_service_call(method, doc, o ? o->payload : NULL, o ? o->payload_len : 0, NULL,
                                 &res, &out, NULL, &err);
  if (st != VL_OK) fail_msg("%.300s\n got %s %s: %s", params, vl_status_kind(st), err.path, err.message);
  char *text = cJSON_PrintUnformatted(res);
  cJSON_Delete(res);
  cJSON_Delete(doc);
  vl_buf_free(&out);
  return text;
}

static void assert_result(const char *method, const char *params, const call_opts *o,
                          const char *want) {
  char *got = result_text(method, params, o);
  if (strcmp(got, want) != 0) fail_msg("%.300s\n got  %s\n want %s", params, got, want);
  free(got);
}

/* An empty tensor whose other sizes multiply past 63 bits: its strides once overflowed a signed
 * multiply (undefined behaviour, a sanitizer abort). Such a stride addresses no element and
 * saturates at INT64_MAX; every entry point (values, base64, blob, execute, a graph val given
 * by strides) accepts the tensor. */
static void empty_tensor_with_strides_past_63_bits_is_served(void **state) {
  (void)state;
  vl_spec s;
  int64_t shape[3] = {0, INT64_C(1) << 40, INT64_C(1) << 40}, st[VL_MAX_RANK], n = -1;
  vl_spec_init(&s, VL_DTYPE_FLOAT32, 3, shape);
  vl_layout_strides(&s, st);
  assert_int_equal(st[0], INT64_MAX);
  assert_int_equal(st[1], INT64_C(1) << 40);
  assert_int_equal(st[2], 1);
  /* [2^40, 2^40, 0] is as empty as [0, 2^40, 2^40]: the product of the sizes before the zero
   * does not make it "overflow 63 bits". */
  int64_t last0[3] = {INT64_C(1) << 40, INT64_C(1) << 40, 0};
  vl_spec_init(&s, VL_DTYPE_FLOAT32, 3, last0);
  assert_true(vl_spec_numel(&s, &n));
  assert_int_equal(n, 0);
  uint8_t rev[3] = {2, 1, 0};
  memcpy(s.dim_order, rev, 3);
  vl_layout_strides(&s, st);
  assert_int_equal(st[0], 1);
  assert_int_equal(st[1], INT64_C(1) << 40);
  assert_int_equal(st[2], INT64_MAX);
  assert_true(vl_layout_is_contiguous(&s));

  assert_result("view_copy",
                "{\"input\":{\"dtype\":\"float32\",\"shape\":[0," T40 "," T40 "],\"values\":[]},"
                "\"size\":[" T40 ",0," T40 "],\"out_dim_order\":[2,1,0]}",
                NULL,
                "{\"output\":{\"dtype\":\"float32\",\"shape\":[" T40 ",0," T40 "],"
                "\"dim_order\":[2,1,0],\"values\":[]}}");
  assert_result("view_copy",
                "{\"input\":{\"dtype\":\"int16\",\"shape\":[" T40 "," T40 ",0],"
                "\"dim_order\":[2,1,0],\"data\":\"\"},\"size\":[0," T40 "," T40 "],"
                "\"encoding\":\"base64\"}",
                NULL,
                "{\"output\":{\"dtype\":\"int16\",\"shape\":[0," T40 "," T40 "],"
                "\"dim_order\":[0,1,2],\"data\":\"\"}}");
  static const uint8_t payload[1] = {0};
  call_opts blob = {payload, 0, NULL};
  assert_result("view_copy",
                "{\"input\":{\"dtype\":\"uint8\",\"shape\":[0," T40 "," T40 "],"
                "\"blob\":{\"offset\":0,\"nbytes\":0}},\"size\":[" T40 "," T40 ",0],"
                "\"out_dim_order\":[1,2,0],\"encoding\":\"blob\"}",
                &blob,
                "{\"output\":{\"dtype\":\"uint8\",\"shape\":[" T40 "," T40 ",0],"
                "\"dim_order\":[1,2,0],\"blob\":{\"offset\":0,\"nbytes\":0}}}");
  const char *graph =
      "{\"format\":\"viewlower.graph\",\"version\":1,\"nodes\":["
      "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\","
      "\"shape\":[0," T40 "," T40 "],\"strides\":[1," T40 ",1]}},"
      "{\"name\":\"p\",\"op\":\"call_function\",\"target\":\"aten.permute_copy.default\","
      "\"args\":[\"x\",[2,1,0]],\"val\":{\"dtype\":\"float32\",\"shape\":[" T40 "," T40 ",0]}},"
      "{\"name\":\"v\",\"op\":\"call_function\",\"target\":\"aten.view_copy.default\","
      "\"args\":[\"p\",[" T40 ",0," T40 "]],\"val\":{\"dtype\":\"float32\","
      "\"shape\":[" T40 ",0," T40 "]}},"
      "{\"name\":\"r\",\"op\":\"call_function\",\"target\":\"aten.relu.default\","
      "\"args\":[\"v\"],\"val\":{\"dtype\":\"float32\",\"shape\":[" T40 ",0," T40 "]}},"
      "{\"name\":\"out\",\"op\":\"output\",\"args\":[\"r\",\"p\"]}]}";
  char params[4096];
  snprintf(params, sizeof params,
           "{\"graph\":%s,\"inputs\":{\"x\":{\"dtype\":\"float32\",\"shape\":[0," T40 "," T40
           "],\"dim_order\":[1,2,0],\"values\":[]}}}",
           graph);
  assert_result("execute", params, NULL,
                "{\"outputs\":[{\"dtype\":\"float32\",\"shape\":[" T40 ",0," T40 "],"
                "\"dim_order\":[0,1,2],\"values\":[]},{\"dtype\":\"float32\",\"shape\":[" T40
                "," T40 ",0],\"dim_order\":[0,1,2],\"values\":[]}]}");
  snprintf(params, sizeof params, "{\"graph\":%s}", graph);
  char *lowered = result_text("lower", params, NULL);
  assert_non_null(strstr(lowered, "\"shape\":[0," T40 "," T40 "],\"dim_order\":[0,1,2]"));
  free(lowered);
  char *verified = result_text("verify", params, NULL);
  assert_non_null(strstr(verified, "\"equal\":true"));
  free(verified);
}

/* The slice, select and unsqueeze maps on such an empty tensor: the offset a slice or select
 * moves to, and the extent unsqueeze takes as its new stride, multiplied past 63 bits (a
 * sanitizer abort on a graph that PyTorch runs). An empty tensor's offset stays where it was
 * and the stride saturates; a slice step past the dim's extent (one element left) keeps the
 * input's stride rather than failing, and its size no longer overflows on the way. */
static void layout_maps_of_huge_empty_tensors_and_huge_steps_stay_defined(void **state) {
  (void)state;
  const int64_t t40 = INT64_C(1) << 40, start = t40 - 1;
  vl_desc in = {.rank = 3, .offset = 5, .shape = {0, t40, t40}}, out;
  vl_layout_default_strides(3, in.shape, in.strides);
  assert_true(vl_desc_slice(&in, 1, &start, NULL, 1, &out));
  assert_int_equal(out.offset, 5);
  assert_int_equal(out.shape[1], 1);
  assert_int_equal(out.strides[1], t40);
  assert_true(vl_desc_select(&in, 1, start, &out));
  assert_int_equal(out.rank, 2);
  assert_int_equal(out.offset, 5);
  assert_true(vl_desc_unsqueeze(&in, 1, &out));
  assert_int_equal(out.rank, 4);
  assert_int_equal(out.shape[1], 1);
  assert_int_equal(out.strides[1], INT64_MAX);
  /* a non-empty [2, 3]: a step of INT64_MAX leaves one row, at the input's stride */
  vl_desc small = {.rank = 2, .offset = 0, .shape = {2, 3}, .strides = {3, 1}};
  assert_true(vl_desc_slice(&small, 0, NULL, NULL, INT64_MAX, &out));
  assert_int_equal(out.shape[0], 1);
  assert_int_equal(out.strides[0], 3);
  assert_int_equal(out.offset, 0);
  const int64_t one = 1;
  assert_true(vl_desc_slice(&small, 1, &one, NULL, INT64_MAX, &out));
  assert_int_equal(out.shape[1], 1);
  assert_int_equal(out.offset, 1);
  const char *graph =
      "{\"graph\":{\"format\":\"viewlower.graph\",\"version\":1,\"nodes\":["
      "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\","
      "\"shape\":[0," T40 "," T40 "]}},"
      "{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"aten.slice_copy.Tensor\","
      "\"args\":[\"x\",1,1099511627775],\"val\":{\"dtype\":\"float32\",\"shape\":[0,1," T40 "]}},"
      "{\"name\":\"s\",\"op\":\"call_function\",\"target\":\"aten.select_copy.int\","
      "\"args\":[\"x\",1,-1],\"val\":{\"dtype\":\"float32\",\"shape\":[0," T40 "]}},"
      "{\"name\":\"u\",\"op\":\"call_function\",\"target\":\"aten.unsqueeze_copy.default\","
      "\"args\":[\"x\",1],\"val\":{\"dtype\":\"float32\",\"shape\":[0,1," T40 "," T40 "]}},"
      "{\"name\":\"z\",\"op\":\"call_function\",\"target\":\"aten.relu.default\","
      "\"args\":[\"y\"],\"val\":{\"dtype\":\"float32\",\"shape\":[0,1," T40 "]}},"
      "{\"name\":\"out\",\"op\":\"output\",\"args\":[\"z\",\"s\",\"u\"]}]}}";
  char *verified = result_text("verify", graph, NULL);
  assert_non_null(strstr(verified, "{\"equal\":true,"));
  free(verified);
}

static void tensor_over_the_byte_limit_is_refused_before_reading_values(void **state) {
  (void)state;
  /* 2^40 float32 = 4 TiB: fits 63 bits, far over the 1 GiB limit; one value given. */
  expect_tensor("{\"dtype\":\"float32\",\"shape\":[1099511627776],\"values\":[1]}",
                VL_ERR_TOO_LARGE, "/input/shape");
  vl_limits lim;
  vl_limits_default(&lim);
  lim.max_tensor_bytes = 16;
  call_opts o = {NULL, 0, &lim};
  expect_with("view_copy",
              "{\"input\":{\"dtype\":\"int8\",\"shape\":[17],\"data\":\"\"},"
              "\"size\":[-1]}",
              &o, VL_ERR_TOO_LARGE, "/input/shape");
}

static void view_size_whose_product_overflows_is_a_kernel_error(void **state) {
  (void)state;
  expect("view_copy", "{\"input\":" TENSOR_2x3 ",\"size\":[4294967296,4294967296,4294967296]}",
         VL_ERR_KERNEL, "/size");
  expect("view_copy", "{\"input\":" TENSOR_2x3 ",\"size\":[9007199254740992,-1]}", VL_ERR_KERNEL,
         "/size");
}

static void execution_over_the_total_byte_limit_is_too_large(void **state) {
  (void)state;
  vl_limits lim;
  vl_limits_default(&lim);
  lim.max_total_bytes = 40; /* x (24 bytes) fits; x + y (48 bytes) does not */
  call_opts o = {NULL, 0, &lim};
  expect_with("execute",
              "{\"graph\":" G_HEAD G_X ",{\"name\":\"y\",\"op\":\"call_function\","
              "\"target\":\"aten.relu.default\",\"args\":[\"x\"],\"val\":{\"dtype\":\"float32\","
              "\"shape\":[2,3]}}," G_OUT("y") "]},\"inputs\":{\"x\":" TENSOR_2x3 "}}",
              &o, VL_ERR_TOO_LARGE, "/graph/nodes/1");
}

/* ---------------------------------------------------------------- blobs */

static void blob_offset_plus_nbytes_overflowing_is_refused(void **state) {
  (void)state;
  uint8_t payload[48] = {0};
  call_opts o = {payload, sizeof payload, NULL};
  expect_with("view_copy",
              "{\"input\":{\"dtype\":\"float32\",\"shape\":[2,3],\"blob\":{\"offset\":"
              "\"9223372036854775800\",\"nbytes\":24}},\"size\":[-1]}",
              &o, VL_ERR_INVALID_TENSOR, "/input/blob/offset");
}

static void blob_outside_the_payload_is_refused(void **state) {
  (void)state;
  uint8_t payload[32] = {0};
  call_opts o = {payload, sizeof payload, NULL};
  expect_with("view_copy",
              "{\"input\":{\"dtype\":\"float32\",\"shape\":[2,3],\"blob\":{\"offset\":16,"
              "\"nbytes\":24}},\"size\":[-1]}",
              &o, VL_ERR_INVALID_TENSOR, "/input/blob/offset");
  /* No payload at all. */
  expect("view_copy",
         "{\"input\":{\"dtype\":\"float32\",\"shape\":[2,3],\"blob\":{\"offset\":0,"
         "\"nbytes\":24}},\"size\":[-1]}",
         VL_ERR_INVALID_TENSOR, "/input/blob/offset");
  /* Exactly at the end is fine. */
  expect_ok_with("view_copy",
                 "{\"input\":{\"dtype\":\"float32\",\"shape\":[2,3],\"blob\":{\"offset\":8,"
                 "\"nbytes\":24}},\"size\":[-1]}",
                 &o);
}

static void blob_with_bad_fields_is_refused(void **state) {
  (void)state;
  uint8_t payload[64] = {0};
  call_opts o = {payload, sizeof payload, NULL};
  static const struct {
    const char *blob;
    const char *path;
  } cases[] = {
      {"{\"offset\":-8,\"nbytes\":24}", "/input/blob/offset"},
      {"{\"offset\":1.5,\"nbytes\":24}", "/input/blob/offset"},
      {"{\"offset\":1e300,\"nbytes\":24}", "/input/blob/offset"},
      {"{\"offset\":0,\"nbytes\":23}", "/input/blob/nbytes"},
      {"{\"offset\":0,\"nbytes\":\"24x\"}", "/input/blob/nbytes"},
      {"{\"offset\":0}", "/input/blob/nbytes"},
      {"{\"offset\":0,\"nbytes\":24,\"extra\":1}", "/input/blob/extra"},
      {"[0,24]", "/input/blob"},
  };
  char params[512];
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    snprintf(params, sizeof params,
             "{\"input\":{\"dtype\":\"float32\",\"shape\":[2,3],\"blob\":%s},\"size\":[-1]}",
             cases[i].blob);
    expect_with("view_copy", params, &o, VL_ERR_INVALID_TENSOR, cases[i].path);
  }
}

/* ---------------------------------------------------------------- rank */

static void rank_17_is_refused_everywhere(void **state) {
  (void)state;
  expect_tensor("{\"dtype\":\"uint8\",\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"
                "\"values\":[7]}",
                VL_ERR_INVALID_TENSOR, "/input/shape");
  expect_graph(GRAPH1("{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"uint8\","
                      "\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}}"),
               VL_ERR_INVALID_GRAPH, "/graph/nodes/0/val/shape");
  expect("view_copy", "{\"input\":" TENSOR_2x3 ",\"size\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,6]}",
         VL_ERR_KERNEL, "/size");
  /* Rank 16 is the maximum and works. */
  expect_ok_with("view_copy",
                 "{\"input\":" TENSOR_2x3 ",\"size\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,-1]}", NULL);
}

/* ---------------------------------------------------------------- node counts */

static void graph_over_a_small_node_limit_is_too_large(void **state) {
  (void)state;
  vl_limits lim;
  vl_limits_default(&lim);
  lim.max_nodes = 2;
  call_opts o = {NULL, 0, &lim};
  expect_ok_with("validate", "{\"graph\":" G_HEAD G_X "," G_OUT("x") "]}}", &o);
  expect_with("lower",
              "{\"graph\":" G_HEAD G_X ",{\"name\":\"y\",\"op\":\"call_function\","
              "\"target\":\"aten.relu.default\",\"args\":[\"x\"],\"val\":{\"dtype\":\"float32\","
              "\"shape\":[2,3]}}," G_OUT("y") "]}}",
              &o, VL_ERR_TOO_LARGE, "/graph/nodes");
}

/* Appends node i of a chain: a placeholder first, then relu of the previous node. Names,
 * targets and specs are shared references, so the tree costs a few cJSON items per node. */
static void add_chain_node(cJSON *nodes, uint32_t i, cJSON *spec) {
  char name[16], prev[16];
  snprintf(name, sizeof name, "n%u", i);
  snprintf(prev, sizeof prev, "n%u", i ? i - 1 : 0);
  cJSON *n = cJSON_CreateObject();
  assert_non_null(n);
  cJSON_AddItemToObjectCS(n, "name", cJSON_CreateString(name));
  if (i == 0) {
    cJSON_AddItemToObjectCS(n, "op", cJSON_CreateStringReference("placeholder"));
  } else {
    cJSON_AddItemToObjectCS(n, "op", cJSON_CreateStringReference("call_function"));
    cJSON_AddItemToObjectCS(n, "target", cJSON_CreateStringReference("aten.relu.default"));
    cJSON *args = cJSON_CreateArray();
    cJSON_AddItemToArray(args, cJSON_CreateString(prev));
    cJSON_AddItemToObjectCS(n, "args", args);
  }
  cJSON_AddItemReferenceToObject(n, "val", spec);
  assert_true(cJSON_AddItemToArray(nodes, n));
}

static cJSON *chain_graph(uint32_t count, cJSON *spec) {
  cJSON *g = cJSON_CreateObject();
  cJSON_AddStringToObject(g, "format", "viewlower.graph");
  cJSON_AddNumberToObject(g, "version", 1);
  cJSON *nodes = cJSON_AddArrayToObject(g, "nodes");
  assert_non_null(nodes);
  for (uint32_t i = 0; i + 1 < count; i++) add_chain_node(nodes, i, spec);
  cJSON *out = cJSON_CreateObject();
  cJSON_AddStringToObject(out, "name", "out");
  cJSON_AddStringToObject(out, "op", "output");
  cJSON *args = cJSON_AddArrayToObject(out, "args");
  char last[16];
  snprintf(last, sizeof last, "n%u", count - 2);
  cJSON_AddItemToArray(args, cJSON_CreateString(last));
  cJSON_AddItemToArray(nodes, out);
  return g;
}

static void million_and_one_node_graph_is_refused_quickly(void **state) {
  (void)state;
  cJSON *spec = cJSON_Parse("{\"dtype\":\"bool\",\"shape\":[]}");
  cJSON *params = cJSON_CreateObject();
  cJSON_AddItemToObject(params, "graph", chain_graph(1000001, spec));
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  vl_error err;
  vl_status st = call_doc("lower", params, NULL, &err);
  double secs = seconds_since(&t0);
  check_error("1,000,001 nodes", st, &err, VL_ERR_TOO_LARGE, "/graph/nodes");
  /* Refused by counting, before any per-node work (generous bound for sanitizer builds). */
  if (secs > 1.0) fail_msg("refusing 1,000,001 nodes took %.3f s", secs);
  cJSON_Delete(params);
  cJSON_Delete(spec);
}

/* ---------------------------------------------------------------- many placeholders */

/* 50,000 uint8 placeholders, every one given a value, and every one listed in the output:
 * each placeholder found its value with a linear search of the inputs (and each input was
 * checked against a linear search of the placeholders), so 80,000 took 40 s to execute and
 * 157 s to verify on one worker; now names are sorted once. */
static void many_placeholders_with_inputs_run_in_linear_time(void **state) {
  (void)state;
  enum { N = 50000 };
  cJSON *params = cJSON_CreateObject(), *g = cJSON_AddObjectToObject(params, "graph");
  cJSON_AddStringToObject(g, "format", "viewlower.graph");
  cJSON_AddNumberToObject(g, "version", 1);
  cJSON *nodes = cJSON_AddArrayToObject(g, "nodes");
  cJSON *inputs = cJSON_AddObjectToObject(params, "inputs");
  cJSON *spec = cJSON_Parse("{\"dtype\":\"uint8\",\"shape\":[1]}"), *value = cJSON_Parse("{\"dtype\":\"uint8\",\"shape\":[1],"
                                                          "\"values\":[7]}");
  cJSON *out = cJSON_CreateObject(), *args = cJSON_AddArrayToObject(out, "args");
  for (uint32_t i = 0; i < N; i++) {
    char name[16];
    snprintf(name, sizeof name, "x%u", (unsigned)(N - 1 - i)); /* not in sorted order */
    cJSON *n = cJSON_CreateObject();
    cJSON_AddStringToObject(n, "name", name);
    cJSON_AddItemToObjectCS(n, "op", cJSON_CreateStringReference("placeholder"));
    cJSON_AddItemReferenceToObject(n, "val", spec);
    cJSON_AddItemToArray(nodes, n);
    cJSON_AddItemReferenceToObject(inputs, name, value);
    cJSON_AddItemToArray(args, cJSON_CreateString(name));
  }
  cJSON_AddStringToObject(out, "name", "out");
  cJSON_AddStringToObject(out, "op", "output");
  cJSON_AddItemToArray(nodes, out);
  const char *methods[] = {"execute", "verify"};
  for (size_t k = 0; k < 2; k++) {
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    vl_error err;
    vl_status st = call_doc(methods[k], params, NULL, &err);
    if (st != VL_OK) fail_msg("%s: %s %s", methods[k], err.path, err.message);
    double secs = seconds_since(&t0);
    /* linear: well under a second optimised (generous for sanitizer builds on a busy machine) */
    if (secs > 20.0) fail_msg("%s of %d placeholders took %.3f s", methods[k], N, secs);
  }
  cJSON_Delete(params);
  cJSON_Delete(spec);
  cJSON_Delete(value);
}

/* ---------------------------------------------------------------- colliding names */

/* 2^BLOCKS names, "n" then BLOCKS blocks of 6 letters, whose FNV-1a hashes all agree in their
 * low 32 bits (the 64-bit hash when wide, the 32-bit one otherwise): the low 32 bits of FNV-1a's
 * state depend only on the low 32 bits before, so one pair of blocks that collide from the
 * state at block j collides whichever blocks came before, and every choice of one block of each
 * pair gives the same hash. Each pair is found by a birthday search. The tables of names (the
 * parser's) and of interned strings (the store's) were keyed by these hashes: every insert
 * probed past every earlier name. Caller frees the one allocation. */
enum { BLOCKS = 17, BLOCK = 6, COLLIDING = 1 << BLOCKS, NAME_LEN = 1 + BLOCKS * BLOCK };

static uint32_t fnv_step(uint32_t h, uint32_t prime, const char *b, size_t n) {
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)b[i]) * prime;
  return h;
}

static char *fnv_colliding_names(bool wide) {
  /* the low 32 bits of the parser's 64-bit basis (1469598103934665603) and prime, or the
   * store's 32-bit ones */
  uint32_t h = wide ? 0x739d0383u : 2166136261u, prime = wide ? 0x1b3u : 16777619u;
  enum { SLOTS = 1 << 19 };
  uint32_t *seen_hash = malloc(SLOTS * sizeof *seen_hash);
  char (*seen)[BLOCK] = malloc(SLOTS * sizeof *seen), pairs[BLOCKS][2][BLOCK];
  char *names = malloc((size_t)COLLIDING * (NAME_LEN + 1));
  assert_true(seen_hash && seen && names);
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  h = fnv_step(h, prime, "n", 1);
  for (int j = 0; j < BLOCKS; j++) {
    memset(seen, 0, SLOTS * sizeof *seen);
    bool found = false;
    for (uint32_t tries = 0; !found && tries < SLOTS / 2; tries++) {
      char b[BLOCK];
      for (int c = 0; c < BLOCK; c++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        b[c] = (char)('a' + (rng >> 33) % 26);
      }
      uint32_t v = fnv_step(h, prime, b, BLOCK), i = (v * 2654435769u) >> 13;
      while (seen[i][0] != 0 && seen_hash[i] != v) i = (i + 1) & (SLOTS - 1);
      if (seen[i][0] != 0 && memcmp(seen[i], b, BLOCK) != 0) {
        memcpy(pairs[j][0], seen[i], BLOCK);
        memcpy(pairs[j][1], b, BLOCK);
        found = true;
      }
      memcpy(seen[i], b, BLOCK);
      seen_hash[i] = v;
    }
    assert_true(found);
    h = fnv_step(h, prime, pairs[j][0], BLOCK);
  }
  for (uint32_t k = 0; k < COLLIDING; k++) {
    char *n = names + (size_t)k * (NAME_LEN + 1);
    n[0] = 'n';
    for (int j = 0; j < BLOCKS; j++) memcpy(n + 1 + j * BLOCK, pairs[j][(k >> j) & 1], BLOCK);
    n[NAME_LEN] = '\0';
  }
  free(seen_hash);
  free(seen);
  return names;
}

static void validate_within(const char *what, cJSON *params, double bound) {
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  vl_error err;
  vl_status st = call_doc("validate", params, NULL, &err);
  double secs = seconds_since(&t0);
  if (st != VL_OK) fail_msg("%s: %s %s", what, err.path, err.message);
  if (secs > bound) fail_msg("validating %s took %.3f s", what, secs);
}

/* 131,072 node names whose FNV-1a hashes agree in 32 bits: 65,536 took 16 s to validate. Now
 * the parser's table hashes under a random key; the graph takes about a second. */
static void node_names_chosen_to_collide_parse_in_linear_time(void **state) {
  (void)state;
  char *names = fnv_colliding_names(true);
  cJSON *params = cJSON_CreateObject(), *g = cJSON_AddObjectToObject(params, "graph");
  cJSON_AddStringToObject(g, "format", "viewlower.graph");
  cJSON_AddNumberToObject(g, "version", 1);
  cJSON *nodes = cJSON_AddArrayToObject(g, "nodes");
  cJSON *spec = cJSON_Parse("{\"dtype\":\"uint8\",\"shape\":[1]}");
  for (uint32_t k = 0; k < COLLIDING; k++) {
    cJSON *n = cJSON_CreateObject();
    cJSON_AddItemToObjectCS(n, "name",
                            cJSON_CreateStringReference(names + (size_t)k * (NAME_LEN + 1)));
    cJSON_AddItemToObjectCS(n, "op", cJSON_CreateStringReference("placeholder"));
    cJSON_AddItemReferenceToObject(n, "val", spec);
    cJSON_AddItemToArray(nodes, n);
  }
  cJSON *out = cJSON_CreateObject(), *args = cJSON_AddArrayToObject(out, "args");
  cJSON_AddStringToObject(out, "name", "out");
  cJSON_AddStringToObject(out, "op", "output");
  cJSON_AddItemToArray(args, cJSON_CreateStringReference(names));
  cJSON_AddItemToArray(nodes, out);
  /* quadratic: minutes; keyed: well under a second optimised (generous for sanitizers) */
  validate_within("131,072 colliding node names", params, 20.0);
  cJSON_Delete(params);
  cJSON_Delete(spec);
  free(names);
}

/* The same for interned strings: 131,072 string literals in one kwarg whose 32-bit FNV-1a
 * hashes agree (65,536 took 19 s). */
static void string_literals_chosen_to_collide_intern_in_linear_time(void **state) {
  (void)state;
  char *names = fnv_colliding_names(false);
  char *graph = malloc((size_t)COLLIDING * (NAME_LEN + 3) + 1024), *at = graph;
  assert_non_null(graph);
  at += sprintf(at, "{\"graph\":" G_HEAD G_X ",{\"name\":\"c\",\"op\":\"call_function\","
                    "\"target\":\"my.op.default\",\"args\":[\"x\"],\"kwargs\":{\"names\":[");
  for (uint32_t k = 0; k < COLLIDING; k++) {
    at += sprintf(at, "%s\"%s\"", k ? "," : "", names + (size_t)k * (NAME_LEN + 1));
  }
  sprintf(at, "]},\"val\":{\"dtype\":\"float32\",\"shape\":[2,3]}}," G_OUT("c") "]}}");
  cJSON *params = cJSON_Parse(graph);
  assert_non_null(params);
  validate_within("131,072 colliding string literals", params, 20.0);
  cJSON_Delete(params);
  free(graph);
  free(names);
}

/* ---------------------------------------------------------------- memory plans */

#define U8(shape) "{\"dtype\":\"uint8\",\"shape\":" shape "}"
#define PH_U8(name, shape) "{\"name\":\"" name "\",\"op\":\"placeholder\",\"val\":" U8(shape) "}"

/* No arena holds more than 2^53 bytes. Three inputs of 2^62 bytes summed past 2^63 in the lower
 * bound (a signed overflow, a sanitizer abort) and were refused at no place; two of 2^53 bytes
 * each fit alone but not together. Both are refused before placing anything, at the node: its
 * val for one buffer too large, the position where the live total passes for the rest. */
static void a_plan_past_the_largest_arena_is_refused_at_its_node(void **state) {
  (void)state;
  const char *huge = "{\"graph\":" G_HEAD PH_U8("a", "[9007199254740992,512]") ","
      PH_U8("b", "[9007199254740992,512]") "," PH_U8("c", "[9007199254740992,512]") ","
      "{\"name\":\"out\",\"op\":\"output\",\"args\":[\"a\",\"b\",\"c\"]}]},"
      "\"options\":{\"plan\":true}}";
  const char *pair = "{\"graph\":" G_HEAD PH_U8("a", "[9007199254740992]") ","
      PH_U8("b", "[9007199254740992]") ","
      "{\"name\":\"out\",\"op\":\"output\",\"args\":[\"a\",\"b\"]}]},"
      "\"options\":{\"plan\":true}}";
  /* Live at most 15 * 2^49 bytes at a node, but no greedy placement fits the six buffers in
   * 2^53 (one does exist: the planner's tries miss it): refused at the buffer the first try
   * could not place. It read "the arena would pass 9007199254740992 bytes" with no place. */
#define CUSTOM(name, args, shape)                                                                  \
  ",{\"name\":\"" name "\",\"op\":\"call_function\",\"target\":\"custom.op.default\",\"args\":" \
  args ",\"val\":" U8(shape) "}"
  const char *frag = "{\"graph\":" G_HEAD PH_U8("n0", "[3377699720527872]")
      CUSTOM("n1", "[\"n0\"]", "[3377699720527872]") CUSTOM("n2", "[\"n0\"]", "[1688849860263936]")
      CUSTOM("n3", "[\"n2\"]", "[562949953421312]")
      CUSTOM("n4", "[\"n1\",\"n2\"]", "[1125899906842624]")
      CUSTOM("n5", "[\"n1\",\"n4\"]", "[2814749767106560]")
      ",{\"name\":\"out\",\"op\":\"output\",\"args\":[\"n5\"]}]},\"options\":{\"plan\":true}}";
#undef CUSTOM
  const struct {
    const char *method, *params, *path, *message;
  } cases[] = {
      {"lower", frag, "/graph/nodes/4",
       "no placement found keeps the arena within 9007199254740992 bytes, the largest arena: n4's "
       "buffer of 1125899906842624 bytes would end past it (the buffers live at one node need "
       "8444249301319680 bytes together)"},
      {"lower", huge, "/graph/nodes/0/val",
       "a needs a buffer of more than 9007199254740992 bytes, the largest arena"},
      {"verify", huge, "/graph/nodes/0/val",
       "a needs a buffer of more than 9007199254740992 bytes, the largest arena"},
      {"lower", pair, "/graph/nodes/0",
       "the buffers live at node a together need more than 9007199254740992 bytes, the largest "
       "arena"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    cJSON *doc = cJSON_Parse(cases[k].params);
    assert_non_null(doc);
    vl_error err;
    vl_status st = call_doc(cases[k].method, doc, NULL, &err);
    check_error(cases[k].params, st, &err, VL_ERR_TOO_LARGE, cases[k].path);
    assert_string_equal(err.message, cases[k].message);
    cJSON_Delete(doc);
  }
}

/* A chain of 2,050 buffers of 2^52 bytes plans in two of them (2^53 bytes, the largest arena);
 * one buffer each would be 2^63 + 2^52 bytes, which saturates instead of wrapping negative. */
static void a_plan_whose_naive_size_passes_63_bits_reports_it_saturated(void **state) {
  (void)state;
  cJSON *spec = cJSON_Parse(U8("[4503599627370496]"));
  cJSON *params = cJSON_CreateObject();
  cJSON_AddItemToObject(params, "graph", chain_graph(2050, spec));
  cJSON_AddItemToObject(params, "options", cJSON_Parse("{\"plan\":true}"));
  cJSON *res = NULL;
  vl_buf out = {0};
  vl_error err;
  vl_status st = vl_service_call("lower", params, NULL, 0, NULL, &res, &out, NULL, &err);
  if (st != VL_OK) fail_msg("lower: %s %s: %s", vl_status_kind(st), err.path, err.message);
  const cJSON *plan = cJSON_GetObjectItem(cJSON_GetObjectItem(res, "report"), "plan");
  const struct {
    const char *key;
    double want; /* exact as doubles */
  } figures[] = {{"arena_bytes", 9007199254740992.0},
                 {"lower_bound_bytes", 9007199254740992.0},
                 {"naive_bytes", (double)INT64_MAX},
                 {"planned", 2049},
                 {"alignment", 16}};
  for (size_t k = 0; k < sizeof figures / sizeof figures[0]; k++) {
    const cJSON *v = cJSON_GetObjectItem(plan, figures[k].key);
    if (!cJSON_IsNumber(v) || v->valuedouble != figures[k].want)
      fail_msg("%s is %.17g, want %.17g", figures[k].key, v ? v->valuedouble : -1.0,
               figures[k].want);
  }
  cJSON_Delete(res);
  vl_buf_free(&out);
  cJSON_Delete(params);
  cJSON_Delete(spec);
}

/* ---------------------------------------------------------------- nesting */

static char *nested_text(const char *head, size_t depth, const char *tail) {
  size_t n = strlen(head) + 2 * depth + strlen(tail) + 1;
  char *s = malloc(n);
  assert_non_null(s);
  char *p = s + sprintf(s, "%s", head);
  memset(p, '[', depth);
  memset(p + depth, ']', depth);
  strcpy(p + 2 * depth, tail);
  return s;
}

static void json_nested_100000_deep_is_a_parse_error(void **state) {
  (void)state;
  char *text = nested_text(G_HEAD "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":", 100000,
                           "}," G_OUT("x") "]}");
  vl_graph *g = NULL;
  vl_error err;
  vl_error_clear(&err);
  vl_status st = vl_graph_parse(text, strlen(text), NULL, &g, &err);
  check_error("graph text nested 10^5 deep", st, &err, VL_ERR_PARSE, "");
  assert_null(g);
  free(text);
}

/* A tree built with the cJSON API has no nesting limit: the core must bound its own recursion. */
static cJSON *nested_arrays(size_t depth) {
  cJSON *inner = cJSON_CreateNumber(1);
  for (size_t i = 0; i < depth; i++) {
    cJSON *a = cJSON_CreateArray();
    assert_non_null(a);
    cJSON_AddItemToArray(a, inner);
    inner = a;
  }
  return inner;
}

/* cJSON_Delete recurses once per level; unlink levels from the outside in. */
static void delete_nested(cJSON *a) {
  while (a != NULL) {
    cJSON *child = a->child;
    a->child = NULL;
    cJSON_Delete(a);
    a = child;
  }
}

static void argument_nested_100000_deep_is_an_invalid_graph(void **state) {
  (void)state;
  cJSON *params = cJSON_Parse(
      "{\"graph\":" G_HEAD G_X ",{\"name\":\"y\",\"op\":\"call_function\","
      "\"target\":\"custom.op.default\",\"args\":[\"x\"],\"val\":{\"dtype\":\"float32\","
      "\"shape\":[2,3]}}," G_OUT("y") "]}}");
  assert_non_null(params);
  cJSON *args = cJSON_GetObjectItem(
      cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(params, "graph"), "nodes"), 1),
      "args");
  cJSON *deep = nested_arrays(100000);
  cJSON_AddItemToArray(args, deep);
  vl_error err;
  vl_status st = call_doc("lower", params, NULL, &err);
  check_error("args nested 10^5 deep", st, &err, VL_ERR_TOO_LARGE, "/graph/nodes/1/args/1");
  cJSON_DetachItemViaPointer(args, deep);
  delete_nested(deep);
  /* The same in kwargs; 999 levels (within cJSON's own limit of 1000) are accepted. */
  cJSON *node =
      cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(params, "graph"), "nodes"), 1);
  cJSON *kwargs = cJSON_AddObjectToObject(node, "kwargs");
  deep = nested_arrays(100000);
  cJSON_AddItemToObject(kwargs, "k", deep);
  st = call_doc("lower", params, NULL, &err);
  check_error("kwargs nested 10^5 deep", st, &err, VL_ERR_TOO_LARGE, "/graph/nodes/1/kwargs/k");
  cJSON_DetachItemViaPointer(kwargs, deep);
  delete_nested(deep);
  deep = nested_arrays(999);
  cJSON_AddItemToObject(kwargs, "k", deep);
  st = call_doc("lower", params, NULL, &err);
  if (st != VL_OK) fail_msg("999 levels: %s: %s", err.path, err.message);
  cJSON_Delete(params);
}

static void nested_tensor_values_are_refused(void **state) {
  (void)state;
  expect_tensor("{\"dtype\":\"float32\",\"shape\":[2],\"values\":[[1],[2]]}", VL_ERR_INVALID_TENSOR,
                "/input/values/0");
}

/* ---------------------------------------------------------------- strings */

/* cJSON decodes \u0000 to a NUL that ends the C string, so "x\u0000y" would silently read as
 * "x". Only a parser of the text can see it: vl_graph_parse refuses the document. (A params
 * tree handed to vl_service_call has already lost the bytes; see the daemon's request parser.) */
static void nul_byte_in_a_node_name_is_refused(void **state) {
  (void)state;
  static const char *const texts[] = {
      GRAPH1("{\"name\":\"x\\u0000y\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\","
             "\"shape\":[2]}}"),
      G_HEAD G_X ",{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"custom.op.default\","
                 "\"args\":[\"x\"],\"kwargs\":{\"mode\":\"\\\\\\u0000\"},\"val\":{\"dtype\":"
                 "\"float32\",\"shape\":[2,3]}}," G_OUT("y") "]}",
  };
  for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
    vl_graph *g = NULL;
    vl_error err;
    vl_error_clear(&err);
    vl_status st = vl_graph_parse(texts[i], strlen(texts[i]), NULL, &g, &err);
    check_error(texts[i], st, &err, VL_ERR_PARSE, "");
    assert_non_null(strstr(err.message, "NUL"));
    assert_null(g);
  }
  /* An escaped backslash followed by "u0000" is text, not a NUL. */
  const char *ok =
      G_HEAD G_X ",{\"name\":\"y\",\"op\":\"call_function\",\"target\":"
                 "\"custom.op.default\",\"args\":[\"x\"],\"kwargs\":{\"mode\":\"\\\\u0000\"},"
                 "\"val\":{\"dtype\":\"float32\",\"shape\":[2,3]}}," G_OUT("y") "]}";
  vl_graph *g = NULL;
  vl_error err;
  assert_int_equal(vl_graph_parse(ok, strlen(ok), NULL, &g, &err), VL_OK);
  assert_string_equal(g->nodes[1].kwargs[0].value.u.s, "\\u0000");
  vl_graph_free(g);
}

static void invalid_utf8_in_a_node_name_is_refused(void **state) {
  (void)state;
  static const char *const names[] = {
      "x\xff",            /* not a UTF-8 byte */
      "\xc0\xb8",         /* overlong '8' */
      "\xe2\x82",         /* truncated sequence */
      "\xed\xa0\x80",     /* encoded surrogate */
      "\xf4\x90\x80\x80", /* beyond U+10FFFF */
  };
  char graph[512];
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    snprintf(graph, sizeof graph,
             G_HEAD "{\"name\":\"%s\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\","
                    "\"shape\":[2]}}," G_OUT("%s") "]}",
             names[i], names[i]);
    expect_graph(graph, VL_ERR_INVALID_GRAPH, "/graph/nodes/0/name");
  }
  /* Valid multi-byte names are fine. */
  expect_ok_with("validate",
                 "{\"graph\":" G_HEAD "{\"name\":\"\xce\xbb\xf0\x9f\x99\x82\",\"op\":"
                 "\"placeholder\",\"val\":{\"dtype\":\"float32\",\"shape\":[2]}},"
                 "{\"name\":\"out\",\"op\":\"output\",\"args\":[\"\xce\xbb\xf0\x9f\x99\x82\"]}]}}",
                 NULL);
}

static void invalid_utf8_in_other_kept_strings_is_refused(void **state) {
  (void)state;
  /* Strings the graph keeps and prints back must be valid UTF-8, or the response would not
   * be JSON. */
  expect_graph("{\"format\":\"viewlower.graph\",\"version\":1,\"name\":\"g\xff\",\"nodes\":[" G_X
               "," G_OUT("x") "]}",
               VL_ERR_INVALID_GRAPH, "/graph/name");
  expect_graph(G_HEAD G_X
               ",{\"name\":\"y\",\"op\":\"call_function\",\"target\":"
               "\"custom.op\xff.default\",\"args\":[\"x\"],\"val\":{\"dtype\":\"float32\","
               "\"shape\":[2,3]}}," G_OUT("y") "]}",
               VL_ERR_INVALID_GRAPH, "/graph/nodes/1/target");
  expect_graph(G_HEAD G_X ",{\"name\":\"y\",\"op\":\"call_function\",\"target\":"
                          "\"custom.op.default\",\"args\":[\"x\"],\"kwargs\":{\"mode\":\"a\xff\"},"
                          "\"val\":{\"dtype\":\"float32\",\"shape\":[2,3]}}," G_OUT("y") "]}",
               VL_ERR_INVALID_GRAPH, "/graph/nodes/1/kwargs/mode");
}

static void overlong_node_name_is_too_large(void **state) {
  (void)state;
  size_t n = 5000;
  char *name = malloc(n + 1);
  assert_non_null(name);
  memset(name, 'a', n);
  name[n] = '\0';
  size_t len = 2 * n + 512;
  char *graph = malloc(len);
  assert_non_null(graph);
  snprintf(graph, len,
           G_HEAD "{\"name\":\"%s\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\","
                  "\"shape\":[2]}}," G_OUT("%s") "]}",
           name, name);
  expect_graph(graph, VL_ERR_TOO_LARGE, "/graph/nodes/0/name");
  free(graph);
  free(name);
}

static bool utf8_one_line(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    if (*p < 0x20 || *p == 0x7F || *p == 0xC0 || *p == 0xC1 || *p >= 0xF5) return false;
    size_t n = *p < 0x80 ? 1 : *p < 0xC0 ? 0 : *p < 0xE0 ? 2 : *p < 0xF0 ? 3 : 4;
    if (n == 0) return false;
    for (size_t k = 1; k < n; k++)
      if ((p[k] & 0xC0) != 0x80) return false;
    p += n;
  }
  return true;
}

static void errors_quoting_hostile_keys_stay_one_line_of_utf8(void **state) {
  (void)state;
  /* An unknown key with a newline, one with invalid UTF-8, and one whose quote is cut by the
   * message's length limit in the middle of a character. */
  static const char *const params[] = {
      "{\"graph\":" GRAPH1(G_X) ",\"a\\nb\":1}",
      "{\"graph\":" GRAPH1(G_X) ",\"a\xff\xfe\":1}",
      "{\"graph\":" GRAPH1(G_X) ",\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                                "\xce\xbb\":1}",
  };
  for (size_t i = 0; i < sizeof params / sizeof *params; i++) {
    cJSON *doc = cJSON_Parse(params[i]);
    assert_non_null(doc);
    vl_error err;
    assert_int_equal(call_doc("lower", doc, NULL, &err), VL_ERR_INVALID_PARAMS);
    if (!utf8_one_line(err.message) || !utf8_one_line(err.path))
      fail_msg("case %zu: not one line of UTF-8: %s: %s", i, err.path, err.message);
    cJSON_Delete(doc);
  }
}

/* Two replaced views of a 2^62-byte tensor save 2^63 bytes: the report saturates. */
static void bytes_saved_saturates_instead_of_overflowing(void **state) {
  (void)state;
  const char *text =
      G_HEAD "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"int8\",\"shape\":"
             "[2147483648,2147483648]}},"
             "{\"name\":\"a\",\"op\":\"call_function\",\"target\":\"aten.view_copy.default\","
             "\"args\":[\"x\",[4294967296,1073741824]],\"val\":{\"dtype\":\"int8\",\"shape\":"
             "[4294967296,1073741824]}},"
             "{\"name\":\"b\",\"op\":\"call_function\",\"target\":\"aten.view_copy.default\","
             "\"args\":[\"x\",[1073741824,4294967296]],\"val\":{\"dtype\":\"int8\",\"shape\":"
             "[1073741824,4294967296]}},"
             "{\"name\":\"c\",\"op\":\"call_function\",\"target\":\"custom.use.default\","
             "\"args\":[\"a\",\"b\"],\"val\":{\"dtype\":\"int8\",\"shape\":[1]}}," G_OUT("c") "]}";
  vl_graph *g = NULL;
  vl_error err;
  assert_int_equal(vl_graph_parse(text, strlen(text), NULL, &g, &err), VL_OK);
  vl_lower_options o;
  vl_lower_options_default(&o);
  vl_report r;
  memset(&r, 0, sizeof r);
  assert_int_equal(vl_lower(g, &o, &r, &err), VL_OK);
  assert_int_equal(r.replaced, 2);
  assert_true(r.bytes_saved == INT64_MAX);
  vl_report_clear(&r);
  vl_graph_free(g);
}

/* ---------------------------------------------------------------- duplicate keys */

static void duplicate_keys_are_refused_at_every_level(void **state) {
  (void)state;
  expect_graph("{\"format\":\"viewlower.graph\",\"format\":\"viewlower.graph\",\"version\":1,"
               "\"nodes\":[" G_X "," G_OUT("x") "]}",
               VL_ERR_INVALID_GRAPH, "/graph/format");
  expect_graph(G_HEAD "{\"name\":\"x\",\"name\":\"x\",\"op\":\"placeholder\",\"val\":"
                      "{\"dtype\":\"float32\",\"shape\":[2]}}," G_OUT("x") "]}",
               VL_ERR_INVALID_GRAPH, "/graph/nodes/0/name");
  expect_graph(G_HEAD "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\","
                      "\"shape\":[2],\"shape\":[2]}}," G_OUT("x") "]}",
               VL_ERR_INVALID_GRAPH, "/graph/nodes/0/val/shape");
  expect_graph(G_HEAD G_X ",{\"name\":\"y\",\"op\":\"call_function\",\"target\":"
                          "\"custom.op.default\",\"args\":[\"x\"],\"kwargs\":{\"k\":1,\"k\":2},"
                          "\"val\":{\"dtype\":\"float32\",\"shape\":[2,3]}}," G_OUT("y") "]}",
               VL_ERR_INVALID_GRAPH, "/graph/nodes/1/kwargs/k");
  expect_tensor("{\"dtype\":\"float32\",\"shape\":[1],\"values\":[1],\"values\":[2]}",
                VL_ERR_INVALID_TENSOR, "/input/values");
  expect("view_copy", "{\"input\":" TENSOR_2x3 ",\"size\":[6],\"size\":[3,2]}",
         VL_ERR_INVALID_PARAMS, "/size");
  expect("lower",
         "{\"graph\":" GRAPH1(G_X) ",\"options\":{\"policy\":\"safe\","
                                   "\"policy\":\"legacy\"}}",
         VL_ERR_INVALID_PARAMS, "/options/policy");
}

/* ---------------------------------------------------------------- numbers */

static void integers_out_of_range_or_fractional_are_refused(void **state) {
  (void)state;
  static const struct {
    const char *tensor;
    const char *path;
  } cases[] = {
      {"{\"dtype\":\"float32\",\"shape\":[1e300],\"values\":[]}", "/input/shape/0"},
      {"{\"dtype\":\"float32\",\"shape\":[1.5],\"values\":[1]}", "/input/shape/0"},
      {"{\"dtype\":\"float32\",\"shape\":[9223372036854775808],\"values\":[]}", "/input/shape/0"},
      {"{\"dtype\":\"float32\",\"shape\":[\"2\"],\"values\":[1,2]}", "/input/shape/0"},
      {"{\"dtype\":\"float32\",\"shape\":[2],\"dim_order\":[0.5],\"values\":[1,2]}",
       "/input/dim_order/0"},
      {"{\"dtype\":\"int64\",\"shape\":[1],\"values\":[9.3e18]}", "/input/values/0"},
      {"{\"dtype\":\"int64\",\"shape\":[1],\"values\":[\"9223372036854775808\"]}",
       "/input/values/0"},
      /* 2^53 + 2: a JSON number beyond 2^53 (docs/format.md §4: give it as a decimal string). */
      {"{\"dtype\":\"int64\",\"shape\":[1],\"values\":[9007199254740994]}", "/input/values/0"},
      {"{\"dtype\":\"int8\",\"shape\":[1],\"values\":[128]}", "/input/values/0"},
      {"{\"dtype\":\"uint8\",\"shape\":[2],\"values\":[0,-1]}", "/input/values/1"},
      {"{\"dtype\":\"int32\",\"shape\":[1],\"values\":[1.5]}", "/input/values/0"},
      {"{\"dtype\":\"int16\",\"shape\":[1],\"values\":[\"nan\"]}", "/input/values/0"},
      {"{\"dtype\":\"bool\",\"shape\":[1],\"values\":[1]}", "/input/values/0"},
      {"{\"dtype\":\"float32\",\"shape\":[1],\"values\":[\"1.5\"]}", "/input/values/0"},
      {"{\"dtype\":\"float32\",\"shape\":[1],\"values\":[null]}", "/input/values/0"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    expect_tensor(cases[i].tensor, VL_ERR_INVALID_TENSOR, cases[i].path);
  expect_graph("{\"format\":\"viewlower.graph\",\"version\":1.5,\"nodes\":[" G_X
               "," G_OUT("x") "]}",
               VL_ERR_INVALID_GRAPH, "/graph/version");
  expect("verify", "{\"graph\":" GRAPH1(G_X) ",\"seed\":1e300}", VL_ERR_INVALID_PARAMS, "/seed");
  expect("verify", "{\"graph\":" GRAPH1(G_X) ",\"seed\":-1}", VL_ERR_INVALID_PARAMS, "/seed");
  expect("verify", "{\"graph\":" GRAPH1(G_X) ",\"seed\":0.5}", VL_ERR_INVALID_PARAMS, "/seed");
  expect("view_copy", "{\"input\":" TENSOR_2x3 ",\"size\":[6.5]}", VL_ERR_INVALID_PARAMS,
         "/size/0");
  expect("view_copy", "{\"input\":" TENSOR_2x3 ",\"size\":[1e19]}", VL_ERR_INVALID_PARAMS,
         "/size/0");
}

/* ---------------------------------------------------------------- shapes and values */

static void value_lists_that_disagree_with_the_shape_are_refused(void **state) {
  (void)state;
  /* 200,000 values for a [2,3] tensor, and 1 value for a million-element tensor: both refused
   * by counting, before anything is converted or allocated. */
  size_t n = 200000;
  char *big = malloc(2 * n + 128);
  assert_non_null(big);
  char *p = big + sprintf(big, "{\"dtype\":\"float32\",\"shape\":[2,3],\"values\":[");
  for (size_t i = 0; i < n; i++) p += sprintf(p, i ? ",0" : "0");
  strcpy(p, "]}");
  char *params = malloc(strlen(big) + 64);
  assert_non_null(params);
  sprintf(params, "{\"input\":%s,\"size\":[-1]}", big);
  expect("view_copy", params, VL_ERR_INVALID_TENSOR, "/input/values");
  free(params);
  free(big);
  expect_tensor("{\"dtype\":\"float32\",\"shape\":[1000000],\"values\":[1]}", VL_ERR_INVALID_TENSOR,
                "/input/values");
  expect_tensor("{\"dtype\":\"float32\",\"shape\":[2],\"values\":{\"0\":1}}", VL_ERR_INVALID_TENSOR,
                "/input/values");
  expect_tensor("{\"dtype\":\"float32\",\"shape\":[3],\"data\":\"AAAA\"}", VL_ERR_INVALID_TENSOR,
                "/input/data");
  expect_tensor("{\"dtype\":\"bool\",\"shape\":[3],\"data\":\"AAIA\"}", VL_ERR_INVALID_TENSOR,
                "/input/data");
  expect_tensor("{\"dtype\":\"float32\",\"shape\":[1],\"values\":[1],\"data\":\"AAAAAA==\"}",
                VL_ERR_INVALID_TENSOR, "/input/data");
}

static void negative_sizes_are_refused(void **state) {
  (void)state;
  expect_tensor("{\"dtype\":\"float32\",\"shape\":[-1],\"values\":[]}", VL_ERR_INVALID_TENSOR,
                "/input/shape/0");
  expect("view_copy", "{\"input\":" TENSOR_2x3 ",\"size\":[-2,-3]}", VL_ERR_KERNEL, "/size");
  expect("view_copy", "{\"input\":" TENSOR_2x3 ",\"size\":[-1,-1]}", VL_ERR_KERNEL, "/size");
  expect("view_copy",
         "{\"input\":{\"dtype\":\"float32\",\"shape\":[0],\"values\":[]},"
         "\"size\":[-1,0]}",
         VL_ERR_KERNEL, "/size");
  expect_graph(G_HEAD G_X ",{\"name\":\"v\",\"op\":\"call_function\",\"target\":"
                          "\"aten.view_copy.default\",\"args\":[\"x\",[-1,-1]],\"val\":{\"dtype\":"
                          "\"float32\",\"shape\":[3,2]}}," G_OUT("v") "]}",
               VL_ERR_INVALID_GRAPH, "/graph/nodes/1/args/1");
  expect_graph(G_HEAD G_X ",{\"name\":\"v\",\"op\":\"call_function\",\"target\":"
                          "\"aten.view_copy.default\",\"args\":[\"x\",[-3,-2]],\"val\":{\"dtype\":"
                          "\"float32\",\"shape\":[3,2]}}," G_OUT("v") "]}",
               VL_ERR_INVALID_GRAPH, "/graph/nodes/1/args/1");
}

static void orders_that_are_not_permutations_are_refused(void **state) {
  (void)state;
  expect_tensor("{\"dtype\":\"float32\",\"shape\":[2,3],\"dim_order\":[0,0],\"values\":[0,1,2,3,"
                "4,5]}",
                VL_ERR_INVALID_TENSOR, "/input/dim_order");
  expect_tensor("{\"dtype\":\"float32\",\"shape\":[2,3],\"dim_order\":[0,2],\"values\":[0,1,2,3,"
                "4,5]}",
                VL_ERR_INVALID_TENSOR, "/input/dim_order");
  expect_tensor("{\"dtype\":\"float32\",\"shape\":[2,3],\"dim_order\":[1],\"values\":[0,1,2,3,4,"
                "5]}",
                VL_ERR_INVALID_TENSOR, "/input/dim_order");
  expect_tensor("{\"dtype\":\"float32\",\"shape\":[2,3],\"strides\":[1,1],\"values\":[0,1,2,3,4,"
                "5]}",
                VL_ERR_INVALID_TENSOR, "/input/strides");
  expect("view_copy", "{\"input\":" TENSOR_2x3 ",\"size\":[3,2],\"out_dim_order\":[1,1]}",
         VL_ERR_KERNEL, "/out_dim_order");
  expect("view_copy", "{\"input\":" TENSOR_2x3 ",\"size\":[3,2],\"out_dim_order\":[0]}",
         VL_ERR_KERNEL, "/out_dim_order");
  /* an entry that is no dim at all is no permutation either: the kernel's error, not a
   * malformed param (protocol.md); only a non-integer is */
  expect("view_copy", "{\"input\":" TENSOR_2x3 ",\"size\":[3,2],\"out_dim_order\":[1,16]}",
         VL_ERR_KERNEL, "/out_dim_order");
  expect("view_copy", "{\"input\":" TENSOR_2x3 ",\"size\":[3,2],\"out_dim_order\":[-1,0]}",
         VL_ERR_KERNEL, "/out_dim_order");
  expect("view_copy",
         "{\"input\":" TENSOR_2x3 ",\"size\":[3,2],\"out_dim_order\":[0,1,2,3,4,5,6,7,8,9,10,11,"
         "12,13,14,15,16]}",
         VL_ERR_KERNEL, "/out_dim_order");
  expect("view_copy", "{\"input\":" TENSOR_2x3 ",\"size\":[3,2],\"out_dim_order\":[1,0.5]}",
         VL_ERR_INVALID_PARAMS, "/out_dim_order/1");
  expect("execute",
         "{\"graph\":" G_HEAD G_X ",{\"name\":\"p\",\"op\":\"call_function\",\"target\":"
         "\"aten.permute_copy.default\",\"args\":[\"x\",[0,0]],\"val\":{\"dtype\":\"float32\","
         "\"shape\":[2,2]}}," G_OUT("p") "]},\"inputs\":{\"x\":" TENSOR_2x3 "}}",
         VL_ERR_KERNEL, "/graph/nodes/1/args/1");
}

/* ---------------------------------------------------------------- requests */

static void malformed_requests_are_refused(void **state) {
  (void)state;
  expect("no_such_method", "{}", VL_ERR_UNKNOWN_METHOD, "");
  expect("stats", "{}", VL_ERR_UNKNOWN_METHOD, "");
  expect("lower", "[1]", VL_ERR_INVALID_PARAMS, "");
  expect("lower", "{}", VL_ERR_INVALID_PARAMS, "/graph");
  expect("lower", "{\"graph\":" GRAPH1(G_X) ",\"graph2\":1}", VL_ERR_INVALID_PARAMS, "/graph2");
  expect("lower", "{\"graph\":[]}", VL_ERR_INVALID_GRAPH, "/graph");
  expect("execute", "{\"graph\":" GRAPH1(G_X) ",\"encoding\":\"hex\"}", VL_ERR_INVALID_PARAMS,
         "/encoding");
  expect("execute", "{\"graph\":" GRAPH1(G_X) "}", VL_ERR_INVALID_PARAMS, "/inputs/x");
  expect("execute", "{\"graph\":" GRAPH1(G_X) ",\"inputs\":[]}", VL_ERR_INVALID_PARAMS, "/inputs");
  expect("view_copy", "{\"input\":" TENSOR_2x3 "}", VL_ERR_INVALID_PARAMS, "/size");
  expect("view_copy", "{\"size\":[6]}", VL_ERR_INVALID_PARAMS, "/input");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(shape_whose_element_count_overflows_is_an_invalid_tensor),
      cmocka_unit_test(shape_whose_byte_size_overflows_is_an_invalid_tensor),
      cmocka_unit_test(graph_value_whose_byte_size_overflows_names_the_shape),
      cmocka_unit_test(empty_tensor_with_strides_past_63_bits_is_served),
      cmocka_unit_test(layout_maps_of_huge_empty_tensors_and_huge_steps_stay_defined),
      cmocka_unit_test(tensor_over_the_byte_limit_is_refused_before_reading_values),
      cmocka_unit_test(view_size_whose_product_overflows_is_a_kernel_error),
      cmocka_unit_test(execution_over_the_total_byte_limit_is_too_large),
      cmocka_unit_test(blob_offset_plus_nbytes_overflowing_is_refused),
      cmocka_unit_test(blob_outside_the_payload_is_refused),
      cmocka_unit_test(blob_with_bad_fields_is_refused),
      cmocka_unit_test(rank_17_is_refused_everywhere),
      cmocka_unit_test(graph_over_a_small_node_limit_is_too_large),
      cmocka_unit_test(million_and_one_node_graph_is_refused_quickly),
      cmocka_unit_test(json_nested_100000_deep_is_a_parse_error),
      cmocka_unit_test(argument_nested_100000_deep_is_an_invalid_graph),
      cmocka_unit_test(nested_tensor_values_are_refused),
      cmocka_unit_test(nul_byte_in_a_node_name_is_refused),
      cmocka_unit_test(invalid_utf8_in_a_node_name_is_refused),
      cmocka_unit_test(invalid_utf8_in_other_kept_strings_is_refused),
      cmocka_unit_test(overlong_node_name_is_too_large),
      cmocka_unit_test(errors_quoting_hostile_keys_stay_one_line_of_utf8),
      cmocka_unit_test(bytes_saved_saturates_instead_of_overflowing),
      cmocka_unit_test(duplicate_keys_are_refused_at_every_level),
      cmocka_unit_test(integers_out_of_range_or_fractional_are_refused),
      cmocka_unit_test(value_lists_that_disagree_with_the_shape_are_refused),
      cmocka_unit_test(negative_sizes_are_refused),
      cmocka_unit_test(orders_that_are_not_permutations_are_refused),
      cmocka_unit_test(malformed_requests_are_refused),
      cmocka_unit_test(many_placeholders_with_inputs_run_in_linear_time),
      cmocka_unit_test(node_names_chosen_to_collide_parse_in_linear_time),
      cmocka_unit_test(string_literals_chosen_to_collide_intern_in_linear_time),
      cmocka_unit_test(a_plan_past_the_largest_arena_is_refused_at_its_node),
      cmocka_unit_test(a_plan_whose_naive_size_passes_63_bits_reports_it_saturated),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

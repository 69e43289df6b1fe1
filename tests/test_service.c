/* test_service.c - the core's service calls: where vl__service_call_lending lends the request
 * payload to a view_copy's output (a blob in its memory order read into an output in its memory
 * order) and where it copies, with the same result either way. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "viewlower/graph.h"
#include "viewlower/service.h"
#include "wire/service_internal.h"

enum { AT = 64, N = 6 }; /* the input: 6 int32 at byte 64 of the payload */

typedef struct outcome {
  vl_status status;
  cJSON *result;
  vl_buf out;
  vl_error err;
} outcome;

static int32_t payload_words[(AT + N * 4 + 16) / 4];

static const uint8_t *payload(void) {
  for (int i = 0; i < (int)(sizeof payload_words / 4); i++) {
    payload_words[i] = i - AT / 4; /* the input's elements are 0..5 */
  }
  return (const uint8_t *)payload_words;
}

/* view_copy of the [2,3] int32 at AT (stored in in_order) to size [3,2] (out_order, or NULL),
 * encoding enc, through the lending call or the plain one. */
static outcome view_copy(bool lending, const char *in_order, const char *out_order,
                         const char *enc) {
  char text[512];
  snprintf(
      text, sizeof text,
      "{\"input\":{\"dtype\":\"int32\",\"shape\":[2,3],\"dim_order\":%s,\"blob\":{\"offset\":%d,"
      "\"nbytes\":%d}},\"size\":[3,2]%s%s,\"encoding\":\"%s\"}",
      in_order, AT, N * 4, out_order ? ",\"out_dim_order\":" : "", out_order ? out_order : "", enc);
  cJSON *params = cJSON_Parse(text);
  assert_non_null(params);
  outcome o = {0};
  const uint8_t *p = payload();
  o.status = lending ? vl__service_call_lending("view_copy", params, p, sizeof payload_words, NULL,
                                                0, &o.result, &o.out, NULL, &o.err)
                     : vl_service_call("view_copy", params, p, sizeof payload_words, NULL,
                                       &o.result, &o.out, NULL, &o.err);
  cJSON_Delete(params);
  return o;
}

/* The result as text, compared whole. */
static void assert_result_text(const outcome *o, const char *want) {
  char *text = cJSON_PrintUnformatted(o->result);
  assert_non_null(text);
  assert_string_equal(text, want);
  free(text);
}

static const char blob_result[] = "{\"output\":{\"dtype\":\"int32\",\"shape\":[3,2],\"dim_order\":["
                                  "0,1],\"blob\":{\"offset\":0,\"nbytes\":24}}}";

static void assert_blob_at_zero(const outcome *o) {
  assert_result_text(o, blob_result);
  assert_int_equal(o->out.len, N * 4);
}

static void release(outcome *o) {
  cJSON_Delete(o->result);
  if (o->out.cap > 0) {
    vl_buf_free(&o->out); /* a lent payload (cap 0) is the request's, not freed here */
  }
}

/* A contiguous blob reshaped into a contiguous output: the output is the input's bytes, lent
 * (cap 0, pointing at byte 64 of the request payload); the plain call copies the same bytes. */
static void a_contiguous_reshape_lends_the_input_bytes(void **state) {
  (void)state;
  outcome lent = view_copy(true, "[0,1]", NULL, "blob");
  assert_int_equal(lent.status, VL_OK);
  assert_blob_at_zero(&lent);
  assert_int_equal(lent.out.cap, 0);
  assert_ptr_equal(lent.out.data, (const uint8_t *)payload_words + AT);
  outcome copied = view_copy(false, "[0,1]", NULL, "blob");
  assert_int_equal(copied.status, VL_OK);
  assert_blob_at_zero(&copied);
  assert_true(copied.out.cap >= N * 4);
  assert_ptr_not_equal(copied.out.data, (const uint8_t *)payload_words + AT);
  static const int32_t want[N] = {0, 1, 2, 3, 4, 5};
  assert_memory_equal(lent.out.data, want, sizeof want);
  assert_memory_equal(copied.out.data, want, sizeof want);
  release(&lent);
  release(&copied);
}

/* Where bytes move (a transposed input, a transposed output) or the output is not a blob, the
 * lending call copies: an owned payload (or none) with the elements in the output's order. */
static void a_reordering_copy_or_another_encoding_is_not_lent(void **state) {
  (void)state;
  outcome t = view_copy(true, "[1,0]", NULL, "blob"); /* logical (i,j) at physical j*2+i */
  assert_int_equal(t.status, VL_OK);
  assert_true(t.out.cap >= N * 4);
  static const int32_t from_transposed[N] = {0, 2, 4, 1, 3, 5};
  assert_memory_equal(t.out.data, from_transposed, sizeof from_transposed);
  release(&t);
  outcome o = view_copy(true, "[0,1]", "[1,0]", "blob"); /* output [3,2] stored transposed */
  assert_int_equal(o.status, VL_OK);
  assert_true(o.out.cap >= N * 4);
  static const int32_t into_transposed[N] = {0, 2, 4, 1, 3, 5};
  assert_memory_equal(o.out.data, into_transposed, sizeof into_transposed);
  release(&o);
  outcome v = view_copy(true, "[0,1]", NULL, "values");
  assert_int_equal(v.status, VL_OK);
  assert_null(v.out.data);
  assert_result_text(&v, "{\"output\":{\"dtype\":\"int32\",\"shape\":[3,2],\"dim_order\":[0,1],"
                         "\"values\":[0,1,2,3,4,5]}}");
  release(&v);
}

/* A view_copy that fails lends nothing: the size names 7 elements of 6. */
static void a_failed_view_copy_lends_nothing(void **state) {
  (void)state;
  cJSON *params = cJSON_Parse(
      "{\"input\":{\"dtype\":\"int32\",\"shape\":[2,3],\"blob\":{\"offset\":64,\"nbytes\":24}},"
      "\"size\":[7],\"encoding\":\"blob\"}");
  outcome o = {0};
  o.status = vl__service_call_lending("view_copy", params, payload(), sizeof payload_words, NULL, 0,
                                      &o.result, &o.out, NULL, &o.err);
  assert_int_equal(o.status, VL_ERR_KERNEL);
  assert_string_equal(o.err.path, "/size");
  assert_null(o.out.data);
  assert_null(o.result);
  cJSON_Delete(params);
}

/* vl__service_lends(view_copy of a blob) with the payload at p. */
static bool lends_blob(const uint8_t *p, size_t len, const char *dtype, int offset, int nbytes) {
  char text[256];
  snprintf(text, sizeof text,
           "{\"input\":{\"dtype\":\"%s\",\"shape\":[%d],\"blob\":{\"offset\":%d,"
           "\"nbytes\":%d}},\"size\":[%d],\"encoding\":\"blob\"}",
           dtype, nbytes, offset, nbytes, nbytes);
  cJSON *params = cJSON_Parse(text);
  assert_non_null(params);
  bool lends = vl__service_lends("view_copy", params, p, len, NULL);
  cJSON_Delete(params);
  return lends;
}

/* The daemon asks vl__service_lends on its event loop, so it reads the params alone: with the
 * payload's pages unreadable it still says yes for an aligned uint8 blob, and no, without
 * touching a byte, for a blob at an odd offset (the call would copy it) and for a bool blob
 * (the call checks that every byte is 0 or 1). The call itself still lends a valid bool blob. */
static void lends_reads_the_json_alone_and_refuses_work_on_the_bytes(void **state) {
  (void)state;
  enum { LEN = 1 << 16 };
  uint8_t *p = mmap(NULL, LEN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(p != MAP_FAILED);
  assert_true(lends_blob(p, LEN, "uint8", 0, LEN));
  assert_false(lends_blob(p, LEN, "uint8", 1, LEN - 1));
  assert_false(lends_blob(p, LEN, "bool", 0, LEN));
  assert_int_equal(munmap(p, LEN), 0);
  cJSON *params = cJSON_Parse(
      "{\"input\":{\"dtype\":\"bool\",\"shape\":[8],\"blob\":{\"offset\":64,\"nbytes\":8}},"
      "\"size\":[2,4],\"encoding\":\"blob\"}");
  outcome o = {0};
  o.status = vl__service_call_lending("view_copy", params, payload(), sizeof payload_words, NULL, 0,
                                      &o.result, &o.out, NULL, &o.err);
  assert_int_equal(o.status, VL_OK);
  assert_int_equal(o.out.cap, 0); /* lent: bytes 0,0,0,0,1,0,0,0 are valid bools */
  assert_ptr_equal(o.out.data, (const uint8_t *)payload_words + AT);
  release(&o);
  cJSON_Delete(params);
}

/* validate of graph given as text (a raw item) and as its tree, under max_nodes 3: both get
 * status want at path want_path with the same message. */
static void expect_raw_as_tree(const char *graph, vl_status want, const char *want_path,
                               const char *want_message) {
  vl_limits lim;
  vl_limits_default(&lim);
  lim.max_nodes = 3;
  for (int raw = 0; raw < 2; raw++) {
    cJSON *params = cJSON_CreateObject();
    cJSON *g = raw ? cJSON_CreateRaw(graph) : cJSON_Parse(graph);
    assert_non_null(g);
    cJSON_AddItemToObject(params, "graph", g);
    cJSON *result = NULL;
    vl_buf out = {0};
    vl_error err;
    vl_status st = vl_service_call("validate", params, NULL, 0, &lim, &result, &out, NULL, &err);
    assert_int_equal(st, want);
    assert_string_equal(err.path, want_path);
    assert_string_equal(err.message, want_message);
    cJSON_Delete(result);
    vl_buf_free(&out);
    cJSON_Delete(params);
  }
}

#define PLACEHOLDER(name)                                                                          \
  "{\"name\":\"" name "\",\"op\":\"placeholder\",\"kind\":\"user_input\",\"val\":{\"dtype\":"      \
  "\"float32\",\"shape\":[2]}}"

/* A raw graph is answered as its tree without building one: more nodes than the limit is the
 * tree's first refusal, before a bad node that comes earlier (counted over the text, also when
 * "nodes" is given twice: the first counts, as a tree's lookup finds it); within the limit, the
 * bad node; an unknown key with a large value, the key. */
static void a_raw_graph_gets_the_answer_of_its_tree(void **state) {
  (void)state;
  const char *over = "{\"format\":\"viewlower.graph\",\"version\":1,\"nodes\":[" PLACEHOLDER(
      "a") ",{\"name\":\"b\",\"op\":\"frobnicate\"}," PLACEHOLDER("c") "," PLACEHOLDER(
      "d") ",{\"name\":\"out\",\"op\":\"output\",\"args\":[\"a\"]}]}";
  expect_raw_as_tree(over, VL_ERR_TOO_LARGE, "/graph/nodes", "the graph has more than 3 nodes");
  const char *twice = "{\"nodes\":[1,2,3,4],\"format\":\"viewlower.graph\",\"nodes\":[]}";
  expect_raw_as_tree(twice, VL_ERR_TOO_LARGE, "/graph/nodes", "the graph has more than 3 nodes");
  const char *within = "{\"format\":\"viewlower.graph\",\"version\":1,\"nodes\":[" PLACEHOLDER(
      "a") ",{\"name\":\"b\",\"op\":\"frobnicate\"},{\"name\":\"out\",\"op\":\"output\","
           "\"args\":[\"a\"]}]}";
  vl_limits lim;
  vl_limits_default(&lim);
  lim.max_nodes = 3;
  vl_graph *g = NULL;
  vl_error want;
  assert_int_not_equal(vl_graph_parse(within, strlen(within), &lim, &g, &want), VL_OK);
  char path[VL_ERROR_PATH_MAX + 8];
  snprintf(path, sizeof path, "/graph%s", want.path);
  assert_string_equal(path, "/graph/nodes/1/op");
  expect_raw_as_tree(within, want.code, path, want.message);
  /* a key the format does not know, whose value (100,000 zeros) is not built as a tree */
  size_t n = 100000;
  char *unknown = malloc(2 * n + 64);
  assert_non_null(unknown);
  size_t at = (size_t)sprintf(unknown, "{\"x\":[");
  for (size_t i = 0; i < n; i++) at += (size_t)sprintf(unknown + at, i ? ",0" : "0");
  sprintf(unknown + at, "]}");
  expect_raw_as_tree(unknown, VL_ERR_INVALID_GRAPH, "/graph/x", "unknown key \"x\"");
  free(unknown);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_contiguous_reshape_lends_the_input_bytes),
      cmocka_unit_test(a_reordering_copy_or_another_encoding_is_not_lent),
      cmocka_unit_test(a_failed_view_copy_lends_nothing),
      cmocka_unit_test(lends_reads_the_json_alone_and_refuses_work_on_the_bytes),
      cmocka_unit_test(a_raw_graph_gets_the_answer_of_its_tree),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

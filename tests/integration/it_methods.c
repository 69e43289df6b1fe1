/* it_methods.c - every method end to end: a real viewlowerd on a temporary socket, the real
 * client library; results checked against docs/format.md and docs/protocol.md, errors mapped back
 * to statuses with their paths, a 64 MiB tensor through view_copy as a blob payload, bit-exact. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

typedef struct fixture {
  daemon_proc d;
  vl_client *c;
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  assert_non_null(f);
  daemon_prepare(&f->d);
  static const char *const args[] = {"--workers", "2", NULL};
  daemon_start(&f->d, args);
  f->c = client_open(&f->d);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  vl_client_close(f->c);
  int rc = daemon_finish(&f->d);
  free(f);
  assert_int_equal(rc, 0);
  return 0;
}

/* Calls method with params given as JSON text; asserts success. */
static cJSON *call_ok(vl_client *c, const char *method, cJSON *params) {
  cJSON *result = NULL;
  vl_error err;
  vl_status s = vl_client_call(c, method, params, NULL, 0, &result, NULL, &err);
  if (s != VL_OK) {
    fail_msg("%s: %s: %s %s", method, vl_status_kind(s), err.path, err.message);
  }
  cJSON_Delete(params);
  return result;
}

static cJSON *with_graph(const char *file, const char *extra_json) {
  cJSON *params = json(extra_json);
  assert_true(cJSON_AddItemToObject(params, "graph", example_graph(file)));
  return params;
}

static void ping_answers_pong(void **state) {
  fixture *f = *state;
  vl_error err;
  assert_int_equal(vl_client_ping(f->c, &err), VL_OK);
  cJSON *r = call_ok(f->c, "ping", NULL);
  assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "pong")));
  cJSON_Delete(r);
}

/* Large ids survive the round trip through the client library and the daemon digit for digit
 * (cJSON alone prints numbers at 15 significant digits). */
static void ids_up_to_2_pow_53_come_back_exactly(void **state) {
  fixture *f = *state;
  static const uint64_t ids[] = {VL_CLIENT_MAX_ID, VL_CLIENT_MAX_ID - 1, 5000000000000001u, 1};
  vl_error err;
  for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
    assert_int_equal(vl_client_send(f->c, ids[i], "ping", NULL, NULL, 0, &err), VL_OK);
  }
  bool seen[sizeof ids / sizeof ids[0]] = {false};
  for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
    uint64_t id = 0;
    cJSON *r = NULL;
    assert_int_equal(vl_client_recv(f->c, &id, &r, NULL, &err), VL_OK);
    size_t k = 0;
    while (k < sizeof ids / sizeof ids[0] && ids[k] != id) k++;
    if (k == sizeof ids / sizeof ids[0] || seen[k])
      fail_msg("unexpected id %llu", (unsigned long long)id);
    seen[k] = true;
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "pong")));
    cJSON_Delete(r);
  }
}

static void version_reports_the_library_version_and_protocol_1(void **state) {
  fixture *f = *state;
  vl_error err;
  char *v = NULL;
  assert_int_equal(vl_client_version(f->c, &v, &err), VL_OK);
  assert_string_equal(v, VL_VERSION_STRING);
  free(v);
  cJSON *r = call_ok(f->c, "version", NULL);
  assert_int_equal((int)json_number(r, "protocol"), 1);
  cJSON_Delete(r);
}

static void validate_returns_the_graph_with_full_specs(void **state) {
  fixture *f = *state;
  cJSON *r = call_ok(f->c, "validate", with_graph("patch_embed.json", "{}"));
  const cJSON *nodes =
      cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "graph"), "nodes");
  assert_int_equal(cJSON_GetArraySize(nodes), 5);
  const cJSON *val = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(nodes, 2), "val");
  assert_non_null(cJSON_GetObjectItemCaseSensitive(val, "dim_order"));
  cJSON_Delete(r);
}

static void lower_keeps_the_view_of_a_channels_last_base(void **state) {
  fixture *f = *state;
  vl_error err;
  cJSON *graph = example_graph("patch_embed.json"), *no_fold = json("{\"fold\": false}");
  cJSON *r = NULL;
  /* view_copy alone (fold false); with fold the flatten is a view of x itself (test_cli). */
  assert_int_equal(vl_client_lower(f->c, graph, no_fold, &r, &err), VL_OK);
  cJSON_Delete(graph);
  cJSON_Delete(no_fold);
  assert_int_equal((int)json_number(r, "report.view_copy_nodes"), 1);
  assert_int_equal((int)json_number(r, "report.replaced"), 0);
  assert_int_equal((int)json_number(r, "report.kept"), 1);
  const cJSON *d = cJSON_GetArrayItem(
      cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "report"), "decisions"),
      0);
  assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "node")), "flat");
  const cJSON *reasons = cJSON_GetObjectItemCaseSensitive(d, "reasons");
  assert_int_equal(cJSON_GetArraySize(reasons), 1);
  assert_string_equal(cJSON_GetStringValue(cJSON_GetArrayItem(reasons, 0)), "base_layout");
  cJSON_Delete(r);
}

static void lower_replaces_the_normalized_reshape_chain(void **state) {
  fixture *f = *state;
  cJSON *r = call_ok(f->c, "lower", with_graph("reshape_chain.json", "{}"));
  assert_int_equal((int)json_number(r, "report.view_copy_nodes"), 4);
  assert_int_equal((int)json_number(r, "report.normalized"), 3);
  assert_int_equal((int)json_number(r, "report.removed_dead"), 3);
  assert_int_equal((int)json_number(r, "report.replaced"), 1);
  /* With fold, the three dead views count as saved too (docs/format.md §3). */
  assert_int_equal((int)json_number(r, "report.bytes_saved"), 4 * 96);
  const cJSON *node;
  bool found = false;
  cJSON_ArrayForEach(node, cJSON_GetObjectItemCaseSensitive(
                               cJSON_GetObjectItemCaseSensitive(r, "graph"), "nodes")) {
    const char *t = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(node, "target"));
    if (t != NULL && strcmp(t, "memory.view") == 0) {
      found = true;
      assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(node, "alias_of")),
                          "x");
    }
  }
  assert_true(found);
  cJSON_Delete(r);
}

static void execute_runs_patch_embed_on_given_values(void **state) {
  fixture *f = *state;
  cJSON *r = call_ok(f->c, "execute",
                     with_graph("patch_embed.json",
                                "{\"inputs\":{\"x\":{\"dtype\":\"float32\",\"shape\":[1,2,2,3],"
                                "\"values\":[0,1,2,3,4,5,6,7,8,9,10,11]}}}"));
  const cJSON *out = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "outputs"), 0);
  const cJSON *values = cJSON_GetObjectItemCaseSensitive(out, "values");
  const double want[12] = {0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11};
  assert_int_equal(cJSON_GetArraySize(values), 12);
  for (int i = 0; i < 12; i++) {
    assert_true(cJSON_GetArrayItem(values, i)->valuedouble == want[i]);
  }
  cJSON_Delete(r);
}

static void verify_shows_the_legacy_lowering_wrong_and_the_safe_one_right(void **state) {
  fixture *f = *state;
  vl_error err;
  cJSON *graph = example_graph("patch_embed.json");
  cJSON *legacy = json("{\"policy\":\"legacy\"}");
  cJSON *r = NULL;
  assert_int_equal(vl_client_verify(f->c, graph, legacy, NULL, 7, &r, &err), VL_OK);
  assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(r, "equal")));
  assert_true(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "mismatches")) >= 1);
  cJSON_Delete(r);
  assert_int_equal(vl_client_verify(f->c, graph, NULL, NULL, 7, &r, &err), VL_OK);
  assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "equal")));
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(r, "mismatches")), 0);
  cJSON_Delete(r);
  cJSON_Delete(legacy);
  cJSON_Delete(graph);
}

static void view_copy_reshapes_values_in_logical_order(void **state) {
  fixture *f = *state;
  cJSON *r = call_ok(f->c, "view_copy",
                     json("{\"input\":{\"dtype\":\"int32\",\"shape\":[2,3],\"dim_order\":[1,0],"
                          "\"values\":[0,1,2,3,4,5]},\"size\":[3,-1]}"));
  const cJSON *out = cJSON_GetObjectItemCaseSensitive(r, "output");
  const cJSON *shape = cJSON_GetObjectItemCaseSensitive(out, "shape");
  assert_int_equal(cJSON_GetArrayItem(shape, 0)->valueint, 3);
  assert_int_equal(cJSON_GetArrayItem(shape, 1)->valueint, 2);
  const cJSON *values = cJSON_GetObjectItemCaseSensitive(out, "values");
  for (int i = 0; i < 6; i++) {
    assert_int_equal(cJSON_GetArrayItem(values, i)->valueint, i);
  }
  cJSON_Delete(r);
}

enum { BIG_SIDE = 4096, BIG_NUMEL = BIG_SIDE * BIG_SIDE }; /* 64 MiB of int32 */

/* view_copy of a [4096,4096] int32 tensor stored with dim_order in_order, flattened, with blob
 * input and output; returns the output payload. */
static void big_view_copy(vl_client *c, const uint32_t *in, const char *in_order, vl_buf *out) {
  char text[512];
  snprintf(text, sizeof text,
           "{\"input\":{\"dtype\":\"int32\",\"shape\":[%d,%d],\"dim_order\":%s,"
           "\"blob\":{\"offset\":0,\"nbytes\":%lld}},\"size\":[-1],\"encoding\":\"blob\"}",
           BIG_SIDE, BIG_SIDE, in_order, (long long)BIG_NUMEL * 4);
  cJSON *params = json(text);
  cJSON *r = NULL;
  vl_error err;
  vl_status s =
      vl_client_view_copy(c, params, (const uint8_t *)in, (size_t)BIG_NUMEL * 4, &r, out, &err);
  if (s != VL_OK) {
    fail_msg("view_copy: %s %s", err.path, err.message);
  }
  const cJSON *blob =
      cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "output"), "blob");
  assert_int_equal((long long)json_number(blob, "nbytes"), (long long)BIG_NUMEL * 4);
  assert_int_equal((long long)json_number(blob, "offset"), 0);
  assert_int_equal(out->len, (size_t)BIG_NUMEL * 4);
  cJSON_Delete(params);
  cJSON_Delete(r);
}

/* requests.served_on_loop of the fixture's daemon */
static double served_on_loop(vl_client *c) {
  cJSON *st = NULL;
  vl_error err;
  if (vl_client_stats(c, &st, &err) != VL_OK) fail_msg("stats: %s", err.message);
  double n = json_number(st, "requests.served_on_loop");
  cJSON_Delete(st);
  return n;
}

/* A contiguous blob 40 bytes into a larger payload, reshaped: the daemon answers with those
 * bytes (lent from the request, not copied: tests/test_service.c) at offset 0 of its payload,
 * on its event loop; the same connection goes on to a reordering copy, on a worker. */
static void view_copy_answers_a_reshaped_blob_with_its_own_bytes(void **state) {
  fixture *f = *state;
  double on_loop = served_on_loop(f->c);
  _Alignas(8) uint8_t payload[40 + 24 + 8];
  for (size_t i = 0; i < sizeof payload; i++) payload[i] = (uint8_t)(0xF0 ^ i);
  static const char *const orders[] = {"[0,1]", "[1,0]"};
  for (int k = 0; k < 2; k++) {
    char text[256];
    snprintf(text, sizeof text,
             "{\"input\":{\"dtype\":\"int16\",\"shape\":[3,4],\"dim_order\":%s,"
             "\"blob\":{\"offset\":40,\"nbytes\":24}},\"size\":[2,6],\"encoding\":\"blob\"}",
             orders[k]);
    cJSON *params = json(text);
    cJSON *r = NULL;
    vl_buf out = {0};
    vl_error err;
    if (vl_client_view_copy(f->c, params, payload, sizeof payload, &r, &out, &err) != VL_OK) {
      fail_msg("view_copy: %s %s", err.path, err.message);
    }
    char *got = cJSON_PrintUnformatted(r);
    assert_string_equal(got, "{\"output\":{\"dtype\":\"int16\",\"shape\":[2,6],"
                             "\"dim_order\":[0,1],\"blob\":{\"offset\":0,\"nbytes\":24}}}");
    free(got);
    assert_int_equal(out.len, 24);
    const int16_t *in = (const int16_t *)(payload + 40), *o = (const int16_t *)out.data;
    for (int e = 0; e < 12; e++) { /* logical element e = (e / 4, e % 4) of the [3,4] input */
      int phys = k == 0 ? e : (e % 4) * 3 + e / 4;
      assert_int_equal(o[e], in[phys]);
    }
    vl_buf_free(&out);
    cJSON_Delete(r);
    cJSON_Delete(params);
    assert_int_equal((int)(served_on_loop(f->c) - on_loop), 1); /* the lent one only */
  }
}

/* view_copy of a blob of 24 elements of dtype at byte offset of payload, to size [4,6]; checks
 * the output bytes and returns how much served_on_loop grew. */
static int view_copy_blob_on_loop(vl_client *c, const uint8_t *payload, size_t len,
                                  const char *dtype, int offset) {
  double before = served_on_loop(c);
  char text[256];
  snprintf(text, sizeof text,
           "{\"input\":{\"dtype\":\"%s\",\"shape\":[24],\"blob\":{\"offset\":%d,"
           "\"nbytes\":24}},\"size\":[4,6],\"encoding\":\"blob\"}",
           dtype, offset);
  cJSON *params = json(text);
  cJSON *r = NULL;
  vl_buf out = {0};
  vl_error err;
  if (vl_client_view_copy(c, params, payload, len, &r, &out, &err) != VL_OK) {
    fail_msg("view_copy: %s %s", err.path, err.message);
  }
  assert_int_equal(out.len, 24);
  assert_memory_equal(out.data, payload + offset, 24);
  vl_buf_free(&out);
  cJSON_Delete(r);
  cJSON_Delete(params);
  return (int)(served_on_loop(c) - before);
}

/* The loop answers a view_copy itself only when its work is its JSON: not for a blob at an odd
 * offset (read by copying every byte: deciding so on the loop took 0.46 s for 64 MiB) nor for a
 * bool blob (every byte checked to be 0 or 1, twice on the loop: 75 ms for 64 MiB). Both go to a
 * worker; an aligned uint8 blob is still answered on the loop. */
static void view_copy_whose_input_needs_work_on_its_bytes_runs_on_a_worker(void **state) {
  fixture *f = *state;
  _Alignas(8) uint8_t payload[64 + 24 + 8];
  for (size_t i = 0; i < sizeof payload; i++) payload[i] = (uint8_t)(i & 1);
  assert_int_equal(view_copy_blob_on_loop(f->c, payload, sizeof payload, "uint8", 41), 0);
  assert_int_equal(view_copy_blob_on_loop(f->c, payload, sizeof payload, "bool", 40), 0);
  assert_int_equal(view_copy_blob_on_loop(f->c, payload, sizeof payload, "uint8", 40), 1);
}

static void view_copy_moves_64_mib_as_blob_payload_bit_exact(void **state) {
  fixture *f = *state;
  uint32_t *in = malloc((size_t)BIG_NUMEL * 4);
  assert_non_null(in);
  for (uint32_t i = 0; i < BIG_NUMEL; i++) {
    in[i] = i * 2654435761u; /* every bit pattern class, no two neighbours alike */
  }
  vl_buf out = {0};
  big_view_copy(f->c, in, "[0,1]", &out);
  assert_memory_equal(out.data, in, (size_t)BIG_NUMEL * 4);
  out.len = 0;
  /* Stored transposed: logical element (i,j) sits at physical j*4096+i. */
  big_view_copy(f->c, in, "[1,0]", &out);
  const uint32_t *o = (const uint32_t *)out.data;
  for (uint32_t i = 0; i < BIG_SIDE; i++) {
    for (uint32_t j = 0; j < BIG_SIDE; j++) {
      if (o[i * BIG_SIDE + j] != in[j * BIG_SIDE + i]) {
        fail_msg("element (%u,%u) differs", i, j);
      }
    }
  }
  vl_buf_free(&out);
  free(in);
}

static void invalid_graph_comes_back_as_its_status_with_a_path(void **state) {
  fixture *f = *state;
  cJSON *graph = example_graph("patch_embed.json");
  cJSON *val = cJSON_GetObjectItemCaseSensitive(
      cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(graph, "nodes"), 0), "val");
  cJSON_ReplaceItemInObjectCaseSensitive(val, "dim_order", json("[0,1,1,3]"));
  vl_error err;
  cJSON *r = NULL;
  assert_int_equal(vl_client_lower(f->c, graph, NULL, &r, &err), VL_ERR_INVALID_GRAPH);
  assert_null(r);
  assert_string_equal(err.path, "/graph/nodes/0/val/dim_order");
  assert_false(vl_client_is_transport_error(err.code));
  cJSON_Delete(graph);
  assert_int_equal(vl_client_ping(f->c, &err), VL_OK);
}

/* The text calls (vl_client_send_text, vl_client_recv_text) get the answers the tree calls
 * get; a request the daemon read without a tree of its graph (vl__rpc_request_scan) is
 * answered as the strict reader answers it: a graph that is not JSON gives the parse error of
 * the whole text, small or padded past 2 MiB with whitespace (requests of any size are
 * scanned; until 2026-12-07 those past 1 MiB were read as trees). */
static void text_calls_get_the_answers_of_tree_calls(void **state) {
  fixture *f = *state;
  vl_error err;
  cJSON *graph = example_graph("patch_embed.json");
  char *gtext = cJSON_PrintUnformatted(graph);
  size_t n = strlen(gtext) + 16;
  char *params = malloc(n);
  assert_non_null(params);
  snprintf(params, n, "{\"graph\":%s}", gtext);
  uint64_t id = 0;
  char *text = NULL;
  size_t len = 0;
  assert_int_equal(vl_client_send_text(f->c, 41, "lower", params, strlen(params), NULL, 0, &err),
                   VL_OK);
  assert_int_equal(vl_client_recv_text(f->c, &id, &text, &len, NULL, &err), VL_OK);
  assert_int_equal(id, 41);
  assert_int_equal(len, strlen(text));
  cJSON *from_text = json(text), *tree = NULL;
  assert_int_equal(vl_client_lower(f->c, graph, NULL, &tree, &err), VL_OK);
  assert_true(cJSON_Compare(from_text, tree, true));
  cJSON_Delete(from_text);
  cJSON_Delete(tree);
  free(text);
  /* an error response: its status and message, no text (and since the request is no JSON,
   * id null) */
  const char *bad = "{\"graph\":{\"nodes\":[1,]}}";
  assert_int_equal(vl_client_send_text(f->c, 42, "lower", bad, strlen(bad), NULL, 0, &err), VL_OK);
  assert_int_equal(vl_client_recv_text(f->c, &id, &text, &len, NULL, &err), VL_ERR_PARSE);
  assert_int_equal(id, VL_CLIENT_NO_ID); /* not JSON: the id cannot be read */
  assert_null(text);
  char small_msg[VL_ERROR_MESSAGE_MAX];
  snprintf(small_msg, sizeof small_msg, "%s", err.message);
  size_t pad = (size_t)1 << 21;
  char *big = malloc(strlen(bad) + pad + 1);
  assert_non_null(big);
  memcpy(big, bad, strlen(bad));
  memset(big + strlen(bad), ' ', pad);
  big[strlen(bad) + pad] = '\0';
  assert_int_equal(vl_client_send_text(f->c, 43, "lower", big, strlen(big), NULL, 0, &err), VL_OK);
  assert_int_equal(vl_client_recv_text(f->c, &id, &text, &len, NULL, &err), VL_ERR_PARSE);
  assert_int_equal(id, VL_CLIENT_NO_ID);
  assert_string_equal(err.message, small_msg);
  assert_non_null(strstr(small_msg, "invalid JSON at byte "));
  free(big);
  free(params);
  free(gtext);
  cJSON_Delete(graph);
  assert_int_equal(vl_client_ping(f->c, &err), VL_OK);
}

static void kernel_and_params_errors_keep_their_kind(void **state) {
  fixture *f = *state;
  vl_error err;
  cJSON *p = json("{\"input\":{\"dtype\":\"int32\",\"shape\":[2,3],\"values\":[0,1,2,3,4,5]},"
                  "\"size\":[4,-1]}");
  assert_int_equal(vl_client_view_copy(f->c, p, NULL, 0, NULL, NULL, &err), VL_ERR_KERNEL);
  cJSON_Delete(p);
  p = json("{\"size\":[6]}");
  assert_int_equal(vl_client_view_copy(f->c, p, NULL, 0, NULL, NULL, &err), VL_ERR_INVALID_PARAMS);
  assert_string_equal(err.path, "/input");
  cJSON_Delete(p);
  cJSON *graph = json("{\"format\":\"viewlower.graph\",\"version\":1,\"nodes\":["
                      "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\","
                      "\"shape\":[2]}},{\"name\":\"y\",\"op\":\"call_function\",\"target\":"
                      "\"aten.sin.default\",\"args\":[\"x\"],\"val\":{\"dtype\":\"float32\","
                      "\"shape\":[2]}},{\"name\":\"out\",\"op\":\"output\",\"args\":[\"y\"]}]}");
  cJSON *inputs = json("{\"x\":{\"dtype\":\"float32\",\"shape\":[2],\"values\":[1,2]}}");
  assert_int_equal(vl_client_execute(f->c, graph, inputs, NULL, NULL, 0, NULL, NULL, &err),
                   VL_ERR_UNSUPPORTED);
  assert_non_null(strstr(err.message, "aten.sin.default"));
  cJSON_Delete(graph);
  cJSON_Delete(inputs);
}

static void stats_counts_requests_errors_and_savings(void **state) {
  fixture *f = *state;
  vl_error err;
  cJSON *before = NULL, *after = NULL;
  assert_int_equal(vl_client_stats(f->c, &before, &err), VL_OK);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(vl_client_ping(f->c, &err), VL_OK);
  }
  assert_int_equal(vl_client_call(f->c, "no_such_method", NULL, NULL, 0, NULL, NULL, &err),
                   VL_ERR_UNKNOWN_METHOD);
  cJSON_Delete(call_ok(f->c, "lower", with_graph("reshape_chain.json", "{}")));
  assert_int_equal(vl_client_stats(f->c, &after, &err), VL_OK);
  assert_int_equal(json_number(after, "requests.by_method.ping.requests") -
                       json_number(before, "requests.by_method.ping.requests"),
                   3);
  assert_int_equal(json_number(after, "requests.invalid.errors") -
                       json_number(before, "requests.invalid.errors"),
                   1);
  assert_int_equal(json_number(after, "requests.by_method.stats.requests") -
                       json_number(before, "requests.by_method.stats.requests"),
                   1);
  assert_int_equal(json_number(after, "views_replaced") - json_number(before, "views_replaced"), 1);
  assert_int_equal(json_number(after, "bytes_saved") - json_number(before, "bytes_saved"), 4 * 96);
  assert_int_equal((int)json_number(after, "connections.current"), 1);
  assert_true(json_number(after, "latency_us.p50") <= json_number(after, "latency_us.p90"));
  assert_true(json_number(after, "latency_us.p90") <= json_number(after, "latency_us.p99"));
  assert_true(json_number(after, "latency_us.p99") <= json_number(after, "latency_us.max"));
  assert_true(json_number(after, "uptime_ms") >= json_number(before, "uptime_ms"));
  cJSON_Delete(before);
  cJSON_Delete(after);
}

static void the_client_example_pings_and_lowers(void **state) {
  fixture *f = *state;
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    execl(CLIENT_EXAMPLE_PATH, "client_example", f->d.sock, (char *)NULL);
    _exit(127);
  }
  assert_int_equal(daemon_wait(pid, HARNESS_WAIT_MS), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(ping_answers_pong),
      cmocka_unit_test(ids_up_to_2_pow_53_come_back_exactly),
      cmocka_unit_test(version_reports_the_library_version_and_protocol_1),
      cmocka_unit_test(validate_returns_the_graph_with_full_specs),
      cmocka_unit_test(lower_keeps_the_view_of_a_channels_last_base),
      cmocka_unit_test(lower_replaces_the_normalized_reshape_chain),
      cmocka_unit_test(execute_runs_patch_embed_on_given_values),
      cmocka_unit_test(verify_shows_the_legacy_lowering_wrong_and_the_safe_one_right),
      cmocka_unit_test(view_copy_reshapes_values_in_logical_order),
      cmocka_unit_test(view_copy_answers_a_reshaped_blob_with_its_own_bytes),
      cmocka_unit_test(view_copy_whose_input_needs_work_on_its_bytes_runs_on_a_worker),
      cmocka_unit_test(view_copy_moves_64_mib_as_blob_payload_bit_exact),
      cmocka_unit_test(invalid_graph_comes_back_as_its_status_with_a_path),
      cmocka_unit_test(text_calls_get_the_answers_of_tree_calls),
      cmocka_unit_test(kernel_and_params_errors_keep_their_kind),
      cmocka_unit_test(stats_counts_requests_errors_and_savings),
      cmocka_unit_test(the_client_example_pings_and_lowers),
  };
  return harness_result(cmocka_run_group_tests(tests, setup, teardown));
}

/* test_frame.c - the wire frame header codec and the incremental decoder (docs/protocol.md,
 * "Frames"): exact header bytes, limit checks at and past the bound, every way of splitting the
 * input, and every error the decoder reports. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/json_read.h"
#include "viewlower/frame.h"
#include "wire/envelope.h"

/* Huge allocation requests must fail with NULL (tested) instead of aborting under ASan. The
 * sanitizer runtime looks the hook up dynamically, so it must be visible. */
__attribute__((visibility("default"))) const char *__asan_default_options(void);
__attribute__((visibility("default"))) const char *__asan_default_options(void) {
  return "allocator_may_return_null=1";
}

/* Builds header + json + payload into a fresh buffer; *len receives its size. */
static uint8_t *make_frame(const char *json, const uint8_t *payload, size_t payload_len,
                           size_t *len) {
  size_t json_len = strlen(json);
  *len = VL_FRAME_HEADER_SIZE + json_len + payload_len;
  uint8_t *b = malloc(*len);
  assert_non_null(b);
  vl_frame_header_encode(b, (uint32_t)json_len, payload_len);
  memcpy(b + VL_FRAME_HEADER_SIZE, json, json_len);
  if (payload_len > 0) {
    memcpy(b + VL_FRAME_HEADER_SIZE + json_len, payload, payload_len);
  }
  return b;
}

static void header_encode_writes_magic_and_big_endian_lengths(void **state) {
  (void)state;
  uint8_t h[VL_FRAME_HEADER_SIZE];
  vl_frame_header_encode(h, 0x01020304u, 0x05060708090a0b0cull);
  const uint8_t want[VL_FRAME_HEADER_SIZE] = {'V', 'L', 'W', '1', 1, 2,  3,  4,
                                              5,   6,   7,   8,   9, 10, 11, 12};
  assert_memory_equal(h, want, sizeof want);
}

static void header_decode_reads_back_the_encoded_lengths(void **state) {
  (void)state;
  uint8_t h[VL_FRAME_HEADER_SIZE];
  vl_frame_header_encode(h, UINT32_MAX, UINT64_MAX);
  vl_frame_header out;
  vl_error err;
  assert_int_equal(vl_frame_header_decode(h, &out, &err), VL_OK);
  assert_int_equal(out.json_len, UINT32_MAX);
  assert_true(out.payload_len == UINT64_MAX);
}

static void header_decode_rejects_a_bad_magic(void **state) {
  (void)state;
  uint8_t h[VL_FRAME_HEADER_SIZE];
  vl_frame_header_encode(h, 2, 0);
  h[3] = '2';
  vl_frame_header out;
  vl_error err;
  assert_int_equal(vl_frame_header_decode(h, &out, &err), VL_ERR_PROTOCOL);
  assert_int_equal(err.code, VL_ERR_PROTOCOL);
  assert_string_equal(err.path, "");
  assert_non_null(strstr(err.message, "bad frame magic 56 4c 57 32"));
}

static void size_check_accepts_a_frame_exactly_at_the_limit(void **state) {
  (void)state;
  vl_error err;
  vl_frame_header h = {.json_len = 60, .payload_len = 40};
  assert_int_equal(vl_frame_check_size(&h, 100, &err), VL_OK);
  h.json_len = 100;
  h.payload_len = 0;
  assert_int_equal(vl_frame_check_size(&h, 100, &err), VL_OK);
}

static void size_check_rejects_json_over_the_limit(void **state) {
  (void)state;
  vl_error err;
  vl_frame_header h = {.json_len = 101, .payload_len = 0};
  assert_int_equal(vl_frame_check_size(&h, 100, &err), VL_ERR_TOO_LARGE);
  assert_non_null(strstr(err.message, "JSON length 101 exceeds the frame limit of 100 bytes"));
}

static void size_check_rejects_json_plus_payload_over_the_limit(void **state) {
  (void)state;
  vl_error err;
  vl_frame_header h = {.json_len = 60, .payload_len = 41};
  assert_int_equal(vl_frame_check_size(&h, 100, &err), VL_ERR_TOO_LARGE);
  assert_non_null(strstr(err.message, "60 JSON bytes and 41 payload bytes"));
}

static void size_check_does_not_overflow_on_huge_payload_lengths(void **state) {
  (void)state;
  vl_error err;
  vl_frame_header h = {.json_len = 10, .payload_len = UINT64_MAX - 5};
  assert_int_equal(vl_frame_check_size(&h, 100, &err), VL_ERR_TOO_LARGE);
  assert_non_null(strstr(err.message, "10 JSON bytes and 18446744073709551610 payload bytes"));
  h.json_len = 0;
  assert_int_equal(vl_frame_check_size(&h, UINT64_MAX, &err), VL_ERR_TOO_LARGE);
  assert_string_equal(err.message, "frame does not fit in memory");
}

static void decoder_yields_a_frame_fed_whole(void **state) {
  (void)state;
  const uint8_t payload[5] = {9, 8, 7, 6, 5};
  size_t len;
  uint8_t *b = make_frame("{\"id\":1}", payload, sizeof payload, &len);
  vl_frame_decoder d;
  vl_frame_decoder_init(&d, 1024);
  vl_frame f;
  bool ready;
  size_t used;
  vl_error err;
  assert_int_equal(vl_frame_decoder_feed(&d, b, len, &used, &ready, &f, &err), VL_OK);
  assert_true(ready);
  assert_int_equal(used, len);
  assert_int_equal(f.json_len, 8);
  assert_string_equal(f.json, "{\"id\":1}");
  assert_int_equal(f.payload_len, 5);
  assert_memory_equal(f.payload, payload, 5);
  assert_int_equal((uintptr_t)f.payload % 8, 0);
  assert_true(vl_frame_decoder_idle(&d));
  vl_frame_free(&f);
  assert_null(f.json);
  vl_frame_decoder_free(&d);
  free(b);
}

static void decoder_yields_a_frame_fed_one_byte_at_a_time(void **state) {
  (void)state;
  uint8_t payload[300];
  for (size_t i = 0; i < sizeof payload; i++) {
    payload[i] = (uint8_t)(i * 7);
  }
  size_t len;
  uint8_t *b = make_frame("{\"method\":\"ping\"}", payload, sizeof payload, &len);
  vl_frame_decoder d;
  vl_frame_decoder_init(&d, 4096);
  vl_frame f;
  memset(&f, 0, sizeof f);
  vl_error err;
  for (size_t i = 0; i < len; i++) {
    bool ready;
    size_t used;
    assert_int_equal(vl_frame_decoder_feed(&d, b + i, 1, &used, &ready, &f, &err), VL_OK);
    assert_int_equal(used, 1);
    assert_int_equal(ready, i == len - 1);
    assert_int_equal(vl_frame_decoder_idle(&d), i == len - 1);
  }
  assert_string_equal(f.json, "{\"method\":\"ping\"}");
  assert_int_equal(f.payload_len, sizeof payload);
  assert_memory_equal(f.payload, payload, sizeof payload);
  vl_frame_free(&f);
  vl_frame_decoder_free(&d);
  free(b);
}

static void decoder_splits_two_frames_sent_in_one_chunk(void **state) {
  (void)state;
  size_t l1, l2;
  const uint8_t p2[3] = {1, 2, 3};
  uint8_t *a = make_frame("[1]", NULL, 0, &l1);
  uint8_t *b = make_frame("[22]", p2, 3, &l2);
  uint8_t *both = malloc(l1 + l2);
  assert_non_null(both);
  memcpy(both, a, l1);
  memcpy(both + l1, b, l2);
  vl_frame_decoder d;
  vl_frame_decoder_init(&d, 64);
  vl_frame f1, f2;
  bool ready;
  size_t used;
  vl_error err;
  assert_int_equal(vl_frame_decoder_feed(&d, both, l1 + l2, &used, &ready, &f1, &err), VL_OK);
  assert_true(ready);
  assert_int_equal(used, l1);
  assert_string_equal(f1.json, "[1]");
  assert_null(f1.payload);
  assert_int_equal(f1.payload_len, 0);
  assert_int_equal(vl_frame_decoder_feed(&d, both + l1, l2, &used, &ready, &f2, &err), VL_OK);
  assert_true(ready);
  assert_int_equal(used, l2);
  assert_string_equal(f2.json, "[22]");
  assert_memory_equal(f2.payload, p2, 3);
  vl_frame_free(&f1);
  vl_frame_free(&f2);
  vl_frame_decoder_free(&d);
  free(a);
  free(b);
  free(both);
}

static void decoder_completes_an_empty_frame_with_its_header(void **state) {
  (void)state;
  uint8_t h[VL_FRAME_HEADER_SIZE];
  vl_frame_header_encode(h, 0, 0);
  vl_frame_decoder d;
  vl_frame_decoder_init(&d, 64);
  vl_frame f;
  bool ready;
  size_t used;
  vl_error err;
  assert_int_equal(vl_frame_decoder_feed(&d, h, sizeof h, &used, &ready, &f, &err), VL_OK);
  assert_true(ready);
  assert_int_equal(used, 16);
  assert_int_equal(f.json_len, 0);
  assert_string_equal(f.json, "");
  assert_null(f.payload);
  vl_frame_free(&f);
  vl_frame_decoder_free(&d);
}

static void decoder_holds_a_split_header_without_allocating(void **state) {
  (void)state;
  size_t len;
  uint8_t *b = make_frame("{}", NULL, 0, &len);
  vl_frame_decoder d;
  vl_frame_decoder_init(&d, 64);
  vl_frame f;
  bool ready;
  size_t used;
  vl_error err;
  assert_int_equal(vl_frame_decoder_feed(&d, b, 7, &used, &ready, &f, &err), VL_OK);
  assert_false(ready);
  assert_int_equal(used, 7);
  assert_null(d.body);
  assert_false(vl_frame_decoder_idle(&d));
  assert_int_equal(vl_frame_decoder_feed(&d, b + 7, 0, &used, &ready, &f, &err), VL_OK);
  assert_int_equal(used, 0);
  assert_int_equal(vl_frame_decoder_feed(&d, b + 7, len - 7, &used, &ready, &f, &err), VL_OK);
  assert_true(ready);
  assert_int_equal(used, len - 7);
  assert_string_equal(f.json, "{}");
  vl_frame_free(&f);
  vl_frame_decoder_free(&d);
  free(b);
}

static void decoder_reports_a_bad_magic_and_stays_failed(void **state) {
  (void)state;
  size_t len;
  uint8_t *b = make_frame("{}", NULL, 0, &len);
  b[0] = 'X';
  vl_frame_decoder d;
  vl_frame_decoder_init(&d, 64);
  vl_frame f;
  bool ready;
  size_t used;
  vl_error err;
  assert_int_equal(vl_frame_decoder_feed(&d, b, len, &used, &ready, &f, &err), VL_ERR_PROTOCOL);
  assert_false(ready);
  assert_non_null(strstr(err.message, "bad frame magic 58 4c 57 31"));
  assert_false(vl_frame_decoder_idle(&d));
  b[0] = 'V';
  assert_int_equal(vl_frame_decoder_feed(&d, b, len, &used, &ready, &f, &err), VL_ERR_PROTOCOL);
  assert_int_equal(used, 0);
  assert_false(ready);
  vl_frame_decoder_free(&d);
  free(b);
}

static void decoder_rejects_json_over_the_limit_right_after_the_header(void **state) {
  (void)state;
  uint8_t h[VL_FRAME_HEADER_SIZE];
  vl_frame_header_encode(h, 65, 0);
  vl_frame_decoder d;
  vl_frame_decoder_init(&d, 64);
  vl_frame f;
  bool ready;
  size_t used;
  vl_error err;
  assert_int_equal(vl_frame_decoder_feed(&d, h, sizeof h, &used, &ready, &f, &err),
                   VL_ERR_TOO_LARGE);
  assert_false(ready);
  assert_null(d.body);
  assert_non_null(strstr(err.message, "JSON length 65 exceeds the frame limit of 64 bytes"));
  assert_int_equal(vl_frame_decoder_feed(&d, h, 1, &used, &ready, &f, &err), VL_ERR_TOO_LARGE);
  vl_frame_decoder_free(&d);
}

static void decoder_rejects_a_payload_over_the_limit(void **state) {
  (void)state;
  uint8_t h[VL_FRAME_HEADER_SIZE];
  vl_frame_header_encode(h, 10, 55);
  vl_frame_decoder d;
  vl_frame_decoder_init(&d, 64);
  vl_frame f;
  bool ready;
  size_t used;
  vl_error err;
  for (size_t i = 0; i < 15; i++) {
    assert_int_equal(vl_frame_decoder_feed(&d, h + i, 1, &used, &ready, &f, &err), VL_OK);
  }
  assert_int_equal(vl_frame_decoder_feed(&d, h + 15, 1, &used, &ready, &f, &err), VL_ERR_TOO_LARGE);
  assert_non_null(strstr(err.message, "10 JSON bytes and 55 payload bytes"));
  vl_frame_decoder_free(&d);
}

static void decoder_reports_out_of_memory_for_an_unallocatable_frame(void **state) {
  (void)state;
  uint8_t h[VL_FRAME_HEADER_SIZE];
  vl_frame_header_encode(h, 2, (uint64_t)1 << 62);
  vl_frame_decoder d;
  vl_frame_decoder_init(&d, UINT64_MAX);
  vl_frame f;
  bool ready;
  size_t used;
  vl_error err;
  assert_int_equal(vl_frame_decoder_feed(&d, h, sizeof h, &used, &ready, &f, &err), VL_ERR_NOMEM);
  assert_false(ready);
  assert_null(d.body);
  vl_frame_decoder_free(&d);
}

/* A payload received in place: the decoder names where the missing bytes go only once the JSON
 * is in, a commit past the missing count is capped, and the frame completes with the bytes. */
static void decoder_receives_a_payload_in_place(void **state) {
  (void)state;
  const char *json = "{\"a\":1}";
  uint8_t payload[40];
  for (size_t i = 0; i < sizeof payload; i++) payload[i] = (uint8_t)(i * 7 + 1);
  size_t len = 0;
  uint8_t *b = make_frame(json, payload, sizeof payload, &len);
  vl_frame_decoder d;
  vl_frame_decoder_init(&d, 1024);
  size_t room = 99, used = 0;
  bool ready = true;
  vl_frame f;
  vl_error err;
  assert_null(vl_frame_decoder_direct(&d, &room));
  assert_int_equal(room, 0);
  /* header and all but one JSON byte: not yet in place */
  size_t upto = VL_FRAME_HEADER_SIZE + strlen(json) - 1;
  assert_int_equal(vl_frame_decoder_feed(&d, b, upto, &used, &ready, &f, &err), VL_OK);
  assert_false(ready);
  assert_null(vl_frame_decoder_direct(&d, &room));
  /* the last JSON byte and 10 payload bytes fed */
  assert_int_equal(vl_frame_decoder_feed(&d, b + upto, 11, &used, &ready, &f, &err), VL_OK);
  assert_int_equal(used, 11);
  uint8_t *at = vl_frame_decoder_direct(&d, &room);
  assert_non_null(at);
  assert_int_equal(room, 30);
  memcpy(at, payload + 10, 20);
  vl_frame_decoder_commit(&d, 20, &ready, &f);
  assert_false(ready);
  at = vl_frame_decoder_direct(&d, &room);
  assert_int_equal(room, 10);
  memcpy(at, payload + 30, 10);
  vl_frame_decoder_commit(&d, 1000, &ready, &f); /* capped at the 10 missing */
  assert_true(ready);
  assert_int_equal(f.json_len, strlen(json));
  assert_string_equal(f.json, json);
  assert_int_equal(f.payload_len, sizeof payload);
  assert_memory_equal(f.payload, payload, sizeof payload);
  assert_true(vl_frame_decoder_idle(&d));
  assert_null(vl_frame_decoder_direct(&d, &room));
  vl_frame_decoder_commit(&d, 5, &ready, &f); /* nothing in progress: no effect */
  assert_false(ready);
  assert_true(vl_frame_decoder_idle(&d));
  vl_frame_free(&f);
  vl_frame_decoder_free(&d);
  free(b);
}

static void decoder_free_releases_a_partial_frame(void **state) {
  (void)state;
  size_t len;
  const uint8_t payload[100] = {0};
  uint8_t *b = make_frame("{\"a\":1}", payload, sizeof payload, &len);
  vl_frame_decoder d;
  vl_frame_decoder_init(&d, 1024);
  vl_frame f;
  bool ready;
  size_t used;
  vl_error err;
  assert_int_equal(vl_frame_decoder_feed(&d, b, 40, &used, &ready, &f, &err), VL_OK);
  assert_false(ready);
  assert_non_null(d.body);
  vl_frame_decoder_free(&d);
  assert_null(d.body);
  vl_frame_decoder_free(NULL);
  vl_frame_free(NULL);
  free(b);
}

/* ---- the JSON-RPC envelope (src/wire/envelope.c), both ends ------------------------------ */

static void expect_request(const char *json, vl_status code, const char *id_text) {
  vl__rpc_request req;
  vl_error err;
  vl_error_clear(&err);
  vl_status s = vl__rpc_request_parse(json, strlen(json), &req, &err);
  if (s != code) fail_msg("%s: got %s (%s)", json, vl_status_kind(s), err.message);
  if (id_text == NULL) {
    assert_null(req.id);
  } else {
    assert_non_null(req.id);
    char *t = cJSON_PrintUnformatted(req.id);
    assert_string_equal(t, id_text);
    free(t);
  }
  vl__rpc_request_free(&req);
}

static void request_members_given_twice_are_refused(void **state) {
  (void)state;
  expect_request("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", VL_OK, "1");
  expect_request("{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":1,\"method\":\"ping\"}",
                 VL_ERR_INVALID_REQUEST, NULL);
  expect_request("{\"id\":7,\"jsonrpc\":\"2.0\",\"method\":\"a\",\"method\":\"b\"}",
                 VL_ERR_INVALID_REQUEST, "7");
  expect_request("{\"id\":7,\"jsonrpc\":\"2.0\",\"jsonrpc\":\"1.0\",\"method\":\"a\"}",
                 VL_ERR_INVALID_REQUEST, "7");
  expect_request("{\"id\":7,\"jsonrpc\":\"2.0\",\"method\":\"a\",\"params\":{},\"params\":[]}",
                 VL_ERR_INVALID_REQUEST, "7");
  /* an escaped name is the same member */
  expect_request("{\"id\":7,\"jsonrpc\":\"2.0\",\"method\":\"a\",\"\\u006dethod\":\"b\"}",
                 VL_ERR_INVALID_REQUEST, "7");
}

static void ids_and_methods_must_be_utf8(void **state) {
  (void)state;
  expect_request("{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"ping\"}",
                 VL_ERR_INVALID_REQUEST, NULL);
  expect_request("{\"jsonrpc\":\"2.0\",\"id\":\"\xed\xa0\x80\",\"method\":\"ping\"}",
                 VL_ERR_INVALID_REQUEST, NULL); /* an encoded surrogate */
  expect_request("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"\xe2\x82\"}",
                 VL_ERR_INVALID_REQUEST, "2");
  expect_request("{\"jsonrpc\":\"2.0\",\"id\":\"\xe2\x82\xac\",\"method\":\"ping\"}", VL_OK,
                 "\"\xe2\x82\xac\"");
  const char *big = "{\"id\":\"\xff\",\"jsonrpc\":\"2.0\",\"method\":\"ping\"}";
  assert_null(vl__rpc_peek_id(big, strlen(big)));
}

static void request_text_has_exact_ids_and_numbers(void **state) {
  (void)state;
  size_t len = 0;
  cJSON *params = cJSON_Parse("{\"a\":[1,2.5]}");
  char *t = vl__rpc_request_text(9007199254740991u, "lower", params, &len);
  assert_string_equal(t, "{\"jsonrpc\":\"2.0\",\"id\":9007199254740991,\"method\":\"lower\","
                         "\"params\":{\"a\":[1,2.5]}}");
  assert_int_equal(len, strlen(t));
  free(t);
  t = vl__rpc_request_text(3, "ping", NULL, NULL);
  assert_string_equal(t, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\",\"params\":{}}");
  free(t);
  cJSON_Delete(params);
}

/* What vl__rpc_request_scan makes of json: false, or true with the id as printed, the method,
 * the graph's text (NULL when params has none, else borrowed from the scanned text) and the
 * count of its nodes; the scanned text is whole again after the free, and untouched on false. */
static void expect_scan(const char *json, bool read, const char *id_text, const char *graph,
                        long nodes) {
  vl__rpc_request req, strict;
  vl_error err;
  size_t len = strlen(json);
  char *text = malloc(len + 1);
  assert_non_null(text);
  memcpy(text, json, len + 1);
  bool got = vl__rpc_request_scan(text, len, &req);
  if (got != read) fail_msg("%s: scanned %d", json, got);
  if (!read) {
    assert_null(req.doc);
    assert_string_equal(text, json);
    free(text);
    return;
  }
  /* what is scanned the strict reader finds valid, with the same id, method and params */
  assert_int_equal(vl__rpc_request_parse(json, strlen(json), &strict, &err), VL_OK);
  char *a = req.id != NULL ? cJSON_PrintUnformatted(req.id) : NULL;
  char *b = strict.id != NULL ? cJSON_PrintUnformatted(strict.id) : NULL;
  if (id_text == NULL) {
    assert_null(a);
    assert_null(b);
  } else {
    assert_string_equal(a, id_text);
    assert_string_equal(b, id_text);
  }
  free(a);
  free(b);
  assert_string_equal(req.method, strict.method);
  const cJSON *g = cJSON_GetObjectItemCaseSensitive(req.params, "graph");
  if (graph == NULL) {
    assert_null(g);
  } else {
    assert_true(cJSON_IsRaw(g));
    assert_string_equal(g->valuestring, graph);
    assert_true(g->valuestring > text && g->valuestring < text + len); /* borrowed, no copy */
    cJSON *tree = cJSON_Parse(graph);
    assert_true(cJSON_Compare(tree, cJSON_GetObjectItemCaseSensitive(strict.params, "graph"), 1));
    cJSON_Delete(tree);
  }
  assert_int_equal(req.graph_nodes, nodes);
  for (const cJSON *m = strict.params != NULL ? strict.params->child : NULL; m; m = m->next) {
    const cJSON *other = cJSON_GetObjectItemCaseSensitive(req.params, m->string);
    assert_non_null(other);
    if (strcmp(m->string, "graph") != 0) assert_true(cJSON_Compare(m, other, 1));
  }
  vl__rpc_request_restore(&req);
  vl__rpc_request_free(&req);
  vl__rpc_request_free(&strict);
  assert_memory_equal(text, json, len + 1); /* the byte cut after the graph is back */
  free(text);
}

static void small_requests_are_scanned_as_the_strict_reader_reads_them(void **state) {
  (void)state;
  expect_scan(
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"lower\",\"params\":{\"graph\":"
      "{\"nodes\":[{\"name\":\"a,]\"},{\"args\":[1,[2,{}]]}]},\"options\":{\"fold\":false}}}",
      true, "1", "{\"nodes\":[{\"name\":\"a,]\"},{\"args\":[1,[2,{}]]}]}", 2);
  expect_scan("{ \"params\" : { \"graph\" :\n {\"nodes\" : [ ] } } , \"method\":\"validate\","
              "\"id\":\"x\",\"jsonrpc\":\"2.0\"}",
              true, "\"x\"", "{\"nodes\" : [ ] }", 0);
  expect_scan(
      "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"lower\",\"params\":{\"\\u0067raph\":{}}}", true,
      "1.5", "{}", -1);
  expect_scan("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\",\"params\":null}", true, NULL,
              NULL, -1);
  expect_scan("{\"jsonrpc\":\"2.0\",\"id\":9007199254740993,\"method\":\"ping\"}", true,
              "9007199254740993", NULL, -1);
  /* everything else is left to the strict reader */
  static const char *const left[] = {
      "{\"jsonrpc\":\"2.0\",\"id\":1e400,\"method\":\"ping\"}",
      "{\"jsonrpc\":\"2.0\",\"id\":[],\"method\":\"ping\"}",
      "{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"ping\"}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xe2\x82\"}",
      "{\"jsonrpc\":\"2.0\",\"id\":1}",
      "{\"id\":1,\"method\":\"ping\"}",
      "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"method\":\"ping\"}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"extra\":0}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":[]}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":3}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"lower\",\"params\":{\"graph\":{},\"graph\":{}}}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"lower\",\"params\":{\"graph\":[1]}}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"lower\",\"params\":{\"graph\":{}}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"lower\",\"params\":{\"options\":{,}}}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"} x",
      "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]",
  };
  for (size_t i = 0; i < sizeof left / sizeof left[0]; i++)
    expect_scan(left[i], false, NULL, NULL, 0);
  /* a graph nested as deep as the whole document may nest, and one level deeper */
  for (int extra = 0; extra < 2; extra++) {
    int depth = CJSON_NESTING_LIMIT - 3 + extra; /* the document, params, graph, its arrays */
    size_t cap = (size_t)depth * 2 + 128;
    char *j = malloc(cap);
    assert_non_null(j);
    int k = snprintf(j, cap,
                     "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"lower\",\"params\":"
                     "{\"graph\":{\"a\":");
    for (int d = 0; d < depth; d++) j[k++] = '[';
    for (int d = 0; d < depth; d++) j[k++] = ']';
    snprintf(j + k, cap - (size_t)k, "}}}");
    vl__rpc_request strict;
    vl_error err;
    vl_status st = vl__rpc_request_parse(j, strlen(j), &strict, &err);
    vl__rpc_request_free(&strict);
    assert_int_equal(st, extra == 0 ? VL_OK : VL_ERR_PARSE);
    vl__rpc_request req;
    assert_int_equal(vl__rpc_request_scan(j, strlen(j), &req), extra == 0);
    vl__rpc_request_free(&req);
    free(j);
  }
}

static void responses_are_scanned_as_strictly_as_parsed(void **state) {
  (void)state;
  static const char *const left[] = {
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},\"result\":{}}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"result\":{}}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},\"extra\":0}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":1,\"message\":\"m\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":1}",
      "{\"jsonrpc\":\"1.0\",\"id\":1,\"result\":{}}",
      "{\"jsonrpc\":\"2.0\",\"id\":-1,\"result\":{}}",
      "{\"jsonrpc\":\"2.0\",\"id\":\"1\",\"result\":{}}",
      "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"result\":{}}",
      "{\"jsonrpc\":\"2.0\",\"id\":9007199254740994,\"result\":{}}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}} x",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":[1,]}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\\u0000\"}",
      "[]",
  };
  bool id_null = false;
  uint64_t id = 0;
  size_t off = 0, len = 0;
  for (size_t i = 0; i < sizeof left / sizeof left[0]; i++) {
    if (vl__rpc_response_scan(left[i], strlen(left[i]), &id_null, &id, &off, &len)) {
      fail_msg("%s: scanned", left[i]);
    }
  }
  const char *ok =
      "{\"result\": {\"x\":[1.50,\"\\u00e9\"]} ,\"id\":9007199254740992.0,\"jsonrpc\":\"2.0\"}";
  assert_true(vl__rpc_response_scan(ok, strlen(ok), &id_null, &id, &off, &len));
  assert_false(id_null);
  assert_int_equal(id, 9007199254740992u);
  assert_int_equal(len, strlen("{\"x\":[1.50,\"\\u00e9\"]}"));
  assert_memory_equal(ok + off, "{\"x\":[1.50,\"\\u00e9\"]}", len);
  ok = "{\"jsonrpc\":\"2.0\",\"id\":null,\"result\":7}";
  assert_true(vl__rpc_response_scan(ok, strlen(ok), &id_null, &id, &off, &len));
  assert_true(id_null);
  assert_memory_equal(ok + off, "7", len);
  size_t n = 0;
  const char *p = "{\"graph\": {}}";
  char *t = vl__rpc_request_text_raw(5, "lower", p, strlen(p), &n);
  assert_string_equal(
      t, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"lower\",\"params\":{\"graph\": {}}}");
  assert_int_equal(n, strlen(t));
  free(t);
}

/* vl__json_member_span (viewlowerctl's validate over the socket): the first member of that
 * name at the top level, its value's exact span, the whole text checked strictly. */
static void member_spans_are_found_in_strict_objects_only(void **state) {
  (void)state;
  static const struct {
    const char *text, *span; /* span NULL: not found or not strict */
  } cases[] = {
      {"{\"a\":1,\"graph\":{\"x\":[1,2]},\"graph\":2}", "{\"x\":[1,2]}"},
      {"{ \"graph\" : [ 1 ] }", "[ 1 ]"},
      {"{\"gr\\u0061ph\":\"v\\\"\"}", "\"v\\\"\""},
      {"{\"a\":{\"graph\":1}}", NULL},
      {"[{\"graph\":1}]", NULL},
      {"{\"graph\":1} x", NULL},
      {"{\"graph\":1,}", NULL},
      {"{\"graph\":01}", NULL},
      {"{\"graph\":\"\x01\"}", NULL},
      {"{\"other\":1,\"graph\":[1,{\"a\":[true,false,null,-1.5e3]}]}",
       "[1,{\"a\":[true,false,null,-1.5e3]}]"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    size_t off = 0, n = 0;
    bool found = vl__json_member_span(cases[i].text, strlen(cases[i].text), "graph", &off, &n);
    if (found != (cases[i].span != NULL)) fail_msg("case %zu: found %d", i, found);
    if (found) {
      assert_int_equal(n, strlen(cases[i].span));
      assert_memory_equal(cases[i].text + off, cases[i].span, n);
    }
  }
}

/* A response's result may nest to the reader's limit counted from the document (the envelope
 * is level 1): 999 more arrays are read, 1000 are refused, by the one-pass check and the tree
 * reader alike. */
static void a_result_nests_up_to_the_documents_limit(void **state) {
  (void)state;
  for (int levels = 998; levels <= 1000; levels++) {
    size_t cap = 64 + 2 * (size_t)levels;
    char *text = malloc(cap);
    assert_non_null(text);
    size_t len = (size_t)snprintf(text, cap, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":");
    memset(text + len, '[', (size_t)levels);
    memset(text + len + (size_t)levels, ']', (size_t)levels);
    len += 2 * (size_t)levels;
    text[len++] = '}';
    bool id_null = false;
    uint64_t id = 0;
    size_t off = 0, n = 0;
    bool ok = vl__rpc_response_scan(text, len, &id_null, &id, &off, &n);
    assert_int_equal(ok, levels <= 999);
    vl__rpc_response resp;
    vl_error err;
    vl_error_clear(&err);
    assert_int_equal(vl__rpc_response_parse(text, len, &resp, &err) == VL_OK, levels <= 999);
    vl__rpc_response_free(&resp);
    free(text);
  }
}

/* Strings are crossed eight bytes at a time (json_read.c, plain_run): a quote, a backslash or a
 * control byte at every place of a word, after runs of every length and of bytes that are no
 * stops (0x7f, UTF-8, space), end the run exactly there. */
static void string_stops_are_found_at_every_place_of_a_word(void **state) {
  (void)state;
  static const char *const fillers[] = {"a", "\x7f", "\xc3\xa9", " ", "~"};
  enum { END, ESCAPE, CONTROL_1, CONTROL_1F, N_STOPS };
  for (size_t f = 0; f < sizeof fillers / sizeof *fillers; f++) {
    for (size_t k = 0; k < 40; k++) {
      for (int stop = 0; stop < N_STOPS; stop++) {
        char text[256], str[128] = "";
        for (size_t i = 0; i < k; i++) strcat(str, fillers[f]);
        size_t run = strlen(str);
        static const char *const tails[N_STOPS] = {"", "\\nz", "\x01z", "\x1fz"};
        strcat(str, tails[stop]);
        snprintf(text, sizeof text, "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":[\"%s\",1]}", str);
        bool id_null = false;
        uint64_t id = 0;
        size_t off = 0, len = 0;
        bool ok = vl__rpc_response_scan(text, strlen(text), &id_null, &id, &off, &len);
        if (ok != (stop == END || stop == ESCAPE)) {
          fail_msg("filler %zu, run %zu, stop %d: scanned %d", f, run, stop, ok);
        }
        if (ok) {
          assert_int_equal(len, strlen(str) + 6); /* ["…",1] */
          assert_memory_equal(text + off + 2, str, strlen(str));
        }
        /* the tree reader agrees, and keeps the string's bytes (the escape decoded) */
        vl__rpc_response resp;
        vl_error err;
        vl_error_clear(&err);
        vl_status rs = vl__rpc_response_parse(text, strlen(text), &resp, &err);
        assert_int_equal(rs == VL_OK, ok);
        if (ok) {
          const char *got = cJSON_GetStringValue(cJSON_GetArrayItem(resp.result, 0));
          assert_non_null(got);
          assert_int_equal(strlen(got), run + (stop == ESCAPE ? 2 : 0));
          assert_memory_equal(got, str, run);
          if (stop == ESCAPE) assert_string_equal(got + run, "\nz");
        }
        vl__rpc_response_free(&resp);
      }
    }
  }
}

/* Parses a response; returns the status and fills resp (freed by the caller). */
static vl_status response(const char *json, vl__rpc_response *resp, vl_error *err) {
  vl_error_clear(err);
  return vl__rpc_response_parse(json, strlen(json), resp, err);
}

static void responses_are_read_strictly(void **state) {
  (void)state;
  static const char *const bad[] = {
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},\"result\":{}}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"result\":{}}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},\"extra\":0}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},\"error\":{\"code\":1,\"message\":\"m\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":1}",
      "{\"jsonrpc\":\"1.0\",\"id\":1,\"result\":{}}",
      "{\"jsonrpc\":\"2.0\",\"id\":-1,\"result\":{}}",
      "{\"jsonrpc\":\"2.0\",\"id\":\"1\",\"result\":{}}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}} x",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32600,\"code\":1,\"message\":\"m\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32600.5,\"message\":\"m\"}}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32600,\"message\":\"m\",\"x\":1}}",
      "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32600,\"message\":\"m\","
      "\"data\":{\"kind\":\"a\",\"kind\":\"b\"}}}",
      "[]",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    vl__rpc_response r;
    vl_error err;
    vl_status s = response(bad[i], &r, &err);
    if (s != VL_ERR_PROTOCOL) fail_msg("%s: got %s", bad[i], vl_status_kind(s));
    assert_non_null(strstr(err.message, "malformed response"));
    vl__rpc_response_free(&r);
  }
  vl__rpc_response r;
  vl_error err;
  assert_int_equal(response("{\"jsonrpc\":\"2.0\",\"id\":9007199254740992,\"result\":{\"x\":1}}",
                            &r, &err),
                   VL_OK);
  assert_int_equal(r.error, VL_OK);
  assert_false(r.id_null);
  assert_int_equal(r.id, 9007199254740992u);
  assert_non_null(cJSON_GetObjectItem(r.result, "x"));
  vl__rpc_response_free(&r);
  assert_int_equal(response("{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32001,"
                            "\"message\":\"bad\",\"data\":{\"kind\":\"invalid_graph\","
                            "\"path\":\"/graph/nodes/3\"}}}",
                            &r, &err),
                   VL_OK);
  assert_true(r.id_null);
  assert_int_equal(r.error, VL_ERR_INVALID_GRAPH);
  assert_int_equal(err.code, VL_ERR_INVALID_GRAPH);
  assert_string_equal(err.path, "/graph/nodes/3");
  assert_string_equal(err.message, "bad");
  vl__rpc_response_free(&r);
}

/* The one map: every status a server sends comes back as itself from its code and kind, from
 * its code alone as the first status with that code; transport statuses never. */
static void status_map_inverts_itself(void **state) {
  (void)state;
  for (int i = 1; i < VL_STATUS_COUNT; i++) {
    vl_status s = (vl_status)i;
    vl_status back = vl__rpc_status_of(vl_status_rpc_code(s), vl_status_kind(s));
    if (vl__rpc_is_transport_status(s)) {
      assert_int_not_equal(back, s);
    } else {
      assert_int_equal(back, s);
    }
  }
  assert_int_equal(vl__rpc_status_of(-32005, NULL), VL_ERR_OVERLOADED);
  assert_int_equal(vl__rpc_status_of(-32603, "io_error"), VL_ERR_INTERNAL);
  assert_int_equal(vl__rpc_status_of(-1, "no_such_kind"), VL_ERR_INTERNAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(header_encode_writes_magic_and_big_endian_lengths),
      cmocka_unit_test(request_members_given_twice_are_refused),
      cmocka_unit_test(ids_and_methods_must_be_utf8),
      cmocka_unit_test(request_text_has_exact_ids_and_numbers),
      cmocka_unit_test(responses_are_read_strictly),
      cmocka_unit_test(small_requests_are_scanned_as_the_strict_reader_reads_them),
      cmocka_unit_test(responses_are_scanned_as_strictly_as_parsed),
      cmocka_unit_test(string_stops_are_found_at_every_place_of_a_word),
      cmocka_unit_test(member_spans_are_found_in_strict_objects_only),
      cmocka_unit_test(a_result_nests_up_to_the_documents_limit),
      cmocka_unit_test(status_map_inverts_itself),
      cmocka_unit_test(header_decode_reads_back_the_encoded_lengths),
      cmocka_unit_test(header_decode_rejects_a_bad_magic),
      cmocka_unit_test(size_check_accepts_a_frame_exactly_at_the_limit),
      cmocka_unit_test(size_check_rejects_json_over_the_limit),
      cmocka_unit_test(size_check_rejects_json_plus_payload_over_the_limit),
      cmocka_unit_test(size_check_does_not_overflow_on_huge_payload_lengths),
      cmocka_unit_test(decoder_yields_a_frame_fed_whole),
      cmocka_unit_test(decoder_receives_a_payload_in_place),
      cmocka_unit_test(decoder_yields_a_frame_fed_one_byte_at_a_time),
      cmocka_unit_test(decoder_splits_two_frames_sent_in_one_chunk),
      cmocka_unit_test(decoder_completes_an_empty_frame_with_its_header),
      cmocka_unit_test(decoder_holds_a_split_header_without_allocating),
      cmocka_unit_test(decoder_reports_a_bad_magic_and_stays_failed),
      cmocka_unit_test(decoder_rejects_json_over_the_limit_right_after_the_header),
      cmocka_unit_test(decoder_rejects_a_payload_over_the_limit),
      cmocka_unit_test(decoder_reports_out_of_memory_for_an_unallocatable_frame),
      cmocka_unit_test(decoder_free_releases_a_partial_frame),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

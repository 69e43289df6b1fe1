/* it_protocol.c - the wire protocol against bad input (docs/protocol.md): each malformed frame gets
 * its error code with id null and the connection is closed; bad JSON (also text after the JSON
 * value) and bad JSON-RPC get their code and leave the connection usable; ids are echoed
 * exactly, also by a large request refused as overloaded; the daemon keeps serving everyone
 * else throughout. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "viewlower/frame.h"

enum { MAX_FRAME = 65536 };

static int setup(void **state) {
  daemon_proc *d = calloc(1, sizeof *d);
  assert_non_null(d);
  daemon_prepare(d);
  static const char *const args[] = {"--max-frame-bytes", "65536", NULL};
  daemon_start(d, args);
  *state = d;
  return 0;
}

static int teardown(void **state) {
  daemon_proc *d = *state;
  int rc = daemon_finish(d);
  free(d);
  assert_int_equal(rc, 0);
  return 0;
}

/* Sends a ping with id on fd and expects its result. */
static void ping_on(int fd, int id) {
  char text[96];
  snprintf(text, sizeof text, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"ping\"}", id);
  raw_send_frame(fd, text, NULL, 0);
  cJSON *r = raw_recv_frame(fd, NULL);
  assert_int_equal((int)json_number(r, "id"), id);
  assert_true(cJSON_IsTrue(
      cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "result"), "pong")));
  cJSON_Delete(r);
}

static void header(uint8_t h[VL_FRAME_HEADER_SIZE], uint32_t json_len, uint64_t payload_len) {
  vl_frame_header_encode(h, json_len, payload_len);
}

static void wrong_magic_gets_invalid_request_with_id_null_then_close(void **state) {
  daemon_proc *d = *state;
  int fd = raw_connect(d->sock);
  /* Header and body in one write: the daemon may close as soon as it has read the header, and a
   * second write racing that close would fail (EPIPE) before the error response is read. */
  uint8_t h[VL_FRAME_HEADER_SIZE + 2];
  header(h, 2, 0);
  memcpy(h, "HTTP", 4);
  memcpy(h + VL_FRAME_HEADER_SIZE, "{}", 2);
  raw_send(fd, h, sizeof h);
  raw_expect_error(fd, -32600, -1, "invalid_request");
  raw_expect_closed(fd);
  close(fd);
  ping_ok(d->sock); /* the daemon still serves others */
}

static void truncated_header_then_close_leaves_the_daemon_serving(void **state) {
  daemon_proc *d = *state;
  int fd = raw_connect(d->sock);
  uint8_t h[VL_FRAME_HEADER_SIZE];
  header(h, 40, 0);
  raw_send(fd, h, 7);
  close(fd);
  ping_ok(d->sock); /* the daemon still serves others */
}

static void json_length_over_the_limit_gets_too_large_then_close(void **state) {
  daemon_proc *d = *state;
  int fd = raw_connect(d->sock);
  uint8_t h[VL_FRAME_HEADER_SIZE];
  header(h, MAX_FRAME + 1, 0);
  raw_send(fd, h, sizeof h);
  raw_expect_error(fd, -32004, -1, "too_large");
  raw_expect_closed(fd);
  close(fd);
  ping_ok(d->sock); /* the daemon still serves others */
}

static void payload_over_the_limit_gets_too_large_then_close(void **state) {
  daemon_proc *d = *state;
  int fd = raw_connect(d->sock);
  uint8_t h[VL_FRAME_HEADER_SIZE];
  header(h, 100, MAX_FRAME - 99);
  raw_send(fd, h, sizeof h);
  raw_expect_error(fd, -32004, -1, "too_large");
  raw_expect_closed(fd);
  close(fd);
  ping_ok(d->sock); /* the daemon still serves others */
}

static void a_frame_exactly_at_the_limit_is_served(void **state) {
  daemon_proc *d = *state;
  int fd = raw_connect(d->sock);
  const char *text = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}";
  size_t payload_len = MAX_FRAME - strlen(text);
  uint8_t *payload = calloc(1, payload_len);
  assert_non_null(payload);
  raw_send_frame(fd, text, payload, payload_len);
  cJSON *r = raw_recv_frame(fd, NULL);
  assert_non_null(cJSON_GetObjectItemCaseSensitive(r, "result"));
  cJSON_Delete(r);
  free(payload);
  close(fd);
}

static void invalid_json_gets_parse_error_and_the_connection_stays(void **state) {
  daemon_proc *d = *state;
  int fd = raw_connect(d->sock);
  raw_send_frame(fd, "{\"jsonrpc\":\"2.0\",\"id\":1,", NULL, 0);
  raw_expect_error(fd, -32700, -1, "parse_error");
  ping_on(fd, 2);
  raw_send_frame(fd, "", NULL, 0);
  raw_expect_error(fd, -32700, -1, "parse_error");
  ping_on(fd, 3);
  close(fd);
}

static void valid_json_that_is_not_json_rpc_gets_invalid_request(void **state) {
  daemon_proc *d = *state;
  int fd = raw_connect(d->sock);
  raw_send_frame(fd, "{\"hello\":1}", NULL, 0);
  raw_expect_error(fd, -32600, -1, "invalid_request");
  raw_send_frame(fd, "42", NULL, 0);
  raw_expect_error(fd, -32600, -1, "invalid_request");
  raw_send_frame(fd, "{\"jsonrpc\":\"1.0\",\"id\":5,\"method\":\"ping\"}", NULL, 0);
  raw_expect_error(fd, -32600, 5, "invalid_request");
  raw_send_frame(fd, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":7}", NULL, 0);
  raw_expect_error(fd, -32600, 6, "invalid_request");
  raw_send_frame(fd, "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}", NULL, 0);
  raw_expect_error(fd, -32600, -1, "invalid_request");
  raw_send_frame(fd, "{\"jsonrpc\":\"2.0\",\"method\":\"ping\"}", NULL, 0);
  raw_expect_error(fd, -32600, -1, "invalid_request");
  raw_send_frame(fd, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\",\"extra\":1}", NULL, 0);
  raw_expect_error(fd, -32600, 8, "invalid_request");
  ping_on(fd, 9);
  close(fd);
}

static void a_batch_array_is_refused(void **state) {
  daemon_proc *d = *state;
  int fd = raw_connect(d->sock);
  raw_send_frame(fd, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", NULL, 0);
  raw_expect_error(fd, -32600, -1, "invalid_request");
  ping_on(fd, 2);
  close(fd);
}

static void an_unknown_method_gets_method_not_found(void **state) {
  daemon_proc *d = *state;
  int fd = raw_connect(d->sock);
  raw_send_frame(fd, "{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"frobnicate\"}", NULL, 0);
  raw_expect_error(fd, -32601, 11, "unknown_method");
  ping_on(fd, 12);
  close(fd);
}

static void invalid_params_get_invalid_params_with_a_path(void **state) {
  daemon_proc *d = *state;
  int fd = raw_connect(d->sock);
  raw_send_frame(fd, "{\"jsonrpc\":\"2.0\",\"id\":21,\"method\":\"ping\",\"params\":[1]}", NULL, 0);
  raw_expect_error(fd, -32602, 21, "invalid_params");
  raw_send_frame(fd, "{\"jsonrpc\":\"2.0\",\"id\":22,\"method\":\"lower\",\"params\":{}}", NULL, 0);
  cJSON *r = raw_recv_frame(fd, NULL);
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "error");
  assert_int_equal((int)json_number(e, "code"), -32602);
  const cJSON *data = cJSON_GetObjectItemCaseSensitive(e, "data");
  assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(data, "path")),
                      "/graph");
  cJSON_Delete(r);
  ping_on(fd, 23);
  close(fd);
}

static void string_and_null_ids_are_echoed(void **state) {
  daemon_proc *d = *state;
  int fd = raw_connect(d->sock);
  raw_send_frame(fd, "{\"jsonrpc\":\"2.0\",\"id\":\"abc\",\"method\":\"ping\"}", NULL, 0);
  cJSON *r = raw_recv_frame(fd, NULL);
  assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "id")), "abc");
  cJSON_Delete(r);
  raw_send_frame(fd, "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", NULL, 0);
  r = raw_recv_frame(fd, NULL);
  assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(r, "id")));
  assert_non_null(cJSON_GetObjectItemCaseSensitive(r, "result"));
  cJSON_Delete(r);
  close(fd);
}

static void a_frame_split_into_single_bytes_is_served(void **state) {
  daemon_proc *d = *state;
  int fd = raw_connect(d->sock);
  const char *text = "{\"jsonrpc\":\"2.0\",\"id\":31,\"method\":\"ping\"}";
  uint8_t h[VL_FRAME_HEADER_SIZE];
  header(h, (uint32_t)strlen(text), 0);
  for (size_t i = 0; i < sizeof h; i++) {
    raw_send(fd, h + i, 1);
  }
  for (size_t i = 0; text[i] != '\0'; i++) {
    raw_send(fd, text + i, 1);
  }
  cJSON *r = raw_recv_frame(fd, NULL);
  assert_int_equal((int)json_number(r, "id"), 31);
  cJSON_Delete(r);
  close(fd);
}

static void the_client_reports_server_errors_and_transport_errors_apart(void **state) {
  daemon_proc *d = *state;
  vl_client *c = client_open(d);
  vl_error err;
  assert_int_equal(vl_client_call(c, "frobnicate", NULL, NULL, 0, NULL, NULL, &err),
                   VL_ERR_UNKNOWN_METHOD);
  assert_false(vl_client_is_transport_error(err.code));
  assert_string_equal(err.message, "unknown method \"frobnicate\"");
  /* A request over the daemon's frame limit: error with id null, then the daemon closes. */
  uint8_t *big = calloc(1, MAX_FRAME);
  assert_non_null(big);
  assert_int_equal(vl_client_call(c, "ping", NULL, big, MAX_FRAME, NULL, NULL, &err),
                   VL_ERR_TOO_LARGE);
  free(big);
  vl_status s = vl_client_ping(c, &err);
  assert_true(s == VL_ERR_IO);
  assert_true(vl_client_is_transport_error(s));
  vl_client_close(c);
  vl_client *gone = NULL;
  assert_int_equal(vl_client_connect("/nonexistent/viewlower.sock", 1000, &gone, &err), VL_ERR_IO);
  assert_null(gone);
}

/* vl_client_call_text answers as vl_client_call does, with the result's text: the same value, a
 * server error with no text, and a request over the frame limit reported with the daemon's own
 * reason (what it said before closing), not the broken pipe. */
static void call_text_answers_as_call_does_with_the_result_as_text(void **state) {
  daemon_proc *d = *state;
  vl_client *c = client_open(d);
  vl_error err;
  cJSON *params = json("{}");
  cJSON_AddItemToObject(params, "graph", example_graph("patch_embed.json"));
  cJSON *tree = NULL;
  char *text = (char *)"untouched";
  size_t len = 1;
  assert_int_equal(vl_client_call(c, "lower", params, NULL, 0, &tree, NULL, &err), VL_OK);
  assert_int_equal(vl_client_call_text(c, "lower", params, NULL, 0, &text, &len, NULL, &err),
                   VL_OK);
  assert_int_equal(strlen(text), len);
  char *printed = cJSON_PrintUnformatted(tree);
  cJSON *reread = cJSON_Parse(text);
  char *reprinted = cJSON_PrintUnformatted(reread);
  assert_string_equal(reprinted, printed);
  free(printed);
  free(reprinted);
  cJSON_Delete(reread);
  cJSON_Delete(tree);
  free(text);
  cJSON_Delete(params);
  assert_int_equal(vl_client_call_text(c, "frobnicate", NULL, NULL, 0, &text, &len, NULL, &err),
                   VL_ERR_UNKNOWN_METHOD);
  assert_null(text);
  assert_int_equal(len, 0);
  uint8_t *big = calloc(1, MAX_FRAME);
  assert_non_null(big);
  assert_int_equal(vl_client_call_text(c, "ping", NULL, big, MAX_FRAME, &text, &len, NULL, &err),
                   VL_ERR_TOO_LARGE);
  assert_null(text);
  free(big);
  vl_client_close(c);
}

/* One frame of exactly json_len JSON bytes (which may hold NULs), no payload, appended to b. */
static void frame_append(vl_buf *b, const char *json, size_t json_len) {
  uint8_t h[VL_FRAME_HEADER_SIZE];
  header(h, (uint32_t)json_len, 0);
  assert_int_equal(vl_buf_append(b, h, sizeof h), VL_OK);
  assert_int_equal(vl_buf_append(b, json, json_len), VL_OK);
}

static void send_json_bytes(int fd, const char *json, size_t json_len) {
  vl_buf b = {0};
  frame_append(&b, json, json_len);
  raw_send(fd, b.data, b.len);
  vl_buf_free(&b);
}

/* Receives one frame without payload and returns its JSON text exactly as sent (caller frees). */
static char *recv_text(int fd) {
  uint8_t h[VL_FRAME_HEADER_SIZE];
  assert_int_equal(recv(fd, h, sizeof h, MSG_WAITALL), (ssize_t)sizeof h);
  vl_frame_header hdr;
  vl_error err;
  assert_int_equal(vl_frame_header_decode(h, &hdr, &err), VL_OK);
  assert_int_equal(hdr.payload_len, 0);
  char *text = calloc(1, (size_t)hdr.json_len + 1);
  assert_non_null(text);
  if (hdr.json_len > 0) {
    assert_int_equal(recv(fd, text, hdr.json_len, MSG_WAITALL), (ssize_t)hdr.json_len);
  }
  return text;
}

/* Expects a parse error (id null) whose message is exactly message. */
static void expect_parse_error(int fd, const char *message) {
  char want[256];
  snprintf(want, sizeof want,
           "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"%s\","
           "\"data\":{\"kind\":\"parse_error\"}}}",
           message);
  char *got = recv_text(fd);
  assert_string_equal(got, want);
  free(got);
}

static void text_after_the_json_value_is_a_parse_error_with_id_null(void **state) {
  daemon_proc *d = *state;
  int fd = raw_connect(d->sock);
  /* A second request in the same frame: one parse error, and no answer to either request. */
  raw_send_frame(fd,
                 "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}"
                 "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"version\"}",
                 NULL, 0);
  expect_parse_error(fd, "invalid JSON at byte 40: text after the JSON value");
  ping_on(fd, 5); /* the next response is the ping's: nothing came for id 3 or 4 */
  raw_send_frame(fd, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\"} x", NULL, 0);
  expect_parse_error(fd, "invalid JSON at byte 41: text after the JSON value");
  ping_on(fd, 7);
  static const char nuls[] = "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\"}\0\0junk";
  send_json_bytes(fd, nuls, sizeof nuls - 1);
  expect_parse_error(fd, "invalid JSON at byte 40: text after the JSON value");
  ping_on(fd, 9);
  raw_send_frame(fd, "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"ping\"}\\u0000\\u0000junk", NULL,
                 0);
  expect_parse_error(fd, "invalid JSON at byte 41: \\\\u0000 (NUL) escapes are not supported");
  ping_on(fd, 11);
  /* Raw control bytes: cJSON would take them for whitespace, or keep them in a string. */
  raw_send_frame(fd, "{\"jsonrpc\":\"2.0\",\x01\"id\":20,\"method\":\"ping\"}", NULL, 0);
  expect_parse_error(fd, "invalid JSON at byte 17: control character 0x01");
  raw_send_frame(fd, "{\"jsonrpc\":\"2.0\",\"id\":21,\"method\":\"pi\tng\"}", NULL, 0);
  expect_parse_error(fd, "invalid JSON at byte 37: control character 0x09");
  ping_on(fd, 22);
  /* The rule is named: nesting past the limit (at the bracket that opens level 1001, the
   * request object being level 1), a lone surrogate escape (at its backslash). */
  static const char deep_head[] = "{\"jsonrpc\":\"2.0\",\"id\":23,\"method\":\"ping\",\"params\":";
  char deep[sizeof deep_head + 2 * 1000 + 2];
  size_t h = sizeof deep_head - 1;
  memcpy(deep, deep_head, h);
  memset(deep + h, '[', 1000);
  memset(deep + h + 1000, ']', 1000);
  strcpy(deep + h + 2000, "}");
  raw_send_frame(fd, deep, NULL, 0);
  char want[128];
  snprintf(want, sizeof want,
           "invalid JSON at byte %zu: arrays and objects nest deeper than 1000 levels", h + 999);
  expect_parse_error(fd, want);
  raw_send_frame(fd, "{\"jsonrpc\":\"2.0\",\"id\":24,\"method\":\"p\\udc00\"}", NULL, 0);
  expect_parse_error(fd, "invalid JSON at byte 36: a lone low surrogate: \\\\uDC00-\\\\uDFFF must "
                         "follow a high surrogate");
  ping_on(fd, 25);
  raw_send_frame(fd, "{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"ping\"}\n", NULL, 0);
  raw_send_frame(fd, "7 ", NULL, 0); /* a lone value with whitespace after it is JSON */
  raw_send_frame(fd, "7 7", NULL, 0);
  /* JSON whitespace after the value is allowed. */
  raw_send_frame(fd, " {\"jsonrpc\":\"2.0\",\"id\":13,\"method\":\"ping\"} \t\r\n", NULL, 0);
  char *got = recv_text(fd);
  assert_string_equal(got, "{\"jsonrpc\":\"2.0\",\"id\":12,\"result\":{\"pong\":true}}");
  free(got);
  raw_expect_error(fd, -32600, -1, "invalid_request");
  expect_parse_error(fd, "invalid JSON at byte 2: text after the JSON value");
  got = recv_text(fd);
  assert_string_equal(got, "{\"jsonrpc\":\"2.0\",\"id\":13,\"result\":{\"pong\":true}}");
  free(got);
  close(fd);
}

/* Sends a ping with the id text and expects the whole response text with the id echo. */
static void ping_echoes(int fd, const char *id, const char *echo) {
  char text[128], want[128];
  snprintf(text, sizeof text, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"ping\"}", id);
  snprintf(want, sizeof want, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"pong\":true}}", echo);
  raw_send_frame(fd, text, NULL, 0);
  char *got = recv_text(fd);
  assert_string_equal(got, want);
  free(got);
}

static void numeric_ids_are_echoed_exactly(void **state) {
  daemon_proc *d = *state;
  int fd = raw_connect(d->sock);
  /* Every number comes back as its own text, as sent: the value the client sent, whatever its
   * reader makes of it (a 64-bit integer past 2^53 stays exact). */
  static const char *const ids[] = {
      "9007199254740991", "9007199254740992", "-9007199254740992", "5000000000000001",
      "-5", "0", "-0", "1.0", "1e2", "0.1", "4.35", "0.30000000000000004", "-2.5e-7", "1e300",
      "123456789012345678", "9007199254740993", "18446744073709551615",
      "99999999999999999999999", "1.5E+3"};
  for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) {
    ping_echoes(fd, ids[i], ids[i]);
  }
  /* Error responses echo the same way. */
  raw_send_frame(fd, "{\"jsonrpc\":\"2.0\",\"id\":9007199254740991,\"method\":\"frobnicate\"}",
                 NULL, 0);
  char *got = recv_text(fd);
  assert_string_equal(got,
                      "{\"jsonrpc\":\"2.0\",\"id\":9007199254740991,\"error\":{\"code\":-32601,"
                      "\"message\":\"unknown method \\\"frobnicate\\\"\",\"data\":{\"kind\":"
                      "\"unknown_method\"}}}");
  free(got);
  /* A number that is not finite as a double cannot be echoed: an invalid request, id null. */
  raw_send_frame(fd, "{\"jsonrpc\":\"2.0\",\"id\":1e400,\"method\":\"ping\"}", NULL, 0);
  got = recv_text(fd);
  assert_string_equal(got, "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,"
                           "\"message\":\"\\\"id\\\" 1e400 is not a finite number\",\"data\":"
                           "{\"kind\":\"invalid_request\"}}}");
  free(got);
  raw_send_frame(fd, "{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":-1E+400 }", NULL, 0);
  got = recv_text(fd);
  assert_string_equal(got, "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,"
                           "\"message\":\"\\\"id\\\" -1E+400 is not a finite number\",\"data\":"
                           "{\"kind\":\"invalid_request\"}}}");
  free(got);
  ping_on(fd, 2);
  close(fd);
}

/* {"method":"lower","params":{...},"jsonrpc":"2.0","id":<id>} with params over 4 KiB and
 * decoys: "id" members in nested objects, and in strings with escaped quotes and backslashes. */
static char *large_request(const char *id) {
  enum { FILL = 6000 };
  char *fill = malloc(FILL + 1);
  assert_non_null(fill);
  memset(fill, 'n', FILL);
  fill[FILL] = '\0';
  size_t cap = FILL + 512;
  char *text = malloc(cap);
  assert_non_null(text);
  snprintf(text, cap,
           "{\"method\":\"lower\",\"params\":{\"options\":{\"id\":5,\"s\":\"\\\"id\\\":6 } ] "
           "\\\\\"},\"graph\":{\"name\":\"%s\",\"nodes\":[[{\"id\":7}],\"\\\\\\\"id\\\":8\"]}}"
           ",\"jsonrpc\" : \"2.0\", \"id\" : %s }",
           fill, id);
  free(fill);
  return text;
}

/* The error text of an overloaded answer, up to the message. */
static bool is_overloaded_with_id(const char *text, const char *id) {
  char want[128];
  snprintf(want, sizeof want, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":-32005,", id);
  return strncmp(text, want, strlen(want)) == 0 &&
         strstr(text, "\"data\":{\"kind\":\"overloaded\"}}}") != NULL;
}

static void an_overloaded_large_request_gets_its_id_from_anywhere_in_the_text(void **state) {
  (void)state;
  daemon_proc d;
  daemon_prepare(&d);
  static const char *const args[] = {"--workers", "1", "--max-queued", "1", NULL};
  daemon_start(&d, args);
  /* One verify fills the pool; the large requests follow in the same write. The loop serves a
   * connection's buffered frames a pass at a time (docs/daemon.md), and between two passes it
   * may see a finished verify, so the verify is made long (16 MiB tensors, tens of
   * milliseconds; seconds under valgrind) against the one loop turn a pass boundary costs:
   * with 4 MiB ones it finished in that gap about once in eight runs under valgrind. */
  cJSON *req = json("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"verify\",\"params\":{\"seed\":1}}");
  cJSON_AddItemToObject(cJSON_GetObjectItemCaseSensitive(req, "params"), "graph",
                        heavy_graph(2048, 2048));
  char *verify = cJSON_PrintUnformatted(req);
  cJSON_Delete(req);
  vl_buf b = {0};
  frame_append(&b, verify, strlen(verify));
  free(verify);
  static const char *const ids[] = {"77", "9007199254740991", "\"big \\\"one\\\"\"", "0.1"};
  enum { N_IDS = sizeof ids / sizeof ids[0] };
  for (size_t i = 0; i < N_IDS; i++) {
    char *text = large_request(ids[i]);
    assert_true(strlen(text) > 4096);
    frame_append(&b, text, strlen(text));
    free(text);
  }
  /* Malformed large requests, where no top-level id can be found: id null. */
  char *text = large_request("78");
  memcpy(text, "[  ", 3); /* not an object */
  frame_append(&b, text, strlen(text));
  memset(text, ' ', 5000); /* "params" never closes, so the id is inside it */
  static const char unclosed[] = "{\"method\":\"lower\",\"params\":{\"x\":[";
  memcpy(text, unclosed, sizeof unclosed - 1);
  frame_append(&b, text, strlen(text));
  free(text);
  int fd = raw_connect(d.sock);
  raw_send(fd, b.data, b.len);
  vl_buf_free(&b);
  bool seen[N_IDS] = {false};
  int nulls = 0, verified = 0;
  for (size_t i = 0; i < N_IDS + 3; i++) {
    char *got = recv_text(fd);
    bool known = false;
    for (size_t k = 0; k < N_IDS; k++) {
      if (is_overloaded_with_id(got, ids[k])) {
        assert_false(seen[k]);
        seen[k] = known = true;
      }
    }
    if (is_overloaded_with_id(got, "null")) {
      nulls++;
      known = true;
    } else if (strncmp(got, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"equal\":true,", 46) == 0) {
      verified++;
      known = true;
    }
    if (!known) {
      fail_msg("unexpected response: %.300s", got);
    }
    free(got);
  }
  for (size_t k = 0; k < N_IDS; k++) {
    assert_true(seen[k]);
  }
  assert_int_equal(nulls, 2);
  assert_int_equal(verified, 1);
  ping_on(fd, 2);
  close(fd);
  assert_int_equal(daemon_finish(&d), 0);
}

/* An execute whose graph lists one 4 KiB input as an output 20 times asks for 80 KiB of blob
 * payload, past the 64 KiB frame limit: it is refused before it runs (the limit and the bytes
 * named), with its id, and the connection serves on; 10 listings (40 KiB) are answered. */
static void outputs_past_the_frame_limit_are_refused_before_they_run(void **state) {
  daemon_proc *d = *state;
  int fd = raw_connect(d->sock);
  for (int listings = 20; listings >= 10; listings -= 10) {
    char req[2048];
    int n = snprintf(req, sizeof req,
                     "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"execute\",\"params\":{"
                     "\"encoding\":\"blob\",\"inputs\":{\"x\":{\"dtype\":\"float32\",\"shape\""
                     ":[1024],\"blob\":{\"offset\":0,\"nbytes\":4096}}},\"graph\":{\"format\":"
                     "\"viewlower.graph\",\"version\":1,\"nodes\":[{\"name\":\"x\",\"op\":"
                     "\"placeholder\",\"kind\":\"user_input\",\"val\":{\"dtype\":\"float32\","
                     "\"shape\":[1024]}},{\"name\":\"out\",\"op\":\"output\",\"args\":[",
                     listings);
    for (int i = 0; i < listings; i++)
      n += snprintf(req + n, sizeof req - (size_t)n, "%s\"x\"", i > 0 ? "," : "");
    snprintf(req + n, sizeof req - (size_t)n, "]}]}}}");
    static uint8_t input[4096];
    for (size_t i = 0; i < sizeof input; i++) input[i] = (uint8_t)(i * 7);
    raw_send_frame(fd, req, input, sizeof input);
    vl_buf out = {0};
    cJSON *r = raw_recv_frame(fd, &out);
    assert_int_equal((int)json_number(r, "id"), listings);
    if (listings == 20) {
      const cJSON *e = cJSON_GetObjectItemCaseSensitive(r, "error");
      assert_int_equal((int)json_number(r, "error.code"), -32004);
      assert_string_equal(
          cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "message")),
          "the graph's 20 outputs take at least 81920 bytes encoded, past the frame limit of "
          "65536 bytes");
      assert_int_equal((int)out.len, 0);
    } else {
      const cJSON *outs = cJSON_GetObjectItemCaseSensitive(
          cJSON_GetObjectItemCaseSensitive(r, "result"), "outputs");
      assert_int_equal(cJSON_GetArraySize(outs), 10);
      assert_int_equal((int)out.len, 10 * 4096);
      for (size_t k = 0; k < 10; k++) assert_memory_equal(out.data + k * 4096, input, 4096);
    }
    cJSON_Delete(r);
    vl_buf_free(&out);
  }
  close(fd);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(wrong_magic_gets_invalid_request_with_id_null_then_close),
      cmocka_unit_test(truncated_header_then_close_leaves_the_daemon_serving),
      cmocka_unit_test(json_length_over_the_limit_gets_too_large_then_close),
      cmocka_unit_test(payload_over_the_limit_gets_too_large_then_close),
      cmocka_unit_test(a_frame_exactly_at_the_limit_is_served),
      cmocka_unit_test(invalid_json_gets_parse_error_and_the_connection_stays),
      cmocka_unit_test(valid_json_that_is_not_json_rpc_gets_invalid_request),
      cmocka_unit_test(a_batch_array_is_refused),
      cmocka_unit_test(an_unknown_method_gets_method_not_found),
      cmocka_unit_test(invalid_params_get_invalid_params_with_a_path),
      cmocka_unit_test(string_and_null_ids_are_echoed),
      cmocka_unit_test(a_frame_split_into_single_bytes_is_served),
      cmocka_unit_test(text_after_the_json_value_is_a_parse_error_with_id_null),
      cmocka_unit_test(numeric_ids_are_echoed_exactly),
      cmocka_unit_test(an_overloaded_large_request_gets_its_id_from_anywhere_in_the_text),
      cmocka_unit_test(the_client_reports_server_errors_and_transport_errors_apart),
      cmocka_unit_test(call_text_answers_as_call_does_with_the_result_as_text),
      cmocka_unit_test(outputs_past_the_frame_limit_are_refused_before_they_run),
  };
  return harness_result(cmocka_run_group_tests(tests, setup, teardown));
}

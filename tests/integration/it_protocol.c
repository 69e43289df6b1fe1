/* it_protocol.c - the wire protocol against bad input (SPEC §6): each malformed frame gets its
 * error code with id null and the connection is closed; bad JSON and bad JSON-RPC get their
 * code and leave the connection usable; the daemon keeps serving everyone else throughout. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
  uint8_t h[VL_FRAME_HEADER_SIZE];
  header(h, 2, 0);
  memcpy(h, "HTTP", 4);
  raw_send(fd, h, sizeof h);
  raw_send(fd, "{}", 2);
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
      cmocka_unit_test(the_client_reports_server_errors_and_transport_errors_apart),
  };
  return harness_result(cmocka_run_group_tests(tests, setup, teardown));
}

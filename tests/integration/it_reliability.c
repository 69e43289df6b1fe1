/* it_reliability.c - the faults a hostile-client review found (reliability round 2), each
 * through a real viewlowerd: an empty tensor whose other sizes multiply past 63 bits is served
 * (no signed overflow). */
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

#define T40 "1099511627776" /* 2^40 */

static daemon_proc *start(const char *const *args) {
  daemon_proc *d = calloc(1, sizeof *d);
  assert_non_null(d);
  daemon_prepare(d);
  daemon_start(d, args);
  return d;
}

static void stop(daemon_proc *d) {
  int rc = daemon_finish(d);
  free(d);
  assert_int_equal(rc, 0);
}

/* Calls method with params (JSON text) and compares the printed result with want. */
static void expect_result(vl_client *c, const char *method, const char *params, const char *want) {
  cJSON *p = json(params), *res = NULL;
  vl_error err;
  vl_status s = vl_client_call(c, method, p, NULL, 0, &res, NULL, &err);
  cJSON_Delete(p);
  if (s != VL_OK) fail_msg("%s: %s %s: %s", method, vl_status_kind(s), err.path, err.message);
  char *got = cJSON_PrintUnformatted(res);
  cJSON_Delete(res);
  if (strcmp(got, want) != 0) fail_msg("%s\n got  %s\n want %s", method, got, want);
  free(got);
}

/* Point 1: strides of [0, 2^40, 2^40] once overflowed a signed multiply (a sanitizer build of
 * the daemon aborted); [2^40, 2^40, 0] was refused as "overflowing 63 bits" though empty. */
static void empty_tensor_with_huge_sizes_is_served(void **state) {
  (void)state;
  daemon_proc *d = start(NULL);
  vl_client *c = client_open(d);
  expect_result(c, "view_copy",
                "{\"input\":{\"dtype\":\"float32\",\"shape\":[0," T40 "," T40 "],\"values\":[]},"
                "\"size\":[" T40 ",0," T40 "],\"out_dim_order\":[2,1,0]}",
                "{\"output\":{\"dtype\":\"float32\",\"shape\":[" T40 ",0," T40 "],"
                "\"dim_order\":[2,1,0],\"values\":[]}}");
  expect_result(c, "view_copy",
                "{\"input\":{\"dtype\":\"int8\",\"shape\":[" T40 "," T40 ",0],"
                "\"dim_order\":[2,1,0],\"data\":\"\"},\"size\":[0," T40 "," T40 "],"
                "\"encoding\":\"base64\"}",
                "{\"output\":{\"dtype\":\"int8\",\"shape\":[0," T40 "," T40 "],"
                "\"dim_order\":[0,1,2],"
                "\"data\":\"\"}}");
  expect_result(c, "execute",
                "{\"graph\":{\"format\":\"viewlower.graph\",\"version\":1,\"nodes\":["
                "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\","
                "\"shape\":[0," T40 "," T40 "],\"strides\":[1," T40 ",1]}},"
                "{\"name\":\"p\",\"op\":\"call_function\",\"target\":\"aten.permute_copy.default\","
                "\"args\":[\"x\",[2,1,0]],\"val\":{\"dtype\":\"float32\","
                "\"shape\":[" T40 "," T40 ",0]}},"
                "{\"name\":\"out\",\"op\":\"output\",\"args\":[\"p\"]}]},"
                "\"inputs\":{\"x\":{\"dtype\":\"float32\",\"shape\":[0," T40 "," T40 "],"
                "\"dim_order\":[2,0,1],\"values\":[]}}}",
                "{\"outputs\":[{\"dtype\":\"float32\",\"shape\":[" T40 "," T40 ",0],"
                "\"dim_order\":[0,1,2],\"values\":[]}]}");
  vl_client_close(c);
  stop(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(empty_tensor_with_huge_sizes_is_served),
  };
  return harness_result(cmocka_run_group_tests(tests, NULL, NULL));
}

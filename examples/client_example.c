/* client_example.c - using libviewlower-client: connect to viewlowerd, ping it, and lower a
 * small graph whose view_copy the daemon can replace with a zero-copy memory.view.
 *
 *   client_example [SOCKET]      (default: $VIEWLOWER_SOCKET, then the usual places)
 *
 * Build against an installed library with:
 *   cc client_example.c $(pkg-config --cflags --libs viewlower-client) */
#include <stdio.h>
#include <stdlib.h>

#include "viewlower/client.h"

static const char graph_json[] =
    "{\"format\":\"viewlower.graph\",\"version\":1,\"name\":\"flatten\",\"nodes\":["
    "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\",\"shape\":[2,3,4]}},"
    "{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"aten.relu.default\",\"args\":[\"x\"],"
    "\"val\":{\"dtype\":\"float32\",\"shape\":[2,3,4]}},"
    "{\"name\":\"flat\",\"op\":\"call_function\",\"target\":\"aten.view_copy.default\","
    "\"args\":[\"y\",[2,12]],\"val\":{\"dtype\":\"float32\",\"shape\":[2,12]}},"
    "{\"name\":\"z\",\"op\":\"call_function\",\"target\":\"aten.mul.Tensor\","
    "\"args\":[\"flat\",2.0],\"val\":{\"dtype\":\"float32\",\"shape\":[2,12]}},"
    "{\"name\":\"out\",\"op\":\"output\",\"args\":[\"z\"]}]}";

/* Prints the failure as "what: [path: ]message" and returns 1. */
static int fail(const char *what, const vl_error *err) {
  char line[VL_ERROR_PATH_MAX + VL_ERROR_MESSAGE_MAX + 4];
  fprintf(stderr, "client_example: %s: %s (%s)\n", what, vl_error_format(err, line, sizeof line),
          vl_client_is_transport_error(err->code) ? "transport" : vl_status_kind(err->code));
  return 1;
}

static int lower_example(vl_client *c) {
  vl_error err;
  cJSON *graph = cJSON_Parse(graph_json);
  if (graph == NULL) {
    fprintf(stderr, "client_example: out of memory\n");
    return 1;
  }
  cJSON *result = NULL;
  vl_status s = vl_client_lower(c, graph, NULL, &result, &err);
  cJSON_Delete(graph);
  if (s != VL_OK) {
    return fail("lower", &err);
  }
  char *report = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(result, "report"));
  printf("report: %s\n", report != NULL ? report : "(out of memory)");
  free(report);
  cJSON_Delete(result);
  return 0;
}

int main(int argc, char **argv) {
  vl_client *c = NULL;
  vl_error err;
  if (vl_client_connect(argc > 1 ? argv[1] : NULL, 10000, &c, &err) != VL_OK) {
    return fail("connect", &err);
  }
  int rc = 0;
  char *version = NULL;
  if (vl_client_ping(c, &err) != VL_OK) {
    rc = fail("ping", &err);
  } else if (vl_client_version(c, &version, &err) != VL_OK) {
    rc = fail("version", &err);
  } else {
    printf("connected to viewlowerd %s\n", version);
    rc = lower_example(c);
  }
  free(version);
  vl_client_close(c);
  return rc;
}

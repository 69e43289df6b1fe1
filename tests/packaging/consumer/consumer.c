/* consumer.c - a program outside the tree, built against an installed viewlower: lowers a
 * graph with the core (libviewlower) and, given a socket, pings viewlowerd with the client
 * library. tests/packaging/install.sh builds it with find_package(viewlower) and with
 * pkg-config and checks its output line by line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <viewlower/client.h>
#include <viewlower/graph.h>
#include <viewlower/lower.h>
#include <viewlower/service.h>

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

static int lower_in_process(void) {
  vl_graph *g = NULL;
  vl_error err;
  vl_lower_options opts;
  vl_report report;
  memset(&report, 0, sizeof report);
  vl_lower_options_default(&opts);
  if (vl_graph_parse(graph_json, strlen(graph_json), NULL, &g, &err) != VL_OK ||
      vl_lower(g, &opts, &report, &err) != VL_OK) {
    fprintf(stderr, "consumer: %s: %s\n", err.path, err.message);
    vl_graph_free(g);
    return 1;
  }
  printf("core %s: replaced %u, bytes_saved %lld\n", vl_version(), (unsigned)report.replaced,
         (long long)report.bytes_saved);
  vl_report_clear(&report);
  vl_graph_free(g);
  return 0;
}

static int ping_daemon(const char *socket_path) {
  vl_client *c = NULL;
  vl_error err;
  char *version = NULL;
  if (vl_client_connect(socket_path, 5000, &c, &err) != VL_OK ||
      vl_client_ping(c, &err) != VL_OK || vl_client_version(c, &version, &err) != VL_OK) {
    fprintf(stderr, "consumer: %s\n", err.message);
    vl_client_close(c);
    return 1;
  }
  printf("client: pong from viewlowerd %s\n", version);
  free(version);
  vl_client_close(c);
  return 0;
}

int main(int argc, char **argv) {
  int rc = lower_in_process();
  if (rc == 0 && argc > 1) rc = ping_daemon(argv[1]);
  return rc;
}

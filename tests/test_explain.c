/* test_explain.c - viewlowerctl explain's printers (client/ctl_explain.c) in process, on graphs
 * too large to spawn the CLI for under a time bound: a node with very many distinct inputs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "ctl_explain.h"
#include "viewlower/service.h"

static double seconds_since(const struct timespec *t0) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* K uint8 placeholders and one cat of the K names given R times over (K * R references). */
static cJSON *wide_cat(uint32_t k, uint32_t r) {
  cJSON *g = cJSON_CreateObject();
  cJSON_AddStringToObject(g, "format", "viewlower.graph");
  cJSON_AddNumberToObject(g, "version", 1);
  cJSON *nodes = cJSON_AddArrayToObject(g, "nodes");
  cJSON *spec = cJSON_Parse("{\"dtype\":\"uint8\",\"shape\":[1]}");
  cJSON *cat = cJSON_CreateObject(), *list = cJSON_CreateArray(), *args = cJSON_CreateArray();
  for (uint32_t i = 0; i < k; i++) {
    char name[16];
    snprintf(name, sizeof name, "x%u", (unsigned)i);
    cJSON *n = cJSON_CreateObject();
    cJSON_AddStringToObject(n, "name", name);
    cJSON_AddItemToObjectCS(n, "op", cJSON_CreateStringReference("placeholder"));
    cJSON_AddItemToObject(n, "val", cJSON_Duplicate(spec, true));
    cJSON_AddItemToArray(nodes, n);
  }
  for (uint32_t j = 0; j < r; j++) {
    for (uint32_t i = 0; i < k; i++) {
      char name[16];
      snprintf(name, sizeof name, "x%u", (unsigned)i);
      cJSON_AddItemToArray(list, cJSON_CreateString(name));
    }
  }
  cJSON_AddItemToArray(args, list);
  cJSON_AddItemToArray(args, cJSON_CreateNumber(0));
  cJSON_AddStringToObject(cat, "name", "c");
  cJSON_AddStringToObject(cat, "op", "call_function");
  cJSON_AddStringToObject(cat, "target", "aten.cat.default");
  cJSON_AddItemToObject(cat, "args", args);
  cJSON *val = cJSON_AddObjectToObject(cat, "val"), *shape = cJSON_CreateArray();
  cJSON_AddStringToObject(val, "dtype", "uint8");
  cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)k * r));
  cJSON_AddItemToObject(val, "shape", shape);
  cJSON_AddItemToArray(nodes, cat);
  cJSON *out = cJSON_CreateObject(), *outs = cJSON_AddArrayToObject(out, "args");
  cJSON_AddStringToObject(out, "name", "out");
  cJSON_AddStringToObject(out, "op", "output");
  cJSON_AddItemToArray(outs, cJSON_CreateString("c"));
  cJSON_AddItemToArray(nodes, out);
  cJSON_Delete(spec);
  return g;
}

/* A cat of 200,000 distinct inputs, each given twice: the picture has one data edge per pair,
 * found by searching every edge already into the cat for each reference (400,000 searches of
 * up to 200,000 edges: about 6e10 steps, 20 s to 30 s); now by a mark per input. The edges
 * are still one per pair: the picture draws 200,000 into the cat. The graph stands for its own
 * lowering (nothing to replace), with the report of a small graph's. */
static void a_node_with_many_distinct_inputs_is_explained_in_linear_time(void **state) {
  (void)state;
  enum { K = 200000, R = 2 };
  cJSON *graph = wide_cat(K, R), *small = wide_cat(1, 1), *params = cJSON_CreateObject();
  cJSON *result = NULL;
  cJSON_AddItemToObject(params, "graph", small);
  vl_buf payload = {0};
  vl_error err;
  vl_status st = vl_service_call("lower", params, NULL, 0, NULL, &result, &payload, NULL, &err);
  if (st != VL_OK) fail_msg("lower: %s %s", err.path, err.message);
  cJSON_DeleteItemFromObjectCaseSensitive(result, "graph");
  assert_true(cJSON_AddItemReferenceToObject(result, "graph", graph));
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  assert_non_null(out);
  vl__explain_opts opts = {VL__EXPLAIN_DOT, VL__EXPLAIN_ALL, 80};
  char missing[256];
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  bool ok = vl__ctl_print_explain(out, graph, result, &opts, missing, sizeof missing);
  double secs = seconds_since(&t0);
  fclose(out);
  if (!ok) fail_msg("explain: missing %s", missing);
  /* linear: well under a second optimised (generous for sanitizer builds) */
  if (secs > 10.0) fail_msg("explain of a %d-input cat took %.3f s", K, secs);
  size_t edges = 0;
  for (size_t i = 0; i + 4 <= len; i++) edges += memcmp(text + i, " -> ", 4) == 0;
  assert_int_equal(edges, K + 1); /* into the cat, and the cat into the output */
  free(text);
  cJSON_Delete(result);
  vl_buf_free(&payload);
  cJSON_Delete(params);
  cJSON_Delete(graph);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_node_with_many_distinct_inputs_is_explained_in_linear_time),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

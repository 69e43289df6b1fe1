/* test_graph.c - graph JSON: parsing, strict validation with JSON pointers, printing back,
 * and linear behaviour on large graphs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "test_files.h"

#include "viewlower/graph.h"
#include "viewlower/lower.h"

#define HEAD "{\"format\":\"viewlower.graph\",\"version\":1,\"nodes\":["
#define X "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\",\"shape\":[2,3]}}"
#define OUT(a) "{\"name\":\"out\",\"op\":\"output\",\"args\":[\"" a "\"]}"

/* Parses text expecting failure with the given status, pointer and message fragment. */
static void expect_error(const char *json, vl_status code, const char *path, const char *msg) {
  vl_graph *g = NULL;
  vl_error err;
  vl_error_clear(&err);
  vl_status st = vl_graph_parse(json, strlen(json), NULL, &g, &err);
  if (st != code || strcmp(err.path, path) != 0 || strstr(err.message, msg) == NULL)
    fail_msg("for %s\n got %d %s: %s\n want %d %s: ...%s...", json, st, err.path, err.message, code,
             path, msg);
  assert_null(g);
}

static vl_graph *parse_ok(const char *json) {
  vl_graph *g = NULL;
  vl_error err;
  vl_status st = vl_graph_parse(json, strlen(json), NULL, &g, &err);
  if (st != VL_OK) fail_msg("%s: %s", err.path, err.message);
  return g;
}

static void the_patch_embed_example_parses_with_resolved_references(void **state) {
  (void)state;
  size_t len;
  char *text = vl_test_read_file(VL_EXAMPLES_DIR "/graphs/patch_embed.json", &len);
  vl_graph *g = NULL;
  vl_error err;
  assert_int_equal(vl_graph_parse(text, len, NULL, &g, &err), VL_OK);
  assert_int_equal(g->n_nodes, 5);
  assert_int_equal(g->output, 4);
  assert_string_equal(g->name, "patch_embed");
  const vl_node *flat = &g->nodes[2];
  assert_string_equal(flat->target, "aten.view_copy.default");
  assert_int_equal(flat->args[0].kind, VL_ARG_REF);
  assert_int_equal(flat->args[0].u.ref, 1);
  assert_int_equal(flat->args[1].kind, VL_ARG_LIST);
  assert_int_equal(flat->args[1].u.items[2].u.i, -1);
  assert_int_equal(g->nodes[1].val->dim_order[3], 1);
  /* users: x_cl is used by flat, flat by tokens, tokens by out */
  assert_int_equal(g->nodes[1].n_users, 1);
  assert_int_equal(g->nodes[1].users[0], 2);
  assert_int_equal(g->nodes[3].users[0], 4);
  vl_graph_free(g);
  free(text);
}

static void printing_then_parsing_gives_the_same_graph(void **state) {
  (void)state;
  static const char *files[] = {"patch_embed", "reshape_chain", "inplace_after_view",
                                "remove_view_copy_model"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    char path[512];
    size_t len;
    snprintf(path, sizeof path, "%s/graphs/%s.json", VL_EXAMPLES_DIR, files[i]);
    char *text = vl_test_read_file(path, &len);
    vl_graph *g = parse_ok(text);
    char *once = vl_graph_print(g);
    vl_graph *g2 = parse_ok(once);
    char *twice = vl_graph_print(g2);
    assert_string_equal(once, twice);
    vl_graph_free(g);
    vl_graph_free(g2);
    free(once);
    free(twice);
    free(text);
  }
}

static void printed_vals_carry_dtype_shape_and_dim_order(void **state) {
  (void)state;
  vl_graph *g = parse_ok(
      HEAD
      "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\",\"shape\":[8,1,3,3],"
      "\"strides\":[9,1,3,1],\"dynamic\":true}}," OUT("x") "]}");
  char *text = vl_graph_print(g);
  assert_non_null(strstr(text, "\"val\":{\"dtype\":\"float32\",\"shape\":[8,1,3,3],"
                               "\"dim_order\":[0,2,3,1],\"dynamic\":true}"));
  assert_non_null(strstr(text, "\"kind\":\"user_input\""));
  free(text);
  vl_graph_free(g);
}

static void literals_keep_their_kinds(void **state) {
  (void)state;
  vl_graph *g = parse_ok(
      HEAD X ",{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"my.op\","
             "\"args\":[\"x\",[1,[2.5,null]],true,-7],\"kwargs\":{\"mode\":\"fast\",\"alpha\":0.1},"
             "\"val\":{\"dtype\":\"float32\",\"shape\":[2,3]}}," OUT("y") "]}");
  const vl_node *y = &g->nodes[1];
  assert_int_equal(y->n_args, 4);
  assert_int_equal(y->args[1].u.items[1].u.items[0].kind, VL_ARG_FLOAT);
  assert_int_equal(y->args[1].u.items[1].u.items[1].kind, VL_ARG_NULL);
  assert_int_equal(y->args[2].kind, VL_ARG_BOOL);
  assert_int_equal(y->args[3].u.i, -7);
  assert_int_equal(vl_node_kwarg(y, "mode")->kind, VL_ARG_STRING);
  char *text = vl_graph_print(g);
  assert_non_null(strstr(text, "\"args\":[\"x\",[1,[2.5,null]],true,-7],"
                               "\"kwargs\":{\"mode\":\"fast\",\"alpha\":0.1}"));
  free(text);
  vl_graph_free(g);
}


/* A batch norm with three outputs read through getitems (docs/format.md §2). */
#define SPEC4 "{\"dtype\":\"float32\",\"shape\":[1,2,2,2]}"
#define SPEC1 "{\"dtype\":\"float32\",\"shape\":[2]}"
#define BN_X "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":" SPEC4 "}"
#define BN                                                                                         \
  "{\"name\":\"bn\",\"op\":\"call_function\",\"target\":\"aten.native_batch_norm.default\","     \
  "\"args\":[\"x\",null,null,null,null,false,0.1,1e-05],\"vals\":[" SPEC4 "," SPEC1 "," SPEC1   \
  "]}"
#define GETITEM(name, i, spec)                                                                     \
  "{\"name\":\"" name "\",\"op\":\"call_function\",\"target\":\"operator.getitem\","             \
  "\"args\":[\"bn\"," #i "],\"val\":" spec "}"

static void a_node_with_several_outputs_is_read_through_getitem(void **state) {
  (void)state;
  vl_graph *g = parse_ok(HEAD BN_X "," BN "," GETITEM("y", 0, SPEC4) "," GETITEM("m", 1, SPEC1)
                             "," OUT("y") "]}");
  const vl_node *bn = &g->nodes[1];
  assert_false(bn->has_val);
  assert_int_equal(bn->n_vals, 3);
  assert_int_equal(bn->vals[1].rank, 1);
  assert_int_equal(bn->vals[0].shape[3], 2);
  uint32_t producer = 0, index = 0;
  assert_true(vl_node_getitem(&g->nodes[3], &producer, &index));
  assert_int_equal(producer, 1);
  assert_int_equal(index, 1);
  assert_false(vl_node_getitem(bn, NULL, NULL));
  assert_int_equal(bn->n_users, 2);
  char *text = vl_graph_print(g);
  assert_non_null(strstr(text, "\"vals\":[{\"dtype\":\"float32\",\"shape\":[1,2,2,2],"
                               "\"dim_order\":[0,1,2,3]},{\"dtype\":\"float32\",\"shape\":[2],"
                               "\"dim_order\":[0]},{\"dtype\":\"float32\",\"shape\":[2],"
                               "\"dim_order\":[0]}]}"));
  assert_null(strstr(text, "\"name\":\"bn\",\"op\":\"call_function\",\"target\":"
                           "\"aten.native_batch_norm.default\",\"args\":[\"x\",null,null,null,"
                           "null,false,0.1,1e-05],\"val\""));
  vl_graph *g2 = parse_ok(text);
  char *again = vl_graph_print(g2);
  assert_string_equal(text, again);
  vl_graph *c = NULL;
  vl_error err;
  assert_int_equal(vl_graph_clone(g, &c, &err), VL_OK);
  assert_int_equal(c->nodes[1].n_vals, 3);
  assert_true(vl_spec_equal(&c->nodes[1].vals[2], &bn->vals[2]));
  vl_graph_free(c);
  free(again);
  free(text);
  vl_graph_free(g2);
  vl_graph_free(g);
}

static void misused_multi_output_nodes_are_invalid_graphs(void **state) {
  (void)state;
  /* Anything but a getitem's args[0] referencing the node: args, nested lists, the output. */
  expect_error(HEAD BN_X "," BN
               ",{\"name\":\"r\",\"op\":\"call_function\",\"target\":\"aten.relu.default\","
               "\"args\":[\"bn\"],\"val\":" SPEC4 "}," OUT("r") "]}",
               VL_ERR_INVALID_GRAPH, "/nodes/2/args/0", "has several outputs (vals)");
  expect_error(HEAD BN_X "," BN "," OUT("bn") "]}", VL_ERR_INVALID_GRAPH, "/nodes/2/args/0",
               "read one through operator.getitem");
  expect_error(HEAD BN_X "," BN
               ",{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"operator.getitem\","
               "\"args\":[[\"bn\"],0],\"val\":" SPEC4 "}," OUT("y") "]}",
               VL_ERR_INVALID_GRAPH, "/nodes/2/args/0/0", "has several outputs");
  expect_error(HEAD BN_X "," BN
               ",{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"operator.getitem\","
               "\"args\":[\"x\",\"bn\"],\"val\":" SPEC4 "}," OUT("y") "]}",
               VL_ERR_INVALID_GRAPH, "/nodes/2/args/1", "has several outputs");
  /* The index: an integer within the outputs. */
  expect_error(HEAD BN_X "," BN "," GETITEM("y", 3, SPEC4) "," OUT("y") "]}",
               VL_ERR_INVALID_GRAPH, "/nodes/2/args/1", "index 3 is out of range");
  expect_error(HEAD BN_X "," BN "," GETITEM("y", -1, SPEC4) "," OUT("y") "]}",
               VL_ERR_INVALID_GRAPH, "/nodes/2/args/1", "index -1 is out of range");
  expect_error(HEAD BN_X "," BN "," GETITEM("y", true, SPEC4) "," OUT("y") "]}",
               VL_ERR_INVALID_GRAPH, "/nodes/2/args/1", "must be an integer");
  expect_error(HEAD BN_X "," BN
               ",{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"operator.getitem\","
               "\"args\":[\"bn\"],\"val\":" SPEC4 "}," OUT("y") "]}",
               VL_ERR_INVALID_GRAPH, "/nodes/2/args", "takes [node, index]");
  /* Its val must be the output's spec. */
  expect_error(HEAD BN_X "," BN "," GETITEM("y", 1, SPEC4) "," OUT("y") "]}",
               VL_ERR_INVALID_GRAPH, "/nodes/2/val", "disagrees with /vals/1 of \"bn\"");
  expect_error(HEAD BN_X "," BN
               ",{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"operator.getitem\","
               "\"args\":[\"bn\",0],\"val\":{\"dtype\":\"float32\",\"shape\":[1,2,2,2],"
               "\"dim_order\":[0,2,3,1]}}," OUT("y") "]}",
               VL_ERR_INVALID_GRAPH, "/nodes/2/val", "disagrees with /vals/0");
  /* A getitem reads a node with vals; a node has val or vals, and vals lists something. */
  expect_error(HEAD BN_X
               ",{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"operator.getitem\","
               "\"args\":[\"x\",0],\"val\":" SPEC4 "}," OUT("y") "]}",
               VL_ERR_INVALID_GRAPH, "/nodes/1/args/0", "\"x\" has a single output (val)");
  expect_error(HEAD BN_X
               ",{\"name\":\"bn\",\"op\":\"call_function\",\"target\":\"my.op\",\"args\":[\"x\"],"
               "\"val\":" SPEC4 ",\"vals\":[" SPEC4 "]}," OUT("bn") "]}",
               VL_ERR_INVALID_GRAPH, "/nodes/1/vals", "either val or vals, not both");
  expect_error(HEAD BN_X
               ",{\"name\":\"bn\",\"op\":\"call_function\",\"target\":\"my.op\",\"args\":[\"x\"],"
               "\"vals\":[]}," OUT("x") "]}",
               VL_ERR_INVALID_GRAPH, "/nodes/1/vals", "at least one output");
  expect_error(HEAD BN_X
               ",{\"name\":\"bn\",\"op\":\"call_function\",\"target\":\"my.op\",\"args\":[\"x\"],"
               "\"vals\":[" SPEC4 ",{\"dtype\":\"float32\",\"shape\":[2],\"dim_order\":[1]}]},"
               OUT("x") "]}",
               VL_ERR_INVALID_GRAPH, "/nodes/1/vals/1/dim_order", "");
  expect_error(HEAD BN_X
               ",{\"name\":\"bn\",\"op\":\"call_function\",\"target\":\"my.op\",\"args\":[\"x\"],"
               "\"vals\":" SPEC4 "}," OUT("x") "]}",
               VL_ERR_INVALID_GRAPH, "/nodes/1/vals", "must be an array of tensor specs");
  expect_error(HEAD "{\"name\":\"x\",\"op\":\"placeholder\",\"vals\":[" SPEC4 "]}," OUT("x") "]}",
               VL_ERR_INVALID_GRAPH, "/nodes/0/vals", "a placeholder has no vals");
  expect_error(HEAD BN_X "," BN
               ",{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"operator.getitem\","
               "\"args\":[\"bn\",0],\"vals\":[" SPEC4 "]}," OUT("y") "]}",
               VL_ERR_INVALID_GRAPH, "/nodes/2/vals", "has one val, not vals");
  expect_error(HEAD BN_X "," BN
               ",{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"operator.getitem\","
               "\"args\":[\"bn\",0],\"kwargs\":{\"out\":\"x\"},\"val\":" SPEC4 "}," OUT("y") "]}",
               VL_ERR_INVALID_GRAPH, "/nodes/2/kwargs", "takes no kwargs");
  expect_error(HEAD BN_X "," BN
               ",{\"name\":\"v\",\"op\":\"call_function\",\"target\":\"memory.view\","
               "\"args\":[\"x\",[8]],\"alias_of\":\"bn\",\"val\":{\"dtype\":\"float32\","
               "\"shape\":[8]}}," OUT("v") "]}",
               VL_ERR_INVALID_GRAPH, "/nodes/2/alias_of", "has several outputs");
}

/* A write through getitem 0 is a write to output 0 of the batch norm: a view of it read after
 * the write is kept (base_mutated); the same view of output 1, never written, is replaced. */
static void writes_through_a_getitem_follow_its_storage(void **state) {
  (void)state;
  vl_graph *g = parse_ok(
      HEAD BN_X "," BN "," GETITEM("y", 0, SPEC4) "," GETITEM("m", 1, SPEC1)
      ",{\"name\":\"v\",\"op\":\"call_function\",\"target\":\"aten.view_copy.default\","
      "\"args\":[\"y\",[8]],\"val\":{\"dtype\":\"float32\",\"shape\":[8]}},"
      "{\"name\":\"w\",\"op\":\"call_function\",\"target\":\"aten.relu_.default\","
      "\"args\":[\"y\"],\"val\":" SPEC4 "},"
      "{\"name\":\"vm\",\"op\":\"call_function\",\"target\":\"aten.view_copy.default\","
      "\"args\":[\"m\",[1,2]],\"val\":{\"dtype\":\"float32\",\"shape\":[1,2]}},"
      "{\"name\":\"s\",\"op\":\"call_function\",\"target\":\"aten.add.Tensor\","
      "\"args\":[\"v\",\"w\"],\"val\":{\"dtype\":\"float32\",\"shape\":[8]}},"
      "{\"name\":\"t\",\"op\":\"call_function\",\"target\":\"aten.add.Tensor\","
      "\"args\":[\"vm\",\"vm\"],\"val\":{\"dtype\":\"float32\",\"shape\":[1,2]}},"
      "{\"name\":\"out\",\"op\":\"output\",\"args\":[\"s\",\"t\"]}]}");
  vl_lower_options o;
  vl_lower_options_default(&o);
  vl_report r;
  memset(&r, 0, sizeof r);
  vl_error err;
  assert_int_equal(vl_lower(g, &o, &r, &err), VL_OK);
  assert_int_equal(r.n_decisions, 2);
  assert_string_equal(r.decisions[0].node, "v");
  assert_false(r.decisions[0].replaced);
  assert_int_equal(r.decisions[0].reasons, 1u << VL_REASON_BASE_MUTATED);
  assert_string_equal(r.decisions[1].node, "vm");
  assert_true(r.decisions[1].replaced);
  const vl_node *vm = NULL;
  for (uint32_t i = 0; i < g->n_nodes; i++)
    if (strcmp(g->nodes[i].name, "vm") == 0) vm = &g->nodes[i];
  assert_non_null(vm);
  assert_string_equal(vm->target, "memory.view");
  assert_string_equal(g->nodes[vm->alias_of].name, "m");
  vl_report_clear(&r);
  vl_graph_free(g);
}

/* Two getitems of one output are one storage: a write through the second is a write to the
 * first, so a view of the first read after it is kept. */
static void two_getitems_of_one_output_share_storage(void **state) {
  (void)state;
  vl_graph *g = parse_ok(
      HEAD BN_X "," BN "," GETITEM("y", 0, SPEC4) "," GETITEM("y2", 0, SPEC4)
      ",{\"name\":\"v\",\"op\":\"call_function\",\"target\":\"aten.view_copy.default\","
      "\"args\":[\"y\",[8]],\"val\":{\"dtype\":\"float32\",\"shape\":[8]}},"
      "{\"name\":\"w\",\"op\":\"call_function\",\"target\":\"aten.relu_.default\","
      "\"args\":[\"y2\"],\"val\":" SPEC4 "},"
      "{\"name\":\"s\",\"op\":\"call_function\",\"target\":\"aten.add.Tensor\","
      "\"args\":[\"v\",\"v\"],\"val\":{\"dtype\":\"float32\",\"shape\":[8]}},"
      "{\"name\":\"out\",\"op\":\"output\",\"args\":[\"s\",\"w\"]}]}");
  vl_lower_options o;
  vl_lower_options_default(&o);
  vl_report r;
  memset(&r, 0, sizeof r);
  vl_error err;
  assert_int_equal(vl_lower(g, &o, &r, &err), VL_OK);
  assert_int_equal(r.n_decisions, 1);
  assert_false(r.decisions[0].replaced);
  assert_true(r.decisions[0].reasons & (1u << VL_REASON_BASE_MUTATED));
  vl_report_clear(&r);
  vl_graph_free(g);
}

/* Traced graphs with batch norm, max_pool2d_with_indices and layer norm (vals + getitem):
 * they validate, lower, and the lowered graph prints and parses back to the same text. */
static void real_traced_graphs_with_several_outputs_lower_and_print_back(void **state) {
  (void)state;
  static const char *files[] = {"resnet18_train_traced", "gpt_attention_edge"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    char path[512];
    size_t len;
    snprintf(path, sizeof path, "%s/%s.json", VL_TESTDATA_DIR, files[i]);
    char *text = vl_test_read_file(path, &len);
    vl_graph *g = parse_ok(text);
    uint32_t multi = 0, items = 0;
    for (uint32_t k = 0; k < g->n_nodes; k++) {
      multi += g->nodes[k].n_vals > 0;
      items += vl_node_getitem(&g->nodes[k], NULL, NULL);
    }
    assert_true(multi > 0);
    assert_true(items >= multi);
    vl_lower_options o;
    vl_lower_options_default(&o);
    vl_report r;
    memset(&r, 0, sizeof r);
    vl_error err;
    assert_int_equal(vl_lower(g, &o, &r, &err), VL_OK);
    char *once = vl_graph_print(g);
    vl_graph *g2 = parse_ok(once);
    char *twice = vl_graph_print(g2);
    assert_string_equal(once, twice);
    vl_report_clear(&r);
    vl_graph_free(g2);
    vl_graph_free(g);
    free(once);
    free(twice);
    free(text);
  }
}

/* One call node whose args and kwargs are the given JSON (a literal-only node on x). */
#define LIT(args, kwargs)                                                                          \
  HEAD X ",{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"my.op\",\"args\":[\"x\"," args  \
         "],\"kwargs\":{" kwargs "},\"val\":{\"dtype\":\"float32\",\"shape\":[2,3]}}," OUT("y") "]}"

static uint64_t bits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

/* docs/format.md §2: every literal class prints back with the same text (the input is in the
 * printer's own canonical form), and reads as the exact value. */
static void literals_are_exact_and_print_back_unchanged(void **state) {
  (void)state;
  static const char *const lits[] = {
      "9223372036854775807", "-9223372036854775808", "9007199254740993", "-9007199254740993",
      "0", "-1", "2.0", "-0.0", "0.30000000000000004", "1e-05", "0.1", "5e-324",
      "1.7976931348623157e+308", "1.2345678901234568e+17", "100.0", "1e+16", "123.456",
      "{\"float\":\"inf\"}", "{\"float\":\"-inf\"}", "{\"float\":\"nan\"}", "null", "true",
      "[9223372036854775807,[2.0,{\"float\":\"nan\"}],[]]"};
  for (size_t i = 0; i < sizeof lits / sizeof *lits; i++) {
    char json[1024], kw[256];
    snprintf(kw, sizeof kw, "\"k\":%s", lits[i]);
    snprintf(json, sizeof json,
             HEAD X ",{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"my.op\",\"args\":[\"x\","
                    "%s],\"kwargs\":{%s},\"val\":{\"dtype\":\"float32\",\"shape\":[2,3],"
                    "\"dim_order\":[0,1]}}," OUT("y") "]}",
             lits[i], kw);
    vl_graph *g = parse_ok(json);
    char *text = vl_graph_print(g);
    char want[512];
    snprintf(want, sizeof want, "\"args\":[\"x\",%s],\"kwargs\":{%s}", lits[i], kw);
    if (strstr(text, want) == NULL) fail_msg("%s printed as %s", lits[i], text);
    free(text);
    vl_graph_free(g);
  }
  vl_graph *g = parse_ok(LIT("9223372036854775807,-9223372036854775808,0.30000000000000004,-0.0,"
                             "2.0,{\"float\":\"nan\"},{\"float\":\"-inf\"},2,1E2,0.5e1",
                             ""));
  const vl_arg *a = g->nodes[1].args;
  assert_int_equal(a[1].kind, VL_ARG_INT);
  assert_true(a[1].u.i == INT64_MAX);
  assert_true(a[2].u.i == INT64_MIN);
  assert_int_equal(a[3].kind, VL_ARG_FLOAT);
  assert_true(bits(a[3].u.f) == UINT64_C(0x3FD3333333333334));
  assert_true(bits(a[4].u.f) == UINT64_C(0x8000000000000000));
  assert_int_equal(a[5].kind, VL_ARG_FLOAT);
  assert_true(a[5].u.f == 2.0);
  assert_true(a[6].u.f != a[6].u.f);
  assert_true(a[7].u.f < 0 && a[7].u.f * 0 != 0);
  assert_int_equal(a[8].kind, VL_ARG_INT);
  assert_int_equal(a[9].kind, VL_ARG_FLOAT);
  assert_int_equal(a[10].kind, VL_ARG_FLOAT);
  char *text = vl_graph_print(g);
  /* Other spellings of a float token come back in the shortest form, still as floats. */
  assert_non_null(strstr(text, ",2,100.0,5.0],"));
  free(text);
  vl_graph_free(g);
}

static void unrepresentable_literals_are_errors_naming_their_place(void **state) {
  (void)state;
  expect_error(LIT("[1,9223372036854775808]", ""), VL_ERR_INVALID_GRAPH, "/nodes/1/args/1/1",
               "integer 9223372036854775808 is outside the int64 range");
  expect_error(LIT("-9223372036854775809", ""), VL_ERR_INVALID_GRAPH, "/nodes/1/args/1",
               "outside the int64 range");
  expect_error(LIT("1", "\"end\":100000000000000000000"), VL_ERR_INVALID_GRAPH,
               "/nodes/1/kwargs/end", "outside the int64 range");
  expect_error(LIT("1e400", ""), VL_ERR_INVALID_GRAPH, "/nodes/1/args/1",
               "1e400 is beyond the range of a double");
  expect_error(LIT("1", "\"a\":[-1.5e999]"), VL_ERR_INVALID_GRAPH, "/nodes/1/kwargs/a/0",
               "beyond the range of a double");
  expect_error(LIT("{\"float\":\"1.5\"}", ""), VL_ERR_INVALID_GRAPH, "/nodes/1/args/1",
               "an object literal must be {\"float\": \"inf\"}");
  expect_error(LIT("{\"float\":\"inf\",\"x\":1}", ""), VL_ERR_INVALID_GRAPH, "/nodes/1/args/1",
               "an object literal must be");
  expect_error(LIT("{\"float\":1.5}", ""), VL_ERR_INVALID_GRAPH, "/nodes/1/args/1",
               "an object literal must be");
  expect_error(LIT("{}", ""), VL_ERR_INVALID_GRAPH, "/nodes/1/args/1", "an object literal must be");
  expect_error(HEAD BN_X "," BN "," GETITEM("y", 0.0, SPEC4) "," OUT("y") "]}",
               VL_ERR_INVALID_GRAPH, "/nodes/2/args/1", "must be an integer");
  /* Underflow is not an error: the nearest double of 1e-400 is 0. */
  vl_graph *g = parse_ok(LIT("1e-400", ""));
  assert_true(g->nodes[1].args[1].u.f == 0.0);
  vl_graph_free(g);
}

/* The fixture: INT64_MAX slices, 17-digit floats, a batch norm tuple; lowering replaces the
 * view_copy and changes no literal: every other node prints exactly as validate prints it. */
static void lowering_changes_no_literal(void **state) {
  (void)state;
  size_t len;
  char *text = vl_test_read_file(VL_TESTDATA_DIR "/fidelity.json", &len);
  vl_graph *g = parse_ok(text);
  char *before = vl_graph_print(g);
  vl_lower_options o;
  vl_lower_options_default(&o);
  o.fold = false; /* view_copy alone: with fold the whole-range slice becomes an alias too */
  vl_report r;
  memset(&r, 0, sizeof r);
  vl_error err;
  assert_int_equal(vl_lower(g, &o, &r, &err), VL_OK);
  assert_int_equal(r.replaced, 1);
  char *after = vl_graph_print(g);
  assert_non_null(strstr(before, "\"args\":[\"x\",0,0,9223372036854775807,1]"));
  assert_non_null(strstr(before, "\"args\":[\"getitem\",0.30000000000000004]"));
  const char *v_before = strstr(before, "{\"name\":\"v\"");
  const char *v_after = strstr(after, "{\"name\":\"v\"");
  assert_non_null(v_before);
  assert_non_null(v_after);
  /* Up to the rewritten node the texts agree; from the next node on, too. */
  assert_int_equal(v_before - before, v_after - after);
  assert_memory_equal(before, after, (size_t)(v_before - before));
  assert_string_equal(strstr(v_before, "{\"name\":\"lit\""), strstr(v_after, "{\"name\":\"lit\""));
  vl_report_clear(&r);
  vl_graph_free(g);
  free(before);
  free(after);
  free(text);
}

/* The parser reads one node at a time: a reference to a name no earlier node has is told
 * "defined later" or "unknown" from the rest of the document, and malformed JSON anywhere
 * wins over a graph error before it. */
static void streaming_errors_keep_their_precedence(void **state) {
  (void)state;
  expect_error(HEAD X ",{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"my.op\","
                      "\"args\":[[1,[\"z\"]]],\"val\":{\"dtype\":\"float32\",\"shape\":[2,3]}},"
                      "{\"name\":\"w\",\"op\":\"bogus\"},"
                      "{\"args\":[],\"op\":\"placeholder\",\"name\":\"z\"}," OUT("y") "]}",
               VL_ERR_INVALID_GRAPH, "/nodes/1/args/0/1/0", "\"z\" is defined later");
  expect_error(HEAD X ",{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"my.op\","
                      "\"args\":[\"z\"],\"val\":{\"dtype\":\"float32\",\"shape\":[2,3]}},"
                      "{\"name\":\"w\",\"op\":\"bogus\"}," OUT("y") "]}",
               VL_ERR_INVALID_GRAPH, "/nodes/1/args/0", "unknown node \"z\"");
  expect_error(HEAD X ",{\"name\":\"y\",\"op\":\"bogus\"},{\"name\":\"z\",\"op\":[1,}," OUT("x") "]}",
               VL_ERR_PARSE, "", "malformed JSON at byte");
  expect_error(HEAD X ",{\"name\":\"y\",\"op\":\"bogus\"}," OUT("x") "]} x", VL_ERR_PARSE, "",
               "trailing data");
  /* Keys in any order; the header after the nodes. */
  vl_graph *g = parse_ok("{\"nodes\":[{\"val\":{\"shape\":[2],\"dtype\":\"int64\"},\"op\":"
                         "\"placeholder\",\"name\":\"x\"},{\"args\":[\"x\"],\"op\":\"output\","
                         "\"name\":\"out\"}],\"version\":1,\"name\":\"late\",\"format\":"
                         "\"viewlower.graph\"}");
  assert_string_equal(g->name, "late");
  assert_int_equal(g->n_nodes, 2);
  vl_graph_free(g);
  expect_error("{\"nodes\":[" OUT("x") "],\"version\":1}", VL_ERR_INVALID_GRAPH, "/nodes/0/args/0",
               "unknown node \"x\"");
  expect_error("{\"nodes\":[" X "," OUT("x") "],\"version\":1}", VL_ERR_INVALID_GRAPH, "/format",
               "unknown format");
  expect_error(HEAD X "," OUT("x") "],\"nodes\":[]}", VL_ERR_INVALID_GRAPH, "/nodes",
               "duplicate key \"nodes\"");
  expect_error("[1,2]", VL_ERR_INVALID_GRAPH, "", "a graph must be a JSON object");
  expect_error("[1,2", VL_ERR_PARSE, "", "malformed JSON");
  /* Strict RFC 8259 numbers and escapes. */
  expect_error(HEAD X ",{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"my.op\","
                      "\"args\":[01],\"val\":{\"dtype\":\"float32\",\"shape\":[2,3]}}," OUT("y") "]}",
               VL_ERR_PARSE, "", "malformed JSON");
  expect_error(HEAD X ",{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"my.op\","
                      "\"args\":[1.],\"val\":{\"dtype\":\"float32\",\"shape\":[2,3]}}," OUT("y") "]}",
               VL_ERR_PARSE, "", "malformed JSON");
  expect_error(HEAD "{\"name\":\"\\ud800\",\"op\":\"placeholder\"}]}", VL_ERR_PARSE, "",
               "malformed JSON");
  g = parse_ok(HEAD "{\"name\":\"\\u00e9\\ud83d\\ude00\\n\",\"op\":\"placeholder\",\"val\":"
                    "{\"dtype\":\"bool\",\"shape\":[]}},{\"name\":\"out\",\"op\":\"output\","
                    "\"args\":[\"\\u00e9\\ud83d\\ude00\\n\"]}]}");
  assert_string_equal(g->nodes[0].name, "\xc3\xa9\xf0\x9f\x98\x80\n");
  char *text = vl_graph_print(g);
  assert_non_null(strstr(text, "\"name\":\"\xc3\xa9\xf0\x9f\x98\x80\\n\""));
  free(text);
  vl_graph_free(g);
}

static void structural_errors_name_the_place(void **state) {
  (void)state;
  expect_error("{\"format\":\"onnx\",\"version\":1,\"nodes\":[]}", VL_ERR_INVALID_GRAPH, "/format",
               "unknown format");
  expect_error("{\"format\":\"viewlower.graph\",\"version\":2,\"nodes\":[]}", VL_ERR_INVALID_GRAPH,
               "/version", "unsupported version");
  expect_error("{\"format\":\"viewlower.graph\",\"version\":1,\"nodes\":[],\"extra\":1}",
               VL_ERR_INVALID_GRAPH, "/extra", "unknown key");
  expect_error(
      "{\"format\":\"viewlower.graph\",\"format\":\"viewlower.graph\",\"version\":1,\"nodes\":[]}",
      VL_ERR_INVALID_GRAPH, "/format", "duplicate key");
  expect_error(HEAD X "," X "," OUT("x") "]}", VL_ERR_INVALID_GRAPH, "/nodes/1/name",
               "duplicate name \"x\"");
  expect_error(HEAD "{\"op\":\"placeholder\"}]}", VL_ERR_INVALID_GRAPH, "/nodes/0/name",
               "is required");
  expect_error(HEAD X "," OUT("nope") "]}", VL_ERR_INVALID_GRAPH, "/nodes/1/args/0",
               "unknown node \"nope\"");
  expect_error(HEAD X ",{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"aten.relu.default\","
                      "\"args\":[\"z\"],\"val\":{\"dtype\":\"float32\",\"shape\":[2,3]}},"
                      "{\"name\":\"z\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\","
                      "\"shape\":[2,3]}}," OUT("y") "]}",
               VL_ERR_INVALID_GRAPH, "/nodes/1/args/0", "defined later");
  expect_error(HEAD X "," OUT("x") ",{\"name\":\"out2\",\"op\":\"output\",\"args\":[\"x\"]}]}",
               VL_ERR_INVALID_GRAPH, "/nodes/1/op", "must be the last");
  expect_error(HEAD X "]}", VL_ERR_INVALID_GRAPH, "/nodes/0/op", "last node must be the output");
  expect_error(HEAD X ",{\"name\":\"y\",\"op\":\"call\"}," OUT("x") "]}", VL_ERR_INVALID_GRAPH,
               "/nodes/1/op", "must be placeholder");
  expect_error(HEAD X
               ",{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"relu\",\"args\":[\"x\"],"
               "\"val\":{\"dtype\":\"float32\",\"shape\":[2,3]}}," OUT("y") "]}",
               VL_ERR_INVALID_GRAPH, "/nodes/1/target", "namespace.operator");
  expect_error(
      HEAD X ",{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"a.b\",\"args\":[\"x\"]}," OUT(
          "y") "]}",
      VL_ERR_INVALID_GRAPH, "/nodes/1/val", "is required");
  expect_error("{\"format\":", VL_ERR_PARSE, "", "malformed JSON");
  expect_error(HEAD X "," OUT("x") "]} trailing", VL_ERR_PARSE, "", "trailing data");
}

static void spec_errors_name_the_field(void **state) {
  (void)state;
  expect_error(
      HEAD
      "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float\",\"shape\":[2]}}," OUT(
          "x") "]}",
      VL_ERR_INVALID_GRAPH, "/nodes/0/val/dtype", "unknown dtype");
  expect_error(
      HEAD "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"int8\",\"shape\":[2,3,4,5],"
           "\"dim_order\":[0,1,1,3]}}," OUT("x") "]}",
      VL_ERR_INVALID_GRAPH, "/nodes/0/val/dim_order", "not a permutation of 0..3");
  expect_error(HEAD
               "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"int8\",\"shape\":[2,3],"
               "\"dim_order\":[0]}}," OUT("x") "]}",
               VL_ERR_INVALID_GRAPH, "/nodes/0/val/dim_order", "has 1 entries but the rank is 2");
  expect_error(
      HEAD
      "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"int8\",\"shape\":[2,-3]}}," OUT(
          "x") "]}",
      VL_ERR_INVALID_GRAPH, "/nodes/0/val/shape/1", "must not be negative");
  expect_error(HEAD
               "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"int8\",\"shape\":[2,3],"
               "\"strides\":[4,1]}}," OUT("x") "]}",
               VL_ERR_INVALID_GRAPH, "/nodes/0/val/strides", "not dense");
  expect_error(HEAD "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"int8\","
                    "\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}}," OUT("x") "]}",
               VL_ERR_INVALID_GRAPH, "/nodes/0/val/shape", "rank 17 exceeds");
  expect_error(HEAD "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"int8\","
                    "\"shape\":[4294967296,4294967296]}}," OUT("x") "]}",
               VL_ERR_INVALID_GRAPH, "/nodes/0/val/shape", "overflows");
  expect_error(
      HEAD
      "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"int8\",\"shape\":[2.5]}}," OUT(
          "x") "]}",
      VL_ERR_INVALID_GRAPH, "/nodes/0/val/shape/0", "whole number");
  /* 2^62 fits int64 but not the +-2^53 every reader keeps: the range named is that one. */
  expect_error(HEAD "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"int8\","
                    "\"shape\":[4611686018427387904]}}," OUT("x") "]}",
               VL_ERR_INVALID_GRAPH, "/nodes/0/val/shape/0",
               "must be a whole number in [0, 9007199254740992]");
}

#define CL "\"val\":{\"dtype\":\"float32\",\"shape\":[1,2,2,3],\"dim_order\":[0,2,3,1]}"

static void layout_spelling_must_follow_skip_dim_order(void **state) {
  (void)state;
  expect_error(
      HEAD
      "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\",\"shape\":[1,2,2,3]}},"
      "{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"aten._to_copy.default\",\"args\":["
      "\"x\"],"
      "\"kwargs\":{\"memory_format\":\"channels_last\"}," CL "}," OUT("y") "]}",
      VL_ERR_INVALID_GRAPH, "/nodes/1/kwargs/memory_format", "skip_dim_order is false");
  expect_error(
      "{\"format\":\"viewlower.graph\",\"version\":1,\"skip_dim_order\":true,\"nodes\":["
      "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\",\"shape\":[1,2,2,3]}},"
      "{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"dim_order_ops._to_dim_order_copy."
      "default\","
      "\"args\":[\"x\"],\"kwargs\":{\"dim_order\":[0,2,3,1]}," CL "}," OUT("y") "]}",
      VL_ERR_INVALID_GRAPH, "/nodes/1/target", "skip_dim_order is true");
  vl_graph *g = parse_ok(
      HEAD
      "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\",\"shape\":[1,2,2,3]}},"
      "{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"aten.clone.default\",\"args\":[\"x\"],"
      "\"kwargs\":{\"memory_format\":\"preserve_format\"},\"val\":{\"dtype\":\"float32\",\"shape\":"
      "[1,2,2,3]}}," OUT("y") "]}");
  vl_graph_free(g);
}

/* Parses text expecting failure with exactly this status, pointer and message. */
static void expect_exact_error(const char *json, vl_status code, const char *path,
                               const char *msg) {
  vl_graph *g = NULL;
  vl_error err;
  vl_error_clear(&err);
  vl_status st = vl_graph_parse(json, strlen(json), NULL, &g, &err);
  if (st != code || strcmp(err.path, path) != 0 || strcmp(err.message, msg) != 0)
    fail_msg("for %s\n got %d %s: %s\n want %d %s: %s", json, st, err.path, err.message, code, path,
             msg);
  assert_null(g);
}

/* A graph (head: its opening up to the node list) in which y converts a contiguous [1,2,2,3] x
 * with the given target, kwargs and val. */
#define CONVERT_IN(head, target, kwargs, val)                                                      \
  head "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\",\"shape\":[1,2,2,"   \
       "3]}},{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"" target "\",\"args\":[\"x\"]," \
       "\"kwargs\":{" kwargs "}," val "}," OUT("y") "]}"
#define CONVERT(target, kwargs, val) CONVERT_IN(HEAD, target, kwargs, val)
#define TO_DIM_ORDER "dim_order_ops._to_dim_order_copy.default"
#define CLONE_DIM_ORDER "dim_order_ops._clone_dim_order.default"
#define TO_COPY "aten._to_copy.default"
#define F32 "\"val\":{\"dtype\":\"float32\",\"shape\":[1,2,2,3]}"

/* kwargs.dim_order (and _to_dim_order_copy's kwargs.dtype) say what the node writes: when
 * given they must be what val declares, or the graph says two things (val won, silently). */
static void layout_conversion_kwargs_must_agree_with_val(void **state) {
  (void)state;
  expect_exact_error(CONVERT(TO_DIM_ORDER, "\"dim_order\":[5,6,7,8]", CL), VL_ERR_INVALID_GRAPH,
                     "/nodes/1/kwargs/dim_order", "not a permutation of 0..3");
  expect_exact_error(CONVERT(CLONE_DIM_ORDER, "\"dim_order\":[0,2,2,1]", CL), VL_ERR_INVALID_GRAPH,
                     "/nodes/1/kwargs/dim_order", "not a permutation of 0..3");
  expect_exact_error(CONVERT(TO_DIM_ORDER, "\"dim_order\":[5,6,7]", CL), VL_ERR_INVALID_GRAPH,
                     "/nodes/1/kwargs/dim_order", "has 3 entries but val's rank is 4");
  expect_exact_error(CONVERT(CLONE_DIM_ORDER, "\"dim_order\":[]", CL), VL_ERR_INVALID_GRAPH,
                     "/nodes/1/kwargs/dim_order", "has 0 entries but val's rank is 4");
  expect_exact_error(CONVERT(TO_DIM_ORDER, "\"dim_order\":[0,1,2,3]", CL), VL_ERR_INVALID_GRAPH,
                     "/nodes/1/kwargs/dim_order",
                     "[0,1,2,3] disagrees with val's dim_order [0,2,3,1] (the layout the node "
                     "writes)");
  expect_exact_error(CONVERT(CLONE_DIM_ORDER, "\"dim_order\":[0,2,3,1]",
                             "\"val\":{\"dtype\":\"float32\",\"shape\":[1,2,2,3]}"),
                     VL_ERR_INVALID_GRAPH, "/nodes/1/kwargs/dim_order",
                     "[0,2,3,1] disagrees with val's dim_order [0,1,2,3] (the layout the node "
                     "writes)");
  expect_exact_error(CONVERT(TO_DIM_ORDER, "\"dim_order\":[0,2.0,3,1]", CL), VL_ERR_INVALID_GRAPH,
                     "/nodes/1/kwargs/dim_order/1", "a dim must be an integer");
  expect_exact_error(CONVERT(TO_DIM_ORDER, "\"dim_order\":\"channels_last\"", CL),
                     VL_ERR_INVALID_GRAPH, "/nodes/1/kwargs/dim_order",
                     "must be a list of integers");
  expect_exact_error(CONVERT(TO_DIM_ORDER, "\"dtype\":\"float16\",\"dim_order\":[0,2,3,1]", CL),
                     VL_ERR_INVALID_GRAPH, "/nodes/1/kwargs/dtype",
                     "float16 disagrees with val's dtype float32 (the dtype the node writes)");
  expect_exact_error(CONVERT(TO_DIM_ORDER, "\"dtype\":\"torch.float32\"", CL), VL_ERR_INVALID_GRAPH,
                     "/nodes/1/kwargs/dtype",
                     "unknown dtype (expected one of uint8 int8 int16 int32 int64 float16 "
                     "bfloat16 float32 float64 bool, or null)");
  /* aten._to_copy's kwargs.dtype too: a float32 val with a float16 kwarg was an identity to the
   * lowering (layout-only: no dtype change) and became an alias of x */
  expect_exact_error(CONVERT(TO_COPY, "\"dtype\":\"float16\"", F32), VL_ERR_INVALID_GRAPH,
                     "/nodes/1/kwargs/dtype",
                     "float16 disagrees with val's dtype float32 (the dtype the node writes)");
  expect_exact_error(CONVERT(TO_COPY, "\"dtype\":\"torch.float32\"", F32), VL_ERR_INVALID_GRAPH,
                     "/nodes/1/kwargs/dtype",
                     "unknown dtype (expected one of uint8 int8 int16 int32 int64 float16 "
                     "bfloat16 float32 float64 bool, or null)");
  /* agreeing, absent or null kwargs validate */
  static const char *const ok[] = {
      CONVERT(TO_COPY, "\"dtype\":\"float32\"", F32),
      CONVERT(TO_COPY, "\"dtype\":null", F32),
      CONVERT(TO_COPY, "\"dtype\":\"float16\"",
              "\"val\":{\"dtype\":\"float16\",\"shape\":[1,2,2,3]}"),
      CONVERT(TO_DIM_ORDER, "\"dim_order\":[0,2,3,1]", CL),
      CONVERT(TO_DIM_ORDER, "\"dtype\":\"float32\",\"dim_order\":[0,2,3,1]", CL),
      CONVERT(TO_DIM_ORDER, "\"dtype\":null,\"dim_order\":null", CL),
      CONVERT(TO_DIM_ORDER, "", CL),
      CONVERT(CLONE_DIM_ORDER, "\"dim_order\":[0,2,3,1]", CL),
      CONVERT(CLONE_DIM_ORDER, "\"dim_order\":[0,1,2,3]",
              "\"val\":{\"dtype\":\"float32\",\"shape\":[1,2,2,3],\"strides\":[12,6,3,1]}"),
      /* a dtype change is _to_dim_order_copy's to make */
      CONVERT(TO_DIM_ORDER, "\"dtype\":\"float16\",\"dim_order\":[0,2,3,1]",
              "\"val\":{\"dtype\":\"float16\",\"shape\":[1,2,2,3],\"dim_order\":[0,2,3,1]}"),
  };
  for (size_t k = 0; k < sizeof ok / sizeof *ok; k++) vl_graph_free(parse_ok(ok[k]));
  /* the same strides with the size-1 dims elsewhere (PyTorch's [1,C,1,1] channels-last, its
   * strides read back in the default order) are the same layout */
  vl_graph_free(parse_ok(
      HEAD "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\",\"shape\":[1,4,1,"
           "1]}},{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"" CLONE_DIM_ORDER "\","
           "\"args\":[\"x\"],\"kwargs\":{\"dim_order\":[0,2,3,1]},\"val\":{\"dtype\":\"float32\","
           "\"shape\":[1,4,1,1],\"strides\":[4,1,4,4]}}," OUT("y") "]}"));
}

/* The skip_dim_order spelling: aten._to_copy or aten.clone with kwargs.memory_format. */
#define HEAD_SKIP                                                                                  \
  "{\"format\":\"viewlower.graph\",\"version\":1,\"skip_dim_order\":true,\"nodes\":["
#define CONVERT_SKIP(target, kwargs, val) CONVERT_IN(HEAD_SKIP, target, kwargs, val)
#define CLONE "aten.clone.default"

/* kwargs.memory_format says what the node writes as kwargs.dim_order does: one of the four
 * names, and, but for preserve_format, val's layout. "foo", channels_last on a contiguous val
 * and channels_last_3d on a rank-4 one all validated (val won, silently). */
static void memory_format_must_agree_with_val(void **state) {
  (void)state;
  expect_exact_error(CONVERT_SKIP(CLONE, "\"memory_format\":\"foo\"", F32), VL_ERR_INVALID_GRAPH,
                     "/nodes/1/kwargs/memory_format",
                     "unknown memory_format (expected one of contiguous_format channels_last "
                     "channels_last_3d preserve_format, or null)");
  expect_exact_error(CONVERT_SKIP(TO_COPY, "\"memory_format\":3", F32), VL_ERR_INVALID_GRAPH,
                     "/nodes/1/kwargs/memory_format",
                     "unknown memory_format (expected one of contiguous_format channels_last "
                     "channels_last_3d preserve_format, or null)");
  expect_exact_error(CONVERT_SKIP(CLONE, "\"memory_format\":\"channels_last\"", F32),
                     VL_ERR_INVALID_GRAPH, "/nodes/1/kwargs/memory_format",
                     "channels_last disagrees with val's dim_order [0,1,2,3] (the layout the "
                     "node writes)");
  expect_exact_error(CONVERT_SKIP(TO_COPY, "\"memory_format\":\"contiguous_format\"", CL),
                     VL_ERR_INVALID_GRAPH, "/nodes/1/kwargs/memory_format",
                     "contiguous_format disagrees with val's dim_order [0,2,3,1] (the layout the "
                     "node writes)");
  expect_exact_error(CONVERT_SKIP(TO_COPY, "\"memory_format\":\"channels_last_3d\"", CL),
                     VL_ERR_INVALID_GRAPH, "/nodes/1/kwargs/memory_format",
                     "channels_last_3d needs rank 5 but val's rank is 4");
  static const char *const ok[] = {
      CONVERT_SKIP(CLONE, "\"memory_format\":\"channels_last\"", CL),
      CONVERT_SKIP(TO_COPY, "\"memory_format\":\"channels_last\"", CL),
      CONVERT_SKIP(CLONE, "\"memory_format\":\"contiguous_format\"", F32),
      CONVERT_SKIP(TO_COPY, "\"dtype\":\"float32\",\"memory_format\":\"contiguous_format\"", F32),
      CONVERT_SKIP(CLONE, "\"memory_format\":\"preserve_format\"", CL),
      CONVERT_SKIP(CLONE, "\"memory_format\":\"preserve_format\"", F32),
      CONVERT_SKIP(TO_COPY, "\"memory_format\":null", CL),
      CONVERT_SKIP(CLONE, "", CL),
  };
  for (size_t k = 0; k < sizeof ok / sizeof *ok; k++) vl_graph_free(parse_ok(ok[k]));
  /* PyTorch's channels-last [1,C,1,1], its strides read back in the default order */
  vl_graph_free(parse_ok(
      HEAD_SKIP
      "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\",\"shape\":[1,4,1,1]}},"
      "{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"" CLONE "\",\"args\":[\"x\"],"
      "\"kwargs\":{\"memory_format\":\"channels_last\"},\"val\":{\"dtype\":\"float32\","
      "\"shape\":[1,4,1,1],\"strides\":[4,1,4,4]}}," OUT("y") "]}"));
  /* and a rank-5 channels_last_3d */
  vl_graph_free(parse_ok(
      HEAD_SKIP
      "{\"name\":\"x\",\"op\":\"placeholder\","
      "\"val\":{\"dtype\":\"float32\",\"shape\":[1,2,2,2,3]}},"
      "{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"" TO_COPY "\",\"args\":[\"x\"],"
      "\"kwargs\":{\"memory_format\":\"channels_last_3d\"},\"val\":{\"dtype\":\"float32\","
      "\"shape\":[1,2,2,2,3],\"dim_order\":[0,2,3,4,1]}}," OUT("y") "]}"));
}

#define VIEW(args, val)                                                                            \
  ",{\"name\":\"v\",\"op\":\"call_function\",\"target\":\"aten.view_copy.default\",\"args\":" args \
  ",\"val\":" val "}," OUT("v") "]}"

static void view_copy_nodes_must_agree_with_their_size_and_base(void **state) {
  (void)state;
  expect_error(HEAD X VIEW("[\"x\",[3,3]]", "{\"dtype\":\"float32\",\"shape\":[3,3]}"),
               VL_ERR_INVALID_GRAPH, "/nodes/1/val/shape", "9 elements but the base x has 6");
  expect_error(HEAD X VIEW("[\"x\",[3,2]]", "{\"dtype\":\"int32\",\"shape\":[3,2]}"),
               VL_ERR_INVALID_GRAPH, "/nodes/1/val/dtype", "differs from the base");
  expect_error(HEAD X VIEW("[\"x\",[6]]", "{\"dtype\":\"float32\",\"shape\":[3,2]}"),
               VL_ERR_INVALID_GRAPH, "/nodes/1/val/shape", "disagrees with the size argument");
  expect_error(HEAD X VIEW("[\"x\",[-1,-1]]", "{\"dtype\":\"float32\",\"shape\":[3,2]}"),
               VL_ERR_INVALID_GRAPH, "/nodes/1/args/1", "only one size may be -1");
  expect_error(HEAD X VIEW("[\"x\",[-3,-2]]", "{\"dtype\":\"float32\",\"shape\":[3,2]}"),
               VL_ERR_INVALID_GRAPH, "/nodes/1/args/1", "negative");
  vl_graph *g = parse_ok(HEAD X VIEW("[\"x\",[3,-1]]", "{\"dtype\":\"float32\",\"shape\":[3,2]}"));
  vl_graph_free(g);
}

/* An in-place result (and an out= result) is its written argument's storage: a val that
 * declares another layout would let a view of it be judged on a layout the storage does not
 * have (a channels-last clone written by add_ and declared contiguous was aliased as
 * contiguous, and verify found wrong values). */
#define CL4 "{\"dtype\":\"float32\",\"shape\":[1,2,2,3],\"dim_order\":[0,2,3,1]}"
#define WRITTEN(node, val)                                                                 \
  HEAD "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":" CL4 "},"                          \
       "{\"name\":\"y\",\"op\":\"call_function\",\"target\":" node ",\"val\":" val "}," OUT("y") \
       "]}"

static void an_in_place_result_has_its_written_arguments_layout(void **state) {
  (void)state;
  expect_error(WRITTEN("\"aten.add_.Tensor\",\"args\":[\"x\",1]",
                       "{\"dtype\":\"float32\",\"shape\":[1,2,2,3]}"),
               VL_ERR_INVALID_GRAPH, "/nodes/1/val",
               "y writes x in place, so its result is that storage: it must have x's layout, "
               "dim_order [0,2,3,1], not dim_order [0,1,2,3]");
  expect_error(WRITTEN("\"aten.relu_.default\",\"args\":[\"x\"]",
                       "{\"dtype\":\"float64\",\"shape\":[1,2,2,3],\"dim_order\":[0,2,3,1]}"),
               VL_ERR_INVALID_GRAPH, "/nodes/1/val", "it must have x's dtype float32, not float64");
  expect_error(WRITTEN("\"aten.relu_.default\",\"args\":[\"x\"]",
                       "{\"dtype\":\"float32\",\"shape\":[1,3,2,2],\"dim_order\":[0,2,3,1]}"),
               VL_ERR_INVALID_GRAPH, "/nodes/1/val",
               "it must have x's shape [1,2,2,3], not [1,3,2,2]");
  expect_error(WRITTEN("\"aten.add.Tensor\",\"args\":[\"x\",1],\"kwargs\":{\"out\":\"x\"}",
                       "{\"dtype\":\"float32\",\"shape\":[1,2,2,3]}"),
               VL_ERR_INVALID_GRAPH, "/nodes/1/val", "y writes x in place");
  /* the same strides spelled with another order of the size-1 dims are the same storage */
  vl_graph *g = parse_ok(
      WRITTEN("\"aten.relu_.default\",\"args\":[\"x\"]",
              "{\"dtype\":\"float32\",\"shape\":[1,2,2,3],\"dim_order\":[2,3,1,0]}"));
  vl_graph_free(g);
  g = parse_ok(WRITTEN("\"aten.relu_.default\",\"args\":[\"x\"]", CL4));
  vl_graph_free(g);
}

/* Parsing alone skips the validation step: a view whose val disagrees with its base is read
 * and printed back as it stands, while vl_graph_parse refuses it. Structural errors (a
 * reference to an unknown name) still fail. */
static void unvalidated_parsing_reads_what_validation_refuses(void **state) {
  (void)state;
  const char *text = HEAD X VIEW("[\"x\",[3,3]]", "{\"dtype\":\"float32\",\"shape\":[3,3]}");
  expect_error(text, VL_ERR_INVALID_GRAPH, "/nodes/1/val/shape", "9 elements but the base x has 6");
  vl_graph *g = NULL;
  vl_error err;
  assert_int_equal(vl_graph_parse_unvalidated(text, strlen(text), NULL, &g, &err), VL_OK);
  assert_int_equal(g->n_nodes, 3);
  assert_int_equal(g->nodes[1].val->shape[0], 3);
  assert_int_equal(g->nodes[1].val->shape[1], 3);
  char *printed = vl_graph_print(g);
  assert_non_null(printed);
  assert_non_null(strstr(printed, "\"name\":\"v\""));
  assert_non_null(strstr(printed, "\"shape\":[3,3]"));
  free(printed);
  vl_graph_free(g);
  const char *unknown = HEAD X VIEW("[\"y\",[6]]", "{\"dtype\":\"float32\",\"shape\":[6]}");
  g = NULL;
  assert_int_equal(vl_graph_parse_unvalidated(unknown, strlen(unknown), NULL, &g, &err),
                   VL_ERR_INVALID_GRAPH);
  assert_string_equal(err.path, "/nodes/1/args/0");
  assert_null(g);
}

/* cJSON takes raw control bytes for whitespace, or keeps them in strings; JSON does not. */
static void raw_control_bytes_are_malformed_json(void **state) {
  (void)state;
  expect_error("{\"format\":\"viewlower.graph\",\x01\"version\":1,\"nodes\":[]}", VL_ERR_PARSE, "",
               "malformed JSON at byte 28: control character 0x01");
  expect_error("{\"format\":\"viewlower\x7f.graph\",\"version\":1,\"nodes\":[]}",
               VL_ERR_INVALID_GRAPH, "/format", "");
  expect_error("{\"format\":\"viewlower\x1f.graph\",\"version\":1,\"nodes\":[]}", VL_ERR_PARSE, "",
               "malformed JSON at byte 20: control character 0x1f");
}

static void mutates_and_out_must_name_arguments(void **state) {
  (void)state;
  expect_error(
      HEAD X ",{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"my.op\",\"args\":[],"
             "\"mutates\":[\"x\"],\"val\":{\"dtype\":\"float32\",\"shape\":[2,3]}}," OUT("y") "]}",
      VL_ERR_INVALID_GRAPH, "/nodes/1/mutates/0", "not among the node's arguments");
  /* Arguments are marked per node: an earlier node's arguments do not count; a name deep in a
   * nested list does. */
  expect_error(
      HEAD X ",{\"name\":\"a\",\"op\":\"call_function\",\"target\":\"my.op\",\"args\":[\"x\"],"
             "\"mutates\":[\"x\"],\"val\":{\"dtype\":\"float32\",\"shape\":[2,3]}},"
             "{\"name\":\"b\",\"op\":\"call_function\",\"target\":\"my.op\",\"args\":[\"a\"],"
             "\"mutates\":[\"a\",\"x\"],\"val\":{\"dtype\":\"float32\",\"shape\":[2,3]}},"
             OUT("b") "]}",
      VL_ERR_INVALID_GRAPH, "/nodes/2/mutates/1", "not among the node's arguments");
  vl_graph *g =
      parse_ok(HEAD X ",{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"my.op\","
                      "\"args\":[1,[2,[[\"x\"]]]],\"mutates\":[\"x\",\"x\"],\"val\":{\"dtype\":"
                      "\"float32\",\"shape\":[2,3]}}," OUT("y") "]}");
  assert_int_equal(g->nodes[1].n_mutates, 2);
  assert_int_equal(g->nodes[1].mutates[1], 0);
  vl_graph_free(g);
  g = parse_ok(HEAD X ",{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"aten.relu.out\","
                      "\"args\":[\"x\"],\"kwargs\":{\"out\":\"x\"},\"val\":{\"dtype\":\"float32\","
                      "\"shape\":[2,3]}}," OUT("y") "]}");
  assert_int_equal(g->nodes[1].out, 0);
  vl_graph_free(g);
}

static void deep_nesting_is_an_error_not_a_crash(void **state) {
  (void)state;
  size_t depth = 100000;
  char *text = malloc(2 * depth + 1);
  memset(text, '[', depth);
  memset(text + depth, ']', depth);
  text[2 * depth] = '\0';
  vl_graph *g = NULL;
  vl_error err;
  assert_int_equal(vl_graph_parse(text, 2 * depth, NULL, &g, &err), VL_ERR_PARSE);
  free(text);
}

/* Malformed JSON names its rule, at the byte where the rule breaks: nesting past the limit (at
 * the bracket that opens level 1001), an escape that is none, \u without four hex digits, and
 * surrogate escapes without their other half (at the backslash). */
static void malformed_json_names_the_rule_it_breaks(void **state) {
  (void)state;
  const char *head = HEAD X ",{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"my.op\","
                            "\"args\":";
  size_t h = strlen(head), depth = 1001;
  char *text = malloc(h + 2 * depth + 64);
  assert_non_null(text);
  memcpy(text, head, h);
  memset(text + h, '[', depth);
  memset(text + h + depth, ']', depth);
  strcpy(text + h + 2 * depth, "}]}");
  /* the document, nodes and node are 3 levels: args' bracket 998 opens level 1001 */
  char want[160];
  snprintf(want, sizeof want,
           "malformed JSON at byte %zu: arrays and objects nest deeper than 1000 levels", h + 997);
  expect_error(text, VL_ERR_PARSE, "", want);
  free(text);
  static const struct {
    const char *name, *why;
  } cases[] = {
      {"a\\qb", "a backslash starts one of the escapes \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX"},
      {"a\\u12G4", "\\u must be followed by four hexadecimal digits"},
      {"a\\uD800b", "a lone high surrogate: \\uD800-\\uDBFF must be followed by the escape of a "
                    "low one (\\uDC00-\\uDFFF)"},
      {"a\\uD800\\u0041", "a lone high surrogate: \\uD800-\\uDBFF must be followed by the escape "
                          "of a low one (\\uDC00-\\uDFFF)"},
      {"a\\uDC00", "a lone low surrogate: \\uDC00-\\uDFFF must follow a high surrogate"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char doc[512];
    snprintf(doc, sizeof doc, HEAD "{\"name\":\"%s\",\"op\":\"placeholder\"}]}", cases[i].name);
    size_t at = (size_t)(strchr(doc, '\\') - doc);
    snprintf(want, sizeof want, "malformed JSON at byte %zu: %s", at, cases[i].why);
    expect_error(doc, VL_ERR_PARSE, "", want);
  }
}

static void too_many_nodes_is_too_large(void **state) {
  (void)state;
  vl_limits lim;
  vl_limits_default(&lim);
  lim.max_nodes = 1;
  const char *json = HEAD X "," OUT("x") "]}";
  vl_graph *g = NULL;
  vl_error err;
  assert_int_equal(vl_graph_parse(json, strlen(json), &lim, &g, &err), VL_ERR_TOO_LARGE);
  assert_string_equal(err.path, "/nodes");
}

/* A chain x -> relu -> relu ... of n nodes. */
static char *chain(uint32_t n, size_t *len) {
  size_t cap = (size_t)n * 160 + 256, at = 0;
  char *buf = malloc(cap);
  at += (size_t)sprintf(
      buf + at, HEAD
      "{\"name\":\"n0\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\",\"shape\":[4,4]}}");
  for (uint32_t i = 1; i + 1 < n; i++)
    at += (size_t)sprintf(
        buf + at,
        ",{\"name\":\"n%u\",\"op\":\"call_function\",\"target\":\"aten.relu.default\","
        "\"args\":[\"n%u\"],\"val\":{\"dtype\":\"float32\",\"shape\":[4,4]}}",
        i, i - 1);
  at += (size_t)sprintf(buf + at, ",{\"name\":\"out\",\"op\":\"output\",\"args\":[\"n%u\"]}]}",
                        n - 2);
  *len = at;
  return buf;
}

static void a_100000_node_chain_parses_and_prints(void **state) {
  (void)state;
  size_t len;
  char *text = chain(100000, &len);
  vl_graph *g = NULL;
  vl_error err;
  assert_int_equal(vl_graph_parse(text, len, NULL, &g, &err), VL_OK);
  assert_int_equal(g->n_nodes, 100000);
  assert_int_equal(g->nodes[99998].users[0], 99999);
  char *printed = vl_graph_print(g);
  assert_non_null(printed);
  vl_graph_free(g);
  free(printed);
  free(text);
}

/* The graph's store: equal specs, targets and kwarg keys are one object each; a clone has
 * its own store with the same sharing, and a spec that differs in one dim is its own. */
static void equal_specs_targets_and_keys_are_shared(void **state) {
  (void)state;
  const char *json =
      HEAD X ",{\"name\":\"a\",\"op\":\"call_function\",\"target\":\"aten.relu.default\","
             "\"args\":[\"x\"],\"kwargs\":{\"k\":\"s\"},"
             "\"val\":{\"dtype\":\"float32\",\"shape\":[2,3]}},"
             "{\"name\":\"b\",\"op\":\"call_function\",\"target\":\"aten.relu.default\","
             "\"args\":[\"a\"],\"kwargs\":{\"k\":\"s\"},"
             "\"val\":{\"dtype\":\"float32\",\"shape\":[2,4]}}," OUT("b") "]}";
  vl_graph *g = parse_ok(json);
  assert_int_equal(g->n_nodes, 4);
  assert_ptr_equal(g->nodes[0].val, g->nodes[1].val);
  assert_ptr_not_equal(g->nodes[1].val, g->nodes[2].val);
  assert_int_equal(g->nodes[2].val->shape[1], 4);
  assert_ptr_equal(g->nodes[1].target, g->nodes[2].target);
  assert_ptr_equal(g->nodes[1].kwargs[0].key, g->nodes[2].kwargs[0].key);
  assert_ptr_equal(g->nodes[1].kwargs[0].value.u.s, g->nodes[2].kwargs[0].value.u.s);
  assert_false(g->nodes[3].has_val);
  assert_int_equal(g->nodes[3].val->rank, 0);
  assert_int_equal(g->nodes[0].n_users, 1);
  assert_int_equal(g->nodes[0].users[0], 1);
  vl_graph *c = NULL;
  vl_error err;
  assert_int_equal(vl_graph_clone(g, &c, &err), VL_OK);
  assert_ptr_not_equal(c->nodes[0].val, g->nodes[0].val);
  assert_ptr_equal(c->nodes[0].val, c->nodes[1].val);
  assert_ptr_equal(c->nodes[1].target, c->nodes[2].target);
  assert_string_equal(c->nodes[2].name, "b");
  assert_int_equal(c->nodes[2].users[0], 3);
  vl_graph_free(g);
  vl_graph_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_patch_embed_example_parses_with_resolved_references),
      cmocka_unit_test(equal_specs_targets_and_keys_are_shared),
      cmocka_unit_test(printing_then_parsing_gives_the_same_graph),
      cmocka_unit_test(printed_vals_carry_dtype_shape_and_dim_order),
      cmocka_unit_test(literals_keep_their_kinds),
      cmocka_unit_test(structural_errors_name_the_place),
      cmocka_unit_test(spec_errors_name_the_field),
      cmocka_unit_test(layout_spelling_must_follow_skip_dim_order),
      cmocka_unit_test(layout_conversion_kwargs_must_agree_with_val),
      cmocka_unit_test(memory_format_must_agree_with_val),
      cmocka_unit_test(unvalidated_parsing_reads_what_validation_refuses),
      cmocka_unit_test(raw_control_bytes_are_malformed_json),
      cmocka_unit_test(view_copy_nodes_must_agree_with_their_size_and_base),
      cmocka_unit_test(an_in_place_result_has_its_written_arguments_layout),
      cmocka_unit_test(mutates_and_out_must_name_arguments),
      cmocka_unit_test(deep_nesting_is_an_error_not_a_crash),
      cmocka_unit_test(malformed_json_names_the_rule_it_breaks),
      cmocka_unit_test(too_many_nodes_is_too_large),
      cmocka_unit_test(a_100000_node_chain_parses_and_prints),
      cmocka_unit_test(a_node_with_several_outputs_is_read_through_getitem),
      cmocka_unit_test(misused_multi_output_nodes_are_invalid_graphs),
      cmocka_unit_test(writes_through_a_getitem_follow_its_storage),
      cmocka_unit_test(two_getitems_of_one_output_share_storage),
      cmocka_unit_test(real_traced_graphs_with_several_outputs_lower_and_print_back),
      cmocka_unit_test(literals_are_exact_and_print_back_unchanged),
      cmocka_unit_test(unrepresentable_literals_are_errors_naming_their_place),
      cmocka_unit_test(lowering_changes_no_literal),
      cmocka_unit_test(streaming_errors_keep_their_precedence),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

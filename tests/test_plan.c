/* test_plan.c - the memory plan (docs/format.md §9): storages and lifetimes (views and in-place
 * results share their owner's), the lower bound, a chain planned at it, the plan in the graph and
 * its check by validation, execution inside the arena (an overlapping plan forced past the check
 * computes wrong values), idempotence, and a long chain. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <malloc.h>

#include "test_files.h"

#include "viewlower/interp.h"
#include "viewlower/lower.h"
#include "viewlower/plan.h"

#define HEAD "{\"format\":\"viewlower.graph\",\"version\":1,\"nodes\":["
#define VAL(shape) "\"val\":{\"dtype\":\"float32\",\"shape\":" shape ",\"dim_order\":[0,1]}"
#define PH(name, extra) "{\"name\":\"" name "\",\"op\":\"placeholder\"" extra "," VAL("[2,4]") "}"
#define CALL(name, target, args)                                                                   \
  ",{\"name\":\"" name "\",\"op\":\"call_function\",\"target\":\"" target "\",\"args\":" args      \
  "," VAL("[2,4]") "}"
#define RELU(name, x) CALL(name, "aten.relu.default", "[\"" x "\"]")
#define OUT(args) ",{\"name\":\"out\",\"op\":\"output\",\"args\":" args "}]}"

/* x -> a -> b -> c -> d, 32 bytes each: two buffers suffice. */
#define CHAIN                                                                                      \
  HEAD PH("x", "") RELU("a", "x") RELU("b", "a") RELU("c", "b") RELU("d", "c") OUT("[\"d\"]")

static vl_graph *parse(const char *json) {
  vl_graph *g = NULL;
  vl_error err;
  if (vl_graph_parse(json, strlen(json), NULL, &g, &err) != VL_OK)
    fail_msg("parse: %s: %s", err.path, err.message);
  return g;
}

static vl_graph *planned(const char *json, vl_report *r) {
  vl_graph *g = parse(json);
  vl_lower_options o;
  vl_error err;
  vl_lower_options_default(&o);
  o.plan = true;
  assert_int_equal(vl_lower(g, &o, r, &err), VL_OK);
  assert_true(r->plan.present);
  return g;
}

static const vl_node *node(const vl_graph *g, const char *name) {
  for (uint32_t i = 0; i < g->n_nodes; i++)
    if (strcmp(g->nodes[i].name, name) == 0) return &g->nodes[i];
  fail_msg("no node %s", name);
  return NULL;
}

static void expect_refused(const char *json, const char *path, const char *message) {
  vl_graph *g = NULL;
  vl_error err;
  assert_int_equal(vl_graph_parse(json, strlen(json), NULL, &g, &err), VL_ERR_INVALID_GRAPH);
  assert_string_equal(err.path, path);
  assert_string_equal(err.message, message);
}

static void a_chain_ping_pongs_between_two_buffers_at_the_lower_bound(void **state) {
  (void)state;
  vl_report r;
  vl_graph *g = planned(CHAIN, &r);
  assert_int_equal(r.plan.planned, 5);
  assert_int_equal(r.plan.naive_bytes, 160);
  assert_int_equal(r.plan.lower_bound_bytes, 64);
  assert_int_equal(r.plan.arena_bytes, 64);
  assert_int_equal(r.plan.alignment, 16);
  assert_true(g->has_plan);
  assert_int_equal(g->plan_arena_bytes, 64);
  const char *names[] = {"x", "a", "b", "c", "d"};
  for (int k = 1; k < 5; k++) { /* neighbours in the chain never share bytes */
    const vl_node *p = node(g, names[k - 1]), *n = node(g, names[k]);
    assert_true(p->has_mem_offset && n->has_mem_offset);
    assert_int_not_equal(p->mem_offset, n->mem_offset);
  }
  char *text = vl_graph_print(g);
  assert_non_null(strstr(text, "\"plan\":{\"arena_bytes\":64,\"alignment\":16}"));
  vl_graph *again = parse(text); /* the printed plan validates */
  vl_graph_free(again);
  free(text);
  vl_report_clear(&r);
  vl_graph_free(g);
}

/* Sizes round up to the alignment; a view and an in-place result share their owner's storage
 * and stretch its lifetime; parameters are constant data, user inputs are planned. */
static void views_and_in_place_results_share_their_owner(void **state) {
  (void)state;
  vl_report r;
  vl_graph *g = planned(
      HEAD PH("w", ",\"kind\":\"parameter\"") "," PH("x", "")
          CALL("a", "aten.add.Tensor",
               "[\"x\",\"w\"]") ",{\"name\":\"v\",\"op\":\"call_function\",\"target\":"
                                "\"memory.view\",\"args\":[\"a\",[2,4]],\"alias_of\":\"a\","
                                "" VAL("[2,4]") "}" CALL("b", "aten.relu_.default", "[\"v\"]")
                                    RELU("c", "x") CALL("d", "aten.add.Tensor", "[\"b\",\"c\"]")
                                        OUT("[\"d\"]"),
      &r);
  assert_false(node(g, "w")->has_mem_offset);
  assert_false(node(g, "v")->has_mem_offset);
  assert_false(node(g, "b")->has_mem_offset);
  assert_true(node(g, "x")->has_mem_offset);
  /* a lives to d (through v and b), so it overlaps c; x dies at c. */
  assert_int_equal(r.plan.planned, 4); /* x, a, c, d */
  assert_int_equal(r.plan.lower_bound_bytes, 96);
  assert_int_equal(r.plan.arena_bytes, 96);
  assert_int_not_equal(node(g, "a")->mem_offset, node(g, "c")->mem_offset);
  vl_report_clear(&r);
  vl_graph_free(g);
  /* Alignment 64: each 32-byte buffer takes 64. */
  g = parse(CHAIN);
  vl_lower_options o;
  vl_error err;
  vl_lower_options_default(&o);
  o.plan = true;
  o.plan_alignment = 64;
  assert_int_equal(vl_lower(g, &o, &r, &err), VL_OK);
  assert_int_equal(r.plan.arena_bytes, 128);
  assert_int_equal(r.plan.naive_bytes, 320);
  vl_report_clear(&r);
  vl_graph_free(g);
}

#define PLANNED(x, a, b, extra_b)                                                                  \
  "{\"format\":\"viewlower.graph\",\"version\":1,\"plan\":{\"arena_bytes\":64,\"alignment\":16},"  \
  "\"nodes\":[{\"name\":\"x\",\"op\":\"placeholder\"," VAL("[2,4]") x                              \
      "},"                                                                                         \
      "{\"name\":\"a\",\"op\":\"call_function\",\"target\":\"aten.relu.default\",\"args\":[\"x\"]" \
      "," VAL("[2,4]") a "},"                                                                      \
                         "{\"name\":\"b\",\"op\":\"call_function\",\"target\":\"aten.relu."        \
                         "default\",\"args\":[\"a\"]," VAL("[2,4]") b                              \
      "}" extra_b ",{\"name\":\"out\",\"op\":\"output\",\"args\":[\"b\"]}]}"

static void validation_refuses_an_unsafe_plan_naming_the_node(void **state) {
  (void)state;
  vl_graph *g = parse(PLANNED(",\"mem_offset\":0", ",\"mem_offset\":32", ",\"mem_offset\":0", ""));
  vl_graph_free(g);
  /* b moved onto a, which is live while b is written */
  expect_refused(PLANNED(",\"mem_offset\":0", ",\"mem_offset\":32", ",\"mem_offset\":32", ""),
                 "/nodes/2/mem_offset", "overlaps a while both are live");
  expect_refused(PLANNED(",\"mem_offset\":0", ",\"mem_offset\":16", ",\"mem_offset\":32", ""),
                 "/nodes/1/mem_offset", "overlaps x while both are live");
  expect_refused(PLANNED(",\"mem_offset\":0", ",\"mem_offset\":40", ",\"mem_offset\":0", ""),
                 "/nodes/1/mem_offset", "40 is not a multiple of the plan's alignment 16");
  expect_refused(PLANNED(",\"mem_offset\":0", ",\"mem_offset\":48", ",\"mem_offset\":0", ""),
                 "/nodes/1/mem_offset", "[48, 48 + 32) is outside the arena of 64 bytes");
  expect_refused(PLANNED(",\"mem_offset\":0", ",\"mem_offset\":32", "", ""), "/nodes/2/mem_offset",
                 "missing: b owns a planned storage");
  expect_refused(
      PLANNED(",\"mem_offset\":0", ",\"mem_offset\":32", ",\"mem_offset\":0",
              ",{\"name\":\"v\",\"op\":\"call_function\",\"target\":\"memory.view\","
              "\"args\":[\"b\",[2,4]],\"alias_of\":\"b\"," VAL("[2,4]") ",\"mem_offset\":0}"),
      "/nodes/3/mem_offset",
      "v is not a planned storage owner (a view, an in-place result, constant data or "
      "an empty tensor)");
  expect_refused(HEAD PH("x", ",\"mem_offset\":0") RELU("a", "x") OUT("[\"a\"]"),
                 "/nodes/0/mem_offset", "the graph has no plan");
  expect_refused("{\"format\":\"viewlower.graph\",\"version\":1,\"plan\":{\"arena_bytes\":64,"
                 "\"alignment\":12},\"nodes\":[" PH("x", "") OUT("[\"x\"]"),
                 "/plan/alignment", "must be a power of two from 1 to 1073741824");
  expect_refused("{\"format\":\"viewlower.graph\",\"version\":1,\"plan\":{\"arena_bytes\":64},"
                 "\"nodes\":[" PH("x", "") OUT("[\"x\"]"),
                 "/plan/alignment", "is required: a power of two from 1 to 1073741824");
  expect_refused("{\"format\":\"viewlower.graph\",\"version\":1,\"plan\":{\"arena_bytes\":-1,"
                 "\"alignment\":16},\"nodes\":[" PH("x", "") OUT("[\"x\"]"),
                 "/plan/arena_bytes", "must be a whole number of bytes from 0 to 2^53");
  expect_refused("{\"format\":\"viewlower.graph\",\"version\":1,\"plan\":{\"alignment\":16},"
                 "\"nodes\":[" PH("x", "") OUT("[\"x\"]"),
                 "/plan/arena_bytes", "is required: a whole number of bytes from 0 to 2^53");
  expect_refused("{\"format\":\"viewlower.graph\",\"version\":1,\"plan\":{\"arena_bytes\":64,"
                 "\"alignment\":16,\"extra\":1},\"nodes\":[" PH("x", "") OUT("[\"x\"]"),
                 "/plan/extra", "unknown key \"extra\"");
  /* a parameter's storage is constant data */
  expect_refused("{\"format\":\"viewlower.graph\",\"version\":1,\"plan\":{\"arena_bytes\":64,"
                 "\"alignment\":16},\"nodes\":[" PH("w", ",\"kind\":\"parameter\",\"mem_offset\":0")
                     RELU("a", "w") OUT("[\"a\"]"),
                 "/nodes/0/mem_offset",
                 "w is not a planned storage owner (a view, an in-place result, constant data or "
                 "an empty tensor)");
}

static vl_tensor_map *run(const vl_graph *g, const vl_tensor_map *in) {
  vl_tensor_map *out = NULL;
  vl_error err;
  if (vl_interp_run(g, in, NULL, &out, &err) != VL_OK)
    fail_msg("run: %s: %s", err.path, err.message);
  return out;
}

/* The interpreter places every planned storage in one arena: the plan it was given decides
 * the values. A valid plan computes what the unplanned graph does; one offset moved onto a live
 * neighbour (past validation, in process) computes something else. */
static void execution_follows_the_plan_so_a_bad_one_shows(void **state) {
  (void)state;
  const char *json = HEAD PH("x", "") CALL("a", "aten.add.Tensor", "[\"x\",1]")
      CALL("b", "aten.mul.Tensor", "[\"a\",3]") CALL("c", "aten.add.Tensor", "[\"a\",\"b\"]")
          OUT("[\"c\"]");
  vl_graph *plain = parse(json);
  vl_report r;
  vl_graph *g = planned(json, &r);
  vl_tensor_map *in = NULL;
  vl_error err;
  assert_int_equal(vl_inputs_generate(plain, NULL, 7, NULL, &in, &err), VL_OK);
  vl_tensor_map *want = run(plain, in), *got = run(g, in);
  assert_memory_equal(want->tensors[0]->data, got->tensors[0]->data, 32);
  vl_tensor_map_free(got);
  /* b onto a: a is read again by c after b is written. */
  vl_node *a = (vl_node *)node(g, "a"), *b = (vl_node *)node(g, "b");
  assert_int_not_equal(a->mem_offset, b->mem_offset);
  b->mem_offset = a->mem_offset;
  char *text = vl_graph_print(g);
  expect_refused(text, "/nodes/2/mem_offset", "overlaps a while both are live");
  free(text);
  got = run(g, in);
  assert_memory_not_equal(want->tensors[0]->data, got->tensors[0]->data, 32);
  /* c = b + b = 6 (x + 1) instead of (x + 1) + 3 (x + 1) */
  const float *xv = in->tensors[0]->data, *cv = got->tensors[0]->data;
  for (int k = 0; k < 8; k++) assert_true(cv[k] == 6.0f * (xv[k] + 1.0f));
  vl_tensor_map_free(got);
  vl_tensor_map_free(want);
  vl_tensor_map_free(in);
  vl_report_clear(&r);
  vl_graph_free(g);
  vl_graph_free(plain);
}

/* Lowering a planned graph with plan true changes nothing; with plan false its plan is kept
 * while nothing changes; a lowering that changes the graph drops it. */
static void planning_is_idempotent_and_a_changed_graph_drops_its_plan(void **state) {
  (void)state;
  vl_report r, r2;
  vl_graph *g = planned(CHAIN, &r);
  char *once = vl_graph_print(g);
  vl_graph *h = planned(once, &r2);
  char *twice = vl_graph_print(h);
  assert_string_equal(once, twice);
  assert_int_equal(r2.plan.arena_bytes, r.plan.arena_bytes);
  assert_int_equal(r2.plan.lower_bound_bytes, r.plan.lower_bound_bytes);
  vl_report_clear(&r2);
  vl_graph_free(h);
  free(twice);
  h = parse(once);
  vl_error err;
  assert_int_equal(vl_lower(h, NULL, &r2, &err), VL_OK);
  assert_true(h->has_plan);
  assert_false(r2.plan.present);
  vl_report_clear(&r2);
  vl_graph_free(h);
  free(once);
  vl_report_clear(&r);
  vl_graph_free(g);
  /* A planned graph with a view_copy the lowering replaces: the old plan goes. */
  const char *json =
      "{\"format\":\"viewlower.graph\",\"version\":1,\"plan\":{\"arena_bytes\":96,\"alignment\":"
      "16},\"nodes\":[" PH(
          "x",
          ",\"mem_offset\":0") ",{\"name\":\"a\",\"op\":\"call_function\",\"target\":\"aten.relu."
                               "default\",\"args\":[\"x\"],"
                               "" VAL("[2,4]") ",\"mem_offset\":32},{\"name\":\"f\",\"op\":\"call_"
                                               "function\",\"target\":"
                                               "\"aten.view_copy.default\",\"args\":[\"a\",[8]],"
                                               "\"val\":{\"dtype\":\"float32\",\"shape\":[8],"
                                               "\"dim_order\":[0]},\"mem_offset\":64},{\"name\":"
                                               "\"y\",\"op\":\"call_function\",\"target\":"
                                               "\"aten.relu.default\",\"args\":[\"f\"],\"val\":{"
                                               "\"dtype\":\"float32\",\"shape\":[8],"
                                               "\"dim_order\":[0]},\"mem_offset\":0}" OUT(
                                                   "[\"y\"]");
  h = parse(json);
  assert_int_equal(vl_lower(h, NULL, &r2, &err), VL_OK);
  assert_int_equal(r2.replaced, 1);
  assert_false(h->has_plan);
  for (uint32_t i = 0; i < h->n_nodes; i++) assert_false(h->nodes[i].has_mem_offset);
  vl_report_clear(&r2);
  vl_graph_free(h);
}

/* A graph's text, grown as it is written (the large graphs below). */
typedef struct {
  char *p;
  size_t len, cap;
} text_buf;

/* Appends printf-style text to t. */
static void add(text_buf *t, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->p == NULL ? NULL : t->p + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    assert_true(n >= 0);
    if ((size_t)n < t->cap - t->len) {
      t->len += (size_t)n;
      return;
    }
    t->cap = 2 * (t->cap + (size_t)n + 1);
    t->p = realloc(t->p, t->cap);
    assert_non_null(t->p);
  }
}

/* A long chain plans at its lower bound, and validation reads the plan back. */
static void a_long_chain_plans_at_the_lower_bound(void **state) {
  (void)state;
#if defined(__SANITIZE_ADDRESS__) /* sanitizer builds run several times slower */
  enum { N = 20000 };
#else
  enum { N = 200000 };
#endif
  text_buf json = {0};
  add(&json, HEAD PH("n0", ""));
  for (int i = 1; i <= N; i++) {
    add(&json,
        ",{\"name\":\"n%d\",\"op\":\"call_function\",\"target\":"
        "\"aten.relu.default\",\"args\":[\"n%d\"]," VAL("[2,4]") "}",
        i, i - 1);
  }
  add(&json, ",{\"name\":\"out\",\"op\":\"output\",\"args\":[\"n%d\"]}]}", N);
  vl_report r;
  vl_graph *g = planned(json.p, &r);
  assert_int_equal(r.plan.planned, N + 1);
  assert_int_equal(r.plan.lower_bound_bytes, 64);
  assert_int_equal(r.plan.arena_bytes, 64);
  char *text = vl_graph_print(g);
  vl_graph *again = parse(text);
  vl_graph_free(again);
  free(text);
  free(json.p);
  vl_report_clear(&r);
  vl_graph_free(g);
}

/* The traced graphs of tests/data, lowered with parameter layouts and planned: each arena is
 * its lower bound (ConvNeXt-T's residual stream needs the long-lived storages at the two ends:
 * greedy by size alone gives 983040), and the planned graph validates and plans to itself. */
static void the_traced_graphs_plan_at_their_lower_bound(void **state) {
  (void)state;
  static const struct {
    const char *file;
    int64_t arena;
  } graphs[] = {{"convnext_tiny_channels_last_edge.json", 884736},
                {"swin_t_edge.json", 1402496},
                {"vit_b_16_channels_last_edge.json", 470016},
                {"shufflenet_v2_x0_5_channels_last_edge.json", 196608},
                {"gpt_attention_edge.json", 28672},
                {"resnet18_train_traced.json", 1087824}};
  for (size_t k = 0; k < sizeof graphs / sizeof *graphs; k++) {
    char path[1024];
    size_t len;
    snprintf(path, sizeof path, "%s/%s", VL_TESTDATA_DIR, graphs[k].file);
    char *json = vl_test_read_file(path, &len);
    vl_report r, r2;
    vl_graph *g = planned(json, &r);
    if (r.plan.arena_bytes != graphs[k].arena || r.plan.lower_bound_bytes != graphs[k].arena)
      fail_msg("%s: arena %lld, lower bound %lld, want both %lld", graphs[k].file,
               (long long)r.plan.arena_bytes, (long long)r.plan.lower_bound_bytes,
               (long long)graphs[k].arena);
    char *once = vl_graph_print(g);
    vl_graph *h = planned(once, &r2);
    char *twice = vl_graph_print(h);
    assert_string_equal(once, twice);
    free(once);
    free(twice);
    free(json);
    vl_report_clear(&r);
    vl_report_clear(&r2);
    vl_graph_free(g);
    vl_graph_free(h);
  }
}

/* 64 buffers the program writes (live from 0 to the output, as a model's caches) beside a chain
 * of 20,000 ReLUs: 1.28M overlapping pairs, past the bound of the overlap lists. The sweep
 * places them in one pass at the lower bound: the buffers at the bottom, the chain ping-ponging
 * above them (one buffer each gave 642,080 bytes). The plan validates and runs as the unplanned
 * graph does. */
static void long_lived_buffers_beside_a_long_chain_plan_at_the_lower_bound(void **state) {
  (void)state;
  enum { B = 64, N = 20000 };
  text_buf json = {0};
  add(&json, HEAD);
  for (int i = 0; i < B; i++) {
    add(&json,
        "{\"name\":\"c%d\",\"op\":\"placeholder\",\"kind\":\"buffer\","
        "\"mutated\":true," VAL("[2,4]") "},",
        i);
  }
  add(&json, PH("x", "") RELU("r0", "x"));
  for (int i = 1; i < N; i++) {
    add(&json,
        ",{\"name\":\"r%d\",\"op\":\"call_function\",\"target\":"
        "\"aten.relu.default\",\"args\":[\"r%d\"]," VAL("[2,4]") "}",
        i, i - 1);
  }
  add(&json, ",{\"name\":\"out\",\"op\":\"output\",\"args\":[\"r%d\"]}]}", N - 1);
  vl_graph *plain = parse(json.p);
  vl_report r;
  vl_graph *g = planned(json.p, &r);
  assert_int_equal(r.plan.planned, B + 1 + N);
  assert_int_equal(r.plan.naive_bytes, (B + 1 + N) * 32);
  assert_int_equal(r.plan.lower_bound_bytes, (B + 2) * 32);
  assert_int_equal(r.plan.arena_bytes, (B + 2) * 32);
  assert_int_equal(node(g, "c63")->mem_offset, 63 * 32);
  assert_int_equal(node(g, "r0")->mem_offset, (B + 1) * 32);
  assert_int_equal(node(g, "r1")->mem_offset, B * 32);
  char *text = vl_graph_print(g);
  vl_graph *again = parse(text); /* a valid plan */
  vl_tensor_map *in = NULL;
  vl_error err;
  assert_int_equal(vl_inputs_generate(plain, NULL, 7, NULL, &in, &err), VL_OK);
  vl_tensor_map *want = run(plain, in), *got = run(again, in);
  assert_memory_equal(want->tensors[0]->data, got->tensors[0]->data, 32);
  vl_tensor_map_free(want);
  vl_tensor_map_free(got);
  vl_tensor_map_free(in);
  vl_graph_free(again);
  free(text);
  free(json.p);
  vl_report_clear(&r);
  vl_graph_free(g);
  vl_graph_free(plain);
}

/* Past the bound on overlapping pairs and the sweep's steps too (12,000 inputs all live from
 * position 0: 72M pairs) the plan is one buffer each: larger than it could be, but valid, and
 * found in bounded time. */
static void too_many_live_at_once_gets_one_buffer_each(void **state) {
  (void)state;
  enum { N = 12000 };
  text_buf json = {0};
  add(&json, HEAD);
  for (int i = 0; i < N; i++) {
    add(&json, "%s{\"name\":\"x%d\",\"op\":\"placeholder\"," VAL("[2,4]") "}", i ? "," : "", i);
  }
  add(&json, ",{\"name\":\"s1\",\"op\":\"call_function\",\"target\":"
             "\"aten.add.Tensor\",\"args\":[\"x0\",\"x1\"]," VAL("[2,4]") "}");
  for (int i = 2; i < N; i++) {
    add(&json,
        ",{\"name\":\"s%d\",\"op\":\"call_function\",\"target\":"
        "\"aten.add.Tensor\",\"args\":[\"s%d\",\"x%d\"]," VAL("[2,4]") "}",
        i, i - 1, i);
  }
  add(&json, ",{\"name\":\"out\",\"op\":\"output\",\"args\":[\"s%d\"]}]}", N - 1);
  vl_report r;
  vl_graph *g = planned(json.p, &r);
  assert_int_equal(r.plan.planned, 2 * N - 1);
  assert_int_equal(r.plan.naive_bytes, (2 * N - 1) * 32);
  assert_int_equal(r.plan.arena_bytes, r.plan.naive_bytes);
  assert_true(r.plan.lower_bound_bytes < r.plan.arena_bytes);
  char *text = vl_graph_print(g);
  vl_graph *again = parse(text); /* still a valid plan */
  vl_graph_free(again);
  free(text);
  free(json.p);
  vl_report_clear(&r);
  vl_graph_free(g);
}

/* The overlap sweep stops at the storage that passes the bound on pairs; one that lives at that
 * position alone (an unread result) was then taken off the live set although it never joined
 * it, through an index read from uninitialised memory: heap writes anywhere. 1000 inputs live
 * to the output and 600 unread ReLUs cross the bound at an unread ReLU; malloc fills fresh
 * memory with garbage here (M_PERTURB), so the stray write lands outside the live set. */
static void the_bound_on_pairs_stops_the_sweep_cleanly_at_an_unread_result(void **state) {
  (void)state;
  enum { N = 1000, M = 600 };
  text_buf json = {0};
  add(&json, HEAD);
  for (int i = 0; i < N; i++) {
    add(&json, "%s{\"name\":\"x%d\",\"op\":\"placeholder\"," VAL("[2,4]") "}", i ? "," : "", i);
  }
  for (int i = 0; i < M; i++) {
    add(&json,
        ",{\"name\":\"r%d\",\"op\":\"call_function\",\"target\":"
        "\"aten.relu.default\",\"args\":[\"x0\"]," VAL("[2,4]") "}",
        i);
  }
  add(&json, ",{\"name\":\"out\",\"op\":\"output\",\"args\":[");
  for (int i = 0; i < N; i++) {
    add(&json, "%s\"x%d\"", i ? "," : "", i);
  }
  add(&json, "]}]}");
  mallopt(M_PERTURB, 0x5a);
  vl_report r;
  vl_graph *g = planned(json.p, &r);
  mallopt(M_PERTURB, 0);
  assert_int_equal(r.plan.planned, N + M);
  assert_int_equal(r.plan.naive_bytes, (N + M) * 32);
  assert_int_equal(r.plan.lower_bound_bytes, (N + 1) * 32);
  char *text = vl_graph_print(g);
  vl_graph_free(parse(text)); /* a valid plan */
  free(text);
  free(json.p);
  vl_report_clear(&r);
  vl_graph_free(g);
}

/* A uint8 input beside float64 tensors, planned at alignment 1. */
#define MIXED                                                                                      \
  HEAD "{\"name\":\"b\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"uint8\",\"shape\":[3]}},"      \
       "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float64\",\"shape\":[3]}},"    \
       "{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"aten.add.Tensor\",\"args\":"         \
       "[\"x\",1.0],\"val\":{\"dtype\":\"float64\",\"shape\":[3]}},"                               \
       "{\"name\":\"c\",\"op\":\"call_function\",\"target\":\"aten.add.Tensor\",\"args\":"         \
       "[\"b\",1],\"val\":{\"dtype\":\"uint8\",\"shape\":[3]}},"                                   \
       "{\"name\":\"z\",\"op\":\"call_function\",\"target\":\"aten.mul.Tensor\",\"args\":"         \
       "[\"y\",2.0],\"val\":{\"dtype\":\"float64\",\"shape\":[3]}}"                                \
       ",{\"name\":\"out\",\"op\":\"output\",\"args\":[\"z\",\"c\"]}]}"

/* Below an alignment of 8 the planner still starts every tensor at a multiple of its element
 * size (a float64 at an odd byte cannot be read as one), and the plan runs in its arena. */
static void a_plan_below_the_element_size_keeps_each_tensor_on_its_own_alignment(void **state) {
  (void)state;
  vl_graph *g = parse(MIXED);
  vl_lower_options o;
  vl_report r;
  vl_error err;
  vl_lower_options_default(&o);
  o.plan = true;
  o.plan_alignment = 1;
  assert_int_equal(vl_lower(g, &o, &r, &err), VL_OK);
  const char *names[] = {"b", "x", "y", "c", "z"};
  const int64_t want[] = {48, 0, 24, 51, 0}; /* before: x at 3, y at 27 */
  for (int k = 0; k < 5; k++) {
    const vl_node *n = node(g, names[k]);
    if (n->mem_offset != want[k]) {
      fail_msg("%s at %lld, want %lld", names[k], (long long)n->mem_offset, (long long)want[k]);
    }
  }
  assert_int_equal(r.plan.arena_bytes, 54);
  assert_int_equal(r.plan.lower_bound_bytes, 51);
  assert_int_equal(r.plan.naive_bytes, 78);
  vl_report_clear(&r);
  vl_verify_result v;
  assert_int_equal(vl_verify(g, &o, NULL, 3, NULL, &v, &err), VL_OK);
  assert_true(v.equal);
  vl_verify_result_clear(&v);
  vl_graph_free(g);
}

/* A hand-written plan at alignment 1 may put a float64 at an odd byte: the invariant holds, so
 * validation accepts it, but execution refuses it before running anything. */
static void execution_refuses_a_tensor_placed_off_its_element_size(void **state) {
  (void)state;
  const char *json =
      "{\"format\":\"viewlower.graph\",\"version\":1,\"plan\":{\"arena_bytes\":27,\"alignment\":1},"
      "\"nodes\":[{\"name\":\"b\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"uint8\",\"shape\":"
      "[3]},\"mem_offset\":0},{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":"
      "\"float64\",\"shape\":[3]},\"mem_offset\":3},{\"name\":\"out\",\"op\":\"output\",\"args\":"
      "[\"x\",\"b\"]}]}";
  vl_graph *g = parse(json);
  vl_tensor_map *in = NULL, *out = NULL;
  vl_error err;
  assert_int_equal(vl_inputs_generate(g, NULL, 1, NULL, &in, &err), VL_OK);
  assert_int_equal(vl_interp_run(g, in, NULL, &out, &err), VL_ERR_KERNEL);
  assert_null(out);
  assert_string_equal(err.path, "/nodes/1/mem_offset");
  assert_string_equal(err.message, "3 is not a multiple of 8, the size of a float64 element: the "
                                   "interpreter cannot start x's tensor there");
  vl_tensor_map_free(in);
  vl_graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_chain_ping_pongs_between_two_buffers_at_the_lower_bound),
      cmocka_unit_test(views_and_in_place_results_share_their_owner),
      cmocka_unit_test(validation_refuses_an_unsafe_plan_naming_the_node),
      cmocka_unit_test(execution_follows_the_plan_so_a_bad_one_shows),
      cmocka_unit_test(planning_is_idempotent_and_a_changed_graph_drops_its_plan),
      cmocka_unit_test(a_long_chain_plans_at_the_lower_bound),
      cmocka_unit_test(the_traced_graphs_plan_at_their_lower_bound),
      cmocka_unit_test(long_lived_buffers_beside_a_long_chain_plan_at_the_lower_bound),
      cmocka_unit_test(too_many_live_at_once_gets_one_buffer_each),
      cmocka_unit_test(the_bound_on_pairs_stops_the_sweep_cleanly_at_an_unread_result),
      cmocka_unit_test(a_plan_below_the_element_size_keeps_each_tensor_on_its_own_alignment),
      cmocka_unit_test(execution_refuses_a_tensor_placed_off_its_element_size),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

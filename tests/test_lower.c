/* test_lower.c - the lowering passes (SPEC §3): normalization, dead view removal, the exact
 * layout test, every mutation rule, options and policies, the report. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "viewlower/lower.h"

#define G(skip)                                                                                    \
  "{\"format\":\"viewlower.graph\",\"version\":1,\"skip_dim_order\":" skip ",\"nodes\":["
#define HEAD G("false")
#define PH(name, dtype, shape)                                                                     \
  "{\"name\":\"" name "\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"" dtype                      \
  "\",\"shape\":" shape "}}"
#define VAL(shape, order)                                                                          \
  "\"val\":{\"dtype\":\"float32\",\"shape\":" shape ",\"dim_order\":" order "}"
#define CALL(name, target, args, val)                                                              \
  ",{\"name\":\"" name "\",\"op\":\"call_function\",\"target\":\"" target "\",\"args\":" args      \
  "," val "}"
#define CALLK(name, target, args, kwargs, val)                                                     \
  ",{\"name\":\"" name "\",\"op\":\"call_function\",\"target\":\"" target "\",\"args\":" args      \
  ",\"kwargs\":" kwargs "," val "}"
#define VIEW(name, base, size, shape, order)                                                       \
  CALL(name, "aten.view_copy.default", "[\"" base "\"," size "]", VAL(shape, order))
#define OUT(args) ",{\"name\":\"out\",\"op\":\"output\",\"args\":" args "}]}"

typedef struct {
  vl_graph *g;
  vl_report r;
} lowered;

static lowered lower_opts(const char *json, bool remove, vl_policy policy, bool fold) {
  lowered l;
  vl_error err;
  vl_lower_options o = {remove, policy, fold};
  if (vl_graph_parse(json, strlen(json), NULL, &l.g, &err) != VL_OK)
    fail_msg("parse: %s: %s", err.path, err.message);
  assert_int_equal(vl_lower(l.g, &o, &l.r, &err), VL_OK);
  return l;
}

/* The tests of SPEC §3 run with fold false (exactly §3); fold_* tests below run §3a. */
static lowered lower_text(const char *json, bool remove, vl_policy policy) {
  return lower_opts(json, remove, policy, false);
}

static lowered lower_safe(const char *json) {
  return lower_text(json, true, VL_POLICY_SAFE);
}

static void done(lowered *l) {
  vl_report_clear(&l->r);
  vl_graph_free(l->g);
}

static const vl_decision *decision(const lowered *l, const char *node) {
  for (uint32_t i = 0; i < l->r.n_decisions; i++)
    if (strcmp(l->r.decisions[i].node, node) == 0) return &l->r.decisions[i];
  fail_msg("no decision for %s", node);
  return NULL;
}

static const vl_node *node(const lowered *l, const char *name) {
  for (uint32_t i = 0; i < l->g->n_nodes; i++)
    if (strcmp(l->g->nodes[i].name, name) == 0) return &l->g->nodes[i];
  return NULL;
}

#define R(x) (1u << VL_REASON_##x)

/* Asserts node's decision: replaced (reasons 0) or kept with exactly these reasons. */
static void expect(const lowered *l, const char *name, uint32_t reasons) {
  const vl_decision *d = decision(l, name);
  if (d->reasons != reasons)
    fail_msg("%s: reasons 0x%x, want 0x%x (%s)", name, d->reasons, reasons, d->message);
  assert_int_equal(d->replaced, reasons == 0);
  const vl_node *n = node(l, name);
  assert_non_null(n);
  assert_string_equal(n->target, reasons == 0 ? "memory.view" : "aten.view_copy.default");
}

static void a_chain_of_four_views_ends_on_the_root_and_dead_ones_go(void **state) {
  (void)state;
  lowered l = lower_safe(
      HEAD PH("x", "float32", "[2,3,4]") VIEW("a", "x", "[6,4]", "[6,4]", "[0,1]")
          VIEW("b", "a", "[24]", "[24]", "[0]") VIEW("c", "b", "[4,-1]", "[4,6]", "[0,1]")
              VIEW("d", "c", "[2,2,6]", "[2,2,6]", "[0,1,2]") OUT("[\"d\"]"));
  assert_int_equal(l.r.view_copy_nodes, 4);
  assert_int_equal(l.r.normalized, 3);
  assert_int_equal(l.r.removed_dead, 3);
  assert_int_equal(l.r.replaced + l.r.kept + l.r.removed_dead, 4);
  assert_int_equal(l.g->n_nodes, 3);
  const vl_node *d = node(&l, "d");
  assert_int_equal(d->args[0].u.ref, 0); /* on the root x */
  assert_string_equal(decision(&l, "d")->base, "x");
  expect(&l, "d", R(FEEDS_OUTPUT));
  done(&l);
}

static void normalized_views_on_the_root_are_all_kept_alive_when_used(void **state) {
  (void)state;
  lowered l = lower_safe(
      HEAD PH("x", "float32", "[2,3,4]") VIEW("a", "x", "[6,4]", "[6,4]", "[0,1]")
          VIEW("b", "a", "[24]", "[24]", "[0]") VIEW("c", "b", "[4,-1]", "[4,6]", "[0,1]")
              VIEW("d", "c", "[2,2,6]", "[2,2,6]", "[0,1,2]")
                  CALL("s", "aten.add.Tensor", "[\"a\",1]", VAL("[6,4]", "[0,1]"))
                      CALL("t", "aten.add.Tensor", "[\"b\",1]", VAL("[24]", "[0]"))
                          CALL("u", "aten.add.Tensor", "[\"c\",1]", VAL("[4,6]", "[0,1]"))
                              CALL("w", "aten.add.Tensor", "[\"d\",1]", VAL("[2,2,6]", "[0,1,2]"))
                                  OUT("[\"s\",\"t\",\"u\",\"w\"]"));
  assert_int_equal(l.r.removed_dead, 0);
  for (const char *const *n = (const char *const[]){"a", "b", "c", "d", NULL}; *n; n++) {
    expect(&l, *n, 0);
    assert_string_equal(decision(&l, *n)->base, "x");
    assert_string_equal(l.g->nodes[node(&l, *n)->alias_of].name, "x");
  }
  done(&l);
}

#define MODEL                                                                                      \
  HEAD "{\"name\":\"p\",\"op\":\"placeholder\",\"kind\":\"parameter\",\"val\":{\"dtype\":"         \
       "\"float32\",\"shape\":[5,6]}},"                                                            \
       "{\"name\":\"q\",\"op\":\"placeholder\",\"kind\":\"parameter\",\"val\":{\"dtype\":"         \
       "\"float32\",\"shape\":[30]}}," PH("x", "float32", "[5,6]")                                 \
           VIEW("p_view", "p", "[6,5]", "[6,5]", "[0,1]") VIEW("x_view", "x", "[6,5]", "[6,5]",    \
                                                               "[0,1]")                            \
               CALL("prod", "aten.mul.Tensor", "[\"p_view\",\"x_view\"]", VAL("[6,5]", "[0,1]"))   \
                   VIEW("flat", "prod", "[30]", "[30]", "[0]")                                     \
                       CALL("scaled", "aten.mul.Tensor", "[\"flat\",\"q\"]", VAL("[30]", "[0]"))   \
                           VIEW("out_a", "scaled", "[5,6]", "[5,6]", "[0,1]")                      \
                               VIEW("out_b", "scaled", "[3,10]", "[3,10]", "[0,1]")                \
                                   OUT("[\"out_a\",\"out_b\"]")

static void upstream_model_replaces_three_and_keeps_the_two_outputs(void **state) {
  (void)state;
  lowered l = lower_safe(MODEL);
  assert_int_equal(l.r.view_copy_nodes, 5);
  assert_int_equal(l.r.replaced, 3);
  assert_int_equal(l.r.kept, 2);
  expect(&l, "p_view", 0);
  expect(&l, "x_view", 0);
  expect(&l, "flat", 0);
  expect(&l, "out_a", R(FEEDS_OUTPUT));
  expect(&l, "out_b", R(FEEDS_OUTPUT));
  assert_int_equal(l.r.bytes_saved, 3 * 30 * 4);
  done(&l);
}

#define PATCH_DIM_ORDER                                                                            \
  HEAD PH("x", "float32", "[1,2,2,3]") CALLK(                                                      \
      "x_cl", "dim_order_ops._to_dim_order_copy.default", "[\"x\"]", "{\"dim_order\":[0,2,3,1]}",  \
      VAL("[1,2,2,3]", "[0,2,3,1]")) VIEW("flat", "x_cl", "[1,2,-1]", "[1,2,6]", "[0,1,2]")        \
      CALL("tokens", "aten.permute_copy.default", "[\"flat\",[0,2,1]]", VAL("[1,6,2]", "[0,1,2]")) \
          OUT("[\"tokens\"]")
#define PATCH_MEMORY_FORMAT                                                                        \
  G("true")                                                                                        \
  PH("x", "float32", "[1,2,2,3]")                                                                  \
  CALLK("x_cl", "aten._to_copy.default", "[\"x\"]", "{\"memory_format\":\"channels_last\"}",       \
        VAL("[1,2,2,3]", "[0,2,3,1]"))                                                             \
  VIEW("flat", "x_cl", "[1,2,-1]", "[1,2,6]", "[0,1,2]")                                           \
  CALL("tokens", "aten.permute_copy.default", "[\"flat\",[0,2,1]]", VAL("[1,6,2]", "[0,1,2]"))     \
  OUT("[\"tokens\"]")

static void patch_embedding_flatten_of_channels_last_is_kept_in_both_spellings(void **state) {
  (void)state;
  const char *graphs[] = {PATCH_DIM_ORDER, PATCH_MEMORY_FORMAT};
  for (int i = 0; i < 2; i++) {
    lowered l = lower_text(graphs[i], true, VL_POLICY_SAFE);
    expect(&l, "flat", R(BASE_LAYOUT));
    assert_string_equal(decision(&l, "flat")->message,
                        "base x_cl has dim_order [0,2,3,1]; viewing it as contiguous [1,2,6] "
                        "would reorder elements");
    assert_int_equal(l.r.bytes_saved, 0);
    done(&l);
    l = lower_text(graphs[i], false, VL_POLICY_SAFE);
    expect(&l, "flat", R(DISABLED));
    done(&l);
  }
}

static void patch_embedding_with_a_contiguous_base_is_replaced(void **state) {
  (void)state;
  lowered l = lower_safe(HEAD PH("x", "float32", "[1,2,2,3]")
                             VIEW("flat", "x", "[1,2,-1]", "[1,2,6]", "[0,1,2]")
                                 CALL("tokens", "aten.permute_copy.default", "[\"flat\",[0,2,1]]",
                                      VAL("[1,6,2]", "[0,1,2]")) OUT("[\"tokens\"]"));
  expect(&l, "flat", 0);
  assert_int_equal(l.r.bytes_saved, 48);
  done(&l);
}

static void legacy_policy_replaces_the_patch_embedding_view(void **state) {
  (void)state;
  lowered l = lower_text(PATCH_DIM_ORDER, true, VL_POLICY_LEGACY);
  expect(&l, "flat", 0);
  done(&l);
}

#define CL_BASE(shape)                                                                             \
  HEAD PH("x", "float32", shape)                                                                   \
      CALLK("x_cl", "dim_order_ops._to_dim_order_copy.default", "[\"x\"]",                         \
            "{\"dim_order\":[0,2,3,1]}", VAL(shape, "[0,2,3,1]"))
#define USE(view, shape, order)                                                                    \
  CALL("use", "aten.relu.default", "[\"" view "\"]", VAL(shape, order)) OUT("[\"use\"]")

static void degenerate_channels_last_views_are_replaced(void **state) {
  (void)state;
  lowered l = lower_safe(CL_BASE("[1,1,4,4]") VIEW("v", "x_cl", "[1,1,16]", "[1,1,16]", "[0,1,2]")
                             USE("v", "[1,1,16]", "[0,1,2]"));
  expect(&l, "v", 0);
  done(&l);
  l = lower_safe(CL_BASE("[2,8,1,1]") VIEW("v", "x_cl", "[2,8]", "[2,8]", "[0,1]")
                     USE("v", "[2,8]", "[0,1]"));
  expect(&l, "v", 0);
  done(&l);
}

static void flatten_declared_in_pytorch_memory_order_is_replaced(void **state) {
  (void)state;
  lowered l = lower_safe(CL_BASE("[1,4,2,3]") VIEW("v", "x_cl", "[1,4,6]", "[1,4,6]", "[0,2,1]")
                             USE("v", "[1,4,6]", "[0,2,1]"));
  expect(&l, "v", 0);
  done(&l);
}

static void split_c_and_merge_hw_of_channels_last_is_replaced(void **state) {
  (void)state;
  lowered l = lower_safe(CL_BASE("[2,4,3,5]") VIEW(
      "v", "x_cl", "[2,2,2,15]", "[2,2,2,15]", "[0,3,1,2]") USE("v", "[2,2,2,15]", "[0,3,1,2]"));
  expect(&l, "v", 0);
  done(&l);
}

static void channels_last_flattened_whole_is_kept(void **state) {
  (void)state;
  lowered l = lower_safe(CL_BASE("[1,4,2,3]") VIEW("v", "x_cl", "[1,24]", "[1,24]", "[0,1]")
                             USE("v", "[1,24]", "[0,1]"));
  expect(&l, "v", R(BASE_LAYOUT));
  done(&l);
}

static void a_view_declared_in_an_order_the_alias_cannot_give_is_view_layout(void **state) {
  (void)state;
  lowered l = lower_safe(HEAD PH("x", "float32", "[2,3,4]")
                             VIEW("v", "x", "[6,4]", "[6,4]", "[1,0]") USE("v", "[6,4]", "[1,0]"));
  expect(&l, "v", R(VIEW_LAYOUT));
  done(&l);
}

static void five_d_channels_last_flatten_is_kept(void **state) {
  (void)state;
  lowered l = lower_safe(HEAD PH("x", "float32", "[1,2,2,2,3]")
                             CALLK("x_cl", "dim_order_ops._to_dim_order_copy.default", "[\"x\"]",
                                   "{\"dim_order\":[0,2,3,4,1]}", VAL("[1,2,2,2,3]", "[0,2,3,4,1]"))
                                 VIEW("v", "x_cl", "[1,2,12]", "[1,2,12]", "[0,1,2]")
                                     USE("v", "[1,2,12]", "[0,1,2]"));
  expect(&l, "v", R(BASE_LAYOUT));
  done(&l);
}

#define BASE6                                                                                      \
  HEAD PH("x", "float32", "[2,3]") CALL("b", "aten.mul.Tensor", "[\"x\",2]", VAL("[2,3]", "[0,1]"))
#define V6 VIEW("v", "b", "[6]", "[6]", "[0]")
#define VAL6 VAL("[6]", "[0]")
#define VAL23 VAL("[2,3]", "[0,1]")

static void relu_in_place_on_the_view_is_view_mutated(void **state) {
  (void)state;
  lowered l = lower_safe(BASE6 V6 CALL("r", "aten.relu_.default", "[\"v\"]", VAL6) OUT("[\"r\"]"));
  expect(&l, "v", R(VIEW_MUTATED));
  assert_string_equal(decision(&l, "v")->message, "r writes through the view v");
  done(&l);
}

static void add_in_place_on_the_base_with_a_later_read_is_base_mutated(void **state) {
  (void)state;
  lowered l = lower_safe(BASE6 V6 CALL("w", "aten.add_.Tensor", "[\"b\",1]", VAL23)
                             CALL("r", "aten.relu.default", "[\"v\"]", VAL6) OUT("[\"r\"]"));
  expect(&l, "v", R(BASE_MUTATED));
  assert_string_equal(decision(&l, "v")->message,
                      "w writes the storage of base b while r still reads the view");
  done(&l);
}

static void add_in_place_on_the_base_after_the_last_read_is_replaced(void **state) {
  (void)state;
  lowered l = lower_safe(BASE6 V6 CALL("r", "aten.relu.default", "[\"v\"]", VAL6)
                             CALL("w", "aten.add_.Tensor", "[\"b\",1]", VAL23) OUT("[\"r\"]"));
  expect(&l, "v", 0);
  done(&l);
}

static void a_writer_that_also_reads_the_view_counts(void **state) {
  (void)state;
  lowered l =
      lower_safe(BASE6 V6 CALL("w", "aten.copy_.default", "[\"b\",\"v\"]", VAL23) OUT("[\"w\"]"));
  expect(&l, "v", R(BASE_MUTATED) | R(BASE_FEEDS_OUTPUT));
  done(&l);
}

static void copy_into_the_base_is_base_mutated(void **state) {
  (void)state;
  lowered l = lower_safe(BASE6 "," PH("y", "float32", "[2,3]")
                             V6 CALL("w", "aten.copy_.default", "[\"b\",\"y\"]", VAL23)
                                 CALL("r", "aten.relu.default", "[\"v\"]", VAL6) OUT("[\"r\"]"));
  expect(&l, "v", R(BASE_MUTATED));
  done(&l);
}

static void out_equals_the_view_is_view_mutated(void **state) {
  (void)state;
  lowered l = lower_safe(BASE6 "," PH("y", "float32", "[6]") V6 CALLK(
      "w", "aten.relu.out", "[\"y\"]", "{\"out\":\"v\"}", VAL6) OUT("[\"w\"]"));
  expect(&l, "v", R(VIEW_MUTATED));
  done(&l);
}

static void a_custom_op_that_mutates_the_view_is_view_mutated(void **state) {
  (void)state;
  lowered l = lower_safe(
      BASE6 V6
      ",{\"name\":\"w\",\"op\":\"call_function\",\"target\":\"my.scramble\",\"args\":[\"v\"],"
      "\"mutates\":[\"v\"]," VAL6 "}" OUT("[\"w\"]"));
  expect(&l, "v", R(VIEW_MUTATED));
  done(&l);
}

/* "_foreach_add_" writes every tensor in its arg 0 list. */
static void an_in_place_op_on_a_list_writes_every_tensor_in_it(void **state) {
  (void)state;
  lowered l =
      lower_safe(BASE6 V6 ",{\"name\":\"w\",\"op\":\"call_function\",\"target\":"
                          "\"aten._foreach_add_.Scalar\",\"args\":[[\"x\",\"b\"],1.5]," VAL23
                          "}" CALL("r", "aten.relu.default", "[\"v\"]", VAL6) OUT("[\"r\"]"));
  expect(&l, "v", R(BASE_MUTATED));
  done(&l);
  l = lower_safe(BASE6 V6 ",{\"name\":\"w\",\"op\":\"call_function\",\"target\":"
                          "\"aten._foreach_add_.Scalar\",\"args\":[[\"v\"],1.5]," VAL6
                          "}" CALL("r", "aten.relu.default", "[\"v\"]", VAL6) OUT("[\"r\"]"));
  expect(&l, "v", R(VIEW_MUTATED));
  done(&l);
}

/* The rule is the spelling: "__iand__" ends in "_" and writes arg 0. */
static void a_dunder_name_ending_in_underscore_writes_arg_0(void **state) {
  (void)state;
  lowered l =
      lower_safe(BASE6 V6 CALL("w", "aten.__iand__.Tensor", "[\"v\",3]", VAL6) OUT("[\"w\"]"));
  expect(&l, "v", R(VIEW_MUTATED));
  done(&l);
}

static void a_view_of_a_mutated_buffer_is_base_mutable_input(void **state) {
  (void)state;
  lowered l = lower_safe(
      HEAD "{\"name\":\"buf\",\"op\":\"placeholder\",\"kind\":\"buffer\",\"mutated\":true,"
           "\"val\":{\"dtype\":\"float32\",\"shape\":[2,3]}}" VIEW("v", "buf", "[6]", "[6]", "[0]")
               CALL("r", "aten.relu.default", "[\"v\"]", VAL6) OUT("[\"r\"]"));
  expect(&l, "v", R(BASE_MUTABLE_INPUT));
  done(&l);
}

static void a_view_of_a_view_whose_root_is_written_later_is_kept(void **state) {
  (void)state;
  lowered l = lower_safe(BASE6 VIEW("v1", "b", "[3,2]", "[3,2]", "[0,1]") VIEW(
      "v2", "v1", "[6]", "[6]", "[0]") CALL("w", "aten.add_.Tensor", "[\"b\",1]", VAL23)
                             CALL("r", "aten.relu.default", "[\"v2\"]", VAL6) OUT("[\"r\"]"));
  assert_int_equal(l.r.normalized, 1);
  assert_int_equal(l.r.removed_dead, 1);
  expect(&l, "v2", R(BASE_MUTATED));
  assert_string_equal(decision(&l, "v2")->base, "b");
  done(&l);
}

static void a_view_of_a_view_taken_before_its_root_was_written_stays_on_the_copy(void **state) {
  (void)state;
  lowered l = lower_safe(BASE6 VIEW("v1", "b", "[3,2]", "[3,2]", "[0,1]") CALL(
      "w", "aten.add_.Tensor", "[\"b\",1]", VAL23) VIEW("v2", "v1", "[6]", "[6]", "[0]")
                             CALL("r", "aten.relu.default", "[\"v2\"]", VAL6) OUT("[\"r\"]"));
  assert_int_equal(l.r.normalized, 0);
  expect(&l, "v1", R(BASE_MUTATED));
  expect(&l, "v2", 0);
  assert_string_equal(decision(&l, "v2")->base, "v1");
  done(&l);
}

static void a_view_of_a_view_copy_written_in_place_stays_on_that_copy(void **state) {
  (void)state;
  /* v1 copies b, then is written; v2 reads v1's new values, which b never had. */
  lowered l = lower_safe(BASE6 VIEW("v1", "b", "[3,2]", "[3,2]", "[0,1]")
                             CALL("w", "aten.add_.Tensor", "[\"v1\",100]",
                                  VAL("[3,2]", "[0,1]")) VIEW("v2", "v1", "[6]", "[6]", "[0]")
                                 CALL("r", "aten.relu.default", "[\"v2\"]", VAL6) OUT("[\"r\"]"));
  assert_int_equal(l.r.normalized, 0);
  expect(&l, "v1", R(VIEW_MUTATED));
  expect(&l, "v2", 0);
  assert_string_equal(decision(&l, "v2")->base, "v1");
  done(&l);
}

static void writes_through_an_earlier_replaced_alias_count_for_later_views(void **state) {
  (void)state;
  /* a aliases b (replaced); w writes b through the in-place result; v is read after. */
  lowered l =
      lower_safe(BASE6 VIEW("a", "b", "[3,2]", "[3,2]", "[0,1]")
                     CALL("ra", "aten.relu.default", "[\"a\"]", VAL("[3,2]", "[0,1]"))
                         V6 CALL("w", "aten.mul_.Tensor", "[\"b\",2]", VAL23)
                             CALL("r", "aten.relu.default", "[\"v\"]", VAL6) OUT("[\"ra\",\"r\"]"));
  expect(&l, "a", 0);
  expect(&l, "v", R(BASE_MUTATED));
  done(&l);
}

static void a_base_that_is_an_output_is_base_feeds_output(void **state) {
  (void)state;
  lowered l =
      lower_safe(BASE6 V6 CALL("r", "aten.relu.default", "[\"v\"]", VAL6) OUT("[\"r\",\"b\"]"));
  expect(&l, "v", R(BASE_FEEDS_OUTPUT));
  done(&l);
}

static void static_and_dynamic_do_not_alias(void **state) {
  (void)state;
  lowered l =
      lower_safe(HEAD "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\","
                      "\"shape\":[2,3],\"dynamic\":true}}" VIEW("v", "x", "[6]", "[6]", "[0]")
                          CALL("r", "aten.relu.default", "[\"v\"]", VAL6) OUT("[\"r\"]"));
  expect(&l, "v", R(DYNAMIC_SHAPE));
  done(&l);
}

static void several_failed_conditions_are_all_listed_in_order(void **state) {
  (void)state;
  lowered l = lower_safe(CL_BASE("[1,4,2,3]") VIEW("v", "x_cl", "[1,24]", "[1,24]", "[0,1]") CALL(
      "w", "aten.relu_.default", "[\"v\"]", VAL("[1,24]", "[0,1]")) OUT("[\"v\",\"x_cl\"]"));
  expect(&l, "v", R(FEEDS_OUTPUT) | R(BASE_LAYOUT) | R(VIEW_MUTATED) | R(BASE_FEEDS_OUTPUT));
  cJSON *json = vl_report_to_json(&l.r);
  char *text = cJSON_PrintUnformatted(cJSON_GetObjectItem(
      cJSON_GetArrayItem(cJSON_GetObjectItem(json, "decisions"), 0), "reasons"));
  assert_string_equal(text,
                      "[\"feeds_output\",\"base_layout\",\"view_mutated\",\"base_feeds_output\"]");
  free(text);
  cJSON_Delete(json);
  done(&l);
}

static void lowering_a_lowered_graph_changes_nothing(void **state) {
  (void)state;
  const char *graphs[] = {MODEL, PATCH_DIM_ORDER,
                          BASE6 V6 CALL("w", "aten.add_.Tensor", "[\"b\",1]", VAL23)
                              CALL("r", "aten.relu.default", "[\"v\"]", VAL6) OUT("[\"r\"]")};
  for (size_t i = 0; i < sizeof graphs / sizeof *graphs; i++) {
    lowered l = lower_safe(graphs[i]);
    char *once = vl_graph_print(l.g);
    lowered again = lower_safe(once);
    char *twice = vl_graph_print(again.g);
    assert_string_equal(once, twice);
    assert_int_equal(again.r.replaced, 0);
    assert_int_equal(again.r.normalized, 0);
    assert_int_equal(again.r.removed_dead, 0);
    free(once);
    free(twice);
    done(&l);
    done(&again);
  }
}

static void the_report_json_has_the_spec_fields(void **state) {
  (void)state;
  lowered l = lower_safe(PATCH_DIM_ORDER);
  cJSON *json = vl_report_to_json(&l.r);
  char *text = cJSON_PrintUnformatted(json);
  assert_string_equal(
      text,
      "{\"view_copy_nodes\":1,\"replaced\":0,\"kept\":1,\"normalized\":0,\"removed_dead\":0,"
      "\"bytes_saved\":0,\"layout_copy_nodes\":1,\"merged\":0,\"bytes_copied\":48,"
      "\"decisions\":[{\"node\":\"flat\",\"target\":\"aten.view_copy.default\",\"base\":\"x_cl\","
      "\"decision\":\"kept\","
      "\"reasons\":[\"base_layout\"],\"message\":\"base x_cl has dim_order [0,2,3,1]; viewing it "
      "as "
      "contiguous [1,2,6] would reorder elements\"}]}");
  free(text);
  cJSON_Delete(json);
  done(&l);
}

static void options_are_read_strictly(void **state) {
  (void)state;
  vl_lower_options o;
  vl_error err;
  cJSON *j = cJSON_Parse("{\"remove_view_copy\":false,\"policy\":\"legacy\"}");
  assert_int_equal(vl_lower_options_from_json(j, &o, &err), VL_OK);
  assert_false(o.remove_view_copy);
  assert_int_equal(o.policy, VL_POLICY_LEGACY);
  cJSON_Delete(j);
  j = cJSON_Parse("{\"policy\":\"fast\"}");
  assert_int_equal(vl_lower_options_from_json(j, &o, &err), VL_ERR_INVALID_PARAMS);
  assert_string_equal(err.path, "/policy");
  cJSON_Delete(j);
  j = cJSON_Parse("{\"remove\":true}");
  assert_int_equal(vl_lower_options_from_json(j, &o, &err), VL_ERR_INVALID_PARAMS);
  assert_string_equal(err.path, "/remove");
  cJSON_Delete(j);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_chain_of_four_views_ends_on_the_root_and_dead_ones_go),
      cmocka_unit_test(normalized_views_on_the_root_are_all_kept_alive_when_used),
      cmocka_unit_test(upstream_model_replaces_three_and_keeps_the_two_outputs),
      cmocka_unit_test(patch_embedding_flatten_of_channels_last_is_kept_in_both_spellings),
      cmocka_unit_test(patch_embedding_with_a_contiguous_base_is_replaced),
      cmocka_unit_test(legacy_policy_replaces_the_patch_embedding_view),
      cmocka_unit_test(degenerate_channels_last_views_are_replaced),
      cmocka_unit_test(flatten_declared_in_pytorch_memory_order_is_replaced),
      cmocka_unit_test(split_c_and_merge_hw_of_channels_last_is_replaced),
      cmocka_unit_test(channels_last_flattened_whole_is_kept),
      cmocka_unit_test(a_view_declared_in_an_order_the_alias_cannot_give_is_view_layout),
      cmocka_unit_test(five_d_channels_last_flatten_is_kept),
      cmocka_unit_test(relu_in_place_on_the_view_is_view_mutated),
      cmocka_unit_test(add_in_place_on_the_base_with_a_later_read_is_base_mutated),
      cmocka_unit_test(add_in_place_on_the_base_after_the_last_read_is_replaced),
      cmocka_unit_test(a_writer_that_also_reads_the_view_counts),
      cmocka_unit_test(copy_into_the_base_is_base_mutated),
      cmocka_unit_test(out_equals_the_view_is_view_mutated),
      cmocka_unit_test(a_custom_op_that_mutates_the_view_is_view_mutated),
      cmocka_unit_test(an_in_place_op_on_a_list_writes_every_tensor_in_it),
      cmocka_unit_test(a_dunder_name_ending_in_underscore_writes_arg_0),
      cmocka_unit_test(a_view_of_a_mutated_buffer_is_base_mutable_input),
      cmocka_unit_test(a_view_of_a_view_whose_root_is_written_later_is_kept),
      cmocka_unit_test(a_view_of_a_view_taken_before_its_root_was_written_stays_on_the_copy),
      cmocka_unit_test(a_view_of_a_view_copy_written_in_place_stays_on_that_copy),
      cmocka_unit_test(writes_through_an_earlier_replaced_alias_count_for_later_views),
      cmocka_unit_test(a_base_that_is_an_output_is_base_feeds_output),
      cmocka_unit_test(static_and_dynamic_do_not_alias),
      cmocka_unit_test(several_failed_conditions_are_all_listed_in_order),
      cmocka_unit_test(lowering_a_lowered_graph_changes_nothing),
      cmocka_unit_test(the_report_json_has_the_spec_fields),
      cmocka_unit_test(options_are_read_strictly),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_lower.c - the lowering passes (docs/format.md §3): normalization, dead view removal, the
 * exact layout test, every mutation rule, options and policies, the report. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lower/fold_ops.h"
#include "viewlower/interp.h"
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

static lowered lower_with(const char *json, const vl_lower_options *o) {
  lowered l;
  vl_error err;
  if (vl_graph_parse(json, strlen(json), NULL, &l.g, &err) != VL_OK)
    fail_msg("parse: %s: %s", err.path, err.message);
  assert_int_equal(vl_lower(l.g, o, &l.r, &err), VL_OK);
  return l;
}

static lowered lower_opts(const char *json, bool remove, vl_policy policy, bool fold) {
  vl_lower_options o;
  vl_lower_options_default(&o);
  o.remove_view_copy = remove;
  o.policy = policy;
  o.fold = fold;
  return lower_with(json, &o);
}

/* The view_copy tests run with fold false (view_copy alone); fold_* tests below fold. */
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

/* Messages are cut at 767 bytes exactly where snprintf would cut them (the report formats them
 * itself). */
static void long_names_cut_messages_as_snprintf_would(void **state) {
  (void)state;
  for (size_t len = 600; len <= 800; len += 100) {
    char name[801], graph[4096], want[2048];
    memset(name, 'b', len);
    name[len] = '\0';
    snprintf(graph, sizeof graph,
             HEAD PH("x", "float32", "[1,2,2,3]") CALLK("%s", "dim_order_ops._to_dim_order_copy.default",
                                                        "[\"x\"]", "{\"dim_order\":[0,2,3,1]}",
                                                        VAL("[1,2,2,3]", "[0,2,3,1]"))
                 VIEW("flat", "%s", "[1,2,-1]", "[1,2,6]", "[0,1,2]")
                     CALL("tokens", "aten.permute_copy.default", "[\"flat\",[0,2,1]]",
                          VAL("[1,6,2]", "[0,1,2]")) OUT("[\"tokens\"]"),
             name, name);
    lowered l = lower_safe(graph);
    snprintf(want, sizeof want, "base %s has dim_order [0,2,3,1]; viewing it as contiguous [1,2,6] "
             "would reorder elements", name);
    want[767] = '\0';
    assert_string_equal(decision(&l, "flat")->message, want);
    assert_int_equal(strlen(decision(&l, "flat")->message), len < 700 ? strlen(want) : 767);
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

/* A view_copy that writes another tensor (kwargs.out, mutates) and whose own result nobody reads
 * is no dead copy: its write is read through the tensor it writes (q reads z, or x). Dead removal
 * took it, so z kept its input values and q came out wrong, under fold and without it. */
/* json runs bit for bit the same before and after lowering with the default options and fold
 * (vl_verify, generated inputs of seed 7). */
static void verifies_equal(const char *json, bool fold) {
  vl_graph *g;
  vl_error err;
  vl_verify_result vr;
  vl_lower_options o;
  vl_lower_options_default(&o);
  o.fold = fold;
  assert_int_equal(vl_graph_parse(json, strlen(json), NULL, &g, &err), VL_OK);
  assert_int_equal(vl_verify(g, &o, NULL, 7, NULL, &vr, &err), VL_OK);
  assert_true(vr.equal);
  vl_verify_result_clear(&vr);
  vl_graph_free(g);
}

static void a_view_copy_that_writes_is_never_removed_as_dead(void **state) {
  (void)state;
  static const char *const graphs[] = {
      HEAD PH("x", "float32", "[2,3]") "," PH("z", "float32", "[6]")
          CALLK("v", "aten.view_copy.default", "[\"x\",[6]]", "{\"out\":\"z\"}", VAL6)
              CALL("q", "aten.relu.default", "[\"z\"]", VAL6) OUT("[\"q\"]"),
      HEAD PH("x", "float32", "[2,3]") "," PH("z", "float32", "[6]")
          ",{\"name\":\"v\",\"op\":\"call_function\",\"target\":\"aten.view_copy.default\","
          "\"args\":[\"x\",[6]],\"mutates\":[\"x\"]," VAL6 "}"
              CALL("q", "aten.relu.default", "[\"x\"]", VAL23) OUT("[\"q\"]")};
  for (size_t k = 0; k < 2; k++) {
    for (int fold = 0; fold <= 1; fold++) {
      lowered l = lower_opts(graphs[k], true, VL_POLICY_SAFE, fold);
      assert_int_equal(l.r.removed_dead, 0);
      const vl_node *v = node(&l, "v");
      assert_non_null(v);
      if (k == 0) { /* its result is the storage it writes: a copy that stays */
        assert_int_equal(l.r.kept, 1);
        assert_int_equal(decision(&l, "v")->reasons, R(VIEW_MUTATED));
        assert_string_equal(v->target, "aten.view_copy.default");
        assert_int_equal(v->out, 1);
      } else { /* it owns its result: decided as any view_copy, and still writes x */
        assert_int_equal(l.r.replaced + l.r.kept, 1);
        assert_int_equal(v->n_mutates, 1);
      }
      done(&l);
    }
  }
  /* The write is the program's: running before and after lowering gives the same q. */
  for (int fold = 0; fold <= 1; fold++) verifies_equal(graphs[0], fold);
}

/* A view_copy that lists its base in mutates writes that view_copy: normalization moved its
 * args[0] to the root and left mutates naming a node that was no argument any more, so the
 * lowered graph failed validation ("/nodes/2/mutates/0: \"a\" is not among the node's
 * arguments") and could not be lowered again. It keeps its base now. */
static void a_view_copy_that_writes_its_base_keeps_it_and_the_lowered_graph_validates(void **state) {
  (void)state;
  const char *json =
      HEAD PH("x", "float32", "[2,3]") VIEW("a", "x", "[6]", "[6]", "[0]")
          ",{\"name\":\"c\",\"op\":\"call_function\",\"target\":\"aten.view_copy.default\","
          "\"args\":[\"a\",[3,2]],\"mutates\":[\"a\"]," VAL("[3,2]", "[0,1]") "}"
              CALL("r", "aten.relu.default", "[\"c\"]", VAL("[3,2]", "[0,1]"))
                  CALL("q", "aten.relu.default", "[\"a\"]", VAL6) OUT("[\"r\",\"q\"]");
  for (int fold = 0; fold <= 1; fold++) {
    lowered l = lower_opts(json, true, VL_POLICY_SAFE, fold);
    assert_int_equal(l.r.normalized, 0);
    const vl_node *c = node(&l, "c");
    assert_non_null(c);
    assert_int_equal(c->n_mutates, 1);
    assert_int_equal(c->args[0].u.ref, c->mutates[0]);
    char *text = vl_graph_print(l.g);
    vl_graph *again;
    vl_error err;
    if (vl_graph_parse(text, strlen(text), NULL, &again, &err) != VL_OK)
      fail_msg("the lowered graph (fold %d) does not validate: %s: %s", fold, err.path, err.message);
    vl_graph_free(again);
    free(text);
    done(&l);
  }
}

/* A memory.view of the input names the owner it came with (the parser takes alias_of as given).
 * Its base v, a view_copy, became a view of x here, so "alias_of": "v" named a node that owns
 * nothing; an alias_of naming a view_copy w removed as dead was printed as no alias_of at all.
 * Every view of the lowered graph now names its storage's owner, x, in both cases; offsets stay
 * relative to args[0], and the values are the same (verify). */
#define MV(name, base, alias)                                                                      \
  ",{\"name\":\"" name "\",\"op\":\"call_function\",\"target\":\"memory.view\",\"args\":[\"" base  \
  "\",[4]],\"alias_of\":\"" alias "\",\"offset\":1," VAL("[4]", "[0]") "}"
static void views_of_the_input_name_their_owner_after_lowering(void **state) {
  (void)state;
  static const char *const graphs[] = {
      HEAD PH("x", "float32", "[2,3]") VIEW("v", "x", "[6]", "[6]", "[0]") MV("mv", "v", "v")
          CALL("r", "aten.relu.default", "[\"mv\"]", VAL("[4]", "[0]")) OUT("[\"r\"]"),
      HEAD PH("x", "float32", "[2,3]") VIEW("w", "x", "[3,2]", "[3,2]", "[0,1]") MV("mv", "x", "w")
          CALL("r", "aten.relu.default", "[\"mv\"]", VAL("[4]", "[0]")) OUT("[\"r\"]")};
  for (size_t k = 0; k < 2; k++) {
    for (int fold = 0; fold <= 1; fold++) {
      lowered l = lower_opts(graphs[k], true, VL_POLICY_SAFE, fold);
      const vl_node *mv = node(&l, "mv");
      assert_non_null(mv);
      assert_int_not_equal(mv->alias_of, VL_NO_NODE);
      assert_string_equal(l.g->nodes[mv->alias_of].name, "x");
      assert_int_equal(mv->offset, 1);
      if (k == 0) assert_string_equal(l.g->nodes[node(&l, "v")->alias_of].name, "x");
      done(&l);
    }
    verifies_equal(graphs[k], true);
  }
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


/* ---- The layout algebra (fold) -------------------------------------------------------------- */

#define SPEC(dtype, shape, order)                                                                  \
  "{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"dim_order\":" order "}"
#define PHV(name, extra, shape, order)                                                             \
  "{\"name\":\"" name "\",\"op\":\"placeholder\"" extra ",\"val\":" SPEC("float32", shape, order) "}"

/* nbytes of the input's layout-only nodes, for the report's bytes invariant. */
static int64_t layout_bytes(const char *json) {
  vl_graph *g;
  vl_error err;
  int64_t total = 0, nbytes;
  assert_int_equal(vl_graph_parse(json, strlen(json), NULL, &g, &err), VL_OK);
  for (uint32_t i = 0; i < g->n_nodes; i++)
    if (vl__fold_kind(g, i, NULL) != VL_FOLD_NONE && vl_spec_nbytes(g->nodes[i].val, &nbytes))
      total += nbytes;
  vl_graph_free(g);
  return total;
}

/* Lowers with fold and checks what every fold lowering must hold: the counters add up, one
 * decision per node left, bytes saved + copied = the layout-only bytes of the input, and
 * lowering the result again prints the same graph. */
static lowered lower_fold(const char *json) {
  lowered l = lower_opts(json, true, VL_POLICY_SAFE, true);
  const vl_report *r = &l.r;
  assert_int_equal(r->replaced + r->kept + r->merged + r->removed_dead, r->layout_copy_nodes);
  assert_int_equal(r->n_decisions, r->replaced + r->kept + r->merged);
  assert_int_equal(r->bytes_saved + r->bytes_copied, layout_bytes(json));
  char *once = vl_graph_print(l.g);
  lowered again = lower_opts(once, true, VL_POLICY_SAFE, true);
  char *twice = vl_graph_print(again.g);
  assert_string_equal(once, twice);
  assert_int_equal(again.r.replaced + again.r.merged + again.r.removed_dead, 0);
  free(once);
  free(twice);
  done(&again);
  return l;
}

/* Asserts node's decision: "replaced" / "kept" / "merged", its base, offset and reasons, and what
 * the node became in the graph. */
static void expect_fold(const lowered *l, const char *name, const char *want, const char *base,
                        int64_t offset, uint32_t reasons) {
  const vl_decision *d = decision(l, name);
  const vl_node *n = node(l, name);
  const char *got = d->replaced ? "replaced" : d->merged ? "merged" : "kept";
  if (strcmp(got, want) != 0 || d->reasons != reasons)
    fail_msg("%s: %s 0x%x, want %s 0x%x (%s)", name, got, d->reasons, want, reasons,
             d->message);
  assert_string_equal(d->base, base);
  assert_int_equal(d->offset, offset);
  assert_non_null(n);
  if (d->replaced) {
    assert_string_equal(n->target, "memory.view");
    assert_string_equal(l->g->nodes[n->args[0].u.ref].name, base);
    assert_int_equal(n->offset, offset);
  } else if (d->merged) {
    assert_string_equal(n->target, "aten.as_strided_copy.default");
    assert_string_equal(l->g->nodes[n->args[0].u.ref].name, base);
    assert_int_equal(n->args[3].u.i, offset);
  } else {
    assert_string_equal(n->target, d->target);
  }
}

static void expect_gone(const lowered *l, const char *name) {
  assert_null(node(l, name));
  for (uint32_t i = 0; i < l->r.n_decisions; i++)
    assert_string_not_equal(l->r.decisions[i].node, name);
}

/* A channels-last convolution output (an op lowering knows nothing of) flattened and then
 * transposed into tokens: the ViT patch embedding. */
#define CONV(n)                                                                                    \
  HEAD PHV("x", "", "[" n ",3,4,4]", "[0,1,2,3]") CALL(                                           \
      "conv", "aten.convolution.default", "[\"x\"]",                                               \
      "\"val\":" SPEC("float32", "[" n ",8,2,2]", "[0,2,3,1]"))                                   \
      VIEW("flat", "conv", "[" n ",8,4]", "[" n ",8,4]", "[0,1,2]")
#define TOKENS_T                                                                                   \
  CALL("tokens", "aten.transpose_copy.int", "[\"flat\",1,2]", VAL("[N,4,8]", "[0,1,2]"))
#define PATCH_TOKENS(n, tokens)                                                                    \
  CONV(n) tokens CALL("y", "aten.add.Tensor", "[\"tokens\",1]", VAL("[" n ",4,8]", "[0,1,2]"))     \
      OUT("[\"y\"]")

static void the_patch_token_chain_is_one_alias_of_the_convolution(void **state) {
  (void)state;
  const char *graphs[] = {
      PATCH_TOKENS("1", CALL("tokens", "aten.transpose_copy.int", "[\"flat\",1,2]",
                             VAL("[1,4,8]", "[0,1,2]"))),
      PATCH_TOKENS("1", CALL("tokens", "aten.permute_copy.default", "[\"flat\",[0,2,1]]",
                             VAL("[1,4,8]", "[0,1,2]"))),
      PATCH_TOKENS("2", CALL("tokens", "aten.transpose_copy.int", "[\"flat\",-1,-2]",
                             VAL("[2,4,8]", "[0,1,2]"))),
      PATCH_TOKENS("2", CALL("tokens", "aten.permute_copy.default", "[\"flat\",[0,2,1]]",
                             VAL("[2,4,8]", "[0,1,2]"))),
  };
  for (size_t i = 0; i < sizeof graphs / sizeof *graphs; i++) {
    lowered l = lower_fold(graphs[i]);
    int64_t n = i < 2 ? 1 : 2;
    assert_int_equal(l.r.layout_copy_nodes, 2);
    assert_int_equal(l.r.replaced, 1);
    assert_int_equal(l.r.removed_dead, 1);
    assert_int_equal(l.r.bytes_copied, 0);
    assert_int_equal(l.r.bytes_saved, 2 * n * 32 * 4);
    expect_fold(&l, "tokens", "replaced", "conv", 0, 0);
    expect_gone(&l, "flat");
    assert_string_equal(l.g->nodes[node(&l, "tokens")->alias_of].name, "conv");
    done(&l);
    /* --no-fold lowers view_copy alone: the flatten is kept, the transpose is no view_copy. */
    l = lower_text(graphs[i], true, VL_POLICY_SAFE);
    expect(&l, "flat", R(BASE_LAYOUT));
    assert_int_equal(l.r.layout_copy_nodes, 1);
    assert_int_equal(l.r.n_decisions, 1);
    done(&l);
  }
}

/* ShuffleNet's channel shuffle: view -> transpose -> clone(contiguous) -> view. */
#define SHUFFLE(clone)                                                                             \
  HEAD PHV("x", "", "[1,4,2,2]", "[0,1,2,3]")                                                      \
  CALL("r", "aten.relu.default", "[\"x\"]", VAL("[1,4,2,2]", "[0,1,2,3]"))                         \
  VIEW("v1", "r", "[1,2,2,2,2]", "[1,2,2,2,2]", "[0,1,2,3,4]")                                     \
  CALL("t", "aten.transpose_copy.int", "[\"v1\",1,2]", VAL("[1,2,2,2,2]", "[0,1,2,3,4]"))          \
  clone VIEW("v2", "c", "[1,4,2,2]", "[1,4,2,2]", "[0,1,2,3]")                                     \
      CALL("y", "aten.relu.default", "[\"v2\"]", VAL("[1,4,2,2]", "[0,1,2,3]")) OUT("[\"y\"]")

static void the_channel_shuffle_keeps_exactly_one_copy_its_transpose(void **state) {
  (void)state;
  const char *graphs[] = {
      SHUFFLE(CALLK("c", "dim_order_ops._clone_dim_order.default", "[\"t\"]",
                    "{\"dim_order\":[0,1,2,3,4]}", VAL("[1,2,2,2,2]", "[0,1,2,3,4]"))),
      G("true") PHV("x", "", "[1,4,2,2]", "[0,1,2,3]")
          CALL("r", "aten.relu.default", "[\"x\"]", VAL("[1,4,2,2]", "[0,1,2,3]"))
              VIEW("v1", "r", "[1,2,2,2,2]", "[1,2,2,2,2]", "[0,1,2,3,4]")
                  CALL("t", "aten.transpose_copy.int", "[\"v1\",1,2]",
                       VAL("[1,2,2,2,2]", "[0,1,2,3,4]"))
                      CALLK("c", "aten.clone.default", "[\"t\"]",
                            "{\"memory_format\":\"contiguous_format\"}",
                            VAL("[1,2,2,2,2]", "[0,1,2,3,4]"))
                          VIEW("v2", "c", "[1,4,2,2]", "[1,4,2,2]", "[0,1,2,3]")
                              CALL("y", "aten.relu.default", "[\"v2\"]",
                                   VAL("[1,4,2,2]", "[0,1,2,3]")) OUT("[\"y\"]"),
  };
  for (size_t i = 0; i < 2; i++) {
    lowered l = lower_fold(graphs[i]);
    assert_int_equal(l.r.layout_copy_nodes, 4);
    assert_int_equal(l.r.kept, 1);
    /* The clone aliases t's buffer, the last view aliases that buffer too, so the clone, read
     * by nothing any more, is removed dead after replace (docs/format.md §3). */
    assert_int_equal(l.r.replaced, 2);
    assert_int_equal(l.r.removed_dead, 1);
    assert_int_equal(l.r.bytes_copied, 64);
    expect_fold(&l, "v1", "replaced", "r", 0, 0);
    expect_fold(&l, "t", "kept", "r", 0, R(REORDERS));
    assert_string_equal(decision(&l, "t")->message,
                        "no strided alias of r puts every element where t's declared dim_order "
                        "[0,1,2,3,4] wants it");
    expect_gone(&l, "c");
    expect_fold(&l, "v2", "replaced", "t", 0, 0);
    done(&l);
  }
}

#define TWO_TRANSPOSES(second)                                                                     \
  HEAD PHV("x", "", "[2,3,4]", "[0,1,2]")                                                          \
  CALL("t1", "aten.transpose_copy.int", "[\"x\",0,1]", VAL("[3,2,4]", "[0,1,2]")) second           \
      CALL("y", "aten.relu.default", "[\"t2\"]", VAL("[3,4,2]", "[0,1,2]")) OUT("[\"y\"]")

static void two_transposes_that_do_not_cancel_merge_into_one_strided_copy(void **state) {
  (void)state;
  lowered l = lower_fold(TWO_TRANSPOSES(
      CALL("t2", "aten.transpose_copy.int", "[\"t1\",1,2]", VAL("[3,4,2]", "[0,1,2]"))));
  assert_int_equal(l.r.merged, 1);
  assert_int_equal(l.r.removed_dead, 1);
  assert_int_equal(l.r.kept, 0);
  expect_fold(&l, "t2", "merged", "x", 0, R(REORDERS));
  expect_gone(&l, "t1");
  const vl_node *t2 = node(&l, "t2");
  assert_int_equal(t2->n_args, 4);
  int64_t want_size[] = {3, 4, 2}, want_stride[] = {4, 1, 12};
  for (int k = 0; k < 3; k++) {
    assert_int_equal(t2->args[1].u.items[k].u.i, want_size[k]);
    assert_int_equal(t2->args[2].u.items[k].u.i, want_stride[k]);
  }
  assert_int_equal(l.r.bytes_copied, 96);
  cJSON *json = vl_report_to_json(&l.r);
  char *text = cJSON_PrintUnformatted(cJSON_GetArrayItem(cJSON_GetObjectItem(json, "decisions"), 0));
  assert_string_equal(text, "{\"node\":\"t2\",\"target\":\"aten.transpose_copy.int\",\"base\":\"x\","
                            "\"decision\":\"merged\",\"reasons\":[\"reorders\"],\"message\":"
                            "\"merged: copies straight from x (one pass over memory instead of "
                            "two); it cannot alias: no strided alias of x puts every element where "
                            "t2's declared dim_order [0,1,2] wants it\"}");
  free(text);
  cJSON_Delete(json);
  done(&l);
  /* Two that cancel are one alias of x, and the first falls dead. */
  l = lower_fold(TWO_TRANSPOSES(
      CALL("t2", "aten.transpose_copy.int", "[\"t1\",0,1]", VAL("[2,3,4]", "[0,1,2]"))
          CALL("y2", "aten.view_copy.default", "[\"t2\",[3,4,2]]", VAL("[3,4,2]", "[0,1,2]"))));
  done(&l);
}

/* A layout-only node whose arguments give no view of its input (PyTorch would raise) stays a
 * copy, and its message names the argument at fault and the rule, not a layout. (z's val is
 * not checked: lowering reads only the specs of layout-only nodes and their inputs.) */
#define BAD_ARGS(call)                                                                             \
  HEAD PHV("x", "", "[2,3]", "[0,1]") call CALL("z", "aten.relu.default", "[\"y\"]",               \
                                                "\"val\":{\"dtype\":\"float32\",\"shape\":[1]}")   \
      OUT("[\"z\"]")

static void arguments_that_give_no_view_are_named_in_the_message(void **state) {
  (void)state;
  const struct {
    const char *graph, *message;
  } cases[] = {
      {BAD_ARGS(CALL("y", "aten.permute_copy.default", "[\"x\",[0,0]]", VAL("[2,3]", "[0,1]"))),
       "dims [0,0] are not a permutation of 0..1 (at y's /args/1)"},
      {BAD_ARGS(CALL("y", "aten.permute_copy.default", "[\"x\",[1,0]]", VAL("[2,3]", "[0,1]"))),
       "the arguments give shape [3,2] from an input of shape [2,3], not val's [2,3] (at y's "
       "/val/shape)"},
      {BAD_ARGS(CALL("y", "aten.transpose_copy.int", "[\"x\",0,5]", VAL("[3,2]", "[0,1]"))),
       "dim 5 is out of range for rank 2 (-2..1) (at y's /args/2)"},
      {BAD_ARGS(CALLK("y", "aten.slice_copy.Tensor", "[\"x\",1]", "{\"step\":0}",
                      VAL("[2,3]", "[0,1]"))),
       "step 0 is not 1 or more (at y's /kwargs/step)"},
      {BAD_ARGS(CALL("y", "aten.squeeze_copy.dims", "[\"x\",[-1,1]]", VAL("[2,3]", "[0,1]"))),
       "dim [-1,1]: dim 1 is listed twice (at y's /args/1)"},
      {BAD_ARGS(CALL("y", "aten.unsqueeze_copy.default", "[\"x\",-4]", VAL("[1,2,3]", "[0,1,2]"))),
       "dim -4 is out of range for rank 2 (-3..2) (at y's /args/1)"},
      {BAD_ARGS(
           CALL("y", "aten.as_strided_copy.default", "[\"x\",[2,3],[1]]", VAL("[2,3]", "[0,1]"))),
       "stride has 1 entries but size 2 (at y's /args/2)"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    lowered l = lower_fold(cases[k].graph);
    expect_fold(&l, "y", "kept", "x", 0, R(REORDERS));
    char want[512];
    snprintf(want, sizeof want, "y's arguments give no view of x: %s", cases[k].message);
    assert_string_equal(decision(&l, "y")->message, want);
    done(&l);
  }
}

#define QKV(end)                                                                                   \
  HEAD PHV("x", "", "[12,5]", "[0,1]")                                                             \
  CALL("qkv", "aten.relu.default", "[\"x\"]", VAL("[12,5]", "[0,1]"))                              \
  CALL("q", "aten.slice_copy.Tensor", "[\"qkv\",0,0,4]", VAL("[4,5]", "[0,1]"))                    \
  CALL("k", "aten.slice_copy.Tensor", "[\"qkv\",0,4,8]", VAL("[4,5]", "[0,1]"))                    \
  CALL("v", "aten.slice_copy.Tensor", "[\"qkv\",0,8," end "]", VAL("[4,5]", "[0,1]"))              \
  CALL("qk", "aten.add.Tensor", "[\"q\",\"k\"]", VAL("[4,5]", "[0,1]"))                            \
  CALL("y", "aten.mul.Tensor", "[\"qk\",\"v\"]", VAL("[4,5]", "[0,1]")) OUT("[\"y\"]")

static void a_qkv_split_by_slices_is_three_aliases_at_offsets(void **state) {
  (void)state;
  const char *graphs[] = {QKV("9223372036854775807"), QKV("12"), QKV("-0"), QKV("null")};
  for (size_t i = 0; i < sizeof graphs / sizeof *graphs; i++) {
    if (i == 2) continue; /* -0 is 0: an empty slice, not this graph */
    lowered l = lower_fold(graphs[i]);
    expect_fold(&l, "q", "replaced", "qkv", 0, 0);
    expect_fold(&l, "k", "replaced", "qkv", 20, 0);
    expect_fold(&l, "v", "replaced", "qkv", 40, 0);
    assert_string_equal(decision(&l, "k")->message,
                        "aliases qkv at element offset 20: every element keeps its memory offset "
                        "and nothing writes the storage while the view is read; saves 80 bytes");
    cJSON *json = vl_report_to_json(&l.r);
    cJSON *k = cJSON_GetArrayItem(cJSON_GetObjectItem(json, "decisions"), 1);
    assert_int_equal(cJSON_GetObjectItem(k, "offset")->valueint, 20);
    assert_null(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(json, "decisions"), 0),
                                    "offset"));
    cJSON_Delete(json);
    char *text = vl_graph_print(l.g);
    assert_non_null(strstr(text, "{\"name\":\"k\",\"op\":\"call_function\",\"target\":"
                                 "\"memory.view\",\"args\":[\"qkv\",[4,5]],\"alias_of\":\"qkv\","
                                 "\"offset\":20,"));
    free(text);
    done(&l);
  }
}

static void a_slice_of_an_inner_dim_or_with_a_step_stays_a_copy(void **state) {
  (void)state;
  lowered l = lower_fold(
      HEAD PHV("x", "", "[4,5]", "[0,1]")
          CALL("inner", "aten.slice_copy.Tensor", "[\"x\",1,0,2]", VAL("[4,2]", "[0,1]"))
              CALL("step", "aten.slice_copy.Tensor", "[\"x\",0,0,4,2]", VAL("[2,5]", "[0,1]"))
                  CALL("sel", "aten.select_copy.int", "[\"x\",1,-1]", VAL("[4]", "[0]"))
                      CALL("row", "aten.select_copy.int", "[\"x\",0,3]", VAL("[5]", "[0]"))
                          OUT("[\"inner\",\"step\",\"sel\",\"row\"]"));
  expect_fold(&l, "inner", "kept", "x", 0, R(FEEDS_OUTPUT) | R(REORDERS));
  expect_fold(&l, "step", "kept", "x", 0, R(FEEDS_OUTPUT) | R(REORDERS));
  expect_fold(&l, "sel", "kept", "x", 0, R(FEEDS_OUTPUT) | R(REORDERS));
  /* A row of x passes the layout test, but it is an output. */
  expect_fold(&l, "row", "kept", "x", 0, R(FEEDS_OUTPUT));
  done(&l);
}

/* A Linear's weight: t_copy(w) feeding addmm. */
#define LINEAR(wkind, extra_reader)                                                                \
  HEAD PHV("w", wkind, "[6,4]", "[0,1]") "," PHV("x", "", "[2,4]", "[0,1]")                       \
  CALL("wt", "aten.t_copy.default", "[\"w\"]", VAL("[4,6]", "[0,1]"))                             \
  CALL("y", "aten.mm.default", "[\"x\",\"wt\"]", VAL("[2,6]", "[0,1]")) extra_reader              \
  OUT("[\"y\"]")
#define PARAM ",\"kind\":\"parameter\""

static lowered lower_no_params(const char *json) {
  vl_lower_options o;
  vl_lower_options_default(&o);
  o.param_layouts = false;
  return lower_with(json, &o);
}

static void a_transpose_of_a_contiguous_weight_stays_a_copy_without_param_layouts(void **state) {
  (void)state;
  lowered l = lower_no_params(LINEAR(PARAM, ""));
  expect_fold(&l, "wt", "kept", "w", 0, R(REORDERS));
  assert_int_equal(l.r.bytes_copied, 96);
  assert_false(l.r.params_ran);
  cJSON *j = vl_report_to_json(&l.r);
  assert_null(cJSON_GetObjectItem(j, "params_relaid"));
  assert_null(cJSON_GetObjectItem(j, "param_layouts"));
  cJSON_Delete(j);
  done(&l);
  /* Declared in the order the transpose gives, it is an alias. */
  l = lower_fold(HEAD PHV("w", PARAM, "[6,4]", "[0,1]")
                     CALL("wt", "aten.t_copy.default", "[\"w\"]", VAL("[4,6]", "[1,0]"))
                         CALL("y", "aten.relu.default", "[\"wt\"]", VAL("[4,6]", "[0,1]"))
                             OUT("[\"y\"]"));
  expect_fold(&l, "wt", "replaced", "w", 0, 0);
  assert_int_equal(l.r.params_relaid, 0);
  done(&l);
}

static char *json_text(const cJSON *j) {
  char *t = cJSON_PrintUnformatted(j);
  assert_non_null(t);
  return t;
}

static const vl_param_kept *kept_param(const lowered *l, const char *name);

/* Stored parameter layouts: the weight is stored transposed and the t_copy is its alias. */
static void a_linear_weight_is_stored_transposed_and_its_t_copy_aliases_it(void **state) {
  (void)state;
  lowered l = lower_fold(LINEAR(PARAM, ""));
  const vl_node *w = node(&l, "w");
  assert_int_equal(w->val->dim_order[0], 1);
  assert_int_equal(w->val->dim_order[1], 0);
  expect_fold(&l, "wt", "replaced", "w", 0, 0);
  assert_int_equal(l.r.bytes_copied, 0);
  assert_int_equal(l.r.bytes_saved, 96);
  assert_int_equal(l.r.params_relaid, 1);
  cJSON *j = vl_report_to_json(&l.r);
  char *t = json_text(cJSON_GetObjectItem(j, "param_layouts"));
  assert_string_equal(t, "[{\"node\":\"w\",\"dim_order\":[1,0],\"was\":[0,1],\"nbytes\":96,"
                         "\"aliased\":1}]");
  free(t);
  assert_int_equal(cJSON_GetObjectItem(j, "params_relaid")->valueint, 1);
  t = json_text(cJSON_GetObjectItem(j, "params_not_relaid"));
  assert_string_equal(t, "[]");
  free(t);
  cJSON_Delete(j);
  /* The printed graph declares the stored order. */
  char *g = vl_graph_print(l.g);
  assert_non_null(strstr(g, "\"name\":\"w\",\"op\":\"placeholder\",\"kind\":\"parameter\","
                            "\"val\":{\"dtype\":\"float32\",\"shape\":[6,4],\"dim_order\":[1,0]}"));
  free(g);
  done(&l);
  /* A constant too; a buffer, a user input never. */
  l = lower_fold(LINEAR(",\"kind\":\"constant\"", ""));
  assert_int_equal(l.r.params_relaid, 1);
  done(&l);
  const char *never[] = {",\"kind\":\"buffer\"", ",\"kind\":\"buffer\",\"mutated\":true", "",
                         ",\"kind\":\"user_input\",\"mutated\":true"};
  for (size_t k = 0; k < sizeof never / sizeof *never; k++) {
    char json[2048];
    snprintf(json, sizeof json, LINEAR("%s", ""), never[k]);
    l = lower_fold(json);
    assert_int_equal(l.r.params_relaid, 0);
    assert_int_equal(l.r.n_params_kept, 0);
    assert_int_equal(node(&l, "w")->val->dim_order[0], 0);
    expect_fold(&l, "wt", "kept", "w", 0,
                R(REORDERS) | (strstr(never[k], "mutated") ? R(BASE_MUTABLE_INPUT) : 0));
    done(&l);
  }
  /* A parameter or constant the program writes (marked mutated) is accepted and keeps its
   * layout, listed with its own rule; its t_copy stays a copy. */
  const char *written[] = {PARAM ",\"mutated\":true", ",\"kind\":\"constant\",\"mutated\":true"};
  for (size_t k = 0; k < sizeof written / sizeof *written; k++) {
    char json[2048];
    snprintf(json, sizeof json, LINEAR("%s", ""), written[k]);
    l = lower_fold(json);
    assert_int_equal(l.r.params_relaid, 0);
    assert_int_equal(node(&l, "w")->val->dim_order[0], 0);
    assert_int_equal(kept_param(&l, "w")->rules, 1u << VL_PARAM_MUTATED);
    expect_fold(&l, "wt", "kept", "w", 0, R(REORDERS) | R(BASE_MUTABLE_INPUT));
    done(&l);
  }
}

static const vl_param_kept *kept_param(const lowered *l, const char *name) {
  for (uint32_t i = 0; i < l->r.n_params_kept; i++)
    if (strcmp(l->r.params_kept[i].node, name) == 0) return &l->r.params_kept[i];
  fail_msg("no params_not_relaid entry for %s", name);
  return NULL;
}

/* Weight tying: a reader that is not layout-only keeps the layout, and the weight is never
 * duplicated; the report names the reader that blocks it. */
static void a_tied_weight_keeps_its_layout_and_names_its_blocker(void **state) {
  (void)state;
  lowered l = lower_fold(LINEAR(PARAM, CALL("e", "aten.embedding.default", "[\"w\",\"x\"]",
                                            VAL("[2,4,4]", "[0,1,2]"))));
  assert_int_equal(l.r.params_relaid, 0);
  assert_int_equal(node(&l, "w")->val->dim_order[0], 0);
  expect_fold(&l, "wt", "kept", "w", 0, R(REORDERS));
  const vl_param_kept *k = kept_param(&l, "w");
  assert_int_equal(k->rules, 0);
  assert_int_equal(k->n_blockers, 1);
  assert_string_equal(k->blockers[0].node, "e");
  assert_int_equal(k->blockers[0].rule, VL_PARAM_READ_BY_OP);
  cJSON *j = vl_report_to_json(&l.r);
  char *t = json_text(cJSON_GetObjectItem(j, "params_not_relaid"));
  assert_string_equal(t, "[{\"node\":\"w\",\"reasons\":[],\"blockers\":[{\"node\":\"e\","
                         "\"reason\":\"read_by_op\"}],\"message\":\"w keeps its declared layout: e "
                         "reads it with an op that is not layout-only\"}]");
  free(t);
  cJSON_Delete(j);
  int placeholders = 0;
  for (uint32_t i = 0; i < l.g->n_nodes; i++) placeholders += l.g->nodes[i].op == VL_NODE_PLACEHOLDER;
  assert_int_equal(placeholders, 2);
  done(&l);
  /* Listed in the output, read through as_strided_copy or a memory.view: never relaid. */
  l = lower_fold(HEAD PHV("w", PARAM, "[6,4]", "[0,1]")
                     CALL("wt", "aten.t_copy.default", "[\"w\"]", VAL("[4,6]", "[0,1]"))
                         OUT("[\"wt\",\"w\"]"));
  assert_int_equal(l.r.params_relaid, 0);
  assert_int_equal(kept_param(&l, "w")->rules, 1u << VL_PARAM_FEEDS_OUTPUT);
  assert_int_equal(kept_param(&l, "w")->n_blockers, 0);
  assert_string_equal(kept_param(&l, "w")->message, "w keeps its declared layout: feeds_output");
  done(&l);
  l = lower_fold(LINEAR(PARAM, CALL("s", "aten.as_strided_copy.default", "[\"w\",[4,6],[1,4],0]",
                                    VAL("[4,6]", "[0,1]"))
                                   CALL("z", "aten.relu.default", "[\"s\"]", VAL("[4,6]", "[0,1]"))));
  assert_int_equal(l.r.params_relaid, 0);
  assert_int_equal(kept_param(&l, "w")->blockers[0].rule, VL_PARAM_READS_BUFFER);
  done(&l);
  /* One element, or dynamic: nothing to relay. */
  l = lower_fold(HEAD PHV("w", PARAM, "[1,1]", "[0,1]")
                     CALL("wt", "aten.t_copy.default", "[\"w\"]", VAL("[1,1]", "[0,1]"))
                         CALL("y", "aten.relu.default", "[\"wt\"]", VAL("[1,1]", "[0,1]"))
                             OUT("[\"y\"]"));
  assert_int_equal(l.r.params_relaid, 0);
  done(&l);
}

/* A weight read by permutes and a reshape: the order with the most bytes aliased wins, the
 * declared order on ties. */
#define PERMUTE_AND_RESHAPE(second)                                                                \
  HEAD PHV("w", PARAM, "[2,3,4]", "[0,1,2]")                                                       \
  CALL("p", "aten.permute_copy.default", "[\"w\",[2,0,1]]", VAL("[4,2,3]", "[0,1,2]"))             \
  second VIEW("r", "w", "[6,4]", "[6,4]", "[0,1]")                                                 \
  CALL("y", "aten.add.Tensor", "[\"p\",\"r\"]", VAL("[4,2,3]", "[0,1,2]")) OUT("[\"y\"]")

static void the_score_picks_the_order_and_ties_keep_the_declared_one(void **state) {
  (void)state;
  lowered l = lower_fold(PERMUTE_AND_RESHAPE(""));
  assert_int_equal(l.r.params_relaid, 0); /* 96 bytes either way */
  expect_fold(&l, "p", "kept", "w", 0, R(REORDERS));
  expect_fold(&l, "r", "replaced", "w", 0, 0);
  done(&l);
  l = lower_fold(PERMUTE_AND_RESHAPE(
      CALL("q", "aten.permute_copy.default", "[\"w\",[2,0,1]]", VAL("[4,2,3]", "[0,1,2]"))
          CALL("z", "aten.add.Tensor", "[\"q\",\"q\"]", VAL("[4,2,3]", "[0,1,2]"))));
  assert_int_equal(l.r.params_relaid, 1);
  const vl_param_layout *e = &l.r.param_layouts[0];
  assert_memory_equal(e->dim_order, ((uint8_t[]){2, 0, 1}), 3);
  assert_memory_equal(e->was, ((uint8_t[]){0, 1, 2}), 3);
  assert_int_equal(e->aliased, 2);
  expect_fold(&l, "p", "replaced", "w", 0, 0);
  expect_fold(&l, "q", "replaced", "w", 0, 0);
  expect_fold(&l, "r", "kept", "w", 0, R(BASE_LAYOUT));
  done(&l);
}

/* A conv weight converted to channels-last by a layout conversion is stored channels-last. */
static void a_conv_weight_converted_to_channels_last_is_stored_so(void **state) {
  (void)state;
  lowered l = lower_fold(HEAD PHV("w", PARAM, "[8,3,3,3]", "[0,1,2,3]")
                             CALLK("wc", "dim_order_ops._to_dim_order_copy.default", "[\"w\"]",
                                   "{\"dim_order\":[0,2,3,1]}", VAL("[8,3,3,3]", "[0,2,3,1]"))
                                 CALL("y", "aten.relu.default", "[\"wc\"]",
                                      VAL("[8,3,3,3]", "[0,2,3,1]")) OUT("[\"y\"]"));
  assert_int_equal(l.r.params_relaid, 1);
  assert_memory_equal(l.r.param_layouts[0].dim_order, ((uint8_t[]){0, 2, 3, 1}), 4);
  expect_fold(&l, "wc", "replaced", "w", 0, 0);
  done(&l);
  /* The same in the other spelling. */
  l = lower_fold(G("true") PHV("w", PARAM, "[8,3,3,3]", "[0,1,2,3]")
                     CALLK("wc", "aten._to_copy.default", "[\"w\"]",
                           "{\"memory_format\":\"channels_last\"}", VAL("[8,3,3,3]", "[0,2,3,1]"))
                         CALL("y", "aten.relu.default", "[\"wc\"]", VAL("[8,3,3,3]", "[0,2,3,1]"))
                             OUT("[\"y\"]"));
  assert_int_equal(l.r.params_relaid, 1);
  expect_fold(&l, "wc", "replaced", "w", 0, 0);
  done(&l);
}

/* A reader that is itself written, or is an output, is not counted: no gain, no relayout. */
static void readers_that_cannot_alias_score_nothing(void **state) {
  (void)state;
  lowered l = lower_fold(HEAD PHV("w", PARAM, "[6,4]", "[0,1]")
                             CALL("wt", "aten.t_copy.default", "[\"w\"]", VAL("[4,6]", "[0,1]"))
                                 CALL("a", "aten.add_.Tensor", "[\"wt\",1]", VAL("[4,6]", "[0,1]"))
                                     OUT("[\"a\"]"));
  assert_int_equal(l.r.params_relaid, 0);
  expect_fold(&l, "wt", "kept", "w", 0, R(REORDERS) | R(VIEW_MUTATED));
  done(&l);
  l = lower_fold(HEAD PHV("w", PARAM, "[6,4]", "[0,1]")
                     CALL("wt", "aten.t_copy.default", "[\"w\"]", VAL("[4,6]", "[0,1]"))
                         OUT("[\"wt\"]"));
  assert_int_equal(l.r.params_relaid, 0);
  done(&l);
}

static void param_and_plan_options_are_read_from_json(void **state) {
  (void)state;
  vl_lower_options o;
  vl_error err;
  assert_int_equal(vl_lower_options_from_json(NULL, &o, &err), VL_OK);
  assert_true(o.param_layouts);
  assert_false(o.plan);
  assert_int_equal(o.plan_alignment, 16);
  cJSON *j = cJSON_Parse("{\"param_layouts\":false,\"plan\":true,\"plan_alignment\":64}");
  assert_int_equal(vl_lower_options_from_json(j, &o, &err), VL_OK);
  assert_false(o.param_layouts);
  assert_true(o.plan);
  assert_int_equal(o.plan_alignment, 64);
  cJSON_Delete(j);
  const char *bad[][2] = {{"{\"param_layouts\":1}", "/param_layouts"},
                          {"{\"plan\":\"yes\"}", "/plan"},
                          {"{\"plan_alignment\":12}", "/plan_alignment"},
                          {"{\"plan_alignment\":0}", "/plan_alignment"},
                          {"{\"plan_alignment\":2.5}", "/plan_alignment"},
                          {"{\"plan_alignment\":2147483648}", "/plan_alignment"}};
  for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
    j = cJSON_Parse(bad[k][0]);
    assert_int_equal(vl_lower_options_from_json(j, &o, &err), VL_ERR_INVALID_PARAMS);
    assert_string_equal(err.path, bad[k][1]);
    cJSON_Delete(j);
  }
  j = cJSON_Parse("{\"plan_alignment\":1}");
  assert_int_equal(vl_lower_options_from_json(j, &o, &err), VL_OK);
  assert_int_equal(o.plan_alignment, 1);
  cJSON_Delete(j);
}

static void an_option_given_null_keeps_its_default(void **state) {
  (void)state;
  vl_lower_options o;
  vl_error err;
  cJSON *j = cJSON_Parse("{\"remove_view_copy\":null,\"policy\":null,\"fold\":null,"
                         "\"param_layouts\":null,\"plan\":null,\"plan_alignment\":null}");
  assert_int_equal(vl_lower_options_from_json(j, &o, &err), VL_OK);
  assert_true(o.remove_view_copy);
  assert_int_equal(o.policy, VL_POLICY_SAFE);
  assert_true(o.fold);
  assert_true(o.param_layouts);
  assert_false(o.plan);
  assert_int_equal(o.plan_alignment, 16);
  cJSON_Delete(j);
}

/* The patch-token chain with one more node after the flatten, and the tokens' reader. */
#define CHAIN_WITH(mid, reader, outs)                                                              \
  CONV("1") mid CALL("tokens", "aten.transpose_copy.int", "[\"flat\",1,2]", VAL("[1,4,8]", "[0,1,2]")) \
      reader OUT(outs)
#define READ_TOKENS CALL("y", "aten.add.Tensor", "[\"tokens\",1]", VAL("[1,4,8]", "[0,1,2]"))

static void every_mutation_rule_applies_to_a_folded_node(void **state) {
  (void)state;
  /* feeds_output: the tokens are an output. They stay a copy, but one from conv: the flatten,
   * read by nothing else, merges away. */
  lowered l = lower_fold(CHAIN_WITH("", "", "[\"tokens\"]"));
  expect_fold(&l, "tokens", "merged", "conv", 0, R(FEEDS_OUTPUT));
  expect_gone(&l, "flat");
  done(&l);
  /* view_mutated */
  l = lower_fold(CHAIN_WITH("", CALL("w", "aten.add_.Tensor", "[\"tokens\",1]", VAL("[1,4,8]", "[0,1,2]"))
                                    READ_TOKENS, "[\"y\"]"));
  expect_fold(&l, "tokens", "merged", "conv", 0, R(VIEW_MUTATED));
  done(&l);
  /* base_mutated: the root is written while the tokens are still read. */
  l = lower_fold(CHAIN_WITH("", CALL("w", "aten.relu_.default", "[\"conv\"]",
                                     "\"val\":" SPEC("float32", "[1,8,2,2]", "[0,2,3,1]")) READ_TOKENS,
                            "[\"y\"]"));
  expect_fold(&l, "tokens", "merged", "conv", 0, R(BASE_MUTATED));
  done(&l);
  /* base_feeds_output: the root is an output. */
  l = lower_fold(CHAIN_WITH("", READ_TOKENS, "[\"y\",\"conv\"]"));
  expect_fold(&l, "tokens", "merged", "conv", 0, R(BASE_FEEDS_OUTPUT));
  done(&l);
  /* The root written between the chain's copy and the tokens: candidate 1 is not intact, and
   * the flatten's own buffer transposed reorders. */
  l = lower_fold(CHAIN_WITH(CALL("w", "aten.relu_.default", "[\"conv\"]",
                                 "\"val\":" SPEC("float32", "[1,8,2,2]", "[0,2,3,1]")),
                            READ_TOKENS, "[\"y\"]"));
  expect_fold(&l, "flat", "kept", "conv", 0, R(BASE_LAYOUT) | R(BASE_MUTATED));
  expect_fold(&l, "tokens", "kept", "flat", 0, R(REORDERS));
  assert_int_equal(l.r.merged, 0);
  done(&l);
  /* The flatten itself written before the tokens read it: the same. */
  l = lower_fold(CHAIN_WITH(CALL("w", "aten.relu_.default", "[\"flat\"]", VAL("[1,8,4]", "[0,1,2]")),
                            READ_TOKENS, "[\"y\"]"));
  expect_fold(&l, "tokens", "kept", "flat", 0, R(REORDERS));
  done(&l);
  /* base_mutable_input: a slice of a mutated input. */
  l = lower_fold(HEAD PHV("x", ",\"kind\":\"buffer\",\"mutated\":true", "[4,5]", "[0,1]")
                     CALL("s", "aten.slice_copy.Tensor", "[\"x\",0,1,3]", VAL("[2,5]", "[0,1]"))
                         CALL("y", "aten.relu.default", "[\"s\"]", VAL("[2,5]", "[0,1]"))
                             OUT("[\"y\"]"));
  expect_fold(&l, "s", "kept", "x", 0, R(BASE_MUTABLE_INPUT));
  done(&l);
  /* dynamic_shape: a dynamic permute is never folded. */
  l = lower_fold(HEAD "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\","
                      "\"shape\":[4,5],\"dynamic\":true}}"
                      CALL("p", "aten.permute_copy.default", "[\"x\",[1,0]]",
                           "\"val\":{\"dtype\":\"float32\",\"shape\":[5,4],\"dim_order\":[1,0],"
                           "\"dynamic\":true}")
                          CALL("y", "aten.relu.default", "[\"p\"]", VAL("[5,4]", "[0,1]"))
                              OUT("[\"y\"]"));
  expect_fold(&l, "p", "kept", "x", 0, R(DYNAMIC_SHAPE));
  done(&l);
}

static void a_split_is_aliases_of_its_input_and_the_producer_goes(void **state) {
  (void)state;
  lowered l = lower_fold(
      HEAD PHV("x", "", "[6,5]", "[0,1]")
          CALL("r", "aten.relu.default", "[\"x\"]", VAL("[6,5]", "[0,1]"))
      ",{\"name\":\"sp\",\"op\":\"call_function\",\"target\":\"aten.split_with_sizes_copy.default\","
      "\"args\":[\"r\",[2,4]],\"vals\":[" SPEC("float32", "[2,5]", "[0,1]") "," SPEC("float32", "[4,5]", "[0,1]") "]}"
      CALL("a", "operator.getitem", "[\"sp\",0]", VAL("[2,5]", "[0,1]"))
      CALL("b", "operator.getitem", "[\"sp\",1]", VAL("[4,5]", "[0,1]"))
      ",{\"name\":\"u\",\"op\":\"call_function\",\"target\":\"aten.unbind_copy.int\","
      "\"args\":[\"r\",1],\"vals\":[" SPEC("float32", "[6]", "[0]") "," SPEC("float32", "[6]", "[0]") ","
      SPEC("float32", "[6]", "[0]") "," SPEC("float32", "[6]", "[0]") "," SPEC("float32", "[6]", "[0]") "]}"
      CALL("u0", "operator.getitem", "[\"u\",0]", VAL("[6]", "[0]"))
      CALL("y", "aten.relu.default", "[\"b\"]", VAL("[4,5]", "[0,1]"))
      CALL("z", "aten.relu.default", "[\"u0\"]", VAL("[6]", "[0]"))
      OUT("[\"a\",\"y\",\"z\"]"));
  expect_fold(&l, "a", "kept", "r", 0, R(FEEDS_OUTPUT));
  expect_fold(&l, "b", "replaced", "r", 10, 0);
  expect_fold(&l, "u0", "kept", "r", 0, R(REORDERS));
  assert_non_null(node(&l, "sp")); /* a still reads it */
  assert_non_null(node(&l, "u"));
  assert_int_equal(l.r.layout_copy_nodes, 3);
  done(&l);
}

static void a_view_copy_that_writes_is_decided_but_never_folded(void **state) {
  (void)state;
  lowered l = lower_fold(HEAD PHV("x", "", "[2,3]", "[0,1]") "," PHV("y", "", "[6]", "[0]")
                             CALLK("v", "aten.view_copy.default", "[\"x\",[6]]", "{\"out\":\"y\"}",
                                   VAL("[6]", "[0]"))
                                 CALL("r", "aten.relu.default", "[\"v\"]", VAL("[6]", "[0]"))
                                     OUT("[\"r\"]"));
  expect_fold(&l, "v", "kept", "x", 0, R(VIEW_MUTATED));
  assert_int_equal(l.r.layout_copy_nodes, 1);
  done(&l);
  /* A permute with out= writes: it is no layout-only node at all. */
  l = lower_fold(HEAD PHV("x", "", "[2,3]", "[0,1]") "," PHV("y", "", "[3,2]", "[0,1]")
                     CALLK("p", "aten.permute_copy.default", "[\"x\",[1,0]]", "{\"out\":\"y\"}",
                           VAL("[3,2]", "[0,1]")) OUT("[\"p\"]"));
  assert_int_equal(l.r.layout_copy_nodes, 0);
  done(&l);
}

static void fold_is_read_from_the_options(void **state) {
  (void)state;
  vl_lower_options o;
  vl_error err;
  cJSON *j = cJSON_Parse("{\"fold\":false}");
  assert_int_equal(vl_lower_options_from_json(j, &o, &err), VL_OK);
  assert_false(o.fold);
  cJSON_Delete(j);
  assert_int_equal(vl_lower_options_from_json(NULL, &o, &err), VL_OK);
  assert_true(o.fold);
  j = cJSON_Parse("{\"fold\":1}");
  assert_int_equal(vl_lower_options_from_json(j, &o, &err), VL_ERR_INVALID_PARAMS);
  assert_string_equal(err.path, "/fold");
  cJSON_Delete(j);
}

static void with_remove_view_copy_off_every_layout_only_node_is_disabled(void **state) {
  (void)state;
  lowered l = lower_opts(TWO_TRANSPOSES(CALL("t2", "aten.transpose_copy.int", "[\"t1\",1,2]",
                                             VAL("[3,4,2]", "[0,1,2]"))),
                         false, VL_POLICY_SAFE, true);
  assert_int_equal(l.r.layout_copy_nodes, 2);
  assert_int_equal(l.r.kept, 2);
  expect_fold(&l, "t1", "kept", "x", 0, R(DISABLED));
  expect_fold(&l, "t2", "kept", "t1", 0, R(DISABLED));
  done(&l);
  /* a split's getitem reads its producer's input */
  l = lower_opts(HEAD PHV("x", "", "[4,5]", "[0,1]")
                 ",{\"name\":\"sp\",\"op\":\"call_function\",\"target\":\"aten.split_copy.Tensor\","
                 "\"args\":[\"x\",2],\"vals\":[" SPEC("float32", "[2,5]", "[0,1]") ","
                 SPEC("float32", "[2,5]", "[0,1]") "]}"
                 CALL("a", "operator.getitem", "[\"sp\",1]", VAL("[2,5]", "[0,1]")) OUT("[\"a\"]"),
                 false, VL_POLICY_SAFE, true);
  expect_fold(&l, "a", "kept", "x", 0, R(DISABLED));
  done(&l);
  /* legacy ignores fold */
  l = lower_opts(PATCH_DIM_ORDER, true, VL_POLICY_LEGACY, true);
  assert_int_equal(l.r.layout_copy_nodes, 1);
  expect(&l, "flat", 0);
  done(&l);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_chain_of_four_views_ends_on_the_root_and_dead_ones_go),
      cmocka_unit_test(normalized_views_on_the_root_are_all_kept_alive_when_used),
      cmocka_unit_test(a_view_copy_that_writes_is_never_removed_as_dead),
      cmocka_unit_test(a_view_copy_that_writes_its_base_keeps_it_and_the_lowered_graph_validates),
      cmocka_unit_test(views_of_the_input_name_their_owner_after_lowering),
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
      cmocka_unit_test(the_patch_token_chain_is_one_alias_of_the_convolution),
      cmocka_unit_test(the_channel_shuffle_keeps_exactly_one_copy_its_transpose),
      cmocka_unit_test(two_transposes_that_do_not_cancel_merge_into_one_strided_copy),
      cmocka_unit_test(arguments_that_give_no_view_are_named_in_the_message),
      cmocka_unit_test(long_names_cut_messages_as_snprintf_would),
      cmocka_unit_test(a_qkv_split_by_slices_is_three_aliases_at_offsets),
      cmocka_unit_test(a_slice_of_an_inner_dim_or_with_a_step_stays_a_copy),
      cmocka_unit_test(a_transpose_of_a_contiguous_weight_stays_a_copy_without_param_layouts),
      cmocka_unit_test(a_linear_weight_is_stored_transposed_and_its_t_copy_aliases_it),
      cmocka_unit_test(a_tied_weight_keeps_its_layout_and_names_its_blocker),
      cmocka_unit_test(the_score_picks_the_order_and_ties_keep_the_declared_one),
      cmocka_unit_test(a_conv_weight_converted_to_channels_last_is_stored_so),
      cmocka_unit_test(readers_that_cannot_alias_score_nothing),
      cmocka_unit_test(param_and_plan_options_are_read_from_json),
      cmocka_unit_test(an_option_given_null_keeps_its_default),
      cmocka_unit_test(every_mutation_rule_applies_to_a_folded_node),
      cmocka_unit_test(a_split_is_aliases_of_its_input_and_the_producer_goes),
      cmocka_unit_test(a_view_copy_that_writes_is_decided_but_never_folded),
      cmocka_unit_test(fold_is_read_from_the_options),
      cmocka_unit_test(with_remove_view_copy_off_every_layout_only_node_is_disabled),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

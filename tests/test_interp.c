/* test_interp.c - the interpreter (real aliasing, in-place writes, the op table), generated
 * inputs, and verify: lowering checked by running both graphs on the same inputs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "exec/kernel_internal.h"
#include "viewlower/layout.h"
#include "viewlower/copy.h"
#include "viewlower/graph.h"
#include "viewlower/interp.h"
#include "viewlower/lower.h"
#include "viewlower/tensor_json.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static vl_graph *parse(const char *json) {
  vl_graph *g = NULL;
  vl_error err;
  vl_status st = vl_graph_parse(json, strlen(json), NULL, &g, &err);
  if (st != VL_OK) fail_msg("graph does not parse: %s: %s", err.path, err.message);
  return g;
}

/* A one-tensor input map: name -> float32 tensor of shape/order holding logical 0, 1, 2, ... */
static vl_tensor_map *input_iota(const char *name, uint8_t rank, const int64_t *shape,
                                 const uint8_t *order) {
  vl_tensor_map *m = NULL;
  vl_spec s, dense;
  vl_error err;
  vl_spec_init(&s, VL_DTYPE_FLOAT32, rank, shape);
  if (order != NULL) memcpy(s.dim_order, order, rank);
  dense = s;
  vl_dim_order_default(dense.dim_order, rank);
  assert_int_equal(vl__tensor_map_new(&m, &err), VL_OK);
  assert_int_equal(vl__tensor_map_add(m, name, &s, NULL, &err), VL_OK);
  int64_t n = 0;
  vl_spec_numel(&s, &n);
  float *tmp = calloc((size_t)n + 1, sizeof *tmp);
  assert_non_null(tmp);
  for (int64_t k = 0; k < n; k++) tmp[k] = (float)k;
  assert_int_equal(vl_copy_logical(&s, m->tensors[0]->data, &dense, tmp, &err), VL_OK);
  free(tmp);
  return m;
}

/* Output k of a run, in logical order, must equal want (float32). */
static void assert_output_f32(const vl_tensor_map *out, size_t k, const float *want, size_t n) {
  const vl_tensor *t = out->tensors[k];
  vl_spec dense = t->spec;
  vl_error err;
  float got[256];
  assert_true(n <= 256);
  vl_dim_order_default(dense.dim_order, dense.rank);
  assert_int_equal(t->spec.dtype, VL_DTYPE_FLOAT32);
  assert_int_equal(vl_copy_logical(&dense, got, &t->spec, t->data, &err), VL_OK);
  for (size_t i = 0; i < n; i++)
    if (got[i] != want[i]) fail_msg("output %zu element %zu is %g, want %g", k, i, got[i], want[i]);
}

static vl_tensor_map *run_ok(const vl_graph *g, const vl_tensor_map *inputs) {
  vl_tensor_map *out = NULL;
  vl_error err;
  vl_status st = vl_interp_run(g, inputs, NULL, &out, &err);
  if (st != VL_OK) fail_msg("run failed: %s: %s", err.path, err.message);
  return out;
}

static vl_lower_options options(bool remove, vl_policy policy) {
  vl_lower_options o;
  vl_lower_options_default(&o);
  o.remove_view_copy = remove;
  o.policy = policy;
  return o;
}

/* ---- graphs --------------------------------------------------------------------------------- */

#define HEAD "{\"format\": \"viewlower.graph\", \"version\": 1, "

/* The patch embedding of docs/format.md §2, in either spelling of the layout change. */
static char *patch_embed_json(bool skip_dim_order) {
  const char *to_cl = skip_dim_order ? "\"target\": \"aten._to_copy.default\", \"kwargs\": "
                                       "{\"memory_format\": \"channels_last\"}"
                                     : "\"target\": \"dim_order_ops._to_dim_order_copy.default\", "
                                       "\"kwargs\": {\"dim_order\": [0,2,3,1]}";
  char *buf = malloc(4096);
  assert_non_null(buf);
  snprintf(
      buf, 4096,
      HEAD
      "\"name\": \"patch_embed\", \"skip_dim_order\": %s, \"nodes\": ["
      "{\"name\": \"x\", \"op\": \"placeholder\", \"kind\": \"user_input\","
      " \"val\": {\"dtype\": \"float32\", \"shape\": [1,2,2,3], \"dim_order\": [0,1,2,3]}},"
      "{\"name\": \"x_cl\", \"op\": \"call_function\", %s, \"args\": [\"x\"],"
      " \"val\": {\"dtype\": \"float32\", \"shape\": [1,2,2,3], \"dim_order\": [0,2,3,1]}},"
      "{\"name\": \"flat\", \"op\": \"call_function\", \"target\": \"aten.view_copy.default\","
      " \"args\": [\"x_cl\", [1,2,-1]], \"val\": {\"dtype\": \"float32\", \"shape\": [1,2,6]}},"
      "{\"name\": \"tokens\", \"op\": \"call_function\", \"target\": \"aten.permute_copy.default\","
      " \"args\": [\"flat\", [0,2,1]], \"val\": {\"dtype\": \"float32\", \"shape\": [1,6,2]}},"
      "{\"name\": \"out\", \"op\": \"output\", \"args\": [\"tokens\"]}]}",
      skip_dim_order ? "true" : "false", to_cl);
  return buf;
}

/* A view taken, then its base bumped in place, then the view read. */
static const char *mutation_json =
    HEAD "\"name\": \"mutation\", \"nodes\": ["
         "{\"name\": \"x\", \"op\": \"placeholder\", \"val\": {\"dtype\": \"float32\", \"shape\": "
         "[2,3]}},"
         "{\"name\": \"base\", \"op\": \"call_function\", \"target\": \"aten.mul.Tensor\","
         " \"args\": [\"x\", 1.0], \"val\": {\"dtype\": \"float32\", \"shape\": [2,3]}},"
         "{\"name\": \"v\", \"op\": \"call_function\", \"target\": \"aten.view_copy.default\","
         " \"args\": [\"base\", [6]], \"val\": {\"dtype\": \"float32\", \"shape\": [6]}},"
         "{\"name\": \"bumped\", \"op\": \"call_function\", \"target\": \"aten.add_.Tensor\","
         " \"args\": [\"base\", 10.0], \"val\": {\"dtype\": \"float32\", \"shape\": [2,3]}},"
         "{\"name\": \"r\", \"op\": \"call_function\", \"target\": \"aten.mul.Tensor\","
         " \"args\": [\"v\", 2.0], \"val\": {\"dtype\": \"float32\", \"shape\": [6]}},"
         "{\"name\": \"out\", \"op\": \"output\", \"args\": [\"r\"]}]}";

static const char *reshape_chain_json =
    HEAD "\"name\": \"chain\", \"nodes\": ["
         "{\"name\": \"x\", \"op\": \"placeholder\", \"val\": {\"dtype\": \"float32\", \"shape\": "
         "[2,3,4]}},"
         "{\"name\": \"a\", \"op\": \"call_function\", \"target\": \"aten.view_copy.default\","
         " \"args\": [\"x\", [6,4]], \"val\": {\"dtype\": \"float32\", \"shape\": [6,4]}},"
         "{\"name\": \"b\", \"op\": \"call_function\", \"target\": \"aten.view_copy.default\","
         " \"args\": [\"a\", [24]], \"val\": {\"dtype\": \"float32\", \"shape\": [24]}},"
         "{\"name\": \"c\", \"op\": \"call_function\", \"target\": \"aten.view_copy.default\","
         " \"args\": [\"b\", [4,-1]], \"val\": {\"dtype\": \"float32\", \"shape\": [4,6]}},"
         "{\"name\": \"r\", \"op\": \"call_function\", \"target\": \"aten.add.Tensor\","
         " \"args\": [\"c\", \"c\"], \"val\": {\"dtype\": \"float32\", \"shape\": [4,6]}},"
         "{\"name\": \"out\", \"op\": \"output\", \"args\": [\"r\"]}]}";

/* ---- execution ------------------------------------------------------------------------------ */

static const float tokens_want[12] = {0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11};

static void patch_embedding_executes_to_exact_values(void **state) {
  (void)state;
  for (int skip = 0; skip < 2; skip++) {
    char *json = patch_embed_json(skip);
    vl_graph *g = parse(json);
    vl_tensor_map *in = input_iota("x", 4, (const int64_t[]){1, 2, 2, 3}, NULL);
    vl_tensor_map *out = run_ok(g, in);
    assert_int_equal(out->count, 1);
    assert_string_equal(out->names[0], "tokens");
    assert_int_equal(out->tensors[0]->spec.shape[1], 6);
    assert_output_f32(out, 0, tokens_want, 12);
    vl_tensor_map_free(out);
    vl_tensor_map_free(in);
    vl_graph_free(g);
    free(json);
  }
}

static void input_in_another_dim_order_is_converted(void **state) {
  (void)state;
  char *json = patch_embed_json(false);
  vl_graph *g = parse(json);
  const uint8_t cl[] = {0, 2, 3, 1};
  vl_tensor_map *in = input_iota("x", 4, (const int64_t[]){1, 2, 2, 3}, cl);
  vl_tensor_map *out = run_ok(g, in);
  assert_output_f32(out, 0, tokens_want, 12);
  vl_tensor_map_free(out);
  vl_tensor_map_free(in);
  vl_graph_free(g);
  free(json);
}

static void memory_view_reads_its_base_through_its_own_layout(void **state) {
  (void)state;
  /* The wrong alias a layout-blind lowering would make: the view sees buffer order. */
  const char *json =
      HEAD "\"nodes\": ["
           "{\"name\": \"x\", \"op\": \"placeholder\", \"val\": {\"dtype\": \"float32\", "
           "\"shape\": [1,2,2,3]}},"
           "{\"name\": \"x_cl\", \"op\": \"call_function\", \"target\": "
           "\"dim_order_ops._to_dim_order_copy.default\","
           " \"args\": [\"x\"], \"kwargs\": {\"dim_order\": [0,2,3,1]},"
           " \"val\": {\"dtype\": \"float32\", \"shape\": [1,2,2,3], \"dim_order\": [0,2,3,1]}},"
           "{\"name\": \"flat\", \"op\": \"call_function\", \"target\": \"memory.view\", "
           "\"alias_of\": \"x_cl\","
           " \"args\": [\"x_cl\", [1,2,6]], \"val\": {\"dtype\": \"float32\", \"shape\": [1,2,6]}},"
           "{\"name\": \"y\", \"op\": \"call_function\", \"target\": \"aten.relu.default\","
           " \"args\": [\"flat\"], \"val\": {\"dtype\": \"float32\", \"shape\": [1,2,6]}},"
           "{\"name\": \"out\", \"op\": \"output\", \"args\": [\"y\"]}]}";
  vl_graph *g = parse(json);
  vl_tensor_map *in = input_iota("x", 4, (const int64_t[]){1, 2, 2, 3}, NULL);
  vl_tensor_map *out = run_ok(g, in);
  assert_output_f32(out, 0, tokens_want, 12); /* buffer order 0,6,1,7,... */
  vl_tensor_map_free(out);
  vl_tensor_map_free(in);
  vl_graph_free(g);
}

/* x [2,3]; base, a clone of x; v, a memory.view of base as [6]; b2, base added to itself in
 * place (the nodes two tests share, each adding its own readers). */
#define BASE_VIEW_ADD_NODES                                                                        \
  "{\"name\": \"x\", \"op\": \"placeholder\", \"val\": {\"dtype\": \"float32\", "                  \
  "\"shape\": [2,3]}},"                                                                            \
  "{\"name\": \"base\", \"op\": \"call_function\", \"target\": \"aten.clone.default\","            \
  " \"args\": [\"x\"], \"val\": {\"dtype\": \"float32\", \"shape\": [2,3]}},"                      \
  "{\"name\": \"v\", \"op\": \"call_function\", \"target\": \"memory.view\", "                     \
  "\"alias_of\": \"base\","                                                                        \
  " \"args\": [\"base\", [6]], \"val\": {\"dtype\": \"float32\", \"shape\": [6]}},"                \
  "{\"name\": \"b2\", \"op\": \"call_function\", \"target\": \"aten.add_.Tensor\","                \
  " \"args\": [\"base\", \"base\"], \"val\": {\"dtype\": \"float32\", \"shape\": [2,3]}},"

static void in_place_add_writes_the_base_that_a_memory_view_reads(void **state) {
  (void)state;
  const char *json =
      HEAD "\"nodes\": [" BASE_VIEW_ADD_NODES
           "{\"name\": \"r\", \"op\": \"call_function\", \"target\": \"aten.relu.default\","
           " \"args\": [\"v\"], \"val\": {\"dtype\": \"float32\", \"shape\": [6]}},"
           "{\"name\": \"out\", \"op\": \"output\", \"args\": [\"r\", \"b2\", \"x\"]}]}";
  vl_graph *g = parse(json);
  vl_tensor_map *in = input_iota("x", 2, (const int64_t[]){2, 3}, NULL);
  vl_tensor_map *out = run_ok(g, in);
  const float doubled[6] = {0, 2, 4, 6, 8, 10}, iota[6] = {0, 1, 2, 3, 4, 5};
  assert_output_f32(out, 0, doubled, 6);
  assert_output_f32(out, 1, doubled, 6);
  assert_output_f32(out, 2, iota, 6); /* the input itself is never written */
  vl_tensor_map_free(out);
  vl_tensor_map_free(in);
  vl_graph_free(g);
}

static void copy_transpose_and_out_variant_write_where_they_should(void **state) {
  (void)state;
  const char *json =
      HEAD "\"nodes\": ["
           "{\"name\": \"x\", \"op\": \"placeholder\", \"val\": {\"dtype\": \"float32\", "
           "\"shape\": [2,3]}},"
           "{\"name\": \"t\", \"op\": \"call_function\", \"target\": \"aten.transpose_copy.int\","
           " \"args\": [\"x\", 0, -1], \"val\": {\"dtype\": \"float32\", \"shape\": [3,2]}},"
           "{\"name\": \"buf\", \"op\": \"call_function\", \"target\": \"aten.mul.Tensor\","
           " \"args\": [\"t\", 0], \"val\": {\"dtype\": \"float32\", \"shape\": [3,2], "
           "\"dim_order\": [1,0]}},"
           "{\"name\": \"c\", \"op\": \"call_function\", \"target\": \"aten.copy_.default\","
           " \"args\": [\"buf\", \"t\"], \"val\": {\"dtype\": \"float32\", \"shape\": [3,2], "
           "\"dim_order\": [1,0]}},"
           "{\"name\": \"o\", \"op\": \"call_function\", \"target\": \"aten.add.Tensor\","
           " \"args\": [\"t\", \"t\"], \"kwargs\": {\"out\": \"buf\", \"alpha\": 2},"
           " \"val\": {\"dtype\": \"float32\", \"shape\": [3,2], \"dim_order\": [1,0]}},"
           "{\"name\": \"out\", \"op\": \"output\", \"args\": [\"t\", \"c\", \"buf\"]}]}";
  vl_graph *g = parse(json);
  vl_tensor_map *in = input_iota("x", 2, (const int64_t[]){2, 3}, NULL);
  vl_tensor_map *out = run_ok(g, in);
  const float t[6] = {0, 3, 1, 4, 2, 5}, tripled[6] = {0, 9, 3, 12, 6, 15};
  assert_output_f32(out, 0, t, 6);
  assert_output_f32(out, 1, tripled, 6); /* c aliases buf, later overwritten through out= */
  assert_output_f32(out, 2, tripled, 6);
  vl_tensor_map_free(out);
  vl_tensor_map_free(in);
  vl_graph_free(g);
}

/* Runs a one-op graph on int8/bool/float16 inputs given as raw bytes; returns output bytes. */
static void run_dtype_op(const char *dtype, const char *target, const char *second, const void *x,
                         size_t nbytes, void *got) {
  char json[1024];
  snprintf(
      json, sizeof json,
      HEAD
      "\"nodes\": ["
      "{\"name\": \"x\", \"op\": \"placeholder\", \"val\": {\"dtype\": \"%s\", \"shape\": [4]}},"
      "{\"name\": \"y\", \"op\": \"call_function\", \"target\": \"%s\", \"args\": [\"x\"%s%s],"
      " \"val\": {\"dtype\": \"%s\", \"shape\": [4]}},"
      "{\"name\": \"out\", \"op\": \"output\", \"args\": [\"y\"]}]}",
      dtype, target, second ? ", " : "", second ? second : "", dtype);
  vl_graph *g = parse(json);
  vl_tensor_map *in = NULL;
  vl_error err;
  assert_int_equal(vl__tensor_map_new(&in, &err), VL_OK);
  assert_int_equal(vl__tensor_map_add(in, "x", g->nodes[0].val, NULL, &err), VL_OK);
  memcpy(in->tensors[0]->data, x, nbytes);
  vl_tensor_map *out = run_ok(g, in);
  memcpy(got, out->tensors[0]->data, nbytes);
  vl_tensor_map_free(out);
  vl_tensor_map_free(in);
  vl_graph_free(g);
}

static void integer_arithmetic_wraps_like_twos_complement(void **state) {
  (void)state;
  const int8_t x[4] = {127, -128, 5, -3};
  int8_t got[4];
  run_dtype_op("int8", "aten.add.Tensor", "\"x\"", x, 4, got);
  assert_int_equal(got[0], -2);
  assert_int_equal(got[1], 0);
  assert_int_equal(got[2], 10);
  assert_int_equal(got[3], -6);
  run_dtype_op("int8", "aten.mul.Tensor", "100", x, 4, got);
  assert_int_equal(got[0], (int8_t)(127 * 100 - 12800)); /* 12700 mod 256 = 156 -> -100 */
  assert_int_equal(got[2], (int8_t)(500 - 512));
  run_dtype_op("int8", "aten.relu.default", NULL, x, 4, got);
  assert_int_equal(got[0], 127);
  assert_int_equal(got[1], 0);
  assert_int_equal(got[3], 0);
}

static void bool_add_is_or_and_mul_is_and(void **state) {
  (void)state;
  const uint8_t x[4] = {0, 1, 0, 1};
  uint8_t got[4];
  run_dtype_op("bool", "aten.add.Tensor", "true", x, 4, got);
  assert_memory_equal(got, ((const uint8_t[]){1, 1, 1, 1}), 4);
  run_dtype_op("bool", "aten.mul.Tensor", "true", x, 4, got);
  assert_memory_equal(got, x, 4);
  run_dtype_op("bool", "aten.mul.Tensor", "false", x, 4, got);
  assert_memory_equal(got, ((const uint8_t[]){0, 0, 0, 0}), 4);
}

static void float16_computes_through_float_and_rounds_to_nearest_even(void **state) {
  (void)state;
  const uint16_t x[4] = {vl_f16_from_double(2048), vl_f16_from_double(-1.5),
                         vl_f16_from_double(0.25), vl_f16_from_double(3)};
  uint16_t got[4];
  run_dtype_op("float16", "aten.add.Tensor", "1", x, 8, got);
  assert_true(vl_f16_to_double(got[0]) == 2048); /* 2049 rounds to even */
  assert_true(vl_f16_to_double(got[1]) == -0.5);
  assert_true(vl_f16_to_double(got[2]) == 1.25);
  run_dtype_op("float16", "aten.relu_.default", NULL, x, 8, got);
  assert_true(vl_f16_to_double(got[1]) == 0);
  assert_true(vl_f16_to_double(got[3]) == 3);
}

/* ---- errors --------------------------------------------------------------------------------- */

static void unsupported_target_is_named_with_its_node_path(void **state) {
  (void)state;
  const char *json =
      HEAD "\"nodes\": ["
           "{\"name\": \"x\", \"op\": \"placeholder\", \"val\": {\"dtype\": \"float32\", "
           "\"shape\": [2]}},"
           "{\"name\": \"y\", \"op\": \"call_function\", \"target\": \"aten.sin.default\","
           " \"args\": [\"x\"], \"val\": {\"dtype\": \"float32\", \"shape\": [2]}},"
           "{\"name\": \"out\", \"op\": \"output\", \"args\": [\"y\"]}]}";
  vl_graph *g = parse(json);
  vl_tensor_map *in = input_iota("x", 1, (const int64_t[]){2}, NULL), *out = NULL;
  vl_error err;
  assert_int_equal(vl_interp_run(g, in, NULL, &out, &err), VL_ERR_UNSUPPORTED);
  assert_null(out);
  assert_string_equal(err.path, "/nodes/1/target");
  assert_string_equal(err.message,
                      "y: target aten.sin.default is not supported by the interpreter");
  vl_tensor_map_free(in);
  vl_graph_free(g);
}

static void missing_input_is_invalid_params_at_its_name(void **state) {
  (void)state;
  char *json = patch_embed_json(false);
  vl_graph *g = parse(json);
  vl_tensor_map *in = NULL, *out = NULL;
  vl_error err;
  assert_int_equal(vl__tensor_map_new(&in, &err), VL_OK);
  assert_int_equal(vl_interp_run(g, in, NULL, &out, &err), VL_ERR_INVALID_PARAMS);
  assert_string_equal(err.path, "/x");
  assert_int_equal(vl_interp_run(g, NULL, NULL, &out, &err), VL_ERR_INVALID_PARAMS);
  assert_string_equal(err.path, "/x");
  assert_null(out);
  vl_tensor_map_free(in);
  vl_graph_free(g);
  free(json);
}

static void input_of_wrong_shape_or_unknown_name_is_refused(void **state) {
  (void)state;
  char *json = patch_embed_json(false);
  vl_graph *g = parse(json);
  vl_tensor_map *out = NULL;
  vl_error err;
  vl_tensor_map *in = input_iota("x", 2, (const int64_t[]){3, 4}, NULL);
  assert_int_equal(vl_interp_run(g, in, NULL, &out, &err), VL_ERR_INVALID_TENSOR);
  assert_string_equal(err.path, "/x/shape");
  vl_tensor_map_free(in);
  in = input_iota("y", 4, (const int64_t[]){1, 2, 2, 3}, NULL);
  assert_int_equal(vl_interp_run(g, in, NULL, &out, &err), VL_ERR_INVALID_PARAMS);
  assert_string_equal(err.path, "/y");
  assert_null(out);
  vl_tensor_map_free(in);
  vl_graph_free(g);
  free(json);
}

static void buffers_beyond_the_total_limit_are_too_large(void **state) {
  (void)state;
  char *json = patch_embed_json(false);
  vl_graph *g = parse(json);
  vl_tensor_map *in = input_iota("x", 4, (const int64_t[]){1, 2, 2, 3}, NULL), *out = NULL;
  vl_limits lim;
  vl_error err;
  vl_limits_default(&lim);
  lim.max_total_bytes = 100; /* input (48) + x_cl (48) fit, flat does not */
  assert_int_equal(vl_interp_run(g, in, &lim, &out, &err), VL_ERR_TOO_LARGE);
  assert_string_equal(err.path, "/nodes/2");
  assert_null(out);
  vl_tensor_map_free(in);
  vl_graph_free(g);
  free(json);
}

/* A chain x -> p0 -> ... -> p16 of transposes of a float32 [512,512] (1 MiB each). Each
 * storage is freed once its reader has run, so the run needs x (held for the whole run), the
 * tensor read and the tensor written: 3 MiB at once, against 18 MiB allocated in all. */
static char *transpose_chain_json(int count) {
  size_t cap = 256 + (size_t)count * 256;
  char *json = malloc(cap);
  assert_non_null(json);
  int len = snprintf(json, cap,
                     HEAD "\"nodes\": [{\"name\": \"x\", \"op\": \"placeholder\", \"val\": "
                          "{\"dtype\": \"float32\", \"shape\": [512,512]}}");
  for (int k = 0; k < count; k++) {
    char prev[16];
    snprintf(prev, sizeof prev, k == 0 ? "x" : "p%d", k - 1);
    len += snprintf(json + len, cap - (size_t)len,
                    ", {\"name\": \"p%d\", \"op\": \"call_function\", \"target\": "
                    "\"aten.permute_copy.default\", \"args\": [\"%s\", [1,0]], \"val\": "
                    "{\"dtype\": \"float32\", \"shape\": [512,512]}}",
                    k, prev);
  }
  snprintf(json + len, cap - (size_t)len,
           ", {\"name\": \"out\", \"op\": \"output\", \"args\": [\"p%d\"]}]}", count - 1);
  return json;
}

static void the_total_limit_bounds_the_buffers_live_at_once(void **state) {
  (void)state;
  const int64_t mib = INT64_C(1) << 20;
  char *json = transpose_chain_json(17);
  vl_graph *g = parse(json);
  vl_tensor_map *in = input_iota("x", 2, (const int64_t[]){512, 512}, NULL), *out = NULL;
  vl_limits lim;
  vl_error err;
  vl_limits_default(&lim);
  lim.max_total_bytes = 3 * mib - 1; /* x, p0 and p1 at once do not fit */
  assert_int_equal(vl_interp_run(g, in, &lim, &out, &err), VL_ERR_TOO_LARGE);
  assert_string_equal(err.path, "/nodes/2");
  assert_null(out);
  lim.max_total_bytes = 3 * mib;
  if (vl_interp_run(g, in, &lim, &out, &err) != VL_OK) {
    fail_msg("run failed: %s: %s", err.path, err.message);
  }
  assert_int_equal(out->count, 1);
  assert_string_equal(out->names[0], "p16");
  const vl_tensor *t = out->tensors[0];
  assert_int_equal(t->nbytes, mib);
  assert_true(vl_layout_is_contiguous(&t->spec));
  const float *got = t->data;
  for (int64_t i = 0; i < 512; i++) { /* seventeen transposes: x transposed */
    for (int64_t j = 0; j < 512; j++) {
      if (got[i * 512 + j] != (float)(j * 512 + i)) {
        fail_msg("p16[%lld][%lld] is %g, want %lld", (long long)i, (long long)j,
                 got[i * 512 + j], (long long)(j * 512 + i));
      }
    }
  }
  vl_tensor_map_free(out);
  vl_tensor_map_free(in);
  vl_graph_free(g);
  free(json);
}

/* base's storage is shared by the view v, the in-place b2 and m (kwargs.out). base's own last
 * reader is m, but v reads it after, through r: the storage lives until r has run. With 24
 * bytes a tensor, x (held), base's storage, t and r make 96 bytes at r; had base's storage
 * died after m, the first point past 95 bytes would be the output copies, not r. */
static void a_storage_shared_by_a_view_and_in_place_writes_lives_until_its_last_reader(
    void **state) {
  (void)state;
  const char *json =
      HEAD "\"nodes\": [" BASE_VIEW_ADD_NODES
           "{\"name\": \"m\", \"op\": \"call_function\", \"target\": \"aten.mul.Tensor\","
           " \"args\": [\"x\", 3.0], \"kwargs\": {\"out\": \"base\"},"
           " \"val\": {\"dtype\": \"float32\", \"shape\": [2,3]}},"
           "{\"name\": \"t\", \"op\": \"call_function\", \"target\": \"aten.relu.default\","
           " \"args\": [\"x\"], \"val\": {\"dtype\": \"float32\", \"shape\": [2,3]}},"
           "{\"name\": \"r\", \"op\": \"call_function\", \"target\": \"aten.relu.default\","
           " \"args\": [\"v\"], \"val\": {\"dtype\": \"float32\", \"shape\": [6]}},"
           "{\"name\": \"out\", \"op\": \"output\", \"args\": [\"r\", \"t\"]}]}";
  vl_graph *g = parse(json);
  vl_tensor_map *in = input_iota("x", 2, (const int64_t[]){2, 3}, NULL), *out = NULL;
  vl_limits lim;
  vl_error err;
  vl_limits_default(&lim);
  lim.max_total_bytes = 95;
  assert_int_equal(vl_interp_run(g, in, &lim, &out, &err), VL_ERR_TOO_LARGE);
  assert_string_equal(err.path, "/nodes/6");
  assert_null(out);
  lim.max_total_bytes = 96;
  if (vl_interp_run(g, in, &lim, &out, &err) != VL_OK) {
    fail_msg("run failed: %s: %s", err.path, err.message);
  }
  const float tripled[6] = {0, 3, 6, 9, 12, 15}, iota[6] = {0, 1, 2, 3, 4, 5};
  assert_output_f32(out, 0, tripled, 6); /* m wrote 3x over b2's 2x, into the storage v reads */
  assert_output_f32(out, 1, iota, 6);
  vl_tensor_map_free(out);
  vl_tensor_map_free(in);
  vl_graph_free(g);
}

static void kernel_errors_point_at_their_node(void **state) {
  (void)state;
  const char *json =
      HEAD "\"nodes\": ["
           "{\"name\": \"x\", \"op\": \"placeholder\", \"val\": {\"dtype\": \"float32\", "
           "\"shape\": [2,3]}},"
           "{\"name\": \"y\", \"op\": \"call_function\", \"target\": \"aten.add.Tensor\","
           " \"args\": [\"x\", \"z\"], \"val\": {\"dtype\": \"float32\", \"shape\": [2,3]}},"
           "{\"name\": \"out\", \"op\": \"output\", \"args\": [\"y\"]}]}";
  vl_graph *g = NULL;
  vl_error err;
  /* "z" is an unknown reference: the graph itself is invalid. */
  assert_int_equal(vl_graph_parse(json, strlen(json), NULL, &g, &err), VL_ERR_INVALID_GRAPH);
  const char *json2 =
      HEAD "\"nodes\": ["
           "{\"name\": \"x\", \"op\": \"placeholder\", \"val\": {\"dtype\": \"float32\", "
           "\"shape\": [2,3]}},"
           "{\"name\": \"z\", \"op\": \"placeholder\", \"val\": {\"dtype\": \"float32\", "
           "\"shape\": [3,2]}},"
           "{\"name\": \"y\", \"op\": \"call_function\", \"target\": \"aten.add.Tensor\","
           " \"args\": [\"x\", \"z\"], \"val\": {\"dtype\": \"float32\", \"shape\": [2,3]}},"
           "{\"name\": \"out\", \"op\": \"output\", \"args\": [\"y\"]}]}";
  g = parse(json2);
  vl_tensor_map *in = NULL, *out = NULL;
  assert_int_equal(vl_inputs_generate(g, NULL, 1, NULL, &in, &err), VL_OK);
  assert_int_equal(vl_interp_run(g, in, NULL, &out, &err), VL_ERR_KERNEL);
  assert_string_equal(err.path, "/nodes/2");
  assert_non_null(strstr(err.message, "[3,2]"));
  vl_tensor_map_free(in);
  vl_graph_free(g);
}

/* ---- generated inputs ------------------------------------------------------------------------ */

static void generated_inputs_are_distinct_and_follow_the_seed(void **state) {
  (void)state;
  static const char *const dtypes[] = {"uint8",   "int16",    "int32",   "int64",
                                       "float16", "bfloat16", "float32", "float64"};
  static const int64_t counts[] = {256, 5000, 5000, 5000, 60000, 60000, 5000, 5000};
  for (size_t d = 0; d < 8; d++) {
    char json[1024];
    snprintf(json, sizeof json,
             HEAD
             "\"nodes\": [{\"name\": \"x\", \"op\": \"placeholder\", \"val\": {\"dtype\": \"%s\","
             " \"shape\": [%lld], \"dim_order\": [0]}}, {\"name\": \"out\", \"op\": \"output\", "
             "\"args\": [\"x\"]}]}",
             dtypes[d], (long long)counts[d]);
    vl_graph *g = parse(json);
    vl_tensor_map *a = NULL, *b = NULL, *c = NULL;
    vl_error err;
    assert_int_equal(vl_inputs_generate(g, NULL, 7, NULL, &a, &err), VL_OK);
    assert_int_equal(vl_inputs_generate(g, NULL, 7, NULL, &b, &err), VL_OK);
    assert_int_equal(vl_inputs_generate(g, NULL, 8, NULL, &c, &err), VL_OK);
    const vl_tensor *t = a->tensors[0];
    size_t es = vl_dtype_size(t->spec.dtype);
    assert_memory_equal(t->data, b->tensors[0]->data, (size_t)t->nbytes);
    assert_memory_not_equal(t->data, c->tensors[0]->data, (size_t)t->nbytes);
    /* distinct: sort-free check through a bitmap of 16-bit patterns, or pairwise on a sample */
    for (int64_t i = 0; i + 1 < counts[d] && i < 300; i++)
      for (int64_t j = i + 1; j < counts[d]; j++)
        if (memcmp((char *)t->data + (size_t)i * es, (char *)t->data + (size_t)j * es, es) == 0)
          fail_msg("%s: elements %lld and %lld are equal", dtypes[d], (long long)i, (long long)j);
    vl_tensor_map_free(a);
    vl_tensor_map_free(b);
    vl_tensor_map_free(c);
    vl_graph_free(g);
  }
}

/* A generated input over the limits names its placeholder: the tensor's size is the placeholder's
 * val shape (verify answered "/graph/shape", a path the request does not have), and the input
 * that takes the inputs past max_total_bytes is named by its node. */
static void generated_inputs_over_the_limits_name_their_placeholder(void **state) {
  (void)state;
  const char *json = HEAD
      "\"nodes\": [{\"name\": \"a\", \"op\": \"placeholder\", \"val\": {\"dtype\": \"float32\","
      " \"shape\": [100]}}, {\"name\": \"x\", \"op\": \"placeholder\", \"val\": {\"dtype\": "
      "\"float32\", \"shape\": [600]}}, {\"name\": \"out\", \"op\": \"output\", \"args\": "
      "[\"a\", \"x\"]}]}";
  vl_graph *g = parse(json);
  vl_limits lim;
  vl_limits_default(&lim);
  lim.max_tensor_bytes = 2000;
  vl_tensor_map *m = NULL;
  vl_error err;
  assert_int_equal(vl_inputs_generate(g, NULL, 1, &lim, &m, &err), VL_ERR_TOO_LARGE);
  assert_string_equal(err.path, "/nodes/1/val/shape");
  assert_null(m);
  lim.max_tensor_bytes = 4000;
  lim.max_total_bytes = 2500;
  assert_int_equal(vl_inputs_generate(g, NULL, 1, &lim, &m, &err), VL_ERR_TOO_LARGE);
  assert_string_equal(err.path, "/nodes/1");
  assert_string_equal(err.message, "inputs need more than the limit of 2500 bytes");
  assert_null(m);
  vl_graph_free(g);
}

static void generated_half_values_are_finite_and_start_with_integers(void **state) {
  (void)state;
  const char *json = HEAD
      "\"nodes\": [{\"name\": \"x\", \"op\": \"placeholder\", \"val\": {\"dtype\": \"float16\","
      " \"shape\": [63487]}}, {\"name\": \"out\", \"op\": \"output\", \"args\": [\"x\"]}]}";
  vl_graph *g = parse(json);
  vl_tensor_map *a = NULL;
  vl_error err;
  assert_int_equal(vl_inputs_generate(g, NULL, 3, NULL, &a, &err), VL_OK);
  const uint16_t *h = a->tensors[0]->data;
  uint8_t *seen = calloc(65536, 1);
  assert_non_null(seen);
  for (int k = 0; k < 63487; k++) {
    if ((h[k] & 0x7C00) == 0x7C00) fail_msg("element %d is not finite", k);
    if (seen[h[k]]++) fail_msg("element %d repeats pattern %#x", k, h[k]);
  }
  double first = vl_f16_to_double(h[0]), second = vl_f16_to_double(h[1]);
  assert_true(first == (double)(int64_t)first && second == first + 1);
  free(seen);
  vl_tensor_map_free(a);
  vl_graph_free(g);
}

/* ---- verify --------------------------------------------------------------------------------- */

static void verify_under_safe_policy_is_equal_for_every_spelling_and_switch(void **state) {
  (void)state;
  for (int skip = 0; skip < 4; skip++) {
    for (int remove = 0; remove < 2; remove++) {
      char *json = patch_embed_json(skip % 2);
      vl_graph *g = parse(json);
      vl_lower_options o = options(remove, VL_POLICY_SAFE);
      o.fold = skip < 2;
      vl_verify_result r;
      vl_error err;
      vl_status st = vl_verify(g, &o, NULL, 1234, NULL, &r, &err);
      if (st != VL_OK) fail_msg("verify failed: %s: %s", err.path, err.message);
      assert_true(r.equal);
      assert_int_equal(r.n_mismatches, 0);
      assert_int_equal(r.report.view_copy_nodes, 1);
      /* With fold the conversion and the permute are decided too: the flatten of the
       * channels-last copy is a view of x itself, so the copy falls dead; the permute is an
       * output and stays. */
      bool fold = o.fold && remove;
      assert_int_equal(r.report.layout_copy_nodes, o.fold ? 3 : 1);
      assert_int_equal(r.report.kept, fold ? 1 : o.fold ? 3 : 1);
      assert_int_equal(r.report.replaced, fold ? 1 : 0);
      assert_int_equal(r.report.removed_dead, fold ? 1 : 0);
      vl_verify_result_clear(&r);
      vl_graph_free(g);
      free(json);
    }
  }
}

static void verify_under_legacy_policy_shows_the_reordered_element(void **state) {
  (void)state;
  for (int skip = 0; skip < 2; skip++) {
    char *json = patch_embed_json(skip);
    vl_graph *g = parse(json);
    vl_lower_options o = options(true, VL_POLICY_LEGACY);
    vl_tensor_map *in = input_iota("x", 4, (const int64_t[]){1, 2, 2, 3}, NULL);
    vl_verify_result r;
    vl_error err;
    assert_int_equal(vl_verify(g, &o, in, 0, NULL, &r, &err), VL_OK);
    assert_false(r.equal);
    assert_int_equal(r.report.replaced, 1);
    assert_int_equal(r.n_mismatches, 1);
    const vl_mismatch *m = &r.mismatches[0];
    float want, got;
    memcpy(&want, m->expected, 4);
    memcpy(&got, m->actual, 4);
    assert_int_equal(m->output, 0);
    assert_string_equal(m->name, "tokens");
    assert_int_equal(m->index, 1);
    assert_true(want == 6.0f); /* tokens = 0,6,1,7,... */
    assert_true(got == 3.0f);  /* aliased: 0,3,6,9,... */
    cJSON *j = vl_verify_result_to_json(&r);
    char *text = cJSON_PrintUnformatted(cJSON_GetObjectItem(j, "mismatches"));
    assert_string_equal(
        text, "[{\"output\":0,\"name\":\"tokens\",\"index\":1,\"expected\":6,\"actual\":3}]");
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(j, "equal")));
    assert_non_null(cJSON_GetObjectItem(j, "report"));
    free(text);
    cJSON_Delete(j);
    vl_verify_result_clear(&r);
    vl_tensor_map_free(in);
    vl_graph_free(g);
    free(json);
  }
}

static void mutation_after_view_is_equal_under_safe_and_differs_under_legacy(void **state) {
  (void)state;
  vl_graph *g = parse(mutation_json);
  vl_tensor_map *in = input_iota("x", 2, (const int64_t[]){2, 3}, NULL);
  vl_lower_options safe = options(true, VL_POLICY_SAFE), legacy = options(true, VL_POLICY_LEGACY);
  vl_verify_result r;
  vl_error err;
  assert_int_equal(vl_verify(g, &safe, in, 0, NULL, &r, &err), VL_OK);
  assert_true(r.equal);
  assert_int_equal(r.report.kept, 1);
  assert_true(r.report.decisions[0].reasons & (1u << VL_REASON_BASE_MUTATED));
  vl_verify_result_clear(&r);
  assert_int_equal(vl_verify(g, &legacy, in, 0, NULL, &r, &err), VL_OK);
  assert_false(r.equal);
  assert_int_equal(r.n_mismatches, 1);
  float want, got;
  memcpy(&want, r.mismatches[0].expected, 4);
  memcpy(&got, r.mismatches[0].actual, 4);
  assert_int_equal(r.mismatches[0].index, 0);
  assert_true(want == 0.0f); /* 2 * x[0] */
  assert_true(got == 20.0f); /* 2 * (x[0] + 10): the alias saw the in-place add */
  vl_verify_result_clear(&r);
  vl_tensor_map_free(in);
  vl_graph_free(g);
}

static void contiguous_reshape_chain_is_replaced_and_equal(void **state) {
  (void)state;
  vl_graph *g = parse(reshape_chain_json);
  vl_lower_options o = options(true, VL_POLICY_SAFE);
  vl_verify_result r;
  vl_error err;
  for (int fold = 0; fold < 2; fold++) {
    o.fold = fold;
    assert_int_equal(vl_verify(g, &o, NULL, 99, NULL, &r, &err), VL_OK);
    assert_true(r.equal);
    assert_int_equal(r.report.view_copy_nodes, 3);
    assert_int_equal(r.report.replaced, 1);
    assert_int_equal(r.report.removed_dead, 2);
    /* fold off: the replaced view alone; on: every layout-only node that no longer copies. */
    assert_int_equal(r.report.bytes_saved, fold ? 3 * 96 : 96);
    vl_verify_result_clear(&r);
  }
  /* and the values are right, not merely equal */
  vl_tensor_map *in = input_iota("x", 3, (const int64_t[]){2, 3, 4}, NULL);
  vl_tensor_map *out = run_ok(g, in);
  float want[24];
  for (int k = 0; k < 24; k++) want[k] = 2.0f * (float)k;
  assert_output_f32(out, 0, want, 24);
  vl_tensor_map_free(out);
  vl_tensor_map_free(in);
  vl_graph_free(g);
}

static void verify_leaves_the_callers_graph_untouched(void **state) {
  (void)state;
  vl_graph *g = parse(reshape_chain_json);
  char *before = vl_graph_print(g);
  vl_lower_options o = options(true, VL_POLICY_SAFE);
  vl_verify_result r;
  vl_error err;
  assert_int_equal(vl_verify(g, &o, NULL, 5, NULL, &r, &err), VL_OK);
  char *after = vl_graph_print(g);
  assert_string_equal(before, after);
  free(before);
  free(after);
  vl_verify_result_clear(&r);
  vl_graph_free(g);
}


/* ---- Layout-only ops, memory.view at an offset, as_strided_copy, splits ------------------- */

/* x = 0..11 as [3,4]; every layout-only op the interpreter runs, and the values PyTorch gives. */
static const char *layout_ops_json =
    "{\"format\":\"viewlower.graph\",\"version\":1,\"nodes\":[{\"name\":\"x\",\"op\":\"plac"
    "eholder\",\"val\":{\"dtype\":\"float32\",\"shape\":[3,4]}},{\"name\":\"s\",\"op\":\"ca"
    "ll_function\",\"target\":\"aten.slice_copy.Tensor\",\"args\":[\"x\",1,1,92233720368547"
    "75807,2],\"val\":{\"dtype\":\"float32\",\"shape\":[3,2]}},{\"name\":\"sel\",\"op\":\"c"
    "all_function\",\"target\":\"aten.select_copy.int\",\"args\":[\"x\",0,-1],\"val\":{\"dt"
    "ype\":\"float32\",\"shape\":[4]}},{\"name\":\"t\",\"op\":\"call_function\",\"target\":"
    "\"aten.t_copy.default\",\"args\":[\"x\"],\"val\":{\"dtype\":\"float32\",\"shape\":[4,3"
    "]}},{\"name\":\"u\",\"op\":\"call_function\",\"target\":\"aten.unsqueeze_copy.default\""
    ",\"args\":[\"sel\",0],\"val\":{\"dtype\":\"float32\",\"shape\":[1,4]}},{\"name\":\"sq\""
    ",\"op\":\"call_function\",\"target\":\"aten.squeeze_copy.dim\",\"args\":[\"u\",0],\"va"
    "l\":{\"dtype\":\"float32\",\"shape\":[4]}},{\"name\":\"as\",\"op\":\"call_function\",\""
    "target\":\"aten.as_strided_copy.default\",\"args\":[\"x\",[2,2],[1,4],1],\"val\":{\"dt"
    "ype\":\"float32\",\"shape\":[2,2]}},{\"name\":\"mv\",\"op\":\"call_function\",\"target"
    "\":\"memory.view\",\"args\":[\"x\",[2,2]],\"offset\":5,\"val\":{\"dtype\":\"float32\","
    "\"shape\":[2,2]}},{\"name\":\"asmv\",\"op\":\"call_function\",\"target\":\"aten.as_str"
    "ided_copy.default\",\"args\":[\"mv\",[2],[2],1],\"val\":{\"dtype\":\"float32\",\"shape"
    "\":[2]}},{\"name\":\"sp\",\"op\":\"call_function\",\"target\":\"aten.split_with_sizes_"
    "copy.default\",\"args\":[\"x\",[1,2]],\"vals\":[{\"dtype\":\"float32\",\"shape\":[1,4]"
    "},{\"dtype\":\"float32\",\"shape\":[2,4]}]},{\"name\":\"g1\",\"op\":\"call_function\","
    "\"target\":\"operator.getitem\",\"args\":[\"sp\",1],\"val\":{\"dtype\":\"float32\",\"s"
    "hape\":[2,4]}},{\"name\":\"ub\",\"op\":\"call_function\",\"target\":\"aten.unbind_copy"
    ".int\",\"args\":[\"x\",1],\"vals\":[{\"dtype\":\"float32\",\"shape\":[3]},{\"dtype\":\""
    "float32\",\"shape\":[3]},{\"dtype\":\"float32\",\"shape\":[3]},{\"dtype\":\"float32\","
    "\"shape\":[3]}]},{\"name\":\"u2\",\"op\":\"call_function\",\"target\":\"operator.getit"
    "em\",\"args\":[\"ub\",2],\"val\":{\"dtype\":\"float32\",\"shape\":[3]}},{\"name\":\"ra"
    "\",\"op\":\"call_function\",\"target\":\"aten._reshape_alias_copy.default\",\"args\":["
    "\"t\",[12],[1]],\"val\":{\"dtype\":\"float32\",\"shape\":[12]}},{\"name\":\"out\",\"op"
    "\":\"output\",\"args\":[\"s\",\"sel\",\"t\",\"sq\",\"as\",\"mv\",\"asmv\",\"g1\",\"u2\""
    ",\"ra\"]}]}";

static void layout_only_ops_execute_to_exact_values(void **state) {
  (void)state;
  vl_graph *g = parse(layout_ops_json);
  vl_tensor_map *in = input_iota("x", 2, (const int64_t[]){3, 4}, NULL);
  vl_tensor_map *out = run_ok(g, in);
  assert_output_f32(out, 0, (const float[]){1, 3, 5, 7, 9, 11}, 6);           /* x[:, 1::2] */
  assert_output_f32(out, 1, (const float[]){8, 9, 10, 11}, 4);                /* x[-1] */
  assert_output_f32(out, 2, (const float[]){0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}, 12);
  assert_output_f32(out, 3, (const float[]){8, 9, 10, 11}, 4);                /* squeeze(unsqueeze) */
  assert_output_f32(out, 4, (const float[]){1, 5, 2, 6}, 4);                  /* as_strided */
  assert_output_f32(out, 5, (const float[]){5, 6, 7, 8}, 4);                  /* view at offset 5 */
  assert_output_f32(out, 6, (const float[]){6, 8}, 2);   /* as_strided from the view's offset */
  assert_output_f32(out, 7, (const float[]){4, 5, 6, 7, 8, 9, 10, 11}, 8);    /* split part 1 */
  assert_output_f32(out, 8, (const float[]){2, 6, 10}, 3);                    /* unbind(1)[2] */
  assert_output_f32(out, 9, (const float[]){0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}, 12);
  vl_tensor_map_free(out);
  vl_tensor_map_free(in);
  vl_graph_free(g);
}

#define MV_HEAD                                                                                    \
  HEAD "\"nodes\": [{\"name\": \"x\", \"op\": \"placeholder\", \"val\": {\"dtype\": \"float32\", " \
       "\"shape\": [6]}},"
#define MV_TAIL                                                                                    \
  "\"val\": {\"dtype\": \"float32\", \"shape\": [4]}}, {\"name\": \"out\", \"op\": \"output\", "   \
  "\"args\": [\"v\"]}]}"

static void expect_graph_error(const char *json, const char *path, const char *text) {
  vl_graph *g = NULL;
  vl_error err;
  assert_int_equal(vl_graph_parse(json, strlen(json), NULL, &g, &err), VL_ERR_INVALID_GRAPH);
  assert_null(g);
  assert_string_equal(err.path, path);
  if (strstr(err.message, text) == NULL) fail_msg("message \"%s\" lacks \"%s\"", err.message, text);
}

static void a_memory_view_offset_must_stay_inside_its_base(void **state) {
  (void)state;
  const char *ok = MV_HEAD "{\"name\": \"v\", \"op\": \"call_function\", \"target\": "
                           "\"memory.view\", \"args\": [\"x\", [4]], \"offset\": 2, " MV_TAIL;
  vl_graph *g = parse(ok);
  char *text = vl_graph_print(g);
  assert_non_null(strstr(text, "\"offset\":2"));
  free(text);
  vl_tensor_map *in = input_iota("x", 1, (const int64_t[]){6}, NULL);
  vl_tensor_map *out = run_ok(g, in);
  assert_output_f32(out, 0, (const float[]){2, 3, 4, 5}, 4);
  vl_tensor_map_free(out);
  vl_tensor_map_free(in);
  vl_graph_free(g);
  expect_graph_error(MV_HEAD "{\"name\": \"v\", \"op\": \"call_function\", \"target\": "
                             "\"memory.view\", \"args\": [\"x\", [4]], \"offset\": 3, " MV_TAIL,
                     "/nodes/1/offset", "past the 6 elements of base x");
  expect_graph_error(MV_HEAD "{\"name\": \"v\", \"op\": \"call_function\", \"target\": "
                             "\"memory.view\", \"args\": [\"x\", [4]], \"offset\": -1, " MV_TAIL,
                     "/nodes/1/offset", "whole number of elements >= 0");
  expect_graph_error(MV_HEAD "{\"name\": \"v\", \"op\": \"call_function\", \"target\": "
                             "\"aten.view_copy.default\", \"args\": [\"x\", [4]], \"offset\": 1, " MV_TAIL,
                     "/nodes/1/offset", "only memory.view nodes carry offset");
}

static void an_as_strided_copy_past_its_input_is_a_kernel_error(void **state) {
  (void)state;
  vl_graph *g = parse(MV_HEAD "{\"name\": \"v\", \"op\": \"call_function\", \"target\": "
                              "\"aten.as_strided_copy.default\", \"args\": [\"x\", [4], [1], 3], "
                      MV_TAIL);
  vl_tensor_map *in = input_iota("x", 1, (const int64_t[]){6}, NULL), *out = NULL;
  vl_error err;
  assert_int_equal(vl_interp_run(g, in, NULL, &out, &err), VL_ERR_KERNEL);
  assert_string_equal(err.path, "/nodes/1/args");
  assert_non_null(strstr(err.message, "reads past the 24 bytes"));
  vl_tensor_map_free(in);
  vl_graph_free(g);
}

/* A layout-only op whose arguments PyTorch would refuse: the error points at the argument (or
 * at val's shape) and names the rule. */
static void layout_only_arguments_out_of_range_are_named(void **state) {
  (void)state;
  const struct {
    const char *target, *args, *shape, *path, *message;
  } cases[] = {
      {"aten.select_copy.int", "[\"x\",0,9]", "[3]", "/nodes/1/args/2",
       "aten.select_copy.int: index 9 is out of range for dim 0 of size 2"},
      {"aten.t_copy.default", "[\"x\"]", "[2,3]", "/nodes/1/val/shape",
       "aten.t_copy.default: the arguments give shape [3,2] from an input of shape [2,3], not "
       "val's [2,3]"},
      {"aten.squeeze_copy.dim", "[\"x\",7]", "[2,3]", "/nodes/1/args/1",
       "aten.squeeze_copy.dim: dim 7 is out of range for rank 2 (-2..1)"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    char json[1024];
    snprintf(json, sizeof json,
             HEAD "\"nodes\": [{\"name\": \"x\", \"op\": \"placeholder\", \"val\": {\"dtype\": "
                  "\"float32\", \"shape\": [2,3]}}, {\"name\": \"y\", \"op\": \"call_function\", "
                  "\"target\": \"%s\", \"args\": %s, \"val\": {\"dtype\": \"float32\", "
                  "\"shape\": %s}}, {\"name\": \"out\", \"op\": \"output\", \"args\": [\"y\"]}]}",
             cases[k].target, cases[k].args, cases[k].shape);
    vl_graph *g = parse(json);
    vl_tensor_map *in = input_iota("x", 2, (const int64_t[]){2, 3}, NULL), *out = NULL;
    vl_error err;
    assert_int_equal(vl_interp_run(g, in, NULL, &out, &err), VL_ERR_KERNEL);
    assert_null(out);
    assert_string_equal(err.path, cases[k].path);
    assert_string_equal(err.message, cases[k].message);
    vl_tensor_map_free(in);
    vl_graph_free(g);
  }
}

/* A planned split's outputs live where the first getitem of each says (its mem_offset), now
 * found in one pass over the split's users (a search per output cost 256 passes over them):
 * here output 2 is read first and twice, output 0 next, output 1 never, in an arena that reuses
 * their bytes; the run gives the unplanned graph's values. */
static const char *planned_split_json =
    "{\"format\":\"viewlower.graph\",\"version\":1,\"plan\":{\"arena_bytes\":96,"
    "\"alignment\":16},\"nodes\":[{\"name\":\"x\",\"op\":\"placeholder\","
    "\"val\":{\"dtype\":\"float32\",\"shape\":[4,3]},\"mem_offset\":0},"
    "{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"aten.mul.Tensor\",\"args\":[\"x\","
    "2.0],\"val\":{\"dtype\":\"float32\",\"shape\":[4,3]},\"mem_offset\":48},"
    "{\"name\":\"s\",\"op\":\"call_function\","
    "\"target\":\"aten.split_with_sizes_copy.default\",\"args\":[\"y\",[1,1,1,1]],"
    "\"vals\":[{\"dtype\":\"float32\",\"shape\":[1,3]},{\"dtype\":\"float32\",\"shape\":[1,"
    "3]},{\"dtype\":\"float32\",\"shape\":[1,3]},{\"dtype\":\"float32\",\"shape\":[1,3]}]},"
    "{\"name\":\"g0\",\"op\":\"call_function\",\"target\":\"operator.getitem\","
    "\"args\":[\"s\",2],\"val\":{\"dtype\":\"float32\",\"shape\":[1,3]},\"mem_offset\":0},"
    "{\"name\":\"g1\",\"op\":\"call_function\",\"target\":\"operator.getitem\","
    "\"args\":[\"s\",0],\"val\":{\"dtype\":\"float32\",\"shape\":[1,3]},\"mem_offset\":16},"
    "{\"name\":\"g2\",\"op\":\"call_function\",\"target\":\"operator.getitem\","
    "\"args\":[\"s\",2],\"val\":{\"dtype\":\"float32\",\"shape\":[1,3]}},"
    "{\"name\":\"g3\",\"op\":\"call_function\",\"target\":\"operator.getitem\","
    "\"args\":[\"s\",3],\"val\":{\"dtype\":\"float32\",\"shape\":[1,3]},\"mem_offset\":32},"
    "{\"name\":\"r0\",\"op\":\"call_function\",\"target\":\"aten.relu.default\","
    "\"args\":[\"g0\"],\"val\":{\"dtype\":\"float32\",\"shape\":[1,3]},\"mem_offset\":48},"
    "{\"name\":\"r1\",\"op\":\"call_function\",\"target\":\"aten.relu.default\","
    "\"args\":[\"g1\"],\"val\":{\"dtype\":\"float32\",\"shape\":[1,3]},\"mem_offset\":64},"
    "{\"name\":\"r2\",\"op\":\"call_function\",\"target\":\"aten.relu.default\","
    "\"args\":[\"g2\"],\"val\":{\"dtype\":\"float32\",\"shape\":[1,3]},\"mem_offset\":80},"
    "{\"name\":\"r3\",\"op\":\"call_function\",\"target\":\"aten.relu.default\","
    "\"args\":[\"g3\"],\"val\":{\"dtype\":\"float32\",\"shape\":[1,3]},\"mem_offset\":0},"
    "{\"name\":\"c\",\"op\":\"call_function\",\"target\":\"aten.add.Tensor\","
    "\"args\":[\"r0\",\"r1\"],\"val\":{\"dtype\":\"float32\",\"shape\":[1,3]},"
    "\"mem_offset\":32},"
    "{\"name\":\"d\",\"op\":\"call_function\",\"target\":\"aten.add.Tensor\","
    "\"args\":[\"r2\",\"r3\"],\"val\":{\"dtype\":\"float32\",\"shape\":[1,3]},"
    "\"mem_offset\":48},"
    "{\"name\":\"out\",\"op\":\"output\",\"args\":[\"c\",\"d\",\"g1\"]}]}";

static void a_planned_split_places_each_output_at_its_first_getitem(void **state) {
  (void)state;
  vl_graph *g = parse(planned_split_json);
  vl_tensor_map *in = input_iota("x", 2, (const int64_t[]){4, 3}, NULL);
  vl_tensor_map *out = run_ok(g, in);
  assert_int_equal(out->count, 3);
  assert_output_f32(out, 0, (const float[]){12, 16, 20}, 3);
  assert_output_f32(out, 1, (const float[]){30, 34, 38}, 3);
  assert_output_f32(out, 2, (const float[]){0, 2, 4}, 3);
  vl_tensor_map_free(out);
  vl_tensor_map_free(in);
  vl_graph_free(g);
}

/* A rank-0 graph: x -> y = target(x, args...) -> output y. */
static vl_graph *scalar_graph(const char *target, const char *args) {
  char json[1024];
  snprintf(json, sizeof json,
           HEAD "\"nodes\": [{\"name\": \"x\", \"op\": \"placeholder\", \"val\": {\"dtype\": "
                "\"float32\", \"shape\": []}}, {\"name\": \"y\", \"op\": \"call_function\", "
                "\"target\": \"%s\", \"args\": %s, \"val\": {\"dtype\": \"float32\", "
                "\"shape\": []}}, {\"name\": \"out\", \"op\": \"output\", \"args\": [\"y\"]}]}",
           target, args);
  return parse(json);
}

/* PyTorch 1.13 wraps a dim of a rank-0 tensor as if the rank were 1 (maybe_wrap_dim): transpose
 * of a scalar takes dims 0 and -1, permute takes []; 1, -2 and [0] raise. The interpreter runs
 * them through the layout maps' rule (vl__wrap_dim), as the lowering reads them. */
static void a_scalar_transposes_and_permutes_as_pytorch_wraps_its_dims(void **state) {
  (void)state;
  const char *ok[] = {"[\"x\",0,0]", "[\"x\",0,-1]", "[\"x\",-1,0]", "[\"x\",-1,-1]"};
  const uint32_t bits = 0xbf9d70a4u; /* -1.23f */
  for (size_t k = 0; k < 5; k++) {
    vl_graph *g = k < 4 ? scalar_graph("aten.transpose_copy.int", ok[k])
                        : scalar_graph("aten.permute_copy.default", "[\"x\",[]]");
    vl_tensor_map *in = input_iota("x", 0, (const int64_t[]){1}, NULL);
    memcpy(in->tensors[0]->data, &bits, sizeof bits);
    vl_tensor_map *out = run_ok(g, in);
    uint32_t got;
    assert_int_equal(out->count, 1);
    assert_int_equal(out->tensors[0]->spec.rank, 0);
    memcpy(&got, out->tensors[0]->data, sizeof got);
    assert_int_equal(got, bits);
    vl_lower_options o = options(true, VL_POLICY_SAFE);
    vl_verify_result r;
    vl_error err;
    assert_int_equal(vl_verify(g, &o, in, 0, NULL, &r, &err), VL_OK);
    assert_true(r.equal);
    vl_verify_result_clear(&r);
    vl_tensor_map_free(out);
    vl_tensor_map_free(in);
    vl_graph_free(g);
  }
  const struct {
    const char *target, *args, *path, *message;
  } bad[] = {
      {"aten.transpose_copy.int", "[\"x\",1,0]", "/nodes/1/args/1",
       "aten.transpose_copy.int: dim 1 is out of range for rank 0 (-1..0)"},
      {"aten.transpose_copy.int", "[\"x\",0,-2]", "/nodes/1/args/2",
       "aten.transpose_copy.int: dim -2 is out of range for rank 0 (-1..0)"},
      {"aten.permute_copy.default", "[\"x\",[0]]", "/nodes/1/args/1",
       "aten.permute_copy.default: dims [0] has 1 entries for an input of rank 0"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    vl_graph *g = scalar_graph(bad[k].target, bad[k].args);
    vl_tensor_map *in = input_iota("x", 0, (const int64_t[]){1}, NULL), *out = NULL;
    vl_error err;
    assert_int_equal(vl_interp_run(g, in, NULL, &out, &err), VL_ERR_KERNEL);
    assert_null(out);
    assert_string_equal(err.path, bad[k].path);
    assert_string_equal(err.message, bad[k].message);
    vl_tensor_map_free(in);
    vl_graph_free(g);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(patch_embedding_executes_to_exact_values),
      cmocka_unit_test(input_in_another_dim_order_is_converted),
      cmocka_unit_test(memory_view_reads_its_base_through_its_own_layout),
      cmocka_unit_test(in_place_add_writes_the_base_that_a_memory_view_reads),
      cmocka_unit_test(copy_transpose_and_out_variant_write_where_they_should),
      cmocka_unit_test(integer_arithmetic_wraps_like_twos_complement),
      cmocka_unit_test(bool_add_is_or_and_mul_is_and),
      cmocka_unit_test(float16_computes_through_float_and_rounds_to_nearest_even),
      cmocka_unit_test(unsupported_target_is_named_with_its_node_path),
      cmocka_unit_test(missing_input_is_invalid_params_at_its_name),
      cmocka_unit_test(input_of_wrong_shape_or_unknown_name_is_refused),
      cmocka_unit_test(buffers_beyond_the_total_limit_are_too_large),
      cmocka_unit_test(the_total_limit_bounds_the_buffers_live_at_once),
      cmocka_unit_test(
          a_storage_shared_by_a_view_and_in_place_writes_lives_until_its_last_reader),
      cmocka_unit_test(kernel_errors_point_at_their_node),
      cmocka_unit_test(generated_inputs_are_distinct_and_follow_the_seed),
      cmocka_unit_test(generated_half_values_are_finite_and_start_with_integers),
      cmocka_unit_test(verify_under_safe_policy_is_equal_for_every_spelling_and_switch),
      cmocka_unit_test(verify_under_legacy_policy_shows_the_reordered_element),
      cmocka_unit_test(mutation_after_view_is_equal_under_safe_and_differs_under_legacy),
      cmocka_unit_test(contiguous_reshape_chain_is_replaced_and_equal),
      cmocka_unit_test(verify_leaves_the_callers_graph_untouched),
      cmocka_unit_test(layout_only_ops_execute_to_exact_values),
      cmocka_unit_test(a_memory_view_offset_must_stay_inside_its_base),
      cmocka_unit_test(an_as_strided_copy_past_its_input_is_a_kernel_error),
      cmocka_unit_test(layout_only_arguments_out_of_range_are_named),
      cmocka_unit_test(a_scalar_transposes_and_permutes_as_pytorch_wraps_its_dims),
      cmocka_unit_test(a_planned_split_places_each_output_at_its_first_getitem),
      cmocka_unit_test(generated_inputs_over_the_limits_name_their_placeholder),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

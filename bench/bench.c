/* bench.c - viewlower-bench: prints one JSON object (SPEC §9) with figures measured side by side
 * in one run, each the median of repeats.
 *
 * "copy": the view_copy kernel (vl_view_copy_out into a preallocated output) against memcpy of
 * the same bytes and against a naive per-element loop over logical indices that computes both
 * offsets by division and modulus. "lower": synthetic graphs of 1k..1M nodes mixing view chains,
 * layout changes and in-place ops; io_ms is parse + print alone (vl_graph_parse_unvalidated),
 * lower_ms parse + validate + lower + print,
 * pass_ms vl_lower alone (extra key), lowered_nodes what lower_ms printed (dead views removed).
 * Usage: viewlower-bench [--quick]  (--quick: fewer repeats, graphs up to 10k nodes). */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "viewlower/layout.h"
#include "viewlower/copy.h"
#include "viewlower/graph.h"
#include "viewlower/lower.h"
#include "viewlower/tensor.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void *xmalloc(size_t n) {
  void *p = malloc(n > 0 ? n : 1);
  if (p == NULL) {
    fprintf(stderr, "viewlower-bench: out of memory (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

/* ---- copy ----------------------------------------------------------------------------------- */

typedef struct copy_case {
  const char *name;
  vl_dtype dtype;
  uint8_t rank;
  int64_t shape[5];
  bool channels_last;
  uint8_t size_rank;
  int64_t size[3];
} copy_case;

static const copy_case copy_cases[] = {
    {"channels_last_f32_1x64x112x112",
     VL_DTYPE_FLOAT32,
     4,
     {1, 64, 112, 112},
     true,
     3,
     {1, 64, -1}},
    {"channels_last_f32_8x64x112x112",
     VL_DTYPE_FLOAT32,
     4,
     {8, 64, 112, 112},
     true,
     3,
     {8, 64, -1}},
    {"channels_last_f32_1x768x14x14", VL_DTYPE_FLOAT32, 4, {1, 768, 14, 14}, true, 3, {1, 768, -1}},
    {"channels_last_u8_1x3x224x224", VL_DTYPE_UINT8, 4, {1, 3, 224, 224}, true, 3, {1, 3, -1}},
    {"channels_last_3d_f16_1x16x8x56x56",
     VL_DTYPE_FLOAT16,
     5,
     {1, 16, 8, 56, 56},
     true,
     3,
     {1, 16, -1}},
    {"contiguous_f32_1x64x112x112", VL_DTYPE_FLOAT32, 4, {1, 64, 112, 112}, false, 3, {1, 64, -1}},
    {"contiguous_f32_8x64x112x112", VL_DTYPE_FLOAT32, 4, {8, 64, 112, 112}, false, 3, {8, 64, -1}},
};

/* The baseline: for each logical index, both offsets by div/mod over the shapes. */
#define VL__NAIVE(T, name)                                                                         \
  static void name(const vl_spec *ds, T *dst, const int64_t *dst_st, const vl_spec *ss,            \
                   const T *src, const int64_t *src_st, int64_t n) {                               \
    for (int64_t k = 0; k < n; k++) {                                                              \
      int64_t a = k, b = k, od = 0, os = 0;                                                        \
      for (int d = ds->rank - 1; d >= 0; d--)                                                      \
        od += (a % ds->shape[d]) * dst_st[d], a /= ds->shape[d];                                   \
      for (int d = ss->rank - 1; d >= 0; d--)                                                      \
        os += (b % ss->shape[d]) * src_st[d], b /= ss->shape[d];                                   \
      dst[od] = src[os];                                                                           \
    }                                                                                              \
  }

VL__NAIVE(uint8_t, naive_u8)
VL__NAIVE(uint16_t, naive_u16)
VL__NAIVE(uint32_t, naive_u32)
VL__NAIVE(uint64_t, naive_u64)

static void naive_copy(const vl_tensor *out, const vl_tensor *in) {
  int64_t ds[VL_MAX_RANK], ss[VL_MAX_RANK], n = 0;
  vl_layout_strides(&out->spec, ds);
  vl_layout_strides(&in->spec, ss);
  vl_spec_numel(&in->spec, &n);
  switch (vl_dtype_size(in->spec.dtype)) {
  case 1: naive_u8(&out->spec, out->data, ds, &in->spec, in->data, ss, n); break;
  case 2: naive_u16(&out->spec, out->data, ds, &in->spec, in->data, ss, n); break;
  case 4: naive_u32(&out->spec, out->data, ds, &in->spec, in->data, ss, n); break;
  default: naive_u64(&out->spec, out->data, ds, &in->spec, in->data, ss, n); break;
  }
}

static vl_tensor *tensor_or_die(const vl_spec *s) {
  vl_tensor *t = NULL;
  vl_error err;
  if (vl_tensor_new(s, NULL, &t, &err) != VL_OK) {
    fprintf(stderr, "viewlower-bench: %s\n", err.message);
    exit(1);
  }
  return t;
}

static void make_tensors(const copy_case *c, vl_tensor **in, vl_tensor **out) {
  vl_spec s, o;
  int64_t shape[VL_MAX_RANK], numel = 0;
  vl_error err;
  vl_spec_init(&s, c->dtype, c->rank, c->shape);
  if (c->channels_last) vl_dim_order_channels_last(s.dim_order, c->rank);
  vl_spec_numel(&s, &numel);
  vl_view_size_infer(numel, c->size, c->size_rank, shape, &err);
  vl_spec_init(&o, c->dtype, c->size_rank, shape);
  *in = tensor_or_die(&s);
  *out = tensor_or_die(&o);
  for (int64_t i = 0; i < (*in)->nbytes; i++) ((uint8_t *)(*in)->data)[i] = (uint8_t)(i * 131 + 7);
  memset((*out)->data, 1, (size_t)(*out)->nbytes); /* fault the pages in before timing */
}

typedef struct copy_times {
  double ours, memcpy_, naive;
} copy_times;

static void run_ours(const copy_case *c, vl_tensor *in, vl_tensor *out) {
  vl_error err;
  if (vl_view_copy_out(in, c->size, c->size_rank, out, &err) != VL_OK) {
    fprintf(stderr, "viewlower-bench: %s: %s\n", c->name, err.message);
    exit(1);
  }
}

static void run_method(int m, const copy_case *c, vl_tensor *in, vl_tensor *out) {
  if (m == 0)
    run_ours(c, in, out);
  else if (m == 1)
    memcpy(out->data, in->data, (size_t)in->nbytes);
  else
    naive_copy(out, in);
}

/* Seconds per call of method m in a warm steady state: one untimed call, then a timed batch
 * that moves at least 32 MiB (the naive loop: one call). */
static double time_method(int m, const copy_case *c, vl_tensor *in, vl_tensor *out) {
  int64_t batch = m == 2 ? 1 : ((int64_t)32 << 20) / (in->nbytes > 0 ? in->nbytes : 1);
  if (batch < 1) batch = 1;
  run_method(m, c, in, out);
  double t0 = now_s();
  for (int64_t i = 0; i < batch; i++) run_method(m, c, in, out);
  return (now_s() - t0) / (double)batch;
}

/* Rounds of the three methods on the same buffers, the order rotated each round so that none
 * always follows the slow naive loop. */
static copy_times copy_measure(const copy_case *c, vl_tensor *in, vl_tensor *out, int repeats) {
  double t[3][64];
  for (int r = 0; r < repeats; r++)
    for (int j = 0; j < 3; j++) {
      int m = (j + r) % 3;
      t[m][r] = time_method(m, c, in, out);
    }
  return (copy_times){median(t[0], repeats), median(t[1], repeats), median(t[2], repeats)};
}

static cJSON *int_array(const int64_t *v, size_t n) {
  cJSON *a = cJSON_CreateArray();
  for (size_t i = 0; a != NULL && i < n; i++)
    cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
  return a;
}

static cJSON *copy_case_json(const copy_case *c, const vl_tensor *in, copy_times t, int repeats) {
  cJSON *o = cJSON_CreateObject();
  int64_t order[VL_MAX_RANK];
  double bytes = (double)in->nbytes;
  for (int d = 0; d < c->rank; d++) order[d] = in->spec.dim_order[d];
  cJSON_AddStringToObject(o, "name", c->name);
  cJSON_AddStringToObject(o, "dtype", vl_dtype_name(c->dtype));
  cJSON_AddItemToObject(o, "shape", int_array(c->shape, c->rank));
  cJSON_AddItemToObject(o, "in_dim_order", int_array(order, c->rank));
  cJSON_AddItemToObject(o, "size", int_array(c->size, c->size_rank));
  cJSON_AddNumberToObject(o, "bytes", bytes);
  cJSON_AddNumberToObject(o, "ours_gbps", bytes / t.ours / 1e9);
  cJSON_AddNumberToObject(o, "memcpy_gbps", bytes / t.memcpy_ / 1e9);
  cJSON_AddNumberToObject(o, "naive_gbps", bytes / t.naive / 1e9);
  cJSON_AddNumberToObject(o, "ours_vs_memcpy", t.memcpy_ / t.ours);
  cJSON_AddNumberToObject(o, "ours_vs_naive", t.naive / t.ours);
  cJSON_AddNumberToObject(o, "repeats", repeats);
  return o;
}

static cJSON *bench_copy(bool quick) {
  cJSON *list = cJSON_CreateArray();
  for (size_t i = 0; i < sizeof copy_cases / sizeof copy_cases[0]; i++) {
    vl_tensor *in, *out;
    make_tensors(&copy_cases[i], &in, &out);
    int repeats = in->nbytes > (8 << 20) ? 15 : 31;
    if (quick) repeats = 6;
    copy_times t = copy_measure(&copy_cases[i], in, out, repeats);
    cJSON_AddItemToArray(list, copy_case_json(&copy_cases[i], in, t, repeats));
    vl_tensor_free(in);
    vl_tensor_free(out);
  }
  return list;
}

/* ---- lower ---------------------------------------------------------------------------------- */

typedef struct text {
  char *p;
  size_t len, cap;
} text;

static void text_add(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void text_add(text *t, const char *fmt, ...) {
  va_list ap;
  for (;;) {
    va_start(ap, fmt);
    int n = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < t->cap - t->len) {
      t->len += (size_t)n;
      return;
    }
    t->cap = t->cap * 2 + (size_t)(n > 0 ? n : 0) + 1;
    char *p = realloc(t->p, t->cap);
    if (p == NULL) {
      fprintf(stderr, "viewlower-bench: out of memory building a graph\n");
      exit(1);
    }
    t->p = p;
  }
}

#define VAL4 "\"val\":{\"dtype\":\"float32\",\"shape\":[2,4,4,8]}"
#define VAL4CL "\"val\":{\"dtype\":\"float32\",\"shape\":[2,4,4,8],\"dim_order\":[0,2,3,1]}"

static void node(text *t, const char *name, long i, const char *target, const char *args,
                 const char *val) {
  text_add(t, ",{\"name\":\"%s%ld\",\"op\":\"call_function\",\"target\":\"%s\",\"args\":[%s],%s}",
           name, i, target, args, val);
}

/* Ten nodes: a layout change, a two-step view chain of it (kept), an add, a reshape of the add
 * whose base is then bumped in place while the reshape is still read, and a same-shape view. */
static void block(text *t, long i, const char *prev) {
  char a[128];
  snprintf(a, sizeof a, "\"%s\"", prev);
  text_add(t,
           ",{\"name\":\"cl%ld\",\"op\":\"call_function\",\"target\":"
           "\"dim_order_ops._to_dim_order_copy.default\",\"args\":[%s],"
           "\"kwargs\":{\"dim_order\":[0,2,3,1]}," VAL4CL "}",
           i, a);
  snprintf(a, sizeof a, "\"cl%ld\",[2,4,-1]", i);
  node(t, "va", i, "aten.view_copy.default", a,
       "\"val\":{\"dtype\":\"float32\",\"shape\":[2,4,32]}");
  snprintf(a, sizeof a, "\"va%ld\",[8,32]", i);
  node(t, "vb", i, "aten.view_copy.default", a, "\"val\":{\"dtype\":\"float32\",\"shape\":[8,32]}");
  snprintf(a, sizeof a, "\"vb%ld\",1.0", i);
  node(t, "ad", i, "aten.add.Tensor", a, "\"val\":{\"dtype\":\"float32\",\"shape\":[8,32]}");
  snprintf(a, sizeof a, "\"ad%ld\",[2,4,4,8]", i);
  node(t, "vc", i, "aten.view_copy.default", a, VAL4);
  snprintf(a, sizeof a, "\"vc%ld\",2.0", i);
  node(t, "mu", i, "aten.mul.Tensor", a, VAL4);
  snprintf(a, sizeof a, "\"ad%ld\",1.0", i);
  node(t, "ip", i, "aten.add_.Tensor", a, "\"val\":{\"dtype\":\"float32\",\"shape\":[8,32]}");
  snprintf(a, sizeof a, "\"vc%ld\"", i);
  node(t, "re", i, "aten.relu.default", a, VAL4);
  snprintf(a, sizeof a, "\"re%ld\",\"mu%ld\"", i, i);
  node(t, "su", i, "aten.add.Tensor", a, VAL4);
  snprintf(a, sizeof a, "\"su%ld\",[2,4,4,8]", i);
  node(t, "nx", i, "aten.view_copy.default", a, VAL4);
}

/* A graph of exactly n nodes (n >= 12): placeholder, blocks, relu padding, output. */
static char *synthetic_graph(long n, size_t *len) {
  text t = {xmalloc(1 << 16), 0, 1 << 16};
  char prev[64] = "x";
  long blocks = (n - 2) / 10, pad = n - 2 - blocks * 10;
  text_add(&t,
           "{\"format\":\"viewlower.graph\",\"version\":1,\"name\":\"synthetic_%ld\","
           "\"nodes\":[{\"name\":\"x\",\"op\":\"placeholder\"," VAL4 "}",
           n);
  for (long i = 0; i < blocks; i++) {
    block(&t, i, prev);
    snprintf(prev, sizeof prev, "nx%ld", i);
  }
  for (long i = 0; i < pad; i++) {
    char a[80];
    snprintf(a, sizeof a, "\"%s\"", prev);
    node(&t, "pad", i, "aten.relu.default", a, VAL4);
    snprintf(prev, sizeof prev, "pad%ld", i);
  }
  text_add(&t, ",{\"name\":\"out\",\"op\":\"output\",\"args\":[\"%s\"]}]}", prev);
  *len = t.len;
  return t.p;
}

static vl_graph *parse_or_die(const char *json, size_t len, const vl_limits *lim, bool validate) {
  vl_graph *g = NULL;
  vl_error err;
  vl_status st = validate ? vl_graph_parse(json, len, lim, &g, &err)
                          : vl_graph_parse_unvalidated(json, len, lim, &g, &err);
  if (st != VL_OK) {
    fprintf(stderr, "viewlower-bench: synthetic graph: %s: %s\n", err.path, err.message);
    exit(1);
  }
  return g;
}

/* One round: parse + print, or parse + validate + lower + print. Seconds in total and in
 * vl_lower alone; the printed graph's node count (lowering removes dead view_copy nodes, so it
 * prints fewer). */
typedef struct lower_times {
  double total, pass;
  uint32_t printed_nodes;
} lower_times;

static double lower_pass(vl_graph *g) {
  vl_lower_options o;
  vl_report r;
  vl_error err;
  vl_lower_options_default(&o);
  double t0 = now_s();
  if (vl_lower(g, &o, &r, &err) != VL_OK) {
    fprintf(stderr, "viewlower-bench: lower: %s\n", err.message);
    exit(1);
  }
  double t1 = now_s();
  vl_report_clear(&r);
  return t1 - t0;
}

static lower_times lower_round(const char *json, size_t len, const vl_limits *lim, bool lower) {
  lower_times t = {0, 0, 0};
  double t0 = now_s();
  vl_graph *g = parse_or_die(json, len, lim, lower);
  if (lower) t.pass = lower_pass(g);
  char *out = vl_graph_print(g);
  t.total = now_s() - t0;
  if (out == NULL) exit(1);
  t.printed_nodes = g->n_nodes;
  free(out);
  vl_graph_free(g);
  return t;
}

static cJSON *bench_lower_one(long n, int repeats) {
  size_t len;
  char *json = synthetic_graph(n, &len);
  vl_limits lim;
  double io[16], low[16], pass[16];
  uint32_t lowered_nodes = 0;
  vl_limits_default(&lim);
  for (int r = 0; r < repeats; r++) {
    io[r] = lower_round(json, len, &lim, false).total;
    lower_times t = lower_round(json, len, &lim, true);
    low[r] = t.total;
    pass[r] = t.pass;
    lowered_nodes = t.printed_nodes;
  }
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "nodes", (double)n);
  cJSON_AddNumberToObject(o, "json_bytes", (double)len);
  cJSON_AddNumberToObject(o, "io_ms", median(io, repeats) * 1e3);
  cJSON_AddNumberToObject(o, "lower_ms", median(low, repeats) * 1e3);
  cJSON_AddNumberToObject(o, "pass_ms", median(pass, repeats) * 1e3);
  cJSON_AddNumberToObject(o, "lowered_nodes", lowered_nodes);
  cJSON_AddNumberToObject(o, "repeats", repeats);
  free(json);
  return o;
}

static cJSON *bench_lower(bool quick) {
  static const long sizes[] = {1000, 10000, 100000, 1000000};
  cJSON *list = cJSON_CreateArray();
  for (size_t i = 0; i < 4; i++) {
    if (quick && sizes[i] > 10000) break;
    int repeats = sizes[i] >= 1000000 ? 3 : sizes[i] >= 100000 ? 5 : 9;
    cJSON_AddItemToArray(list, bench_lower_one(sizes[i], quick ? 1 : repeats));
  }
  return list;
}

int main(int argc, char **argv) {
  bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  if (argc > 1 && !quick) {
    fprintf(stderr, "usage: viewlower-bench [--quick]\n");
    return 64;
  }
  cJSON *root = cJSON_CreateObject();
  cJSON_AddItemToObject(root, "copy", bench_copy(quick));
  cJSON_AddItemToObject(root, "lower", bench_lower(quick));
  char *s = cJSON_Print(root);
  if (s == NULL) return 1;
  puts(s);
  free(s);
  cJSON_Delete(root);
  return 0;
}

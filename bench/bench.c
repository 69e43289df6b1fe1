/* bench.c - viewlower-bench: prints one JSON object (docs/kernels.md, "Benchmark") with figures
 * measured side by side in one run.
 *
 * "copy": the view_copy kernel (vl_view_copy_out into a preallocated output; with --level, the
 * engine at that dispatch level) against memcpy of the same bytes and a naive per-element loop
 * over logical indices that computes both offsets by division and modulus. Methods are sampled
 * in interleaved rounds on the same warm buffers (each sample a batch moving >= 4 MiB, one
 * untimed call of each first), so a change of load or clock hits all alike; *_gbps are
 * medians, *_best_gbps from the fastest sample. Image cases carry "direction".
 * "split_copy": one 64 MiB memcpy on one thread against the same copy split over two.
 * "lower": synthetic graphs of 1k..1M nodes mixing view chains, layout changes and in-place
 * ops; io_ms is parse + print alone (vl_graph_parse_unvalidated), lower_ms parse + validate +
 * lower + print, pass_ms vl_lower alone (extra key), lowered_nodes what lower_ms printed (dead
 * views removed); cjson_parse_ms is cJSON_ParseWithLength alone on the same text (the tree
 * freed outside the timing) and parse_rate_ratio cjson_parse_ms / lower_ms (the target is
 * >= 0.5: parse + validate + lower + print at half cJSON's parse rate or better); peak_bytes is
 * the growth of peak RSS during one lowering round (in a forked child whose high-water mark is
 * reset after one lowering of a 12-node graph has mapped the code, the text already resident)
 * and peak_ratio (peak_bytes + text) / text.
 * "daemon" (--daemon SOCKET): bench/daemon.c.
 * scripts/bench.sh adds the PyTorch and NumPy columns and the socket rate (bench/compare.py). */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_daemon.h"
#include "timing.h"
#include "viewlower/copy.h"
#include "viewlower/graph.h"
#include "viewlower/layout.h"
#include "viewlower/lower.h"
#include "viewlower/tensor.h"

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
  bool channels_last;     /* self is channels-last (else contiguous) */
  bool out_channels_last; /* out is channels-last with self's shape (size = shape) */
  uint8_t size_rank;
  int64_t size[5];
  const char *direction; /* image cases: "nhwc_to_nchw" / "nchw_to_nhwc", else NULL */
} copy_case;

#define CL(name, dt, n, c, h, w)                                                                   \
  { name, dt, 4, {n, c, h, w}, true, false, 3, {n, c, -1}, NULL }
#define IMG_IN(name, dt, c, h, w)                                                                  \
  { name, dt, 4, {1, c, h, w}, true, false, 4, {1, c, h, w}, "nhwc_to_nchw" }
#define IMG_OUT(name, dt, c, h, w)                                                                 \
  { name, dt, 4, {1, c, h, w}, false, true, 4, {1, c, h, w}, "nchw_to_nhwc" }

/* The first seven are the historical cases (names kept: tools compare runs by name). */
static const copy_case copy_cases[] = {
    CL("channels_last_f32_1x64x112x112", VL_DTYPE_FLOAT32, 1, 64, 112, 112),
    CL("channels_last_f32_8x64x112x112", VL_DTYPE_FLOAT32, 8, 64, 112, 112),
    CL("channels_last_f32_1x768x14x14", VL_DTYPE_FLOAT32, 1, 768, 14, 14),
    CL("channels_last_u8_1x3x224x224", VL_DTYPE_UINT8, 1, 3, 224, 224),
    {"channels_last_3d_f16_1x16x8x56x56",
     VL_DTYPE_FLOAT16,
     5,
     {1, 16, 8, 56, 56},
     true,
     false,
     3,
     {1, 16, -1},
     NULL},
    {"contiguous_f32_1x64x112x112",
     VL_DTYPE_FLOAT32,
     4,
     {1, 64, 112, 112},
     false,
     false,
     3,
     {1, 64, -1},
     NULL},
    {"contiguous_f32_8x64x112x112",
     VL_DTYPE_FLOAT32,
     4,
     {8, 64, 112, 112},
     false,
     false,
     3,
     {8, 64, -1},
     NULL},
    /* every element size: large (>= 3 MB) and cache-resident transposes */
    CL("channels_last_u8_8x64x112x112", VL_DTYPE_UINT8, 8, 64, 112, 112),
    CL("channels_last_f16_4x64x112x112", VL_DTYPE_FLOAT16, 4, 64, 112, 112),
    CL("channels_last_f64_4x64x112x112", VL_DTYPE_FLOAT64, 4, 64, 112, 112),
    CL("channels_last_u8_1x768x14x14", VL_DTYPE_UINT8, 1, 768, 14, 14),
    CL("channels_last_f16_1x768x14x14", VL_DTYPE_FLOAT16, 1, 768, 14, 14),
    CL("channels_last_f64_1x384x14x14", VL_DTYPE_FLOAT64, 1, 384, 14, 14),
    /* destination rows 4 KiB apart (4 KiB aliasing: the staged transposes) */
    CL("channels_last_u8_1x64x64x64", VL_DTYPE_UINT8, 1, 64, 64, 64),
    CL("channels_last_f16_1x64x32x64", VL_DTYPE_FLOAT16, 1, 64, 32, 64),
    CL("channels_last_f32_1x64x32x32", VL_DTYPE_FLOAT32, 1, 64, 32, 32),
    /* images, both directions: 3-channel uint8 at 224^2 and 1080p, RGBA and 16-bit at 1080p */
    IMG_IN("image_u8_1x3x224x224_nhwc_to_nchw", VL_DTYPE_UINT8, 3, 224, 224),
    IMG_OUT("image_u8_1x3x224x224_nchw_to_nhwc", VL_DTYPE_UINT8, 3, 224, 224),
    IMG_IN("image_u8_1x3x1080x1920_nhwc_to_nchw", VL_DTYPE_UINT8, 3, 1080, 1920),
    IMG_OUT("image_u8_1x3x1080x1920_nchw_to_nhwc", VL_DTYPE_UINT8, 3, 1080, 1920),
    IMG_IN("image_u8_1x4x1080x1920_nhwc_to_nchw", VL_DTYPE_UINT8, 4, 1080, 1920),
    IMG_OUT("image_u8_1x4x1080x1920_nchw_to_nhwc", VL_DTYPE_UINT8, 4, 1080, 1920),
    IMG_IN("image_i16_1x3x1080x1920_nhwc_to_nchw", VL_DTYPE_INT16, 3, 1080, 1920),
    IMG_OUT("image_i16_1x3x1080x1920_nchw_to_nhwc", VL_DTYPE_INT16, 3, 1080, 1920),
};
#define N_COPY_CASES (sizeof copy_cases / sizeof copy_cases[0])

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
  if (c->out_channels_last) vl_dim_order_channels_last(o.dim_order, c->size_rank);
  *in = tensor_or_die(&s);
  *out = tensor_or_die(&o);
  for (int64_t i = 0; i < (*in)->nbytes; i++) ((uint8_t *)(*in)->data)[i] = (uint8_t)(i * 131 + 7);
  memset((*out)->data, 1, (size_t)(*out)->nbytes); /* fault the pages in before timing */
}

enum { M_OURS, M_MEMCPY, M_NAIVE, N_METHODS };

typedef struct copy_run {
  const copy_case *c;
  vl_tensor *in, *out;
  vl_copy_level level;
} copy_run;

static void run_method(int m, const copy_run *r) {
  vl_error err;
  if (m == M_OURS) {
    /* view_copy_out's checks, then the engine at the chosen level (what vl_view_copy_out runs) */
    if (r->level == vl_copy_level_native()) {
      if (vl_view_copy_out(r->in, r->c->size, r->c->size_rank, r->out, &err) != VL_OK) {
        fprintf(stderr, "viewlower-bench: %s: %s\n", r->c->name, err.message);
        exit(1);
      }
    } else if (vl_copy_logical_at(r->level, &r->out->spec, r->out->data, &r->in->spec, r->in->data,
                                  &err) != VL_OK) {
      fprintf(stderr, "viewlower-bench: %s: %s\n", r->c->name, err.message);
      exit(1);
    }
  } else if (m == M_MEMCPY) {
    memcpy(r->out->data, r->in->data, (size_t)r->in->nbytes);
  } else {
    naive_copy(r->out, r->in);
  }
}

/* One sample: seconds per call over a batch of calls moving at least 4 MiB (one call for the
 * naive loop, and for copies that large). */
static double sample(int m, const copy_run *r) {
  int64_t batch = m == M_NAIVE ? 1 : ((int64_t)4 << 20) / (r->in->nbytes > 0 ? r->in->nbytes : 1);
  if (batch < 1) batch = 1;
  double t0 = now_s();
  for (int64_t i = 0; i < batch; i++) run_method(m, r);
  return (now_s() - t0) / (double)batch;
}

typedef struct copy_times {
  double med[N_METHODS], min[N_METHODS];
  int samples[N_METHODS];
} copy_times;

static double min_of(const double *v, int n) {
  double m = v[0];
  for (int i = 1; i < n; i++) m = v[i] < m ? v[i] : m;
  return m;
}

/* Rounds of samples, the methods interleaved (order rotated each round) on the same warm
 * buffers, so a change of load or clock hits every method alike. Each method runs once untimed
 * first. The naive loop, hundreds of times slower, is sampled in the first rounds only. */
#define MAX_ROUNDS 64
static copy_times copy_measure(const copy_run *r, int rounds, int naive_rounds) {
  double t[N_METHODS][MAX_ROUNDS];
  copy_times out;
  for (int m = 0; m < N_METHODS; m++) run_method(m, r);
  for (int m = 0; m < N_METHODS; m++) out.samples[m] = 0;
  for (int i = 0; i < rounds; i++)
    for (int j = 0; j < N_METHODS; j++) {
      int m = (j + i) % N_METHODS;
      if (m == M_NAIVE && i >= naive_rounds) continue;
      t[m][out.samples[m]++] = sample(m, r);
    }
  for (int m = 0; m < N_METHODS; m++) {
    out.min[m] = min_of(t[m], out.samples[m]);
    out.med[m] = median(t[m], out.samples[m]);
  }
  return out;
}

static cJSON *int_array(const int64_t *v, size_t n) {
  cJSON *a = cJSON_CreateArray();
  for (size_t i = 0; a != NULL && i < n; i++)
    cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
  return a;
}

static cJSON *order_array(const vl_spec *s) {
  int64_t order[VL_MAX_RANK];
  for (int d = 0; d < s->rank; d++) order[d] = s->dim_order[d];
  return int_array(order, s->rank);
}

static cJSON *copy_case_json(const copy_run *r, copy_times t) {
  const copy_case *c = r->c;
  cJSON *o = cJSON_CreateObject();
  double bytes = (double)r->in->nbytes;
  cJSON_AddStringToObject(o, "name", c->name);
  cJSON_AddStringToObject(o, "dtype", vl_dtype_name(c->dtype));
  cJSON_AddItemToObject(o, "shape", int_array(c->shape, c->rank));
  cJSON_AddItemToObject(o, "in_dim_order", order_array(&r->in->spec));
  cJSON_AddItemToObject(o, "size", int_array(c->size, c->size_rank));
  cJSON_AddItemToObject(o, "out_shape", int_array(r->out->spec.shape, r->out->spec.rank));
  cJSON_AddItemToObject(o, "out_dim_order", order_array(&r->out->spec));
  if (c->direction != NULL) cJSON_AddStringToObject(o, "direction", c->direction);
  cJSON_AddNumberToObject(o, "bytes", bytes);
  cJSON_AddStringToObject(o, "level", vl_copy_level_name(r->level));
  cJSON_AddNumberToObject(o, "ours_gbps", bytes / t.med[M_OURS] / 1e9);
  cJSON_AddNumberToObject(o, "memcpy_gbps", bytes / t.med[M_MEMCPY] / 1e9);
  cJSON_AddNumberToObject(o, "naive_gbps", bytes / t.med[M_NAIVE] / 1e9);
  cJSON_AddNumberToObject(o, "ours_vs_memcpy", t.med[M_MEMCPY] / t.med[M_OURS]);
  cJSON_AddNumberToObject(o, "ours_vs_naive", t.med[M_NAIVE] / t.med[M_OURS]);
  cJSON_AddNumberToObject(o, "ours_best_gbps", bytes / t.min[M_OURS] / 1e9);
  cJSON_AddNumberToObject(o, "memcpy_best_gbps", bytes / t.min[M_MEMCPY] / 1e9);
  cJSON_AddNumberToObject(o, "ours_vs_memcpy_best", t.min[M_MEMCPY] / t.min[M_OURS]);
  cJSON_AddNumberToObject(o, "repeats", t.samples[M_OURS]);
  return o;
}

static cJSON *bench_copy(bool quick, const char *only, vl_copy_level level) {
  cJSON *list = cJSON_CreateArray();
  for (size_t i = 0; i < N_COPY_CASES; i++) {
    if (only != NULL && strcmp(only, copy_cases[i].name) != 0) continue;
    copy_run r = {.c = &copy_cases[i], .level = level};
    make_tensors(&copy_cases[i], &r.in, &r.out);
    int rounds = r.in->nbytes > (8 << 20) ? 21 : 41,
        naive_rounds = r.in->nbytes > (1 << 20) ? 3 : 7;
    if (quick) rounds = 7, naive_rounds = 2;
    cJSON_AddItemToArray(list, copy_case_json(&r, copy_measure(&r, rounds, naive_rounds)));
    vl_tensor_free(r.in);
    vl_tensor_free(r.out);
  }
  return list;
}

/* ---- one large copy on two threads -------------------------------------------------------------
 */

typedef struct half_copy {
  char *d;
  const char *s;
  size_t n;
} half_copy;

static void *half_copy_main(void *arg) {
  half_copy *h = arg;
  memcpy(h->d, h->s, h->n);
  return NULL;
}

/* A 64 MiB memcpy on one thread against the same copy split in two halves, the second half on
 * a thread started for it (what a worker pool would add at best, minus the start-up), in
 * interleaved rounds; medians. Decides whether large copies should be split (docs/kernels.md). */
static cJSON *bench_split_copy(bool quick) {
  const size_t n = (size_t)64 << 20;
  char *s = xmalloc(n), *d = xmalloc(n);
  memset(s, 3, n);
  memset(d, 1, n);
  int rounds = quick ? 5 : 15;
  double one[64], two[64];
  for (int i = 0; i < rounds; i++) {
    double t0 = now_s();
    memcpy(d, s, n);
    one[i] = now_s() - t0;
    t0 = now_s();
    half_copy h = {d + n / 2, s + n / 2, n - n / 2};
    pthread_t th;
    bool started = pthread_create(&th, NULL, half_copy_main, &h) == 0;
    memcpy(d, s, n / 2);
    if (started)
      pthread_join(th, NULL);
    else
      half_copy_main(&h);
    two[i] = now_s() - t0;
  }
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "bytes", (double)n);
  cJSON_AddNumberToObject(o, "one_thread_gbps", (double)n / median(one, rounds) / 1e9);
  cJSON_AddNumberToObject(o, "two_threads_gbps", (double)n / median(two, rounds) / 1e9);
  cJSON_AddNumberToObject(o, "repeats", rounds);
  free(s);
  free(d);
  return o;
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

static double cjson_parse_round(const char *json, size_t len) {
  double t0 = now_s();
  cJSON *doc = cJSON_ParseWithLength(json, len);
  double t = now_s() - t0;
  if (doc == NULL) exit(1);
  cJSON_Delete(doc);
  return t;
}

/* A "kB" field of /proc/self/status (VmRSS, VmHWM), in bytes; -1 when unreadable. */
static double status_kb(const char *key) {
  char line[256];
  size_t n = strlen(key);
  double v = -1;
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL) return -1;
  while (fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, key, n) == 0 && line[n] == ':') v = strtod(line + n + 1, NULL) * 1024.0;
  fclose(f);
  return v;
}

/* Peak RSS growth of one parse + validate + lower + print, in a child whose high-water mark is
 * reset first (clear_refs 5), so the peak is this round's alone; -1 when it cannot be told. */
static double peak_growth(const char *json, size_t len, const vl_limits *lim) {
  int fd[2];
  if (pipe(fd) != 0) return -1;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    close(fd[0]);
    /* A forked child maps the file-backed pages it runs (our code, libc's) afresh as it touches
     * them, and they count in its RSS although no lowering allocates them: one lowering of the
     * smallest graph first, so the peak is the round's own memory. */
    size_t small_len;
    char *small = synthetic_graph(12, &small_len);
    lower_round(small, small_len, lim, true);
    free(small);
    FILE *f = fopen("/proc/self/clear_refs", "w");
    bool reset = f != NULL && fputs("5", f) >= 0;
    if (f != NULL) reset = fclose(f) == 0 && reset;
    double before = status_kb("VmRSS");
    lower_round(json, len, lim, true);
    double peak = status_kb("VmHWM");
    double grown = reset && before >= 0 && peak >= 0 ? peak - before : -1;
    ssize_t w = write(fd[1], &grown, sizeof grown);
    _exit(w == (ssize_t)sizeof grown ? 0 : 1);
  }
  close(fd[1]);
  double grown = -1;
  if (read(fd[0], &grown, sizeof grown) != (ssize_t)sizeof grown) grown = -1;
  close(fd[0]);
  int st;
  waitpid(pid, &st, 0);
  return grown;
}

static cJSON *bench_lower_one(long n, int repeats) {
  size_t len;
  char *json = synthetic_graph(n, &len);
  vl_limits lim;
  double io[16], low[16], pass[16], cj[16];
  uint32_t lowered_nodes = 0;
  vl_limits_default(&lim);
  double peak = peak_growth(json, len, &lim); /* first, before this size's rounds */
  for (int r = 0; r < repeats; r++) {
    cj[r] = cjson_parse_round(json, len);
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
  double cjson_ms = median(cj, repeats) * 1e3, lower_ms = median(low, repeats) * 1e3;
  cJSON_AddNumberToObject(o, "cjson_parse_ms", cjson_ms);
  cJSON_AddNumberToObject(o, "parse_rate_ratio", cjson_ms / lower_ms);
  cJSON_AddNumberToObject(o, "peak_bytes", peak);
  cJSON_AddNumberToObject(o, "peak_ratio", (peak + (double)len) / (double)len);
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

static const char usage[] =
    "usage: viewlower-bench [--quick] [--level L] [--copy-case NAME] [--no-copy] [--no-lower]\n"
    "                       [--split-copy] [--list-copy-cases] [--daemon SOCKET]\n"
    "                       [--no-plan | --plan-only]\n"
    "  --level L        copy kernels of level L (portable, sse2, ssse3, avx2, avx512); default:\n"
    "                   the machine's own (VL_COPY_LEVEL in the environment names one too)\n"
    "  --copy-case NAME only this copy case (and no lowering figures)\n"
    "  --no-copy        no copy figures; --no-lower: no lowering figures\n"
    "  --split-copy     the 64 MiB one-thread / two-thread figure even with --no-copy\n"
    "  --daemon SOCKET  also the \"daemon\" figures against the viewlowerd on SOCKET\n"
    "  --no-plan        no memory plan figures; --plan-only: only them (no copy, no lowering)\n";

int main(int argc, char **argv) {
  bool quick = false, lower = true, copy = true, split = false, plan = true;
  const char *only = NULL, *level_name = getenv("VL_COPY_LEVEL"), *daemon = NULL;
  vl_copy_level level = vl_copy_level_native();
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (strcmp(argv[i], "--no-lower") == 0) {
      lower = false;
    } else if (strcmp(argv[i], "--no-copy") == 0) {
      copy = false;
    } else if (strcmp(argv[i], "--no-plan") == 0) {
      plan = false;
    } else if (strcmp(argv[i], "--plan-only") == 0) {
      copy = lower = false;
    } else if (strcmp(argv[i], "--split-copy") == 0) {
      split = true;
    } else if (strcmp(argv[i], "--daemon") == 0 && i + 1 < argc) {
      daemon = argv[++i];
    } else if (strcmp(argv[i], "--level") == 0 && i + 1 < argc) {
      level_name = argv[++i];
    } else if (strcmp(argv[i], "--copy-case") == 0 && i + 1 < argc) {
      only = argv[++i];
      lower = false;
    } else if (strcmp(argv[i], "--list-copy-cases") == 0) {
      for (size_t c = 0; c < N_COPY_CASES; c++) puts(copy_cases[c].name);
      return 0;
    } else {
      fprintf(stderr, "%s", usage);
      return 64;
    }
  }
  if (level_name != NULL && level_name[0] != '\0') {
    if (!vl_copy_level_from_name(level_name, &level) || !vl_copy_level_supported(level)) {
      fprintf(stderr, "viewlower-bench: copy level \"%s\" is unknown or not run by this CPU\n",
              level_name);
      return 64;
    }
  }
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "copy_level", vl_copy_level_name(level));
  if (copy) cJSON_AddItemToObject(root, "copy", bench_copy(quick, only, level));
  if ((copy && only == NULL) || split)
    cJSON_AddItemToObject(root, "split_copy", bench_split_copy(quick));
  if (lower) cJSON_AddItemToObject(root, "lower", bench_lower(quick));
  if (daemon != NULL) cJSON_AddItemToObject(root, "daemon", vl_bench_daemon(daemon, quick));
  if (plan) cJSON_AddItemToObject(root, "plan", vl_bench_plan(quick));
  char *s = cJSON_Print(root);
  if (s == NULL) return 1;
  puts(s);
  free(s);
  cJSON_Delete(root);
  return 0;
}

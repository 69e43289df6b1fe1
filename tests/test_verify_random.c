/* test_verify_random.c - a seeded property test of the core promise: under policy safe,
 * lowering never changes a value the program computes.
 *
 * Each case generates a small random graph (docs/format.md §2) of 24-element float32 tensors mixing
 * view_copy, dim-order clones, permutes and writes (add_, copy_, add and view_copy with out=), then
 * runs vl_verify on it: under safe (remove_view_copy true and false, every other case with a
 * memory plan) every output must be equal bit for bit; under legacy some generated graph must mismatch, so the generator is known to reach
 * the cases where aliasing is wrong. A failure prints the case seed and the whole graph JSON;
 * VL_VERIFY_RANDOM_SEED=<seed> reruns that one case alone, VL_VERIFY_RANDOM_CASES=<n> runs n
 * cases instead of the build's count (tests/budget.h; VL_TEST_CASE_PERCENT scales it). */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "budget.h"

#include "viewlower/graph.h"
#include "viewlower/interp.h"
#include "viewlower/layout.h"
#include "viewlower/lower.h"

/* Cases in the optimised build (about 9 s on one core); tests/budget.h sizes them for the build
 * (a fifth under the sanitizers, where a case costs about 9 times as much). */
#define CASES 100000

#define FIRST_SEED UINT64_C(20240601)
#define NUMEL 24
#define MAX_RANK 4
#define MAX_FACTS 128
#define MAX_TENSORS 16
#define JSON_MAX 8192

/* ---- seeded randomness -------------------------------------------------------------------- */

typedef struct {
  uint64_t s;
} rng;

static uint64_t rng_next(rng *r) { /* splitmix64 */
  uint64_t z = (r->s += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
static int rng_int(rng *r, int lo, int hi) {
  return lo + (int)(rng_next(r) % (uint64_t)(hi - lo + 1));
}

/* True with probability pct / 100. */
static bool rng_pct(rng *r, int pct) {
  return rng_int(r, 0, 99) < pct;
}

static void rng_shuffle(rng *r, int *v, int n) {
  for (int i = n - 1; i > 0; i--) {
    int j = rng_int(r, 0, i);
    int t = v[i];
    v[i] = v[j];
    v[j] = t;
  }
}

/* ---- shapes: ordered factorizations of 24 into 1..4 factors ------------------------------- */

typedef struct {
  int rank;
  int dims[MAX_RANK];
} shape;

typedef struct {
  shape plain[MAX_FACTS]; /* no size-1 dims */
  int n_plain;
  shape ones[MAX_FACTS]; /* at least one size-1 dim */
  int n_ones;
} fact_table;

static fact_table facts;

static void facts_rec(int rem, shape *cur, bool has_one) {
  if (cur->rank >= 1 && rem == 1) {
    if (has_one) {
      assert_true(facts.n_ones < MAX_FACTS);
      facts.ones[facts.n_ones++] = *cur;
    } else {
      assert_true(facts.n_plain < MAX_FACTS);
      facts.plain[facts.n_plain++] = *cur;
    }
  }
  if (cur->rank == MAX_RANK) return;
  for (int f = 1; f <= rem; f++) {
    if (rem % f != 0) continue;
    cur->dims[cur->rank++] = f;
    facts_rec(rem / f, cur, has_one || f == 1);
    cur->rank--;
  }
}

static void facts_init(void) {
  shape cur = {0, {0}};
  facts.n_plain = facts.n_ones = 0;
  facts_rec(NUMEL, &cur, false);
}

/* A random shape of 24 elements; one in four has size-1 dims. */
static shape random_shape(rng *r) {
  if (rng_pct(r, 25)) return facts.ones[rng_int(r, 0, facts.n_ones - 1)];
  return facts.plain[rng_int(r, 0, facts.n_plain - 1)];
}

/* The identity half the time, else a random permutation. */
static void random_order(rng *r, int rank, int *order) {
  for (int i = 0; i < rank; i++) order[i] = i;
  if (rng_pct(r, 50)) rng_shuffle(r, order, rank);
}

/* ---- graph text ---------------------------------------------------------------------------- */

typedef struct {
  char *buf;
  size_t len;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(t->buf + t->len, JSON_MAX - t->len, fmt, ap);
  va_end(ap);
  assert_true(n >= 0 && (size_t)n < JSON_MAX - t->len);
  t->len += (size_t)n;
}

static void put_ints(text *t, const int *v, int n) {
  put(t, "[");
  for (int i = 0; i < n; i++) put(t, "%s%d", i ? "," : "", v[i]);
  put(t, "]");
}

typedef struct {
  char name[16];
  shape s;
  int order[MAX_RANK];
} tensor_ref;

static void put_val(text *t, const shape *s, const int *order) {
  put(t, ",\"val\":{\"dtype\":\"float32\",\"shape\":");
  put_ints(t, s->dims, s->rank);
  put(t, ",\"dim_order\":");
  put_ints(t, order, s->rank);
  put(t, "}}");
}

static bool same_shape(const shape *a, const shape *b) {
  return a->rank == b->rank && memcmp(a->dims, b->dims, (size_t)a->rank * sizeof a->dims[0]) == 0;
}

/* A random tensor other than `not` (may be NULL) with t's shape, or NULL when there is none. */
static const tensor_ref *pick_same_shape(rng *r, const tensor_ref *ts, int n, const tensor_ref *t,
                                         const tensor_ref * not ) {
  const tensor_ref *cand[MAX_TENSORS];
  int k = 0;
  for (int i = 0; i < n; i++)
    if (same_shape(&ts[i].s, &t->s) && &ts[i] != not ) cand[k++] = &ts[i];
  return k ? cand[rng_int(r, 0, k - 1)] : NULL;
}

static void call_head(text *t, const char *name, const char *target) {
  put(t, ",{\"name\":\"%s\",\"op\":\"call_function\",\"target\":\"%s\"", name, target);
}

/* Appends one call node on a random tensor; false when the chosen kind has no partner. */
static bool gen_node(rng *r, text *t, tensor_ref *ts, int n, const char *name) {
  const tensor_ref *x = &ts[rng_int(r, 0, n - 1)];
  tensor_ref *res = &ts[n];
  const tensor_ref *u = NULL;
  int k = rng_int(r, 0, 99);
  snprintf(res->name, sizeof res->name, "%s", name);
  res->s = x->s;
  memcpy(res->order, x->order, sizeof res->order);
  if (k < 35) { /* view_copy to a random shape and layout, sometimes with a -1 */
    res->s = random_shape(r);
    random_order(r, res->s.rank, res->order);
    int size[MAX_RANK];
    memcpy(size, res->s.dims, sizeof size);
    if (rng_pct(r, 30)) size[rng_int(r, 0, res->s.rank - 1)] = -1;
    call_head(t, name, "aten.view_copy.default");
    put(t, ",\"args\":[\"%s\",", x->name);
    put_ints(t, size, res->s.rank);
    put(t, "]");
  } else if (k < 45) { /* layout change */
    random_order(r, x->s.rank, res->order);
    call_head(t, name, "dim_order_ops._clone_dim_order.default");
    put(t, ",\"args\":[\"%s\"],\"kwargs\":{\"dim_order\":", x->name);
    put_ints(t, res->order, x->s.rank);
    put(t, "}");
  } else if (k < 55) {
    int perm[MAX_RANK];
    for (int i = 0; i < x->s.rank; i++) perm[i] = i;
    rng_shuffle(r, perm, x->s.rank);
    for (int i = 0; i < x->s.rank; i++) res->s.dims[i] = x->s.dims[perm[i]];
    random_order(r, x->s.rank, res->order);
    call_head(t, name, "aten.permute_copy.default");
    put(t, ",\"args\":[\"%s\",", x->name);
    put_ints(t, perm, x->s.rank);
    put(t, "]");
  } else if (k < 70) { /* in place: writes x */
    call_head(t, name, "aten.add_.Tensor");
    put(t, ",\"args\":[\"%s\",%d]", x->name, rng_int(r, 1, 50));
  } else if (k < 80) { /* in place: writes x from u */
    if ((u = pick_same_shape(r, ts, n, x, x)) == NULL) return false;
    call_head(t, name, "aten.copy_.default");
    put(t, ",\"args\":[\"%s\",\"%s\"]", x->name, u->name);
  } else if (k < 90) { /* fresh output */
    u = pick_same_shape(r, ts, n, x, NULL);
    random_order(r, x->s.rank, res->order);
    call_head(t, name, "aten.add.Tensor");
    put(t, ",\"args\":[\"%s\",\"%s\"]", x->name, u->name);
  } else if (rng_pct(r, 50)) { /* view_copy of another tensor with out=: writes x */
    const tensor_ref *w = &ts[rng_int(r, 0, n - 1)];
    if (w == x) return false;
    call_head(t, name, "aten.view_copy.default");
    put(t, ",\"args\":[\"%s\",", w->name);
    put_ints(t, x->s.dims, x->s.rank);
    put(t, "],\"kwargs\":{\"out\":\"%s\"}", x->name);
  } else { /* out=: writes x */
    if ((u = pick_same_shape(r, ts, n, x, x)) == NULL) return false;
    call_head(t, name, "aten.add.Tensor");
    put(t, ",\"args\":[\"%s\",1],\"kwargs\":{\"out\":\"%s\"}", u->name, x->name);
  }
  put_val(t, &res->s, res->order);
  return true;
}

/* The graph of one seed, as JSON text in buf (JSON_MAX bytes). */
static void gen_graph(uint64_t seed, char *buf) {
  rng r = {seed};
  text t = {buf, 0};
  tensor_ref ts[MAX_TENSORS];
  int n = 0;
  put(&t, "{\"format\":\"viewlower.graph\",\"version\":1,\"nodes\":[");
  for (int i = 0, np = rng_int(&r, 1, 2); i < np; i++, n++) {
    snprintf(ts[n].name, sizeof ts[n].name, "p%d", i);
    ts[n].s = random_shape(&r);
    random_order(&r, ts[n].s.rank, ts[n].order);
    put(&t, "%s{\"name\":\"%s\",\"op\":\"placeholder\"", i ? "," : "", ts[n].name);
    if (rng_pct(&r, 20)) put(&t, ",\"kind\":\"buffer\",\"mutated\":true");
    put_val(&t, &ts[n].s, ts[n].order);
  }
  for (int i = 0, nn = rng_int(&r, 2, 9); i < nn; i++) {
    char name[16];
    snprintf(name, sizeof name, "n%d", i);
    if (gen_node(&r, &t, ts, n, name)) n++;
  }
  int idx[MAX_TENSORS];
  for (int i = 0; i < n; i++) idx[i] = i;
  rng_shuffle(&r, idx, n);
  int n_out = rng_int(&r, 1, 3);
  put(&t, ",{\"name\":\"out\",\"op\":\"output\",\"args\":[");
  for (int i = 0; i < n_out && i < n; i++) put(&t, "%s\"%s\"", i ? "," : "", ts[idx[i]].name);
  put(&t, "]}]}");
}

/* ---- the property -------------------------------------------------------------------------- */

typedef struct {
  uint64_t cases;
  uint64_t replaced; /* safe, remove_view_copy true */
  uint64_t kept;
  uint64_t legacy_mismatches; /* graphs whose legacy lowering changed an output */
} tally;

/* Fails the test with the seed, the reason and the whole graph. cmocka cuts a failure message
 * at 1024 bytes, shorter than some graphs, so the graph goes to stderr in full first. */
static void fail_case(uint64_t seed, const char *json, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail_case(uint64_t seed, const char *json, const char *fmt, ...) {
  char why[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  fprintf(stderr, "seed %" PRIu64 ": %s\ngraph: %s\n", seed, why, json);
  fflush(stderr);
  fail_msg("seed %" PRIu64 ": %s (whole graph JSON above; rerun with VL_VERIFY_RANDOM_SEED=%" PRIu64
           ")",
           seed, why, seed);
}

static bool run_verify(const vl_graph *g, bool remove, vl_policy policy, uint64_t seed,
                       const char *json, vl_verify_result *r) {
  vl_lower_options o;
  vl_error err;
  vl_lower_options_default(&o);
  o.remove_view_copy = remove;
  o.policy = policy;
  /* Every other case also plans the lowered graph (alignments 1 to 128) and runs it in its
   * arena, so a plan that puts two live storages in the same bytes shows as a mismatch. */
  o.plan = policy == VL_POLICY_SAFE && seed % 2 == 1;
  o.plan_alignment = (int64_t)1 << (seed / 2 % 8);
  vl_status st = vl_verify(g, &o, NULL, seed, NULL, r, &err);
  if (st != VL_OK)
    fail_case(seed, json, "verify (%s, remove_view_copy %s) failed: %s: %s",
              policy == VL_POLICY_SAFE ? "safe" : "legacy", remove ? "true" : "false", err.path,
              err.message);
  return r->equal;
}

static void check_case(uint64_t seed, tally *tl) {
  char json[JSON_MAX];
  vl_graph *g = NULL;
  vl_error err;
  vl_verify_result r;
  gen_graph(seed, json);
  if (vl_graph_parse(json, strlen(json), NULL, &g, &err) != VL_OK)
    fail_case(seed, json, "generated graph rejected: %s: %s", err.path, err.message);
  for (int remove = 1; remove >= 0; remove--) {
    if (!run_verify(g, remove, VL_POLICY_SAFE, seed, json, &r)) {
      const vl_mismatch *m = &r.mismatches[0];
      float want = 0, got = 0;
      memcpy(&want, m->expected, sizeof want);
      memcpy(&got, m->actual, sizeof got);
      fail_case(seed, json,
                "safe lowering (remove_view_copy %s) changed output %" PRIu32 " (%s) at %" PRId64
                ": expected %g, got %g",
                remove ? "true" : "false", m->output, m->name, m->index, (double)want, (double)got);
    }
    if (remove) {
      tl->replaced += r.report.replaced;
      tl->kept += r.report.kept;
    }
    vl_verify_result_clear(&r);
  }
  if (!run_verify(g, true, VL_POLICY_LEGACY, seed, json, &r)) tl->legacy_mismatches++;
  vl_verify_result_clear(&r);
  vl_graph_free(g);
  tl->cases++;
}

static void safe_lowering_keeps_every_value_of_random_graphs(void **state) {
  (void)state;
  tally tl = {0, 0, 0, 0};
  const char *one = getenv("VL_VERIFY_RANDOM_SEED");
  facts_init();
  if (one != NULL && *one != '\0') {
    uint64_t seed = strtoull(one, NULL, 0);
    char json[JSON_MAX];
    gen_graph(seed, json);
    printf("seed %" PRIu64 ": %s\n", seed, json);
    check_case(seed, &tl);
    return;
  }
  const char *cases = getenv("VL_VERIFY_RANDOM_CASES");
  uint64_t n = cases != NULL && *cases != '\0' ? strtoull(cases, NULL, 0) : vl_test_cases(CASES);
  for (uint64_t i = 0; i < n; i++) check_case(FIRST_SEED + i, &tl);
  printf("%" PRIu64 " graphs: %" PRIu64 " view_copy replaced, %" PRIu64 " kept (safe); %" PRIu64
         " legacy mismatches\n",
         tl.cases, tl.replaced, tl.kept, tl.legacy_mismatches);
  /* Not vacuous: both decisions were taken, and legacy shows the generator reaches wrong aliases.
   */
  assert_true(tl.replaced > 0);
  assert_true(tl.kept > 0);
  assert_true(tl.legacy_mismatches > 0);
}


/* ---- Chains of every layout-only op, with writes mixed in ---------------------------------- */

/* Graphs of small tensors of any shape (numel changes through slices, selects, splits and
 * as_strided) built from every layout-only op, elementwise ops and in-place writes; each
 * runs through vl_verify with fold on and off (both must be equal), through lower twice (the
 * second lowering must print the same graph) and the report's counters must add up. The
 * decisions over all cases must include every kind: replaced with and without an offset, kept
 * for each reason the generator can reach, merged, removed dead. */

/* In the optimised build (about 4.5 s); sized by tests/budget.h like CASES. */
#define FOLD_CASES 20000
#define FOLD_FIRST_SEED UINT64_C(20261201)
#define FOLD_TENSORS 24

typedef struct {
  char name[16];
  vl_desc d; /* shape only (rank, shape) */
  int order[VL_MAX_RANK];
  bool multi; /* a split producer: not a tensor to read */
} fref;

static int64_t fnumel(const vl_desc *d) {
  int64_t n = 1;
  for (uint8_t i = 0; i < d->rank; i++) n *= d->shape[i];
  return n;
}

static void put_i64s(text *t, const int64_t *v, int n) {
  put(t, "[");
  for (int i = 0; i < n; i++) put(t, "%s%" PRId64, i ? "," : "", v[i]);
  put(t, "]");
}

static void put_fval(text *t, const vl_desc *d, const int *order) {
  int64_t o[VL_MAX_RANK];
  for (int i = 0; i < d->rank; i++) o[i] = order[i];
  put(t, "{\"dtype\":\"float32\",\"shape\":");
  put_i64s(t, d->shape, d->rank);
  put(t, ",\"dim_order\":");
  put_i64s(t, o, d->rank);
  put(t, "}");
}

/* A random shape of numel elements in 1..4 dims. */
static void random_factor(rng *r, int64_t numel, vl_desc *d) {
  int rank = rng_int(r, 1, 4);
  d->rank = (uint8_t)rank;
  for (int i = 0; i < rank; i++) d->shape[i] = 1;
  int64_t rem = numel;
  for (int64_t f = 2; rem > 1; f++) {
    while (rem % f == 0) {
      d->shape[rng_int(r, 0, rank - 1)] *= f;
      rem /= f;
    }
  }
}

static void forder(rng *r, int rank, int *order) {
  random_order(r, rank, order);
}

static const fref *pick_tensor(rng *r, const fref *ts, int n) {
  for (int tries = 0; tries < 32; tries++) {
    const fref *x = &ts[rng_int(r, 0, n - 1)];
    if (!x->multi) return x;
  }
  return NULL;
}

static const fref *pick_like(rng *r, const fref *ts, int n, const fref *x, const fref *not_this) {
  const fref *cand[FOLD_TENSORS];
  int k = 0;
  for (int i = 0; i < n; i++)
    if (!ts[i].multi && &ts[i] != not_this && ts[i].d.rank == x->d.rank &&
        memcmp(ts[i].d.shape, x->d.shape, x->d.rank * sizeof x->d.shape[0]) == 0)
      cand[k++] = &ts[i];
  return k ? cand[rng_int(r, 0, k - 1)] : NULL;
}

/* One layout-only op of x into res (its shape through the layout module's map); false when the
 * chosen op does not apply to x. */
static bool gen_layout_op(rng *r, text *t, const fref *x, fref *res) {
  vl_desc in = x->d;
  int rank = x->d.rank, k = rng_int(r, 0, 13);
  int64_t a = rng_int(r, -rank, rank - 1), b = rng_int(r, -rank, rank - 1);
  const char *name = res->name;
  if (k == 0 || k == 1) {
    random_factor(r, fnumel(&in), &res->d);
    call_head(t, name, k == 0 ? "aten.view_copy.default" : "aten._reshape_alias_copy.default");
    put(t, ",\"args\":[\"%s\",", x->name);
    put_i64s(t, res->d.shape, res->d.rank);
    if (k == 1) {
      int64_t st[VL_MAX_RANK];
      vl_layout_default_strides(res->d.rank, res->d.shape, st);
      put(t, ",");
      put_i64s(t, st, res->d.rank);
    }
    put(t, "]");
  } else if (k == 2) {
    int64_t perm[VL_MAX_RANK];
    int p[VL_MAX_RANK];
    for (int i = 0; i < rank; i++) p[i] = i;
    rng_shuffle(r, p, rank);
    for (int i = 0; i < rank; i++) perm[i] = p[i];
    if (!vl_desc_permute(&in, perm, (size_t)rank, &res->d)) return false;
    call_head(t, name, "aten.permute_copy.default");
    put(t, ",\"args\":[\"%s\",", x->name);
    put_i64s(t, perm, rank);
    put(t, "]");
  } else if (k == 3) {
    if (!vl_desc_transpose(&in, a, b, &res->d)) return false;
    call_head(t, name, "aten.transpose_copy.int");
    put(t, ",\"args\":[\"%s\",%" PRId64 ",%" PRId64 "]", x->name, a, b);
  } else if (k == 4) {
    if (!vl_desc_t(&in, &res->d)) return false;
    call_head(t, name, "aten.t_copy.default");
    put(t, ",\"args\":[\"%s\"]", x->name);
  } else if (k == 5) {
    bool all = rng_pct(r, 50);
    if (!vl_desc_squeeze(&in, all ? NULL : &a, all ? 0 : 1, &res->d) || res->d.rank == 0)
      return false;
    call_head(t, name, all ? "aten.squeeze_copy.default" : "aten.squeeze_copy.dim");
    if (all) put(t, ",\"args\":[\"%s\"]", x->name);
    else put(t, ",\"args\":[\"%s\",%" PRId64 "]", x->name, a);
  } else if (k == 6) {
    int64_t d = rng_int(r, -rank - 1, rank);
    if (rank >= 4 || !vl_desc_unsqueeze(&in, d, &res->d)) return false;
    call_head(t, name, "aten.unsqueeze_copy.default");
    put(t, ",\"args\":[\"%s\",%" PRId64 "]", x->name, d);
  } else if (k == 7) {
    res->d = in;
    call_head(t, name, "aten.alias_copy.default");
    put(t, ",\"args\":[\"%s\"]", x->name);
  } else if (k == 8) {
    int64_t size = in.shape[a < 0 ? a + rank : a];
    int64_t start = rng_int(r, -(int)size, (int)size - 1), step = rng_int(r, 1, 2);
    int64_t end = rng_pct(r, 40) ? INT64_MAX : rng_int(r, -(int)size, (int)size + 1);
    if (!vl_desc_slice(&in, a, &start, &end, step, &res->d) || fnumel(&res->d) == 0) return false;
    call_head(t, name, "aten.slice_copy.Tensor");
    put(t, ",\"args\":[\"%s\",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "]", x->name, a, start,
        end, step);
  } else if (k == 9) {
    int64_t size = in.shape[a < 0 ? a + rank : a], idx = rng_int(r, -(int)size, (int)size - 1);
    if (rank < 2 || !vl_desc_select(&in, a, idx, &res->d)) return false;
    call_head(t, name, "aten.select_copy.int");
    put(t, ",\"args\":[\"%s\",%" PRId64 ",%" PRId64 "]", x->name, a, idx);
  } else if (k == 10 || k == 11) {
    res->d = in;
    forder(r, rank, res->order);
    call_head(t, name, k == 10 ? "dim_order_ops._clone_dim_order.default"
                               : "dim_order_ops._to_dim_order_copy.default");
    int64_t o[VL_MAX_RANK];
    for (int i = 0; i < rank; i++) o[i] = res->order[i];
    put(t, ",\"args\":[\"%s\"],\"kwargs\":{\"dim_order\":", x->name);
    put_i64s(t, o, rank);
    put(t, "}");
    put(t, ",\"val\":");
    put_fval(t, &res->d, res->order);
    put(t, "}");
    return true;
  } else {
    /* as_strided over x's buffer (numel elements in x's physical order), inside it. */
    int64_t size[3], stride[3], numel = fnumel(&in), last = 0;
    int sr = rng_int(r, 1, 3);
    for (int i = 0; i < sr; i++) {
      size[i] = rng_int(r, 1, 3);
      stride[i] = rng_int(r, 0, 6);
      last += (size[i] - 1) * stride[i];
    }
    int64_t off = last < numel ? rng_int(r, 0, (int)(numel - 1 - last)) : 0;
    if (last >= numel) return false;
    vl_desc_as_strided(&in, (uint8_t)sr, size, stride, off, &res->d);
    call_head(t, name, "aten.as_strided_copy.default");
    put(t, ",\"args\":[\"%s\",", x->name);
    put_i64s(t, size, sr);
    put(t, ",");
    put_i64s(t, stride, sr);
    put(t, ",%" PRId64 "]", off);
  }
  forder(r, res->d.rank, res->order);
  put(t, ",\"val\":");
  put_fval(t, &res->d, res->order);
  put(t, "}");
  return true;
}

/* A split (split_copy, split_with_sizes_copy or unbind_copy) of x and getitems of some of its
 * outputs; returns the tensors added (the producer first, marked multi). */
static int gen_split(rng *r, text *t, const fref *x, fref *res, int room, const char *name_in) {
  char name[8];
  snprintf(name, sizeof name, "%.7s", name_in);
  int rank = x->d.rank, kind = rng_int(r, 0, 2);
  int64_t dim = rng_int(r, -rank, rank - 1), d = dim < 0 ? dim + rank : dim;
  int64_t size = x->d.shape[d], chunk = rng_int(r, 1, 3), sizes[8];
  int outs = 0;
  vl_desc parts[8];
  if (kind == 2 && rank < 2) return 0;
  if (kind == 0) {
    for (int64_t s0 = 0; s0 < size && outs < 8; s0 += chunk) {
      int64_t e = s0 + chunk;
      vl_desc_slice(&x->d, d, &s0, &e, 1, &parts[outs++]);
    }
  } else if (kind == 1) {
    int64_t s0 = 0;
    while (s0 < size && outs < 8) {
      sizes[outs] = rng_int(r, 1, (int)(size - s0));
      int64_t e = s0 + sizes[outs];
      vl_desc_slice(&x->d, d, &s0, &e, 1, &parts[outs++]);
      s0 = e;
    }
    if (s0 != size) return 0;
  } else {
    if (size > 8) return 0;
    for (int64_t i = 0; i < size; i++) vl_desc_select(&x->d, d, i, &parts[outs++]);
  }
  if (outs == 0 || room < 2) return 0;
  static const char *const targets[] = {"aten.split_copy.Tensor",
                                        "aten.split_with_sizes_copy.default",
                                        "aten.unbind_copy.int"};
  snprintf(res[0].name, sizeof res[0].name, "%s", name);
  res[0].multi = true;
  call_head(t, name, targets[kind]);
  put(t, ",\"args\":[\"%s\",", x->name);
  if (kind == 0) put(t, "%" PRId64 ",%" PRId64 "]", chunk, dim);
  if (kind == 1) {
    put_i64s(t, sizes, outs);
    put(t, ",%" PRId64 "]", dim);
  }
  if (kind == 2) put(t, "%" PRId64 "]", dim);
  int dflt[VL_MAX_RANK] = {0, 1, 2, 3};
  put(t, ",\"vals\":[");
  for (int i = 0; i < outs; i++) {
    if (i) put(t, ",");
    put_fval(t, &parts[i], dflt);
  }
  put(t, "]}");
  int added = 1;
  for (int i = 0; i < outs && added < room; i++) {
    if (!rng_pct(r, 60)) continue;
    fref *g = &res[added++];
    snprintf(g->name, sizeof g->name, "%s_%u", name, (unsigned)i % 10u);
    g->d = parts[i];
    g->multi = false;
    memcpy(g->order, dflt, sizeof dflt);
    call_head(t, g->name, "operator.getitem");
    put(t, ",\"args\":[\"%s\",%d],\"val\":", name, i);
    put_fval(t, &g->d, g->order);
    put(t, "}");
  }
  return added;
}

/* A write or an elementwise op on x: add_, copy_, relu_, add with out=, add, relu. */
static bool gen_compute(rng *r, text *t, const fref *ts, int n, const fref *x, fref *res) {
  int k = rng_int(r, 0, 5);
  const fref *u = NULL;
  res->d = x->d;
  memcpy(res->order, x->order, sizeof res->order);
  if (k == 0) {
    call_head(t, res->name, "aten.add_.Tensor");
    put(t, ",\"args\":[\"%s\",%d]", x->name, rng_int(r, 1, 50));
  } else if (k == 1) {
    if ((u = pick_like(r, ts, n, x, x)) == NULL) return false;
    call_head(t, res->name, "aten.copy_.default");
    put(t, ",\"args\":[\"%s\",\"%s\"]", x->name, u->name);
  } else if (k == 2) {
    call_head(t, res->name, "aten.relu_.default");
    put(t, ",\"args\":[\"%s\"]", x->name);
  } else if (k == 3) {
    if ((u = pick_like(r, ts, n, x, x)) == NULL) return false;
    call_head(t, res->name, "aten.add.Tensor");
    put(t, ",\"args\":[\"%s\",2],\"kwargs\":{\"out\":\"%s\"}", u->name, x->name);
  } else {
    u = pick_like(r, ts, n, x, NULL);
    forder(r, x->d.rank, res->order);
    call_head(t, res->name, k == 4 ? "aten.add.Tensor" : "aten.mul.Tensor");
    put(t, ",\"args\":[\"%s\",\"%s\"]", x->name, u->name);
  }
  put(t, ",\"val\":");
  put_fval(t, &res->d, res->order);
  put(t, "}");
  return true;
}

static void gen_fold_graph(uint64_t seed, char *buf) {
  rng r = {seed};
  /* Which placeholders are parameters comes from a stream of its own, so the graphs
   * are the same as without them. */
  rng kinds = {seed ^ UINT64_C(0x5eed0fba5e1a7e55)};
  text t = {buf, 0};
  fref ts[FOLD_TENSORS];
  int n = 0;
  memset(ts, 0, sizeof ts);
  put(&t, "{\"format\":\"viewlower.graph\",\"version\":1,\"nodes\":[");
  for (int i = 0, np = rng_int(&r, 1, 2); i < np; i++, n++) {
    snprintf(ts[n].name, sizeof ts[n].name, "p%d", i);
    ts[n].d.rank = (uint8_t)rng_int(&r, 1, 4);
    for (int k = 0; k < ts[n].d.rank; k++) ts[n].d.shape[k] = rng_int(&r, 1, 4);
    forder(&r, ts[n].d.rank, ts[n].order);
    put(&t, "%s{\"name\":\"%s\",\"op\":\"placeholder\"", i ? "," : "", ts[n].name);
    if (rng_pct(&r, 15)) {
      put(&t, ",\"kind\":\"buffer\",\"mutated\":true");
    } else if (rng_pct(&kinds, 60)) {
      put(&t, ",\"kind\":\"%s\"", rng_pct(&kinds, 80) ? "parameter" : "constant");
    }
    put(&t, ",\"val\":");
    put_fval(&t, &ts[n].d, ts[n].order);
    put(&t, "}");
  }
  for (int i = 0, nn = rng_int(&r, 3, 12); i < nn && n < FOLD_TENSORS - 1; i++) {
    const fref *x = pick_tensor(&r, ts, n);
    if (x == NULL) break;
    /* Chains: most ops read the newest tensor. */
    for (int j = n - 1; j >= 0 && rng_pct(&r, 60); j--)
      if (!ts[j].multi) {
        x = &ts[j];
        break;
      }
    fref *res = &ts[n];
    memset(res, 0, sizeof *res);
    snprintf(res->name, sizeof res->name, "n%d", i);
    int k = rng_int(&r, 0, 99);
    if (k < 62) n += gen_layout_op(&r, &t, x, res);
    else if (k < 70) n += gen_split(&r, &t, x, res, FOLD_TENSORS - 1 - n, res->name);
    else n += gen_compute(&r, &t, ts, n, x, res);
  }
  int idx[FOLD_TENSORS], m = 0;
  for (int i = 0; i < n; i++)
    if (!ts[i].multi) idx[m++] = i;
  rng_shuffle(&r, idx, m);
  put(&t, ",{\"name\":\"out\",\"op\":\"output\",\"args\":[");
  for (int i = 0, n_out = rng_int(&r, 1, 3); i < n_out && i < m; i++)
    put(&t, "%s\"%s\"", i ? "," : "", ts[idx[i]].name);
  put(&t, "]}]}");
}

typedef struct {
  uint64_t cases, replaced, replaced_at_offset, merged, removed_dead;
  uint64_t kept[VL_REASON_COUNT];
  uint64_t relaid, relaid_aliased; /* parameters relaid, their readers aliased */
} fold_tally;

static void tally_report(fold_tally *tl, const vl_report *r) {
  for (uint32_t i = 0; i < r->n_decisions; i++) {
    const vl_decision *d = &r->decisions[i];
    if (d->replaced) {
      tl->replaced += d->offset == 0;
      tl->replaced_at_offset += d->offset != 0;
    } else if (d->merged) {
      tl->merged++;
    } else {
      for (int k = 0; k < VL_REASON_COUNT; k++) tl->kept[k] += (d->reasons >> k) & 1u;
    }
  }
  tl->removed_dead += r->removed_dead;
  tl->relaid += r->params_relaid;
  for (uint32_t i = 0; i < r->params_relaid; i++) tl->relaid_aliased += r->param_layouts[i].aliased;
}

/* lower(lower(g)) prints as lower(g), and the counters of both add up. */
static void check_lower_twice(uint64_t seed, const char *json, const vl_graph *g) {
  vl_graph *a = NULL, *b = NULL;
  vl_error err;
  vl_report r1, r2;
  vl_lower_options o;
  vl_lower_options_default(&o);
  if (vl_graph_clone(g, &a, &err) != VL_OK || vl_lower(a, &o, &r1, &err) != VL_OK)
    fail_case(seed, json, "lower failed: %s", err.message);
  char *once = vl_graph_print(a);
  if (vl_graph_parse(once, strlen(once), NULL, &b, &err) != VL_OK)
    fail_case(seed, json, "the lowered graph is invalid: %s: %s\nlowered: %s", err.path,
              err.message, once);
  if (vl_lower(b, &o, &r2, &err) != VL_OK) fail_case(seed, json, "lower again failed");
  char *twice = vl_graph_print(b);
  if (strcmp(once, twice) != 0)
    fail_case(seed, json, "lowering is not idempotent:\nonce:  %s\ntwice: %s", once, twice);
  const vl_report *rs[2] = {&r1, &r2};
  for (int k = 0; k < 2; k++)
    if (rs[k]->replaced + rs[k]->kept + rs[k]->merged + rs[k]->removed_dead !=
            rs[k]->layout_copy_nodes ||
        rs[k]->n_decisions != rs[k]->replaced + rs[k]->kept + rs[k]->merged)
      fail_case(seed, json, "report counters do not add up (lowering %d)", k + 1);
  free(once);
  free(twice);
  vl_report_clear(&r1);
  vl_report_clear(&r2);
  vl_graph_free(a);
  vl_graph_free(b);
}

static void check_fold_case(uint64_t seed, fold_tally *tl) {
  char json[JSON_MAX];
  vl_graph *g = NULL;
  vl_error err;
  gen_fold_graph(seed, json);
  if (vl_graph_parse(json, strlen(json), NULL, &g, &err) != VL_OK)
    fail_case(seed, json, "generated graph rejected: %s: %s", err.path, err.message);
  for (int fold = 1; fold >= 0; fold--) {
    vl_lower_options o;
    vl_verify_result r;
    vl_lower_options_default(&o);
    o.fold = fold;
    if (vl_verify(g, &o, NULL, seed, NULL, &r, &err) != VL_OK)
      fail_case(seed, json, "verify (fold %d) failed: %s: %s", fold, err.path, err.message);
    if (!r.equal)
      fail_case(seed, json, "safe lowering (fold %d) changed output %" PRIu32 " (%s) at %" PRId64,
                fold, r.mismatches[0].output, r.mismatches[0].name, r.mismatches[0].index);
    if (fold) tally_report(tl, &r.report);
    vl_verify_result_clear(&r);
  }
  check_lower_twice(seed, json, g);
  vl_graph_free(g);
  tl->cases++;
}

static void folding_keeps_every_value_of_random_layout_chains(void **state) {
  (void)state;
  fold_tally tl;
  memset(&tl, 0, sizeof tl);
  const char *one = getenv("VL_VERIFY_FOLD_SEED");
  if (one != NULL && *one != '\0') {
    char json[JSON_MAX];
    gen_fold_graph(strtoull(one, NULL, 0), json);
    printf("seed %s: %s\n", one, json);
    check_fold_case(strtoull(one, NULL, 0), &tl);
    return;
  }
  const char *cases = getenv("VL_VERIFY_RANDOM_CASES");
  uint64_t n = cases != NULL && *cases != '\0' ? strtoull(cases, NULL, 0) / 5 : vl_test_cases(FOLD_CASES);
  for (uint64_t i = 0; i < n; i++) check_fold_case(FOLD_FIRST_SEED + i, &tl);
  printf("%" PRIu64 " layout chains: %" PRIu64 " replaced, %" PRIu64 " replaced at an offset, %" PRIu64
         " merged, %" PRIu64 " removed dead; kept by reason:",
         tl.cases, tl.replaced, tl.replaced_at_offset, tl.merged, tl.removed_dead);
  for (int k = 0; k < VL_REASON_COUNT; k++)
    printf(" %s %" PRIu64, vl_reason_name((vl_reason)k), tl.kept[k]);
  printf("; %" PRIu64 " parameters relaid, %" PRIu64 " of their readers aliased\n", tl.relaid,
         tl.relaid_aliased);
  /* Not vacuous: every kind of decision the generator can reach was taken. */
  assert_true(tl.replaced > 0 && tl.replaced_at_offset > 0 && tl.merged > 0 && tl.removed_dead > 0);
  /* A parameter is relaid only for a reader that then aliases it. */
  assert_true(tl.relaid > 0 && tl.relaid_aliased >= tl.relaid);
  for (int k = 0; k < VL_REASON_COUNT; k++) {
    if (k == VL_REASON_DISABLED || k == VL_REASON_DYNAMIC_SHAPE) continue; /* not generated */
    if (tl.kept[k] == 0) fail_msg("no node was kept for %s", vl_reason_name((vl_reason)k));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(safe_lowering_keeps_every_value_of_random_graphs),
      cmocka_unit_test(folding_keeps_every_value_of_random_layout_chains),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

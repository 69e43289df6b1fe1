/* fuzz_graph.c - libFuzzer harness: graph JSON -> vl_graph_parse -> vl_graph_print -> vl_lower
 * -> vl_graph_print.
 *
 * Oracles: a parsed graph prints to JSON that parses again to an equal graph, every literal
 * bit for bit (docs/format.md §2, "Literals are exact"), and prints identically (before and after
 * lowering); the report's counts add up (docs/format.md §3: replaced + kept + removed_dead =
 * view_copy_nodes, one decision per remaining view_copy); lowering a lowered graph changes
 * nothing; every error is well formed; a memory plan's figures hold together and its print
 * (which parsing checks: no two buffers live at once overlap) reads back to them. The lowering
 * options are picked from a hash of the input, so every policy is exercised, a third of the
 * inputs planned. A text that is JSON gets the answer its tree gets from
 * vl_graph_from_json, as the service answers a raw graph (vl__graph_text_bounds counting the
 * nodes over the text as the tree counts them). */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/json_util.h"
#include "fuzz.h"
#include "graph/graph_internal.h"
#include "viewlower/graph.h"
#include "viewlower/lower.h"
#include "viewlower/plan.h"

static uint32_t hash_bytes(const uint8_t *data, size_t size) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < size; i++) h = (h ^ data[i]) * 16777619u;
  return h;
}

static void options_from_hash(uint32_t h, vl_lower_options *o) {
  vl_lower_options_default(o);
  switch (h % 5) {
  case 2: o->policy = VL_POLICY_LEGACY; break;
  case 3: o->remove_view_copy = false; break;
  case 4: o->fold = false; break;
  default: break;
  }
  /* a third of the inputs are planned too, at an alignment of 1 to 4096 bytes */
  o->plan = (h >> 8) % 3 == 0;
  o->plan_alignment = (int64_t)1 << ((h >> 12) % 13);
}

static bool arg_equal(const vl_arg *a, const vl_arg *b) {
  if (a->kind != b->kind) return false;
  switch (a->kind) {
  case VL_ARG_NULL: return true;
  case VL_ARG_BOOL: return a->u.b == b->u.b;
  case VL_ARG_INT: return a->u.i == b->u.i;
  case VL_ARG_FLOAT: /* bit for bit, except that every NaN is spelled {"float": "nan"} */
    return memcmp(&a->u.f, &b->u.f, sizeof a->u.f) == 0 || (a->u.f != a->u.f && b->u.f != b->u.f);
  case VL_ARG_STRING: return strcmp(a->u.s, b->u.s) == 0;
  case VL_ARG_REF: return a->u.ref == b->u.ref;
  case VL_ARG_LIST: break;
  }
  if (a->count != b->count) return false;
  for (uint32_t i = 0; i < a->count; i++)
    if (!arg_equal(&a->u.items[i], &b->u.items[i])) return false;
  return true;
}

static bool str_equal(const char *a, const char *b) {
  return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static bool node_equal(const vl_node *a, const vl_node *b) {
  bool eq = strcmp(a->name, b->name) == 0 && a->op == b->op && str_equal(a->target, b->target) &&
            a->kind == b->kind && a->mutated == b->mutated && a->has_val == b->has_val &&
            (!a->has_val || vl_spec_equal(a->val, b->val)) && a->n_vals == b->n_vals &&
            a->n_args == b->n_args && a->n_kwargs == b->n_kwargs &&
            a->n_mutates == b->n_mutates && a->out == b->out && a->alias_of == b->alias_of;
  for (uint32_t i = 0; eq && i < a->n_vals; i++) eq = vl_spec_equal(&a->vals[i], &b->vals[i]);
  for (uint32_t i = 0; eq && i < a->n_args; i++) eq = arg_equal(&a->args[i], &b->args[i]);
  for (uint32_t i = 0; eq && i < a->n_kwargs; i++)
    eq = strcmp(a->kwargs[i].key, b->kwargs[i].key) == 0 &&
         arg_equal(&a->kwargs[i].value, &b->kwargs[i].value);
  for (uint32_t i = 0; eq && i < a->n_mutates; i++) eq = a->mutates[i] == b->mutates[i];
  return eq;
}

/* Structural equality, literals bit for bit. */
static bool graph_equal(const vl_graph *a, const vl_graph *b) {
  if (!str_equal(a->name, b->name) || a->skip_dim_order != b->skip_dim_order ||
      a->n_nodes != b->n_nodes || a->output != b->output)
    return false;
  for (uint32_t i = 0; i < a->n_nodes; i++)
    if (!node_equal(&a->nodes[i], &b->nodes[i])) return false;
  return true;
}

/* Parses text (which must be valid) and returns its printed form; caller frees both. */
static char *reprint(const char *text, const vl_limits *lim, vl_graph **out) {
  vl_graph *g = NULL;
  vl_error err;
  vl_error_clear(&err);
  vl_status st = vl_graph_parse(text, strlen(text), lim, &g, &err);
  if (st != VL_OK)
    fprintf(stderr, "printed graph does not parse: %s: %s\n%s\n", err.path, err.message, text);
  FUZZ_CHECK(st == VL_OK);
  char *again = vl_graph_print(g);
  FUZZ_CHECK(again != NULL);
  *out = g;
  return again;
}

/* The print parses back to the same print; a clone prints the same too. */
static void check_print_round_trip(const vl_graph *g, const vl_limits *lim) {
  char *text = vl_graph_print(g);
  FUZZ_CHECK(text != NULL);
  FUZZ_CHECK(fuzz_utf8_valid(text));
  vl_graph *g2 = NULL;
  char *again = reprint(text, lim, &g2);
  FUZZ_CHECK(strcmp(text, again) == 0);
  FUZZ_CHECK(graph_equal(g, g2));
  vl_graph_free(g2);
  free(again);
  vl_error err;
  FUZZ_CHECK(vl_graph_clone(g, &g2, &err) == VL_OK);
  again = vl_graph_print(g2);
  FUZZ_CHECK(again != NULL && strcmp(text, again) == 0);
  vl_graph_free(g2);
  free(again);
  free(text);
}

static void check_report(const vl_graph *g, const vl_report *r) {
  /* docs/format.md §3: every layout-only node (every view_copy without fold) is accounted for
   * once. */
  FUZZ_CHECK(r->replaced + r->kept + r->merged + r->removed_dead == r->layout_copy_nodes);
  FUZZ_CHECK(r->n_decisions == r->replaced + r->kept + r->merged);
  FUZZ_CHECK(r->layout_copy_nodes >= r->view_copy_nodes && r->bytes_copied >= 0);
  FUZZ_CHECK(r->normalized <= r->view_copy_nodes);
  FUZZ_CHECK(r->bytes_saved >= 0);
  uint32_t replaced = 0;
  for (uint32_t i = 0; i < r->n_decisions; i++) {
    const vl_decision *d = &r->decisions[i];
    FUZZ_CHECK(d->node != NULL && d->base != NULL && d->message != NULL);
    /* A view is replaced exactly when no condition failed. */
    FUZZ_CHECK(d->replaced == (d->reasons == 0));
    FUZZ_CHECK(d->reasons < (1u << VL_REASON_COUNT));
    replaced += d->replaced;
  }
  FUZZ_CHECK(replaced == r->replaced);
  FUZZ_CHECK(g->output == g->n_nodes - 1);
}

/* A plan's figures hold together, and its printed form (which parsing checks: no two buffers
 * live at once overlap) reads back to the same figures. */
static void check_plan(const vl_report *r, const vl_lower_options *o, const char *lowered,
                       const vl_limits *lim) {
  const vl_plan_report *p = &r->plan;
  FUZZ_CHECK(p->present == o->plan);
  if (!o->plan) return;
  FUZZ_CHECK(p->alignment == o->plan_alignment);
  FUZZ_CHECK(p->lower_bound_bytes >= 0 && p->lower_bound_bytes <= p->naive_bytes);
  FUZZ_CHECK(p->arena_bytes >= p->lower_bound_bytes);
  FUZZ_CHECK(p->arena_bytes % p->alignment == 0 || p->arena_bytes == 0);
  FUZZ_CHECK(p->alignment != 1 || p->arena_bytes <= p->naive_bytes);
  vl_graph *g = NULL;
  char *again = reprint(lowered, lim, &g);
  FUZZ_CHECK(g->has_plan);
  vl_plan_report q;
  vl_error err;
  vl_error_clear(&err);
  FUZZ_CHECK(vl_plan_figures(g, &q, &err) == VL_OK);
  FUZZ_CHECK(q.arena_bytes == p->arena_bytes && q.lower_bound_bytes == p->lower_bound_bytes &&
             q.naive_bytes == p->naive_bytes && q.planned == p->planned &&
             q.alignment == p->alignment);
  free(again);
  vl_graph_free(g);
}

/* Lowering the lowered graph (reparsed from its print) must print the same text. */
static void check_idempotent(const char *lowered, const vl_lower_options *o, const vl_limits *lim) {
  vl_graph *g = NULL;
  char *again = reprint(lowered, lim, &g);
  FUZZ_CHECK(strcmp(lowered, again) == 0);
  vl_report r;
  memset(&r, 0, sizeof r);
  vl_error err;
  vl_error_clear(&err);
  vl_status st = vl_lower(g, o, &r, &err);
  if (st != VL_OK)
    fprintf(stderr, "lowering the lowered graph failed: %s: %s\n", err.path, err.message);
  FUZZ_CHECK(st == VL_OK);
  FUZZ_CHECK(r.replaced == 0 && r.removed_dead == 0 && r.normalized == 0);
  char *twice = vl_graph_print(g);
  FUZZ_CHECK(twice != NULL);
  if (strcmp(lowered, twice) != 0) fprintf(stderr, "once:  %s\ntwice: %s\n", lowered, twice);
  FUZZ_CHECK(strcmp(lowered, twice) == 0);
  free(twice);
  free(again);
  vl_report_clear(&r);
  vl_graph_free(g);
}

/* A text and its tree (when it is JSON) get the same answer: the same status, path and
 * message (vl_service_call promises this of a raw graph), or, when the tree has more nodes
 * than the limit, the tree's "more than" refusal, which it gives before any node is read. */
static void check_text_as_tree(const uint8_t *data, size_t size, const vl_limits *lim,
                               vl_status st, const vl_error *err) {
  if (memchr(data, '\0', size) != NULL) return; /* a raw graph is a C string: NUL-free */
  cJSON *tree = NULL;
  size_t at = 0;
  if (vl__json_parse_one((const char *)data, size, false, &tree, &at) != VL__JSON_OK) {
    FUZZ_CHECK(st != VL_OK); /* no JSON: the text parser refused it too */
    cJSON_Delete(tree);
    return;
  }
  vl_graph *g = NULL;
  vl_error e;
  vl_error_clear(&e);
  vl_status t = vl_graph_from_json(tree, lim, &g, &e);
  vl_graph_free(g);
  const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(tree, "nodes");
  bool over = cJSON_IsArray(nodes) && (uint32_t)cJSON_GetArraySize(nodes) > lim->max_nodes;
  cJSON_Delete(tree);
  /* the service's count of the nodes over the text, without a tree, as the tree counts them */
  vl_error b;
  vl_error_clear(&b);
  vl_status bounds = vl__graph_text_bounds((const char *)data, size, lim, &b);
  FUZZ_CHECK((bounds != VL_OK) == over);
  FUZZ_CHECK(!over || (bounds == VL_ERR_TOO_LARGE && strcmp(b.path, e.path) == 0 &&
                       strcmp(b.message, e.message) == 0));
  if (t == VL_ERR_NOMEM || st == VL_ERR_NOMEM) return;
  if (over) {
    FUZZ_CHECK(t == VL_ERR_TOO_LARGE && strcmp(e.path, "/nodes") == 0);
    return;
  }
  if (t != st || (st != VL_OK && (strcmp(e.path, err->path) != 0 ||
                                  strcmp(e.message, err->message) != 0))) {
    fprintf(stderr, "text: %d %s: %s\ntree: %d %s: %s\n", (int)st, err->path, err->message,
            (int)t, e.path, e.message);
  }
  FUZZ_CHECK(t == st);
  FUZZ_CHECK(st == VL_OK || (strcmp(e.path, err->path) == 0 &&
                             strcmp(e.message, err->message) == 0));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  vl_limits lim;
  fuzz_limits(&lim);
  vl_graph *g = NULL;
  vl_error err;
  vl_error_clear(&err);
  vl_status st = vl_graph_parse((const char *)data, size, &lim, &g, &err);
  check_text_as_tree(data, size, &lim, st, &err);
  if (st != VL_OK) {
    fuzz_check_error(st, &err);
    FUZZ_CHECK(g == NULL);
    return 0;
  }
  check_print_round_trip(g, &lim);
  vl_lower_options o;
  options_from_hash(hash_bytes(data, size), &o);
  vl_report r;
  memset(&r, 0, sizeof r);
  /* Lowering fails only for want of memory: every valid graph lowers. */
  st = vl_lower(g, &o, &r, &err);
  FUZZ_CHECK(st == VL_OK);
  check_report(g, &r);
  char *lowered = vl_graph_print(g);
  FUZZ_CHECK(lowered != NULL);
  check_plan(&r, &o, lowered, &lim);
  check_idempotent(lowered, &o, &lim);
  free(lowered);
  vl_report_clear(&r);
  vl_graph_free(g);
  return 0;
}

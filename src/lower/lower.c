/* lower.c - the lowering passes (docs/format.md §3) in order: normalize view_copy bases to their
 * root, remove dead view_copy nodes, and replace each remaining view_copy by memory.view when every
 * condition holds, recording every failed condition otherwise. All passes are linear.
 *
 * Normalization (policy safe) steps over a view_copy b only while b still holds what it copied:
 * not when b's own storage was written before this view_copy reads it (the root never saw that
 * write), nor when the root's storage was written after b was taken (b holds the older values).
 * Either way the composed reshape of the root would read other values than the copy chain. */
#include <stdlib.h>
#include <string.h>

#include "graph/alias.h"
#include "graph/graph_internal.h"
#include "lower/fold_ops.h"
#include "lower/lower_internal.h"
#include "viewlower/layout.h"

/* ---- pass 1: normalize ---- */

typedef struct {
  vl_alias *alias;
  uint32_t *last_write; /* per class: latest writer seen so far in the sweep */
  uint32_t w;
} sweep_ctx;

static void note_write(void *p, uint32_t ref) {
  sweep_ctx *s = p;
  s->last_write[vl__alias_class(s->alias, ref)] = s->w;
}

/* May the node being swept read r instead of view_copy b (b's base is r)? Not when b's storage
 * has been written so far (through b or an alias of it), nor when r's storage was written after
 * b was taken: either way b no longer holds r's current values. */
static bool may_skip(const sweep_ctx *s, vl_alias *a, uint32_t b, uint32_t r, bool safe) {
  if (!safe) return true;
  uint32_t wb = s->last_write[vl__alias_class(a, b)], wr = s->last_write[vl__alias_class(a, r)];
  return wb == VL_NO_NODE && (wr == VL_NO_NODE || wr < b);
}

static vl_status normalize(vl_graph *g, bool safe, vl_report *r) {
  vl_alias a;
  if (vl__alias_build(&a, g) != VL_OK) return VL_ERR_NOMEM;
  sweep_ctx s = {&a, malloc((g->n_nodes ? g->n_nodes : 1) * sizeof(uint32_t)), 0};
  if (s.last_write == NULL) {
    vl__alias_free(&a);
    return VL_ERR_NOMEM;
  }
  for (uint32_t i = 0; i < g->n_nodes; i++) s.last_write[i] = VL_NO_NODE;
  for (s.w = 0; s.w < g->n_nodes; s.w++) {
    vl_node *v = &g->nodes[s.w];
    /* A view_copy listing its base in mutates writes that node: it keeps reading it (mutates
     * names arguments), so the lowered graph stays valid and the write stays where it was. */
    if (vl__is_view_copy(v) && v->n_mutates == 0) {
      uint32_t base = v->args[0].u.ref, start = base;
      while (vl__is_view_copy(&g->nodes[base]) &&
             may_skip(&s, &a, base, g->nodes[base].args[0].u.ref, safe)) {
        base = g->nodes[base].args[0].u.ref;
      }
      if (base != start) {
        v->args[0].u.ref = base;
        r->normalized++;
      }
    }
    vl__node_for_each_write(v, note_write, &s);
  }
  free(s.last_write);
  vl__alias_free(&a);
  return vl_graph_index_users(g);
}

/* ---- pass 2: dead view_copy removal ---- */

typedef struct {
  uint32_t *users_left;
  uint32_t *seen; /* last node whose references were dropped, per referee */
  uint32_t node;
} drop_ctx;

static void drop_ref(void *p, uint32_t ref) {
  drop_ctx *d = p;
  if (d->seen[ref] == d->node) return; /* users count each user once */
  d->seen[ref] = d->node;
  d->users_left[ref]--;
}

/* May node i go when nothing reads it? Without fold: a view_copy. With fold: every layout-only
 * node (counted), and a split producer none of whose outputs is read (not counted). Never a node
 * that writes (kwargs.out, mutates): its write is read through the written storage, not through
 * its own result (docs/format.md §3). */
static bool removable(const vl_graph *g, uint32_t i, bool fold, bool *counts) {
  *counts = true;
  if (vl__node_writes(&g->nodes[i])) return false;
  if (!fold) return vl__is_view_copy(&g->nodes[i]);
  if (vl__fold_kind(g, i, NULL) != VL_FOLD_NONE) return true;
  *counts = false;
  return vl__fold_is_split(&g->nodes[i]);
}

static vl_status remove_dead(vl_graph *g, vl_report *r, bool fold) {
  uint32_t n = g->n_nodes;
  drop_ctx d = {malloc(n * sizeof(uint32_t)), malloc(n * sizeof(uint32_t)), 0};
  bool *dead = calloc(n, sizeof *dead);
  vl_status st = VL_ERR_NOMEM;
  if (d.users_left && d.seen && dead) {
    for (uint32_t i = 0; i < n; i++) {
      d.users_left[i] = g->nodes[i].n_users;
      d.seen[i] = VL_NO_NODE;
    }
    /* Backwards, so a view_copy whose only user was a dead view_copy goes too. */
    bool any = false, counts;
    for (uint32_t i = n; i-- > 0;) {
      if (d.users_left[i] != 0 || !removable(g, i, fold, &counts)) continue;
      dead[i] = any = true;
      if (counts) {
        r->removed_dead++;
        /* With fold, bytes_saved counts every layout-only node that no longer copies. */
        int64_t nbytes = 0;
        vl_spec_nbytes(g->nodes[i].val, &nbytes);
        if (fold) vl__bytes_add(&r->bytes_saved, nbytes);
      }
      d.node = i;
      vl__node_for_each_ref(&g->nodes[i], drop_ref, &d);
    }
    st = any ? vl__lower_compact(g, dead) : VL_OK;
  }
  free(d.users_left);
  free(d.seen);
  free(dead);
  return st;
}

/* ---- pass 3: replace ---- */

typedef struct {
  vl_graph *g;
  const vl_lower_options *opts;
  vl_report *r;
  vl_alias alias;
  uint32_t *storage; /* per class root: the class whose buffer it really uses */
  bool *is_output;   /* per node: listed in the output */
} replacer;

static uint32_t storage_of(replacer *x, uint32_t node) {
  vl_storage_view sv = {&x->alias, x->storage, x->is_output};
  return vl__storage_of(&sv, node);
}

static uint32_t failed_conditions(replacer *x, uint32_t v, lower_facts *f) {
  const vl_node *view = &x->g->nodes[v];
  uint32_t b = view->args[0].u.ref;
  const vl_node *base = &x->g->nodes[b];
  f->legacy = x->opts->policy == VL_POLICY_LEGACY;
  if (f->legacy) return x->is_output[v] ? 1u << VL_REASON_FEEDS_OUTPUT : 0;
  uint32_t reasons = 0;
  if (!vl_layout_view_keeps_offsets(base->val, view->val)) {
    if (!vl_layout_rule_contiguous(base->val)) reasons |= 1u << VL_REASON_BASE_LAYOUT;
    if (!vl_layout_rule_contiguous(view->val)) reasons |= 1u << VL_REASON_VIEW_LAYOUT;
  }
  vl_storage_view sv = {&x->alias, x->storage, x->is_output};
  return reasons | vl__storage_reasons(&sv, x->g, v, b, v, f);
}

static vl_status decide(replacer *x, uint32_t v) {
  vl_node *view = &x->g->nodes[v];
  lower_facts f = VL__FACTS_NONE;
  uint32_t reasons = failed_conditions(x, v, &f);
  f.owner = storage_of(x, view->args[0].u.ref);
  vl_decision *d = &x->r->decisions[x->r->n_decisions];
  vl_status st = vl__decision_init(d, x->g, v, reasons, &f);
  if (st != VL_OK) return st;
  x->r->n_decisions++;
  if (reasons != 0) {
    x->r->kept++;
    return VL_OK;
  }
  const char *target = vl__store_intern(x->g->store, "memory.view", 11);
  if (target == NULL) return VL_ERR_NOMEM;
  view->target = target;
  view->alias_of = f.owner;
  /* From here on the view shares its base's buffer: later decisions see it as an alias. */
  uint32_t vc = vl__alias_class(&x->alias, v);
  x->storage[vc] = f.owner;
  x->alias.is_output[f.owner] |= x->alias.is_output[vc];
  int64_t nbytes = 0;
  vl_spec_nbytes(view->val, &nbytes);
  x->r->replaced++;
  vl__bytes_add(&x->r->bytes_saved, nbytes);
  return VL_OK;
}

static vl_status replace(vl_graph *g, const vl_lower_options *opts, vl_report *r) {
  replacer x = {g, opts, r, {0}, NULL, NULL};
  uint32_t n = g->n_nodes, views = 0;
  for (uint32_t i = 0; i < n; i++) views += vl__is_view_copy(&g->nodes[i]);
  if (views == 0) return VL_OK;
  vl_status st = vl__alias_build(&x.alias, g);
  x.storage = malloc(n * sizeof *x.storage);
  x.is_output = calloc(n, sizeof *x.is_output);
  r->decisions = calloc(views, sizeof *r->decisions);
  if (st != VL_OK || !x.storage || !x.is_output || !r->decisions) st = VL_ERR_NOMEM;
  if (st == VL_OK) {
    for (uint32_t i = 0; i < n; i++) x.storage[i] = i;
    const vl_node *out = &g->nodes[g->output];
    for (uint32_t k = 0; k < out->n_args; k++) x.is_output[out->args[k].u.ref] = true;
  }
  for (uint32_t i = 0; st == VL_OK && i < n; i++) {
    if (vl__is_view_copy(&g->nodes[i])) st = decide(&x, i);
  }
  vl__alias_free(&x.alias);
  free(x.storage);
  free(x.is_output);
  return st;
}

/* Is node i one the pass considers: a layout-only node with fold, else a view_copy? */
static bool considered(const vl_graph *g, uint32_t i, bool fold) {
  return fold ? vl__fold_kind(g, i, NULL) != VL_FOLD_NONE : vl__is_view_copy(&g->nodes[i]);
}

/* With remove_view_copy off nothing changes: every node considered is kept as "disabled". */
static vl_status report_disabled(const vl_graph *g, vl_report *r, bool fold) {
  if (r->layout_copy_nodes == 0) return VL_OK;
  r->decisions = calloc(r->layout_copy_nodes, sizeof *r->decisions);
  if (r->decisions == NULL) return VL_ERR_NOMEM;
  lower_facts f = VL__FACTS_NONE;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    if (!considered(g, i, fold)) continue;
    /* The base is the node whose elements it reads (a getitem's: its producer's input). */
    if (fold) vl__fold_kind(g, i, &f.base);
    vl_status st =
        vl__decision_init(&r->decisions[r->n_decisions], g, i, 1u << VL_REASON_DISABLED, &f);
    if (st != VL_OK) return st;
    r->n_decisions++;
    r->kept++;
  }
  return VL_OK;
}

/* bytes_copied: the layout-only nodes (view_copy without fold) still in the lowered graph. */
static void count_copies(const vl_graph *g, vl_report *r, bool fold) {
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    int64_t nbytes = 0;
    if (!considered(g, i, fold)) continue;
    vl_spec_nbytes(g->nodes[i].val, &nbytes);
    vl__bytes_add(&r->bytes_copied, nbytes);
  }
}

/* With param_layouts the parameters' stored orders are picked first, then the fold runs; what
 * became of each relaid parameter's readers is known only after the fold. */
static vl_status fold_with_params(vl_graph *g, const vl_lower_options *opts, vl_report *r) {
  if (!opts->param_layouts) return vl__fold(g, r, NULL);
  vl_params *params = NULL;
  uint8_t *fate = malloc(g->n_nodes ? g->n_nodes : 1);
  vl_status st = fate ? vl__params_relay(g, r, &params) : VL_ERR_NOMEM;
  if (st == VL_OK) st = vl__fold(g, r, fate);
  if (st == VL_OK) {
    st = vl__params_finish(params, r, fate);
  } else {
    vl__params_free(params);
  }
  free(fate);
  return st;
}

/* docs/format.md §9, "Idempotence": a lowering that changed the graph drops its plan; with option
 * plan the graph is planned (a plan it kept at the same alignment is its own, and stays). */
static vl_status plan_after(vl_graph *g, const vl_lower_options *opts, vl_report *r,
                            vl_error *err) {
  bool changed = r->normalized + r->replaced + r->merged + r->removed_dead + r->params_relaid > 0;
  if (changed) vl_plan_drop(g);
  if (!opts->plan) return VL_OK;
  if (g->has_plan && g->plan_alignment == opts->plan_alignment) {
    return vl_plan_figures(g, &r->plan, err);
  }
  return vl_plan(g, opts->plan_alignment, &r->plan, err);
}

/* Every memory.view of the lowered graph names its storage's owner in alias_of (docs/format.md
 * §3). The views this lowering makes get it as they are made; a view that came with the input
 * keeps what it came with, which the parser takes as given and which goes stale when its base
 * becomes a view here (memory.view(v) with alias_of v, v a view_copy now aliasing p, named v,
 * which owns nothing any more; or a node removed as dead, and the view printed with no alias_of).
 * So when the input had views, every view is given its class's owner in the final graph (the
 * earliest node of the class, as the views made here). */
static vl_status name_view_owners(vl_graph *g) {
  vl_alias a;
  if (vl__alias_build(&a, g) != VL_OK) return VL_ERR_NOMEM;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    if (vl__is_memory_view(&g->nodes[i])) g->nodes[i].alias_of = vl__alias_class(&a, i);
  }
  vl__alias_free(&a);
  return VL_OK;
}

vl_status vl_lower(vl_graph *g, const vl_lower_options *opts, vl_report *report, vl_error *err) {
  vl_lower_options dflt;
  if (opts == NULL) {
    vl_lower_options_default(&dflt);
    opts = &dflt;
  }
  memset(report, 0, sizeof *report);
  /* The legacy policy ignores fold (docs/format.md §3, "Options"). */
  bool fold = opts->fold && opts->policy == VL_POLICY_SAFE;
  uint32_t input_views = 0;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    report->view_copy_nodes += vl__is_view_copy(&g->nodes[i]);
    report->layout_copy_nodes += considered(g, i, fold);
    input_views += vl__is_memory_view(&g->nodes[i]);
  }
  vl_status st;
  if (!opts->remove_view_copy) {
    st = report_disabled(g, report, fold);
  } else {
    st = normalize(g, opts->policy == VL_POLICY_SAFE, report);
    if (st == VL_OK) st = remove_dead(g, report, fold);
    if (st == VL_OK) st = fold ? fold_with_params(g, opts, report) : replace(g, opts, report);
    if (st == VL_OK && input_views > 0) st = name_view_owners(g);
  }
  if (st == VL_OK) count_copies(g, report, fold);
  if (st == VL_OK) st = plan_after(g, opts, report, err);
  if (st == VL_ERR_NOMEM) vl_error_set(err, st, "", "out of memory while lowering");
  if (st != VL_OK) vl_report_clear(report);
  return st;
}

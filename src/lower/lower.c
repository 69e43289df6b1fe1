#include "viewlower/layout.h"
/* lower.c - the passes of SPEC §3 in order: normalize view_copy bases to their root, remove
#include "viewlower/layout.h"
 * dead view_copy nodes, and replace each remaining view_copy by memory.view when every
#include "viewlower/layout.h"
 * condition holds, recording every failed condition otherwise. All passes are linear.
#include "viewlower/layout.h"
 *
#include "viewlower/layout.h"
 * Normalization (policy safe) steps over a view_copy b only while b still holds what it copied:
#include "viewlower/layout.h"
 * not when b's own storage was written before this view_copy reads it (the root never saw that
#include "viewlower/layout.h"
 * write), nor when the root's storage was written after b was taken (b holds the older values).
#include "viewlower/layout.h"
 * Either way the composed reshape of the root would read other values than the copy chain. */
#include "viewlower/layout.h"
#include <stdlib.h>
#include "viewlower/layout.h"
#include <string.h>
#include "viewlower/layout.h"

#include "viewlower/layout.h"
#include "graph/alias.h"
#include "viewlower/layout.h"
#include "graph/graph_internal.h"
#include "viewlower/layout.h"
#include "lower/lower_internal.h"
#include "viewlower/layout.h"

#include "viewlower/layout.h"
void vl_lower_options_default(vl_lower_options *o) {
#include "viewlower/layout.h"
  o->remove_view_copy = true;
#include "viewlower/layout.h"
  o->policy = VL_POLICY_SAFE;
#include "viewlower/layout.h"
}
#include "viewlower/layout.h"

#include "viewlower/layout.h"
/* ---- pass 1: normalize ---- */
#include "viewlower/layout.h"

#include "viewlower/layout.h"
typedef struct {
#include "viewlower/layout.h"
  vl_alias *alias;
#include "viewlower/layout.h"
  uint32_t *last_write; /* per class: latest writer seen so far in the sweep */
#include "viewlower/layout.h"
  uint32_t w;
#include "viewlower/layout.h"
} sweep_ctx;
#include "viewlower/layout.h"

#include "viewlower/layout.h"
static void note_write(void *p, uint32_t ref) {
#include "viewlower/layout.h"
  sweep_ctx *s = p;
#include "viewlower/layout.h"
  s->last_write[vl__alias_class(s->alias, ref)] = s->w;
#include "viewlower/layout.h"
}
#include "viewlower/layout.h"

#include "viewlower/layout.h"
/* May the node being swept read r instead of view_copy b (b's base is r)? Not when b's storage
#include "viewlower/layout.h"
 * has been written so far (through b or an alias of it), nor when r's storage was written after
#include "viewlower/layout.h"
 * b was taken: either way b no longer holds r's current values. */
#include "viewlower/layout.h"
static bool may_skip(const sweep_ctx *s, vl_alias *a, uint32_t b, uint32_t r, bool safe) {
#include "viewlower/layout.h"
  if (!safe) return true;
#include "viewlower/layout.h"
  uint32_t wb = s->last_write[vl__alias_class(a, b)], wr = s->last_write[vl__alias_class(a, r)];
#include "viewlower/layout.h"
  return wb == VL_NO_NODE && (wr == VL_NO_NODE || wr < b);
#include "viewlower/layout.h"
}
#include "viewlower/layout.h"

#include "viewlower/layout.h"
static vl_status normalize(vl_graph *g, bool safe, vl_report *r) {
#include "viewlower/layout.h"
  vl_alias a;
#include "viewlower/layout.h"
  if (vl__alias_build(&a, g) != VL_OK) return VL_ERR_NOMEM;
#include "viewlower/layout.h"
  sweep_ctx s = {&a, malloc((g->n_nodes ? g->n_nodes : 1) * sizeof(uint32_t)), 0};
#include "viewlower/layout.h"
  if (s.last_write == NULL) {
#include "viewlower/layout.h"
    vl__alias_free(&a);
#include "viewlower/layout.h"
    return VL_ERR_NOMEM;
#include "viewlower/layout.h"
  }
#include "viewlower/layout.h"
  for (uint32_t i = 0; i < g->n_nodes; i++) s.last_write[i] = VL_NO_NODE;
#include "viewlower/layout.h"
  for (s.w = 0; s.w < g->n_nodes; s.w++) {
#include "viewlower/layout.h"
    vl_node *v = &g->nodes[s.w];
#include "viewlower/layout.h"
    if (vl__is_view_copy(v)) {
#include "viewlower/layout.h"
      uint32_t base = v->args[0].u.ref, start = base;
#include "viewlower/layout.h"
      while (vl__is_view_copy(&g->nodes[base]) &&
#include "viewlower/layout.h"
             may_skip(&s, &a, base, g->nodes[base].args[0].u.ref, safe))
#include "viewlower/layout.h"
        base = g->nodes[base].args[0].u.ref;
#include "viewlower/layout.h"
      if (base != start) {
#include "viewlower/layout.h"
        v->args[0].u.ref = base;
#include "viewlower/layout.h"
        r->normalized++;
#include "viewlower/layout.h"
      }
#include "viewlower/layout.h"
    }
#include "viewlower/layout.h"
    vl__node_for_each_write(v, note_write, &s);
#include "viewlower/layout.h"
  }
#include "viewlower/layout.h"
  free(s.last_write);
#include "viewlower/layout.h"
  vl__alias_free(&a);
#include "viewlower/layout.h"
  return vl_graph_index_users(g);
#include "viewlower/layout.h"
}
#include "viewlower/layout.h"

#include "viewlower/layout.h"
/* ---- pass 2: dead view_copy removal ---- */
#include "viewlower/layout.h"

#include "viewlower/layout.h"
typedef struct {
#include "viewlower/layout.h"
  uint32_t *users_left;
#include "viewlower/layout.h"
  uint32_t *seen; /* last node whose references were dropped, per referee */
#include "viewlower/layout.h"
  uint32_t node;
#include "viewlower/layout.h"
} drop_ctx;
#include "viewlower/layout.h"

#include "viewlower/layout.h"
static void drop_ref(void *p, uint32_t ref) {
#include "viewlower/layout.h"
  drop_ctx *d = p;
#include "viewlower/layout.h"
  if (d->seen[ref] == d->node) return; /* users count each user once */
#include "viewlower/layout.h"
  d->seen[ref] = d->node;
#include "viewlower/layout.h"
  d->users_left[ref]--;
#include "viewlower/layout.h"
}
#include "viewlower/layout.h"

#include "viewlower/layout.h"
/* Removes nodes marked dead and renumbers every reference. */
#include "viewlower/layout.h"
static vl_status compact(vl_graph *g, const bool *dead) {
#include "viewlower/layout.h"
  uint32_t *map = malloc((g->n_nodes ? g->n_nodes : 1) * sizeof *map);
#include "viewlower/layout.h"
  if (map == NULL) return VL_ERR_NOMEM;
#include "viewlower/layout.h"
  uint32_t kept = 0;
#include "viewlower/layout.h"
  for (uint32_t i = 0; i < g->n_nodes; i++) {
#include "viewlower/layout.h"
    map[i] = dead[i] ? VL_NO_NODE : kept;
#include "viewlower/layout.h"
    if (dead[i]) {
#include "viewlower/layout.h"
      vl__node_clear(&g->nodes[i]);
#include "viewlower/layout.h"
      continue;
#include "viewlower/layout.h"
    }
#include "viewlower/layout.h"
    if (kept != i) g->nodes[kept] = g->nodes[i];
#include "viewlower/layout.h"
    vl__node_remap_refs(&g->nodes[kept], map);
#include "viewlower/layout.h"
    kept++;
#include "viewlower/layout.h"
  }
#include "viewlower/layout.h"
  g->output = map[g->output];
#include "viewlower/layout.h"
  g->n_nodes = kept;
#include "viewlower/layout.h"
  free(map);
#include "viewlower/layout.h"
  return vl_graph_index_users(g);
#include "viewlower/layout.h"
}
#include "viewlower/layout.h"

#include "viewlower/layout.h"
static vl_status remove_dead(vl_graph *g, vl_report *r) {
#include "viewlower/layout.h"
  uint32_t n = g->n_nodes;
#include "viewlower/layout.h"
  drop_ctx d = {malloc(n * sizeof(uint32_t)), malloc(n * sizeof(uint32_t)), 0};
#include "viewlower/layout.h"
  bool *dead = calloc(n, sizeof *dead);
#include "viewlower/layout.h"
  vl_status st = VL_ERR_NOMEM;
#include "viewlower/layout.h"
  if (d.users_left && d.seen && dead) {
#include "viewlower/layout.h"
    for (uint32_t i = 0; i < n; i++) {
#include "viewlower/layout.h"
      d.users_left[i] = g->nodes[i].n_users;
#include "viewlower/layout.h"
      d.seen[i] = VL_NO_NODE;
#include "viewlower/layout.h"
    }
#include "viewlower/layout.h"
    /* Backwards, so a view_copy whose only user was a dead view_copy goes too. */
#include "viewlower/layout.h"
    for (uint32_t i = n; i-- > 0;) {
#include "viewlower/layout.h"
      if (!vl__is_view_copy(&g->nodes[i]) || d.users_left[i] != 0) continue;
#include "viewlower/layout.h"
      dead[i] = true;
#include "viewlower/layout.h"
      r->removed_dead++;
#include "viewlower/layout.h"
      d.node = i;
#include "viewlower/layout.h"
      vl__node_for_each_ref(&g->nodes[i], drop_ref, &d);
#include "viewlower/layout.h"
    }
#include "viewlower/layout.h"
    st = r->removed_dead ? compact(g, dead) : VL_OK;
#include "viewlower/layout.h"
  }
#include "viewlower/layout.h"
  free(d.users_left);
#include "viewlower/layout.h"
  free(d.seen);
#include "viewlower/layout.h"
  free(dead);
#include "viewlower/layout.h"
  return st;
#include "viewlower/layout.h"
}
#include "viewlower/layout.h"

#include "viewlower/layout.h"
/* ---- pass 3: replace ---- */
#include "viewlower/layout.h"

#include "viewlower/layout.h"
typedef struct {
#include "viewlower/layout.h"
  vl_graph *g;
#include "viewlower/layout.h"
  const vl_lower_options *opts;
#include "viewlower/layout.h"
  vl_report *r;
#include "viewlower/layout.h"
  vl_alias alias;
#include "viewlower/layout.h"
  uint32_t *storage; /* per class root: the class whose buffer it really uses */
#include "viewlower/layout.h"
  bool *is_output;   /* per node: listed in the output */
#include "viewlower/layout.h"
} replacer;
#include "viewlower/layout.h"

#include "viewlower/layout.h"
static uint32_t storage_of(replacer *x, uint32_t node) {
#include "viewlower/layout.h"
  return x->storage[vl__alias_class(&x->alias, node)];
#include "viewlower/layout.h"
}
#include "viewlower/layout.h"

#include "viewlower/layout.h"
static uint32_t failed_conditions(replacer *x, uint32_t v, lower_facts *f) {
#include "viewlower/layout.h"
  const vl_node *view = &x->g->nodes[v];
#include "viewlower/layout.h"
  const vl_node *base = &x->g->nodes[view->args[0].u.ref];
#include "viewlower/layout.h"
  uint32_t reasons = 0;
#include "viewlower/layout.h"
  if (x->is_output[v]) reasons |= 1u << VL_REASON_FEEDS_OUTPUT;
#include "viewlower/layout.h"
  if (x->opts->policy == VL_POLICY_LEGACY) return reasons;
#include "viewlower/layout.h"
  if (!vl_layout_view_keeps_offsets(&base->val, &view->val)) {
#include "viewlower/layout.h"
    if (!vl_layout_rule_contiguous(&base->val)) reasons |= 1u << VL_REASON_BASE_LAYOUT;
#include "viewlower/layout.h"
    if (!vl_layout_rule_contiguous(&view->val)) reasons |= 1u << VL_REASON_VIEW_LAYOUT;
#include "viewlower/layout.h"
  }
#include "viewlower/layout.h"
  uint32_t vc = vl__alias_class(&x->alias, v), bs = storage_of(x, view->args[0].u.ref);
#include "viewlower/layout.h"
  f->view_writer = x->alias.first_writer[vc];
#include "viewlower/layout.h"
  if (f->view_writer != VL_NO_NODE) reasons |= 1u << VL_REASON_VIEW_MUTATED;
#include "viewlower/layout.h"
  f->last_read = x->alias.last_read[vc];
#include "viewlower/layout.h"
  f->base_writer = vl__alias_next_write(&x->alias, bs, v);
#include "viewlower/layout.h"
  if (f->base_writer != VL_NO_NODE && f->last_read != VL_NO_NODE && f->base_writer <= f->last_read)
#include "viewlower/layout.h"
    reasons |= 1u << VL_REASON_BASE_MUTATED;
#include "viewlower/layout.h"
  const vl_node *owner = &x->g->nodes[bs];
#include "viewlower/layout.h"
  if (owner->op == VL_NODE_PLACEHOLDER && owner->mutated)
#include "viewlower/layout.h"
    reasons |= 1u << VL_REASON_BASE_MUTABLE_INPUT;
#include "viewlower/layout.h"
  if (x->alias.is_output[bs]) reasons |= 1u << VL_REASON_BASE_FEEDS_OUTPUT;
#include "viewlower/layout.h"
  if (base->val.dynamic != view->val.dynamic) reasons |= 1u << VL_REASON_DYNAMIC_SHAPE;
#include "viewlower/layout.h"
  return reasons;
#include "viewlower/layout.h"
}
#include "viewlower/layout.h"

#include "viewlower/layout.h"
static vl_status decide(replacer *x, uint32_t v) {
#include "viewlower/layout.h"
  vl_node *view = &x->g->nodes[v];
#include "viewlower/layout.h"
  lower_facts f = {VL_NO_NODE, VL_NO_NODE, VL_NO_NODE, VL_NO_NODE};
#include "viewlower/layout.h"
  uint32_t reasons = failed_conditions(x, v, &f);
#include "viewlower/layout.h"
  f.owner = storage_of(x, view->args[0].u.ref);
#include "viewlower/layout.h"
  vl_decision *d = &x->r->decisions[x->r->n_decisions];
#include "viewlower/layout.h"
  vl_status st = vl__decision_init(d, x->g, v, reasons, &f);
#include "viewlower/layout.h"
  if (st != VL_OK) return st;
#include "viewlower/layout.h"
  x->r->n_decisions++;
#include "viewlower/layout.h"
  if (reasons != 0) {
#include "viewlower/layout.h"
    x->r->kept++;
#include "viewlower/layout.h"
    return VL_OK;
#include "viewlower/layout.h"
  }
#include "viewlower/layout.h"
  char *target = strdup("memory.view");
#include "viewlower/layout.h"
  if (target == NULL) return VL_ERR_NOMEM;
#include "viewlower/layout.h"
  free(view->target);
#include "viewlower/layout.h"
  view->target = target;
#include "viewlower/layout.h"
  view->alias_of = f.owner;
#include "viewlower/layout.h"
  /* From here on the view shares its base's buffer: later decisions see it as an alias. */
#include "viewlower/layout.h"
  uint32_t vc = vl__alias_class(&x->alias, v);
#include "viewlower/layout.h"
  x->storage[vc] = f.owner;
#include "viewlower/layout.h"
  x->alias.is_output[f.owner] |= x->alias.is_output[vc];
#include "viewlower/layout.h"
  int64_t nbytes = 0;
#include "viewlower/layout.h"
  vl_spec_nbytes(&view->val, &nbytes);
#include "viewlower/layout.h"
  x->r->replaced++;
#include "viewlower/layout.h"
  /* Each view fits 63 bits, their sum need not: saturate. */
#include "viewlower/layout.h"
  if (__builtin_add_overflow(x->r->bytes_saved, nbytes, &x->r->bytes_saved))
#include "viewlower/layout.h"
    x->r->bytes_saved = INT64_MAX;
#include "viewlower/layout.h"
  return VL_OK;
#include "viewlower/layout.h"
}
#include "viewlower/layout.h"

#include "viewlower/layout.h"
static vl_status replace(vl_graph *g, const vl_lower_options *opts, vl_report *r) {
#include "viewlower/layout.h"
  replacer x = {g, opts, r, {0}, NULL, NULL};
#include "viewlower/layout.h"
  uint32_t n = g->n_nodes, views = 0;
#include "viewlower/layout.h"
  for (uint32_t i = 0; i < n; i++) views += vl__is_view_copy(&g->nodes[i]);
#include "viewlower/layout.h"
  if (views == 0) return VL_OK;
#include "viewlower/layout.h"
  vl_status st = vl__alias_build(&x.alias, g);
#include "viewlower/layout.h"
  x.storage = malloc(n * sizeof *x.storage);
#include "viewlower/layout.h"
  x.is_output = calloc(n, sizeof *x.is_output);
#include "viewlower/layout.h"
  r->decisions = calloc(views, sizeof *r->decisions);
#include "viewlower/layout.h"
  if (st != VL_OK || !x.storage || !x.is_output || !r->decisions) st = VL_ERR_NOMEM;
#include "viewlower/layout.h"
  if (st == VL_OK) {
#include "viewlower/layout.h"
    for (uint32_t i = 0; i < n; i++) x.storage[i] = i;
#include "viewlower/layout.h"
    const vl_node *out = &g->nodes[g->output];
#include "viewlower/layout.h"
    for (uint32_t k = 0; k < out->n_args; k++) x.is_output[out->args[k].u.ref] = true;
#include "viewlower/layout.h"
  }
#include "viewlower/layout.h"
  for (uint32_t i = 0; st == VL_OK && i < n; i++)
#include "viewlower/layout.h"
    if (vl__is_view_copy(&g->nodes[i])) st = decide(&x, i);
#include "viewlower/layout.h"
  vl__alias_free(&x.alias);
#include "viewlower/layout.h"
  free(x.storage);
#include "viewlower/layout.h"
  free(x.is_output);
#include "viewlower/layout.h"
  return st;
#include "viewlower/layout.h"
}
#include "viewlower/layout.h"

#include "viewlower/layout.h"
/* With remove_view_copy off nothing changes: every view_copy is kept as "disabled". */
#include "viewlower/layout.h"
static vl_status report_disabled(const vl_graph *g, vl_report *r) {
#include "viewlower/layout.h"
  if (r->view_copy_nodes == 0) return VL_OK;
#include "viewlower/layout.h"
  r->decisions = calloc(r->view_copy_nodes, sizeof *r->decisions);
#include "viewlower/layout.h"
  if (r->decisions == NULL) return VL_ERR_NOMEM;
#include "viewlower/layout.h"
  lower_facts f = {VL_NO_NODE, VL_NO_NODE, VL_NO_NODE, VL_NO_NODE};
#include "viewlower/layout.h"
  for (uint32_t i = 0; i < g->n_nodes; i++) {
#include "viewlower/layout.h"
    if (!vl__is_view_copy(&g->nodes[i])) continue;
#include "viewlower/layout.h"
    vl_status st =
#include "viewlower/layout.h"
        vl__decision_init(&r->decisions[r->n_decisions], g, i, 1u << VL_REASON_DISABLED, &f);
#include "viewlower/layout.h"
    if (st != VL_OK) return st;
#include "viewlower/layout.h"
    r->n_decisions++;
#include "viewlower/layout.h"
    r->kept++;
#include "viewlower/layout.h"
  }
#include "viewlower/layout.h"
  return VL_OK;
#include "viewlower/layout.h"
}
#include "viewlower/layout.h"

#include "viewlower/layout.h"
vl_status vl_lower(vl_graph *g, const vl_lower_options *opts, vl_report *report, vl_error *err) {
#include "viewlower/layout.h"
  vl_lower_options dflt;
#include "viewlower/layout.h"
  if (opts == NULL) {
#include "viewlower/layout.h"
    vl_lower_options_default(&dflt);
#include "viewlower/layout.h"
    opts = &dflt;
#include "viewlower/layout.h"
  }
#include "viewlower/layout.h"
  memset(report, 0, sizeof *report);
#include "viewlower/layout.h"
  for (uint32_t i = 0; i < g->n_nodes; i++)
#include "viewlower/layout.h"
    report->view_copy_nodes += vl__is_view_copy(&g->nodes[i]);
#include "viewlower/layout.h"
  vl_status st;
#include "viewlower/layout.h"
  if (!opts->remove_view_copy) {
#include "viewlower/layout.h"
    st = report_disabled(g, report);
#include "viewlower/layout.h"
  } else {
#include "viewlower/layout.h"
    st = normalize(g, opts->policy == VL_POLICY_SAFE, report);
#include "viewlower/layout.h"
    if (st == VL_OK) st = remove_dead(g, report);
#include "viewlower/layout.h"
    if (st == VL_OK) st = replace(g, opts, report);
#include "viewlower/layout.h"
  }
#include "viewlower/layout.h"
  if (st != VL_OK) {
#include "viewlower/layout.h"
    vl_report_clear(report);
#include "viewlower/layout.h"
    return vl_error_set(err, st, "", "out of memory while lowering");
#include "viewlower/layout.h"
  }
#include "viewlower/layout.h"
  return VL_OK;
#include "viewlower/layout.h"
}

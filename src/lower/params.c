/* params.c - stored layouts of parameters (docs/format.md §3). A parameter's bytes are written
 * once, when the program is built, so it may be stored in the order its readers want and they
 * become aliases. From specs alone: a placeholder of kind parameter or constant whose every reader
 * is a layout-only op reading it as its input is eligible; its candidate orders are its declared
 * one, then the order each permuting reader (permute, transpose, t, squeeze, unsqueeze, alias, a
 * layout conversion) would have it in; each order scores the bytes of the readers that would
 * then pass the layout test through P and every other condition with P as the base, and
 * the best one (the earliest on ties) is written into P's val. Linear in nodes + edges: each
 * placeholder scores at most VL__PARAM_ORDERS distinct orders against its readers.
 *
 * A candidate order is known by the strides it gives the dims of size > 1 (the layout test
 * ignores the others), so two orders differing only in where size-1 dims sit count once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "lower/fold_ops.h"
#include "lower/lower_internal.h"
#include "viewlower/layout.h"

/* Distinct candidate orders scored per placeholder; further proposals are ignored (real graphs
 * propose one or two; the bound keeps a hostile graph linear). */
#define VL__PARAM_ORDERS 32

typedef struct span {
  uint32_t start, count; /* into vl_params.users */
} span;

struct vl_params {
  uint32_t *users; /* user indices: the relaid ones' readers, then the kept ones' */
  uint32_t n_users, cap_users;
  span *relaid; /* per r->param_layouts entry */
  span *kept;   /* per r->params_kept entry: its layout-only readers */
};

typedef struct {
  uint32_t target;
  uint32_t count;
} ref_count;

static void count_ref(void *p, uint32_t ref) {
  ref_count *c = p;
  c->count += ref == c->target;
}

/* Why user u keeps p from being relaid, or VL_PARAM_RULE_COUNT when it does not. */
static vl_param_rule user_rule(const vl_graph *g, uint32_t p, uint32_t u) {
  const vl_node *un = &g->nodes[u];
  if (un->op == VL_NODE_OUTPUT) return VL_PARAM_FEEDS_OUTPUT;
  uint32_t in = VL_NO_NODE;
  vl_fold_kind kind = vl__fold_kind(g, u, &in);
  if (vl__is_memory_view(un) || kind == VL_FOLD_AS_STRIDED) return VL_PARAM_READS_BUFFER;
  if (kind != VL_FOLD_VIEW_COPY && kind != VL_FOLD_OP) return VL_PARAM_READ_BY_OP;
  ref_count c = {p, 0};
  vl__node_for_each_ref(un, count_ref, &c);
  return in == p && c.count == 1 ? VL_PARAM_RULE_COUNT : VL_PARAM_NOT_INPUT;
}

/* The placeholder's own rules, as bits. */
static uint32_t own_rules(vl_alias *a, const vl_graph *g, uint32_t p) {
  const vl_node *n = &g->nodes[p];
  int64_t numel = 0;
  uint32_t rules = 0;
  if (n->mutated) rules |= 1u << VL_PARAM_MUTATED;
  if (n->val->dynamic) rules |= 1u << VL_PARAM_DYNAMIC;
  if (!vl_spec_numel(n->val, &numel) || numel <= 1) rules |= 1u << VL_PARAM_ONE_ELEMENT;
  /* Also: a node that writes the parameter in place makes its storage a variable. */
  if (a->first_writer[vl__alias_class(a, p)] != VL_NO_NODE) rules |= 1u << VL_PARAM_WRITTEN;
  return rules;
}

/* The order node u (a permuting reader of p) wants p stored in: each dim j of p of size > 1
 * gets the declared stride of the dim of u that j becomes. False when u's map fails. */
static bool wanted_order(const vl_graph *g, uint32_t p, uint32_t u, uint8_t *order) {
  const vl_spec *ps = g->nodes[p].val, *us = g->nodes[u].val;
  vl_desc tagged, mapped;
  /* Strides as tags: dim j of size > 1 gets j + 1, so the map shows where each dim goes. */
  tagged.rank = ps->rank;
  tagged.offset = 0;
  for (uint8_t j = 0; j < ps->rank; j++) {
    tagged.shape[j] = ps->shape[j];
    tagged.strides[j] = ps->shape[j] > 1 ? j + 1 : 0;
  }
  if (!vl__fold_map(g, u, NULL, &tagged, &mapped)) return false;
  int64_t ustrides[VL_MAX_RANK], want[VL_MAX_RANK] = {0};
  vl_layout_strides(us, ustrides);
  for (uint8_t k = 0; k < mapped.rank; k++) {
    if (mapped.shape[k] <= 1) continue;
    int64_t j = mapped.strides[k] - 1;
    if (j < 0 || j >= ps->rank) return false;
    want[j] = ustrides[k];
  }
  /* The default order if it gives those strides, else channels-last, else the size-1 dims
   * first in ascending index and the others by decreasing stride. */
  vl_spec s = *ps;
  int64_t have[VL_MAX_RANK];
  vl_dim_order_default(s.dim_order, s.rank);
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1 && !vl_dim_order_channels_last(s.dim_order, s.rank)) break;
    vl_layout_strides(&s, have);
    bool fits = true;
    for (uint8_t j = 0; j < s.rank && fits; j++) fits = ps->shape[j] <= 1 || have[j] == want[j];
    if (fits) {
      memcpy(order, s.dim_order, s.rank);
      return true;
    }
  }
  uint8_t k = 0;
  for (uint8_t j = 0; j < ps->rank; j++) {
    if (ps->shape[j] <= 1) order[k++] = j;
  }
  uint8_t first = k;
  for (uint8_t j = 0; j < ps->rank; j++) {
    if (ps->shape[j] <= 1) continue;
    uint8_t at = k++;
    while (at > first && want[order[at - 1]] < want[j]) { /* insertion by decreasing stride */
      order[at] = order[at - 1];
      at--;
    }
    order[at] = j;
  }
  return true;
}

/* Do orders a and b give p's dims of size > 1 the same strides? */
static bool same_strides(const vl_spec *p, const uint8_t *a, const uint8_t *b) {
  vl_spec sa = *p, sb = *p;
  int64_t ta[VL_MAX_RANK], tb[VL_MAX_RANK];
  memcpy(sa.dim_order, a, p->rank);
  memcpy(sb.dim_order, b, p->rank);
  vl_layout_strides(&sa, ta);
  vl_layout_strides(&sb, tb);
  for (uint8_t j = 0; j < p->rank; j++) {
    if (p->shape[j] > 1 && ta[j] != tb[j]) return false;
  }
  return true;
}

typedef struct scorer {
  vl_graph *g;
  vl_alias *alias;
  const bool *is_output; /* per node: listed in the output */
} scorer;

/* The bytes of p's readers that would be replaced with p stored in order: the layout test
 * through candidate 1 (R = p) and every other condition with base p, readers taken in
 * graph order (a reader replaced whose storage the output lists makes p's storage an output for
 * the readers after it). */
static int64_t score(scorer *s, uint32_t p, const uint8_t *order, bool *replaced) {
  const vl_node *pn = &s->g->nodes[p];
  vl_spec stored = *pn->val;
  memcpy(stored.dim_order, order, stored.rank);
  vl_desc in, d;
  vl_desc_of_spec(&stored, 0, &in);
  int64_t total = 0;
  bool p_out = false;
  for (uint32_t k = 0; k < pn->n_users; k++) {
    uint32_t u = pn->users[k];
    const vl_node *un = &s->g->nodes[u];
    replaced[k] = false;
    if (un->val->dynamic || un->out != VL_NO_NODE || un->n_mutates > 0) continue;
    if (!vl__fold_map(s->g, u, NULL, &in, &d) || !vl_desc_matches_spec(&d, un->val)) continue;
    uint32_t uc = vl__alias_class(s->alias, u);
    if (s->is_output[u] || s->alias->first_writer[uc] != VL_NO_NODE || p_out) continue;
    replaced[k] = true;
    p_out = s->alias->is_output[uc];
    int64_t nbytes = 0;
    vl_spec_nbytes(un->val, &nbytes);
    vl__bytes_add(&total, nbytes);
  }
  return total;
}

/* ---- bookkeeping ------------------------------------------------------------------------------
 */

static vl_status push_user(vl_params *st, uint32_t u) {
  if (st->n_users == st->cap_users) {
    uint32_t cap = st->cap_users ? 2 * st->cap_users : 64;
    uint32_t *users = realloc(st->users, cap * sizeof *users);
    if (users == NULL) return VL_ERR_NOMEM;
    st->users = users;
    st->cap_users = cap;
  }
  st->users[st->n_users++] = u;
  return VL_OK;
}

static vl_status add_relaid(vl_params *st, vl_report *r, const vl_graph *g, uint32_t p,
                            const uint8_t *was, const bool *replaced) {
  const vl_node *pn = &g->nodes[p];
  vl_param_layout *e = &r->param_layouts[r->params_relaid];
  memset(e, 0, sizeof *e);
  e->node = strdup(pn->name);
  if (e->node == NULL) return VL_ERR_NOMEM;
  r->params_relaid++;
  e->rank = pn->val->rank;
  memcpy(e->dim_order, pn->val->dim_order, e->rank);
  memcpy(e->was, was, e->rank);
  vl_spec_nbytes(pn->val, &e->nbytes);
  span *sp = &st->relaid[r->params_relaid - 1];
  sp->start = st->n_users;
  sp->count = 0;
  for (uint32_t k = 0; k < pn->n_users; k++) {
    if (!replaced[k]) continue;
    vl_status s = push_user(st, pn->users[k]);
    if (s != VL_OK) return s;
    sp->count++;
  }
  return VL_OK;
}

static vl_status add_kept(vl_params *st, vl_report *r, const vl_graph *g, uint32_t p,
                          uint32_t rules) {
  const vl_node *pn = &g->nodes[p];
  uint32_t blockers = 0, readers = 0;
  /* The output lists it: a rule of the placeholder's own (feeds_output), not a blocker. */
  for (uint32_t k = 0; k < pn->n_users; k++) {
    vl_param_rule rule = user_rule(g, p, pn->users[k]);
    blockers += rule != VL_PARAM_RULE_COUNT && rule != VL_PARAM_FEEDS_OUTPUT;
    readers += rule == VL_PARAM_RULE_COUNT;
  }
  if (readers == 0) return VL_OK; /* no layout-only reader: nothing to gain */
  vl_param_kept *e = &r->params_kept[r->n_params_kept];
  memset(e, 0, sizeof *e);
  e->node = strdup(pn->name);
  e->blockers = blockers ? calloc(blockers, sizeof *e->blockers) : NULL;
  if (e->node == NULL || (blockers && e->blockers == NULL)) {
    free(e->node);
    free(e->blockers);
    return VL_ERR_NOMEM;
  }
  r->n_params_kept++;
  e->rules = rules;
  span *sp = &st->kept[r->n_params_kept - 1];
  sp->start = st->n_users;
  sp->count = 0;
  for (uint32_t k = 0; k < pn->n_users; k++) {
    uint32_t u = pn->users[k];
    vl_param_rule rule = user_rule(g, p, u);
    if (rule == VL_PARAM_RULE_COUNT) {
      vl_status s = push_user(st, u);
      if (s != VL_OK) return s;
      sp->count++;
      continue;
    }
    if (rule == VL_PARAM_FEEDS_OUTPUT) continue;
    vl_param_blocker *b = &e->blockers[e->n_blockers];
    b->node = strdup(g->nodes[u].name);
    if (b->node == NULL) return VL_ERR_NOMEM;
    b->rule = rule;
    e->n_blockers++;
  }
  return VL_OK;
}

/* Decides placeholder p: relays it, reports it as kept, or neither. */
static vl_status decide_param(scorer *s, vl_params *st, vl_report *r, uint32_t p, bool *replaced,
                              bool *best_replaced) {
  vl_node *pn = &s->g->nodes[p];
  uint32_t rules = own_rules(s->alias, s->g, p);
  bool users_ok = true;
  for (uint32_t k = 0; k < pn->n_users; k++) {
    vl_param_rule rule = user_rule(s->g, p, pn->users[k]);
    if (rule == VL_PARAM_FEEDS_OUTPUT) rules |= 1u << VL_PARAM_FEEDS_OUTPUT;
    users_ok = users_ok && rule == VL_PARAM_RULE_COUNT;
  }
  if (rules != 0 || !users_ok) return add_kept(st, r, s->g, p, rules);
  uint8_t orders[VL__PARAM_ORDERS][VL_MAX_RANK];
  int n_orders = 1;
  memcpy(orders[0], pn->val->dim_order, pn->val->rank);
  for (uint32_t k = 0; k < pn->n_users && n_orders < VL__PARAM_ORDERS; k++) {
    uint32_t u = pn->users[k];
    if (s->g->nodes[u].val->dynamic || !vl__fold_proposes_order(&s->g->nodes[u])) continue;
    if (!wanted_order(s->g, p, u, orders[n_orders])) continue;
    bool seen = false;
    for (int c = 0; c < n_orders && !seen; c++) {
      seen = same_strides(pn->val, orders[c], orders[n_orders]);
    }
    if (!seen) n_orders++;
  }
  if (n_orders == 1) return VL_OK;
  int best = 0;
  int64_t best_score = score(s, p, orders[0], best_replaced);
  for (int c = 1; c < n_orders; c++) {
    int64_t sc = score(s, p, orders[c], replaced);
    if (sc <= best_score) continue;
    best = c;
    best_score = sc;
    memcpy(best_replaced, replaced, pn->n_users * sizeof *replaced);
  }
  if (best == 0) return VL_OK;
  uint8_t was[VL_MAX_RANK];
  memcpy(was, pn->val->dim_order, pn->val->rank);
  vl_spec relaid = *pn->val; /* vals are interned: the node gets the new spec's own copy */
  memcpy(relaid.dim_order, orders[best], relaid.rank);
  if ((pn->val = vl__store_spec(s->g->store, &relaid)) == NULL) return VL_ERR_NOMEM;
  return add_relaid(st, r, s->g, p, was, best_replaced);
}

vl_status vl__params_relay(vl_graph *g, vl_report *r, vl_params **state) {
  *state = NULL;
  r->params_ran = true;
  uint32_t n = g->n_nodes, params = 0, max_users = 1;
  for (uint32_t i = 0; i < n; i++) {
    const vl_node *node = &g->nodes[i];
    if (node->op != VL_NODE_PLACEHOLDER) continue;
    if (node->kind != VL_INPUT_PARAMETER && node->kind != VL_INPUT_CONSTANT) continue;
    params++;
    if (node->n_users > max_users) max_users = node->n_users;
  }
  if (params == 0) return VL_OK;
  vl_params *st = calloc(1, sizeof *st);
  vl_alias alias;
  bool alias_ok = false;
  bool *is_output = calloc(n, sizeof *is_output);
  bool *replaced = malloc(2 * (size_t)max_users * sizeof *replaced);
  vl_status rc = VL_ERR_NOMEM;
  if (st && is_output && replaced) {
    st->relaid = calloc(params, sizeof *st->relaid);
    st->kept = calloc(params, sizeof *st->kept);
    r->param_layouts = calloc(params, sizeof *r->param_layouts);
    r->params_kept = calloc(params, sizeof *r->params_kept);
    alias_ok = vl__alias_build(&alias, g) == VL_OK;
    if (st->relaid && st->kept && r->param_layouts && r->params_kept && alias_ok) rc = VL_OK;
  }
  if (rc == VL_OK) {
    const vl_node *out = &g->nodes[g->output];
    for (uint32_t k = 0; k < out->n_args; k++) is_output[out->args[k].u.ref] = true;
    scorer s = {g, &alias, is_output};
    for (uint32_t i = 0; rc == VL_OK && i < n; i++) {
      const vl_node *node = &g->nodes[i];
      if (node->op != VL_NODE_PLACEHOLDER) continue;
      if (node->kind != VL_INPUT_PARAMETER && node->kind != VL_INPUT_CONSTANT) continue;
      rc = decide_param(&s, st, r, i, replaced, replaced + max_users);
    }
  }
  if (alias_ok) vl__alias_free(&alias);
  free(is_output);
  free(replaced);
  if (rc != VL_OK) {
    vl__params_free(st);
    return rc;
  }
  *state = st;
  return VL_OK;
}

static vl_status kept_message(vl_param_kept *e) {
  char text[512], rules[256] = "";
  size_t len = 0;
  for (int k = 0; k < VL_PARAM_RULE_COUNT; k++) {
    if (!(e->rules & (1u << k)) || len >= sizeof rules) continue;
    len += (size_t)snprintf(rules + len, sizeof rules - len, "%s%s", len ? ", " : "",
                            vl_param_rule_name((vl_param_rule)k));
  }
  if (e->n_blockers > 0) {
    const vl_param_blocker *b = &e->blockers[0];
    const char *why = b->rule == VL_PARAM_READS_BUFFER ? "reads its buffer"
                      : b->rule == VL_PARAM_NOT_INPUT
                          ? "reads it other than as its input"
                          : "reads it with an op that is not layout-only";
    snprintf(text, sizeof text, "%s keeps its declared layout: %s %s%s%s%s", e->node, b->node, why,
             e->n_blockers > 1 ? " (and more readers)" : "", len ? "; also " : "", rules);
  } else {
    snprintf(text, sizeof text, "%s keeps its declared layout: %s", e->node, rules);
  }
  e->message = strdup(text);
  return e->message ? VL_OK : VL_ERR_NOMEM;
}

vl_status vl__params_finish(vl_params *st, vl_report *r, const uint8_t *fate) {
  if (st == NULL) return VL_OK;
  for (uint32_t i = 0; i < r->params_relaid; i++) {
    const span *sp = &st->relaid[i];
    for (uint32_t k = 0; k < sp->count; k++) {
      r->param_layouts[i].aliased += fate[st->users[sp->start + k]] == VL_FATE_ALIASED;
    }
  }
  /* A kept parameter is reported while one of its layout-only readers still copies. */
  uint32_t w = 0;
  vl_status rc = VL_OK;
  for (uint32_t i = 0; i < r->n_params_kept; i++) {
    const span *sp = &st->kept[i];
    bool copies = false;
    for (uint32_t k = 0; k < sp->count && !copies; k++) {
      copies = fate[st->users[sp->start + k]] == VL_FATE_COPIES;
    }
    vl_param_kept *e = &r->params_kept[i];
    if (!copies || rc != VL_OK) {
      vl__param_kept_free(e);
      continue;
    }
    rc = kept_message(e);
    r->params_kept[w++] = *e;
  }
  r->n_params_kept = w;
  vl__params_free(st);
  return rc;
}

void vl__params_free(vl_params *st) {
  if (st == NULL) return;
  free(st->users);
  free(st->relaid);
  free(st->kept);
  free(st);
}

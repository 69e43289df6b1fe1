/* lower_report.c - reason codes, decision messages for people, the report as JSON, and the
 * lowering options from JSON. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_num.h"
#include "base/json_util.h"
#include "graph/graph_internal.h"
#include "lower/fold_ops.h"
#include "lower/lower_internal.h"
#include "viewlower/layout.h"

/* The names of the reason codes and of the parameter rules (docs/format.md §3), from their
 * tables. */
#define ROW(e, name) name,
static const char *const reason_names[] = {VL_REASON_MAP(ROW)};
static const char *const param_rule_names[] = {VL_PARAM_RULE_MAP(ROW)};
#undef ROW

const char *vl_reason_name(vl_reason r) {
  return (unsigned)r < VL_REASON_COUNT ? reason_names[r] : "?";
}

const char *vl_param_rule_name(vl_param_rule r) {
  return (unsigned)r < VL_PARAM_RULE_COUNT ? param_rule_names[r] : "?";
}

/* A bounded string builder: appends are truncated, never overflow. */
typedef struct {
  char buf[768];
  size_t len;
} text;

/* Appends bytes, truncated as snprintf truncates (the buffer always ends in a NUL). */
static void put_bytes(text *t, const char *s, size_t n) {
  size_t room = sizeof t->buf - 1 - t->len;
  if (n > room) n = room;
  memcpy(t->buf + t->len, s, n);
  t->len += n;
  t->buf[t->len] = '\0';
}

/* Does fmt use only the conversions put formats itself (%s, %lld, %%)? */
static bool plain_format(const char *fmt) {
  for (const char *p = strchr(fmt, '%'); p != NULL; p = strchr(p + 2, '%')) {
    if (p[1] == 'l' && p[2] == 'l' && p[3] == 'd') {
      p += 2;
    } else if (p[1] != 's' && p[1] != '%') {
      return false;
    }
  }
  return true;
}

/* printf-style append. The messages use %s and %lld only, formatted here: vsnprintf cost 6 % of
 * the daemon's time serving small lowerings (perf); anything else still goes through it. */
static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
  if (t->len >= sizeof t->buf - 1) return;
  va_list ap;
  va_start(ap, fmt);
  if (!plain_format(fmt)) {
    int n = vsnprintf(t->buf + t->len, sizeof t->buf - t->len, fmt, ap);
    if (n > 0) t->len += (size_t)n < sizeof t->buf - t->len ? (size_t)n : sizeof t->buf - t->len - 1;
    va_end(ap);
    return;
  }
  const char *p = fmt;
  for (const char *pc; (pc = strchr(p, '%')) != NULL;) {
    put_bytes(t, p, (size_t)(pc - p));
    if (pc[1] == 's') {
      const char *a = va_arg(ap, const char *);
      put_bytes(t, a, strlen(a));
      p = pc + 2;
    } else if (pc[1] == '%') {
      put_bytes(t, "%", 1);
      p = pc + 2;
    } else {
      char num[VL__NUM_TEXT_MAX];
      put_bytes(t, num, vl__num_format_int((int64_t)va_arg(ap, long long), num));
      p = pc + 4;
    }
  }
  put_bytes(t, p, strlen(p));
  va_end(ap);
}

static void put_list(text *t, const int64_t *v, uint8_t n) {
  put(t, "[");
  for (uint8_t i = 0; i < n; i++) put(t, i ? ",%lld" : "%lld", (long long)v[i]);
  put(t, "]");
}

static void put_order(text *t, const vl_spec *s) {
  int64_t o[VL_MAX_RANK];
  for (uint8_t i = 0; i < s->rank; i++) o[i] = s->dim_order[i];
  put_list(t, o, s->rank);
}

static void put_layout_reason(text *t, const vl_node *view, const vl_node *base, uint32_t reasons) {
  if (reasons & (1u << VL_REASON_BASE_LAYOUT)) {
    put(t, "base %s has dim_order ", base->name);
    put_order(t, base->val);
  } else {
    put(t, "%s is declared with dim_order ", view->name);
    put_order(t, view->val);
  }
  put(t, "; viewing it as ");
  if (vl_layout_is_default_order(view->val)) {
    put(t, "contiguous ");
  } else {
    put(t, "dim_order ");
    put_order(t, view->val);
    put(t, " ");
  }
  put_list(t, view->val->shape, view->val->rank);
  put(t, " would reorder elements");
}

static const char *name_of(const vl_graph *g, uint32_t i) {
  return i == VL_NO_NODE ? "?" : g->nodes[i].name;
}

static uint32_t base_of(const vl_graph *g, uint32_t v, const lower_facts *f) {
  return f->base != VL_NO_NODE ? f->base : g->nodes[v].args[0].u.ref;
}

static void put_reason(text *t, const vl_graph *g, uint32_t v, vl_reason r, uint32_t reasons,
                       const lower_facts *f) {
  const vl_node *view = &g->nodes[v];
  const vl_node *base = &g->nodes[base_of(g, v, f)];
  const vl_node *lbase = f->layout_base != VL_NO_NODE ? &g->nodes[f->layout_base] : base;
  char path[64], why[400];
  if (t->len > 0) put(t, "; ");
  switch (r) {
  case VL_REASON_DISABLED: put(t, "remove_view_copy is off"); break;
  case VL_REASON_FEEDS_OUTPUT:
    put(t, "%s is a graph output (its storage may be swapped at run time)", view->name);
    break;
  case VL_REASON_BASE_LAYOUT: put_layout_reason(t, view, lbase, reasons); break;
  case VL_REASON_VIEW_LAYOUT:
    if (!(reasons & (1u << VL_REASON_BASE_LAYOUT))) {
      put_layout_reason(t, view, lbase, reasons);
    } else {
      put(t, "and the view's own dim_order is not contiguous either");
    }
    break;
  case VL_REASON_REORDERS:
    if (vl__fold_why(g, v, lbase->val, path, sizeof path, why, sizeof why)) {
      put(t, "%s's arguments give no view of %s: %s (at %s's %s)", view->name, lbase->name, why,
          view->name, path);
      break;
    }
    put(t, "no strided alias of %s puts every element where %s's declared dim_order ", base->name,
        view->name);
    put_order(t, view->val);
    put(t, " wants it");
    break;
  case VL_REASON_VIEW_MUTATED:
    put(t, "%s writes through the view %s", name_of(g, f->view_writer), view->name);
    break;
  case VL_REASON_BASE_MUTATED:
    put(t, "%s writes the storage of base %s while %s still reads the view",
        name_of(g, f->base_writer), base->name, name_of(g, f->last_read));
    break;
  case VL_REASON_BASE_MUTABLE_INPUT:
    put(t, "the storage of base %s belongs to %s, an input the program mutates", base->name,
        name_of(g, f->owner));
    break;
  case VL_REASON_BASE_FEEDS_OUTPUT:
    put(t,
        "the storage of base %s is a graph output (it may be swapped at run time, leaving "
        "the alias stale)",
        base->name);
    break;
  case VL_REASON_DYNAMIC_SHAPE:
    put(t, "base %s is %s but the view is %s", base->name,
        base->val->dynamic ? "dynamic" : "static", view->val->dynamic ? "dynamic" : "static");
    break;
  case VL_REASON_COUNT: break;
  }
}

/* The four strings of d in one allocation (d->node first; the others follow it), so a
 * decision costs one malloc header, not four. false, d untouched, when out of memory. */
static bool decision_strings(vl_decision *d, const char *node, const char *target, const char *base,
                             const char *message) {
  const char *parts[4] = {node, target, base, message};
  size_t len[4], total = 0;
  for (int k = 0; k < 4; k++) total += (len[k] = strlen(parts[k])) + 1;
  char *block = malloc(total), *at = block;
  if (block == NULL) return false;
  char **slots[4] = {&d->node, &d->target, &d->base, &d->message};
  for (int k = 0; k < 4; k++) {
    memcpy(at, parts[k], len[k] + 1);
    *slots[k] = at;
    at += len[k] + 1;
  }
  return true;
}

vl_status vl__decision_init(vl_decision *d, const vl_graph *g, uint32_t v, uint32_t reasons,
                            const lower_facts *f) {
  const vl_node *view = &g->nodes[v];
  const vl_node *base = &g->nodes[base_of(g, v, f)];
  text t = {.len = 0};
  t.buf[0] = '\0';
  for (int r = 0; r < VL_REASON_COUNT; r++) {
    if (reasons & (1u << r)) put_reason(&t, g, v, (vl_reason)r, reasons, f);
  }
  if (reasons == 0 && f->legacy) {
    /* legacy decides on feeds_output alone: say so, claim no check it did not make */
    int64_t nbytes = 0;
    vl_spec_nbytes(view->val, &nbytes);
    put(&t,
        "aliases %s under policy legacy, which checks only feeds_output (not layout, not "
        "writes); saves %lld bytes",
        name_of(g, f->owner), (long long)nbytes);
  } else if (reasons == 0) {
    int64_t nbytes = 0;
    vl_spec_nbytes(view->val, &nbytes);
    if (f->offset != 0) {
      put(&t, "aliases %s at element offset %lld: ", name_of(g, f->owner), (long long)f->offset);
    } else {
      put(&t, "aliases %s: ", name_of(g, f->owner));
    }
    put(&t,
        "every element keeps its memory offset and nothing writes the storage "
        "while the view is read; saves %lld bytes",
        (long long)nbytes);
  }
  memset(d, 0, sizeof *d);
  if (!decision_strings(d, view->name, view->target, base->name, t.buf)) return VL_ERR_NOMEM;
  d->replaced = reasons == 0;
  d->offset = reasons == 0 ? f->offset : 0;
  d->reasons = reasons;
  return VL_OK;
}

vl_status vl__decision_merged(vl_decision *d, const vl_graph *g, uint32_t root, int64_t offset) {
  text t = {.len = 0};
  t.buf[0] = '\0';
  put(&t, "merged: copies straight from %s", g->nodes[root].name);
  if (offset != 0) put(&t, " at element offset %lld", (long long)offset);
  put(&t, " (one pass over memory instead of two); it cannot alias: %s", d->message);
  char *old = d->node;
  if (!decision_strings(d, d->node, d->target, g->nodes[root].name, t.buf)) return VL_ERR_NOMEM;
  free(old);
  d->merged = true;
  d->offset = offset;
  return VL_OK;
}

void vl__decision_free(vl_decision *d) {
  free(d->node); /* the block of all four strings */
  memset(d, 0, sizeof *d);
}

void vl__param_kept_free(vl_param_kept *e) {
  for (uint32_t k = 0; k < e->n_blockers; k++) free(e->blockers[k].node);
  free(e->blockers);
  free(e->node);
  free(e->message);
  memset(e, 0, sizeof *e);
}

void vl_report_clear(vl_report *r) {
  if (r == NULL) return;
  for (uint32_t i = 0; i < r->n_decisions; i++) vl__decision_free(&r->decisions[i]);
  free(r->decisions);
  for (uint32_t i = 0; i < r->params_relaid; i++) free(r->param_layouts[i].node);
  free(r->param_layouts);
  for (uint32_t i = 0; i < r->n_params_kept; i++) vl__param_kept_free(&r->params_kept[i]);
  free(r->params_kept);
  memset(r, 0, sizeof *r);
}

static cJSON *decision_to_json(const vl_decision *d) {
  cJSON *o = cJSON_CreateObject();
  cJSON *reasons = cJSON_CreateArray();
  const char *decision = d->replaced ? "replaced" : d->merged ? "merged" : "kept";
  bool ok = o && reasons && cJSON_AddStringToObject(o, "node", d->node) &&
            cJSON_AddStringToObject(o, "target", d->target) &&
            cJSON_AddStringToObject(o, "base", d->base) &&
            cJSON_AddStringToObject(o, "decision", decision);
  if (ok && d->offset != 0) ok = cJSON_AddNumberToObject(o, "offset", (double)d->offset);
  if (ok && cJSON_AddItemToObject(o, "reasons", reasons)) {
    reasons = NULL;
    for (int r = 0; ok && r < VL_REASON_COUNT; r++) {
      if (d->reasons & (1u << r)) {
        ok = cJSON_AddItemToArray(cJSON_GetObjectItem(o, "reasons"),
                                  cJSON_CreateString(vl_reason_name((vl_reason)r)));
      }
    }
    ok = ok && cJSON_AddStringToObject(o, "message", d->message);
  } else {
    ok = false;
  }
  cJSON_Delete(reasons);
  if (!ok) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

static cJSON *order_json(const uint8_t *order, uint8_t rank) {
  cJSON *a = cJSON_CreateArray();
  for (uint8_t k = 0; a != NULL && k < rank; k++) {
    cJSON *v = cJSON_CreateNumber(order[k]);
    if (!cJSON_AddItemToArray(a, v)) {
      cJSON_Delete(v);
      cJSON_Delete(a);
      return NULL;
    }
  }
  return a;
}

static cJSON *param_layout_json(const vl_param_layout *e) {
  cJSON *o = cJSON_CreateObject();
  bool ok = o && cJSON_AddStringToObject(o, "node", e->node) &&
            cJSON_AddItemToObject(o, "dim_order", order_json(e->dim_order, e->rank)) &&
            cJSON_AddItemToObject(o, "was", order_json(e->was, e->rank)) &&
            cJSON_AddNumberToObject(o, "nbytes", (double)e->nbytes) &&
            cJSON_AddNumberToObject(o, "aliased", e->aliased);
  if (ok) return o;
  cJSON_Delete(o);
  return NULL;
}

static cJSON *param_kept_json(const vl_param_kept *e) {
  cJSON *o = cJSON_CreateObject();
  bool ok = o && cJSON_AddStringToObject(o, "node", e->node);
  cJSON *rules = ok ? cJSON_AddArrayToObject(o, "reasons") : NULL;
  ok = ok && rules;
  for (int k = 0; ok && k < VL_PARAM_RULE_COUNT; k++) {
    if (e->rules & (1u << k)) {
      ok = cJSON_AddItemToArray(rules, cJSON_CreateString(vl_param_rule_name((vl_param_rule)k)));
    }
  }
  cJSON *blockers = ok ? cJSON_AddArrayToObject(o, "blockers") : NULL;
  ok = ok && blockers;
  for (uint32_t k = 0; ok && k < e->n_blockers; k++) {
    cJSON *b = cJSON_CreateObject();
    ok = b && cJSON_AddStringToObject(b, "node", e->blockers[k].node) &&
         cJSON_AddStringToObject(b, "reason", vl_param_rule_name(e->blockers[k].rule));
    if (ok) ok = cJSON_AddItemToArray(blockers, b);
    if (!ok) cJSON_Delete(b);
  }
  ok = ok && cJSON_AddStringToObject(o, "message", e->message ? e->message : "");
  if (ok) return o;
  cJSON_Delete(o);
  return NULL;
}

static bool add_params(cJSON *o, const vl_report *r) {
  if (!r->params_ran) return true;
  if (!cJSON_AddNumberToObject(o, "params_relaid", r->params_relaid)) return false;
  cJSON *list = cJSON_AddArrayToObject(o, "param_layouts");
  for (uint32_t i = 0; list && i < r->params_relaid; i++) {
    cJSON *e = param_layout_json(&r->param_layouts[i]);
    if (!cJSON_AddItemToArray(list, e)) {
      cJSON_Delete(e);
      return false;
    }
  }
  cJSON *kept = list ? cJSON_AddArrayToObject(o, "params_not_relaid") : NULL;
  for (uint32_t i = 0; kept && i < r->n_params_kept; i++) {
    cJSON *e = param_kept_json(&r->params_kept[i]);
    if (!cJSON_AddItemToArray(kept, e)) {
      cJSON_Delete(e);
      return false;
    }
  }
  return kept != NULL;
}

static bool add_plan(cJSON *o, const vl_plan_report *p) {
  if (!p->present) return true;
  cJSON *plan = cJSON_AddObjectToObject(o, "plan");
  return plan && cJSON_AddNumberToObject(plan, "arena_bytes", (double)p->arena_bytes) &&
         cJSON_AddNumberToObject(plan, "lower_bound_bytes", (double)p->lower_bound_bytes) &&
         cJSON_AddNumberToObject(plan, "naive_bytes", (double)p->naive_bytes) &&
         cJSON_AddNumberToObject(plan, "planned", p->planned) &&
         cJSON_AddNumberToObject(plan, "alignment", (double)p->alignment);
}

cJSON *vl_report_to_json(const vl_report *r) {
  cJSON *o = cJSON_CreateObject();
  bool ok = o && cJSON_AddNumberToObject(o, "view_copy_nodes", r->view_copy_nodes) &&
            cJSON_AddNumberToObject(o, "replaced", r->replaced) &&
            cJSON_AddNumberToObject(o, "kept", r->kept) &&
            cJSON_AddNumberToObject(o, "normalized", r->normalized) &&
            cJSON_AddNumberToObject(o, "removed_dead", r->removed_dead) &&
            cJSON_AddNumberToObject(o, "bytes_saved", (double)r->bytes_saved) &&
            cJSON_AddNumberToObject(o, "layout_copy_nodes", r->layout_copy_nodes) &&
            cJSON_AddNumberToObject(o, "merged", r->merged) &&
            cJSON_AddNumberToObject(o, "bytes_copied", (double)r->bytes_copied);
  cJSON *list = ok ? cJSON_AddArrayToObject(o, "decisions") : NULL;
  ok = list != NULL;
  for (uint32_t i = 0; ok && i < r->n_decisions; i++) {
    cJSON *d = decision_to_json(&r->decisions[i]);
    ok = d && cJSON_AddItemToArray(list, d);
    if (!ok) cJSON_Delete(d);
  }
  ok = ok && add_params(o, r) && add_plan(o, &r->plan);
  if (!ok) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

/* The options, their defaults and their JSON form live here with the report, so the passes
 * (lower.c, fold.c) call into this file and never the other way. */
void vl_lower_options_default(vl_lower_options *o) {
  o->remove_view_copy = true;
  o->policy = VL_POLICY_SAFE;
  o->fold = true;
  o->param_layouts = true;
  o->plan = false;
  o->plan_alignment = 16;
}

/* An option given as null is the same as absent (protocol.md: an optional member). */
static const cJSON *option(const cJSON *opts, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(opts, key);
  return cJSON_IsNull(v) ? NULL : v;
}

static vl_status bool_option(const cJSON *opts, const char *key, bool *out, vl_error *err) {
  const cJSON *v = option(opts, key);
  if (v == NULL) return VL_OK;
  if (!cJSON_IsBool(v)) {
    char path[32];
    snprintf(path, sizeof path, "/%s", key);
    return vl_error_set(err, VL_ERR_INVALID_PARAMS, path, "must be true or false");
  }
  *out = cJSON_IsTrue(v);
  return VL_OK;
}

vl_status vl_lower_options_from_json(const cJSON *opts, vl_lower_options *out, vl_error *err) {
  static const char *const keys[] = {"remove_view_copy", "policy",        "fold",
                                     "param_layouts",    "plan", "plan_alignment", NULL};
  vl_lower_options o;
  vl_lower_options_default(&o);
  if (opts != NULL && !cJSON_IsNull(opts)) {
    if (!cJSON_IsObject(opts)) {
      return vl_error_set(err, VL_ERR_INVALID_PARAMS, "", "must be an object");
    }
    vl_status st = vl__json_check_keys(opts, keys, NULL, "", VL_ERR_INVALID_PARAMS, err);
    if (st != VL_OK) return st;
    const cJSON *pol = option(opts, "policy");
    if ((st = bool_option(opts, "remove_view_copy", &o.remove_view_copy, err)) != VL_OK) return st;
    if ((st = bool_option(opts, "fold", &o.fold, err)) != VL_OK) return st;
    if ((st = bool_option(opts, "param_layouts", &o.param_layouts, err)) != VL_OK) return st;
    if ((st = bool_option(opts, "plan", &o.plan, err)) != VL_OK) return st;
    const cJSON *align = option(opts, "plan_alignment");
    if (align != NULL) {
      double a = cJSON_IsNumber(align) ? align->valuedouble : 0;
      int64_t v = a >= 1 && a <= VL_PLAN_MAX_ALIGNMENT ? (int64_t)a : 0;
      if (v == 0 || (double)v != a || (v & (v - 1)) != 0) {
        return vl_error_set(err, VL_ERR_INVALID_PARAMS, "/plan_alignment",
                            "must be a power of two from 1 to %d", VL_PLAN_MAX_ALIGNMENT);
      }
      o.plan_alignment = v;
    }
    if (pol != NULL) {
      if (cJSON_IsString(pol) && strcmp(pol->valuestring, "safe") == 0) {
        o.policy = VL_POLICY_SAFE;
      } else if (cJSON_IsString(pol) && strcmp(pol->valuestring, "legacy") == 0) {
        o.policy = VL_POLICY_LEGACY;
      } else {
        return vl_error_set(err, VL_ERR_INVALID_PARAMS, "/policy",
                            "must be \"safe\" or \"legacy\"");
      }
    }
  }
  *out = o;
  return VL_OK;
}

#include "viewlower/layout.h"
/* lower_report.c - reason codes, decision messages for people, the report as JSON, and the
#include "viewlower/layout.h"
 * lowering options from JSON. */
#include "viewlower/layout.h"
#include <stdarg.h>
#include "viewlower/layout.h"
#include <stdio.h>
#include "viewlower/layout.h"
#include <stdlib.h>
#include "viewlower/layout.h"
#include <string.h>
#include "viewlower/layout.h"

#include "viewlower/layout.h"
#include "graph/graph_internal.h"
#include "viewlower/layout.h"
#include "base/json_util.h"
#include "viewlower/layout.h"
#include "lower/lower_internal.h"
#include "viewlower/layout.h"

#include "viewlower/layout.h"
static const char *const reason_names[] = {
#include "viewlower/layout.h"
#define ROW(e, name) name,
#include "viewlower/layout.h"
    VL_REASON_MAP(ROW)
#include "viewlower/layout.h"
#undef ROW
#include "viewlower/layout.h"
};
#include "viewlower/layout.h"

#include "viewlower/layout.h"
const char *vl_reason_name(vl_reason r) {
#include "viewlower/layout.h"
  return (unsigned)r < VL_REASON_COUNT ? reason_names[r] : "?";
#include "viewlower/layout.h"
}
#include "viewlower/layout.h"

#include "viewlower/layout.h"
/* A bounded string builder: appends are truncated, never overflow. */
#include "viewlower/layout.h"
typedef struct {
#include "viewlower/layout.h"
  char buf[768];
#include "viewlower/layout.h"
  size_t len;
#include "viewlower/layout.h"
} text;
#include "viewlower/layout.h"

#include "viewlower/layout.h"
static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#include "viewlower/layout.h"
static void put(text *t, const char *fmt, ...) {
#include "viewlower/layout.h"
  if (t->len >= sizeof t->buf - 1) return;
#include "viewlower/layout.h"
  va_list ap;
#include "viewlower/layout.h"
  va_start(ap, fmt);
#include "viewlower/layout.h"
  int n = vsnprintf(t->buf + t->len, sizeof t->buf - t->len, fmt, ap);
#include "viewlower/layout.h"
  va_end(ap);
#include "viewlower/layout.h"
  if (n > 0) t->len += (size_t)n < sizeof t->buf - t->len ? (size_t)n : sizeof t->buf - t->len - 1;
#include "viewlower/layout.h"
}
#include "viewlower/layout.h"

#include "viewlower/layout.h"
static void put_list(text *t, const int64_t *v, uint8_t n) {
#include "viewlower/layout.h"
  put(t, "[");
#include "viewlower/layout.h"
  for (uint8_t i = 0; i < n; i++) put(t, i ? ",%lld" : "%lld", (long long)v[i]);
#include "viewlower/layout.h"
  put(t, "]");
#include "viewlower/layout.h"
}
#include "viewlower/layout.h"

#include "viewlower/layout.h"
static void put_order(text *t, const vl_spec *s) {
#include "viewlower/layout.h"
  int64_t o[VL_MAX_RANK];
#include "viewlower/layout.h"
  for (uint8_t i = 0; i < s->rank; i++) o[i] = s->dim_order[i];
#include "viewlower/layout.h"
  put_list(t, o, s->rank);
#include "viewlower/layout.h"
}
#include "viewlower/layout.h"

#include "viewlower/layout.h"
static void put_layout_reason(text *t, const vl_node *view, const vl_node *base, uint32_t reasons) {
#include "viewlower/layout.h"
  if (reasons & (1u << VL_REASON_BASE_LAYOUT)) {
#include "viewlower/layout.h"
    put(t, "base %s has dim_order ", base->name);
#include "viewlower/layout.h"
    put_order(t, &base->val);
#include "viewlower/layout.h"
  } else {
#include "viewlower/layout.h"
    put(t, "%s is declared with dim_order ", view->name);
#include "viewlower/layout.h"
    put_order(t, &view->val);
#include "viewlower/layout.h"
  }
#include "viewlower/layout.h"
  put(t, "; viewing it as ");
#include "viewlower/layout.h"
  if (vl_layout_is_default_order(&view->val)) {
#include "viewlower/layout.h"
    put(t, "contiguous ");
#include "viewlower/layout.h"
  } else {
#include "viewlower/layout.h"
    put(t, "dim_order ");
#include "viewlower/layout.h"
    put_order(t, &view->val);
#include "viewlower/layout.h"
    put(t, " ");
#include "viewlower/layout.h"
  }
#include "viewlower/layout.h"
  put_list(t, view->val.shape, view->val.rank);
#include "viewlower/layout.h"
  put(t, " would reorder elements");
#include "viewlower/layout.h"
}
#include "viewlower/layout.h"

#include "viewlower/layout.h"
static const char *name_of(const vl_graph *g, uint32_t i) {
#include "viewlower/layout.h"
  return i == VL_NO_NODE ? "?" : g->nodes[i].name;
#include "viewlower/layout.h"
}
#include "viewlower/layout.h"

#include "viewlower/layout.h"
static void put_reason(text *t, const vl_graph *g, uint32_t v, vl_reason r, uint32_t reasons,
#include "viewlower/layout.h"
                       const lower_facts *f) {
#include "viewlower/layout.h"
  const vl_node *view = &g->nodes[v];
#include "viewlower/layout.h"
  const vl_node *base = &g->nodes[view->args[0].u.ref];
#include "viewlower/layout.h"
  if (t->len > 0) put(t, "; ");
#include "viewlower/layout.h"
  switch (r) {
#include "viewlower/layout.h"
  case VL_REASON_DISABLED: put(t, "remove_view_copy is off"); break;
#include "viewlower/layout.h"
  case VL_REASON_FEEDS_OUTPUT:
#include "viewlower/layout.h"
    put(t, "%s is a graph output (its storage may be swapped at run time)", view->name);
#include "viewlower/layout.h"
    break;
#include "viewlower/layout.h"
  case VL_REASON_BASE_LAYOUT: put_layout_reason(t, view, base, reasons); break;
#include "viewlower/layout.h"
  case VL_REASON_VIEW_LAYOUT:
#include "viewlower/layout.h"
    if (!(reasons & (1u << VL_REASON_BASE_LAYOUT)))
#include "viewlower/layout.h"
      put_layout_reason(t, view, base, reasons);
#include "viewlower/layout.h"
    else
#include "viewlower/layout.h"
      put(t, "and the view's own dim_order is not contiguous either");
#include "viewlower/layout.h"
    break;
#include "viewlower/layout.h"
  case VL_REASON_VIEW_MUTATED:
#include "viewlower/layout.h"
    put(t, "%s writes through the view %s", name_of(g, f->view_writer), view->name);
#include "viewlower/layout.h"
    break;
#include "viewlower/layout.h"
  case VL_REASON_BASE_MUTATED:
#include "viewlower/layout.h"
    put(t, "%s writes the storage of base %s while %s still reads the view",
#include "viewlower/layout.h"
        name_of(g, f->base_writer), base->name, name_of(g, f->last_read));
#include "viewlower/layout.h"
    break;
#include "viewlower/layout.h"
  case VL_REASON_BASE_MUTABLE_INPUT:
#include "viewlower/layout.h"
    put(t, "the storage of base %s belongs to %s, an input the program mutates", base->name,
#include "viewlower/layout.h"
        name_of(g, f->owner));
#include "viewlower/layout.h"
    break;
#include "viewlower/layout.h"
  case VL_REASON_BASE_FEEDS_OUTPUT:
#include "viewlower/layout.h"
    put(t,
#include "viewlower/layout.h"
        "the storage of base %s is a graph output (it may be swapped at run time, leaving "
#include "viewlower/layout.h"
        "the alias stale)",
#include "viewlower/layout.h"
        base->name);
#include "viewlower/layout.h"
    break;
#include "viewlower/layout.h"
  case VL_REASON_DYNAMIC_SHAPE:
#include "viewlower/layout.h"
    put(t, "base %s is %s but the view is %s", base->name, base->val.dynamic ? "dynamic" : "static",
#include "viewlower/layout.h"
        view->val.dynamic ? "dynamic" : "static");
#include "viewlower/layout.h"
    break;
#include "viewlower/layout.h"
  case VL_REASON_COUNT: break;
#include "viewlower/layout.h"
  }
#include "viewlower/layout.h"
}
#include "viewlower/layout.h"

#include "viewlower/layout.h"
vl_status vl__decision_init(vl_decision *d, const vl_graph *g, uint32_t v, uint32_t reasons,
#include "viewlower/layout.h"
                            const lower_facts *f) {
#include "viewlower/layout.h"
  const vl_node *view = &g->nodes[v];
#include "viewlower/layout.h"
  const vl_node *base = &g->nodes[view->args[0].u.ref];
#include "viewlower/layout.h"
  text t = {.len = 0};
#include "viewlower/layout.h"
  t.buf[0] = '\0';
#include "viewlower/layout.h"
  for (int r = 0; r < VL_REASON_COUNT; r++)
#include "viewlower/layout.h"
    if (reasons & (1u << r)) put_reason(&t, g, v, (vl_reason)r, reasons, f);
#include "viewlower/layout.h"
  if (reasons == 0) {
#include "viewlower/layout.h"
    int64_t nbytes = 0;
#include "viewlower/layout.h"
    vl_spec_nbytes(&view->val, &nbytes);
#include "viewlower/layout.h"
    put(&t,
#include "viewlower/layout.h"
        "aliases %s: every element keeps its memory offset and nothing writes the storage "
#include "viewlower/layout.h"
        "while the view is read; saves %lld bytes",
#include "viewlower/layout.h"
        name_of(g, f->owner), (long long)nbytes);
#include "viewlower/layout.h"
  }
#include "viewlower/layout.h"
  d->node = strdup(view->name);
#include "viewlower/layout.h"
  d->base = strdup(base->name);
#include "viewlower/layout.h"
  d->message = strdup(t.buf);
#include "viewlower/layout.h"
  d->replaced = reasons == 0;
#include "viewlower/layout.h"
  d->reasons = reasons;
#include "viewlower/layout.h"
  if (d->node && d->base && d->message) return VL_OK;
#include "viewlower/layout.h"
  free(d->node);
#include "viewlower/layout.h"
  free(d->base);
#include "viewlower/layout.h"
  free(d->message);
#include "viewlower/layout.h"
  memset(d, 0, sizeof *d);
#include "viewlower/layout.h"
  return VL_ERR_NOMEM;
#include "viewlower/layout.h"
}
#include "viewlower/layout.h"

#include "viewlower/layout.h"
void vl_report_clear(vl_report *r) {
#include "viewlower/layout.h"
  if (r == NULL) return;
#include "viewlower/layout.h"
  for (uint32_t i = 0; i < r->n_decisions; i++) {
#include "viewlower/layout.h"
    free(r->decisions[i].node);
#include "viewlower/layout.h"
    free(r->decisions[i].base);
#include "viewlower/layout.h"
    free(r->decisions[i].message);
#include "viewlower/layout.h"
  }
#include "viewlower/layout.h"
  free(r->decisions);
#include "viewlower/layout.h"
  memset(r, 0, sizeof *r);
#include "viewlower/layout.h"
}
#include "viewlower/layout.h"

#include "viewlower/layout.h"
static cJSON *decision_to_json(const vl_decision *d) {
#include "viewlower/layout.h"
  cJSON *o = cJSON_CreateObject();
#include "viewlower/layout.h"
  cJSON *reasons = cJSON_CreateArray();
#include "viewlower/layout.h"
  bool ok = o && reasons && cJSON_AddStringToObject(o, "node", d->node) &&
#include "viewlower/layout.h"
            cJSON_AddStringToObject(o, "base", d->base) &&
#include "viewlower/layout.h"
            cJSON_AddStringToObject(o, "decision", d->replaced ? "replaced" : "kept");
#include "viewlower/layout.h"
  if (ok && cJSON_AddItemToObject(o, "reasons", reasons)) {
#include "viewlower/layout.h"
    reasons = NULL;
#include "viewlower/layout.h"
    for (int r = 0; ok && r < VL_REASON_COUNT; r++)
#include "viewlower/layout.h"
      if (d->reasons & (1u << r))
#include "viewlower/layout.h"
        ok = cJSON_AddItemToArray(cJSON_GetObjectItem(o, "reasons"),
#include "viewlower/layout.h"
                                  cJSON_CreateString(vl_reason_name((vl_reason)r)));
#include "viewlower/layout.h"
    ok = ok && cJSON_AddStringToObject(o, "message", d->message);
#include "viewlower/layout.h"
  } else {
#include "viewlower/layout.h"
    ok = false;
#include "viewlower/layout.h"
  }
#include "viewlower/layout.h"
  cJSON_Delete(reasons);
#include "viewlower/layout.h"
  if (!ok) {
#include "viewlower/layout.h"
    cJSON_Delete(o);
#include "viewlower/layout.h"
    return NULL;
#include "viewlower/layout.h"
  }
#include "viewlower/layout.h"
  return o;
#include "viewlower/layout.h"
}
#include "viewlower/layout.h"

#include "viewlower/layout.h"
cJSON *vl_report_to_json(const vl_report *r) {
#include "viewlower/layout.h"
  cJSON *o = cJSON_CreateObject();
#include "viewlower/layout.h"
  bool ok = o && cJSON_AddNumberToObject(o, "view_copy_nodes", r->view_copy_nodes) &&
#include "viewlower/layout.h"
            cJSON_AddNumberToObject(o, "replaced", r->replaced) &&
#include "viewlower/layout.h"
            cJSON_AddNumberToObject(o, "kept", r->kept) &&
#include "viewlower/layout.h"
            cJSON_AddNumberToObject(o, "normalized", r->normalized) &&
#include "viewlower/layout.h"
            cJSON_AddNumberToObject(o, "removed_dead", r->removed_dead) &&
#include "viewlower/layout.h"
            cJSON_AddNumberToObject(o, "bytes_saved", (double)r->bytes_saved);
#include "viewlower/layout.h"
  cJSON *list = ok ? cJSON_AddArrayToObject(o, "decisions") : NULL;
#include "viewlower/layout.h"
  ok = list != NULL;
#include "viewlower/layout.h"
  for (uint32_t i = 0; ok && i < r->n_decisions; i++) {
#include "viewlower/layout.h"
    cJSON *d = decision_to_json(&r->decisions[i]);
#include "viewlower/layout.h"
    ok = d && cJSON_AddItemToArray(list, d);
#include "viewlower/layout.h"
    if (!ok) cJSON_Delete(d);
#include "viewlower/layout.h"
  }
#include "viewlower/layout.h"
  if (!ok) {
#include "viewlower/layout.h"
    cJSON_Delete(o);
#include "viewlower/layout.h"
    return NULL;
#include "viewlower/layout.h"
  }
#include "viewlower/layout.h"
  return o;
#include "viewlower/layout.h"
}
#include "viewlower/layout.h"

#include "viewlower/layout.h"
vl_status vl_lower_options_from_json(const cJSON *opts, vl_lower_options *out, vl_error *err) {
#include "viewlower/layout.h"
  static const char *const keys[] = {"remove_view_copy", "policy", NULL};
#include "viewlower/layout.h"
  vl_lower_options o;
#include "viewlower/layout.h"
  vl_lower_options_default(&o);
#include "viewlower/layout.h"
  if (opts != NULL && !cJSON_IsNull(opts)) {
#include "viewlower/layout.h"
    if (!cJSON_IsObject(opts))
#include "viewlower/layout.h"
      return vl_error_set(err, VL_ERR_INVALID_PARAMS, "", "must be an object");
#include "viewlower/layout.h"
    vl_status st = vl__json_check_keys(opts, keys, NULL, "", VL_ERR_INVALID_PARAMS, err);
#include "viewlower/layout.h"
    if (st != VL_OK) return st;
#include "viewlower/layout.h"
    const cJSON *rvc = cJSON_GetObjectItemCaseSensitive(opts, "remove_view_copy");
#include "viewlower/layout.h"
    const cJSON *pol = cJSON_GetObjectItemCaseSensitive(opts, "policy");
#include "viewlower/layout.h"
    if (rvc != NULL && !cJSON_IsBool(rvc))
#include "viewlower/layout.h"
      return vl_error_set(err, VL_ERR_INVALID_PARAMS, "/remove_view_copy", "must be true or false");
#include "viewlower/layout.h"
    if (rvc != NULL) o.remove_view_copy = cJSON_IsTrue(rvc);
#include "viewlower/layout.h"
    if (pol != NULL) {
#include "viewlower/layout.h"
      if (cJSON_IsString(pol) && strcmp(pol->valuestring, "safe") == 0)
#include "viewlower/layout.h"
        o.policy = VL_POLICY_SAFE;
#include "viewlower/layout.h"
      else if (cJSON_IsString(pol) && strcmp(pol->valuestring, "legacy") == 0)
#include "viewlower/layout.h"
        o.policy = VL_POLICY_LEGACY;
#include "viewlower/layout.h"
      else
#include "viewlower/layout.h"
        return vl_error_set(err, VL_ERR_INVALID_PARAMS, "/policy",
#include "viewlower/layout.h"
                            "must be \"safe\" or \"legacy\"");
#include "viewlower/layout.h"
    }
#include "viewlower/layout.h"
  }
#include "viewlower/layout.h"
  *out = o;
#include "viewlower/layout.h"
  return VL_OK;
#include "viewlower/layout.h"
}

/* graph_print.c - vl_graph back to graph JSON, written straight into a growing buffer (no
 * cJSON tree): every literal exactly (integers with their digits, floats shortest round trip
 * as float tokens, non-finite floats as {"float": ...}), every val in full (dtype, shape,
 * dim_order, dynamic when true), placeholders with their kind, memory.view nodes with alias_of
 * when known, multi-output nodes with vals. The output parses to an equal graph, and its text
 * is what cJSON_PrintUnformatted printed of the same graph before (key order, escaping). */
#include <math.h>
#include <stdlib.h>

#include "base/json_write.h"
#include "graph/graph_internal.h"

static const char *const kind_names[] = {"user_input", "parameter", "buffer", "constant"};
static const char *const op_names[] = {"placeholder", "call_function", "output"};

static void put_float(vl__jw *w, double f) {
  if (isnan(f)) {
    VL__JW_LIT(w, "{\"float\":\"nan\"}");
  } else if (isinf(f)) {
    vl__jw_raw(w, f < 0 ? "{\"float\":\"-inf\"}" : "{\"float\":\"inf\"}", f < 0 ? 16 : 15);
  } else {
    vl__jw_float(w, f);
  }
}

static void put_arg(vl__jw *w, const vl_graph *g, const vl_arg *a) {
  switch (a->kind) {
  case VL_ARG_NULL: VL__JW_LIT(w, "null"); return;
  case VL_ARG_BOOL:
    if (a->u.b) {
      VL__JW_LIT(w, "true");
    } else {
      VL__JW_LIT(w, "false");
    }
    return;
  case VL_ARG_INT: vl__jw_int(w, a->u.i); return;
  case VL_ARG_FLOAT: put_float(w, a->u.f); return;
  case VL_ARG_STRING: vl__jw_str(w, a->u.s); return;
  case VL_ARG_REF: vl__jw_str(w, g->nodes[a->u.ref].name); return;
  case VL_ARG_LIST: break;
  }
  vl__jw_char(w, '[');
  for (uint32_t i = 0; i < a->count; i++) {
    if (i > 0) vl__jw_char(w, ',');
    put_arg(w, g, &a->u.items[i]);
  }
  vl__jw_char(w, ']');
}

static void put_args(vl__jw *w, const vl_graph *g, const vl_node *n) {
  VL__JW_LIT(w, ",\"args\":[");
  for (uint32_t i = 0; i < n->n_args; i++) {
    if (i > 0) vl__jw_char(w, ',');
    put_arg(w, g, &n->args[i]);
  }
  vl__jw_char(w, ']');
}

static void put_ints(vl__jw *w, const int64_t *v, size_t n) {
  vl__jw_char(w, '[');
  for (size_t i = 0; i < n; i++) {
    if (i > 0) vl__jw_char(w, ',');
    vl__jw_int(w, v[i]);
  }
  vl__jw_char(w, ']');
}

/* {"dtype","shape","dim_order"[,"dynamic":true]}, as vl_spec_to_json prints it. */
static void put_spec(vl__jw *w, const vl_spec *s) {
  int64_t order[VL_MAX_RANK];
  for (uint8_t i = 0; i < s->rank; i++) order[i] = s->dim_order[i];
  VL__JW_LIT(w, "{\"dtype\":");
  vl__jw_str(w, vl_dtype_name(s->dtype));
  VL__JW_LIT(w, ",\"shape\":");
  put_ints(w, s->shape, s->rank);
  VL__JW_LIT(w, ",\"dim_order\":");
  put_ints(w, order, s->rank);
  if (s->dynamic) VL__JW_LIT(w, ",\"dynamic\":true");
  vl__jw_char(w, '}');
}

static void put_call_fields(vl__jw *w, const vl_graph *g, const vl_node *n) {
  VL__JW_LIT(w, ",\"target\":");
  vl__jw_str(w, n->target);
  put_args(w, g, n);
  if (n->n_kwargs > 0) {
    VL__JW_LIT(w, ",\"kwargs\":{");
    for (uint32_t i = 0; i < n->n_kwargs; i++) {
      if (i > 0) vl__jw_char(w, ',');
      vl__jw_str(w, n->kwargs[i].key);
      vl__jw_char(w, ':');
      put_arg(w, g, &n->kwargs[i].value);
    }
    vl__jw_char(w, '}');
  }
  if (n->n_mutates > 0) {
    VL__JW_LIT(w, ",\"mutates\":[");
    for (uint32_t i = 0; i < n->n_mutates; i++) {
      if (i > 0) vl__jw_char(w, ',');
      vl__jw_str(w, g->nodes[n->mutates[i]].name);
    }
    vl__jw_char(w, ']');
  }
  if (n->alias_of != VL_NO_NODE) {
    VL__JW_LIT(w, ",\"alias_of\":");
    vl__jw_str(w, g->nodes[n->alias_of].name);
  }
  if (n->offset != 0) {
    VL__JW_LIT(w, ",\"offset\":");
    vl__jw_int(w, n->offset);
  }
}

static void put_node(vl__jw *w, const vl_graph *g, const vl_node *n) {
  VL__JW_LIT(w, "{\"name\":");
  vl__jw_str(w, n->name);
  VL__JW_LIT(w, ",\"op\":");
  vl__jw_str(w, op_names[n->op]);
  if (n->op == VL_NODE_PLACEHOLDER) {
    VL__JW_LIT(w, ",\"kind\":");
    vl__jw_str(w, kind_names[n->kind]);
    if (n->mutated) VL__JW_LIT(w, ",\"mutated\":true");
  } else if (n->op == VL_NODE_CALL) {
    put_call_fields(w, g, n);
  } else {
    put_args(w, g, n);
  }
  if (n->has_val) {
    VL__JW_LIT(w, ",\"val\":");
    put_spec(w, n->val);
  }
  if (n->n_vals > 0) {
    VL__JW_LIT(w, ",\"vals\":[");
    for (uint32_t i = 0; i < n->n_vals; i++) {
      if (i > 0) vl__jw_char(w, ',');
      put_spec(w, &n->vals[i]);
    }
    vl__jw_char(w, ']');
  }
  if (n->has_mem_offset) {
    VL__JW_LIT(w, ",\"mem_offset\":");
    vl__jw_int(w, n->mem_offset);
  }
  vl__jw_char(w, '}');
}

vl_status vl_graph_write(const vl_graph *g, vl_buf *out) {
  size_t start = out->len;
  vl__jw w = {out, false};
  VL__JW_LIT(&w, "{\"format\":\"viewlower.graph\",\"version\":1");
  if (g->name != NULL) {
    VL__JW_LIT(&w, ",\"name\":");
    vl__jw_str(&w, g->name);
  }
  if (g->has_plan) {
    VL__JW_LIT(&w, ",\"plan\":{\"arena_bytes\":");
    vl__jw_int(&w, g->plan_arena_bytes);
    VL__JW_LIT(&w, ",\"alignment\":");
    vl__jw_int(&w, g->plan_alignment);
    vl__jw_char(&w, '}');
  }
  if (g->skip_dim_order) {
    VL__JW_LIT(&w, ",\"skip_dim_order\":true,\"nodes\":[");
  } else {
    VL__JW_LIT(&w, ",\"skip_dim_order\":false,\"nodes\":[");
  }
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    if (i > 0) vl__jw_char(&w, ',');
    put_node(&w, g, &g->nodes[i]);
  }
  VL__JW_LIT(&w, "]}");
  if (w.nomem) {
    out->len = start;
    return VL_ERR_NOMEM;
  }
  return VL_OK;
}

char *vl_graph_print(const vl_graph *g) {
  vl_buf b = {0};
  vl__jw w = {&b, false};
  /* About 150 bytes a node: one allocation up front instead of a dozen copying regrowths. */
  if (g->n_nodes > 64 && !vl__jw_grow(&w, (size_t)g->n_nodes * 160)) return NULL;
  if (vl_graph_write(g, &b) != VL_OK) {
    vl_buf_free(&b);
    return NULL;
  }
  return vl__jw_finish(&w, NULL);
}

cJSON *vl_graph_to_json(const vl_graph *g) {
  char *text = vl_graph_print(g);
  cJSON *raw = text != NULL ? cJSON_CreateRaw(text) : NULL;
  free(text);
  return raw;
}

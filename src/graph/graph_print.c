/* graph_print.c - vl_graph back to graph JSON. The output parses to an equal graph: every val
 * is printed in full (dtype, shape, dim_order, dynamic when true), placeholders name their kind,
 * and memory.view nodes carry alias_of when known. */
#include <stdlib.h>

#include "graph/graph_internal.h"
#include "viewlower/tensor_json.h"

static const char *const kind_names[] = {"user_input", "parameter", "buffer", "constant"};

static cJSON *arg_to_json(const vl_graph *g, const vl_arg *a) {
  switch (a->kind) {
  case VL_ARG_NULL: return cJSON_CreateNull();
  case VL_ARG_BOOL: return cJSON_CreateBool(a->u.b);
  case VL_ARG_INT: return cJSON_CreateNumber((double)a->u.i);
  case VL_ARG_FLOAT: return cJSON_CreateNumber(a->u.f);
  case VL_ARG_STRING: return cJSON_CreateString(a->u.s);
  case VL_ARG_REF: return cJSON_CreateString(g->nodes[a->u.ref].name);
  case VL_ARG_LIST: break;
  }
  cJSON *arr = cJSON_CreateArray();
  for (uint32_t i = 0; arr != NULL && i < a->u.list.count; i++) {
    cJSON *item = arg_to_json(g, &a->u.list.items[i]);
    if (item == NULL || !cJSON_AddItemToArray(arr, item)) {
      cJSON_Delete(item);
      cJSON_Delete(arr);
      return NULL;
    }
  }
  return arr;
}

/* Adds item under key, taking ownership; false (and item freed) on failure. */
static bool add(cJSON *obj, const char *key, cJSON *item) {
  if (item != NULL && cJSON_AddItemToObject(obj, key, item)) return true;
  cJSON_Delete(item);
  return false;
}

static bool add_args(const vl_graph *g, const vl_node *n, cJSON *obj) {
  cJSON *args = cJSON_CreateArray();
  for (uint32_t i = 0; args != NULL && i < n->n_args; i++) {
    cJSON *item = arg_to_json(g, &n->args[i]);
    if (item == NULL || !cJSON_AddItemToArray(args, item)) {
      cJSON_Delete(item);
      cJSON_Delete(args);
      return false;
    }
  }
  return add(obj, "args", args);
}

static bool add_call_fields(const vl_graph *g, const vl_node *n, cJSON *obj) {
  bool ok = add(obj, "target", cJSON_CreateString(n->target)) && add_args(g, n, obj);
  if (ok && n->n_kwargs > 0) {
    cJSON *kw = cJSON_CreateObject();
    ok = add(obj, "kwargs", kw);
    for (uint32_t i = 0; ok && i < n->n_kwargs; i++)
      ok = add(kw, n->kwargs[i].key, arg_to_json(g, &n->kwargs[i].value));
  }
  if (ok && n->n_mutates > 0) {
    cJSON *m = cJSON_CreateArray();
    ok = add(obj, "mutates", m);
    for (uint32_t i = 0; ok && i < n->n_mutates; i++)
      ok = cJSON_AddItemToArray(m, cJSON_CreateString(g->nodes[n->mutates[i]].name));
  }
  if (ok && n->alias_of != VL_NO_NODE)
    ok = add(obj, "alias_of", cJSON_CreateString(g->nodes[n->alias_of].name));
  return ok;
}

static cJSON *node_to_json(const vl_graph *g, const vl_node *n) {
  static const char *const ops[] = {"placeholder", "call_function", "output"};
  cJSON *obj = cJSON_CreateObject();
  bool ok = obj != NULL && add(obj, "name", cJSON_CreateString(n->name)) &&
            add(obj, "op", cJSON_CreateString(ops[n->op]));
  if (ok && n->op == VL_NODE_PLACEHOLDER) {
    ok = add(obj, "kind", cJSON_CreateString(kind_names[n->kind]));
    if (ok && n->mutated) ok = add(obj, "mutated", cJSON_CreateTrue());
  } else if (ok && n->op == VL_NODE_CALL) {
    ok = add_call_fields(g, n, obj);
  } else if (ok) {
    ok = add_args(g, n, obj);
  }
  if (ok && n->has_val) ok = add(obj, "val", vl_spec_to_json(&n->val));
  if (ok && n->n_vals > 0) {
    cJSON *vals = cJSON_CreateArray();
    ok = add(obj, "vals", vals);
    for (uint32_t i = 0; ok && i < n->n_vals; i++) {
      cJSON *v = vl_spec_to_json(&n->vals[i]);
      ok = v != NULL && cJSON_AddItemToArray(vals, v);
      if (!ok) cJSON_Delete(v);
    }
  }
  if (!ok) {
    cJSON_Delete(obj);
    return NULL;
  }
  return obj;
}

cJSON *vl_graph_to_json(const vl_graph *g) {
  cJSON *root = cJSON_CreateObject();
  bool ok = root != NULL && add(root, "format", cJSON_CreateString("viewlower.graph")) &&
            add(root, "version", cJSON_CreateNumber(1));
  if (ok && g->name != NULL) ok = add(root, "name", cJSON_CreateString(g->name));
  ok = ok && add(root, "skip_dim_order", cJSON_CreateBool(g->skip_dim_order));
  cJSON *nodes = ok ? cJSON_CreateArray() : NULL;
  ok = ok && add(root, "nodes", nodes);
  for (uint32_t i = 0; ok && i < g->n_nodes; i++) {
    cJSON *node = node_to_json(g, &g->nodes[i]);
    ok = node != NULL && cJSON_AddItemToArray(nodes, node);
    if (!ok) cJSON_Delete(node);
  }
  if (!ok) {
    cJSON_Delete(root);
    return NULL;
  }
  return root;
}

char *vl_graph_print(const vl_graph *g) {
  cJSON *root = vl_graph_to_json(g);
  if (root == NULL) return NULL;
  char *text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  return text;
}
